//! Verdicts: version extraction, the semver decision and required keys. Pure: no I/O, no clock.
//!
//! Every reason names what was wrong, where, and what is allowed, and never quotes config content
//! beyond the version string itself.
//!
//! This file judges; `version.rs` reads the version where `version-from` says; `range.rs` parses
//! and classifies it against the accepted range.
//!
//! `judge_range` is all but the content rules and `judge_rules` adds them, so `variants` runs rules
//! only where they decide something; `judge_api` judges under the API-version scheme. A `Judgement`
//! keeps the version as written (shown) and parsed under the scheme in force (`parsed`), which
//! later stages compare and never parse again from the text. A reason an operator can act on ends
//! with its fix (`fix.rs`: roll the ConfigMap back, raise `confgate.io/accepts`, add the key),
//! naming keys and annotations, never content. The `Verdict` value itself is `values::Verdict`.

use std::fmt::Write as _;

use crate::listing;
use crate::rules::Budget;
use crate::settings::{
    ApiVersion, ApiVersions, Range, SchemeVersion, Settings, Standing, VersionFrom,
};
use crate::snapshot::{Keys, Observed, Snapshot};

pub mod fix;
#[cfg(test)]
mod hostile_tests;
mod range;
#[cfg(test)]
mod tests;
mod version;

pub use crate::values::{NotAVerdict, Verdict};
use fix::{Source, write_a_version};
pub(crate) use range::{classify, parse_lenient};
pub(crate) use version::extract_version;
use version::{MAX_VERSION_LEN, looks_like_a_version, present};

/// A verdict with the version as read (when one was read) and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// The version as written in the config, trimmed: what status, logs and Events show.
    pub version: Option<String>,
    /// That version parsed under the scheme of the range in force (semver without one), when it
    /// parsed: what later stages compare (`variants` orders by it), never parsed again from `version`.
    pub parsed: Option<SchemeVersion>,
    pub reason: String,
}

impl Judgement {
    /// An `invalid` verdict that read no version.
    pub fn invalid(reason: String) -> Judgement {
        invalid(None, reason)
    }
}

/// `j` as a Secret's content may show it: an `invalid` verdict that read a value (which did not parse
/// as a version) keeps neither the value nor a reason quoting it. Outside a Secret a value written with
/// a version's characters is echoed, to be fixed; in a Secret a mis-pointed version key
/// (`--version-from` naming a PIN such as `hunter2-PIN-4711`) is made of those characters too.
pub fn for_a_secret(j: Judgement, from: &VersionFrom, src: Source) -> Judgement {
    match (&j.verdict, &j.version) {
        // A version under the scheme in force is shown; else the value is shown only if it is a
        // version of either scheme (the value read, judged here at the edge where it may be shown).
        (Verdict::Invalid, Some(raw))
            if j.parsed.is_none()
                && parse_lenient(raw).is_err()
                && ApiVersion::parse_object(raw).is_err() =>
        {
            invalid(
                None,
                format!(
                    "the value at {from} is not a version ({} bytes, not shown: the content is a Secret's); allowed: MAJOR[.MINOR[.PATCH]][-PRE][+BUILD], optionally with a leading v; {}",
                    raw.len(),
                    write_a_version(from, src)
                ),
            )
        }
        _ => j,
    }
}

/// Judges what a read found under `settings`, its fixes worded for a ConfigMap.
pub fn judge(observed: &Observed, settings: &Settings) -> Judgement {
    judge_as(observed, settings, Source::default())
}

/// Judges what a read of a source of kind `src` found under `settings`: each fix says what to change
/// in that kind of source.
pub fn judge_as(observed: &Observed, settings: &Settings, src: Source) -> Judgement {
    match observed {
        Observed::Missing(why) => Judgement {
            verdict: Verdict::Missing,
            version: None,
            parsed: None,
            reason: match why {
                // A Secret volume's: the kubelet's layout, as a ConfigMap's, but filled by a Secret.
                crate::snapshot::Missing::NoKeys { dir, volume: true } if src.is_secret() => {
                    format!(
                        "{} holds no keys (the Secret is absent, empty or was deleted)",
                        crate::listing::one_line(&dir.to_string_lossy())
                    )
                }
                _ => why.to_string(),
            },
        },
        Observed::Broken(why) => invalid(None, why.to_string()),
        Observed::Config(snap) => judge_snapshot(snap, settings, src),
    }
}

fn invalid(version: Option<String>, reason: String) -> Judgement {
    Judgement {
        verdict: Verdict::Invalid,
        version,
        parsed: None,
        reason,
    }
}

/// Judges one snapshot: required keys, then the version, then the range, then the content rules.
pub(crate) fn judge_snapshot(snap: &Snapshot, settings: &Settings, src: Source) -> Judgement {
    let j = judge_range(snap, settings, src);
    judge_rules(snap, settings, j, &mut Budget::per_judgement())
}

