//! The promoted dir as a reader and a restart find it after each kind of promotion, failure and
//! rollback.

use super::markers::{REJECTED_TMP, Rejected, baseline_dir};
use super::*;
use crate::reload::{Refusal, RefusedBy};
use std::collections::BTreeMap;

pub(super) fn snap(pairs: &[(&str, &str)]) -> Snapshot {
    Snapshot::new(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn rolls_back_to_the_applied_dir_in_one_switch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    assert!(matches!(p.roll_back(), Err(Error::NoApplied { .. })));
    let a = snap(&[("version", "1.0.0"), ("rules.yml", "good")]);
    p.promote(&a).unwrap();
    p.mark_applied().unwrap();
    let b = snap(&[("version", "1.1.0"), ("extra.yml", "bad")]);
    p.promote(&b).unwrap();
    // The applied dir outlives the promotion that replaced it; nothing else is left.
    let dirs = names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("..2"))
        .count();
    assert_eq!(dirs, 2, "{:?}", names(&dir));
    let now = p.roll_back().unwrap();
    assert_eq!(now.hash(), Some(a.hash()));
    assert_eq!(
        std::fs::read_to_string(dir.join("rules.yml")).unwrap(),
        "good"
    );
    assert!(std::fs::symlink_metadata(dir.join("extra.yml")).is_err());
    let dirs = names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("..2"))
        .count();
    assert_eq!(dirs, 1, "{:?}", names(&dir));
    // A restart of the component reads the rolled-back files; a later promotion keeps them.
    p.promote(&b).unwrap();
    assert_eq!(p.roll_back().unwrap().hash(), Some(a.hash()));
    let (_, reopened) = Promoter::open(&dir).unwrap();
    assert_eq!(reopened.hash(), Some(a.hash()));
}

#[test]
fn what_the_component_did_is_read_back_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    assert!(p.applied().is_none());
    assert_eq!(p.rejected(), Rejected::default());
    let a = snap(&[("version", "1.0.0"), ("sub/rules.yml", "good")]);
    let b = snap(&[("version", "1.1.0")]);
    p.promote(&a).unwrap();
    p.mark_applied().unwrap();
    p.promote(&b).unwrap();
    let target: crate::values::Reload = "http://127.0.0.1:9/reload".parse().unwrap();
    let refused = vec![
        (
            b.hash(),
            Refusal {
                by: RefusedBy::Answer {
                    target: target.to_string(),
                    status: 500,
                },
                said: "bad\nrule\tx".to_owned(),
            },
        ),
        (
            snap(&[("v", "9")]).hash(),
            Refusal {
                by: RefusedBy::Metrics,
                said: String::new(),
            },
        ),
    ];
    p.record_rejected(&target, &refused).unwrap();
    // A crash while recording leaves a temporary file; a restart removes it and keeps the record.
    std::fs::write(dir.join(REJECTED_TMP), "sha256:half").unwrap();
    let (p, now) = Promoter::open(&dir).unwrap();
    assert_eq!(now.hash(), Some(b.hash()));
    assert!(!dir.join(REJECTED_TMP).exists());
    let (applied, since) = p.applied().unwrap();
    assert_eq!(applied.hash(), Some(a.hash()));
    assert!(since.is_some());
    let back = p.rejected();
    assert_eq!(back.ignored, None);
    assert_eq!(back.target, RecordTarget::Named(target));
    // Each refusal's kind and words; the words are one line: a newline would have started a record.
    let mut one_line = refused.clone();
    one_line[0].1.said = "bad rule x".into();
    assert_eq!(back.entries, one_line);
    // The markers are not keys.
    assert_eq!(snapshot::read(&dir), Observed::Config(b));
}

