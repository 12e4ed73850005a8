//! The settings parser over every source: defaults, flags and environment, annotations over them, and
//! what a bad value keeps.

use super::*;

fn ann(pairs: &[(&str, &str)]) -> Annotations {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn defaults_match_the_contract() {
    let s = Settings::from_raw(&Raw::default()).unwrap();
    assert_eq!(s.accepts, None);
    assert_eq!(s.version_from.to_string(), "file:version");
    assert_eq!(s.reload, Reload::None);
    assert_eq!(s.on_incompatible, OnIncompatible::Hold);
    assert_eq!(s.mode, Mode::Enforce);
    assert!(s.require.is_empty());
}

#[test]
fn every_bad_flag_is_named_with_value_and_allowed() {
    let raw = Raw {
        accepts: Some(">=x".into()),
        version_from: Some("toml:a".into()),
        reload: Some("signal:NOPE:prom".into()),
        on_incompatible: Some("drop".into()),
        mode: Some("strict".into()),
        require: Some("ok,../bad".into()),
        rules: None,
        confirm: Some("http://x/metrics".into()),
        variants: Some("config.*.yaml".into()),
        reload_spread: Some("2h".into()),
        trial: Some("2d".into()),
        validate: Some("exec:promtool check config {dir}/p.yml".into()),
        validate_timeout: Some("1h".into()),
    };
    let err = Settings::from_raw(&raw).unwrap_err();
    assert_eq!(err.0.len(), 12, "{err}");
    let text = err.to_string();
    for needle in [
        "--variants (CONFGATE_VARIANTS) \"config.*.yaml\"",
        "--accepts (CONFGATE_ACCEPTS) \">=x\"",
        "--version-from (CONFGATE_VERSION_FROM) \"toml:a\"",
        "--reload (CONFGATE_RELOAD) \"signal:NOPE:prom\"",
        "--on-incompatible (CONFGATE_ON_INCOMPATIBLE) \"drop\"",
        "--mode (CONFGATE_MODE) \"strict\"",
        "--confirm (CONFGATE_CONFIRM) \"http://x/metrics\"",
        "--require (CONFGATE_REQUIRE)",
        "--reload-spread (CONFGATE_RELOAD_SPREAD) \"2h\": \"2h\" is longer than 1h; allowed: a duration from 0 (off) to 1h",
        "--trial (CONFGATE_TRIAL) \"2d\"",
        "allowed: hold or unready",
        "allowed: enforce or observe",
        "--validate (CONFGATE_VALIDATE) \"exec:promtool check config {dir}/p.yml\": the program \"promtool\" is not an absolute path",
        "--validate-timeout (CONFGATE_VALIDATE_TIMEOUT) \"1h\"",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in {text}");
    }
}

#[test]
fn values_parse_as_documented() {
    let raw = Raw {
        accepts: Some(">=2.4.0, <3.0.0".into()),
        version_from: Some("yaml:config.yaml#/schema/version".into()),
        require: Some("a.yaml, b.json,a.yaml".into()),
        reload: Some("signal:HUP:prometheus".into()),
        on_incompatible: Some("unready".into()),
        mode: Some("observe".into()),
        rules: None,
        confirm: Some("http://127.0.0.1:9090/metrics#up".into()),
        variants: Some(" config.v*.yaml->config.yaml ".into()),
        reload_spread: Some("90s".into()),
        trial: Some("90s".into()),
        validate: Some("exec:/v/promtool check config {dir}/prometheus.yml".into()),
        validate_timeout: Some("3s".into()),
    };
    let s = Settings::from_raw(&raw).unwrap();
    assert_eq!(s.validate.name(), "promtool");
    assert_eq!(s.validate_timeout, std::time::Duration::from_secs(3));
    assert_eq!(s.reload_spread, std::time::Duration::from_secs(90));
    assert_eq!(s.trial, std::time::Duration::from_secs(90));
    let off = Raw {
        trial: Some("off".into()),
        ..Raw::default()
    };
    assert!(Settings::from_raw(&off).unwrap().trial.is_zero());
    assert_eq!(
        Settings::default().trial,
        std::time::Duration::from_secs(300)
    );
    assert_eq!(
        s.confirm.as_ref().map(|c| c.to_string()).as_deref(),
        Some("http://127.0.0.1:9090/metrics#up")
    );
    assert_eq!(
        s.variants.as_ref().map(ToString::to_string).as_deref(),
        Some("config.v*.yaml -> config.yaml")
    );
    assert_eq!(s.accepts_text(), Some(">=2.4.0, <3.0.0"));
    assert_eq!(
        s.version_from,
        VersionFrom::Yaml {
            key: "config.yaml".into(),
            pointer: "/schema/version".into()
        }
    );
    assert_eq!(s.require, vec!["a.yaml", "b.json"]);
    assert_eq!(s.reload.to_string(), "signal:HUP:prometheus");
    assert_eq!(s.on_incompatible, OnIncompatible::Unready);
    assert_eq!(s.mode, Mode::Observe);
    for url in ["http://127.0.0.1:9090/-/reload", "https://app.local/reload"] {
        assert_eq!(url.parse::<Reload>().unwrap().to_string(), url);
    }
    for bad in [
        "http://",
        "ftp://x",
        "signal:HUP",
        "signal:HUP:",
        "signal:HUP:a/b",
    ] {
        assert!(bad.parse::<Reload>().is_err(), "{bad}");
    }
}

#[test]
fn annotation_beats_flag_and_removal_falls_back() {
    let base = Settings::from_raw(&Raw {
        accepts: Some("^1".into()),
        ..Raw::default()
    })
    .unwrap();
    let r = Settings::with_annotations(&base, &base, &ann(&[("confgate.io/accepts", "^2")]));
    assert!(r.problems.is_empty());
    assert_eq!(r.settings.accepts_text(), Some("^2"));
    let r2 = Settings::with_annotations(&base, &r.settings, &ann(&[]));
    assert_eq!(r2.settings.accepts_text(), Some("^1"));
}

#[test]
fn bad_annotation_keeps_the_value_in_force_and_is_named() {
    let base = Settings::default();
    let good = Settings::with_annotations(
        &base,
        &base,
        &ann(&[
            ("confgate.io/accepts", "^2"),
            ("confgate.io/mode", "enforce"),
        ]),
    )
    .settings;
    let r = Settings::with_annotations(
        &base,
        &good,
        &ann(&[
            ("confgate.io/accepts", "two please"),
            ("confgate.io/mode", "observe"),
        ]),
    );
    assert_eq!(r.settings.accepts_text(), Some("^2"));
    assert_eq!(r.settings.mode, Mode::Observe);
    assert_eq!(r.problems.len(), 1);
    assert!(
        r.problems[0].starts_with("invalid confgate.io/accepts \"two please\""),
        "{:?}",
        r.problems
    );
}

#[test]
fn unknown_confgate_annotation_is_a_problem_others_are_ignored() {
    let base = Settings::default();
    let r = Settings::with_annotations(
        &base,
        &base,
        &ann(&[("confgate.io/accept", "^2"), ("example.com/x", "y")]),
    );
    assert_eq!(r.problems.len(), 1);
    assert!(r.problems[0].contains("unknown annotation confgate.io/accept"));
}

/// A mistyped annotation gets the "did you mean" a mistyped flag gets, under the same rule of
/// nearness; a name near nothing gets none.
#[test]
fn a_mistyped_annotation_names_the_one_meant() {
    let base = Settings::default();
    for (typed, meant) in [
        ("confgate.io/relaod", Some("confgate.io/reload")),
        ("confgate.io/acepts", Some("confgate.io/accepts")),
        ("confgate.io/version-form", Some("confgate.io/version-from")),
        ("confgate.io/frobnicate", None),
    ] {
        let r = Settings::with_annotations(&base, &base, &ann(&[(typed, "x")]));
        let p = &r.problems[0];
        match meant {
            Some(m) => assert!(
                p.starts_with(&format!(
                    "unknown annotation {typed}; did you mean {m}? known: "
                )),
                "{p}"
            ),
            None => assert!(!p.contains("did you mean"), "{p}"),
        }
    }
}

/// Names users type are unique, and defaults that are values are shown as such.
#[test]
fn declarations_are_consistent() {
    for name in [
        |s: &Setting| s.flag,
        |s: &Setting| s.env,
        |s: &Setting| s.annotation,
    ] {
        let mut seen: Vec<&str> = SETTINGS.iter().map(name).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), SETTINGS.len());
    }
    assert!(known_annotations().all(|a| a.starts_with(ANN_PREFIX)));
    let per_range = SETTINGS.iter().filter(|s| s.repeat == Repeat::PerRange);
    assert!(
        per_range.count() <= 1,
        "check judges by one setting's values"
    );
    let default = |flag: &str| {
        let s = SETTINGS.iter().find(|s| s.flag == flag).unwrap();
        s.default_text()
    };
    assert_eq!(default("version-from").as_deref(), Some("file:version"));
    assert_eq!(default("confirm").as_deref(), Some("none"));
    assert_eq!(default("accepts"), None, "no range is not a range");
    assert_eq!(default("rule"), None, "no rules is not a rule");
    assert_eq!(default("require"), None);
}

