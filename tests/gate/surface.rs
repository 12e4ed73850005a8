//! What operators and components meet: endpoints in each state, metrics, reloads, probe, wait, logs.

use crate::common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

/// Each endpoint in the blocked, ready and stale states, `?verbose`, and unknown paths and methods.
#[test]
fn endpoints_by_state() {
    let d = Dirs::new();
    write_version(&d.watch(), "5.0.0");
    let g = Gate::start(&d, &["--accepts", "^4"]);
    g.wait_candidate(Some("5.0.0"), "too-new");
    // Blocked: nothing accepted yet.
    let (code, body) = get(g.port, "/readyz").unwrap();
    assert_eq!(code, 503);
    assert_eq!(body.lines().count(), 1, "one-line reason: {body}");
    assert!(
        body.contains("no accepted config yet: newest config 5.0.0 is too-new"),
        "{body}"
    );
    assert_eq!(get(g.port, "/startupz").unwrap().0, 503);
    assert_eq!(get(g.port, "/livez").unwrap(), (200, "ok\n".into()));
    let (code, body) = get(g.port, "/readyz?verbose").unwrap();
    assert_eq!(code, 503);
    assert!(
        body.contains("[+]settings ok")
            && body.contains("[-]config failed")
            && body.ends_with("readyz check failed\n"),
        "{body}"
    );
    let s = g.status();
    assert!(s["active"].is_null());
    assert_eq!(s["candidate"]["verdict"], "too-new");

    // Ready.
    write_version(&d.watch(), "4.1.0");
    g.wait_active("4.1.0");
    assert_eq!(get(g.port, "/readyz").unwrap(), (200, "ok\n".into()));
    assert_eq!(get(g.port, "/startupz").unwrap(), (200, "ok\n".into()));
    let (code, body) = get(g.port, "/readyz?verbose").unwrap();
    assert_eq!(code, 200);
    assert!(
        body.contains("[+]config ok: active 4.1.0") && body.ends_with("readyz check passed\n"),
        "{body}"
    );

    // Stale under hold: ready, reported.
    write_version(&d.watch(), "6.0.0");
    let s = g.wait_candidate(Some("6.0.0"), "too-new");
    assert_eq!(
        (s["ready"].clone(), s["stale"].clone()),
        (true.into(), true.into())
    );
    assert!(
        get(g.port, "/readyz?verbose")
            .unwrap()
            .1
            .contains("[+]newest ok: holding 4.1.0; 6.0.0 is too-new")
    );
    let since = s["active"]["since"].as_str().unwrap();
    assert!(since.parse::<jiff::Timestamp>().is_ok(), "{since}");
    // The same body, typed: hashes and times, and the one wording of what is held.
    let typed = g.typed_status();
    let active = typed.active.as_ref().unwrap();
    assert_eq!(
        active.sha256.to_string(),
        s["active"]["sha256"].as_str().unwrap()
    );
    assert_eq!(active.since.to_string(), since);
    assert_eq!(
        confgate::state::Holding::of(&typed).unwrap().to_string(),
        "holding 4.1.0; 6.0.0 is too-new"
    );

    assert_eq!(get(g.port, "/nope").unwrap().0, 404);
    assert_eq!(http("POST", g.port, "/readyz").unwrap().0, 405);
    let m = get(g.port, "/metrics").unwrap().1;
    assert!(
        m.contains("confgate_ready 1") && m.contains("confgate_stale 1"),
        "{m}"
    );
    assert!(
        m.contains("confgate_active_config_info{version=\"4.1.0\",sha256=\"sha256:"),
        "{m}"
    );
}

