//! Soak test: a long run of kubelet-style updates mixing every verdict, a reload target that fails every
//! other request, and live settings changes through the annotations file. Ignored by default; run with
//! `cargo test --release -- --ignored soak` (CONFGATE_SOAK_UPDATES sets the count, default 100000).

use crate::common;

use std::time::{Duration, Instant};

use common::{Gate, Sink, Volume};

const DEADLINE: Duration = Duration::from_secs(20);

/// One update: its payload, the verdict it gets, and the version `/status` then shows.
type Update = (Vec<(&'static str, Vec<u8>)>, &'static str, Option<String>);

/// The update `i` of the run.
fn update(i: usize) -> Update {
    let v = |s: String| {
        vec![
            ("version", s.into_bytes()),
            ("app.yaml", b"a: 1\n".to_vec()),
        ]
    };
    match i % 7 {
        0 | 3 => {
            let ver = format!("1.{i}.0");
            (v(ver.clone()), "accepted", Some(ver))
        }
        1 => {
            let ver = format!("9.0.{i}");
            (v(ver.clone()), "too-new", Some(ver))
        }
        2 => {
            let ver = format!("0.1.{i}");
            (v(ver.clone()), "too-old", Some(ver))
        }
        // Both ranges used below admit 1.x but no pre-release of it.
        4 => {
            let ver = format!("1.5.0-beta.{i}");
            (v(ver.clone()), "out-of-range", Some(ver))
        }
        5 => {
            let ver = format!("not-a-version-{i}");
            (v(ver.clone()), "invalid", Some(ver))
        }
        _ => (Vec::new(), "missing", None),
    }
}

fn annotations(accepts: &str) -> Vec<u8> {
    format!(
        "confgate.io/accepts={}\nkubernetes.io/config.source=\"api\"",
        confgate::annotations::quote(accepts)
    )
    .into_bytes()
}

/// Waits until the reload of the active config has succeeded, so nothing is in flight.
fn settled(cg: &Gate) -> serde_json::Value {
    cg.wait_status("the active config's reload to succeed", |s| {
        s["reload"]["last_result"] == "success"
            && s["reload"]["last_success_sha256"] == s["active"]["sha256"]
    })
}

#[test]
#[ignore = "soak: run with cargo test --release -- --ignored soak"]
fn soak() {
    let count: usize = std::env::var("CONFGATE_SOAK_UPDATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let tmp = tempfile::tempdir().unwrap();
    let vol = Volume::new(tmp.path().join("incoming"));
    let podinfo = Volume::new(tmp.path().join("podinfo"));
    let promoted = tmp.path().join("promoted");
    let ranges = ["^1", ">=1.0.0, <4.0.0"];
    podinfo
        .write(&[("annotations", &annotations(ranges[0]))])
        .unwrap();
    vol.write(&[("version", b"1.0.0")]).unwrap();
    let sink = Sink::start(true);
    let url = sink.url();
    let mut cg = Gate::spawn(
        &[
            "--watch",
            vol.dir.to_str().unwrap(),
            "--promote-to",
            promoted.to_str().unwrap(),
            "--annotations",
            podinfo.dir.join("annotations").to_str().unwrap(),
            // The flag is overridden by the annotation from the start.
            "--accepts",
            ">=5",
            "--reload",
            &url,
        ],
        &tmp.path().join("confgate.log"),
    );
    cg.deadline = DEADLINE;
    let pid = cg.pid();
    cg.wait_status("1.0.0 active under the annotation", |s| {
        common::active_version(s) == Some("1.0.0") && s["accepts"] == ranges[0]
    });

    let warmup = (count / 10).max(1);
    let mut baseline = None;
    let mut last_accepted = "1.0.0".to_owned();
    let mut settings_changes = 0;
    let started = Instant::now();
    for i in 0..count {
        if i == warmup {
            settled(&cg);
            baseline = Some((common::status_kb(pid, "VmRSS"), common::fd_count(pid)));
        }
        if i % 1000 == 999 {
            let accepts = ranges[(i / 1000 + 1) % 2];
            podinfo
                .write(&[("annotations", &annotations(accepts))])
                .unwrap();
            cg.wait_status("the new range in force", |s| s["accepts"] == accepts);
            settings_changes += 1;
        }
        let (files, verdict, version) = update(i);
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        vol.write(&refs).unwrap();
        let s = cg.wait_status(&format!("update {i} judged {verdict}"), |s| {
            if verdict == "accepted" {
                common::active_version(s) == version.as_deref() && s["candidate"].is_null()
            } else {
                s["candidate"]["verdict"] == verdict
                    && s["candidate"]["version"].as_str() == version.as_deref()
            }
        });
        if verdict == "accepted" {
            last_accepted = version.unwrap();
        } else {
            // on-incompatible hold: the last accepted config stays active and ready.
            assert_eq!(common::active_version(&s), Some(last_accepted.as_str()));
            assert_eq!(s["ready"], true, "{s}");
        }
        if i % 5000 == 0 {
            assert!(cg.alive(), "confgate exited: {}", cg.log_text());
        }
    }
    let elapsed = started.elapsed();

    let end = settled(&cg);
    let (rss0, fds0) = baseline.unwrap();
    let (rss1, fds1) = (common::status_kb(pid, "VmRSS"), common::fd_count(pid));
    let metrics = common::get(cg.port, "/metrics").unwrap().1;
    println!(
        "soak: {count} updates in {elapsed:?} ({:.0}/s), {settings_changes} settings changes, \
         {} reload requests ({} answered 503); RSS {rss0} -> {rss1} KiB; fds {fds0} -> {fds1}",
        count as f64 / elapsed.as_secs_f64(),
        sink.requests.load(std::sync::atomic::Ordering::Relaxed),
        sink.failures.load(std::sync::atomic::Ordering::Relaxed),
    );
    assert!(cg.alive(), "confgate exited: {}", cg.log_text());
    assert_eq!(common::active_version(&end), Some(last_accepted.as_str()));
    assert_eq!(
        std::fs::read_to_string(promoted.join("version")).unwrap(),
        last_accepted,
        "the promoted dir holds the last accepted config"
    );
    // The applied config's link, the dir it keeps for a rollback, and the record of the annotations'
    // values in force are all that may stay beside `..data`.
    let applied = std::fs::read_link(promoted.join("..confgate_applied"))
        .map(|t| t.to_string_lossy().into_owned())
        .ok();
    let left: Vec<String> = common::leftovers(&promoted)
        .into_iter()
        .filter(|n| {
            n != "..confgate_applied" && n != "..confgate_settings" && Some(n) != applied.as_ref()
        })
        .collect();
    assert_eq!(left, Vec::<String>::new());
    assert!(
        rss1 <= rss0 + 512,
        "RSS grew from {rss0} to {rss1} KiB over {count} updates"
    );
    assert!(
        fds1 <= fds0 + 2,
        "open fds grew from {fds0} to {fds1} over {count} updates"
    );
    for verdict in [
        "accepted",
        "too-new",
        "too-old",
        "out-of-range",
        "invalid",
        "missing",
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("confgate_candidates_total")
                    && l.contains(&format!("verdict=\"{verdict}\""))
                    && !l.ends_with(" 0")),
            "no {verdict} candidate counted:\n{metrics}"
        );
    }
    assert!(sink.failures.load(std::sync::atomic::Ordering::Relaxed) > 0);
}