/// Rules as a gate setting, through the settings parser every source uses.
mod rules_tests {
    use super::{Raw, Settings};

    fn from_raw(rules: &str) -> Result<Settings, crate::settings::Error> {
        Settings::from_raw(&Raw {
            rules: Some(rules.into()),
            ..Raw::default()
        })
    }

    #[cfg(feature = "policy")]
    #[test]
    fn a_bad_rules_annotation_keeps_the_rules_in_force() {
        let base = from_raw("# guard\n'a' in data\n").unwrap();
        assert_eq!(base.rules.texts(), ["'a' in data"]);
        let ann = [("confgate.io/rules".to_owned(), "true\ndata.(".to_owned())].into();
        let r = Settings::with_annotations(&base, &base, &ann);
        assert_eq!(r.settings.rules, base.rules);
        assert!(
            r.problems.len() == 1 && r.problems[0].contains("rule 2 (\"data.(\")"),
            "{:?}",
            r.problems
        );
        let err = from_raw("data.(").unwrap_err().to_string();
        assert!(err.starts_with("invalid --rule (CONFGATE_RULES)"), "{err}");
    }

    #[cfg(not(feature = "policy"))]
    #[test]
    fn without_the_engine_a_rule_is_refused() {
        let err = from_raw("true").unwrap_err().to_string();
        assert!(err.contains("`policy` cargo feature"), "{err}");
        assert!(from_raw("# nothing but a comment\n").is_ok());
        let ann = [("confgate.io/rules".to_owned(), "true".to_owned())].into();
        let r = Settings::with_annotations(&Settings::default(), &Settings::default(), &ann);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    }
}