/// A bad value of every `confgate.io/` setting, and an unknown annotation, set live while a good
/// config is in force: each is reported (`[!]settings warning` in `?verbose`, the probe's line,
/// `/status`'s checks, `confgate_settings_problems`), the value in force before it is kept, and
/// readiness stays with the config (a typo took readiness before, and one in `version-from` was said
/// to re-judge the running config).
#[test]
fn a_bad_annotation_of_any_setting_is_reported_and_never_takes_readiness() {
    let bad: &[(&str, &str)] = &[
        ("confgate.io/accepts", "three or so"),
        ("confgate.io/version-from", "yaml:config.yaml#schemaVersion"),
        ("confgate.io/require", "config.yaml,../up"),
        ("confgate.io/reload", "ftp://127.0.0.1/reload"),
        ("confgate.io/on-incompatible", "maybe"),
        ("confgate.io/mode", "yolo"),
        ("confgate.io/rules", "config.yaml +"),
        ("confgate.io/confirm", "nope"),
        ("confgate.io/variants", "nope"),
        ("confgate.io/reload-spread", "forever"),
        ("confgate.io/validate", "exec:relative/checker"),
        ("confgate.io/validate-timeout", "1ms"),
        ("confgate.io/trial", "a while"),
        ("confgate.io/acepts", "^2"),
    ];
    // Every setting's annotation is in the table: a setting added later is covered or this fails.
    for setting in confgate::settings::SETTINGS {
        assert!(
            bad.iter().any(|(k, _)| *k == setting.annotation),
            "no bad value for {} in this table",
            setting.annotation
        );
    }
    let d = Dirs::new();
    kubelet_write(
        &d.watch(),
        &[("config.yaml", b"schemaVersion: 2.1.0\nname: a\n")],
    );
    let good = [
        ("confgate.io/accepts", "^2"),
        (
            "confgate.io/version-from",
            "yaml:config.yaml#/schemaVersion",
        ),
    ];
    write_annotations(&d.podinfo(), &good);
    let g = Gate::start(&d, &[]);
    g.wait_active("2.1.0");
    for (key, value) in bad {
        let mut pairs = good.to_vec();
        pairs.retain(|(k, _)| k != key);
        pairs.push((key, value));
        write_annotations(&d.podinfo(), &pairs);
        let s = g.wait_status(&format!("{key} reported"), |s| {
            s["checks"][0]["ok"] == false
        });
        assert_eq!(s["ready"], true, "{key}: {s}");
        assert_eq!(s["active"]["version"], "2.1.0", "{key}: {s}");
        assert_eq!(s["accepts"], "^2", "{key}: the range in force stays: {s}");
        let message = s["checks"][0]["message"].as_str().unwrap();
        assert!(message.contains(key), "{key}: {message}");
        assert!(!message.contains("secret"), "{message}");
        let (code, body) = get(g.port, "/readyz?verbose").unwrap();
        assert_eq!(code, 200, "{key}: {body}");
        assert!(body.contains("[!]settings warning: "), "{key}: {body}");
        assert!(body.contains("[+]config ok: active 2.1.0"), "{key}: {body}");
        assert_eq!(get(g.port, "/readyz").unwrap(), (200, "ok\n".into()));
        let (code, line) = get(g.port, "/readyz?line").unwrap();
        assert_eq!(code, 200);
        assert!(
            line.starts_with("ok; settings: ") && line.contains(key),
            "{key}: {line}"
        );
        let m = get(g.port, "/metrics").unwrap().1;
        assert!(m.contains("confgate_settings_problems 1"), "{key}: {m}");
        assert!(m.contains("confgate_ready 1"), "{key}: {m}");
        // Fixed: reported as cleared.
        write_annotations(&d.podinfo(), &good);
        g.wait_status(&format!("{key} cleared"), |s| s["checks"][0]["ok"] == true);
    }
    // A change of content is still judged under the values in force.
    write_annotations(
        &d.podinfo(),
        &[
            ("confgate.io/accepts", "^2"),
            ("confgate.io/version-from", "yaml:config.yaml#schemaVersion"),
        ],
    );
    g.wait_status("the typo reported", |s| s["checks"][0]["ok"] == false);
    kubelet_write(
        &d.watch(),
        &[("config.yaml", b"schemaVersion: 2.2.0\nname: b\n")],
    );
    let s = g.wait_active("2.2.0");
    assert_eq!(s["ready"], true, "{s}");
}

