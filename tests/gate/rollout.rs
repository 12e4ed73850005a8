//! A rollout through the real binary: many sidecars on one kubelet-style ConfigMap volume, each with
//! its own `POD_UID`, each promoting the track its bucket assigns; raising the percentage only adds
//! pods, 0% and 100%, finishing and aborting as ConfigMap edits, a candidate outside the range held
//! everywhere, a candidate the component refuses rolled back on the canary pods only; an in-place
//! edit spread over the fleet by `--reload-spread`, each pod at its bucket's share.

use crate::common;

use common::*;
use confgate::rollout::{Bucket, Percent};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const STABLE: &str = "2.4.1";

/// One pod's sidecar: its own promoted dir, annotations and identity, the shared ConfigMap volume.
struct Pod {
    gate: Gate,
    uid: String,
    promoted: PathBuf,
    sink: Option<Sink>,
    _dir: tempfile::TempDir,
}

fn uid(i: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (i.wrapping_mul(2_654_435_761)) as u32,
        i & 0xffff,
        (i * 7) & 0xfff,
        (i * 13) & 0xfff,
        i.wrapping_mul(0x9e37_79b9_7f4a) & 0xffff_ffff_ffff
    )
}

fn pod(watch: &Path, i: u64, range: &str, with_sink: bool) -> Pod {
    pod_with(watch, i, range, with_sink, &[])
}

/// [`pod`] with more flags.
fn pod_with(watch: &Path, i: u64, range: &str, with_sink: bool, args: &[&str]) -> Pod {
    let dir = tempfile::tempdir().unwrap();
    let promoted = dir.path().join("active");
    let sink = with_sink.then(|| Sink::watching(promoted.clone()));
    let uid = uid(i);
    let mut cmd = Command::new(BIN);
    cmd.arg("run")
        .arg("--watch")
        .arg(watch)
        .arg("--promote-to")
        .arg(&promoted)
        .arg("--annotations")
        .arg(dir.path().join("annotations"))
        .args(["--accepts", range])
        .args(args)
        .env("POD_UID", &uid)
        .env_remove("POD_NAME");
    if let Some(s) = &sink {
        cmd.args(["--reload", &s.url()]);
    }
    let gate = Gate::from_command(cmd, &dir.path().join("confgate.log"));
    Pod {
        gate,
        uid,
        promoted,
        sink,
        _dir: dir,
    }
}

fn fleet(watch: &Path, n: u64, range: &str, with_sink: bool) -> Vec<Pod> {
    (0..n).map(|i| pod(watch, i, range, with_sink)).collect()
}

/// The ConfigMap mid-rollout: stable `version` and `rules.txt`, their candidates, the percentage.
fn write(watch: &Path, next: Option<&str>, percent: Option<&str>) {
    write_shared(watch, next, percent, "shared");
}

/// [`write`] with `shared` as the stable key both tracks share.
fn write_shared(watch: &Path, next: Option<&str>, percent: Option<&str>, shared: &str) {
    let rules_next = next.map(|v| format!("rules for {v}"));
    let mut files: Vec<(&str, &[u8])> = vec![
        ("version", STABLE.as_bytes()),
        ("rules.txt", b"rules for 2.4.1"),
        ("shared.txt", shared.as_bytes()),
    ];
    if let (Some(v), Some(r)) = (next, &rules_next) {
        files.push(("version.next", v.as_bytes()));
        files.push(("rules.txt.next", r.as_bytes()));
    }
    if let Some(p) = percent {
        files.push(("confgate.rollout", p.as_bytes()));
    }
    kubelet_write(watch, &files);
}

/// Whether the pod's bucket puts it on the candidate at `percent`.
fn on_candidate(p: &Pod, percent: &str) -> bool {
    Bucket::of(&p.uid).on_candidate(Percent::parse(percent).unwrap())
}