#[test]
fn promotes_in_kubelet_layout_and_unlinks_removed_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, now) = Promoter::open(&dir).unwrap();
    assert!(matches!(now, Observed::Missing(_)));
    let a = snap(&[("version", "1.0.0"), ("extra.txt", "x")]);
    p.promote(&a).unwrap();
    assert_eq!(snapshot::read(&dir), Observed::Config(a));
    let listing = names(&dir);
    assert_eq!(listing.len(), 4, "{listing:?}");
    assert!(listing[0].starts_with("..20") && listing[1] == "..data");
    assert_eq!(
        std::fs::read_link(dir.join("extra.txt")).unwrap(),
        Path::new("..data/extra.txt")
    );
    let b = snap(&[("version", "1.1.0"), ("sub/deep", "y")]);
    p.promote(&b).unwrap();
    assert_eq!(snapshot::read(&dir), Observed::Config(b));
    let listing = names(&dir);
    assert_eq!(listing.len(), 4, "{listing:?}");
    assert!(listing.contains(&"sub".into()) && !listing.contains(&"extra.txt".into()));
    assert_eq!(std::fs::read_to_string(dir.join("sub/deep")).unwrap(), "y");
    let ts = std::fs::read_link(dir.join("..data")).unwrap();
    let mode = std::fs::metadata(dir.join(ts))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

#[test]
fn open_cleans_every_kind_of_leftover() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "1.0.0"), ("gone", "x")]);
    p.promote(&a).unwrap();
    // What a crash at each step could leave: a filled dir never swapped in, a dangling tmp link,
    // a link to a key the live config no longer has, a missing link for a live key.
    std::fs::create_dir(dir.join("..2026_01_01_00_00_00.1")).unwrap();
    std::fs::write(dir.join("..2026_01_01_00_00_00.1/version"), "9.9.9").unwrap();
    std::os::unix::fs::symlink("..2026_01_01_00_00_00.1", dir.join("..data_tmp")).unwrap();
    std::os::unix::fs::symlink("..data/stale", dir.join("stale")).unwrap();
    std::fs::remove_file(dir.join("gone")).unwrap();
    std::fs::write(dir.join("not-ours"), "keep").unwrap();
    let (_, now) = Promoter::open(&dir).unwrap();
    assert_eq!(now, Observed::Config(a));
    let listing = names(&dir);
    assert_eq!(listing.len(), 5, "{listing:?}");
    assert!(listing.contains(&"gone".into()) && listing.contains(&"not-ours".into()));
    assert!(!listing.contains(&"stale".into()) && !listing.contains(&"..data_tmp".into()));
}

/// `open` removes a `..data_tmp` a crash left; a promotion that meets one anyway (left after `open`
/// by another writer, or by a crash of a second process) replaces it instead of failing.
#[test]
fn a_promotion_replaces_a_leftover_data_tmp() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    p.promote(&snap(&[("version", "1.0.0")])).unwrap();
    std::os::unix::fs::symlink("..elsewhere", dir.join("..data_tmp")).unwrap();
    let b = snap(&[("version", "2.0.0")]);
    p.promote(&b).unwrap();
    assert_eq!(snapshot::read(&dir), Observed::Config(b));
    assert!(!names(&dir).contains(&"..data_tmp".into()));
}

/// The same for the records' temporary links: a leftover of each is replaced, not an error.
#[test]
fn a_record_replaces_a_leftover_temporary_link() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "1.0.0")]);
    p.promote(&a).unwrap();
    for leftover in ["..confgate_applied_tmp", "..confgate_reload_owed_tmp"] {
        std::os::unix::fs::symlink("..elsewhere", dir.join(leftover)).unwrap();
    }
    p.mark_applied().unwrap();
    p.mark_reload_owed(a.hash()).unwrap();
    assert_eq!(
        p.applied().map(|(obs, _)| obs),
        Some(Observed::Config(a.clone()))
    );
    assert_eq!(p.reload_owed(), Some(a.hash()));
    let listing = names(&dir);
    assert!(!listing.iter().any(|n| n.ends_with("_tmp")), "{listing:?}");
}

#[test]
fn a_failed_write_leaves_the_previous_config_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "1.0.0")]);
    p.promote(&a).unwrap();
    // A key whose parent is a file cannot be written: the promotion fails midway.
    let bad = snap(&[("version", "2.0.0"), ("x", "1"), ("x/y", "2")]);
    assert!(p.promote(&bad).is_err());
    assert_eq!(snapshot::read(&dir), Observed::Config(a));
    assert_eq!(names(&dir).len(), 3, "{:?}", names(&dir));
}

#[test]
fn refuses_a_file_as_the_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("file");
    std::fs::write(&f, "").unwrap();
    let err = Promoter::open(&f).unwrap_err().to_string();
    assert!(err.contains("is not a directory"), "{err}");
}

