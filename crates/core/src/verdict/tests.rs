//! The verdict table, the reasons and their fixes, and hostile documents.

use super::*;
use crate::settings::Settings;
use std::collections::BTreeMap;

pub(super) fn settings(accepts: Option<&str>, from: &str, require: &[&str]) -> Settings {
    Settings {
        accepts: accepts.map(|a| crate::values::parse_accepts(a).unwrap()),
        version_from: from.parse().unwrap(),
        require: require.iter().map(|s| (*s).to_owned()).collect(),
        ..Settings::default()
    }
}

pub(super) fn snap(files: &[(&str, &[u8])]) -> Observed {
    Observed::Config(Snapshot::new(
        files
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_vec()))
            .collect::<BTreeMap<_, _>>(),
    ))
}

/// One row: files, accepts, version-from, required keys → verdict, version as read, reason fragment.
fn check(
    files: &[(&str, &[u8])],
    accepts: Option<&str>,
    from: &str,
    require: &[&str],
    want: (Verdict, Option<&str>, &str),
) {
    let j = judge(&snap(files), &settings(accepts, from, require));
    assert_eq!(
        (j.verdict, j.version.as_deref()),
        (want.0, want.1),
        "{files:?} {accepts:?} {from}: {}",
        j.reason
    );
    assert!(
        j.reason.contains(want.2),
        "reason {:?} lacks {:?}",
        j.reason,
        want.2
    );
}

#[test]
fn an_overlong_version_is_invalid_and_not_echoed() {
    let long = "9".repeat(100_000);
    let j = judge(
        &snap(&[("version", long.as_bytes())]),
        &settings(Some("^1"), "file:version", &[]),
    );
    assert_eq!((j.verdict, j.version), (Verdict::Invalid, None));
    assert_eq!(
        j.reason,
        "the version at file:version is 100000 bytes long; a version is at most 256 bytes; write a version such as 2.4.1 at file:version in the ConfigMap"
    );
    let ok = format!("1.0.0+{}", "b".repeat(250));
    let j = judge(
        &snap(&[("version", ok.as_bytes())]),
        &settings(Some("^1"), "file:version", &[]),
    );
    assert_eq!(j.verdict, Verdict::Accepted, "{}", j.reason);
}

#[test]
fn a_reason_lists_a_few_keys_however_many_there_are() {
    let names: Vec<String> = (0..1000).map(|i| format!("key-{i:04}")).collect();
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|k| (k.as_str(), b"x".as_slice()))
        .collect();
    let j = judge(
        &snap(&files),
        &settings(Some("^1"), "file:version", &["a", "b", "c", "d", "e", "f"]),
    );
    assert_eq!(
        j.reason,
        "required keys a, b, c, d, e and 1 more are absent (present: key-0000, key-0001, key-0002, key-0003, key-0004 and 995 more); add them to the ConfigMap, or drop them from confgate.io/require"
    );
    let j = judge(&snap(&files), &settings(Some("^1"), "file:version", &[]));
    assert!(
        j.reason.contains(
            "(present: key-0000, key-0001, key-0002, key-0003, key-0004 and 995 more); add key"
        ),
        "{}",
        j.reason
    );
    // A key name is never content, but a long one is cut, at a character boundary.
    let long = "ü".repeat(1000);
    let j = judge(
        &snap(&[(long.as_str(), b"x")]),
        &settings(Some("^1"), "file:version", &[]),
    );
    assert!(
        j.reason.len() < 500 && j.reason.contains("… (2000 bytes)); add key version"),
        "{}",
        j.reason
    );
}