/// Waits until the pod runs `version` with the rollout at `percent`, nothing held back but the
/// rollout's candidate when it is held on this pod (a held config: the candidate in `/status`), and
/// checks the promoted dir: the track's keys move together, no reserved key is there.
fn wait_on(p: &Pod, percent: Option<&str>, version: &str) -> serde_json::Value {
    let s = p
        .gate
        .wait_status(&format!("{version} at {percent:?}"), |s| {
            s["active"]["version"] == version
                && (s["candidate"].is_null()
                    || (s["rollout"]["held"].is_object()
                        && s["candidate"]["version"] == s["rollout"]["held"]["version"]))
                && s["ready"] == true
                && match percent {
                    Some(pc) => s["rollout"]["percent"] == pc,
                    None => s["rollout"].is_null(),
                }
        });
    let files = read_promoted(&p.promoted).expect("a promoted config");
    assert_eq!(files["version"], version);
    assert_eq!(files["rules.txt"], format!("rules for {version}"));
    assert_eq!(files["shared.txt"], "shared");
    assert!(
        files
            .keys()
            .all(|k| !k.ends_with(".next") && k != "confgate.rollout"),
        "reserved key promoted: {:?}",
        files.keys()
    );
    s
}

/// Binomial bounds: `on` of `n` pods at share `f` is within five standard deviations of `n * f`.
fn within_binomial(on: usize, n: usize, f: f64) -> bool {
    let (mean, sd) = (n as f64 * f, (n as f64 * f * (1.0 - f)).sqrt());
    (on as f64 - mean).abs() <= 5.0 * sd + 0.5
}

/// 5%, 25%, 50%, 100%: each pod runs the track its bucket gives; the share on the candidate follows
/// the percentage; a pod on the candidate stays on it as the percentage rises; finishing (the
/// candidate copied into the stable keys, the rest removed) converges with no restart.
#[test]
fn a_fleet_follows_the_percentage_and_finishing_converges() {
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("configmap");
    write(&watch, None, None);
    let pods = fleet(&watch, 24, "^2", false);
    for p in &pods {
        wait_on(p, None, STABLE);
    }
    let mut before: Vec<bool> = vec![false; pods.len()];
    for pct in ["0%", "5%", "25%", "50%", "100%"] {
        write(&watch, Some("2.5.0"), Some(pct));
        let mut now = Vec::new();
        for (p, was) in pods.iter().zip(&before) {
            let on = on_candidate(p, pct);
            let s = wait_on(p, Some(pct), if on { "2.5.0" } else { STABLE });
            let track = if on { "candidate" } else { "stable" };
            assert_eq!(s["rollout"]["track"], track, "{s}");
            assert_eq!(s["rollout"]["assigned"], track, "{s}");
            assert!(on || !was, "{pct}: pod {} left the candidate", p.uid);
            now.push(on);
        }
        let on = now.iter().filter(|b| **b).count();
        let f = Percent::parse(pct).unwrap().fraction();
        assert!(
            within_binomial(on, pods.len(), f),
            "{pct}: {on} of {}",
            pods.len()
        );
        match pct {
            "0%" => assert_eq!(on, 0),
            "100%" => assert_eq!(on, pods.len()),
            _ => {}
        }
        before = now;
    }
    // The metrics say the track and the share.
    let (_, m) = get(pods[0].gate.port, "/metrics").unwrap();
    assert!(
        m.contains("confgate_rollout_info{track=\"candidate\",percent=\"100%\"} 1"),
        "{m}"
    );
    assert!(m.contains("confgate_rollout_candidate_ratio 1\n"), "{m}");

    // Finish: the candidate becomes the stable keys; nothing reserved is left.
    kubelet_write(
        &watch,
        &[
            ("version", b"2.5.0"),
            ("rules.txt", b"rules for 2.5.0"),
            ("shared.txt", b"shared"),
        ],
    );
    for p in &pods {
        wait_on(p, None, "2.5.0");
    }
    let (_, m) = get(pods[0].gate.port, "/metrics").unwrap();
    assert!(!m.contains("confgate_rollout_info{"), "{m}");
}

