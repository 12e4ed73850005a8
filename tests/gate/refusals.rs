//! What the component refused, through the real binary and a loopback reload target: a refusal is
//! kept in the promoted dir and owes nothing, so a restarted confgate never offers refused content
//! again, finishes a rollback a crash interrupted, and reads a damaged record as far as it can; an
//! answer that did not come from the component (a redirect) is never taken for a refusal.

use crate::common;

use common::*;
use std::sync::atomic::Ordering;

fn owed_marker(d: &Dirs) -> std::path::PathBuf {
    d.promoted().join("..confgate_reload_owed")
}

fn promoted_version(d: &Dirs) -> Option<String> {
    read_promoted(&d.promoted()).and_then(|m| m.get("version").cloned())
}

/// The component refuses the very first config (its first contact answers 500): there is nothing to
/// roll back to, so it stays promoted, reported. The refusal owes no reload, so a restart does not
/// offer it again.
#[test]
fn a_refusal_owes_nothing_and_a_restart_offers_nothing_refused() {
    refusal_survives_a_restart(&[]);
}

/// The same for a Secret, whose printed hashes are keyed anew by every process: the record of refused
/// contents must still be recognised after the restart.
#[test]
fn a_secret_refused_before_a_restart_is_not_offered_again() {
    refusal_survives_a_restart(&["--content", "secret"]);
}

fn refusal_survives_a_restart(extra: &[&str]) {
    let d = Dirs::new();
    let sink = Sink::watching(d.promoted());
    sink.code.store(500, Ordering::Relaxed);
    write_version(&d.watch(), "2.0.0");
    let url = sink.url();
    let mut args = vec!["--accepts", "^2", "--reload", &url];
    args.extend_from_slice(extra);
    let mut g = Gate::start(&d, &args);
    let s = g.wait_candidate(Some("2.0.0"), "rejected-by-component");
    assert!(s["applied"].is_null(), "{s}");
    assert_eq!(promoted_version(&d).as_deref(), Some("2.0.0"));
    wait_for("the refusal to clear the owed marker", DEADLINE, || {
        owed_marker(&d).symlink_metadata().is_err().then_some(())
    });
    assert!(d.promoted().join("..confgate_rejected").exists());
    assert_eq!(sink.count(), 1);

    g.kill();
    let g = Gate::start(&d, &args);
    let s = g.wait_candidate(Some("2.0.0"), "rejected-by-component");
    assert!(
        s["candidate"]["reason"]
            .as_str()
            .unwrap()
            .contains("answered 500"),
        "{s}"
    );
    assert_eq!(s["reload"]["requested"], 0, "{s}");
    assert_eq!(sink.count(), 1, "the refused config was offered again");
    // Other content is offered as usual.
    sink.code.store(200, Ordering::Relaxed);
    write_version(&d.watch(), "2.0.1");
    g.wait_status("2.0.1 applied", |s| s["applied"]["version"] == "2.0.1");
    assert_eq!(sink.last_version().as_deref(), Some("2.0.1"));
}

