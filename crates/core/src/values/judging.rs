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

/// What the component accepts, with the text it was written as. Made only by `parse_accepts`, so
/// the range is always the one its text reads as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepts {
    range: Range,
    text: String,
}

/// The two version schemes `accepts` speaks, told apart by its text: a semver range, or (any item
/// holding a `/`) the Kubernetes group/versions the component serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Range {
    Semver(VersionReq),
    Api(ApiVersions),
}

/// A version as read from a config and parsed under the scheme of the range in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemeVersion {
    Semver(semver::Version),
    Api(ApiVersion),
    /// Each key's version (`version-from` `yaml:*#...`), keys in byte order.
    Each(Vec<(String, SchemeVersion)>),
}

impl SchemeVersion {
    /// Precedence within one scheme (semver precedence, ignoring build metadata; Kubernetes' order for
    /// API versions); versions of different schemes are never compared (one range holds one scheme).
    pub fn cmp_precedence(&self, other: &SchemeVersion) -> std::cmp::Ordering {
        match (self, other) {
            (SchemeVersion::Semver(a), SchemeVersion::Semver(b)) => a.cmp_precedence(b),
            (SchemeVersion::Api(a), SchemeVersion::Api(b)) => a.cmp(b),
            // Key by key, in key order: two sets of the same files (variants of one of them) are
            // ordered by the first file whose versions differ.
            (SchemeVersion::Each(a), SchemeVersion::Each(b)) => a
                .iter()
                .zip(b)
                .map(|((ka, va), (kb, vb))| ka.cmp(kb).then_with(|| va.cmp_precedence(vb)))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| a.len().cmp(&b.len())),
            (a, b) => a.scheme_rank().cmp(&b.scheme_rank()),
        }
    }
}

impl SchemeVersion {
    /// Versions of different schemes are never compared (one range holds one scheme); a total order
    /// still needs them ranked.
    fn scheme_rank(&self) -> u8 {
        match self {
            SchemeVersion::Semver(_) => 0,
            SchemeVersion::Api(_) => 1,
            SchemeVersion::Each(_) => 2,
        }
    }

    /// The versions the files of an `Each` hold, each once, in the order of their first file; a
    /// single version alone.
    pub fn distinct(&self) -> Vec<&SchemeVersion> {
        match self {
            SchemeVersion::Each(each) => {
                let mut out: Vec<&SchemeVersion> = Vec::new();
                for (_, v) in each {
                    if !out.contains(&v) {
                        out.push(v);
                    }
                }
                out
            }
            one => vec![one],
        }
    }
}

/// A version as written; the files' distinct versions, comma-separated, for `Each`.
impl fmt::Display for SchemeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemeVersion::Semver(v) => v.fmt(f),
            SchemeVersion::Api(v) => v.fmt(f),
            SchemeVersion::Each(_) => {
                for (i, v) in self.distinct().into_iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    v.fmt(f)?;
                }
                Ok(())
            }
        }
    }
}

impl Accepts {
    /// The range, under the scheme its text names.
    pub fn range(&self) -> &Range {
        &self.range
    }

