//! Build facts and link options for the `confgate` binary.
//!
//! `confgate --version` names the commit (and the cargo features built in), so an operator can tell
//! which image a pod runs: the commit is `git rev-parse HEAD` (or `CONFGATE_GIT_COMMIT`, for a build
//! from a tree without `.git`), `unknown` when neither gives one.
//!
//! On Linux with glibc the executable is position-independent, so the loader patches every pointer in
//! its tables at each start: 24,000 relocations of 24 bytes each, 0.6 MB of the binary, read on every
//! start (and `confgate probe` starts every few seconds in every pod). `-z pack-relative-relocs`
//! stores them as a bitmap (DT_RELR, glibc 2.36 and binutils 2.38 or later) a fraction of the size.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CONFGATE_GIT_COMMIT");
    let commit = std::env::var("CONFGATE_GIT_COMMIT")
        .ok()
        .filter(|c| is_commit(c))
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=CONFGATE_GIT_COMMIT={commit}");

    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The checked-out commit, or None outside a git work tree (a source archive, a Docker context
/// without `.git`) or without git. Rebuilt when HEAD moves: a commit, a checkout, a reset.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"]).filter(|c| is_commit(c))?;
    // HEAD itself (a checkout) and the branch it names (a commit); in a linked worktree both live
    // outside the tree, so ask git where.
    for path in ["HEAD", "packed-refs"] {
        watch(git(&["rev-parse", "--git-path", path]));
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&["rev-parse", "--git-path", &branch]));
    }
    Some(commit.chars().take(12).collect())
}

/// Reruns the build script when the file changes; only a file that exists (cargo reruns every build
/// for a missing one, and an unpacked repository has no `packed-refs`).
fn watch(path: Option<String>) {
    if let Some(p) = path.filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={p}");
    }
}

/// A commit as git prints it: hex digits, so nothing odd reaches the version line.
fn is_commit(c: &str) -> bool {
    (7..=40).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit())
}