#[test]
#[rustfmt::skip]
fn verdict_table() {
    use Verdict::*;
    let r = Some(">=2.4.0, <3.0.0");
    let f = "file:version";
    check(&[("version", b"2.4.1\n")], r, f, &[], (Accepted, Some("2.4.1"), "is in >=2.4.0, <3.0.0"));
    check(&[("version", b"v2.5")], r, f, &[], (Accepted, Some("v2.5"), "2.5.0 is in"));
    check(&[("version", b"3")], r, f, &[], (TooNew, Some("3"), "3.0.0 is newer"));
    check(&[("version", b"2.3.9")], r, f, &[], (TooOld, Some("2.3.9"), "older than"));
    check(&[("version", b"2.5.0-rc.1")], r, f, &[], (OutOfRange, Some("2.5.0-rc.1"), "pre-release"));
    check(&[("version", b"3.0.0-alpha")], r, f, &[], (TooNew, Some("3.0.0-alpha"), "newer"));
    check(&[("version", b"banana")], r, f, &[], (Invalid, Some("banana"), "not a semantic version"));
    check(&[("version", b"  ")], r, f, &[], (Invalid, None, "key version is empty"));
    check(&[("version", b"\xff\xfe")], r, f, &[], (Invalid, None, "not UTF-8"));
    check(&[("other", b"1")], r, f, &[], (Invalid, None, "key version (from file:version) is absent (present: other)"));
    check(&[("version", b"2.4.0")], None, f, &[], (OutOfRange, Some("2.4.0"), "no accepted range configured"));
    check(&[("version", b"2.4.0")], r, f, &["a", "b"], (Invalid, None, "required keys a, b are absent"));
    check(&[("version", b"2.4.0"), ("a", b"")], r, f, &["a"], (Accepted, Some("2.4.0"), "is in"));
    check(&[("version", b"2.4.0")], Some("^2.4"), f, &[], (Accepted, Some("2.4.0"), "in ^2.4"));
    check(&[("version", b"1.9.9")], Some("~2.4.1"), f, &[], (TooOld, Some("1.9.9"), "older"));
    check(&[("version", b"2.5.0")], Some("~2.4.1"), f, &[], (TooNew, Some("2.5.0"), "newer"));
    check(&[("version", b"3.1.0")], Some("2.*"), f, &[], (TooNew, Some("3.1.0"), "newer"));
    check(&[("version", b"2.0.0-rc.1")], Some(">=1.0.0"), f, &[], (OutOfRange, Some("2.0.0-rc.1"), "outside"));
}