/// After a restart no earlier value is known in memory: a bad annotation keeps the value last in force
/// before it, read back from the promoted dir's record, not the flag's. A malformed
/// `confgate.io/version-from` with no flag fell back to `file:version`, re-judged the promoted config
/// invalid and dropped readiness. A record rewritten with values an annotation may not give (a checker
/// the spec does not name, a reload to another host) or made a FIFO is not trusted, never fatal.
#[test]
fn a_restart_with_a_bad_annotation_keeps_the_value_last_in_force() {
    let d = Dirs::new();
    kubelet_write(
        &d.watch(),
        &[("config.yaml", b"schemaVersion: 2.1.0\nname: a\n")],
    );
    let good = [
        ("confgate.io/accepts", "^2"),
        (
            "confgate.io/version-from",
            "yaml:config.yaml#/schemaVersion",
        ),
    ];
    write_annotations(&d.podinfo(), &good);
    let mut g = Gate::start(&d, &[]);
    let before = g.wait_active("2.1.0");
    let record = d.promoted().join("..confgate_settings");
    wait_for("the settings in force recorded", DEADLINE, || {
        std::fs::read_to_string(&record)
            .ok()
            .filter(|t| t.contains("yaml:config.yaml#/schemaVersion"))
    });
    g.kill();
    let typo = [
        ("confgate.io/accepts", "^2"),
        ("confgate.io/version-from", "yaml:config.yaml#schemaVersion"),
    ];
    write_annotations(&d.podinfo(), &typo);
    let g = Gate::start(&d, &[]);
    let s = g.wait_status("the typo reported", |s| {
        s["checks"][0]["ok"] == false && !s["active"].is_null()
    });
    assert_eq!(s["ready"], true, "{s}");
    assert_eq!(s["active"]["version"], "2.1.0", "{s}");
    assert_eq!(s["active"]["sha256"], before["active"]["sha256"], "{s}");
    let message = s["checks"][0]["message"].as_str().unwrap();
    assert!(message.contains("confgate.io/version-from"), "{message}");
    assert_eq!(get(g.port, "/readyz").unwrap(), (200, "ok\n".into()));
    let (_, line) = get(g.port, "/readyz?line").unwrap();
    assert!(line.starts_with("ok; settings: "), "{line}");
    // A new config is judged under the value kept.
    kubelet_write(
        &d.watch(),
        &[("config.yaml", b"schemaVersion: 2.2.0\nname: b\n")],
    );
    g.wait_active("2.2.0");
    // The record still holds the value in force, not the typo.
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(
        text.contains("yaml:config.yaml#/schemaVersion") && !text.contains("#schemaVersion"),
        "{text}"
    );
    drop(g);

    // A record the component rewrote: a checker the spec does not name, a reload to another host,
    // and the version pointer. Each value is checked again as an annotation would be: the first two
    // are not used, the pointer is.
    std::fs::write(
        &record,
        "confgate.io/reload=\"http://198.51.100.7/reload\"\n\
         confgate.io/validate=\"exec:/bin/sh -c {dir}\"\n\
         confgate.io/version-from=\"yaml:config.yaml#/schemaVersion\"",
    )
    .unwrap();
    let g = Gate::start(&d, &[]);
    let s = g.wait_status("the typo reported again", |s| {
        s["checks"][0]["ok"] == false && !s["active"].is_null()
    });
    assert_eq!(s["ready"], true, "{s}");
    assert_eq!(s["active"]["version"], "2.2.0", "{s}");
    assert_eq!(s["reload"]["target"], "none", "{s}");
    let log = g.log_text();
    assert!(
        log.contains("names a checker the container spec does not")
            && log.contains("sends reloads to a host the container spec does not name"),
        "{log}"
    );
    drop(g);

    // Not a record at all (a FIFO): set aside, the flag's value used, start-up not held.
    std::fs::remove_file(&record).unwrap();
    nix::unistd::mkfifo(&record, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let g = Gate::start(&d, &[]);
    let s = g.wait_status("the typo judged under the flag's value", |s| {
        s["checks"][0]["ok"] == false && s["candidate"]["verdict"] == "invalid"
    });
    assert!(s["active"].is_null(), "{s}");
    assert!(g.log_text().contains("set aside"), "{}", g.log_text());
    assert!(
        std::fs::symlink_metadata(d.promoted().join("..confgate_settings.bad"))
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()))
    );
}