/// Aborting is one edit: at 50%, setting 0% (or removing the rollout key) puts every canary pod back
/// on stable with no restart.
#[test]
fn aborting_puts_every_pod_back_on_stable() {
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("configmap");
    write(&watch, None, None);
    let pods = fleet(&watch, 8, "^2", false);
    write(&watch, Some("2.5.0"), Some("50%"));
    for p in &pods {
        wait_on(
            p,
            Some("50%"),
            if on_candidate(p, "50%") {
                "2.5.0"
            } else {
                STABLE
            },
        );
    }
    write(&watch, Some("2.5.0"), Some("0%"));
    for p in &pods {
        let s = wait_on(p, Some("0%"), STABLE);
        assert_eq!(s["rollout"]["track"], "stable");
    }
    // The rollout key removed, the candidate still there: every pod on stable, and it says why.
    write(&watch, Some("2.5.0"), None);
    for p in &pods {
        let s = p.gate.wait_status("the rollout key gone", |s| {
            s["rollout"]["reason"] == "no confgate.rollout key: every pod on stable"
        });
        assert_eq!(s["active"]["version"], STABLE);
    }
}

/// A candidate no pod accepts (too new for `^2`) at 100%: held on every pod, which keeps the stable
/// config, stays ready and says why.
#[test]
fn a_too_new_candidate_is_held_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("configmap");
    write(&watch, None, None);
    let pods = fleet(&watch, 6, "^2", false);
    for p in &pods {
        wait_on(p, None, STABLE);
    }
    write(&watch, Some("3.0.0"), Some("100%"));
    for p in &pods {
        let s = p.gate.wait_status("the candidate held", |s| {
            s["rollout"]["held"]["verdict"] == "too-new"
        });
        assert_eq!(s["ready"], true, "{s}");
        assert_eq!(s["active"]["version"], STABLE, "{s}");
        assert_eq!(s["rollout"]["assigned"], "candidate", "{s}");
        assert_eq!(s["rollout"]["track"], "stable", "{s}");
        assert_eq!(s["rollout"]["held"]["version"], "3.0.0", "{s}");
        assert!(
            s["rollout"]["reason"]
                .as_str()
                .unwrap()
                .ends_with("but the candidate 3.0.0 is too-new: held, on stable"),
            "{s}"
        );
        assert_eq!(read_promoted(&p.promoted).unwrap()["version"], STABLE);
        // A held config everywhere a hold is reported: stale (the `ConfgateConfigHeld` alert), the
        // candidate with its verdict, the `newest` check, and the verdict counted.
        assert_eq!(s["stale"], true, "{s}");
        assert_eq!(s["candidate"]["verdict"], "too-new", "{s}");
        assert_eq!(s["candidate"]["version"], "3.0.0", "{s}");
        assert!(
            s["reason"]
                .as_str()
                .unwrap()
                .starts_with(&format!("holding {STABLE}; 3.0.0 is too-new")),
            "{s}"
        );
        let (_, metrics) = get(p.gate.port, "/metrics").unwrap();
        assert!(metrics.contains("\nconfgate_stale 1\n"), "{metrics}");
        assert!(
            metrics.lines().any(|l| l
                .starts_with("confgate_candidates_total{verdict=\"too-new\"}")
                && !l.ends_with(" 0")),
            "{metrics}"
        );
    }
    // A fresh pod starts on stable too: never on a config outside its range, and ready.
    let late = pod(&watch, 99, "^2", false);
    let s = wait_on(&late, Some("100%"), STABLE);
    assert_eq!(s["rollout"]["held"]["verdict"], "too-new", "{s}");
}

