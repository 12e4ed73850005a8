//! Variants through the real binary on kubelet-layout volumes: one ConfigMap serving several schema
//! versions at once, the upgrade procedure step by step, the atomic switch, and `check` per range.

use crate::common;

use common::*;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const VARIANTS: &str = "config.v*.yaml -> config.yaml";
const FROM: &str = "yaml:config.yaml#/version";

fn v2() -> String {
    "version: 2.1.0\nlisten: 8080\n".into()
}

fn v3() -> String {
    "version: 3.0.0\nserver:\n  listen: 8080\n".into()
}

/// A pod's sidecar: its own promoted dir and annotations, the shared ConfigMap volume.
struct Pod {
    gate: Gate,
    promoted: PathBuf,
    _dir: tempfile::TempDir,
}

fn pod(watch: &Path, range: &str, extra: &[&str]) -> Pod {
    pod_in(tempfile::tempdir().unwrap(), watch, range, extra)
}

/// [`pod`] with its promoted dir and annotations in `dir`, as a restarted container finds them.
fn pod_in(dir: tempfile::TempDir, watch: &Path, range: &str, extra: &[&str]) -> Pod {
    let promoted = dir.path().join("active");
    let (w, p, a) = (
        watch.display().to_string(),
        promoted.display().to_string(),
        dir.path().join("annotations").display().to_string(),
    );
    let mut args = vec![
        "--watch",
        &w,
        "--promote-to",
        &p,
        "--annotations",
        &a,
        "--accepts",
        range,
        "--version-from",
        FROM,
        "--variants",
        VARIANTS,
    ];
    args.extend_from_slice(extra);
    let gate = Gate::spawn(&args, &dir.path().join("confgate.log"));
    Pod {
        gate,
        promoted,
        _dir: dir,
    }
}

fn write(watch: &Path, files: &[(&str, String)]) {
    let files: Vec<(&str, &[u8])> = files.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
    kubelet_write(watch, &files);
}

/// Waits until the pod runs `variant` at `version`, with nothing newer held back.
fn wait_running(p: &Pod, variant: &str, version: &str) -> serde_json::Value {
    p.gate
        .wait_status(&format!("{variant} {version} active"), |s| {
            s["active"]["variant"] == variant
                && s["active"]["version"] == version
                && s["candidate"].is_null()
                && s["ready"] == true
        })
}

/// The `sha256:` hashes `confgate check` prints for `dir`, one per range, in order.
fn check_hashes(dir: &Path, ranges: &[&str]) -> (i32, Vec<String>, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(["check", "--version-from", FROM, "--variants", VARIANTS]);
    for r in ranges {
        cmd.args(["--accepts", r]);
    }
    let out = cmd.arg(dir).output().expect("run confgate check");
    let text = String::from_utf8(out.stdout).unwrap();
    let hashes = text
        .lines()
        .map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("sha256:"))
                .unwrap_or("-")
                .to_owned()
        })
        .collect();
    (out.status.code().unwrap(), hashes, text)
}