/// `confgate.io/reload-spread: "1m30s"` (or `"1.5m"`), the Go and Kubernetes duration form, is a good
/// annotation, not a settings problem that would make the pod unready.
#[test]
fn a_spread_written_the_kubernetes_way_is_a_good_annotation() {
    let base = Settings::default();
    for text in ["1m30s", "1.5m", "90s", "90"] {
        let r =
            Settings::with_annotations(&base, &base, &ann(&[("confgate.io/reload-spread", text)]));
        assert!(r.problems.is_empty(), "{text}: {:?}", r.problems);
        assert_eq!(r.settings.reload_spread.as_secs(), 90, "{text}");
    }
}

/// Each setting's parser says why in its own type, so a caller can tell the causes apart; the
/// message users read is made once, by that type, and `Invalid` carries it unchanged.
#[test]
fn a_bad_value_is_refused_with_its_parsers_own_cause() {
    let by = |flag: &str| SETTINGS.iter().find(|s| s.flag == flag).unwrap();
    let refuse = |flag: &str, value: RawValue| (by(flag).set)(&mut Settings::default(), &value);
    assert_eq!(
        refuse("accepts", "".into()),
        Err(Problem::Judging(JudgingError::EmptyRange))
    );
    assert_eq!(
        refuse("mode", "loud".into()),
        Err(Problem::Acting(ActingError::Mode))
    );
    assert_eq!(
        refuse("reload", "http://".into()),
        Err(Problem::Acting(ActingError::Url(UrlError::NoHost)))
    );
    assert_eq!(
        refuse("reload-spread", "61m".into()),
        Err(Problem::Duration(DurationError::Spread("61m".into())))
    );
    assert_eq!(
        refuse("mode", RawValue::Lines(vec!["enforce".into()])),
        Err(Problem::OneValue)
    );
    let raw = Raw {
        reload_spread: Some("61m".into()),
        ..Raw::default()
    };
    let e = Settings::from_raw(&raw).unwrap_err();
    assert_eq!(e.0[0].problem, "\"61m\" is longer than 1h");
}

