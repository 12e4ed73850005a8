//! `accepts`: what the component accepts, a semver range or the Kubernetes group/versions it serves,
//! and a version read under the scheme of the range in force.

use super::*;

/// What the component accepts, with the text it was written as. Made only by `parse_accepts`, so
/// the range is always the one its text reads as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepts {
    pub(super) range: Range,
    pub(super) text: String,
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
            Ok(v) if v.level != crate::values::api_version::Level::Ga || text == "v1" => {
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