#[test]
fn key_modes_are_promoted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let files: BTreeMap<String, Vec<u8>> = [
        ("run.sh", "#!/bin/sh"),
        ("secret", "s"),
        ("sub/x", "y"),
        ("version", "1"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
    .collect();
    let modes = [("run.sh", 0o755), ("secret", 0o400), ("sub/x", 0o600)]
        .iter()
        .map(|(k, m)| ((*k).to_owned(), *m))
        .collect();
    let a = Snapshot::with_modes(files, modes);
    p.promote(&a).unwrap();
    let mode = |k: &str| std::fs::metadata(dir.join(k)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("run.sh"), 0o755);
    assert_eq!(mode("secret"), 0o400);
    assert_eq!(mode("sub/x"), 0o600);
    assert_eq!(mode("version"), 0o644);
    // Read back, the promoted dir is the same snapshot, modes included.
    assert_eq!(snapshot::read(&dir), Observed::Config(a));
}

#[test]
fn reload_owed_is_recorded_before_the_switch_and_cleared_by_its_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    assert_eq!(p.reload_owed(), None);
    let a = snap(&[("version", "1.0.0")]);
    let b = snap(&[("version", "2.0.0")]);
    p.switch(&a, true, false).map(|s| p.finish(s)).unwrap();
    // A restart (a new `open`) finds it, and start-up cleaning keeps it.
    let (p, _) = Promoter::open(&dir).unwrap();
    assert_eq!(p.reload_owed(), Some(a.hash()));
    p.switch(&b, true, false).map(|s| p.finish(s)).unwrap();
    // A late success for the older config does not clear the newer debt.
    assert!(!p.clear_reload_owed(a.hash()).unwrap());
    assert_eq!(p.reload_owed(), Some(b.hash()));
    assert!(p.clear_reload_owed(b.hash()).unwrap());
    assert_eq!(p.reload_owed(), None);
    // A failed promotion leaves the record as it was.
    p.mark_reload_owed(b.hash()).unwrap();
    let bad = snap(&[("version", "3.0.0"), ("x", "1"), ("x/y", "2")]);
    assert!(p.switch(&bad, true, false).map(|s| p.finish(s)).is_err());
    assert_eq!(p.reload_owed(), Some(b.hash()));
    assert_eq!(snapshot::read(&dir), Observed::Config(b.clone()));
    // The marker is not a key, and a plain promotion keeps it.
    p.promote(&a).unwrap();
    assert_eq!(snapshot::read(&dir), Observed::Config(a));
    assert_eq!(p.reload_owed(), Some(b.hash()));
}

/// The marker an earlier version wrote (a file holding the hash) is still read, and replaced by the
/// next one; a link left by a crash between writing and renaming does not stop the next record.
#[test]
fn a_reload_owed_file_of_an_earlier_version_and_a_leftover_link_are_read_and_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "1.0.0")]);
    let b = snap(&[("version", "2.0.0")]);
    std::fs::write(dir.join(RELOAD_OWED), format!("{}\n", a.hash().plain())).unwrap();
    assert_eq!(p.reload_owed(), Some(a.hash()));
    std::os::unix::fs::symlink(
        "sha256:left-by-a-crash",
        dir.join("..confgate_reload_owed_tmp"),
    )
    .unwrap();
    p.mark_reload_owed(b.hash()).unwrap();
    assert_eq!(p.reload_owed(), Some(b.hash()));
    let target = std::fs::read_link(dir.join(RELOAD_OWED)).unwrap();
    assert_eq!(target.to_str(), Some(b.hash().plain().to_string().as_str()));
    assert!(p.clear_reload_owed(b.hash()).unwrap());
    assert!(std::fs::symlink_metadata(dir.join(RELOAD_OWED)).is_err());
}

