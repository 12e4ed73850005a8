//! Gate settings: what the component accepts and how confgate acts, resolved annotation > flag > env > default.
//!
//! One parser serves every source: flags and environment arrive merged by clap as [`Raw`] strings, pod
//! annotations as an [`Annotations`] map. A bad flag or environment value is fatal at start-up (exit 64);
//! a bad annotation is reported and the value in force before it stays (a crash loop would hide the message).
//!
//! Each setting is declared once, in the `gate_settings!` list in `gate`: its typed field, default,
//! parser and the names users give it. Everything else that lists settings (this parser, the command
//! line, the known annotations, the start-up log, the README's table) reads [`SETTINGS`]. The fields'
//! types and their parsers are pure values (`crate::values`, re-exported here); `describe` says the
//! settings to people, `container` checks the container-level paths, `error` is what a bad value is
//! reported as.
//!
//! `Settings::from_raw` puts flags and env over the defaults and reports every bad value at once;
//! `Settings::with_annotations` puts the annotations over those, a bad annotation keeping the value
//! in force.

use crate::annotations::Annotations;
use crate::values::redact;
pub use crate::values::{Accepts, Confirm, OnIncompatible, VersionFrom};
pub use crate::values::{ActingError, DurationError, JudgingError, UrlError};
pub use crate::values::{ApiVersion, ApiVersions, KubeVersion, Range, SchemeVersion, Standing};
pub use crate::values::{Mode, Reload, Url, Validate, Variants};

pub mod container;
mod describe;
mod error;
mod gate;
mod problem;
mod raw;

pub use container::ANN_SOURCE;
pub use container::CONTAINER_SETTINGS;
pub use container::ContainerSetting;
pub use container::container_table;
pub use container::{Looked, check_paths};
pub use describe::Given;
pub use describe::{known_annotations, readme_table};
pub use error::{Error, Invalid, Problem};
pub use gate::{Raw, Repeat, SETTINGS, Setting, Settings};
pub use problem::AnnotationProblem;
pub use raw::RawValue;

const ANN_PREFIX: &str = "confgate.io/";

/// Settings resolved from annotations, with the problems found on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub settings: Settings,
    /// Bad or unknown annotations; each one fails the `settings` check, which is reported and does not
    /// take readiness (the value in force before it is kept).
    pub problems: Vec<String>,
    /// The same problems as values, in the same order: what the decision loop keeps and compares.
    pub found: Vec<AnnotationProblem>,
    /// The annotations whose valid value is in force, by annotation, as given.
    pub given: Annotations,
}

// === parsing, shared by every source ===

