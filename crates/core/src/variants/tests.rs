//! Choosing among variants: the highest accepted, the promoted name, and every reason's fix.

use super::*;
use crate::settings::Raw;
use proptest::prelude::*;

fn raw(accepts: &str) -> Raw {
    Raw {
        accepts: Some(accepts.into()),
        version_from: Some("yaml:config.yaml#/version".into()),
        variants: Some("config.v*.yaml -> config.yaml".into()),
        ..Raw::default()
    }
}

fn settings(accepts: &str) -> Settings {
    Settings::from_raw(&raw(accepts)).unwrap()
}

fn cm<K: AsRef<str>, V: AsRef<str>>(files: &[(K, V)]) -> Observed {
    Observed::Config(Snapshot::new(
        files
            .iter()
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().as_bytes().to_vec()))
            .collect(),
    ))
}

fn both() -> Observed {
    cm(&[
        ("config.v2.yaml", "version: 2.1.0\nold: 1\n"),
        ("config.v3.yaml", "version: 3.0.0\nnew: 1\n"),
        ("shared.txt", "s"),
    ])
}

#[test]
fn each_range_gets_its_variant_with_the_other_keys() {
    for (range, key, version) in [
        ("^2", "config.v2.yaml", "2.1.0"),
        ("^3", "config.v3.yaml", "3.0.0"),
        (">=2", "config.v3.yaml", "3.0.0"),
    ] {
        let c = choose(both(), &settings(range));
        assert_eq!(
            c.judgement.verdict,
            Verdict::Accepted,
            "{}",
            c.judgement.reason
        );
        assert_eq!(c.variant.as_deref(), Some(key));
        assert_eq!(c.judgement.version.as_deref(), Some(version));
        let Observed::Config(s) = &c.observed else {
            panic!()
        };
        assert_eq!(
            s.files().keys().collect::<Vec<_>>(),
            ["config.yaml", "shared.txt"]
        );
        let Observed::Config(raw) = both() else {
            panic!()
        };
        assert_eq!(s.files()["config.yaml"], raw.files()[key]);
        assert_eq!(
            s.hash(),
            promoted_set(&raw, settings(range).variants.as_ref().unwrap(), key).hash()
        );
    }
}

#[test]
fn api_version_variants_pick_the_newest_served_in_kubernetes_order() {
    let s = Settings::from_raw(&Raw {
        version_from: Some("yaml:config.yaml#/apiVersion".into()),
        ..raw("s.k8s.io/v1beta3, s.k8s.io/v1, s.k8s.io/v1alpha1")
    })
    .unwrap();
    let obs = cm(&[
        ("config.vbeta3.yaml", "apiVersion: s.k8s.io/v1beta3\n"),
        ("config.vga.yaml", "apiVersion: s.k8s.io/v1\n"),
        ("config.valpha.yaml", "apiVersion: s.k8s.io/v1alpha1\n"),
        ("config.vnext.yaml", "apiVersion: s.k8s.io/v2\n"),
    ]);
    let c = choose(obs, &s);
    assert_eq!(
        c.judgement.verdict,
        Verdict::Accepted,
        "{}",
        c.judgement.reason
    );
    assert_eq!(
        c.variant.as_deref(),
        Some("config.vga.yaml"),
        "v1 over v1beta3, v2 not served"
    );
    let c = choose(
        cm(&[
            ("config.vbeta3.yaml", "apiVersion: s.k8s.io/v1beta3\n"),
            ("config.valpha.yaml", "apiVersion: s.k8s.io/v1alpha1\n"),
        ]),
        &s,
    );
    assert_eq!(
        c.variant.as_deref(),
        Some("config.vbeta3.yaml"),
        "beta over alpha"
    );
    let c = choose(
        cm(&[
            ("config.va.yaml", "apiVersion: s.k8s.io/v1\n"),
            ("config.vb.yaml", "apiVersion: s.k8s.io/v1\nx: 1\n"),
        ]),
        &s,
    );
    assert_eq!(
        c.judgement.verdict,
        Verdict::Invalid,
        "same API version, different content"
    );
    assert!(
        c.judgement.reason.contains("same version s.k8s.io/v1"),
        "{}",
        c.judgement.reason
    );
}