/// `/livez` is a heartbeat of the decision loop, not a constant: a server whose loop never answers
/// fails. The server runs on a thread of its own (`server::spawn`, as `confgate run` starts it): while
/// the loop's thread is held by a blocking call, `/readyz` and `/status` answer with the status last
/// published, `/livez` fails, and it passes again once the loop is back. Stopping drains and ends it.
#[test]
fn livez_fails_when_the_decision_loop_is_stuck() {
    let shared = confgate::state::Shared::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = confgate::server::spawn(listener, shared.clone(), async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    })
    .unwrap();
    // No decision loop answers pings.
    let (code, body) = get(port, "/livez").unwrap();
    assert_eq!(code, 503);
    assert!(
        body.contains("the decision loop did not answer within 500 ms"),
        "{body}"
    );

    // A loop on a thread and runtime of its own, as `confgate run`'s: it publishes a ready status and
    // answers pings, until it is handed a hold, which blocks its thread until the hold is released.
    let publisher = shared.publisher().unwrap();
    publisher.publish(confgate::state::Status {
        ready: true,
        started: true,
        reason: "active 1.0.0".into(),
        ..Default::default()
    });
    let (hold_tx, mut holds) =
        tokio::sync::mpsc::unbounded_channel::<std::sync::mpsc::Receiver<()>>();
    let (held_tx, held) = std::sync::mpsc::channel::<()>();
    let looping = shared.clone();
    let decision_loop = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            loop {
                tokio::select! {
                    () = looping.pinged() => looping.pong(),
                    hold = holds.recv() => match hold {
                        Some(release) => {
                            held_tx.send(()).unwrap();
                            // Blocks the loop's thread, as a write onto a stalled disk does.
                            let _ = release.recv();
                        }
                        None => break,
                    },
                }
            }
        });
    });
    assert_eq!(get(port, "/livez").unwrap(), (200, "ok\n".into()));

    let (release, on_release) = std::sync::mpsc::channel::<()>();
    hold_tx.send(on_release).unwrap();
    held.recv().unwrap();
    assert_eq!(get(port, "/readyz").unwrap(), (200, "ok\n".into()));
    let s = status(port).expect("/status answers while the loop is held");
    assert_eq!(s["ready"], true, "{s}");
    let (code, body) = get(port, "/livez").unwrap();
    assert_eq!(code, 503, "the loop is held: {body}");
    assert!(body.contains("decision loop did not answer"), "{body}");

    release.send(()).unwrap();
    wait_for("/livez to pass once the loop is back", DEADLINE, || {
        get(port, "/livez").filter(|(c, _)| *c == 200)
    });
    drop(hold_tx);
    decision_loop.join().unwrap();

    // Stopping ends the server's thread once it has drained; no connection is accepted after.
    stop_tx.send(true).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(DEADLINE, server.ended())
                .await
                .expect("the server ends once stopped");
        });
    assert_eq!(get(port, "/livez"), None, "the listener is closed");
}

/// A live scrape passes `promtool check metrics`.
#[test]
fn metrics_pass_promtool() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let sink = Sink::watching(d.promoted());
    let g = Gate::start(&d, &["--accepts", "^1", "--reload", &sink.url()]);
    g.wait_active("1.0.0");
    // The first promotion into an empty promoted dir owes no reload, only a start-up check: with an
    // HTTP target, a first POST, which the sink answers. A second promotion is reloaded.
    write_version(&d.watch(), "1.0.1");
    g.wait_active("1.0.1");
    write_version(&d.watch(), "2.0.0");
    g.wait_candidate(Some("2.0.0"), "too-new");
    g.wait_status("the reload of 1.0.1", |s| {
        s["applied"]["version"] == "1.0.1" && s["reload"]["last_result"] == "success"
    });
    let body = get(g.port, "/metrics").unwrap().1;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) must be installed: .ci/run installs it");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        body.contains("confgate_reloads_total{result=\"success\"} 2"),
        "{body}"
    );
    assert!(
        body.contains("confgate_reload_duration_seconds_count 2"),
        "{body}"
    );
}

