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
mod raw;

pub(crate) use container::ANN_SOURCE;
#[cfg(test)]
pub(crate) use container::CONTAINER_SETTINGS;
pub use container::ContainerSetting;
pub use container::container_table;
pub(crate) use container::{Looked, check_paths};
pub use describe::Given;
pub use describe::{known_annotations, readme_table};
pub use error::{Error, Invalid, Problem};
pub use gate::{Raw, Repeat, SETTINGS, Setting, Settings};
pub use raw::RawValue;

const ANN_PREFIX: &str = "confgate.io/";

/// Settings resolved from annotations, with the problems found on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub settings: Settings,
    /// Bad or unknown annotations; each one makes confgate not ready.
    pub problems: Vec<String>,
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
        for (setting, _) in &errors {
            (setting.keep)(&mut s, in_force);
        }
        let mut problems: Vec<String> = errors.iter().map(|(_, e)| e.to_string()).collect();
        for key in ann.keys() {
            if key.starts_with(ANN_PREFIX) && !known_annotations().any(|k| k == key) {
                // As a mistyped flag gets clap's suggestion, under the same rule of nearness.
                // Compared after the prefix, which every one shares.
                let short = |k: &'static str| k.strip_prefix(ANN_PREFIX).unwrap_or(k);
                let near = crate::listing::nearest(
                    key.strip_prefix(ANN_PREFIX).unwrap_or(key),
                    known_annotations().map(short),
                )
                .map(|k| format!(" did you mean {ANN_PREFIX}{k}?"))
                .unwrap_or_default();
                problems.push(format!(
                    "unknown annotation {key};{near} known: {}",
                    known_annotations().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Resolved {
            settings: s,
            problems,
        }
    }

    /// The range as written, for status and logs.
    pub(crate) fn accepts_text(&self) -> Option<&str> {
        self.accepts.as_ref().map(|a| a.text())
    }
}

#[cfg(test)]
mod tests;