/// Required keys, then the version, then the range: everything but the content rules, which
/// [`judge_rules`] adds for a version the range accepts.
pub(crate) fn judge_range(keys: &dyn Keys, settings: &Settings, src: Source) -> Judgement {
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
                "required {}{} {} {} absent (present: {}); {}",
                src.key_word(),
                if missing.len() == 1 { "" } else { "s" },
                listing::names(&missing, None),
                if missing.len() == 1 { "is" } else { "are" },
                present(keys),
                fix::required(missing.len(), src),
            ),
        );
    }
    match &settings.version_from {
        VersionFrom::Each { .. } => judge_each(keys, settings, src),
        from => judge_version(keys, from, settings, src),
    }
}

/// The version at `from` (one key) against the range in force.
fn judge_version(
    keys: &dyn Keys,
    from: &VersionFrom,
    settings: &Settings,
    src: Source,
) -> Judgement {
    // What to write where the version is: under a list of API versions, one of them.
    let write = || match settings.accepts.as_ref().map(|a| a.range()) {
        Some(Range::Api(set)) => fix::write_an_api_version(from, &set.newest().to_string(), src),
        _ => write_a_version(from, src),
    };
    let raw = match extract_version(keys, from) {
        Ok(raw) => raw,
        Err(why) => {
            let fix = if keys.get(from.key()).is_none() {
                fix::version_key_absent(&listing::name(from.key()), src)
            } else {
                write()
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
                from,
                raw.len(),
                write()
            ),
        );
    }
    let req = match &settings.accepts {
        Some(accepts) => match accepts.range() {
            Range::Api(set) => return judge_api(raw, set, accepts.text(), from, src),
            Range::Semver(req) => Some((req, accepts)),
        },
        None => None,
    };
    let version = match parse_lenient(&raw) {
        Ok(v) => v,
        // An API version under a semver range: the range is what is wrong, and the version is safe to
        // show (an API version holds nothing but a group and a version).
        Err(_) if raw.contains('/') && ApiVersion::parse_object(&raw).is_ok() => {
            return invalid(
                Some(raw.clone()),
                format!(
                    "the value at {} is the Kubernetes API version {raw}, but {} is a semver range; {}",
                    from,
                    settings.accepts_text().unwrap_or("no range"),
                    fix::api_scheme(&raw)
                ),
            );
        }
        // Not echoed: text a version cannot contain means the pointer or key names something else
        // (a whole YAML document under `file:`, a password), and that must not reach /status or logs.
        Err(_) if !looks_like_a_version(&raw) => {
            return invalid(
                None,
                format!(
                    "the value at {} is not a semantic version ({} bytes, with characters a version does not have); allowed: MAJOR[.MINOR[.PATCH]][-PRE][+BUILD], optionally with a leading v; {}",
                    from,
                    raw.len(),
                    write_a_version(from, src)
                ),
            );
        }
        Err(why) => {
            return invalid(
                Some(raw.clone()),
                format!(
                    "version {raw:?} at {}: {why}; {}",
                    from,
                    write_a_version(from, src)
                ),
            );
        }
    };
    let Some((req, accepts)) = req else {
        return Judgement {
            verdict: Verdict::OutOfRange,
            version: Some(raw),
            parsed: Some(SchemeVersion::Semver(version)),
            reason: "no accepted range configured (set confgate.io/accepts, --accepts or CONFGATE_ACCEPTS)"
                .into(),
        };
    };
    let verdict = classify(&version, req);
    let reason = match verdict {
        Verdict::Accepted => format!("version {version} is in {}", accepts.text()),
        Verdict::TooNew => format!(
            "version {version} is newer than {range} allows; {}",
            fix::too_new(accepts.text(), &version.to_string(), src),
            range = accepts.text()
        ),
        Verdict::TooOld => format!(
            "version {version} is older than {range} allows; {}",
            fix::too_old(accepts.text(), &version.to_string(), src),
            range = accepts.text()
        ),
        _ if !version.pre.is_empty() => format!(
            "pre-release {version} is outside {range} (a range admits pre-releases only of a version it names with a pre-release); {}",
            fix::pre_release(accepts.text(), src),
            range = accepts.text()
        ),
        _ => format!(
            "version {version} is outside {range}; {}",
            fix::outside(accepts.text(), src),
            range = accepts.text()
        ),
    };
    Judgement {
        verdict,
        version: Some(raw),
        parsed: Some(SchemeVersion::Semver(version)),
        reason,
    }
}

