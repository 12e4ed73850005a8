//! The record's lines, entries and the decision to write.

use std::collections::BTreeMap;

use super::*;

fn semver(s: &str) -> SchemeVersion {
    SchemeVersion::Semver(parse_lenient(s).unwrap())
}

fn api(s: &str) -> SchemeVersion {
    SchemeVersion::Api(s.parse().unwrap())
}

#[test]
fn a_line_is_the_major_or_the_group_and_version() {
    assert_eq!(Line::of(&semver("2.4.1")), Some(Line::Major(2)));
    assert_eq!(Line::of(&semver("2.4.1")).unwrap().key(), "v2");
    assert_eq!(Line::of(&semver("3.0.0-rc.1")).unwrap().key(), "v3");
    let l = Line::of(&api("kubescheduler.config.k8s.io/v1beta3")).unwrap();
    assert_eq!(l.key(), "api.kubescheduler.config.k8s.io_v1beta3");
    assert_eq!(l.to_string(), "kubescheduler.config.k8s.io/v1beta3");
    assert_ne!(Some(l), Line::of(&api("kubescheduler.config.k8s.io/v1")));
}

#[test]
fn only_a_newer_version_replaces_what_is_recorded() {
    assert_eq!(decide(None, &semver("2.4.1")), Write::Create);
    assert_eq!(
        decide(Some("2.4.0"), &semver("2.4.1")),
        Write::Replace {
            older: "2.4.0".into()
        }
    );
    // Another pod of the same change was first: nothing more to write.
    assert_eq!(
        decide(Some("2.4.1"), &semver("2.4.1")),
        Write::Keep {
            recorded: "2.4.1".into(),
            newer: false
        }
    );
    // A lagging pod never puts an older one back.
    assert_eq!(
        decide(Some("2.5.0"), &semver("2.4.1")),
        Write::Keep {
            recorded: "2.5.0".into(),
            newer: true
        }
    );
    assert!(matches!(
        decide(Some("garbage"), &semver("2.4.1")),
        Write::Replace { .. }
    ));
    assert_eq!(
        decide(
            Some("kubescheduler.config.k8s.io/v1beta3"),
            &api("kubescheduler.config.k8s.io/v1")
        ),
        Write::Replace {
            older: "kubescheduler.config.k8s.io/v1beta3".into()
        }
    );
}

#[test]
fn an_entry_gives_back_the_same_config_and_shows_no_content() {
    let files = BTreeMap::from([
        ("config.yaml".to_owned(), b"schemaVersion: 2.4.1\n".to_vec()),
        ("secret.bin".to_owned(), vec![0, 159, 146, 150]),
    ]);
    let snap = Snapshot::with_modes(files, BTreeMap::from([("secret.bin".to_owned(), 0o600)]));
    let e = Entry::of(&snap, "2.4.1");
    let back = Entry::from_json(&e.to_json()).unwrap().snapshot().unwrap();
    assert_eq!(back.hash(), snap.hash());
    assert_eq!(back.mode("secret.bin"), 0o600);
    let shown = format!("{e:?}");
    assert!(
        !shown.contains("schemaVersion") && !shown.contains("c2NoZW1h"),
        "{shown}"
    );
    let bad = Entry::from_json("{\"version\": \"2.4.1\", \"keys\": {\"k\": {\"data\": \"!!\"}}}")
        .unwrap()
        .snapshot()
        .unwrap_err();
    assert_eq!(bad, EntryError::Base64("k".into()));
    let e = Entry::from_json("schemaVersion: hunter2").unwrap_err();
    assert!(!e.to_string().contains("hunter2"), "{e}");
}

/// A record is written by whoever holds its Role, and its keys are joined to the promoted dir: a key
/// that leads out of the config's own dir (or onto the dir's links and markers) makes the entry
/// unreadable, so it is skipped, never promoted; nested keys, as a volume's item paths make, pass.
#[test]
fn an_entry_whose_key_leads_out_of_the_promoted_dir_is_unreadable() {
    let entry = |key: &str| {
        Entry::from_json(&format!(
            "{{\"version\": \"2.4.1\", \"keys\": {{\"config.yaml\": {{\"data\": \"eA==\"}}, {key:?}: {{\"data\": \"eA==\"}}}}}}"
        ))
        .unwrap()
        .snapshot()
    };
    for key in [
        "../escaped",
        "../../../tmp/escaped",
        "/etc/confgate/active/escaped",
        "a/../../escaped",
        "..data",
        "..confgate_applied",
        "",
        "a//b",
        "./a",
    ] {
        assert_eq!(
            entry(key).unwrap_err(),
            EntryError::Key(key.into()),
            "{key:?}"
        );
    }
    for key in ["app.yaml", "conf.d/extra.yaml", ".hidden", "a..b"] {
        assert!(entry(key).is_ok(), "{key:?}");
    }
}

/// An entry claiming a version of another line than its key (a forged `99.0.0` in line `v2`, an API
/// version of another group) is replaced by the line's next known-good, rather than kept as newer
/// for ever.
#[test]
fn a_recorded_version_of_another_line_is_replaced() {
    assert_eq!(
        decide(Some("99.0.0"), &semver("2.4.1")),
        Write::Replace {
            older: "99.0.0".into()
        }
    );
    assert_eq!(
        decide(
            Some("other.example/v2"),
            &api("kubescheduler.config.k8s.io/v1")
        ),
        Write::Replace {
            older: "other.example/v2".into()
        }
    );
    assert_eq!(
        decide(Some("2.9.0"), &semver("2.4.1")),
        Write::Keep {
            recorded: "2.9.0".into(),
            newer: true
        }
    );
}
