//! Verdicts: version extraction, the semver decision and required keys. Pure: no I/O, no clock.
//!
//! Every reason names what was wrong, where, and what is allowed, and never quotes config content
//! beyond the version string itself.

use crate::extract::Found;
use crate::listing;
use crate::rules::Budget;
use crate::settings::{Settings, VersionFrom};
use crate::snapshot::{Keys, Observed, Snapshot};

pub mod fix;
mod range;

pub use crate::values::Verdict;
use fix::write_a_version;
pub use range::{classify, parse_lenient};

/// A verdict with the version as read (when one was read) and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub version: Option<String>,
    pub reason: String,
}

/// Judges what a read found under `settings`.
pub fn judge(observed: &Observed, settings: &Settings) -> Judgement {
    match observed {
        Observed::Missing(why) => Judgement {
            verdict: Verdict::Missing,
            version: None,
            reason: why.clone(),
        },
        Observed::Broken(why) => Judgement {
            verdict: Verdict::Invalid,
            version: None,
            reason: why.clone(),
        },
        Observed::Config(snap) => judge_snapshot(snap, settings),
    }
}

fn invalid(version: Option<String>, reason: String) -> Judgement {
    Judgement {
        verdict: Verdict::Invalid,
        version,
        reason,
    }
}

/// Judges one snapshot: required keys, then the version, then the range, then the content rules.
pub fn judge_snapshot(snap: &Snapshot, settings: &Settings) -> Judgement {
    let j = judge_range(snap, settings);
    judge_rules(snap, settings, j, &mut Budget::per_judgement())
}

/// Required keys, then the version, then the range: everything but the content rules, which
/// [`judge_rules`] adds for a version the range accepts.
pub(crate) fn judge_range(keys: &dyn Keys, settings: &Settings) -> Judgement {
    let missing: Vec<&str> = settings
        .require
        .iter()
        .map(String::as_str)
        .filter(|k| keys.get(k).is_none())
        .collect();
    if !missing.is_empty() {
        return invalid(
            None,
            format!(
                "required key{} {} {} absent (present: {}); {}",
                if missing.len() == 1 { "" } else { "s" },
                listing::names(&missing, None),
                if missing.len() == 1 { "is" } else { "are" },
                present(keys),
                fix::required(missing.len()),
            ),
        );
    }
    let raw = match extract_version(keys, &settings.version_from) {
        Ok(raw) => raw,
        Err(why) => {
            let fix = if keys.get(settings.version_from.key()).is_none() {
                fix::version_key_absent(&listing::name(settings.version_from.key()))
            } else {
                write_a_version(&settings.version_from)
            };
            return invalid(None, format!("{why}; {fix}"));
        }
    };
    if raw.len() > MAX_VERSION_LEN {
        // Not echoed: the version is repeated in /status, /readyz, metrics and logs, and a whole key's
        // content there would bury the reason (the kubelet keeps only 10 KiB of a probe's answer).
        return invalid(
            None,
            format!(
                "the version at {} is {} bytes long; a version is at most {MAX_VERSION_LEN} bytes; {}",
                settings.version_from,
                raw.len(),
                write_a_version(&settings.version_from)
            ),
        );
    }
    let version = match parse_lenient(&raw) {
        Ok(v) => v,
        // Not echoed: text a version cannot contain means the pointer or key names something else
        // (a whole YAML document under `file:`, a password), and that must not reach /status or logs.
        Err(_) if !looks_like_a_version(&raw) => {
            return invalid(
                None,
                format!(
                    "the value at {} is not a semantic version ({} bytes, with characters a version does not have); allowed: MAJOR[.MINOR[.PATCH]][-PRE][+BUILD], optionally with a leading v; {}",
                    settings.version_from,
                    raw.len(),
                    write_a_version(&settings.version_from)
                ),
            );
        }
        Err(why) => {
            return invalid(
                Some(raw.clone()),
                format!(
                    "version {raw:?} at {}: {why}; {}",
                    settings.version_from,
                    write_a_version(&settings.version_from)
                ),
            );
        }
    };
    let Some(accepts) = &settings.accepts else {
        return Judgement {
            verdict: Verdict::OutOfRange,
            version: Some(raw),
            reason: "no accepted range configured (set confgate.io/accepts, --accepts or CONFGATE_ACCEPTS)"
                .into(),
        };
    };
    let verdict = classify(&version, &accepts.req);
    let reason = match verdict {
        Verdict::Accepted => format!("version {version} is in {}", accepts.text),
        Verdict::TooNew => format!(
            "version {version} is newer than {range} allows; {}",
            fix::too_new(&accepts.text, &version.to_string()),
            range = accepts.text
        ),
        Verdict::TooOld => format!(
            "version {version} is older than {range} allows; {}",
            fix::too_old(&accepts.text, &version.to_string()),
            range = accepts.text
        ),
        _ if !version.pre.is_empty() => format!(
            "pre-release {version} is outside {range} (a range admits pre-releases only of a version it names with a pre-release); {}",
            fix::pre_release(&accepts.text),
            range = accepts.text
        ),
        _ => format!(
            "version {version} is outside {range}; {}",
            fix::outside(&accepts.text),
            range = accepts.text
        ),
    };
    Judgement {
        verdict,
        version: Some(raw),
        reason,
    }
}

