//! The judging settings parsed from their text, refused with a reason, and shown back as written.

use super::*;

#[test]
fn a_range_that_matches_no_version_is_refused() {
    for empty in [
        ">=3, <2",
        ">=3.0.0 <3.0.0",
        ">2.4, <2.5",
        "=3, <3",
        ">=2.5.0, <=2.4.9",
        "<1, ^2",
    ] {
        let e = parse_accepts(empty).unwrap_err().to_string();
        assert!(e.contains("matches no version"), "{empty}: {e}");
    }
    for some in [
        ">=2.4.0, <3.0.0",
        ">=3.0.0, <=3.0.0",
        "=3",
        ">2.4, <2.6",
        "^2.4",
        "~2.4, <2.4.5",
        ">=3.0.0-rc.1, <3.0.0",
        "*",
        ">=1",
    ] {
        assert!(parse_accepts(some).is_ok(), "{some}");
    }
}

#[test]
fn variants_syntax() {
    let v: Variants = "config.v*.yaml -> config.yaml".parse().unwrap();
    assert!(v.matches("config.v2.yaml") && v.matches("config.v10-beta.yaml"));
    for not in [
        "config.v.yaml",
        "config.yaml",
        "config.v2.yml",
        "x/config.v2.yaml",
    ] {
        assert!(!v.matches(not), "{not}");
    }
    assert!(!v.matches("config.va/b.yaml"));
    for (bad, why) in [
        ("config.v*.yaml", "missing \"->\""),
        ("config.v2.yaml -> config.yaml", "has no '*'"),
        ("c*.v*.yaml -> config.yaml", "more than one '*'"),
        ("config.*.yaml -> config.v.yaml", "matches the pattern"),
        ("config.*.yaml -> ../x", "not a valid ConfigMap key"),
        (
            "a b*.yaml -> config.yaml",
            "does not make valid ConfigMap keys",
        ),
    ] {
        let e = bad.parse::<Variants>().unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    assert_eq!(parse_variants("none").unwrap(), None);
    assert_eq!(parse_variants("").unwrap(), None);
}

#[test]
fn npm_dialect_ranges_read_as_the_comma_form() {
    for (npm, cargo) in [
        (">=2.4.0 <3.0.0", ">=2.4.0, <3.0.0"),
        (">= 2.4.0  < 3.0.0", ">=2.4.0, <3.0.0"),
        ("^2.4", "^2.4"),
        ("2.4.x", "2.4.*"),
    ] {
        let a = parse_accepts(npm).unwrap_or_else(|e| panic!("{npm}: {e}"));
        assert_eq!(
            a.semver(),
            Some(&VersionReq::parse(cargo).unwrap()),
            "{npm}"
        );
        assert_eq!(a.text, npm.trim(), "the text stays as written");
    }
    assert!(
        parse_accepts(">=1 || <0.5")
            .unwrap_err()
            .to_string()
            .contains("||")
    );
    assert!(parse_accepts(">=2.4.0 <").is_err());
}

#[test]
fn api_version_lists_are_recognised_and_mixes_refused() {
    let a = parse_accepts(" kubescheduler.config.k8s.io/v1beta3, kubescheduler.config.k8s.io/v1 ")
        .unwrap();
    let Range::Api(set) = &a.range else {
        panic!("{a:?}")
    };
    assert_eq!(
        set.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "kubescheduler.config.k8s.io/v1",
            "kubescheduler.config.k8s.io/v1beta3"
        ],
        "newest first"
    );
    assert_eq!(
        a.text,
        "kubescheduler.config.k8s.io/v1beta3, kubescheduler.config.k8s.io/v1"
    );
    assert!(matches!(
        parse_accepts("a.io/v1 b.io/v2alpha1").unwrap().range,
        Range::Api(_)
    ));
    assert!(matches!(
        parse_accepts("^2").unwrap().range,
        Range::Semver(_)
    ));
    for (mixed, names) in [
        ("kubescheduler.config.k8s.io/v1, >=2.4.0", "\">=2.4.0\""),
        (">=2 a.io/v1", "\">=2\""),
        ("a.io/v1, v1beta3", "\"v1beta3\""),
    ] {
        let e = parse_accepts(mixed).unwrap_err().to_string();
        assert!(
            e.starts_with("mixes Kubernetes API versions"),
            "{mixed}: {e}"
        );
        assert!(e.contains(names), "{mixed}: {e}");
    }
    let e = parse_accepts("a.io/v1, a.io/v1gamma")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"a.io/v1gamma\" is not a Kubernetes API version"),
        "{e}"
    );
    let e = parse_accepts("v1beta3").unwrap_err().to_string();
    assert!(e.contains("name its group"), "{e}");
}