#[test]
fn no_variant_accepted_gives_the_verdict_to_act_on() {
    let c = choose(both(), &settings("^4"));
    assert_eq!(c.judgement.verdict, Verdict::TooOld);
    assert_eq!(
        c.judgement.reason,
        "no variant is accepted by ^4: config.v2.yaml 2.1.0 too-old, config.v3.yaml 3.0.0 too-old; \
         add a variant with a version in ^4, or lower confgate.io/accepts if the component still reads \
         an older one"
    );
    assert_eq!(
        choose(both(), &settings("^1")).judgement.verdict,
        Verdict::TooNew
    );
    assert_eq!(
        choose(both(), &settings(">=2.5, <3")).judgement.verdict,
        Verdict::OutOfRange
    );
    let broken = cm(&[
        ("config.v2.yaml", "version: 2.1.0\n"),
        ("config.v3.yaml", "version: [\n"),
    ]);
    let c = choose(broken, &settings("^3"));
    assert_eq!(c.judgement.verdict, Verdict::Invalid);
    assert!(
        c.judgement
            .reason
            .contains("config.v3.yaml - invalid (key config.yaml is not valid YAML"),
        "{}",
        c.judgement.reason
    );
    // Observe mode would run the newest variant read.
    assert_eq!(c.variant.as_deref(), Some("config.v2.yaml"));
}

/// The overall reason ends with the fix for its verdict, as a single reason does.
#[test]
fn every_reason_without_a_chosen_variant_ends_with_its_fix() {
    let broken = cm(&[
        ("config.v2.yaml", "version: 2.1.0\n"),
        ("config.v3.yaml", "version: [\n"),
    ]);
    let taken = cm(&[("config.v2.yaml", "version: 2.1.0\n"), ("config.yaml", "x")]);
    let mut no_range = raw("^2");
    no_range.accepts = None;
    let no_range = Settings::from_raw(&no_range).unwrap();
    for (observed, settings, fix) in [
        (
            both(),
            settings("^1"),
            "; add a variant with a version in ^1, or raise confgate.io/accepts once the component \
             reads a newer one",
        ),
        (
            both(),
            settings("^4"),
            "; add a variant with a version in ^4, or lower confgate.io/accepts if the component still \
             reads an older one",
        ),
        (
            both(),
            settings(">=2.5, <3"),
            "; add a variant with a version in >=2.5, <3, or change confgate.io/accepts",
        ),
        (
            broken,
            settings("^3"),
            "; correct the invalid variant as its reason says, or add a variant with a version in ^3",
        ),
        (
            both(),
            no_range,
            "; set confgate.io/accepts to the range the component reads",
        ),
        (
            taken,
            settings("^2"),
            "; remove key config.yaml from the ConfigMap (each variant is promoted under that name), \
             or change confgate.io/variants",
        ),
    ] {
        let c = choose(observed, &settings);
        assert!(c.judgement.reason.ends_with(fix), "{}", c.judgement.reason);
    }
}

#[test]
fn same_version_different_content_is_ambiguous() {
    let c = choose(
        cm(&[
            ("config.v3.yaml", "version: 3.0.0\na: 1\n"),
            ("config.v3b.yaml", "version: 3.0.0+b\nb: 1\n"),
        ]),
        &settings("^3"),
    );
    assert_eq!(c.judgement.verdict, Verdict::Invalid);
    assert!(
        c.judgement
            .reason
            .starts_with("variants config.v3.yaml and config.v3b.yaml have the same version 3.0.0"),
        "{}",
        c.judgement.reason
    );
    let same = "version: 3.0.0\n";
    let c = choose(
        cm(&[("config.v3.yaml", same), ("config.vx.yaml", same)]),
        &settings("^3"),
    );
    assert_eq!(c.variant.as_deref(), Some("config.v3.yaml"));
}