/// The component refuses the candidate: each canary pod rolls back to stable and reports the refusal
/// (rejected-by-component); no stable pod is ever asked to load the candidate.
#[test]
fn a_refused_candidate_is_rolled_back_on_the_canary_pods_only() {
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("configmap");
    write(&watch, None, None);
    let pods = fleet(&watch, 8, "^2", true);
    for p in &pods {
        p.gate
            .wait_status("stable applied", |s| s["applied"]["version"] == STABLE);
        *p.sink.as_ref().unwrap().refuse.lock().unwrap() = Some("2.5.0".into());
    }
    write(&watch, Some("2.5.0"), Some("50%"));
    let mut canaries = 0;
    for p in &pods {
        let sink = p.sink.as_ref().unwrap();
        if on_candidate(p, "50%") {
            canaries += 1;
            let s = p.gate.wait_status("the candidate refused and held", |s| {
                s["rollout"]["held"]["verdict"] == "rejected-by-component"
                    && s["active"]["version"] == STABLE
                    && s["applied"]["version"] == STABLE
            });
            assert_eq!(s["rollout"]["track"], "stable", "{s}");
            assert_eq!(s["ready"], true, "{s}");
            wait_on(p, Some("50%"), STABLE);
            assert!(
                sink.hits.lock().unwrap().iter().any(|h| h.2 == "2.5.0"),
                "the canary was offered the candidate"
            );
            // `applied` was stable before the candidate and stays so after its refusal, so the
            // status above can be seen between the rollback's promotion and its reload request:
            // wait for that request rather than assume it has arrived.
            wait_for("the rollback reloaded", DEADLINE, || {
                let hits = sink.hits.lock().unwrap();
                let offered = hits.iter().rposition(|h| h.2 == "2.5.0")?;
                hits[offered + 1..]
                    .iter()
                    .any(|h| h.2 == STABLE)
                    .then_some(())
            });
        } else {
            let s = wait_on(p, Some("50%"), STABLE);
            assert!(s["rollout"]["held"].is_null(), "{s}");
        }
    }
    assert!(canaries > 0 && canaries < pods.len(), "{canaries} canaries");
    // Stable pods were never offered the candidate; canary pods only once.
    for p in &pods {
        let offered = p
            .sink
            .as_ref()
            .unwrap()
            .hits
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.2 == "2.5.0")
            .count();
        assert_eq!(
            offered,
            usize::from(on_candidate(p, "50%")),
            "pod {}",
            p.uid
        );
    }
}

/// A canary refuses the candidate; then a routine edit of a stable key beside it, the rollout still in
/// the ConfigMap: the candidate's own keys are what was refused, so it stays refused and only the
/// edited stable config is promoted.
#[test]
fn a_refused_candidate_stays_refused_after_an_edit_of_a_stable_key() {
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("configmap");
    write(&watch, None, None);
    let p = pod(&watch, 1, "^2", true);
    let sink = p.sink.as_ref().unwrap();
    p.gate
        .wait_status("stable applied", |s| s["applied"]["version"] == STABLE);
    *sink.refuse.lock().unwrap() = Some("2.5.0".into());
    write(&watch, Some("2.5.0"), Some("100%"));
    p.gate.wait_status("the candidate refused and held", |s| {
        s["rollout"]["held"]["verdict"] == "rejected-by-component"
            && s["active"]["version"] == STABLE
            && s["applied"]["sha256"] == s["active"]["sha256"]
    });
    write_shared(&watch, Some("2.5.0"), Some("100%"), "shared, edited");
    let s = p.gate.wait_status("the edited stable config applied", |s| {
        read_promoted(&p.promoted).is_some_and(|f| f["shared.txt"] == "shared, edited")
            && s["applied"]["sha256"] == s["active"]["sha256"]
            && s["reload"]["last_result"] == "success"
    });
    assert_eq!(
        s["rollout"]["held"]["verdict"], "rejected-by-component",
        "{s}"
    );
    let offered = sink
        .hits
        .lock()
        .unwrap()
        .iter()
        .filter(|h| h.2 == "2.5.0")
        .count();
    assert_eq!(offered, 1, "the refused candidate was loaded again");
}

/// How far past its share of the spread a pod may promote on a loaded machine: the file event, the
/// judgement, the switch and the reload request all come after the deadline.
const SPREAD_MARGIN: Duration = Duration::from_secs(2);