#[test]
fn two_sidecars_on_one_volume_pick_different_variants_and_check_agrees() {
    let vol = tempfile::tempdir().unwrap();
    let watch = vol.path().join("incoming");
    write(
        &watch,
        &[
            ("config.v2.yaml", v2()),
            ("config.v3.yaml", v3()),
            ("extra.txt", "shared".into()),
        ],
    );
    let old = pod(&watch, "^2", &[]);
    let new = pod(&watch, "^3", &[]);
    let so = wait_running(&old, "config.v2.yaml", "2.1.0");
    let sn = wait_running(&new, "config.v3.yaml", "3.0.0");

    let po = read_promoted(&old.promoted).unwrap();
    let pn = read_promoted(&new.promoted).unwrap();
    assert_eq!(po.keys().collect::<Vec<_>>(), ["config.yaml", "extra.txt"]);
    assert_eq!(pn.keys().collect::<Vec<_>>(), ["config.yaml", "extra.txt"]);
    assert_eq!(
        (po["config.yaml"].clone(), pn["config.yaml"].clone()),
        (v2(), v3())
    );

    // The hash reported as active is the promoted set's, and check prints the same one per range.
    let (code, hashes, text) = check_hashes(&watch, &["^2", "^3"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        hashes,
        [
            so["active"]["sha256"].as_str().unwrap(),
            sn["active"]["sha256"].as_str().unwrap()
        ],
        "{text}"
    );
    assert!(
        text.contains("[^2]: variant config.v2.yaml (of 2)"),
        "{text}"
    );
    assert!(
        text.contains("[^3]: variant config.v3.yaml (of 2)"),
        "{text}"
    );
    // A range no variant serves fails the check, with each variant's version and verdict.
    let (code, _, text) = check_hashes(&watch, &["^2", "^4"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "too-old"
        ) && text.contains("no variant is accepted by ^4: config.v2.yaml 2.1.0 too-old, config.v3.yaml 3.0.0 too-old"),
        "{text}"
    );
    // Metrics name the variant.
    let (_, metrics) = get(new.gate.port, "/metrics").unwrap();
    assert!(
        metrics.contains("variant=\"config.v3.yaml\"} 1"),
        "{metrics}"
    );
}

#[test]
fn upgrade_old_pod_restarted_mid_rollout_starts_on_v2_and_removing_v2_holds_old_pods() {
    let vol = tempfile::tempdir().unwrap();
    let watch = vol.path().join("incoming");
    // Before the upgrade: only v2.
    write(&watch, &[("config.v2.yaml", v2())]);
    let old = pod(&watch, "^2", &[]);
    wait_running(&old, "config.v2.yaml", "2.1.0");

    // Step 1: v3 added beside v2. The running old pod keeps v2, untouched.
    write(
        &watch,
        &[("config.v2.yaml", v2()), ("config.v3.yaml", v3())],
    );
    let new = pod(&watch, "^3", &[]);
    wait_running(&new, "config.v3.yaml", "3.0.0");
    wait_running(&old, "config.v2.yaml", "2.1.0");

    // An old pod evicted mid-rollout comes back (fresh promoted dir) and starts on v2.
    drop(old);
    let old = pod(&watch, "^2", &[]);
    let so = wait_running(&old, "config.v2.yaml", "2.1.0");
    assert_eq!(so["started"], true);
    assert_eq!(read_promoted(&old.promoted).unwrap()["config.yaml"], v2());

    // Step 4 (too early, while an old pod still runs): v2 removed.
    let new_before = new.gate.status();
    let new_link = std::fs::read_link(new.promoted.join("..data")).unwrap();
    write(&watch, &[("config.v3.yaml", v3())]);
    let s = old
        .gate
        .wait_status("old pod holding v2 with v3 too-new", |s| {
            s["stale"] == true && s["candidate"]["verdict"] == "too-new"
        });
    assert_eq!(s["ready"], true, "hold keeps the old pod ready");
    assert_eq!(s["active"]["variant"], "config.v2.yaml");
    assert!(
        s["candidate"]["reason"]
            .as_str()
            .unwrap()
            .contains("no variant is accepted by ^2: config.v3.yaml 3.0.0 too-new"),
        "{s}"
    );
    assert_eq!(read_promoted(&old.promoted).unwrap()["config.yaml"], v2());

    // The new pod judged the new ConfigMap too (a second accepted snapshot), and nothing moved.
    wait_for(
        "the new pod to judge the shrunk ConfigMap",
        DEADLINE,
        || {
            let (_, m) = get(new.gate.port, "/metrics")?;
            m.contains("confgate_candidates_total{verdict=\"accepted\"} 2")
                .then_some(())
        },
    );
    let after = new.gate.status();
    assert_eq!(after["active"], new_before["active"]);
    assert!(after["candidate"].is_null());
    assert_eq!(
        std::fs::read_link(new.promoted.join("..data")).unwrap(),
        new_link
    );
}

/// A pod holding v2 after v2 left the ConfigMap restarts: what it runs, and from which variant, is
/// read back from the promoted dir, so `/status` and the active-config metric still name v2.
#[test]
fn a_restart_keeps_the_variant_of_the_config_in_place_after_it_left_the_configmap() {
    let vol = tempfile::tempdir().unwrap();
    let watch = vol.path().join("incoming");
    write(&watch, &[("config.v2.yaml", v2())]);
    let old = pod(&watch, "^2", &[]);
    wait_running(&old, "config.v2.yaml", "2.1.0");
    write(&watch, &[("config.v3.yaml", v3())]);
    old.gate.wait_candidate(None, "too-new");

    let Pod { gate, _dir, .. } = old;
    drop(gate);
    let old = pod_in(_dir, &watch, "^2", &[]);
    let s = old.gate.wait_candidate(None, "too-new");
    assert_eq!(s["active"]["version"], "2.1.0", "{s}");
    assert_eq!(s["active"]["variant"], "config.v2.yaml", "{s}");
    let (_, m) = get(old.gate.port, "/metrics").unwrap();
    let info = m
        .lines()
        .find(|l| l.starts_with("confgate_active_config_info{"))
        .unwrap_or_else(|| panic!("no active config metric: {m}"));
    assert!(info.contains("variant=\"config.v2.yaml\""), "{info}");
}

/// A reader of the promoted dir sees, in every read, exactly the promoted name and the shared key, and
/// the variant that goes with that generation: the switch between variants is one swap.
#[test]
fn variant_switch_is_atomic_for_a_concurrent_reader_and_reloads() {
    let vol = tempfile::tempdir().unwrap();
    let watch = vol.path().join("incoming");
    let gen_files = |n: u32| {
        let mut f = vec![("config.v2.yaml", v2()), ("generation", n.to_string())];
        if n % 2 == 1 {
            f.push(("config.v3.yaml", v3()));
        }
        f
    };
    write(&watch, &gen_files(0));
    let sink = Sink::start(false);
    let url = sink.url();
    let p = pod(&watch, ">=2", &["--reload", &url]);
    wait_running(&p, "config.v2.yaml", "2.1.0");

    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (stop, reads, dir) = (stop.clone(), reads.clone(), p.promoted.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // As a component reads: one `..data`, checked again after the read; a read that raced a
                // swap (its old dir being removed) is the reader's to retry, not a torn promotion.
                let before = std::fs::read_link(dir.join("..data")).ok();
                let Some(m) = read_promoted(&dir) else {
                    continue;
                };
                if before.is_none() || std::fs::read_link(dir.join("..data")).ok() != before {
                    continue;
                }
                assert_eq!(
                    m.keys().collect::<Vec<_>>(),
                    ["config.yaml", "generation"],
                    "one variant, under the promoted name"
                );
                let n: u32 = m["generation"].parse().unwrap();
                let want = if n % 2 == 1 { v3() } else { v2() };
                assert_eq!(
                    m["config.yaml"], want,
                    "generation {n} with the wrong variant"
                );
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let last = 60u32;
    for n in 1..=last {
        write(&watch, &gen_files(n));
        if n % 10 == 0 {
            // Let the gate catch up now and then, so switches are promoted, not only coalesced.
            let want = if n % 2 == 1 { "3.0.0" } else { "2.1.0" };
            wait_running(
                &p,
                if n % 2 == 1 {
                    "config.v3.yaml"
                } else {
                    "config.v2.yaml"
                },
                want,
            );
        }
    }
    // The last generation itself, not an earlier one with the same variant: its promoted set's hash.
    let last_text = last.to_string();
    let last_sha = confgate::snapshot::ContentHash::of([
        ("config.yaml", v2().as_bytes()),
        ("generation", last_text.as_bytes()),
    ])
    .to_string();
    let s = p.gate.wait_status("the last generation active", |s| {
        s["active"]["sha256"] == last_sha.as_str() && s["candidate"].is_null()
    });
    stop.store(true, Ordering::Relaxed);
    reader
        .join()
        .expect("reader saw a torn or mixed promoted dir");
    assert!(reads.load(Ordering::Relaxed) > 0);
    assert_eq!(
        read_promoted(&p.promoted).unwrap()["generation"],
        last.to_string()
    );
    let done = p.gate.wait_status("the last switch reloaded", |st| {
        st["reload"]["last_success_sha256"] == s["active"]["sha256"]
    });
    assert!(done["reload"]["requested"].as_u64().unwrap() >= 2);
    assert!(sink.count() >= 2);
}

/// One step of a history: which variants the ConfigMap holds, by major version and minor.
fn arb_cm() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::btree_map(1u64..5, 0u64..3, 0..4).prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    /// Through random histories, the promoted dir always holds exactly one variant, under the promoted
    /// name, and it is the highest one the range accepts; with none accepted, the previous one stays.
    #[test]
    fn promoted_dir_holds_the_highest_accepted_variant(steps in prop::collection::vec(arb_cm(), 1..6)) {
        let vol = tempfile::tempdir().unwrap();
        let watch = vol.path().join("incoming");
        let range = ">=2, <4";
        let mut held: Option<String> = None;
        let mut p: Option<Pod> = None;
        for (i, variants) in steps.iter().enumerate() {
            let mut files: Vec<(String, String)> = variants
                .iter()
                .map(|(major, minor)| (format!("config.v{major}.yaml"), format!("version: {major}.{minor}.0\n")))
                .collect();
            files.push(("step".into(), i.to_string()));
            let refs: Vec<(&str, String)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            write(&watch, &refs);
            let pod = p.get_or_insert_with(|| pod(&watch, range, &[]));
            let best = variants.iter().filter(|(m, _)| (2..4).contains(m)).max();
            match best {
                Some((major, minor)) => {
                    let key = format!("config.v{major}.yaml");
                    let version = format!("{major}.{minor}.0");
                    // The same variant and version as the previous step say nothing about whether this
                    // step is in place yet; the promoted set's hash does.
                    let (config, step) = (format!("version: {version}\n"), i.to_string());
                    let want = confgate::snapshot::ContentHash::of([
                        ("config.yaml", config.as_bytes()),
                        ("step", step.as_bytes()),
                    ])
                    .to_string();
                    pod.gate.wait_status(&format!("step {i} promoted"), |s| {
                        s["active"]["sha256"] == want.as_str()
                    });
                    wait_running(pod, &key, &version);
                    let m = read_promoted(&pod.promoted).unwrap();
                    prop_assert_eq!(m.keys().collect::<Vec<_>>(), ["config.yaml", "step"]);
                    prop_assert_eq!(&m["config.yaml"], &format!("version: {version}\n"));
                    prop_assert_eq!(&m["step"], &i.to_string());
                    held = Some(m["config.yaml"].clone());
                }
                None => {
                    pod.gate.wait_status(&format!("step {i} judged and not accepted"), |s| {
                        s["candidate"]["verdict"].as_str().is_some_and(|v| v != "accepted")
                    });
                    match &held {
                        Some(h) => {
                            let m = read_promoted(&pod.promoted).unwrap();
                            prop_assert_eq!(m.keys().collect::<Vec<_>>(), ["config.yaml", "step"]);
                            prop_assert_eq!(&m["config.yaml"], h);
                        }
                        None => prop_assert!(read_promoted(&pod.promoted).is_none()),
                    }
                }
            }
        }
    }
}

/// Only `check` reports per range; a sidecar given two ranges refuses to start instead of picking one.
#[test]
fn run_refuses_several_ranges() {
    let out = Command::new(BIN)
        .args(["run", "--accepts", "^2", "--accepts", "^3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--accepts is given 2 times"));
}