#[test]
fn an_annotation_picks_only_the_checker_the_container_spec_names() {
    let checker = "exec:/validators/promtool check config {dir}/prometheus.yml";
    let spec = Settings::from_raw(&Raw {
        validate: Some(checker.into()),
        ..Raw::default()
    })
    .unwrap();
    // The spec's own checker, or none, may be picked.
    for pick in [checker, "none"] {
        let r = Settings::with_annotations(&spec, &spec, &ann(&[("confgate.io/validate", pick)]));
        assert!(r.problems.is_empty(), "{pick}: {:?}", r.problems);
        assert_eq!(r.settings.validate.to_string(), pick);
    }
    // Anything else is a settings problem, and the checker in force stays.
    for (base, other) in [
        (&spec, "exec:/bin/sh -c id {dir}"),
        (
            &spec,
            "exec:/validators/promtool check rules {dir}/prometheus.yml",
        ),
        (&Settings::default(), checker),
    ] {
        let r = Settings::with_annotations(base, base, &ann(&[("confgate.io/validate", other)]));
        assert_eq!(r.problems.len(), 1, "{other}");
        assert!(
            r.problems[0].contains("confgate.io/validate")
                && r.problems[0].contains("a checker the container spec does not"),
            "{}",
            r.problems[0]
        );
        assert_eq!(r.settings.validate, base.validate, "{other}");
    }
}

/// The known-good record a trial writes is read by every pod: an annotation may lengthen the trial or
/// turn it off, never shorten it below the spec's.
#[test]
fn an_annotation_may_lengthen_the_trial_or_turn_it_off_not_shorten_it() {
    let spec = Settings::from_raw(&Raw {
        trial: Some("2m".into()),
        ..Raw::default()
    })
    .unwrap();
    for (pick, in_force) in [("off", 0), ("2m", 120), ("1h", 3600)] {
        let r = Settings::with_annotations(&spec, &spec, &ann(&[("confgate.io/trial", pick)]));
        assert!(r.problems.is_empty(), "{pick}: {:?}", r.problems);
        assert_eq!(r.settings.trial.as_secs(), in_force, "{pick}");
    }
    for short in ["1ms", "119s"] {
        let r = Settings::with_annotations(&spec, &spec, &ann(&[("confgate.io/trial", short)]));
        assert_eq!(r.problems.len(), 1, "{short}");
        assert!(
            r.problems[0].contains("confgate.io/trial")
                && r.problems[0].contains("shorter than the container spec's"),
            "{}",
            r.problems[0]
        );
        assert_eq!(r.settings.trial, spec.trial, "{short}: the spec's stays");
    }
}

/// A spec that records nothing (`--trial off`) has the longest trial there is: an annotation turning a
/// trial on would let one pod vouch for a config for every pod of the fleet, as a shorter one would.
#[test]
fn an_annotation_cannot_turn_on_a_trial_the_spec_turns_off() {
    let spec = Settings::from_raw(&Raw {
        trial: Some("off".into()),
        ..Raw::default()
    })
    .unwrap();
    let r = Settings::with_annotations(&spec, &spec, &ann(&[("confgate.io/trial", "off")]));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    for on in ["1ms", "5m", "24h"] {
        let r = Settings::with_annotations(&spec, &spec, &ann(&[("confgate.io/trial", on)]));
        assert_eq!(r.problems.len(), 1, "{on}: {:?}", r.problems);
        assert!(
            r.problems[0].contains("confgate.io/trial")
                && r.problems[0].contains("which the container spec turns off"),
            "{}",
            r.problems[0]
        );
        assert!(r.settings.trial.is_zero(), "{on}: the spec's off stays");
    }
}

