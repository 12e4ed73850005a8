//! The decision loop under events that once misled it, through the real binary on kubelet-layout
//! files: the annotations file missing for a moment, a restart with a reload owed, liveness pings
//! during the safety re-read, live settings changes, a corrected reload target, and settings that
//! must be refused.

use crate::common;

use common::*;
use std::os::unix::fs::symlink;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

fn promoted_version(d: &Dirs) -> Option<String> {
    read_promoted(&d.promoted()).and_then(|m| m.get("version").cloned())
}

fn wait_log(g: &Gate, what: &str) {
    wait_for(&format!("log line {what:?}"), DEADLINE, || {
        g.log_text().contains(what).then_some(())
    });
}

/// The downward-API volume is an AtomicWriter volume: a read can miss `annotations` for a moment.
/// Meanwhile the settings it gave stay in force, so a config it rejects is never promoted under the
/// flags' wider range; only a lasting absence (past 2 s) changes the settings, and it is reported.
#[test]
fn a_momentary_annotations_absence_keeps_the_settings_a_lasting_one_is_reported() {
    let d = Dirs::new();
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", "^2")]);
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", ">=2"]);
    g.wait_active("2.0.0");
    write_version(&d.watch(), "3.0.0");
    g.wait_candidate(Some("3.0.0"), "too-new");
    let link = d.podinfo().join("annotations");
    for round in 0..3 {
        // The kubelet's user-visible link gone for a moment, then back, as a swap can look to a reader.
        std::fs::remove_file(&link).unwrap();
        wait_for("the absence to be seen", DEADLINE, || {
            (g.log_text()
                .matches("keeping the settings in force")
                .count()
                > round)
                .then_some(())
        });
        symlink("..data/annotations", &link).unwrap();
        wait_for("the file to be read back", DEADLINE, || {
            (g.log_text().matches("annotations file back").count() > round).then_some(())
        });
        // Each swap of ..data is a change too.
        write_annotations(
            &d.podinfo(),
            &[("confgate.io/accepts", "^2"), ("round", &round.to_string())],
        );
    }
    let s = g.status();
    assert_eq!(s["accepts"], "^2", "{s}");
    assert_eq!(s["active"]["version"], "2.0.0", "{s}");
    assert_eq!(promoted_version(&d).as_deref(), Some("2.0.0"));
    let log = g.log_text();
    assert!(
        !log.lines()
            .any(|l| l.contains(" promoted ") && l.contains("3.0.0")),
        "3.0.0 promoted under other settings:\n{log}"
    );

    // A lasting absence: after the grace period, the flags' range applies and the check says why.
    std::fs::remove_file(&link).unwrap();
    let s = g.wait_active("3.0.0");
    assert_eq!(s["accepts"], ">=2");
    let (_, verbose) = get(g.port, "/readyz?verbose").unwrap();
    assert!(
        verbose.contains("absent (it existed) for over 2 s"),
        "{verbose}"
    );
    wait_log(&g, "annotations file still absent");
}

/// Killed while a reload is retried, confgate restarts, finds the marker next to the promoted dir
/// and reloads the content already in place; the marker is gone once the reload succeeds.
#[test]
fn a_reload_owed_survives_kill_9() {
    let d = Dirs::new();
    let sink = Sink::start(false);
    let url = sink.url();
    write_version(&d.watch(), "2.0.0");
    let mut g = Gate::start(&d, &["--accepts", "^2", "--reload", &url]);
    g.wait_active("2.0.0");
    // 503: busy, so retried (a 500 would be a refusal, which owes nothing).
    sink.code.store(503, Ordering::Relaxed);
    write_version(&d.watch(), "2.1.0");
    g.wait_active("2.1.0");
    wait_for("a failed reload attempt", DEADLINE, || {
        (sink.count() >= 1).then_some(())
    });
    let marker = d.promoted().join("..confgate_reload_owed");
    assert!(
        marker.symlink_metadata().is_ok(),
        "the marker is written before the switch"
    );
    g.kill();
    let before = sink.count();
    sink.code.store(200, Ordering::Relaxed);
    let g = Gate::start(&d, &["--accepts", "^2", "--reload", &url]);
    let s = g.wait_status("the owed reload to succeed", |s| {
        s["reload"]["last_result"] == "success"
    });
    assert!(sink.count() > before);
    assert_eq!(s["active"]["version"], "2.1.0");
    wait_for("the marker to be cleared", DEADLINE, || {
        (!marker.exists()).then_some(())
    });
}

