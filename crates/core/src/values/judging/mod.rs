//! The values of the settings that decide a verdict: the accepted range, where the version is, the
//! required keys and the variants. Each parses from the text a flag, environment variable or annotation
//! gives and shows back as that text.
//!
//! `Accepts` holds a `Range`: a semver `VersionReq` (npm-style spaces read as commas), or the
//! `ApiVersions` a component serves, told apart by a `/` in the text; a mix of both is refused.
//! `SchemeVersion` is a version read under either scheme.

use std::fmt;
use std::str::FromStr;

use semver::VersionReq;

use crate::configmap::is_valid_key;

use super::api_version::{ApiVersion, ApiVersions, KubeVersion, ParseError};
use super::kube_release::{self, ReleaseError};

mod accepts;
#[cfg(test)]
mod tests;

pub(crate) use accepts::parse_accepts;
pub use accepts::{Accepts, Range, SchemeVersion};

/// Why a text is not the value of a judging setting (accepts, version-from, require, variants).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JudgingError {
    #[error("the range is empty")]
    EmptyRange,
    #[error("alternatives (||) are not supported; write one range")]
    Alternatives,
    /// The semver crate's reason.
    #[error("not a semver range ({0})")]
    NotARange(String),
    /// `v1beta3` alone: a Kubernetes version without its group, not a range.
    #[error(
        "not a semver range ({reason}); {text} looks like a Kubernetes version: name its group, as in kubescheduler.config.k8s.io/{text}"
    )]
    GrouplessVersion { reason: String, text: String },
    #[error(
        "{0} matches no version: its lower bound is above its upper bound (a range lists the lowest version first, e.g. >=2.4.0, <3.0.0)"
    )]
    MatchesNothing(String),
    #[error(
        "mixes Kubernetes API versions ({api}) with {other:?}, which is not GROUP/VERSION; one value holds one scheme: a semver range such as \">=2.4.0, <3.0.0\", or a list of API versions such as \"kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3\""
    )]
    MixedSchemes { api: String, other: String },
    #[error("{item:?} is not a Kubernetes API version: {reason}")]
    ApiVersion { item: String, reason: ParseError },
    /// `COMPONENT@1.N` that names no component or release the table knows.
    #[error("{item:?}: {reason}")]
    Release { item: String, reason: ReleaseError },
    #[error("the list of API versions is empty")]
    NoApiVersions,
    #[error("{0:?} is not a valid ConfigMap key")]
    Key(String),
    #[error("missing the file:, json: or yaml: prefix")]
    SourcePrefix,
    #[error(
        "file:* is not a version source: every key's version is read at a pointer, as in yaml:*#/apiVersion or json:*#/apiVersion"
    )]
    EachWholeFile,
    #[error("{0}: needs KEY#/pointer")]
    NoPointer(String),
    #[error("pointer {0:?} must be empty or start with '/' (RFC 6901)")]
    Pointer(String),
    #[error("unknown source kind {0:?}")]
    SourceKind(String),
    #[error("missing \"->\" between the pattern and the promoted name")]
    NoArrow,
    #[error("the pattern {0:?} has no '*'")]
    NoStar(String),
    #[error("the pattern {0:?} has more than one '*'")]
    Stars(String),
    #[error("the pattern {0:?} does not make valid ConfigMap keys")]
    PatternKeys(String),
    #[error("the promoted name {promoted:?} matches the pattern {pattern:?}")]
    PromotedMatches { promoted: String, pattern: String },
}

/// Where the schema version lives in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionFrom {
    /// The whole content of a key, trimmed.
    File { key: String },
    /// An RFC 6901 pointer into a key parsed as JSON.
    Json { key: String, pointer: String },
    /// An RFC 6901 pointer into a key parsed as YAML.
    Yaml { key: String, pointer: String },
    /// The same pointer into every key, each parsed as `format` says (`yaml:*#/apiVersion`): a config
    /// of several files, each versioned on its own, as kube-apiserver's admission, audit and
    /// encryption configs are.
    Each { format: Format, pointer: String },
}

/// How a key is parsed to read a version at a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Yaml => "yaml",
        }
    }
}

/// Several versions of one config file side by side: keys matching `pattern` are the variants, and the
/// chosen one is promoted as `promoted`. Written `config.v*.yaml -> config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variants {
    /// The pattern before its one `*`.
    pub prefix: String,
    /// The pattern after its one `*`.
    pub suffix: String,
    /// The key the component reads.
    pub promoted: String,
}

impl Variants {
    /// Whether `key` is a variant: the prefix, at least one character without `/`, the suffix.
    pub fn matches(&self, key: &str) -> bool {
        key.len() > self.prefix.len() + self.suffix.len()
            && key.starts_with(&self.prefix)
            && key.ends_with(&self.suffix)
            && !key[self.prefix.len()..key.len() - self.suffix.len()].contains('/')
    }
}

