//! The default listen address is dual-stack: the probes answer on IPv4 and IPv6 loopback alike.

use crate::common;

use std::time::Duration;

use clap::Parser as _;
use confgate::cli::{Cli, Command};

#[test]
fn the_default_listen_address_is_dual_stack() {
    let Ok(Cli {
        command: Command::Run(args),
    }) = Cli::try_parse_from(["confgate", "run"])
    else {
        panic!("`confgate run` parses");
    };
    assert_eq!(args.listen.to_string(), "[::]:9797");
}

#[test]
fn a_wildcard_ipv6_listener_answers_ipv4_and_ipv6() {
    assert!(
        std::net::TcpListener::bind("[::1]:0").is_ok(),
        "this test needs an IPv6 loopback (::1), as a pod network has"
    );
    // Port 0 and the log line, so parallel tests never fight over 9797.
    let dirs = common::Dirs::new();
    let log = dirs.log();
    let mut child = std::process::Command::new(common::BIN)
        .args([
            "run",
            "--listen",
            "[::]:0",
            "--accepts",
            ">=1.0.0",
            "--watch",
        ])
        .arg(dirs.watch())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let port: u16 = common::wait_for("the listen line", Duration::from_secs(10), || {
        let text = std::fs::read_to_string(&log).ok()?;
        let at = text.find("addr=[::]:")? + "addr=[::]:".len();
        text[at..].split_whitespace().next()?.parse().ok()
    });
    for addr in [format!("127.0.0.1:{port}"), format!("[::1]:{port}")] {
        let out = std::process::Command::new(common::BIN)
            .args(["probe", "live", "--addr", &addr])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "probe on {addr}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