/// The first promotion into an empty promoted dir is read by the component itself when it starts, so
/// no reload is owed for it; a start-up check is, to learn that the component runs it (then it is the
/// rollback base). With an HTTP target and no confirmation the check is the first contact: a POST,
/// looked for again quietly while the component is not up (pending, not a failure, not counted), whose
/// 2xx makes the first config applied. The next promotion reloads as usual.
#[test]
fn the_first_config_is_applied_at_the_first_contact_with_the_component() {
    let d = Dirs::new();
    let sink = Sink::start(false);
    write_version(&d.watch(), "2.0.0");
    // Nothing listens on the flag's target: the component is still starting.
    let g = Gate::start(
        &d,
        &["--accepts", "^2", "--reload", "http://127.0.0.1:9/reload"],
    );
    let s = g.wait_status("the start-up check to wait for the component", |s| {
        s["reload"]["last_result"] == "pending" && s["reload"]["last_error"].is_string()
    });
    assert!(s["applied"].is_null(), "{s}");
    assert_eq!(
        s["reload"]["last_reload_successful"],
        serde_json::Value::Null
    );
    assert_eq!(s["active"]["version"], "2.0.0");
    let m = get(g.port, "/metrics").unwrap().1;
    assert!(
        m.contains("confgate_reloads_total{result=\"failure\"} 0"),
        "{m}"
    );
    wait_log(&g, "the component is not reached yet");
    // The component is up (its address comes as the pod's annotation, as in a real pod).
    write_annotations(&d.podinfo(), &[("confgate.io/reload", &sink.url())]);
    let s = g.wait_status("the first config applied", |s| {
        s["applied"]["version"] == "2.0.0" && s["reload"]["last_result"] == "success"
    });
    assert_eq!(s["applied"]["sha256"], s["active"]["sha256"]);
    assert_eq!(sink.count(), 1);
    assert!(
        d.promoted()
            .join("..confgate_reload_owed")
            .symlink_metadata()
            .is_err()
    );
    write_version(&d.watch(), "2.0.1");
    g.wait_status("the reload of 2.0.1", |s| {
        s["applied"]["version"] == "2.0.1" && s["reload"]["last_result"] == "success"
    });
    assert_eq!(sink.count(), 2);
}

