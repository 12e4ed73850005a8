//! The records the promoted dir keeps for a restart (refusals, settings), read back across their
//! format's versions and when damaged or hostile.

use super::markers::{REJECTED_READ_MAX, REJECTED_REASON_MAX};
use super::tests::snap;
use super::*;
use crate::reload::{Refusal, RefusedBy};

#[test]
fn a_damaged_record_of_refusals_is_read_as_far_as_it_makes_sense() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let good = snap(&[("version", "1.0.0")]).hash();
    let mut text = b"garbage\nsha256:12ab\n\xff\xfe\x00\n".to_vec();
    text.extend_from_slice(format!("{good} it said no\nsha256:{}\n", "g".repeat(64)).as_bytes());
    std::fs::write(dir.join(REJECTED), &text).unwrap();
    let r = p.rejected();
    assert_eq!(r.entries, [(good, recorded("it said no", true))]);
    assert_eq!(
        r.target,
        RecordTarget::Unnamed,
        "an earlier version's record"
    );
    let why = r.ignored.unwrap();
    assert!(why.contains("4 line(s)"), "{why}");
    // Too big to be ours: read up to the bound, said so.
    let mut big = format!("{good} first\n").into_bytes();
    big.resize(REJECTED_READ_MAX as usize * 4, b'x');
    std::fs::write(dir.join(REJECTED), &big).unwrap();
    let r = p.rejected();
    assert_eq!(r.entries, [(good, recorded("first", true))]);
    assert!(r.ignored.unwrap().contains("over"));
    // Not a file at all.
    std::fs::remove_file(dir.join(REJECTED)).unwrap();
    std::fs::create_dir(dir.join(REJECTED)).unwrap();
    let r = p.rejected();
    assert!(r.entries.is_empty() && r.ignored.is_some(), "{r:?}");
    // Set aside, so the next refusal can be recorded.
    assert!(!dir.join(REJECTED).exists());
    assert!(dir.join(format!("{REJECTED}.bad")).is_dir());
    // A long reason is cut.
    p.record_rejected(
        &crate::values::Reload::None,
        &[(good, recorded(&"é".repeat(1000), true))],
    )
    .unwrap();
    let (_, why) = &p.rejected().entries[0];
    let why = &why.said;
    assert!(why.len() <= REJECTED_REASON_MAX + '…'.len_utf8() && why.ends_with('…'));
}

/// The record of the settings in force reads back what was written; one that is not a file confgate
/// wrote (a FIFO, over the bound, not in the annotations format, a dir) is set aside, never waited
/// on, and a dir in its place does not stop the next record.
#[test]
fn the_settings_record_reads_back_and_a_hostile_one_is_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    assert_eq!(p.settings_in_force(), Ok(Default::default()));
    let values: crate::annotations::Annotations = [(
        "confgate.io/rules".to_owned(),
        "size(data) > 0\n# a comment \"quoted\"".to_owned(),
    )]
    .into();
    p.record_settings(&values).unwrap();
    assert_eq!(p.settings_in_force(), Ok(values.clone()));
    // Kept by the clean-up a restart makes.
    let (p, _) = Promoter::open(&dir).unwrap();
    assert_eq!(p.settings_in_force(), Ok(values.clone()));
    let record = dir.join("..confgate_settings");
    let aside = dir.join("..confgate_settings.bad");
    std::fs::remove_file(&record).unwrap();
    nix::unistd::mkfifo(&record, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let why = p.settings_in_force().unwrap_err();
    assert!(why.contains("set aside"), "{why}");
    assert!(aside.exists() && !record.exists());
    std::fs::write(&record, "no equals sign").unwrap();
    assert!(p.settings_in_force().is_err());
    std::fs::write(&record, vec![b'a'; 300 << 10]).unwrap();
    assert!(p.settings_in_force().unwrap_err().contains("over"));
    std::fs::create_dir(&record).unwrap();
    assert!(p.settings_in_force().is_err());
    if !record.exists() {
        std::fs::create_dir(&record).unwrap();
    }
    p.record_settings(&values).unwrap();
    assert_eq!(p.settings_in_force(), Ok(values));
}

fn recorded(said: &str, holds: bool) -> Refusal {
    Refusal {
        by: RefusedBy::Recorded { holds },
        said: said.into(),
    }
}

/// A record an earlier version wrote (each reason its error's text, with or without the target
/// line) reads back: every reason as it was worded, and whether it refused the content told from
/// it once, here, so the gate decides on that and never on the words. Written again, it is format 2
/// and reads back the same.
#[test]
fn an_earlier_versions_record_of_refusals_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let (p, _) = Promoter::open(&dir).unwrap();
    let h = |v: &str| snap(&[("version", v)]).hash();
    let lines = [
        (
            "1",
            "POST http://127.0.0.1:9090/-/reload answered 500: failed to reload config: x",
            true,
        ),
        (
            "2",
            "POST http://127.0.0.1:9090/-/relaod answered 404: 404 page not found",
            false,
        ),
        (
            "3",
            "POST http://127.0.0.1:9090/-/reload answered 403: Lifecycle API is not enabled.",
            false,
        ),
        (
            "4",
            "POST http://127.0.0.1:9090/-/reload answered 404; not reached: the reload target is misconfigured (a wrong path or method, missing credentials, or an endpoint that is off)",
            false,
        ),
        (
            "5",
            "the component's metrics: up is 0 after the reload",
            true,
        ),
        ("6", "POST answered 500: bad rule", true),
    ];
    let mut text = String::new();
    for (v, why, _) in lines {
        text.push_str(&format!("{} {why}\n", h(v)));
    }
    std::fs::write(dir.join(REJECTED), &text).unwrap();
    let r = p.rejected();
    assert_eq!(r.target, RecordTarget::Unnamed);
    let want: Vec<_> = lines
        .iter()
        .map(|(v, why, holds)| (h(v), recorded(why, *holds)))
        .collect();
    assert_eq!(r.entries, want);
    // Shown as it was worded.
    assert_eq!(r.entries[0].1.to_string(), lines[0].1);
    // With the target line of the version before this format.
    std::fs::write(
        dir.join(REJECTED),
        format!("target signal:HUP:prometheus\n{text}"),
    )
    .unwrap();
    let r = p.rejected();
    assert_eq!(
        r.target,
        RecordTarget::Named("signal:HUP:prometheus".parse().unwrap())
    );
    assert_eq!(r.entries, want);
    // Written again: format 2, the same refusals.
    let target: crate::values::Reload = "http://u:p@127.0.0.1:9090/-/reload".parse().unwrap();
    p.record_rejected(&target, &r.entries).unwrap();
    let again = p.rejected();
    assert_eq!(again.entries, want);
    assert!(
        matches!(&again.target, RecordTarget::Named(t) if t.same_target(&target)),
        "{again:?}"
    );
    let written = std::fs::read_to_string(dir.join(REJECTED)).unwrap();
    assert!(written.starts_with("confgate-rejected 2\n"), "{written}");
    assert!(!written.contains("u:p"), "no credential on disk: {written}");
}