/// A failing target delays nothing, is retried with growing delays, shows failure then success.
#[test]
fn reload_failure_then_recovery() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let sink = Sink::watching(d.promoted());
    let g = Gate::start(&d, &["--accepts", "^1", "--reload", &sink.url()]);
    g.wait_active("1.0.0");
    // The first promotion into an empty promoted dir owes no reload, only a start-up check: with an
    // HTTP target, a first POST, which the sink answers. A second promotion is reloaded.
    write_version(&d.watch(), "1.0.1");
    g.wait_active("1.0.1");
    g.wait_status("the reload of 1.0.1", |s| {
        s["applied"]["version"] == "1.0.1" && s["reload"]["last_result"] == "success"
    });
    // From here the target fails: every attempt below belongs to the 1.1.0 promotion.
    // 503: the component is busy, not refusing the config (a refusal is not retried).
    sink.code.store(503, Ordering::Relaxed);
    let before = sink.count();
    write_version(&d.watch(), "1.1.0");
    // Promotion goes on while the target fails.
    g.wait_active("1.1.0");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "1.1.0");
    let s = g.wait_status("reload failure reported", |s| {
        s["reload"]["last_result"] == "failure"
    });
    assert!(
        s["reload"]["last_error"]
            .as_str()
            .unwrap()
            .contains("answered 503"),
        "{s}"
    );
    wait_for("three attempts", DEADLINE, || {
        (sink.count() >= before + 3).then_some(())
    });
    {
        let hits = sink.hits.lock().unwrap();
        let gap = |i: usize| hits[i].0 - hits[i - 1].0;
        let (first, second) = (gap(before + 1), gap(before + 2));
        // 200 ms then 400 ms, each jittered by at most 20 %.
        assert!(second > first, "backoff grows: {first:?} then {second:?}");
        assert!(first >= std::time::Duration::from_millis(150), "{first:?}");
    }
    sink.code.store(200, Ordering::Relaxed);
    let s = g.wait_status("reload success", |s| {
        s["reload"]["last_result"] == "success"
    });
    assert_eq!(s["reload"]["last_error"], serde_json::Value::Null);
    assert_eq!(s["reload"]["last_success_sha256"], s["active"]["sha256"]);
    assert_eq!(sink.last_version().as_deref(), Some("1.1.0"));
    let m = get(g.port, "/metrics").unwrap().1;
    assert!(
        m.contains("confgate_reloads_total{result=\"success\"} 3"),
        "{m}"
    );
}

/// A burst of promotions yields far fewer reloads than updates, ending on the last one; a restart
/// with the same promoted content sends none.
#[test]
fn reloads_coalesce_and_restart_sends_none() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let sink = Sink::watching(d.promoted());
    sink.delay_ms.store(30, Ordering::Relaxed);
    let g = Gate::start(&d, &["--accepts", "^1", "--reload", &sink.url()]);
    g.wait_active("1.0.0");
    // The first promotion into an empty promoted dir owes no reload, only a start-up check: with an
    // HTTP target, a first POST, which the sink answers. A second promotion is reloaded.
    write_version(&d.watch(), "1.0.1");
    g.wait_active("1.0.1");
    g.wait_status("the reload of 1.0.1", |s| {
        s["applied"]["version"] == "1.0.1" && s["reload"]["last_result"] == "success"
    });
    let before = sink.count();
    for i in 1..=100 {
        write_version(&d.watch(), &format!("1.{i}.0"));
    }
    let s = g.wait_active("1.100.0");
    let sha = s["active"]["sha256"].clone();
    g.wait_status("reload of the last promotion", |s| {
        s["reload"]["last_success_sha256"] == sha
    });
    let reloads = sink.count() - before;
    assert!(reloads < 50, "{reloads} reloads for 100 updates");
    assert_eq!(sink.last_version().as_deref(), Some("1.100.0"));

    drop(g);
    let count = sink.count();
    let g = Gate::start(&d, &["--accepts", "^1", "--reload", &sink.url()]);
    let s = g.wait_active("1.100.0");
    assert_eq!(s["reload"]["requested"], 0, "no reload on restart: {s}");
    // The next change does reload, exactly once.
    write_version(&d.watch(), "1.101.0");
    g.wait_active("1.101.0");
    let s = g.wait_status("one reload", |s| s["reload"]["last_result"] == "success");
    assert_eq!(s["reload"]["requested"], 1);
    assert_eq!(sink.count(), count + 1);
    assert_eq!(sink.last_version().as_deref(), Some("1.101.0"));
}