/// Killed after the refusal was recorded and before the rollback: the restart finds the refused
/// content in place, rolls back to the applied config and reloads that, never the refused one. A
/// damaged line in the record is skipped with a warning.
#[test]
fn a_rollback_cut_short_by_a_crash_is_finished_at_the_restart() {
    let d = Dirs::new();
    let sink = Sink::watching(d.promoted());
    write_version(&d.watch(), "2.0.0");
    let args = ["--accepts", "^2", "--reload", &sink.url()];
    let mut g = Gate::start(&d, &args);
    g.wait_status("2.0.0 applied", |s| s["applied"]["version"] == "2.0.0");
    // 503: not reached, so 2.1.0 stays promoted, its reload owed and retried.
    sink.code.store(503, Ordering::Relaxed);
    write_version(&d.watch(), "2.1.0");
    let s = g.wait_status("2.1.0 promoted, its reload failing", |s| {
        s["active"]["version"] == "2.1.0" && s["reload"]["last_result"] == "failure"
    });
    let refused = s["active"]["sha256"].as_str().unwrap().to_owned();
    assert!(owed_marker(&d).symlink_metadata().is_ok());
    g.kill();
    // What the refusal writes first, as a crash right after it would leave it, after a damaged line.
    std::fs::write(
        d.promoted().join("..confgate_rejected"),
        format!("\u{0}garbage\n{refused} POST answered 500: bad rule\n"),
    )
    .unwrap();
    sink.code.store(200, Ordering::Relaxed);
    let before = sink.count();

    let g = Gate::start(&d, &args);
    let s = g.wait_status("rolled back and reloaded", |s| {
        s["active"]["version"] == "2.0.0"
            && s["applied"]["version"] == "2.0.0"
            && s["reload"]["last_result"] == "success"
    });
    assert_eq!(s["candidate"]["version"], "2.1.0", "{s}");
    assert_eq!(s["candidate"]["verdict"], "rejected-by-component", "{s}");
    assert!(
        s["candidate"]["reason"]
            .as_str()
            .unwrap()
            .contains("bad rule"),
        "{s}"
    );
    assert_eq!(promoted_version(&d).as_deref(), Some("2.0.0"));
    assert_eq!(
        s["reload"]["requested"], 1,
        "the rollback's reload only: {s}"
    );
    let hits = sink.hits.lock().unwrap()[before..].to_vec();
    assert!(
        hits.iter().all(|h| h.2 == "2.0.0"),
        "a reload while the refused config was promoted: {hits:?}"
    );
    assert!(g.log_text().contains("is damaged"), "{}", g.log_text());
    wait_for("nothing owed", DEADLINE, || {
        owed_marker(&d).symlink_metadata().is_err().then_some(())
    });
}

/// A redirect (an auth proxy, http to https) is not the component's answer: the reload is not reached,
/// retried and reported as such, and the promoted config is never rolled back for it.
#[test]
fn a_redirect_is_not_reached_retried_and_never_rolled_back() {
    let d = Dirs::new();
    let sink = Sink::watching(d.promoted());
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--reload", &sink.url()]);
    g.wait_status("2.0.0 applied", |s| s["applied"]["version"] == "2.0.0");
    sink.code.store(302, Ordering::Relaxed);
    let before = sink.count();
    write_version(&d.watch(), "2.1.0");
    let s = g.wait_status("the redirect reported", |s| {
        s["reload"]["last_result"] == "failure"
    });
    let error = s["reload"]["last_error"].as_str().unwrap();
    assert!(
        error.contains("302") && error.contains("redirect") && error.contains("not reached"),
        "{error}"
    );
    wait_for("the reload retried", DEADLINE, || {
        (sink.count() >= before + 2).then_some(())
    });
    let s = g.status();
    assert!(s["candidate"].is_null(), "{s}");
    assert_eq!(s["active"]["version"], "2.1.0");
    assert_eq!(s["applied"]["version"], "2.0.0");
    assert_eq!(promoted_version(&d).as_deref(), Some("2.1.0"));
    assert!(!d.promoted().join("..confgate_rejected").exists());
    sink.code.store(200, Ordering::Relaxed);
    g.wait_status("2.1.0 applied once the target answers", |s| {
        s["applied"]["version"] == "2.1.0" && s["reload"]["last_result"] == "success"
    });
}

/// A typo in the reload path answers 404: the target is misconfigured, not the config refused. It is
/// retried and shown as such, nothing is recorded against the config, and once the annotation names
/// the right URL the config is reloaded there and applied.
#[test]
fn a_404_from_a_mistyped_reload_path_is_a_misconfigured_target_never_a_refusal() {
    let d = Dirs::new();
    let typo = Sink::watching(d.promoted());
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--reload", &typo.url()]);
    g.wait_status("2.0.0 applied", |s| s["applied"]["version"] == "2.0.0");
    typo.code.store(404, Ordering::Relaxed);
    let before = typo.count();
    write_version(&d.watch(), "2.1.0");
    let s = g.wait_status("the misconfigured target reported", |s| {
        s["reload"]["last_result"] == "failure"
    });
    let error = s["reload"]["last_error"].as_str().unwrap();
    assert!(
        error.contains("answered 404") && error.contains("misconfigured"),
        "{error}"
    );
    wait_for("the reload retried", DEADLINE, || {
        (typo.count() >= before + 2).then_some(())
    });
    let s = g.status();
    assert!(s["candidate"].is_null(), "{s}");
    assert_eq!(s["active"]["version"], "2.1.0");
    assert_eq!(promoted_version(&d).as_deref(), Some("2.1.0"));
    assert!(!d.promoted().join("..confgate_rejected").exists());
    // The URL fixed by an annotation edit: the owed reload goes there.
    let right = Sink::watching(d.promoted());
    write_annotations(&d.podinfo(), &[("confgate.io/reload", &right.url())]);
    g.wait_status("2.1.0 applied through the fixed target", |s| {
        s["applied"]["version"] == "2.1.0" && s["reload"]["last_result"] == "success"
    });
    assert_eq!(right.last_version().as_deref(), Some("2.1.0"));
}