/// An in-place edit with a 4 s spread over 12 pods: each pod's reload of the new config comes at its
/// bucket's share of the 4 s after the edit (never before, within the margin after), and the pod says
/// so in its log; while a pod waits it serves the old config, ready and not stale. The whole fleet
/// has it within the spread and the margin.
#[test]
fn an_in_place_edit_reaches_the_fleet_over_the_reload_spread() {
    const SPREAD: Duration = Duration::from_secs(4);
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("configmap");
    write(&watch, None, None);
    let pods: Vec<Pod> = (0..12)
        .map(|i| pod_with(&watch, i, "^2", true, &["--reload-spread", "4s"]))
        .collect();
    for p in &pods {
        p.gate
            .wait_status("stable applied", |s| s["applied"]["version"] == STABLE);
    }
    // Each pod's share, as the gate computes it: whole milliseconds of the bucket's fraction.
    let share = |p: &Pod| {
        Duration::from_millis((SPREAD.as_millis() as f64 * Bucket::of(&p.uid).fraction()) as u64)
    };
    let last = pods.iter().max_by_key(|p| share(p)).unwrap();
    assert!(share(last) > SPREAD / 2, "a pod late in the spread");

    let edit = Instant::now();
    kubelet_write(
        &watch,
        &[
            ("version", b"2.5.0"),
            ("rules.txt", b"rules for 2.5.0"),
            ("shared.txt", b"shared"),
        ],
    );
    // The last pod, while it waits: the old config in force, ready, not stale, the wait shown.
    let s = last
        .gate
        .wait_status("the change waiting", |s| !s["spread"].is_null());
    assert!(edit.elapsed() < share(last), "still waiting when seen");
    assert_eq!(s["active"]["version"], STABLE, "{s}");
    assert_eq!(
        (&s["ready"], &s["stale"]),
        (&true.into(), &false.into()),
        "{s}"
    );
    assert_eq!(
        s["spread"]["delay_ms"],
        share(last).as_millis() as u64,
        "{s}"
    );
    assert_eq!(s["spread"]["period_ms"], 4000, "{s}");

    let mut reloaded = Vec::new();
    for p in &pods {
        wait_on(p, None, "2.5.0");
        // The reload request follows the promotion: wait for it to arrive.
        let hits = &p.sink.as_ref().unwrap().hits;
        let at = wait_for("the new config reloaded", DEADLINE, || {
            hits.lock()
                .unwrap()
                .iter()
                .find(|h| h.2 == "2.5.0")
                .map(|h| h.0.duration_since(edit))
        });
        let want = share(p);
        assert!(
            at >= want && at <= want + SPREAD_MARGIN,
            "pod {}: reloaded {at:?} after the edit, its share is {want:?}",
            p.uid
        );
        let log = p.gate.log_text();
        let line = log
            .lines()
            .find(|l| l.contains("change seen; promoting at"))
            .unwrap_or_else(|| panic!("no spread line in\n{log}"));
        assert!(
            line.contains(&format!("delay_ms={}", want.as_millis()))
                && line.contains("reload_spread=4s")
                && line.contains("version=2.5.0"),
            "{line}"
        );
        reloaded.push(at);
    }
    let first = reloaded.iter().min().unwrap();
    let all = reloaded.iter().max().unwrap();
    let least = pods.iter().map(share).min().unwrap();
    assert!(
        *first <= least + SPREAD_MARGIN,
        "the first pod promptly: {first:?}"
    );
    assert!(
        *all <= SPREAD + SPREAD_MARGIN,
        "the fleet within the spread: {all:?}"
    );
    assert!(
        *all - *first >= share(last) - least - SPREAD_MARGIN,
        "spread out: {reloaded:?}"
    );
}

/// The first promotion never waits: a pod late in the fleet with an hour's spread promotes the
/// config it starts with at once.
#[test]
fn a_start_with_the_reload_spread_set_promotes_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("configmap");
    write(&watch, None, None);
    let i = (0..)
        .find(|i| Bucket::of(&uid(*i)).fraction() > 0.5)
        .unwrap();
    let p = pod_with(&watch, i, "^2", false, &["--reload-spread", "1h"]);
    let s = wait_on(&p, None, STABLE);
    assert!(s["spread"].is_null(), "{s}");
    assert!(!p.gate.log_text().contains("change seen; promoting at"));
}
