//! Kubernetes API versions (`GROUP/VERSION`, such as `kubescheduler.config.k8s.io/v1`), the second
//! version scheme beside semver: how one is read, how versions order (as Kubernetes orders them), and
//! the set of group/versions a component serves, which is what `accepts` holds under this scheme.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// How stable a Kubernetes version is; GA outranks beta outranks alpha, whatever the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// `vNalphaM`.
    Alpha(u64),
    /// `vNbetaM`.
    Beta(u64),
    /// `vN`.
    Ga,
}

/// A Kubernetes version: `v1`, `v1beta2`, `v2alpha1`. Ordered as Kubernetes orders them
/// (`k8s.io/apimachinery`'s `CompareKubeAwareVersionStrings`): GA over beta over alpha, then by the
/// major number, then by the beta's or alpha's number: `v2 > v1 > v2beta1 > v1beta2 > v1beta1 > v1alpha1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KubeVersion {
    pub major: u64,
    pub level: Level,
}

impl KubeVersion {
    fn rank(&self) -> (u8, u64, u64) {
        match self.level {
            Level::Ga => (2, self.major, 0),
            Level::Beta(n) => (1, self.major, n),
            Level::Alpha(n) => (0, self.major, n),
        }
    }
}

impl Ord for KubeVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for KubeVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Why a text is not a Kubernetes version or API version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error(
        "not a Kubernetes version (expected vN, vNbetaM or vNalphaM with N and M from 1, such as v1 or v1beta3)"
    )]
    Version,
    #[error(
        "the group is not a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253 characters)"
    )]
    Group,
    #[error("missing the group: write GROUP/VERSION, such as kubescheduler.config.k8s.io/v1")]
    NoGroup,
}

/// A positive decimal without a leading zero, as Kubernetes' `^v([\d]+)(?:(alpha|beta)([\d]+))?$`
/// reads it (its numbers are at least 1 in every version it serves).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl FromStr for KubeVersion {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let rest = s.strip_prefix('v').ok_or(ParseError::Version)?;
        let at = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (major, tail) = rest.split_at(at);
        let major = number(major).ok_or(ParseError::Version)?;
        let level = if tail.is_empty() {
            Level::Ga
        } else if let Some(n) = tail.strip_prefix("beta") {
            Level::Beta(number(n).ok_or(ParseError::Version)?)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            Level::Alpha(number(n).ok_or(ParseError::Version)?)
        } else {
            return Err(ParseError::Version);
        };
        Ok(KubeVersion { major, level })
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.level {
            Level::Ga => write!(f, "v{}", self.major),
            Level::Beta(n) => write!(f, "v{}beta{n}", self.major),
            Level::Alpha(n) => write!(f, "v{}alpha{n}", self.major),
        }
    }
}

/// A group and a version, as an object's `apiVersion` names them. The core group is empty (`v1`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiVersion {
    pub group: String,
    pub version: KubeVersion,
}

/// What Kubernetes accepts as an API group: a DNS subdomain (RFC 1123).
fn is_group(g: &str) -> bool {
    g.len() <= 253
        && g.split('.').all(|l| {
            let b = l.as_bytes();
            let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty()
                && alnum(b[0])
                && alnum(b[b.len() - 1])
                && b.iter().all(|&c| alnum(c) || c == b'-')
        })
}

impl ApiVersion {
    /// An `apiVersion` as an object carries it: `GROUP/VERSION`, or a bare `VERSION` of the core group.
    pub fn parse_object(s: &str) -> Result<ApiVersion, ParseError> {
        match s.split_once('/') {
            None => Ok(ApiVersion {
                group: String::new(),
                version: s.parse()?,
            }),
            Some(_) => s.parse(),
        }
    }
}

impl FromStr for ApiVersion {
    type Err = ParseError;
    /// `GROUP/VERSION` with a group: what `accepts` lists (a config API always has one).
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (group, version) = s.split_once('/').ok_or(ParseError::NoGroup)?;
        if !is_group(group) {
            return Err(ParseError::Group);
        }
        Ok(ApiVersion {
            group: group.to_owned(),
            version: version.parse()?,
        })
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.version)
        } else {
            write!(f, "{}/{}", self.group, self.version)
        }
    }
}

/// Versions of variants in one ConfigMap are ordered by version first (Kubernetes' order), then by
/// group, so that the order is total and a choice never depends on key order.
impl Ord for ApiVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.version
            .cmp(&other.version)
            .then_with(|| other.group.cmp(&self.group))
    }
}

impl PartialOrd for ApiVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Where an API version stands against the set a component serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// One of the set.
    Accepted,
    /// Of a group in the set, newer than every version of that group there.
    Newer,
    /// Of a group in the set, older than every version of that group there.
    Older,
    /// Of a group in the set, between its versions but not one of them.
    Between,
    /// Of a group the set does not name.
    OtherGroup,
}

/// The group/versions a component serves: `accepts` under the API-version scheme. Kept newest first
/// (each once), so the first is the version to suggest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersions(Vec<ApiVersion>);

impl ApiVersions {
    /// The set of `versions`; `None` when empty.
    pub fn new(mut versions: Vec<ApiVersion>) -> Option<ApiVersions> {
        versions.sort_by(|a, b| b.cmp(a));
        versions.dedup();
        (!versions.is_empty()).then_some(ApiVersions(versions))
    }

    /// Newest first.
    pub fn iter(&self) -> impl Iterator<Item = &ApiVersion> {
        self.0.iter()
    }

    /// The newest version served, the one a fix suggests.
    pub fn newest(&self) -> &ApiVersion {
        &self.0[0]
    }

