//! The command line as an operator meets it: help text, `probe` addressing and its held-back line,
//! `check --name`, and clear usage errors (exit 64, printed once) for a port in use or no kubeconfig.

mod common;

use std::process::{Command, Output};

use common::{BIN, Dirs, Gate, write_version};

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("CONFGATE_PROBE_ADDR")
        .env_remove("CONFGATE_LISTEN")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_marks_annotation_settings_and_check_lists_only_its_own() {
    for cmd in ["run", "wait"] {
        let help = text(&run(&[cmd, "--help"]).stdout);
        for ann in confgate::settings::known_annotations() {
            assert!(
                help.contains(&format!("[annotation {ann}]")),
                "{ann} not marked in {cmd}:\n{help}"
            );
        }
    }
    let check = text(&run(&["check", "--help"]).stdout);
    for used in [
        "--accepts",
        "--version-from",
        "--require",
        "--rule ",
        "--rules-file",
        "--variants",
        "--name",
    ] {
        assert!(check.contains(used), "{used} missing:\n{check}");
    }
    for unused in ["--reload", "--on-incompatible", "--mode", "--confirm"] {
        assert!(!check.contains(unused), "{unused} listed:\n{check}");
    }
    assert!(
        !check.contains("[annotation"),
        "check reads no annotations:\n{check}"
    );
    let probe = text(&run(&["probe", "--help"]).stdout);
    assert!(
        probe.contains("--timeout")
            && probe.contains("CONFGATE_PROBE_ADDR")
            && probe.contains("CONFGATE_LISTEN"),
        "{probe}"
    );
}

#[test]
fn probe_says_what_is_held_follows_listen_and_takes_a_url() {
    let d = Dirs::new();
    write_version(&d.watch(), "2.4.1");
    let g = Gate::start(&d, &["--accepts", ">=2.4.0 <3.0.0"]);
    g.wait_active("2.4.1");
    write_version(&d.watch(), "3.0.0");
    g.wait_candidate(Some("3.0.0"), "too-new");
    let url = format!("http://127.0.0.1:{}/", g.port);
    let out = run(&["probe", "ready", "--addr", &url]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "holding 2.4.1; 3.0.0 is too-new\n");
    // No --addr: loopback at the port the sidecar was told to listen on.
    let out = Command::new(BIN)
        .args(["probe", "live"])
        .env_remove("CONFGATE_PROBE_ADDR")
        .env("CONFGATE_LISTEN", format!("[::]:{}", g.port))
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "ok\n".into())
    );
    let out = run(&["probe", "live", "--addr", "http://http://127.0.0.1:9797"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        text(&out.stderr).contains("HOST:PORT"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_port_in_use_is_a_usage_error_said_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let d = Dirs::new();
    let out = Command::new(BIN)
        .args(["run", "--accepts", "^1", "--listen", &addr, "--watch"])
        .arg(d.watch())
        .env("CONFGATE_LOG", "info")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = text(&out.stderr);
    assert_eq!(err.matches("cannot listen on").count(), 1, "{err}");
    assert!(err.contains("--listen"), "{err}");
}

#[cfg(feature = "api")]
#[test]
fn a_missing_kubeconfig_is_a_usage_error_said_once() {
    let d = Dirs::new();
    let out = Command::new(BIN)
        .args(["status", "-n", "default"])
        .env_clear()
        .env("KUBECONFIG", d.root.path().join("no-such-kubeconfig"))
        .env("HOME", d.root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("kubeconfig"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn check_selects_configmaps_by_name() {
    let d = Dirs::new();
    let file = d.root.path().join("all.yaml");
    std::fs::write(
        &file,
        "kind: ConfigMap\nmetadata: {name: app, namespace: prod}\ndata: {version: 2.4.1}\n---\n\
         kind: ConfigMap\nmetadata: {name: unrelated}\ndata: {other: x}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let all = run(&["check", "--accepts", "^2", f]);
    assert_eq!(all.status.code(), Some(1), "the unrelated one fails");
    let one = run(&["check", "--accepts", "^2", "--name", "app", f]);
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stdout));
    assert_eq!(text(&one.stdout).lines().count(), 1);
    let typo = run(&["check", "--accepts", "^2", "--name", "ap", f]);
    assert_eq!(typo.status.code(), Some(64));
    assert!(text(&typo.stderr).contains("no ConfigMap named ap"));
}