/// The content rules over `keys`, for a judgement [`judge_range`] accepted (any other is returned as
/// it is): a config is judged once, by its first problem, and the version comes first because it
/// decides whether the rules were even written for it. What the rules cost is taken from `budget`.
pub(crate) fn judge_rules(
    keys: &dyn Keys,
    settings: &Settings,
    j: Judgement,
    budget: &mut Budget,
) -> Judgement {
    if j.verdict != Verdict::Accepted {
        return j;
    }
    match settings.rules.check(keys, budget) {
        Ok(()) => j,
        Err(failure) => {
            let version = j
                .version
                .as_deref()
                .and_then(|r| parse_lenient(r).ok())
                .map(|v| v.to_string())
                .unwrap_or_default();
            invalid(
                j.version,
                format!(
                    "version {version} is in {}, but {failure}",
                    settings.accepts_text().unwrap_or_default()
                ),
            )
        }
    }
}

/// The keys present, as a reason lists them: a few names and how many more.
fn present(keys: &dyn Keys) -> String {
    listing::names(keys.each().map(|(k, _)| k), Some(keys.count()))
}

/// Reads the version string from the snapshot as `from` says, as written (not yet parsed).
pub fn extract_version(keys: &dyn Keys, from: &VersionFrom) -> Result<String, String> {
    let key = from.key();
    let bytes = keys.get(key).ok_or_else(|| {
        format!(
            "key {} (from {from}) is absent (present: {})",
            listing::name(key),
            present(keys)
        )
    })?;
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "key {key} is not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    match from {
        VersionFrom::File { .. } => {
            let v = text.trim();
            if v.is_empty() {
                Err(format!(
                    "key {key} is empty; expected a version such as 2.4.1"
                ))
            } else {
                Ok(v.to_owned())
            }
        }
        VersionFrom::Json { pointer, .. } => {
            let found = crate::extract::json(text, pointer).map_err(|e| match e {
                crate::extract::Error::NotFound(_) => {
                    format!("{from}: nothing at {pointer} in key {key}")
                }
                e => format!("key {key} is {e}"),
            })?;
            scalar(found).map_err(|what| format!("{from}: {what}"))
        }
        VersionFrom::Yaml { pointer, .. } => {
            let found = crate::extract::yaml(text, pointer).map_err(|e| match e {
                crate::extract::Error::NotFound(_) => {
                    format!("{from}: nothing at {pointer} in key {key}")
                }
                e => format!("key {key} is {e}"),
            })?;
            scalar(found).map_err(|what| format!("{from}: {what}"))
        }
    }
}

/// Whether `raw` is made only of what a version is written with, so it may be echoed when invalid.
fn looks_like_a_version(raw: &str) -> bool {
    raw.len() <= 64
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
}

/// The longest version string reported as read; semver puts no bound, real versions are far shorter.
const MAX_VERSION_LEN: usize = 256;

const FLOAT_HINT: &str = "quote it (\"2.10\") so that 2.10 is not read as 2.1";