/// The safety re-read is a deadline: `/livez` polled many times a second must not postpone it. An
/// edit inside the timestamped dir makes no event on the watched dir; only the re-read sees it.
#[test]
fn liveness_pings_do_not_postpone_the_safety_re_read() {
    let d = Dirs::new();
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--resync-interval", "1s"]);
    g.wait_active("2.0.0");
    let stop = Arc::new(AtomicBool::new(false));
    let pings = Arc::new(AtomicU64::new(0));
    let pinger = {
        let (stop, pings, port) = (stop.clone(), pings.clone(), g.port);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if get(port, "/livez").is_some() {
                    pings.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Pinging many times a second before the edit and all through the wait: a ping that moved the
    // deadline would keep the re-read from ever coming.
    wait_for("the client to be pinging", DEADLINE, || {
        (pings.load(Ordering::Relaxed) >= 10).then_some(())
    });
    // Written in place under ..data: no event on the (non-recursive) watched dir.
    std::fs::write(d.watch().join("..data").join("version"), "2.0.9").unwrap();
    let seen = std::time::Instant::now();
    g.wait_active("2.0.9");
    stop.store(true, Ordering::Relaxed);
    pinger.join().unwrap();
    assert!(seen.elapsed() < Duration::from_secs(5));
}

/// Settings changes judge the active config again: observe to enforce, or a narrower range, makes a
/// config that now fails not active and not ready, as a restart with the same settings says; a newer
/// accepted config is then promoted.
#[test]
fn a_settings_change_re_judges_the_active_config() {
    let d = Dirs::new();
    write_annotations(&d.podinfo(), &[("confgate.io/mode", "observe")]);
    write_version(&d.watch(), "3.0.0");
    let mut g = Gate::start(&d, &["--accepts", "^2"]);
    let s = g.wait_active("3.0.0");
    assert_eq!(s["ready"], true);
    write_annotations(&d.podinfo(), &[("confgate.io/mode", "enforce")]);
    let live = g.wait_status("enforce to take the config out", |s| {
        s["mode"] == "enforce" && s["active"].is_null()
    });
    assert_eq!(live["ready"], false);
    assert_eq!(get(g.port, "/readyz").unwrap().0, 503);
    g.kill();
    let g = Gate::start(&d, &["--accepts", "^2"]);
    let again = g.wait_status("the restart to judge", |s| s["candidate"].is_object());
    assert_eq!(
        (&again["ready"], &again["reason"], &again["active"]),
        (&live["ready"], &live["reason"], &live["active"])
    );

    // Narrowing: ^2 accepts 2.5.0; ~2.4 does not; then 2.4.3 is promoted.
    write_annotations(&d.podinfo(), &[]);
    write_version(&d.watch(), "2.5.0");
    g.wait_active("2.5.0");
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", "~2.4")]);
    let s = g.wait_status("the narrower range to apply", |s| {
        s["accepts"] == "~2.4" && s["active"].is_null()
    });
    assert_eq!(s["ready"], false);
    write_version(&d.watch(), "2.4.3");
    g.wait_active("2.4.3");
    assert_eq!(promoted_version(&d).as_deref(), Some("2.4.3"));
}

/// Retries of a failing reload go to the target in force: fixing the target annotation takes
/// effect without a new promotion.
#[test]
fn a_corrected_reload_target_takes_effect_without_a_new_promotion() {
    let d = Dirs::new();
    let good = Sink::start(false);
    let bad = Sink::start(false);
    // 503: busy, not a judgement of the config, so it is retried (a 500 would be a rejection).
    bad.code.store(503, Ordering::Relaxed);
    write_annotations(&d.podinfo(), &[("confgate.io/reload", &bad.url())]);
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2"]);
    g.wait_active("2.0.0");
    write_version(&d.watch(), "2.0.1");
    g.wait_status("the reload to fail", |s| {
        s["reload"]["last_result"] == "failure"
    });
    write_annotations(&d.podinfo(), &[("confgate.io/reload", &good.url())]);
    let s = g.wait_status("the reload to reach the corrected target", |s| {
        s["reload"]["last_result"] == "success"
    });
    assert_eq!(good.count(), 1);
    assert_eq!(s["active"]["version"], "2.0.1");
    assert_eq!(promoted_version(&d).as_deref(), Some("2.0.1"));
}

/// A FIFO in place of the annotations file does not hang the loop (it is reported without taking
/// readiness); a non-UTF-8 value in another annotation does not discard confgate's.
#[test]
fn an_annotations_fifo_does_not_hang_and_a_bad_other_value_keeps_ours() {
    let d = Dirs::new();
    let file = d.podinfo().join("annotations");
    nix::unistd::mkfifo(&file, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2"]);
    let s = g.wait_active("2.0.0");
    // Reported in the settings check; the flags' settings are in force and the config is good.
    assert_eq!(s["ready"], true, "{s}");
    assert!(
        s["checks"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{s}"
    );
    assert_eq!(get(g.port, "/livez").unwrap().0, 200);
    drop(g);
    std::fs::remove_file(&file).unwrap();
    let mut text = b"confgate.io/accepts=\"^3\"\nnotes=\"".to_vec();
    text.extend_from_slice(&[0xff, 0xfe]);
    text.extend_from_slice(b"\"\nother=\"\\xff\"");
    kubelet_write(&d.podinfo(), &[("annotations", &text)]);
    write_version(&d.watch(), "3.0.0");
    let g = Gate::start(&d, &["--accepts", "^2"]);
    let s = g.wait_active("3.0.0");
    assert_eq!((&s["accepts"], &s["ready"]), (&"^3".into(), &true.into()));
}

/// Settings that cannot work are refused at start with exit 64, naming the setting; a bad reload
/// URL's password is never printed.
#[test]
fn settings_that_cannot_work_are_refused_naming_the_setting() {
    let d = Dirs::new();
    std::fs::create_dir_all(d.watch()).unwrap();
    let file = d.root.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let watch = d.watch().display().to_string();
    let inside = d.watch().join("out").display().to_string();
    let parent = d.root.path().display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--resync-interval".into(), "0s".into()],
            "--resync-interval",
        ),
        (
            vec!["--resync-interval".into(), "5ms".into()],
            "--resync-interval",
        ),
        (vec!["--promote-to".into(), watch.clone()], "--promote-to"),
        (vec!["--promote-to".into(), inside], "--promote-to"),
        (vec!["--promote-to".into(), parent], "--promote-to"),
        (
            vec!["--promote-to".into(), file.display().to_string()],
            "--promote-to",
        ),
        (
            vec![
                "--reload".into(),
                "http://admin:hunter2secret@/reload".into(),
            ],
            "--reload",
        ),
    ];
    for (args, setting) in cases {
        let log = d.root.path().join("refused.log");
        let mut child = Command::new(BIN)
            .arg("run")
            .args(["--watch", &watch, "--listen", "127.0.0.1:0"])
            .args(["--annotations", "/nonexistent/annotations"])
            .args(&args)
            .env_remove("CONFGATE_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        // A setting accepted by mistake runs on: the deadline turns that into a failure, not a hang.
        let status = wait_exit(&mut child, "confgate to refuse the setting", DEADLINE);
        let err = std::fs::read_to_string(&log).unwrap();
        assert_eq!(status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains(setting), "{args:?}: {err}");
        assert!(!err.contains("hunter2secret"), "{args:?}: {err}");
    }
    let (_, ann_err) = {
        let a = confgate::annotations::Annotations::from([(
            "confgate.io/reload".to_owned(),
            "https://u:hunter2secret@:1/reload".to_owned(),
        )]);
        let base = confgate::settings::Settings::from_raw(&Default::default()).unwrap();
        let r = confgate::settings::Settings::with_annotations(&base, &base, &a);
        (r.settings, r.problems.join("; "))
    };
    assert!(
        ann_err.contains("credentials removed") && !ann_err.contains("hunter2secret"),
        "{ann_err}"
    );
}
