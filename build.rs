//! Link options for the `confgate` binary.
//!
//! On Linux with glibc the executable is position-independent, so the loader patches every pointer in
//! its tables at each start: 24,000 relocations of 24 bytes each, 0.6 MB of the binary, read on every
//! start (and `confgate probe` starts every few seconds in every pod). `-z pack-relative-relocs`
//! stores them as a bitmap (DT_RELR, glibc 2.36 and binutils 2.38 or later) a fraction of the size.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