/// `signal:HUP:NAME` reaches a real process found by name, and finds it again after it restarts.
#[test]
fn signal_reload_follows_the_process_across_restarts() {
    let d = Dirs::new();
    let name = format!("hupcount{}", std::process::id() % 100000);
    let count_file = d.root.path().join("hups");
    // The real interpreter, not a version-manager shim that would re-exec it under its own name.
    let python = String::from_utf8(
        Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let spawn = |tag: &str| {
        let ready = d.root.path().join(format!("ready-{tag}"));
        let script = format!(
            "import signal, sys, time\n\
             def on_hup(*_):\n\
             \x20   open(sys.argv[1], 'a').write('{tag}\\n')\n\
             signal.signal(signal.SIGHUP, on_hup)\n\
             open(sys.argv[2], 'w').write('ready')\n\
             while True: time.sleep(3600)\n"
        );
        let child = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "exec -a {name} {} -c \"$0\" \"$1\" \"$2\"",
                python.trim()
            ))
            .arg(script)
            .arg(&count_file)
            .arg(&ready)
            .spawn()
            .unwrap();
        let child = Reaped(child);
        wait_for("the target to install its handler", DEADLINE, || {
            ready.exists().then_some(())
        });
        child
    };
    let hups = || std::fs::read_to_string(&count_file).unwrap_or_default();
    let first = spawn("first");
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(
        &d,
        &["--accepts", "^1", "--reload", &format!("signal:HUP:{name}")],
    );
    g.wait_active("1.0.0");
    // The first promotion into an empty promoted dir owes a start-up check: a process that ran before
    // it could not have read it, so it is told, like a reload.
    wait_for("the start-up check's HUP", DEADLINE, || {
        (hups() == "first\n").then_some(())
    });
    g.wait_status("1.0.0 applied", |s| s["applied"]["version"] == "1.0.0");
    write_version(&d.watch(), "1.0.1");
    g.wait_active("1.0.1");
    wait_for("the first HUP", DEADLINE, || {
        (hups() == "first\nfirst\n").then_some(())
    });
    drop(first);
    let second = spawn("second");
    write_version(&d.watch(), "1.1.0");
    wait_for("a HUP to the restarted process", DEADLINE, || {
        (hups() == "first\nfirst\nsecond\n").then_some(())
    });
    let s = g.wait_status("success", |s| s["reload"]["last_result"] == "success");
    assert_eq!(s["reload"]["target"], format!("signal:HUP:{name}"));
    drop(second);
    // With no such process there is nothing to reload (not a failure retried forever); the note says
    // what to check.
    write_version(&d.watch(), "1.2.0");
    let s = g.wait_status("nothing to reload", |s| {
        s["reload"]["last_result"] == "nothing-to-reload"
    });
    assert!(
        s["reload"]["last_error"]
            .as_str()
            .unwrap()
            .contains("shareProcessNamespace"),
        "{s}"
    );
}

/// The exec-probe client prints the reason line and exits 0 or 1.
#[test]
fn probe_command() {
    let d = Dirs::new();
    write_version(&d.watch(), "3.0.0");
    let g = Gate::start(&d, &["--accepts", "^2"]);
    g.wait_candidate(Some("3.0.0"), "too-new");
    let addr = format!("127.0.0.1:{}", g.port);
    let out = Command::new(BIN)
        .args(["probe", "ready", "--addr", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    // The kubelet's event shows this line: the reason and its fix, no HTTP status.
    assert!(
        text.contains("3.0.0 is too-new")
            && !text.contains("HTTP 503")
            && text
                .trim_end()
                .ends_with("or raise confgate.io/accepts once the component reads 3.0.0"),
        "{text}"
    );
    let out = Command::new(BIN)
        .args(["probe", "live", "--addr", &addr])
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(0), "ok\n")
    );
    write_version(&d.watch(), "2.0.0");
    g.wait_active("2.0.0");
    for kind in ["ready", "startup"] {
        let out = Command::new(BIN)
            .args(["probe", kind, "--addr", &addr])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{kind}");
    }
    let out = Command::new(BIN)
        .args([
            "probe",
            "ready",
            "--addr",
            // Port 0 can never be listened on, so the connection is refused without a race.
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("GET http://127.0.0.1:"));
}

/// `wait` exits 0 once an accepted config is promoted, 1 with the reason at its timeout.
#[test]
fn wait_command() {
    let d = Dirs::new();
    write_version(&d.watch(), "3.0.0");
    let wait = |timeout: &str| {
        let mut c = Command::new(BIN);
        c.args(["wait", "--accepts", "^2", "--timeout", timeout])
            .arg("--watch")
            .arg(d.watch())
            .arg("--promote-to")
            .arg(d.promoted())
            .arg("--annotations")
            .arg(d.podinfo().join("annotations"));
        c
    };
    let out = wait("300ms").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("timed out") && text.contains("3.0.0 is too-new"),
        "{text}"
    );
    assert!(read_promoted(&d.promoted()).is_none());
    // Started before the config exists; returns once it is promoted.
    let mut child = Reaped(wait("20s").stderr(Stdio::piped()).spawn().unwrap());
    let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
    let mut line = String::new();
    // The first judgement is logged: now the waiter is watching.
    while !line.contains("judged") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "wait exited early"
        );
    }
    write_version(&d.watch(), "2.2.0");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("accepted config in place"), "{rest}");
    assert_eq!(
        wait_exit(&mut child.0, "wait to exit", DEADLINE).code(),
        Some(0)
    );
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "2.2.0");
}