    /// The range as written (trimmed), for status, logs and reasons.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The semver range, under that scheme.
    pub fn semver(&self) -> Option<&VersionReq> {
        match &self.range {
            Range::Semver(req) => Some(req),
            Range::Api(_) => None,
        }
    }
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

/// The `accepts` setting from its text: a semver range, commas or (npm style) spaces between
/// comparators; or, when any item holds a `/`, a list of Kubernetes `GROUP/VERSION`s (commas or
/// spaces between them). One value holds one scheme: a mix is refused, naming both parts.
pub(crate) fn parse_accepts(s: &str) -> Result<Accepts, JudgingError> {
    let text = s.trim();
    if text.is_empty() {
        return Err(JudgingError::EmptyRange);
    }
    if text.contains('/') || text.contains('@') {
        return parse_api_versions(text).map(|set| Accepts {
            range: Range::Api(set),
            text: text.to_owned(),
        });
    }
    if text.contains("||") {
        return Err(JudgingError::Alternatives);
    }
    let req = VersionReq::parse(&comma_separated(text)).map_err(|e| {
        match text.parse::<KubeVersion>() {
            // `v1beta3` alone: a Kubernetes version without its group, not a range.
            Ok(v) if v.level != super::api_version::Level::Ga || text == "v1" => {
                JudgingError::GrouplessVersion {
                    reason: e.to_string(),
                    text: text.to_owned(),
                }
            }
            _ => JudgingError::NotARange(e.to_string()),
        }
    })?;
    if matches_nothing(&req) {
        return Err(JudgingError::MatchesNothing(text.to_owned()));
    }
    Ok(Accepts {
        range: Range::Semver(req),
        text: text.to_owned(),
    })
}

/// Whether no version can satisfy every comparator: the highest lower bound is above the lowest
/// upper bound (`>=3, <2`). Only the bounds that are certain count (a comparator with a pre-release,
/// or the upper end of `^` and `~`, is left out), so a range this accepts may still be narrow, never
/// one that matches something is refused.
fn matches_nothing(req: &VersionReq) -> bool {
    use semver::Op;
    // A bound is (major, minor, patch) and whether it is inclusive.
    type Bound = ((u64, u64, u64), bool);
    let mut lower: Option<Bound> = None;
    let mut upper: Option<Bound> = None;
    let mut raise = |b: Bound| {
        if lower.is_none_or(|l| b.0 > l.0 || (b.0 == l.0 && !b.1)) {
            lower = Some(b);
        }
    };
    let mut lower_upper = |b: Bound| {
        if upper.is_none_or(|u| b.0 < u.0 || (b.0 == u.0 && !b.1)) {
            upper = Some(b);
        }
    };
    for c in &req.comparators {
        if !c.pre.is_empty() {
            continue;
        }
        let v = (c.major, c.minor.unwrap_or(0), c.patch.unwrap_or(0));
        // The first version past the part given: 3 -> 4.0.0, 3.1 -> 3.2.0, 3.1.2 -> 3.1.3.
        let next = match (c.minor, c.patch) {
            (None, _) => (c.major.saturating_add(1), 0, 0),
            (Some(m), None) => (c.major, m.saturating_add(1), 0),
            (Some(m), Some(p)) => (c.major, m, p.saturating_add(1)),
        };
        match c.op {
            Op::Exact | Op::Wildcard => {
                raise((v, true));
                lower_upper((next, false));
            }
            Op::Greater => raise((next, true)),
            Op::GreaterEq | Op::Tilde | Op::Caret => raise((v, true)),
            Op::Less => lower_upper((v, false)),
            Op::LessEq => lower_upper((next, false)),
            _ => {}
        }
    }
    match (lower, upper) {
        (Some((l, li)), Some((u, ui))) => l > u || (l == u && !(li && ui)),
        _ => false,
    }
}

/// The items of an API-version list, each `GROUP/VERSION`, or `COMPONENT@1.N` for every group/version
/// that release of the component serves (`kube_release`'s table).
fn parse_api_versions(text: &str) -> Result<ApiVersions, JudgingError> {
    let items: Vec<&str> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|i| !i.is_empty())
        .collect();
    let (api, other): (Vec<&str>, Vec<&str>) = items
        .iter()
        .partition(|i| i.contains('/') || i.contains('@'));
    if let (Some(a), Some(o)) = (api.first(), other.first()) {
        return Err(JudgingError::MixedSchemes {
            api: (*a).to_owned(),
            other: (*o).to_owned(),
        });
    }
    let mut versions = Vec::with_capacity(api.len());
    for item in api {
        if item.contains('@') {
            let (_, _, set) =
                kube_release::pinned(item).map_err(|reason| JudgingError::Release {
                    item: item.to_owned(),
                    reason,
                })?;
            versions.extend(set.iter().cloned());
            continue;
        }
        versions.push(
            item.parse::<ApiVersion>()
                .map_err(|reason| JudgingError::ApiVersion {
                    item: item.to_owned(),
                    reason,
                })?,
        );
    }
    ApiVersions::new(versions).ok_or(JudgingError::NoApiVersions)
}

/// The npm/Helm dialect separates comparators by spaces (`>=2.4.0 <3.0.0`, `>= 2.4.0`); the semver
/// crate wants commas. Text that already has commas is left for the crate to judge.
fn comma_separated(text: &str) -> String {
    if text.contains(',') {
        return text.to_owned();
    }
    let mut out: Vec<String> = Vec::new();
    let mut pending_op = String::new();
    for tok in text.split_whitespace() {
        if tok
            .chars()
            .all(|c| matches!(c, '<' | '>' | '=' | '^' | '~'))
        {
            pending_op.push_str(tok);
        } else {
            out.push(format!("{}{tok}", std::mem::take(&mut pending_op)));
        }
    }
    if !pending_op.is_empty() {
        out.push(pending_op);
    }
    out.join(", ")
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

#[cfg(test)]
mod tests {
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
        let a =
            parse_accepts(" kubescheduler.config.k8s.io/v1beta3, kubescheduler.config.k8s.io/v1 ")
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
}