#[test]
fn an_annotation_sends_reloads_and_confirmations_only_where_the_spec_allows() {
    let spec = Settings::from_raw(&Raw {
        reload: Some("https://user:pw@component.internal:8443/reload".into()),
        ..Raw::default()
    })
    .unwrap();
    for (key, good) in [
        ("confgate.io/reload", "http://127.0.0.1:8080/reload"),
        ("confgate.io/reload", "http://localhost:9090/-/reload"),
        ("confgate.io/reload", "http://[::1]:8080/reload"),
        (
            "confgate.io/reload",
            "https://component.internal:8443/other",
        ),
        ("confgate.io/reload", "signal:HUP:prometheus"),
        (
            "confgate.io/confirm",
            "http://127.0.0.1:9090/metrics#applied",
        ),
        (
            "confgate.io/confirm",
            "https://component.internal:8443/metrics#applied",
        ),
    ] {
        let r = Settings::with_annotations(&spec, &spec, &ann(&[(key, good)]));
        assert!(r.problems.is_empty(), "{good}: {:?}", r.problems);
    }
    for (key, bad) in [
        ("confgate.io/reload", "http://169.254.169.254/latest"),
        (
            "confgate.io/reload",
            "https://x:secret@elsewhere.example:8443/reload",
        ),
        (
            "confgate.io/reload",
            "https://component.internal:9443/reload",
        ),
        (
            "confgate.io/confirm",
            "http://10.0.0.1:9090/metrics#applied",
        ),
    ] {
        let r = Settings::with_annotations(&spec, &spec, &ann(&[(key, bad)]));
        assert_eq!(r.problems.len(), 1, "{bad}");
        assert!(
            r.problems[0].contains(key) && r.problems[0].contains("container spec does not name"),
            "{}",
            r.problems[0]
        );
        assert!(!r.problems[0].contains("secret"), "{}", r.problems[0]);
        assert_eq!(r.settings.reload, spec.reload);
        assert_eq!(r.settings.confirm, spec.confirm);
    }
}

/// The record of the annotations' values last in force is checked again as annotations over the
/// base: a value an annotation may not give (another checker, a reload to another host, credentials,
/// an unknown name, a bad value) is not used, and a bad annotation then keeps what was used.
#[test]
fn the_values_last_in_force_pass_the_bounds_of_an_annotation_again() {
    let base = Settings::from_raw(&Raw {
        validate: Some("exec:/validators/check {dir}".into()),
        ..Raw::default()
    })
    .unwrap();
    let record = ann(&[
        (
            "confgate.io/version-from",
            "yaml:config.yaml#/schemaVersion",
        ),
        ("confgate.io/validate", "exec:/bin/sh -c {dir}"),
        ("confgate.io/reload", "http://198.51.100.7/reload"),
        ("confgate.io/confirm", "http://u:p@127.0.0.1:9/metrics#m"),
        ("confgate.io/accepts", "three"),
        ("confgate.io/nope", "x"),
        ("confgate.io/mode", "observe"),
    ]);
    let (in_force, used, unused) = Settings::last_in_force(&base, &record);
    assert_eq!(
        used,
        ann(&[
            ("confgate.io/mode", "observe"),
            (
                "confgate.io/version-from",
                "yaml:config.yaml#/schemaVersion"
            ),
        ])
    );
    assert_eq!(unused.len(), 5, "{unused:?}");
    assert!(unused.iter().all(|u| !u.contains("u:p@")), "{unused:?}");
    assert_eq!(in_force.validate, base.validate);
    assert_eq!(in_force.reload, Reload::None);
    assert_eq!(in_force.confirm, None);
    assert_eq!(in_force.mode, Mode::Observe);
    // A bad annotation keeps the value used; an absent one is the flag's; a good one wins.
    let now = Settings::with_annotations(
        &base,
        &in_force,
        &ann(&[("confgate.io/version-from", "yaml:config.yaml#schemaVersion")]),
    );
    assert_eq!(
        now.settings.version_from.to_string(),
        "yaml:config.yaml#/schemaVersion"
    );
    assert_eq!(now.settings.mode, Mode::Enforce);
    assert_eq!(now.problems.len(), 1);
    assert!(now.given.is_empty());
    assert!(!recordable("confgate.io/reload", "http://u:p@127.0.0.1/r"));
    assert!(recordable("confgate.io/reload", "http://127.0.0.1/r"));
    assert!(!recordable("confgate.io/nope", "x"));
}