#[test]
#[rustfmt::skip]
fn json_and_yaml_sources() {
    use Verdict::*;
    let r = Some("^2.4");
    let j = "json:c.json#/schema/version";
    let y = "yaml:c.yaml#/schema/version";
    check(&[("c.json", br#"{"schema":{"version":"2.4.3"}}"#)], r, j, &[], (Accepted, Some("2.4.3"), "is in"));
    check(&[("c.json", br#"{"schema":{"version":2}}"#)], r, j, &[], (TooOld, Some("2"), "older"));
    check(&[("c.json", br#"{"schema":{"version":2.5}}"#)], r, j, &[], (Invalid, None, "quote it"));
    check(&[("c.json", br#"{"schema":{"version":true}}"#)], r, j, &[], (Invalid, None, "a boolean"));
    check(&[("c.json", br#"{"schema":{}}"#)], r, j, &[], (Invalid, None, "nothing at /schema/version in key c.json"));
    check(&[("c.json", b"{nope")], r, j, &[], (Invalid, None, "key c.json is not valid JSON"));
    check(&[("c.yaml", b"schema:\n  version: 2.4.7\n")], r, y, &[], (Accepted, Some("2.4.7"), "is in"));
    check(&[("c.yaml", b"schema:\n  version: 3\n")], r, y, &[], (TooNew, Some("3"), "newer"));
    check(&[("c.yaml", b"schema:\n  version: 2.10\n")], r, y, &[], (Invalid, None, "quote it"));
    check(&[("c.yaml", b"schema: [")], r, y, &[], (Invalid, None, "key c.yaml is not valid YAML"));
    check(&[("c.yaml", b"a~b:\n  - x: 2.4.0\n")], r, "yaml:c.yaml#/a~0b/0/x", &[], (Accepted, Some("2.4.0"), "is in"));
    check(&[("c.yaml", b"a/b: 2.4.0\n")], r, "yaml:c.yaml#/a~1b", &[], (Accepted, Some("2.4.0"), "is in"));
}

#[test]
#[rustfmt::skip]
fn api_version_table() {
    use Verdict::*;
    let r = Some("kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3");
    let y = "yaml:config.yaml#/apiVersion";
    let doc = |v: &str| format!("apiVersion: {v}\nkind: KubeSchedulerConfiguration\n");
    let at = |v: &str, want: (Verdict, Option<&str>, &str)| {
        check(&[("config.yaml", doc(v).as_bytes())], r, y, &[], want);
    };
    let served = "kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3";
    at("kubescheduler.config.k8s.io/v1", (Accepted, Some("kubescheduler.config.k8s.io/v1"), &format!("version kubescheduler.config.k8s.io/v1 is in {served}")));
    at("kubescheduler.config.k8s.io/v1beta3", (Accepted, Some("kubescheduler.config.k8s.io/v1beta3"), "is in"));
    at("kubescheduler.config.k8s.io/v2", (TooNew, Some("kubescheduler.config.k8s.io/v2"), &format!("version kubescheduler.config.k8s.io/v2 is newer than {served} serves; roll the ConfigMap back to an API version in {served}, or add kubescheduler.config.k8s.io/v2 to confgate.io/accepts once the component serves it")));
    at("kubescheduler.config.k8s.io/v1beta2", (TooOld, Some("kubescheduler.config.k8s.io/v1beta2"), "is older than"));
    at("kubescheduler.config.k8s.io/v1alpha1", (TooOld, Some("kubescheduler.config.k8s.io/v1alpha1"), "or add kubescheduler.config.k8s.io/v1alpha1 to confgate.io/accepts if the component still serves it"));
    at("kubescheduler.config.k8s.io/v1beta4", (OutOfRange, Some("kubescheduler.config.k8s.io/v1beta4"), "is not one of"));
    at("kubelet.config.k8s.io/v1", (OutOfRange, Some("kubelet.config.k8s.io/v1"), "is of group kubelet.config.k8s.io, which"));
    at("v1", (OutOfRange, Some("v1"), "is of the core group"));
    at("kubescheduler.config.k8s.io/v1gamma", (Invalid, Some("kubescheduler.config.k8s.io/v1gamma"), "not a Kubernetes version"));
    at("Kube.io/v1", (Invalid, Some("Kube.io/v1"), "write an API version such as kubescheduler.config.k8s.io/v1 at yaml:config.yaml#/apiVersion in the ConfigMap"));
    at("\"a b: c\"", (Invalid, None, "with characters an API version does not have"));
    // A document that does not parse, under a list of API versions, asks for one of them, not for a
    // semantic version.
    check(&[("config.yaml", b"apiVersion: [unclosed\n")], r, y, &[], (Invalid, None, "; write an API version such as kubescheduler.config.k8s.io/v1 at yaml:config.yaml#/apiVersion in the ConfigMap"));
    // An API version read under a semver range says which setting to change.
    check(&[("config.yaml", doc("a.io/v1").as_bytes())], Some("^2"), y, &[], (Invalid, Some("a.io/v1"), "is the Kubernetes API version a.io/v1, but ^2 is a semver range; set confgate.io/accepts"));
}

#[test]
fn missing_and_broken_map_to_their_verdicts() {
    let s = settings(Some("^1"), "file:version", &[]);
    assert_eq!(
        judge(
            &Observed::Missing(crate::snapshot::Missing::NoObjectKeys),
            &s
        )
        .verdict,
        Verdict::Missing
    );
    let j = judge(
        &Observed::Broken(crate::snapshot::Broken::NotRegular { key: "k".into() }),
        &s,
    );
    assert_eq!(
        (j.verdict, j.reason.as_str()),
        (
            Verdict::Invalid,
            "key k is not a regular file (a FIFO, socket or device cannot be a ConfigMap key)"
        )
    );
}

#[test]
fn every_reason_ends_with_its_fix_naming_a_real_annotation() {
    let known: Vec<&str> = crate::settings::known_annotations().collect();
    for a in [
        fix::ANN_ACCEPTS,
        fix::ANN_REQUIRE,
        fix::ANN_VERSION_FROM,
        fix::ANN_VARIANTS,
    ] {
        assert!(known.contains(&a), "{a}");
    }
    let cases = [
        (
            Some("^2"),
            "file:version",
            &[][..],
            b"3.0.0".as_slice(),
            "or raise confgate.io/accepts once the component reads 3.0.0",
        ),
        (
            Some("^2"),
            "file:version",
            &[],
            b"1.0.0",
            "or lower confgate.io/accepts if the component still reads 1.0.0",
        ),
        (
            Some(">=2.4, <2.6"),
            "file:version",
            &[],
            b"2.5.0-rc.1",
            "or name the pre-release in confgate.io/accepts",
        ),
        (
            Some("^2"),
            "file:version",
            &["config"],
            b"2.0.0",
            "add it to the ConfigMap, or drop it from confgate.io/require",
        ),
        (
            Some("^2"),
            "file:other",
            &[],
            b"2.0.0",
            "add key other to the ConfigMap, or point confgate.io/version-from at the key that holds the version",
        ),
        (
            Some("^2"),
            "file:version",
            &[],
            b"2.x.y",
            "write a version such as 2.4.1 at file:version in the ConfigMap",
        ),
    ];
    for (accepts, from, require, version, fix) in cases {
        let j = judge(
            &snap(&[("version", version)]),
            &settings(accepts, from, require),
        );
        assert!(j.reason.ends_with(fix), "{}", j.reason);
    }
}

/// The judgement carries the version parsed once, under the scheme in force, next to the text as
/// written: later stages compare the typed value and show the text.
#[test]
fn a_judgement_carries_the_parsed_version_and_the_text_as_written() {
    let parsed = |files: &[(&str, &[u8])], accepts: Option<&str>| {
        let j = judge(&snap(files), &settings(accepts, "file:version", &[]));
        (j.version, j.parsed)
    };
    assert_eq!(
        parsed(&[("version", b" v2.4 \n")], Some("^2")),
        (
            Some("v2.4".to_owned()),
            Some(SchemeVersion::Semver(semver::Version::new(2, 4, 0)))
        )
    );
    assert_eq!(
        parsed(&[("version", b"3")], None),
        (
            Some("3".to_owned()),
            Some(SchemeVersion::Semver(semver::Version::new(3, 0, 0)))
        )
    );
    assert_eq!(
        parsed(&[("version", b"apps/v1beta1")], Some("apps/v1")),
        (
            Some("apps/v1beta1".to_owned()),
            Some(SchemeVersion::Api(
                ApiVersion::parse_object("apps/v1beta1").unwrap()
            ))
        )
    );
    // Read but not a version of the scheme in force: the text stays, nothing is parsed.
    assert_eq!(
        parsed(&[("version", b"1.2.3.4")], Some("^1")),
        (Some("1.2.3.4".to_owned()), None)
    );
}

/// `yaml:*#/apiVersion` reads every key's version: the config is accepted when every file's
/// group/version is served, and the reason names each file that is not, with its version and verdict;
/// the version shown is the files' distinct versions.
#[test]
fn every_file_is_judged_by_its_own_api_version() {
    const SERVED: &str = "apiserver.config.k8s.io/v1, audit.k8s.io/v1";
    let admission: &[u8] =
        b"apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n";
    let audit = |v: &str| format!("apiVersion: {v}\nkind: Policy\nrules:\n- level: None\n");
    let judge_files = |files: &[(&str, &[u8])]| {
        judge(
            &snap(files),
            &settings(Some(SERVED), "yaml:*#/apiVersion", &[]),
        )
    };
    let ok_audit = audit("audit.k8s.io/v1");
    let j = judge_files(&[
        ("admission.yaml", admission),
        ("audit.yaml", ok_audit.as_bytes()),
    ]);
    assert_eq!(j.verdict, Verdict::Accepted, "{}", j.reason);
    assert_eq!(
        j.version.as_deref(),
        Some("apiserver.config.k8s.io/v1, audit.k8s.io/v1")
    );
    assert_eq!(
        j.reason,
        format!(
            "every file's version is in {SERVED}: admission.yaml apiserver.config.k8s.io/v1, audit.yaml audit.k8s.io/v1"
        )
    );
    let Some(SchemeVersion::Each(each)) = &j.parsed else {
        panic!("{:?}", j.parsed)
    };
    assert_eq!(each.len(), 2);

    let old_audit = audit("audit.k8s.io/v1beta1");
    let j = judge_files(&[
        ("admission.yaml", admission),
        ("audit.yaml", old_audit.as_bytes()),
    ]);
    assert_eq!(j.verdict, Verdict::TooOld, "{}", j.reason);
    assert_eq!(
        j.version.as_deref(),
        Some("apiserver.config.k8s.io/v1, audit.k8s.io/v1beta1")
    );
    assert_eq!(
        j.reason,
        format!(
            "1 of 2 files is not served by {SERVED}: audit.yaml has audit.k8s.io/v1beta1 (too-old); set each named file to a version in {SERVED}, or add its version to confgate.io/accepts once the component serves it"
        )
    );

    // A file without a version is named with why; one whose value is not a version is not echoed.
    let j = judge_files(&[
        ("admission.yaml", admission),
        ("audit.yaml", b"kind: Policy\n"),
        ("tracing.yaml", b"apiVersion: hunter2 PIN\n"),
    ]);
    assert_eq!(j.verdict, Verdict::Invalid, "{}", j.reason);
    assert!(
        j.reason.starts_with("2 of 3 files are not served"),
        "{}",
        j.reason
    );
    assert!(
        j.reason.contains(
            "audit.yaml: yaml:audit.yaml#/apiVersion: nothing at /apiVersion in key audit.yaml"
        ),
        "{}",
        j.reason
    );
    assert!(j.reason.contains("tracing.yaml: "), "{}", j.reason);
    assert!(!j.reason.contains("hunter2"), "{}", j.reason);
    assert!(
        j.reason
            .ends_with("give each named file a version at yaml:*#/apiVersion"),
        "{}",
        j.reason
    );

    let j = judge_files(&[]);
    assert_eq!(j.verdict, Verdict::Invalid);
    assert!(
        j.reason.starts_with("no key to read a version from"),
        "{}",
        j.reason
    );
}

#[test]
fn every_key_is_a_version_source_of_json_and_yaml_only() {
    let v: VersionFrom = "yaml:*#/apiVersion".parse().unwrap();
    assert_eq!(v.to_string(), "yaml:*#/apiVersion");
    assert_eq!(
        v.for_key("audit.yaml").to_string(),
        "yaml:audit.yaml#/apiVersion"
    );
    assert_eq!(
        "json:*#/apiVersion"
            .parse::<VersionFrom>()
            .unwrap()
            .for_key("a.json")
            .to_string(),
        "json:a.json#/apiVersion"
    );
    assert!(
        "file:*"
            .parse::<VersionFrom>()
            .unwrap_err()
            .to_string()
            .contains("yaml:*#/apiVersion")
    );
}

/// Each fix names the kind of source it asks to change: a plain directory's (a hostPath, a static
/// pod's config) says nothing of a ConfigMap and asks for the file on the node; a Secret's names the
/// Secret; a ConfigMap's (volume or API) the ConfigMap.
#[test]
fn a_fix_names_the_kind_of_source() {
    let s = settings(Some("^2"), "file:version", &["extra"]);
    let too_new = snap(&[("version", b"3.0.0"), ("extra", b"x")]);
    let unreadable = snap(&[("version", b"two"), ("extra", b"x")]);
    let no_version = snap(&[("other", b"x"), ("extra", b"x")]);
    let no_required = snap(&[("version", b"2.0.0")]);
    let api = settings(Some("kubescheduler.config.k8s.io/v1"), "file:version", &[]);
    let api_too_new = snap(&[("version", b"kubescheduler.config.k8s.io/v2")]);
    let volume_empty = Observed::Missing(crate::snapshot::Missing::NoKeys {
        dir: "/etc/config".into(),
        volume: true,
    });
    let dir_empty = Observed::Missing(crate::snapshot::Missing::NoKeys {
        dir: "/etc/kubernetes/scheduler".into(),
        volume: false,
    });
    let reasons = |src: Source| {
        vec![
            judge_as(&too_new, &s, src),
            judge_as(&unreadable, &s, src),
            judge_as(&no_version, &s, src),
            judge_as(&no_required, &s, src),
            judge_as(&api_too_new, &api, src),
            judge_as(
                if src == Source::PlainDir {
                    &dir_empty
                } else {
                    &volume_empty
                },
                &s,
                src,
            ),
        ]
    };
    let verdicts: Vec<Verdict> = reasons(Source::PlainDir)
        .iter()
        .map(|j| j.verdict)
        .collect();
    assert_eq!(
        verdicts,
        [
            Verdict::TooNew,
            Verdict::Invalid,
            Verdict::Invalid,
            Verdict::Invalid,
            Verdict::TooNew,
            Verdict::Missing
        ]
    );
    for j in reasons(Source::PlainDir) {
        assert!(!j.reason.contains("ConfigMap"), "{}", j.reason);
        assert!(j.reason.contains("file"), "{}", j.reason);
    }
    for j in &reasons(Source::PlainDir)[..5] {
        assert!(j.reason.contains("on the node"), "{}", j.reason);
    }
    for src in [Source::SecretVolume, Source::ApiSecret] {
        for j in reasons(src) {
            assert!(
                !j.reason.contains("ConfigMap") && j.reason.contains("the Secret"),
                "{src:?}: {}",
                j.reason
            );
        }
    }
    for src in [Source::ConfigMapVolume, Source::ApiConfigMap] {
        for j in reasons(src) {
            assert!(j.reason.contains("the ConfigMap"), "{src:?}: {}", j.reason);
        }
    }
    assert_eq!(
        judge_as(&too_new, &s, Source::PlainDir).reason,
        "version 3.0.0 is newer than ^2 allows; roll the config file on the node (in the watched directory) back to a version in ^2, or raise confgate.io/accepts once the component reads 3.0.0"
    );
    assert_eq!(
        judge_as(&no_version, &s, Source::PlainDir)
            .reason
            .rsplit("; ")
            .next(),
        Some(
            "add file version to the watched directory on the node, or point confgate.io/version-from at the file that holds the version"
        )
    );
}
