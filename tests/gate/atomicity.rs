//! Atomicity under load: concurrent readers, `kill -9` mid-burst, and a property test over random histories.

use crate::common;

use common::*;
use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Reads the promoted dir as a component that wants one consistent version would: resolve `..data` once,
/// read every key under it. `None` while nothing is promoted or when the dir was swapped mid-read.
fn consistent_read(dir: &Path) -> Option<(String, String)> {
    let m = read_promoted(dir)?;
    Some((m.get("version")?.clone(), m.get("copy")?.clone()))
}

fn payload(v: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("version", v.as_bytes().to_vec()),
        ("copy", v.as_bytes().to_vec()),
    ]
}

fn write(dir: &Path, v: &str) {
    let p = payload(v);
    let files: Vec<(&str, &[u8])> = p.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    kubelet_write(dir, &files);
}

/// A reader polling the promoted dir through 200+ mixed updates never sees two versions at once nor a
/// rejected one, and the final promoted config is the last accepted one.
#[test]
fn concurrent_reader_never_sees_a_mix() {
    let d = Dirs::new();
    write(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &["--accepts", "^1", "--require", "version,copy"]);
    g.wait_active("1.0.0");

    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (stop, reads, dir) = (stop.clone(), reads.clone(), d.promoted());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                if let Some((v, copy)) = consistent_read(&dir) {
                    assert_eq!(v, copy, "one read saw two versions");
                    assert!(v.starts_with("1."), "a rejected version {v} was promoted");
                    seen.insert(v);
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            }
            seen
        })
    };
    for i in 0..240u32 {
        let v = match i % 4 {
            0 | 1 => format!("1.{i}.0"),
            2 => format!("2.{i}.0"),
            _ => "garbage".to_owned(),
        };
        write(&d.watch(), &v);
    }
    write(&d.watch(), "1.999.0");
    g.wait_active("1.999.0");
    write(&d.watch(), "2.999.0");
    g.wait_candidate(Some("2.999.0"), "too-new");
    stop.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("reader assertions");
    assert!(
        reads.load(Ordering::Relaxed) > 100,
        "the reader ran throughout"
    );
    assert!(seen.len() > 1, "the reader saw promotions happen: {seen:?}");
    assert_eq!(consistent_read(&d.promoted()).unwrap().0, "1.999.0");
}

/// `kill -9` in the middle of a burst, again and again: the promoted dir is always whole, and after a
/// restart it holds the newest accepted config with no leftovers.
#[test]
fn kill_9_mid_burst_then_restart() {
    let d = Dirs::new();
    write(&d.watch(), "1.0.0");
    let mut n = 0u32;
    for round in 0..5 {
        let g = Gate::start(&d, &["--accepts", "^1"]);
        // The restarted sidecar cleaned up, and holds an accepted, whole config.
        let s = g.wait_status("a first judgement", |s| !s["active"].is_null());
        let (v, copy) =
            consistent_read(&d.promoted()).expect("promoted dir is whole after restart");
        assert_eq!(v, copy);
        assert!(v.starts_with("1."), "{v}");
        if round > 0 {
            assert!(s["active"]["version"].as_str().unwrap().starts_with("1."));
        }
        let writer_done = Arc::new(AtomicBool::new(false));
        let burst = {
            let (dir, done) = (d.watch(), writer_done.clone());
            let start = n;
            std::thread::spawn(move || {
                for i in start..start + 150 {
                    let v = if i % 3 == 2 {
                        format!("2.{i}.0")
                    } else {
                        format!("1.{i}.0")
                    };
                    write(&dir, &v);
                }
                done.store(true, Ordering::Relaxed);
            })
        };
        // Kill once promotions are flowing.
        wait_for("promotions during the burst", DEADLINE, || {
            let s = g.status();
            (s["active"]["version"] != v.as_str()).then_some(())
        });
        let mut g = g;
        g.kill();
        burst.join().unwrap();
        assert!(writer_done.load(Ordering::Relaxed));
        let (v, copy) =
            consistent_read(&d.promoted()).expect("promoted dir is whole after kill -9");
        assert_eq!(v, copy);
        n += 150;
    }
    // Final: the newest config is accepted, so after a restart it must be promoted, with no leftovers.
    write(&d.watch(), "1.5000.0");
    let g = Gate::start(&d, &["--accepts", "^1"]);
    g.wait_active("1.5000.0");
    assert_eq!(consistent_read(&d.promoted()).unwrap().0, "1.5000.0");
    assert!(
        leftovers(&d.promoted()).is_empty(),
        "{:?}",
        leftovers(&d.promoted())
    );
    assert!(!d.promoted().join("..data_tmp").exists());
}