fn scalar(found: Found) -> Result<String, String> {
    let kind = match found {
        Found::Str(s) => return Ok(s.trim().to_owned()),
        Found::Whole(n) => return Ok(n),
        // The number is the version itself; it is shown as read so the hint makes sense.
        // Not echoed: a long number read as a float is not the text as written.
        Found::Number(_) => {
            return Err(format!(
                "the version is a number with a fraction, an exponent, a sign or over 64 bits, not a string or whole number; {FLOAT_HINT}"
            ));
        }
        Found::Null => "null",
        Found::Bool => "a boolean",
        Found::Sequence => "a sequence",
        Found::Mapping => "a mapping",
    };
    Err(format!(
        "the version is {kind}, not a string or whole number"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Accepts, Settings};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn settings(accepts: Option<&str>, from: &str, require: &[&str]) -> Settings {
        Settings {
            accepts: accepts.map(|a| Accepts {
                req: semver::VersionReq::parse(a).unwrap(),
                text: a.into(),
            }),
            version_from: from.parse().unwrap(),
            require: require.iter().map(|s| (*s).to_owned()).collect(),
            ..Settings::default()
        }
    }

    fn snap(files: &[(&str, &[u8])]) -> Observed {
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
        check(&[("version", b"2.0.0")], Some(">=3, <2"), f, &[], (OutOfRange, Some("2.0.0"), "outside"));
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
    fn missing_and_broken_map_to_their_verdicts() {
        let s = settings(Some("^1"), "file:version", &[]);
        assert_eq!(
            judge(&Observed::Missing("gone".into()), &s).verdict,
            Verdict::Missing
        );
        let j = judge(&Observed::Broken("key k is a FIFO".into()), &s);
        assert_eq!(
            (j.verdict, j.reason.as_str()),
            (Verdict::Invalid, "key k is a FIFO")
        );
    }

    #[test]
    fn yaml_alias_bomb_is_invalid_not_a_hang() {
        let mut doc =
            String::from("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n");
        for i in 1..12 {
            let prev = (b'a' + i - 1) as char;
            let cur = (b'a' + i) as char;
            doc.push_str(&format!("{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
        }
        doc.push_str("version: 1.0.0\n");
        let j = judge(
            &snap(&[("c.yaml", doc.as_bytes())]),
            &settings(Some("^1"), "yaml:c.yaml#/version", &[]),
        );
        assert_eq!(j.verdict, Verdict::Invalid, "{}", j.reason);
    }

    #[test]
    fn deep_nesting_is_invalid() {
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        let j = judge(
            &snap(&[("c.json", deep.as_bytes())]),
            &settings(Some("^1"), "json:c.json#/0", &[]),
        );
        assert_eq!(j.verdict, Verdict::Invalid);
        let j = judge(
            &snap(&[("c.yaml", deep.as_bytes())]),
            &settings(Some("^1"), "yaml:c.yaml#/0", &[]),
        );
        assert_eq!(j.verdict, Verdict::Invalid);
    }

    #[test]
    fn huge_numbers_are_invalid() {
        let j = judge(
            &snap(&[("version", b"99999999999999999999999.0.0")]),
            &settings(Some("^1"), "file:version", &[]),
        );
        assert_eq!(j.verdict, Verdict::Invalid);
    }

    fn judged_reason(text: &str, from: &str) -> (String, Option<String>) {
        let settings = Settings {
            accepts: Some(crate::settings::Accepts {
                req: semver::VersionReq::parse("^1").unwrap(),
                text: "^1".into(),
            }),
            version_from: from.parse().unwrap(),
            ..Settings::default()
        };
        let files = [("c.yaml".to_owned(), text.as_bytes().to_vec())].into();
        let j = crate::verdict::judge(&Observed::Config(Snapshot::new(files)), &settings);
        (j.reason, j.version)
    }

    fn fragment() -> impl Strategy<Value = String> {
        let secret = "[a-z][a-z0-9]{11,24}";
        prop_oneof![
            secret.prop_map(|s| format!("k: {s}")),
            secret.prop_map(|s| format!("k: !!int {s}")),
            secret.prop_map(|s| format!("k: !!float {s}")),
            "[1-9][0-9]{19,38}".prop_map(|s| format!("k: {s}")),
            "[1-9][0-9]{19,38}".prop_map(|s| format!("version: {s}")),
            secret.prop_map(|s| format!("{s}: 1\n{s}: 2")),
            secret.prop_map(|s| format!("k: [{s}")),
            secret.prop_map(|s| format!("k: \"{s}")),
            secret.prop_map(|s| format!("k: *{s}")),
            secret.prop_map(|s| format!("k: {{{s}: ]")),
            secret.prop_map(|s| format!("- {s}")),
            secret.prop_map(String::from),
            secret.prop_map(|s| format!("---\n{s}: x")),
            secret.prop_map(|s| format!("version: {{a: {s}}}")),
            Just("version: 1.0.0".to_owned()),
            Just("  ".to_owned()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// No error text holds a run of the input longer than 8 bytes that is not a key name, the
        /// pointer or the version read. Runs are taken from the scalars (letters and digits): YAML
        /// punctuation next to a key name (`version: `) is no content.
        #[test]
        fn no_error_quotes_the_document(parts in prop::collection::vec(fragment(), 1..6)) {
            let text = parts.join("\n");
            for from in ["yaml:c.yaml#/version", "json:c.yaml#/version", "file:c.yaml"] {
                let (reason, version) = judged_reason(&text, from);
                let allowed = [from, "version", "c.yaml", version.as_deref().unwrap_or("")];
                let bytes = text.as_bytes();
                for w in bytes.windows(9) {
                    if !w.iter().all(u8::is_ascii_alphanumeric) {
                        continue;
                    }
                    let Ok(w) = std::str::from_utf8(w) else { continue };
                    if reason.contains(w) && !allowed.iter().any(|a| a.contains(w)) {
                        prop_assert!(false, "{from}: {reason:?} quotes {w:?} of {text:?}");
                    }
                }
            }
        }
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
}