impl FromStr for Variants {
    type Err = JudgingError;
    fn from_str(s: &str) -> Result<Self, JudgingError> {
        let (pattern, promoted) = s.split_once("->").ok_or(JudgingError::NoArrow)?;
        let (pattern, promoted) = (pattern.trim(), promoted.trim());
        let (prefix, suffix) = pattern
            .split_once('*')
            .ok_or_else(|| JudgingError::NoStar(pattern.to_owned()))?;
        if suffix.contains('*') {
            return Err(JudgingError::Stars(pattern.to_owned()));
        }
        if !is_valid_key(&format!("{prefix}x{suffix}")) {
            return Err(JudgingError::PatternKeys(pattern.to_owned()));
        }
        if !is_valid_key(promoted) {
            return Err(JudgingError::Key(promoted.to_owned()));
        }
        let v = Variants {
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
            promoted: promoted.to_owned(),
        };
        if v.matches(promoted) {
            return Err(JudgingError::PromotedMatches {
                promoted: promoted.to_owned(),
                pattern: pattern.to_owned(),
            });
        }
        Ok(v)
    }
}

impl fmt::Display for Variants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}*{} -> {}", self.prefix, self.suffix, self.promoted)
    }
}

/// The `variants` setting from its text; `none` or nothing: no variants.
pub(crate) fn parse_variants(s: &str) -> Result<Option<Variants>, JudgingError> {
    match s.trim() {
        "" | "none" => Ok(None),
        v => v.parse().map(Some),
    }
}

impl FromStr for VersionFrom {
    type Err = JudgingError;
    fn from_str(s: &str) -> Result<Self, JudgingError> {
        let (kind, rest) = s.split_once(':').ok_or(JudgingError::SourcePrefix)?;
        let check_key = |key: &str| {
            if is_valid_key(key) {
                Ok(key.to_owned())
            } else {
                Err(JudgingError::Key(key.to_owned()))
            }
        };
        match kind {
            "file" if rest == "*" => Err(JudgingError::EachWholeFile),
            "file" => Ok(VersionFrom::File {
                key: check_key(rest)?,
            }),
            "json" | "yaml" => {
                let (key, pointer) = rest
                    .split_once('#')
                    .ok_or_else(|| JudgingError::NoPointer(kind.to_owned()))?;
                if !(pointer.is_empty() || pointer.starts_with('/')) {
                    return Err(JudgingError::Pointer(pointer.to_owned()));
                }
                let pointer = pointer.to_owned();
                if key == "*" {
                    let format = if kind == "json" {
                        Format::Json
                    } else {
                        Format::Yaml
                    };
                    return Ok(VersionFrom::Each { format, pointer });
                }
                let key = check_key(key)?;
                Ok(if kind == "json" {
                    VersionFrom::Json { key, pointer }
                } else {
                    VersionFrom::Yaml { key, pointer }
                })
            }
            other => Err(JudgingError::SourceKind(other.to_owned())),
        }
    }
}

impl fmt::Display for VersionFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionFrom::File { key } => write!(f, "file:{key}"),
            VersionFrom::Json { key, pointer } => write!(f, "json:{key}#{pointer}"),
            VersionFrom::Yaml { key, pointer } => write!(f, "yaml:{key}#{pointer}"),
            VersionFrom::Each { format, pointer } => write!(f, "{}:*#{pointer}", format.as_str()),
        }
    }
}

impl VersionFrom {
    /// The ConfigMap key the version is read from; `*` for every key.
    pub fn key(&self) -> &str {
        match self {
            VersionFrom::File { key }
            | VersionFrom::Json { key, .. }
            | VersionFrom::Yaml { key, .. } => key,
            VersionFrom::Each { .. } => "*",
        }
    }

    /// The source that reads `key` as this one reads each key (`Each`); itself for one key.
    pub fn for_key(&self, key: &str) -> VersionFrom {
        match self {
            VersionFrom::Each { format, pointer } => {
                let (key, pointer) = (key.to_owned(), pointer.clone());
                match format {
                    Format::Json => VersionFrom::Json { key, pointer },
                    Format::Yaml => VersionFrom::Yaml { key, pointer },
                }
            }
            one => one.clone(),
        }
    }
}

/// The `require` setting from its text: comma-separated keys, each once, in the order given.
pub(crate) fn parse_require(s: &str) -> Result<Vec<String>, JudgingError> {
    let mut keys = Vec::new();
    for key in s.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        if !is_valid_key(key) {
            return Err(JudgingError::Key(key.to_owned()));
        }
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_owned());
        }
    }
    Ok(keys)
}