/// A refusal recorded under one reload target is not held against the config under another: after
/// a restart with a different target, the config refused before is offered to it.
#[test]
fn a_refusal_recorded_under_another_target_is_not_held_after_a_restart() {
    let d = Dirs::new();
    let first = Sink::watching(d.promoted());
    write_version(&d.watch(), "2.0.0");
    let mut g = Gate::start(&d, &["--accepts", "^2", "--reload", &first.url()]);
    g.wait_status("2.0.0 applied", |s| s["applied"]["version"] == "2.0.0");
    *first.refuse.lock().unwrap() = Some("2.1.0".into());
    write_version(&d.watch(), "2.1.0");
    g.wait_candidate(Some("2.1.0"), "rejected-by-component");
    g.wait_status("rolled back to 2.0.0", |s| {
        s["active"]["version"] == "2.0.0"
    });
    g.kill();
    let other = Sink::watching(d.promoted());
    let g = Gate::start(&d, &["--accepts", "^2", "--reload", &other.url()]);
    g.wait_status("2.1.0 applied under the other target", |s| {
        s["applied"]["version"] == "2.1.0"
    });
    assert_eq!(other.last_version().as_deref(), Some("2.1.0"));
}

/// The component shares the promoted dir and can write into it: a FIFO in place of the record of
/// refusals and of the reload-owed marker, and the applied marker made a link to `..data`. The restart
/// neither hangs nor trusts them: `/livez` answers, the FIFOs are set aside with a warning, the
/// applied marker is no rollback base, and a refusal is recorded again in a file of confgate's own.
#[test]
fn hostile_records_in_the_promoted_dir_are_set_aside_never_trusted_never_fatal() {
    let d = Dirs::new();
    let sink = Sink::watching(d.promoted());
    write_version(&d.watch(), "2.0.0");
    let args = ["--accepts", "^2", "--reload", &sink.url()];
    let mut g = Gate::start(&d, &args);
    g.wait_status("2.0.0 applied", |s| s["applied"]["version"] == "2.0.0");
    g.kill();
    let p = d.promoted();
    for name in ["..confgate_rejected", "..confgate_reload_owed"] {
        let _ = std::fs::remove_file(p.join(name));
        nix::unistd::mkfifo(
            &p.join(name),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
    }
    std::fs::remove_file(p.join("..confgate_applied")).unwrap();
    std::os::unix::fs::symlink("..data", p.join("..confgate_applied")).unwrap();
    // Gate::start waits for /livez: a FIFO opened for reading would block start-up for good.
    let g = Gate::start(&d, &args);
    let s = g.wait_active("2.0.0");
    assert!(s["applied"].is_null(), "a link to ..data is no base: {s}");
    let log = g.log_text();
    assert!(log.contains("not trusted"), "{log}");
    assert!(log.contains("set aside"), "{log}");
    assert!(p.join("..confgate_rejected.bad").exists());
    *sink.refuse.lock().unwrap() = Some("2.1.0".into());
    write_version(&d.watch(), "2.1.0");
    g.wait_candidate(Some("2.1.0"), "rejected-by-component");
    wait_for("the refusal recorded", DEADLINE, || {
        std::fs::symlink_metadata(p.join("..confgate_rejected"))
            .is_ok_and(|m| m.is_file())
            .then_some(())
    });
    assert!(!g.log_text().contains("other content in place"));
}

/// A component that is slow to come up: the first config's start-up check is still waiting when
/// an update is promoted, and the first answer the component gives is its refusal of that update.
/// That answer says it is up and runs the first config, whose dir was kept: the update is rolled
/// back and the component reloaded on the first config, which is then applied.
#[test]
fn a_late_components_refusal_of_the_first_update_rolls_back_to_the_config_it_started_on() {
    let d = Dirs::new();
    let sink = Sink::watching(d.promoted());
    // Not up yet: nothing it answers is about the config.
    sink.code.store(503, Ordering::Relaxed);
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--reload", &sink.url()]);
    g.wait_status("the start-up check waiting", |s| {
        s["active"]["version"] == "2.0.0" && s["reload"]["last_result"] == "pending"
    });
    write_version(&d.watch(), "2.1.0");
    g.wait_status("the update's reload not reached", |s| {
        s["active"]["version"] == "2.1.0" && s["reload"]["last_result"] == "failure"
    });
    // Up, on 2.0.0, and the update's rule file is broken.
    *sink.refuse.lock().unwrap() = Some("2.1.0".into());
    sink.code.store(200, Ordering::Relaxed);
    let s = g.wait_status("rolled back to 2.0.0 and applied", |s| {
        s["applied"]["version"] == "2.0.0" && s["reload"]["last_result"] == "success"
    });
    assert_eq!(s["active"]["version"], "2.0.0", "{s}");
    assert_eq!(s["candidate"]["verdict"], "rejected-by-component", "{s}");
    assert!(
        !s["reason"].as_str().unwrap().contains("holding 2.1.0"),
        "{s}"
    );
    assert_eq!(promoted_version(&d).as_deref(), Some("2.0.0"));
    assert_eq!(sink.last_version().as_deref(), Some("2.0.0"));
}

/// A reload target that answers every request `500` with no body: not a refusal (nothing says why),
/// so retried with backoff. Returns its URL.
fn answering_500_without_a_body() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/reload", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                use std::io::{BufRead, Read, Write};
                let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; len];
                    if reader.read_exact(&mut body).is_err()
                        || conn
                            .write_all(
                                b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n",
                            )
                            .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// A reload that keeps failing (500 with no body, retried for ever) is shown where operators look:
/// a `reload` check in `/readyz?verbose` and `/status`, the probe's line, and the `config` check says
/// the promoted config is not taken by the component (it said "active" while `applied` was null).
/// Readiness stays: the component runs the config it had.
#[test]
fn a_failing_reload_is_shown_in_the_checks_and_the_probe_line() {
    let d = Dirs::new();
    let sink = Sink::watching(d.promoted());
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--reload", &sink.url()]);
    g.wait_status("2.0.0 applied", |s| s["applied"]["version"] == "2.0.0");
    let failing = answering_500_without_a_body();
    write_annotations(&d.podinfo(), &[("confgate.io/reload", &failing)]);
    g.wait_status("the new target in force", |s| {
        s["reload"]["target"] == failing.as_str()
    });
    write_version(&d.watch(), "2.1.0");
    let s = g.wait_status("the reload failing twice", |s| {
        s["reload"]["consecutive_failures"].as_u64() >= Some(2)
    });
    assert_eq!(s["ready"], true, "{s}");
    assert_eq!(s["applied"]["version"], "2.0.0", "{s}");
    let (code, body) = get(g.port, "/readyz?verbose").unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains(&format!(
            "[!]reload warning: the reload of 2.1.0 via {failing} failed"
        )) && body.contains("answered 500"),
        "{body}"
    );
    assert!(
        body.contains("[+]config ok: promoted 2.1.0 (")
            && body.contains("not taken by the component: its reload keeps failing; it runs 2.0.0"),
        "{body}"
    );
    let (code, line) = get(g.port, "/readyz?line").unwrap();
    assert_eq!(code, 200);
    assert!(
        line.starts_with("ok; reload: the reload of 2.1.0"),
        "{line}"
    );
    let probe = std::process::Command::new(BIN)
        .args(["probe", "ready", "--addr", &format!("127.0.0.1:{}", g.port)])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&probe.stdout);
    assert!(
        probe.status.success() && out.contains("reload: the reload of 2.1.0"),
        "{out}"
    );
}
