//! The example component of the manifests: it loads the promoted config and reloads it on `POST /reload`
//! and on SIGHUP, the two reload targets confgate drives, and reports its reloads in metrics whose
//! success time is in whole seconds, which confgate's confirmation reads.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{DEADLINE, Dirs, Gate, Reaped, get, http, kubelet_write, wait_for, write_annotations};

/// The example component's binary: a `[[bin]]` target (feature `example-component`) that cargo builds
/// before it runs the integration tests, so it is never stale and no test runs cargo.
fn component_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_component"))
}

fn config(version: &str) -> Vec<u8> {
    format!("schemaVersion: {version}\ngreeting: hello\n").into_bytes()
}

/// Starts the component on port 0 and reads the port it bound from its announcement.
fn start(dir: &Path) -> (Reaped, u16) {
    let (child, port, _) = start_reading(dir, "2.4.1");
    (child, port)
}

/// [`start`] on a config of `version`, handing back the rest of its output, line by line.
fn start_reading(dir: &Path, version: &str) -> (Reaped, u16, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(component_bin())
        .arg(dir)
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let child = Reaped(child);
    // Its first lines say what it loaded and where it listens (bound before it says so); the reader
    // drains the rest so it never blocks on stdout.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || {
        rx.recv_timeout(DEADLINE)
            .expect("a line from the component")
    };
    assert_eq!(
        next(),
        format!("loaded config version {version} (start-up)")
    );
    let second = next();
    let port = second
        .strip_prefix("listening on ")
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .unwrap_or_else(|| panic!("not a listening line: {second}"))
        .port();
    // Serving means its signal handler is installed too (both start in the same first poll), which
    // `sighup_reloads` relies on: SIGHUP's default action would end it.
    wait_for("the component to serve", DEADLINE, || {
        get(port, "/config-version")
    });
    (child, port, rx)
}

fn version(port: u16) -> String {
    let (code, body) = get(port, "/config-version").unwrap();
    assert_eq!(code, 200);
    body.trim().to_owned()
}

/// `POST /reload` is what picks up a newly promoted config; nothing else does.
#[test]
fn post_reload_picks_up_a_newly_promoted_config() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("active");
    kubelet_write(&dir, &[("config.yaml", &config("2.4.1"))]);
    let (_child, port) = start(&dir);
    assert_eq!(version(port), "2.4.1");

    kubelet_write(&dir, &[("config.yaml", &config("2.5.0"))]);
    assert_eq!(
        version(port),
        "2.4.1",
        "the component reloads only when told"
    );

    let (code, body) = http("POST", port, "/reload").unwrap();
    assert_eq!((code, body.trim()), (200, "2.5.0"));
    assert_eq!(version(port), "2.5.0");
}

/// A config it cannot read is refused with 500 and the one in use stays.
#[test]
fn unreadable_config_is_refused_and_the_old_one_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("active");
    kubelet_write(&dir, &[("config.yaml", &config("2.4.1"))]);
    let (_child, port) = start(&dir);

    kubelet_write(&dir, &[("config.yaml", b"greeting: no version\n")]);
    let (code, body) = http("POST", port, "/reload").unwrap();
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("no schemaVersion"), "{body}");
    assert_eq!(version(port), "2.4.1");
}

/// SIGHUP, the `signal:HUP:component` reload target, also reloads.
#[test]
fn sighup_reloads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("active");
    kubelet_write(&dir, &[("config.yaml", &config("2.4.1"))]);
    let (child, port) = start(&dir);

    kubelet_write(&dir, &[("config.yaml", &config("2.6.0"))]);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.0.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    wait_for("the component to load 2.6.0 after SIGHUP", DEADLINE, || {
        (version(port) == "2.6.0").then_some(())
    });
}

/// Without a config it refuses to start: the start-up ordering confgate provides is what it relies on.
#[test]
fn refuses_to_start_without_a_config() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(component_bin())
        .arg(tmp.path().join("absent"))
        .arg("127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Unix second of the component's last successful load, from its metrics.
fn last_success(port: u16) -> u64 {
    let (_, body) = get(port, "/metrics").unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix("component_config_last_reload_success_timestamp_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no success time in {body}"))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// confgate confirms a reload through the component's metrics, whose success time is in whole
/// seconds (as VictoriaMetrics reports it): the update is applied after one reload, not retried.
#[test]
fn a_whole_second_success_time_confirms_an_update_after_one_reload() {
    let d = Dirs::new();
    kubelet_write(&d.watch(), &[("config.yaml", &config("2.4.1"))]);
    let mut g = Gate::start(
        &d,
        &[
            "--accepts",
            "^2",
            "--version-from",
            "yaml:config.yaml#/schemaVersion",
        ],
    );
    g.wait_active("2.4.1");
    // The component starts on the promoted dir; its address comes as the pod's annotations.
    let (_child, port, lines) = start_reading(&d.promoted(), "2.4.1");
    let reload = format!("http://127.0.0.1:{port}/reload");
    let confirm = format!(
        "http://127.0.0.1:{port}/metrics#component_config_last_reload_successful,component_config_last_reload_success_timestamp_seconds"
    );
    write_annotations(
        &d.podinfo(),
        &[
            ("confgate.io/confirm", &confirm),
            ("confgate.io/reload", &reload),
        ],
    );
    // A start-up load in the second of the promotion cannot be told from one before it: then the
    // start-up check reloads, and that reload may need a second try.
    g.deadline = std::time::Duration::from_secs(30);
    g.wait_status("2.4.1 applied", |s| s["applied"]["version"] == "2.4.1");
    // The update goes out in a later second than the last load: one reload must be enough.
    let before = last_success(port);
    wait_for("the next second", DEADLINE, || {
        (unix_now() > before).then_some(())
    });
    while lines.try_recv().is_ok() {}
    kubelet_write(&d.watch(), &[("config.yaml", &config("2.5.0"))]);
    g.deadline = DEADLINE;
    g.wait_status("2.5.0 confirmed", |s| {
        s["applied"]["version"] == "2.5.0" && s["reload"]["last_result"] == "success"
    });
    let first = lines.recv_timeout(DEADLINE).expect("the component's load");
    let more: Vec<String> = lines.try_iter().collect();
    assert_eq!(first, "loaded config version 2.5.0 (POST /reload)");
    assert!(more.is_empty(), "one reload, not retried: {more:?}");
}