/// JSON logs: one structured line per verdict and per promotion.
#[test]
fn json_logs_one_line_per_decision() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &["--accepts", "^1", "--log-format", "json"]);
    g.wait_active("1.0.0");
    write_version(&d.watch(), "2.0.0");
    g.wait_candidate(Some("2.0.0"), "too-new");
    drop(g);
    let log = std::fs::read_to_string(d.log()).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    let judged: Vec<_> = lines.iter().filter(|l| l["message"] == "judged").collect();
    assert_eq!(judged.len(), 2, "{log}");
    assert_eq!(judged[1]["verdict"], "too-new");
    assert_eq!(judged[1]["version"], "2.0.0");
    assert_eq!(judged[1]["sha"].as_str().unwrap().len(), 12);
    assert_eq!(judged[1]["level"], "WARN");
    assert_eq!(
        lines.iter().filter(|l| l["message"] == "promoted").count(),
        1
    );
}

/// An https target with a private CA: trusted through `--reload-ca`, refused without it; a bad CA file
/// exits 64 naming the setting.
#[cfg(feature = "tls")]
#[test]
fn https_reload_with_a_private_ca() {
    let d = Dirs::new();
    let dir = d.root.path();
    let (ca, cert, key) = (dir.join("ca.crt"), dir.join("tls.crt"), dir.join("tls.key"));
    // A private CA and a serving certificate it signed, as a cluster-internal endpoint would have.
    let made = Command::new("bash")
        .current_dir(dir)
        .arg("-ec")
        .arg(
            "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout ca.key -out ca.crt\n\
             openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout tls.key -out tls.csr\n\
             printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext\n\
             openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext -out tls.crt",
        )
        .stderr(Stdio::null())
        .status()
        .expect("openssl must be installed");
    assert!(made.success());
    let hits = d.root.path().join("https-hits");
    // Bound to port 0 and listening before it prints the port, so the port is known only once served.
    let server = "import http.server, ssl, sys\n\
        class H(http.server.BaseHTTPRequestHandler):\n\
        \x20   def do_POST(self):\n\
        \x20       open(sys.argv[3], 'a').write(self.path + '\\n')\n\
        \x20       self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()\n\
        \x20   def log_message(self, *a): pass\n\
        s = http.server.HTTPServer(('127.0.0.1', 0), H)\n\
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[1], sys.argv[2])\n\
        s.socket = c.wrap_socket(s.socket, server_side=True)\n\
        print(s.server_address[1], flush=True)\n\
        s.serve_forever()\n";
    let mut sink = Reaped(
        Command::new("python3")
            .args(["-c", server])
            .arg(&cert)
            .arg(&key)
            .arg(&hits)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = BufReader::new(sink.0.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(out.lines().next().and_then(Result::ok));
    });
    let port: u16 = rx
        .recv_timeout(DEADLINE)
        .expect("the https sink to print its port")
        .and_then(|l| l.trim().parse().ok())
        .expect("the https sink's port");
    let url = format!("https://127.0.0.1:{port}/-/reload");

    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &["--accepts", "^1", "--reload", &url]);
    g.wait_active("1.0.0");
    // The first promotion owes a start-up check, which cannot reach the target (pending); the second
    // a reload, which fails the same way.
    write_version(&d.watch(), "1.0.1");
    g.wait_active("1.0.1");
    let s = g.wait_status("an untrusted certificate refused", |s| {
        s["reload"]["last_result"] == "failure"
    });
    assert!(
        s["reload"]["last_error"]
            .as_str()
            .unwrap()
            .contains("certificate"),
        "{s}"
    );
    drop(g);

    let g = Gate::start(
        &d,
        &[
            "--accepts",
            "^1",
            "--reload",
            &url,
            "--reload-ca",
            ca.to_str().unwrap(),
        ],
    );
    write_version(&d.watch(), "1.1.0");
    g.wait_active("1.1.0");
    g.wait_status("a trusted https reload", |s| {
        s["reload"]["last_result"] == "success"
    });
    assert!(
        std::fs::read_to_string(&hits)
            .unwrap()
            .contains("/-/reload")
    );

    let out = Command::new(BIN)
        .args(["run", "--reload-ca", "/nonexistent/ca.pem"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--reload-ca (CONFGATE_RELOAD_CA)") && err.contains("/nonexistent/ca.pem"),
        "{err}"
    );
}