#[test]
fn switch_makes_the_new_config_live_and_finish_removes_the_old_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "1.0.0"), ("gone", "x")]);
    p.promote(&a).unwrap();
    let old = std::fs::read_link(dir.join("..data")).unwrap();
    let b = snap(&[("version", "2.0.0"), ("new", "y")]);
    let switched = p.switch(&b, false, false).unwrap();
    // Live and whole before any tidying: what a reload requested now would read.
    assert_eq!(snapshot::read(&dir), Observed::Config(b.clone()));
    assert_eq!(std::fs::read_to_string(dir.join("new")).unwrap(), "y");
    assert!(dir.join(&old).is_dir(), "the old dir waits for finish");
    assert!(p.needs_tidy());
    p.finish(switched);
    assert!(!dir.join(&old).exists());
    assert!(std::fs::symlink_metadata(dir.join("gone")).is_err());
    assert!(!p.needs_tidy());
    assert_eq!(names(&dir).len(), 4, "{:?}", names(&dir));
    assert_eq!(snapshot::read(&dir), Observed::Config(b));
}

#[test]
fn leftovers_of_an_unfinished_tidy_go_at_the_next_promotion_or_tidy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    p.promote(&snap(&[("version", "1.0.0")])).unwrap();
    // What a removal cut short leaves: an old dir half gone.
    std::fs::create_dir_all(dir.join("..2026_01_01_00_00_00.7/sub")).unwrap();
    p.promote(&snap(&[("version", "2.0.0")])).unwrap();
    assert_eq!(names(&dir).len(), 3, "{:?}", names(&dir));
    assert!(!p.needs_tidy());
    std::fs::create_dir_all(dir.join("..2026_01_01_00_00_00.8")).unwrap();
    p.tidy().unwrap();
    assert_eq!(names(&dir).len(), 3, "{:?}", names(&dir));
}

#[test]
fn the_variant_promoted_is_read_back_for_the_live_and_the_applied_config() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, _) = Promoter::open(&tmp.path().join("promoted")).unwrap();
    let a = snap(&[("config.yaml", "version: 2.0.0\n")]);
    p.switch_variant(&a, false, Some("config.v2.yaml"), false)
        .map(|s| p.finish(s))
        .unwrap();
    p.mark_applied().unwrap();
    let b = snap(&[("config.yaml", "version: 3.0.0\n")]);
    p.switch_variant(&b, false, Some("config.v3.yaml"), false)
        .map(|s| p.finish(s))
        .unwrap();
    assert_eq!(
        p.variants(),
        (Some("config.v3.yaml".into()), Some("config.v2.yaml".into()))
    );
    // The record is not a key: the snapshot's hash is the config's alone.
    assert_eq!(snapshot::read(p.dir()), Observed::Config(b));
    p.roll_back().unwrap();
    assert_eq!(p.variants().0.as_deref(), Some("config.v2.yaml"));
    // Without variants nothing is recorded; a record naming no key is ignored.
    p.switch(&a, false, false).map(|s| p.finish(s)).unwrap();
    assert_eq!(p.variants().0, None);
    let live = p
        .dir()
        .join(std::fs::read_link(p.dir().join(DATA_LINK)).unwrap());
    std::os::unix::fs::symlink("../../etc/passwd", live.join(VARIANT)).unwrap();
    assert_eq!(p.variants().0, None);
}

/// The first config, kept beside the promotion that replaced it before its start-up check
/// concluded, becomes the rollback base when the component is found to have run it; a restart
/// drops a kept dir nothing waits for.
#[test]
fn the_first_config_kept_as_the_baseline_is_rolled_back_to_once_adopted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "2.0.0"), ("rules.yml", "good")]);
    let b = snap(&[("version", "2.1.0"), ("rules.yml", "bad")]);
    p.switch(&a, true, false).map(|s| p.finish(s)).unwrap();
    p.switch(&b, true, true).map(|s| p.finish(s)).unwrap();
    assert!(baseline_dir(p.dir()).is_some(), "{:?}", names(&dir));
    assert!(p.applied().is_none(), "kept, not yet applied");
    p.adopt_baseline().unwrap();
    assert_eq!(p.roll_back().unwrap().hash(), Some(a.hash()));
    assert_eq!(
        std::fs::read_to_string(dir.join("rules.yml")).unwrap(),
        "good"
    );

    // Kept, then a later config applied: the kept dir goes with the mark.
    p.switch(&b, true, true).map(|s| p.finish(s)).unwrap();
    p.mark_applied().unwrap();
    assert!(baseline_dir(p.dir()).is_none());
    let dirs = names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("..2"))
        .count();
    assert_eq!(dirs, 1, "{:?}", names(&dir));

    // Kept, then a restart: nothing waits for it any more.
    p.switch(&a, true, true).map(|s| p.finish(s)).unwrap();
    let (p, _) = Promoter::open(&dir).unwrap();
    assert!(baseline_dir(p.dir()).is_none());
    assert!(std::fs::symlink_metadata(dir.join(BASELINE)).is_err());
}