#[test]
fn promoted_name_beside_variants_is_invalid_and_no_variants_is_plain() {
    let c = choose(
        cm(&[
            ("config.v2.yaml", "version: 2.0.0\n"),
            ("config.yaml", "version: 2.0.0\n"),
        ]),
        &settings("^2"),
    );
    assert_eq!(c.judgement.verdict, Verdict::Invalid);
    assert!(c.judgement.reason.starts_with("key config.yaml is both"));
    let plain = cm(&[("config.yaml", "version: 2.0.0\n")]);
    let c = choose(plain.clone(), &settings("^2"));
    assert_eq!(
        (c.judgement.verdict, c.variant, c.observed),
        (Verdict::Accepted, None, plain)
    );
}

#[test]
fn a_thousand_invalid_variants_give_a_short_reason() {
    let files: Vec<(String, String)> = (0..1000)
        .map(|i| {
            (
                format!("config.v{i:04}.yaml"),
                format!("version: 1.{i}.0\n"),
            )
        })
        .chain((0..1000).map(|i| (format!("other-{i:04}"), "o".to_owned())))
        .collect();
    let s = Settings::from_raw(&Raw {
        require: Some("must-exist".into()),
        ..raw("^1")
    })
    .unwrap();
    let c = choose(cm(&files), &s);
    assert_eq!(c.judgement.verdict, Verdict::Invalid);
    let r = &c.judgement.reason;
    assert!(
        r.starts_with("no variant is accepted by ^1: config.v0000.yaml - invalid (required key must-exist is absent (present: config.yaml, other-0000, other-0001, other-0002, other-0003 and 996 more); add it to the ConfigMap, or drop it from confgate.io/require), config.v0001.yaml"),
        "{r}"
    );
    assert!(
        r.ends_with(
            " and 995 more; correct the invalid variant as its reason says, or add a variant with a \
             version in ^1"
        ),
        "{r}"
    );
    assert!(r.len() < 2048, "{} bytes", r.len());
}