#[derive(Debug, Clone)]
enum Op {
    /// A config with this major version.
    Write(u64, u64),
    /// The ConfigMap was deleted (empty volume).
    Delete,
    /// Not a version at all.
    Garbage,
    /// `confgate.io/accepts` set to `^major`.
    Accept(u64),
    /// An unparsable annotation.
    BadAnnotation,
    /// The annotation removed (the flag's range applies).
    ClearAnnotation,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..4, 0u64..50).prop_map(|(a, b)| Op::Write(a, b)),
        1 => Just(Op::Delete),
        1 => Just(Op::Garbage),
        2 => (0u64..4).prop_map(Op::Accept),
        1 => Just(Op::BadAnnotation),
        1 => Just(Op::ClearAnnotation),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Over random histories of updates, deletions, garbage and settings changes, the promoted dir holds
    /// exactly the last snapshot that was accepted under the settings in force when it was judged.
    #[test]
    fn promoted_dir_only_holds_accepted_snapshots(ops in proptest::collection::vec(op(), 1..24)) {
        let d = Dirs::new();
        let base = confgate::settings::Settings::from_raw(&confgate::settings::Raw {
            accepts: Some("^1".into()),
            ..Default::default()
        }).unwrap();
        let cfg = confgate::gate::Config {
            watch: d.watch(),
            promote_to: Some(d.promoted()),
            annotations: d.podinfo().join("annotations"),
            resync: std::time::Duration::from_secs(30),
            bucket: None,
        };
        let shared = confgate::state::Shared::new();
        // The pipeline judges on the runtime's blocking pool, as the sidecar does.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut p = rt.block_on(confgate::gate::Pipeline::open(cfg, confgate::gate::Feed::Volume, base, shared, confgate::reload::Handle::inert())).unwrap();
        // The model: the range in force (flag ^1 unless a valid annotation says otherwise) and the
        // version that must be promoted.
        let mut range = semver::VersionReq::parse("^1").unwrap();
        let mut promoted: Option<String> = None;
        let mut current: Option<String> = None;
        for op in ops {
            match &op {
                Op::Write(a, b) => {
                    let v = format!("{a}.{b}.0");
                    write_version(&d.watch(), &v);
                    current = Some(v);
                }
                Op::Delete => { kubelet_write(&d.watch(), &[]); current = None; }
                Op::Garbage => { write_version(&d.watch(), "not-a-version"); current = None; }
                Op::Accept(m) => {
                    write_annotations(&d.podinfo(), &[("confgate.io/accepts", &format!("^{m}"))]);
                    range = semver::VersionReq::parse(&format!("^{m}")).unwrap();
                }
                Op::BadAnnotation => write_annotations(&d.podinfo(), &[("confgate.io/accepts", "^^")]),
                Op::ClearAnnotation => {
                    write_annotations(&d.podinfo(), &[]);
                    range = semver::VersionReq::parse("^1").unwrap();
                }
            }
            rt.block_on(async {
                p.annotations_changed().await;
                p.process().await;
            });
            if let Some(v) = &current
                && range.matches(&semver::Version::parse(v).unwrap())
            {
                promoted = Some(v.clone());
            }
            let on_disk = read_promoted(&d.promoted()).map(|m| m["version"].clone());
            prop_assert_eq!(&on_disk, &promoted, "after {:?}", op);
        }
    }
}