/// `..confgate_applied` replaced by a directory (the component can write into the promoted dir):
/// the next applied config sets it aside and writes the record again, so a rollback still works.
#[test]
fn an_applied_record_replaced_by_a_directory_is_rewritten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "2.0.0")]);
    let b = snap(&[("version", "2.1.0")]);
    p.promote(&a).unwrap();
    p.mark_applied().unwrap();
    std::fs::remove_file(dir.join(APPLIED)).unwrap();
    std::fs::create_dir(dir.join(APPLIED)).unwrap();
    std::fs::write(dir.join(APPLIED).join("x"), "not a record").unwrap();
    assert!(matches!(p.roll_back(), Err(Error::NoApplied { .. })));
    p.mark_applied().unwrap();
    assert!(
        std::fs::symlink_metadata(dir.join(APPLIED))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    p.promote(&b).unwrap();
    assert_eq!(p.roll_back().unwrap().hash(), Some(a.hash()));
}

/// A promotion does not look again at the key links it made or checked (on its way to the reload),
/// yet every key of the new config has its link when it goes live: one dropped by the promotion
/// before is made again before the switch, and one something else removed is back once the
/// promotion is finished.
#[test]
fn every_key_is_linked_when_live_whatever_the_promotions_before() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let linked = |key: &str| std::fs::read_link(dir.join(key)).ok();
    let data = |key: &str| Some(std::path::Path::new(DATA_LINK).join(key));
    p.promote(&snap(&[("version", "1"), ("extra", "x")]))
        .unwrap();
    p.promote(&snap(&[("version", "2")])).unwrap();
    assert_eq!(linked("extra"), None);
    let s = p
        .switch(&snap(&[("version", "3"), ("extra", "y")]), false, false)
        .unwrap();
    assert_eq!(linked("extra"), data("extra"), "linked before the switch");
    p.finish(s);
    std::fs::remove_file(dir.join("version")).unwrap();
    p.promote(&snap(&[("version", "4"), ("extra", "z")]))
        .unwrap();
    assert_eq!(linked("version"), data("version"));
    assert_eq!(
        snapshot::read(&dir),
        Observed::Config(snap(&[("version", "4"), ("extra", "z")]))
    );
}

/// What a promotion restores when it fails is the reload-owed marker as the last clear left it.
#[test]
fn a_failed_promotion_after_a_cleared_reload_leaves_none_owed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let a = snap(&[("version", "1.0.0")]);
    p.switch(&a, true, false).map(|s| p.finish(s)).unwrap();
    assert!(p.clear_reload_owed(a.hash()).unwrap());
    let bad = snap(&[("version", "3.0.0"), ("x", "1"), ("x/y", "2")]);
    assert!(p.switch(&bad, true, false).is_err());
    assert_eq!(p.reload_owed(), None);
    assert!(std::fs::symlink_metadata(dir.join(RELOAD_OWED)).is_err());
}

#[test]
fn a_promoted_dir_is_named_as_the_kubelet_names_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let before = jiff::Timestamp::now();
    p.promote(&snap(&[("version", "1.0.0")])).unwrap();
    let name = std::fs::read_link(dir.join(DATA_LINK)).unwrap();
    let name = name.to_str().unwrap();
    // `..YYYY_MM_DD_HH_MM_SS.N`, UTC, the time of the promotion.
    let (stamp, n) = name.strip_prefix("..").unwrap().split_once('.').unwrap();
    n.parse::<u32>().unwrap();
    let at = jiff::civil::DateTime::strptime("%Y_%m_%d_%H_%M_%S", stamp)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .unwrap()
        .timestamp();
    let after = jiff::Timestamp::now();
    assert_eq!(stamp.len(), "2026_01_02_03_04_05".len(), "{name}");
    // The name keeps whole seconds: the promotion's time, cut to the second.
    assert!(
        at > before - jiff::SignedDuration::from_secs(1) && at <= after,
        "{name} is not the time of the promotion ({before} to {after})"
    );
}