/// Applies every setting `get` has a value for onto `base`, collecting all errors with their setting.
fn overlay(
    base: &Settings,
    get: impl Fn(&Setting) -> Option<(String, RawValue)>,
) -> (Settings, Vec<(&'static Setting, Invalid)>) {
    let mut s = base.clone();
    let mut errors = Vec::new();
    for setting in SETTINGS {
        let Some((from, value)) = get(setting) else {
            continue;
        };
        if let Err(problem) = (setting.set)(&mut s, &value) {
            errors.push((
                setting,
                Invalid {
                    setting: from,
                    value: if setting.redact {
                        redact(&value.to_string())
                    } else {
                        value.to_string()
                    },
                    problem: problem.to_string(),
                    allowed: setting.allowed,
                },
            ));
        }
    }
    (s, errors)
}

/// The annotations' valid values that reach past what the container spec (`base`: flags, env,
/// defaults) allows. Anyone who may patch the pod may write an annotation, which is less than
/// `pods/exec` or editing the spec: so an annotation may pick `none` or the very checker the spec
/// names, never another program; and it may send reloads and confirmations to the pod's own loopback
/// or to a place the spec's `reload` or `confirm` names, never to a new host.
fn beyond_spec(
    s: &Settings,
    base: &Settings,
    ann: &Annotations,
) -> Vec<(&'static Setting, Invalid)> {
    let spec_urls: Vec<&Url> = [
        match &base.reload {
            Reload::Http(u) => Some(u),
            _ => None,
        },
        base.confirm.as_ref().map(|c| &c.url),
    ]
    .into_iter()
    .flatten()
    .collect();
    let allowed_url = |u: &Url| u.is_loopback() || spec_urls.iter().any(|s| s.same_origin(u));
    let mut out = Vec::new();
    for setting in SETTINGS {
        let Some(value) = ann.get(setting.annotation) else {
            continue;
        };
        let problem = match setting.flag {
            "validate" if s.validate != Validate::None && s.validate != base.validate => {
                "names a checker the container spec does not: an annotation may only pick the one \
                 --validate (CONFGATE_VALIDATE) names, or none; to run another, set it in confgate's \
                 container spec"
            }
            "reload" if matches!(&s.reload, Reload::Http(u) if !allowed_url(u)) => {
                "sends reloads to a host the container spec does not name: an annotation may send them \
                 to the pod's own loopback, or where --reload or --confirm sends; to send elsewhere, \
                 set --reload (CONFGATE_RELOAD) in confgate's container spec"
            }
            // The record a trial writes is read by every pod of the fleet: a shorter trial than the
            // spec's would let one pod's annotation vouch for a config sooner for all of them. A spec
            // that turns it off never vouches, the longest trial of all.
            "trial" if !s.trial.is_zero() && base.trial.is_zero() => {
                "turns on the known-good trial, which the container spec turns off (--trial off): an \
                 annotation may lengthen the trial or turn it off, not turn it on (the record it writes \
                 is read by every pod); to record known-goods, set --trial (CONFGATE_TRIAL) in \
                 confgate's container spec"
            }
            "trial" if !s.trial.is_zero() && s.trial < base.trial => {
                "is shorter than the container spec's: an annotation may lengthen the known-good trial \
                 or turn it off, not shorten it (the record it writes is read by every pod); to \
                 shorten it, set --trial (CONFGATE_TRIAL) in confgate's container spec"
            }
            "confirm" if s.confirm.as_ref().is_some_and(|c| !allowed_url(&c.url)) => {
                "reads a host the container spec does not name: an annotation may read the pod's own \
                 loopback, or where --reload or --confirm sends; to read elsewhere, set --confirm \
                 (CONFGATE_CONFIRM) in confgate's container spec"
            }
            _ => continue,
        };
        out.push((
            setting,
            Invalid {
                setting: setting.annotation.to_owned(),
                value: if setting.redact {
                    redact(value)
                } else {
                    value.clone()
                },
                problem: problem.to_owned(),
                allowed: setting.allowed,
            },
        ));
    }
    out
}

impl Settings {
    /// Settings from flags and environment over the defaults; every bad value is reported.
    pub fn from_raw(raw: &Raw) -> Result<Settings, Error> {
        let (s, errors) = overlay(&Settings::default(), |setting| {
            setting
                .given(raw)
                .map(|v| (format!("--{} ({})", setting.flag, setting.env), v.clone()))
        });
        if errors.is_empty() {
            Ok(s)
        } else {
            Err(Error(errors.into_iter().map(|(_, e)| e).collect()))
        }
    }

    /// Applies pod annotations over `base` (flags, env, defaults). A bad annotation keeps the value that
    /// `in_force` had for that setting, so a typo never loosens what was being enforced.
    pub fn with_annotations(base: &Settings, in_force: &Settings, ann: &Annotations) -> Resolved {
        let (mut s, errors) = overlay(base, |setting| {
            ann.get(setting.annotation)
                .map(|v| (setting.annotation.to_owned(), RawValue::Text(v.clone())))
        });
        let mut errors = errors;
        errors.extend(beyond_spec(&s, base, ann));
        for (setting, _) in &errors {
            (setting.keep)(&mut s, in_force);
        }
        let given = SETTINGS
            .iter()
            .filter(|setting| !errors.iter().any(|(bad, _)| std::ptr::eq(*bad, *setting)))
            .filter_map(|setting| {
                let v = ann.get(setting.annotation)?;
                Some((setting.annotation.to_owned(), v.clone()))
            })
            .collect();
        let mut found: Vec<AnnotationProblem> = errors
            .into_iter()
            .map(|(_, e)| AnnotationProblem::Invalid(e))
            .collect();
        for key in ann.keys() {
            if key.starts_with(ANN_PREFIX) && !known_annotations().any(|k| k == key) {
                // As a mistyped flag gets clap's suggestion, under the same rule of nearness.
                // Compared after the prefix, which every one shares.
                let short = |k: &'static str| k.strip_prefix(ANN_PREFIX).unwrap_or(k);
                let nearest = crate::listing::nearest(
                    key.strip_prefix(ANN_PREFIX).unwrap_or(key),
                    known_annotations().map(short),
                );
                found.push(AnnotationProblem::Unknown {
                    key: key.clone(),
                    nearest,
                });
            }
        }
        Resolved {
            settings: s,
            problems: found.iter().map(ToString::to_string).collect(),
            found,
            given,
        }
    }

    /// The settings a record of annotation values last in force (`record`, read back after a restart)
    /// puts in force over `base`, where the annotations now give a bad value: each value is checked
    /// again as an annotation would be (its parser, and only what the container spec allows: the
    /// checker it names, reloads and confirmations to loopback or where it sends), so a record the
    /// component rewrote can do no more than an annotation. Returns those settings, the values used
    /// (what [`Settings::with_annotations`] then keeps by), and why each other entry was not used.
    pub fn last_in_force(
        base: &Settings,
        record: &Annotations,
    ) -> (Settings, Annotations, Vec<String>) {
        let r = Settings::with_annotations(base, base, record);
        let mut unused = r.problems;
        let mut used = Annotations::new();
        for (key, value) in r.given {
            if recordable(&key, &value) {
                used.insert(key, value);
            } else {
                unused.push(format!("{key}: a value with credentials is never recorded"));
            }
        }
        // Only the values kept are put in force: one refused above is the flag's again.
        let settings = Settings::with_annotations(base, base, &used).settings;
        (settings, used, unused)
    }
}

/// Whether the value `value` of `annotation` may be recorded in the promoted dir, which the component
/// shares: never one carrying credentials (a reload or confirm URL's `user:password@`).
pub fn recordable(annotation: &str, value: &str) -> bool {
    SETTINGS
        .iter()
        .find(|s| s.annotation == annotation)
        .is_some_and(|s| !s.redact || redact(value) == value)
}

impl Settings {
    /// The range as written, for status and logs.
    pub fn accepts_text(&self) -> Option<&str> {
        self.accepts.as_ref().map(|a| a.text())
    }
}

#[cfg(test)]
mod tests;
