//! `cargo run --example demo`, as a test: the demo's own code, compiled in here so it runs the
//! `confgate` binary cargo built for the tests, in a child test process whose output is read back. It
//! must show each step (the blocked start, the gate, the hold, the refusal and its rollback, the
//! variants) and exit 0.

use std::process::Command;
use std::time::{Duration, Instant};

#[path = "../../examples/demo.rs"]
mod example;

/// The demo itself; run by [`the_demo_shows_every_step_and_exits_zero`] in a child process.
#[test]
#[ignore = "run as a child of the_demo_shows_every_step_and_exits_zero"]
fn demo_child() {
    example::main().unwrap();
}

#[test]
fn the_demo_shows_every_step_and_exits_zero() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "demo::demo_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Generous for a loaded machine: the demo takes about a second on an idle one.
    let end = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("the demo did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for shown in [
        // The gate: no start on a config outside the range, then the start once it is corrected.
        "Startup probe failed: no accepted config yet: newest config 3.0.0 is too-new",
        "the component starts and reads 2.4.1 from the promoted dir",
        // The hold.
        "holding 2.4.1; 3.0.0 is too-new",
        "reload reached the component: it now runs `schemaVersion: \"2.5.0\"`",
        // The refusal, and the rollback.
        "the component answers the reload of it 422",
        "rolled back: the promoted dir holds 2.5.0 again",
        "confgate_candidates_total{verdict=\"rejected-by-component\"} 1",
        "msg=\"rejected by the component; rolled back\"",
        // Variants, and check per range.
        "variant config.v3.yaml (of 2): version 3.0.0 is in >=3.0.0, <4.0.0",
        "(exit 1: no variant serves >=2.4.0, <3.0.0 any more",
        "confgate stopped on SIGTERM (exit status: 0)",
    ] {
        assert!(
            stdout.contains(shown),
            "the demo did not show {shown:?}:\n{stdout}\n{stderr}"
        );
    }
}

/// The nested build the demo starts gets none of the variables `cargo run` set for the example,
/// `OUT_DIR` included: with it, ring's build script reran and the re-run rebuilt the TLS stack (20 s).
#[test]
fn the_demos_nested_build_drops_what_cargo_run_set() {
    for name in [
        "OUT_DIR",
        "CARGO_PKG_VERSION",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        assert!(example::set_by_cargo_run(name), "{name}");
    }
    for name in [
        "CARGO",
        "PATH",
        "CARGO_TARGET_DIR",
        "CARGO_HOME",
        "RUSTFLAGS",
    ] {
        assert!(!example::set_by_cargo_run(name), "{name}");
    }
}
