//! Verdicts: version extraction, the semver decision and required keys. Pure: no I/O, no clock.
//!
//! Every reason names what was wrong, where, and what is allowed, and never quotes config content
//! beyond the version string itself.
//!
//! This file judges; `version.rs` reads the version where `version-from` says; `range.rs` parses
//! and classifies it against the accepted range.

use crate::listing;
use crate::rules::Budget;
use crate::settings::Settings;
use crate::snapshot::{Keys, Observed, Snapshot};

pub mod fix;
mod range;
#[cfg(test)]
mod tests;
mod version;

pub use crate::values::Verdict;
use fix::write_a_version;
pub(crate) use range::{classify, parse_lenient};
pub(crate) use version::extract_version;
use version::{MAX_VERSION_LEN, looks_like_a_version, present};

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
pub(crate) fn judge_snapshot(snap: &Snapshot, settings: &Settings) -> Judgement {
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