/// Every key's version (`version-from` `yaml:*#/apiVersion`), each judged as one key's would be:
/// accepted when every file's is; otherwise the verdict of the first file (in key order) that is not,
/// and a reason naming each such file. The version shown is the files' distinct versions.
fn judge_each(keys: &dyn Keys, settings: &Settings, src: Source) -> Judgement {
    let each: Vec<(&str, Judgement)> = keys
        .each()
        .map(|(key, _)| {
            let from = settings.version_from.for_key(key);
            // A value that is not a version is not repeated from any file: the files of one config
            // may be a Secret's (an encryption config), and the reason does not know.
            (
                key,
                for_a_secret(judge_version(keys, &from, settings, src), &from, src),
            )
        })
        .collect();
    if each.is_empty() {
        return invalid(
            None,
            format!(
                "no key to read a version from ({} reads every key); add the config files to the ConfigMap",
                settings.version_from
            ),
        );
    }
    // The version of every file that has one: what status, metrics and the probe show.
    let parsed: Vec<(String, SchemeVersion)> = each
        .iter()
        .filter_map(|(k, j)| j.parsed.clone().map(|v| ((*k).to_owned(), v)))
        .collect();
    let parsed = (!parsed.is_empty()).then_some(SchemeVersion::Each(parsed));
    let version = parsed.as_ref().map(ToString::to_string);
    let bad: Vec<&(&str, Judgement)> = each
        .iter()
        .filter(|(_, j)| j.verdict != Verdict::Accepted)
        .collect();
    let range = settings.accepts_text().unwrap_or("no range");
    let Some((_, first)) = bad.first() else {
        let files = listing::listed(each.iter(), None, |out, (k, j)| {
            let v = j
                .parsed
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let _ = write!(out, "{} {v}", listing::name(k));
        });
        return Judgement {
            verdict: Verdict::Accepted,
            version,
            // Every file parsed, or it would not be accepted.
            parsed: parsed.clone(),
            reason: format!("every file's version is in {range}: {files}"),
        };
    };
    let files = listing::listed(bad.iter(), Some(bad.len()), |out, (k, j)| {
        let _ = match (&j.verdict, &j.parsed) {
            (Verdict::Invalid, _) | (_, None) => write!(out, "{}: {}", listing::name(k), j.reason),
            (verdict, Some(v)) => write!(out, "{} has {v} ({verdict})", listing::name(k)),
        };
    });
    let fix = match first.verdict {
        Verdict::Invalid => format!(
            "give each named file a version at {}",
            settings.version_from
        ),
        _ => fix::each_not_served(range),
    };
    Judgement {
        verdict: first.verdict,
        version,
        parsed,
        reason: format!(
            "{} of {} files {} not served by {range}: {files}; {fix}",
            bad.len(),
            each.len(),
            if bad.len() == 1 { "is" } else { "are" },
        ),
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
                .parsed
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let reason = format!(
                "version {version} is in {}, but {failure}",
                settings.accepts_text().unwrap_or_default()
            );
            Judgement {
                verdict: Verdict::Invalid,
                reason,
                ..j
            }
        }
    }
}

/// Whether `raw` holds only what an API version can (so a reason may repeat it): a group's letters,
/// digits, `-` and `.`, one `/`, and a version.
fn looks_like_an_api_version(raw: &str) -> bool {
    raw.len() <= MAX_VERSION_LEN
        && raw.bytes().filter(|&b| b == b'/').count() <= 1
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'/'))
}

/// The version read under the API-version scheme, against the group/versions the component serves
/// (`text` as written). The verdicts: one of the set is accepted; of a group the set names, newer than
/// all its versions there is too-new, older than all is too-old, between them out-of-range; of another
/// group out-of-range.
fn judge_api(
    raw: String,
    set: &ApiVersions,
    text: &str,
    from: &VersionFrom,
    src: Source,
) -> Judgement {
    let example = set.newest().to_string();
    let v = match ApiVersion::parse_object(raw.trim()) {
        Ok(v) => v,
        Err(why) if looks_like_an_api_version(&raw) => {
            return invalid(
                Some(raw.clone()),
                format!(
                    "version {raw:?} at {from}: {why}; {}",
                    fix::write_an_api_version(from, &example, src)
                ),
            );
        }
        // Not echoed, as for semver: text no API version holds may be anything.
        Err(_) => {
            return invalid(
                None,
                format!(
                    "the value at {from} is not a Kubernetes API version ({} bytes, with characters an API version does not have); allowed: GROUP/VERSION such as {example}; {}",
                    raw.len(),
                    fix::write_an_api_version(from, &example, src)
                ),
            );
        }
    };
    let shown = v.to_string();
    let (verdict, reason) = match set.standing(&v) {
        Standing::Accepted => (Verdict::Accepted, format!("version {shown} is in {text}")),
        Standing::Newer => (
            Verdict::TooNew,
            format!(
                "version {shown} is newer than {text} serves; {}",
                fix::api_too_new(text, &shown, src)
            ),
        ),
        Standing::Older => (
            Verdict::TooOld,
            format!(
                "version {shown} is older than {text} serves; {}",
                fix::api_too_old(text, &shown, src)
            ),
        ),
        Standing::Between => (
            Verdict::OutOfRange,
            format!(
                "version {shown} is not one of {text}; {}",
                fix::api_not_served(text, &shown, src)
            ),
        ),
        Standing::OtherGroup => (
            Verdict::OutOfRange,
            format!(
                "version {shown} is of {}, which {text} does not name; {}",
                if v.group.is_empty() {
                    "the core group".to_owned()
                } else {
                    format!("group {}", v.group)
                },
                fix::api_not_served(text, &shown, src)
            ),
        ),
    };
    Judgement {
        verdict,
        version: Some(raw),
        parsed: Some(SchemeVersion::Api(v)),
        reason,
    }
}