/// Content rules run newest accepted variant first, and all variants of one ConfigMap share one
/// budget: a rule that fails on each of many variants beside a large shared key stops being run
/// once the budget is spent, and says so.
#[cfg(feature = "policy")]
#[test]
fn variants_share_one_budget_for_content_rules() {
    let shared = "s".repeat(400_000);
    let files: Vec<(String, String)> = (0..200)
        .map(|i| {
            (
                format!("config.v{i:03}.yaml"),
                format!("version: 1.{i}.0\n"),
            )
        })
        .chain([("shared".to_owned(), shared)])
        .collect();
    let s = Settings::from_raw(&Raw {
        rules: Some("data.shared.startsWith('x')".into()),
        ..raw("^1")
    })
    .unwrap();
    let t = std::time::Instant::now();
    let c = choose(cm(&files), &s);
    assert_eq!(c.judgement.verdict, Verdict::Invalid);
    let r = &c.judgement.reason;
    assert!(r.contains("config.v000.yaml 1.0.0 invalid (version 1.0.0 is in ^1, but rule 1 (`data.shared.startsWith('x')`) was not evaluated: it would take this ConfigMap's content rules over their budget"), "{r}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
    // The newest variant was judged on its content.
    let newest = judge_one(&files, &s, "config.v199.yaml");
    assert!(newest.reason.ends_with("is false"), "{}", newest.reason);
}

/// The judgement of one variant's set alone.
#[cfg(feature = "policy")]
fn judge_one<K: AsRef<str>, V: AsRef<str>>(files: &[(K, V)], s: &Settings, key: &str) -> Judgement {
    let Observed::Config(snap) = cm(files) else {
        panic!()
    };
    verdict::judge_snapshot(
        &promoted_set(&snap, s.variants.as_ref().unwrap(), key),
        s,
        Default::default(),
    )
}

proptest! {
    /// The promoted set holds exactly one variant, under the promoted name, and it is the highest
    /// accepted one; with none accepted, nothing is accepted.
    #[test]
    fn promotes_exactly_the_highest_accepted_variant(
        versions in prop::collection::btree_map("[a-d]", (0u64..5, 0u64..3), 1..5),
        major in 0u64..5,
    ) {
        let files: Vec<(String, String)> = versions
            .iter()
            .map(|(label, (a, b))| (format!("config.v{label}.yaml"), format!("version: {a}.{b}.0\nlabel: {label}\n")))
            .chain([("other".to_owned(), "o".to_owned())])
            .collect();
        let obs = Observed::Config(Snapshot::new(
            files.iter().map(|(k, v)| (k.clone(), v.as_bytes().to_vec())).collect(),
        ));
        let s = settings(&format!("^{major}"));
        let c = choose(obs, &s);
        let req = s.accepts.as_ref().unwrap().semver().unwrap();
        let best = versions
            .iter()
            .filter(|(_, (a, b))| req.matches(&semver::Version::new(*a, *b, 0)))
            .map(|(l, (a, b))| (a, b, l))
            .max();
        let mut all: Vec<_> = versions.values().collect();
        all.sort();
        if all.windows(2).any(|w| w[0] == w[1]) {
            // Same version, different content (the label differs): ambiguous for every range.
            prop_assert_eq!(c.judgement.verdict, Verdict::Invalid);
            return Ok(());
        }
        match best {
            Some((_, _, label)) => {
                prop_assert_eq!(c.judgement.verdict, Verdict::Accepted);
                let Observed::Config(p) = &c.observed else { panic!() };
                prop_assert_eq!(p.files().keys().filter(|k| s.variants.as_ref().unwrap().matches(k)).count(), 0);
                prop_assert_eq!(p.files().len(), 2);
                let want = format!("label: {label}\n");
                prop_assert!(String::from_utf8_lossy(&p.files()["config.yaml"]).ends_with(&want));
            }
            None => prop_assert_ne!(c.judgement.verdict, Verdict::Accepted),
        }
    }
}

/// With every file read by its own apiVersion (`yaml:*#/apiVersion`), each variant's set is judged
/// file by file (the variant under the promoted name, and the shared files), and the newest set whose
/// every file is served wins.
#[test]
fn variants_with_every_file_by_its_own_api_version() {
    let s = |accepts: &str| {
        Settings::from_raw(&Raw {
            version_from: Some("yaml:*#/apiVersion".into()),
            ..raw(accepts)
        })
        .unwrap()
    };
    let obs = || {
        cm(&[
            ("config.vbeta3.yaml", "apiVersion: s.k8s.io/v1beta3\n"),
            ("config.vga.yaml", "apiVersion: s.k8s.io/v1\n"),
            ("audit.yaml", "apiVersion: audit.k8s.io/v1\n"),
        ])
    };
    let c = choose(obs(), &s("s.k8s.io/v1beta3, s.k8s.io/v1, audit.k8s.io/v1"));
    assert_eq!(
        c.judgement.verdict,
        Verdict::Accepted,
        "{}",
        c.judgement.reason
    );
    assert_eq!(c.variant.as_deref(), Some("config.vga.yaml"));
    assert_eq!(
        c.judgement.version.as_deref(),
        Some("audit.k8s.io/v1, s.k8s.io/v1")
    );
    let c = choose(obs(), &s("s.k8s.io/v1beta3, audit.k8s.io/v1"));
    assert_eq!(c.variant.as_deref(), Some("config.vbeta3.yaml"));
    // A shared file not served holds every variant; each variant's versions are listed.
    let c = choose(obs(), &s("s.k8s.io/v1beta3, s.k8s.io/v1"));
    assert_eq!(c.judgement.verdict, Verdict::OutOfRange);
    assert!(
        c.judgement
            .reason
            .contains("config.vga.yaml audit.k8s.io/v1, s.k8s.io/v1 out-of-range"),
        "{}",
        c.judgement.reason
    );
}