    /// Where `v` stands against the set.
    pub fn standing(&self, v: &ApiVersion) -> Standing {
        let same: Vec<KubeVersion> = self
            .0
            .iter()
            .filter(|a| a.group == v.group)
            .map(|a| a.version)
            .collect();
        let (Some(max), Some(min)) = (same.iter().max(), same.iter().min()) else {
            return Standing::OtherGroup;
        };
        if same.contains(&v.version) {
            Standing::Accepted
        } else if v.version > *max {
            Standing::Newer
        } else if v.version < *min {
            Standing::Older
        } else {
            Standing::Between
        }
    }

    /// Whether the set names `group`.
    pub fn has_group(&self, group: &str) -> bool {
        self.0.iter().any(|a| a.group == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kv(s: &str) -> KubeVersion {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn kubernetes_order() {
        // The order apimachinery documents for CompareKubeAwareVersionStrings.
        let order = [
            "v10",
            "v2",
            "v1",
            "v11beta2",
            "v10beta3",
            "v3beta1",
            "v1beta2",
            "v1beta1",
            "v12alpha1",
            "v11alpha2",
            "v1alpha1",
        ];
        for w in order.windows(2) {
            assert!(kv(w[0]) > kv(w[1]), "{} > {}", w[0], w[1]);
        }
    }

    #[test]
    fn parsing_as_kubernetes_reads_versions() {
        for ok in ["v1", "v1beta3", "v2alpha1", "v10beta12"] {
            assert_eq!(kv(ok).to_string(), ok);
        }
        for bad in [
            "", "v", "1", "v0", "v01", "v1beta", "v1beta0", "v1gamma1", "V1", "v1.2", "v1 ",
            "v1beta1x",
        ] {
            assert_eq!(
                bad.parse::<KubeVersion>(),
                Err(ParseError::Version),
                "{bad:?}"
            );
        }
        let a: ApiVersion = "kubescheduler.config.k8s.io/v1".parse().unwrap();
        assert_eq!(a.group, "kubescheduler.config.k8s.io");
        assert_eq!(a.version, kv("v1"));
        assert_eq!("v1".parse::<ApiVersion>(), Err(ParseError::NoGroup));
        assert_eq!(ApiVersion::parse_object("v1").unwrap().to_string(), "v1");
        for bad in ["Kube.io/v1", "-a.io/v1", "a..io/v1", "/v1", "a_b/v1"] {
            assert_eq!(bad.parse::<ApiVersion>(), Err(ParseError::Group), "{bad}");
        }
        assert_eq!("a.io/v1/x".parse::<ApiVersion>(), Err(ParseError::Version));
    }

    #[test]
    fn standing_in_a_set() {
        let set = ApiVersions::new(vec![
            "s.k8s.io/v1beta3".parse().unwrap(),
            "s.k8s.io/v1".parse().unwrap(),
            "s.k8s.io/v1".parse().unwrap(),
            "s.k8s.io/v1alpha2".parse().unwrap(),
        ])
        .unwrap();
        assert_eq!(set.newest().to_string(), "s.k8s.io/v1");
        assert_eq!(set.iter().count(), 3, "each once");
        let at = |s: &str| set.standing(&ApiVersion::parse_object(s).unwrap());
        assert_eq!(at("s.k8s.io/v1beta3"), Standing::Accepted);
        assert_eq!(at("s.k8s.io/v2"), Standing::Newer);
        assert_eq!(at("s.k8s.io/v1alpha1"), Standing::Older);
        assert_eq!(at("s.k8s.io/v1beta2"), Standing::Between);
        assert_eq!(at("other.io/v1"), Standing::OtherGroup);
        assert_eq!(at("v1"), Standing::OtherGroup);
    }

    fn arb_version() -> impl Strategy<Value = KubeVersion> {
        (
            1u64..30,
            prop_oneof![
                Just(Level::Ga),
                (1u64..30).prop_map(Level::Beta),
                (1u64..30).prop_map(Level::Alpha)
            ],
        )
            .prop_map(|(major, level)| KubeVersion { major, level })
    }

    proptest! {
        /// Every version reads back as it is shown.
        #[test]
        fn shown_versions_parse_back(v in arb_version(), g in "[a-z]{1,8}(\\.[a-z0-9]{1,8}){0,3}") {
            prop_assert_eq!(v.to_string().parse::<KubeVersion>(), Ok(v));
            let a = ApiVersion { group: g, version: v };
            prop_assert_eq!(a.to_string().parse::<ApiVersion>(), Ok(a));
        }

        /// GA outranks beta outranks alpha, whatever the numbers; within a level, the numbers decide.
        #[test]
        fn levels_decide_first(a in arb_version(), b in arb_version()) {
            let level = |v: &KubeVersion| match v.level { Level::Ga => 2, Level::Beta(_) => 1, Level::Alpha(_) => 0 };
            if level(&a) != level(&b) {
                prop_assert_eq!(a.cmp(&b), level(&a).cmp(&level(&b)));
            } else if a.major != b.major {
                prop_assert_eq!(a.cmp(&b), a.major.cmp(&b.major));
            }
            prop_assert_eq!(a.cmp(&b) == Ordering::Equal, a == b);
        }

        /// Within a set's group, a version is accepted, or on exactly one side, or between.
        #[test]
        fn standing_agrees_with_the_order(set in prop::collection::vec(arb_version(), 1..4), v in arb_version()) {
            let g = "g.io".to_owned();
            let s = ApiVersions::new(set.iter().map(|&version| ApiVersion { group: g.clone(), version }).collect()).unwrap();
            let st = s.standing(&ApiVersion { group: g, version: v });
            let expected = if set.contains(&v) { Standing::Accepted }
                else if set.iter().all(|&x| v > x) { Standing::Newer }
                else if set.iter().all(|&x| v < x) { Standing::Older }
                else { Standing::Between };
            prop_assert_eq!(st, expected);
        }
    }
}
