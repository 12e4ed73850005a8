//! Which config group/versions each Kubernetes release of a control-plane component serves: a table
//! kept by hand from the Kubernetes release notes and checked against each release's source (the
//! group/versions its scheme registers), so `accepts` can name a component and a release
//! (`kube-scheduler@1.36`) and `check --kubernetes-version` can flag a config an upgrade stops serving.
//!
//! Keeping it current (docs/control-plane.md says the same): for each new minor release, read its
//! changelog's "API Change" and "Deprecation" sections for these groups, and the `register.go` of
//! each group below in that release's source; add a row where a version is added, set `removed`
//! where one is removed, and raise [`LAST`].

use std::fmt;
use std::str::FromStr;

use super::api_version::{ApiVersion, ApiVersions};

/// A control-plane component whose config files carry an `apiVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    KubeApiserver,
    KubeScheduler,
    KubeControllerManager,
    KubeProxy,
    Kubelet,
}

impl Component {
    const ALL: [Component; 5] = [
        Component::KubeApiserver,
        Component::KubeScheduler,
        Component::KubeControllerManager,
        Component::KubeProxy,
        Component::Kubelet,
    ];

    /// Its binary's name, as an `accepts` value writes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Component::KubeApiserver => "kube-apiserver",
            Component::KubeScheduler => "kube-scheduler",
            Component::KubeControllerManager => "kube-controller-manager",
            Component::KubeProxy => "kube-proxy",
            Component::Kubelet => "kubelet",
        }
    }

    /// The component that reads configs of `group`, when the table knows one.
    pub(crate) fn of_group(group: &str) -> Option<Component> {
        TABLE.iter().find(|r| r.group == group).map(|r| r.component)
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Kubernetes minor release, `1.N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release(pub u32);

/// The first release the table describes: older ones are long out of support, and their notes were
/// not checked row by row.
pub(crate) const FIRST: Release = Release(22);
/// The newest release the table describes; raised with each release (see the module's comment).
pub const LAST: Release = Release(36);

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

/// Why a text is not a component and release the table knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    #[error(
        "{0:?} is not a Kubernetes release: write 1.N (1.N.P and a leading v are read as 1.N), such as 1.36"
    )]
    Syntax(String),
    #[error(
        "Kubernetes {release} is outside the releases confgate's table knows ({FIRST} to {LAST}); use a confgate built with a newer table, or list the API versions the component serves"
    )]
    Unknown { release: Release },
    #[error(
        "{0:?} is not a component the table knows: kube-apiserver, kube-scheduler, kube-controller-manager, kube-proxy or kubelet"
    )]
    Component(String),
    #[error(
        "kube-controller-manager reads no versioned config file (it has no --config flag), so it serves no config API version; gate its kubeconfig by other means"
    )]
    NoConfigFile,
    #[error("{0:?} is not COMPONENT@1.N, such as kube-scheduler@1.36")]
    Pinned(String),
}

impl FromStr for Release {
    type Err = ReleaseError;
    fn from_str(s: &str) -> Result<Release, ReleaseError> {
        let bad = || ReleaseError::Syntax(s.to_owned());
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let mut parts = t.split('.');
        let (Some("1"), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(bad());
        };
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(minor) || parts.clone().count() > 1 || !parts.all(digits) {
            return Err(bad());
        }
        let release = Release(minor.parse().map_err(|_| bad())?);
        if release < FIRST || release > LAST {
            return Err(ReleaseError::Unknown { release });
        }
        Ok(release)
    }
}

impl FromStr for Component {
    type Err = ReleaseError;
    fn from_str(s: &str) -> Result<Component, ReleaseError> {
        Component::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| ReleaseError::Component(s.to_owned()))
    }
}

/// One group/version of one kind a component reads from a file, and the releases that serve it.
#[derive(Debug, Clone, Copy)]
struct Row {
    component: Component,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    /// The first release that serves it; [`FIRST`] where it was served before the table begins.
    since: u32,
    /// The first release that no longer serves it.
    removed: Option<u32>,
}

const fn row(
    component: Component,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    since: u32,
    removed: Option<u32>,
) -> Row {
    Row {
        component,
        group,
        version,
        kind,
        since,
        removed,
    }
}

use Component::{KubeApiserver as Api, KubeProxy as Proxy, KubeScheduler as Sched, Kubelet};

const SCHED: &str = "kubescheduler.config.k8s.io";
const APISERVER: &str = "apiserver.config.k8s.io";
const APISERVER_LEGACY: &str = "apiserver.k8s.io";
const AUDIT: &str = "audit.k8s.io";
const PROXY: &str = "kubeproxy.config.k8s.io";
const KUBELET: &str = "kubelet.config.k8s.io";

/// The table. kube-controller-manager has no row: it reads no versioned config file.
const TABLE: &[Row] = &[
    // kube-scheduler --config.
    row(
        Sched,
        SCHED,
        "v1beta1",
        "KubeSchedulerConfiguration",
        22,
        Some(23),
    ),
    row(
        Sched,
        SCHED,
        "v1beta2",
        "KubeSchedulerConfiguration",
        22,
        Some(28),
    ),
    row(
        Sched,
        SCHED,
        "v1beta3",
        "KubeSchedulerConfiguration",
        23,
        Some(29),
    ),
    row(Sched, SCHED, "v1", "KubeSchedulerConfiguration", 25, None),
    // kube-apiserver --admission-control-config-file, --encryption-provider-config,
    // --authentication-config, --authorization-config, --tracing-config-file,
    // --egress-selector-config-file, --audit-policy-file.
    row(Api, APISERVER, "v1", "AdmissionConfiguration", 22, None),
    row(Api, APISERVER, "v1", "EncryptionConfiguration", 22, None),
    row(Api, APISERVER, "v1", "AuthorizationConfiguration", 32, None),
    row(
        Api,
        APISERVER,
        "v1",
        "AuthenticationConfiguration",
        34,
        None,
    ),
    row(Api, APISERVER, "v1", "TracingConfiguration", 34, None),
    row(Api, APISERVER, "v1beta1", "TracingConfiguration", 27, None),
    row(
        Api,
        APISERVER,
        "v1beta1",
        "AuthenticationConfiguration",
        30,
        None,
    ),
    row(
        Api,
        APISERVER,
        "v1beta1",
        "AuthorizationConfiguration",
        30,
        None,
    ),
    row(Api, APISERVER, "v1alpha1", "TracingConfiguration", 22, None),
    row(
        Api,
        APISERVER,
        "v1alpha1",
        "AuthenticationConfiguration",
        29,
        None,
    ),
    row(
        Api,
        APISERVER,
        "v1alpha1",
        "AuthorizationConfiguration",
        29,
        None,
    ),
    row(
        Api,
        APISERVER_LEGACY,
        "v1alpha1",
        "AdmissionConfiguration",
        22,
        None,
    ),
    row(
        Api,
        APISERVER_LEGACY,
        "v1alpha1",
        "EgressSelectorConfiguration",
        22,
        None,
    ),
    row(
        Api,
        APISERVER_LEGACY,
        "v1beta1",
        "EgressSelectorConfiguration",
        22,
        None,
    ),
    row(Api, AUDIT, "v1", "Policy", 22, None),
    row(Api, AUDIT, "v1beta1", "Policy", 22, Some(24)),
    row(Api, AUDIT, "v1alpha1", "Policy", 22, Some(24)),
    // kube-proxy --config.
    row(Proxy, PROXY, "v1alpha1", "KubeProxyConfiguration", 22, None),
    // kubelet --config and --image-credential-provider-config.
    row(
        Kubelet,
        KUBELET,
        "v1beta1",
        "KubeletConfiguration",
        22,
        None,
    ),
    row(
        Kubelet,
        KUBELET,
        "v1alpha1",
        "CredentialProviderConfig",
        22,
        None,
    ),
    row(
        Kubelet,
        KUBELET,
        "v1beta1",
        "CredentialProviderConfig",
        24,
        None,
    ),
    row(Kubelet, KUBELET, "v1", "CredentialProviderConfig", 26, None),
];

impl Row {
    fn serves(&self, release: Release) -> bool {
        release.0 >= self.since && self.removed.is_none_or(|r| release.0 < r)
    }

    fn api_version(&self) -> ApiVersion {
        ApiVersion {
            group: self.group.to_owned(),
            version: self.version.parse().expect("the table's versions parse"),
        }
    }

    fn is(&self, v: &ApiVersion) -> bool {
        self.group == v.group && self.version.parse().ok() == Some(v.version)
    }
}

/// The group/versions `component` serves in `release`, in any of its config files.
pub(crate) fn served(component: Component, release: Release) -> Result<ApiVersions, ReleaseError> {
    let versions = TABLE
        .iter()
        .filter(|r| r.component == component && r.serves(release))
        .map(Row::api_version)
        .collect();
    ApiVersions::new(versions).ok_or(ReleaseError::NoConfigFile)
}

/// `COMPONENT@1.N`, as an `accepts` item writes it: the group/versions that release serves.
pub(crate) fn pinned(item: &str) -> Result<(Component, Release, ApiVersions), ReleaseError> {
    let (component, release) = item
        .split_once('@')
        .ok_or_else(|| ReleaseError::Pinned(item.to_owned()))?;
    let component: Component = component.parse()?;
    let release: Release = release.parse()?;
    Ok((component, release, served(component, release)?))
}

/// What `release` makes of a config at `v`: `None` when the table does not know its group (not a
/// component's config) or the release serves it; else why not, typed.
pub fn upgrade_stops(v: &ApiVersion, release: Release) -> Option<NotServed> {
    let component = Component::of_group(&v.group)?;
    let rows: Vec<&Row> = TABLE.iter().filter(|r| r.is(v)).collect();
    if rows.iter().any(|r| r.serves(release)) {
        return None;
    }
    let served = served(component, release).ok()?;
    // The release that removed it, when the table says so and it is at or before the target.
    let removed_in = rows
        .iter()
        .filter_map(|r| r.removed)
        .filter(|&r| r <= release.0)
        .max()
        .map(Release);
    // Served only from a later release (a config written for a newer component).
    let added_in = rows
        .iter()
        .map(|r| r.since)
        .filter(|&s| s > release.0)
        .min()
        .map(Release);
    Some(NotServed {
        component,
        release,
        removed_in,
        added_in,
        served,
    })
}

/// Why a release does not serve a config's group/version, as typed facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotServed {
    pub component: Component,
    pub release: Release,
    /// The release that removed it (at or before the target).
    pub removed_in: Option<Release>,
    /// The first release that serves it (after the target).
    pub added_in: Option<Release>,
    /// What the target release serves.
    pub served: ApiVersions,
}

impl NotServed {
    /// The served versions of `group`, newest first, as a reason lists them.
    pub fn of_group(&self, group: &str) -> Vec<String> {
        self.served
            .iter()
            .filter(|a| a.group == group)
            .map(ToString::to_string)
            .collect()
    }
}

/// The kinds the table lists for `v`, for a reason ("KubeSchedulerConfiguration").
pub fn kinds(v: &ApiVersion) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = TABLE.iter().filter(|r| r.is(v)).map(|r| r.kind).collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(set: &ApiVersions) -> Vec<String> {
        set.iter().map(ToString::to_string).collect()
    }

    fn av(s: &str) -> ApiVersion {
        s.parse().unwrap()
    }

    #[test]
    fn kube_scheduler_releases_as_the_release_notes_say() {
        let at = |n| names(&served(Component::KubeScheduler, Release(n)).unwrap());
        assert_eq!(
            at(22),
            [
                "kubescheduler.config.k8s.io/v1beta2",
                "kubescheduler.config.k8s.io/v1beta1"
            ]
        );
        assert_eq!(
            at(25),
            [
                "kubescheduler.config.k8s.io/v1",
                "kubescheduler.config.k8s.io/v1beta3",
                "kubescheduler.config.k8s.io/v1beta2"
            ]
        );
        assert_eq!(
            at(28),
            [
                "kubescheduler.config.k8s.io/v1",
                "kubescheduler.config.k8s.io/v1beta3"
            ]
        );
        for n in 29..=36 {
            assert_eq!(at(n), ["kubescheduler.config.k8s.io/v1"], "1.{n}");
        }
    }

    #[test]
    fn kube_apiserver_serves_each_file_kind() {
        let set = served(Component::KubeApiserver, Release(36)).unwrap();
        let got = names(&set);
        for want in [
            "apiserver.config.k8s.io/v1",
            "apiserver.config.k8s.io/v1beta1",
            "apiserver.config.k8s.io/v1alpha1",
            "apiserver.k8s.io/v1alpha1",
            "audit.k8s.io/v1",
        ] {
            assert!(got.contains(&want.to_owned()), "{want} in {got:?}");
        }
        assert!(!got.contains(&"audit.k8s.io/v1beta1".to_owned()), "{got:?}");
        let old = names(&served(Component::KubeApiserver, Release(23)).unwrap());
        assert!(old.contains(&"audit.k8s.io/v1beta1".to_owned()), "{old:?}");
    }

    #[test]
    fn an_upgrade_that_stops_serving_a_config_is_named() {
        let why = upgrade_stops(&av("kubescheduler.config.k8s.io/v1beta3"), Release(29)).unwrap();
        assert_eq!(why.component, Component::KubeScheduler);
        assert_eq!(why.removed_in, Some(Release(29)));
        assert_eq!(
            why.of_group("kubescheduler.config.k8s.io"),
            ["kubescheduler.config.k8s.io/v1"]
        );
        assert_eq!(
            upgrade_stops(&av("kubescheduler.config.k8s.io/v1beta3"), Release(28)),
            None
        );
        let new = upgrade_stops(&av("kubescheduler.config.k8s.io/v1"), Release(24)).unwrap();
        assert_eq!((new.removed_in, new.added_in), (None, Some(Release(25))));
        assert_eq!(
            upgrade_stops(&av("audit.k8s.io/v1beta1"), Release(24))
                .unwrap()
                .removed_in,
            Some(Release(24))
        );
        assert_eq!(upgrade_stops(&av("cert-manager.io/v1"), Release(36)), None);
        assert_eq!(
            upgrade_stops(&av("kubescheduler.config.k8s.io/v2"), Release(36))
                .unwrap()
                .removed_in,
            None
        );
    }

    #[test]
    fn releases_and_pins_parse_or_say_why() {
        assert_eq!("1.36".parse(), Ok(Release(36)));
        assert_eq!("v1.29.4".parse(), Ok(Release(29)));
        for bad in ["1", "2.1", "1.x", "1.29.4.1", "1.29.", ""] {
            assert!(
                matches!(bad.parse::<Release>(), Err(ReleaseError::Syntax(_))),
                "{bad}"
            );
        }
        assert_eq!(
            "1.40".parse::<Release>(),
            Err(ReleaseError::Unknown {
                release: Release(40)
            })
        );
        let (c, r, set) = pinned("kube-scheduler@1.36").unwrap();
        assert_eq!((c, r), (Component::KubeScheduler, Release(36)));
        assert_eq!(names(&set), ["kubescheduler.config.k8s.io/v1"]);
        assert_eq!(
            pinned("kube-controller-manager@1.36").unwrap_err(),
            ReleaseError::NoConfigFile
        );
        assert!(matches!(
            pinned("kube-schedular@1.36"),
            Err(ReleaseError::Component(_))
        ));
        assert_eq!(
            kinds(&av("kubescheduler.config.k8s.io/v1")),
            ["KubeSchedulerConfiguration"]
        );
    }

    #[test]
    fn every_row_parses_and_every_group_has_one_component() {
        for r in TABLE {
            let _ = r.api_version();
            assert_eq!(Component::of_group(r.group), Some(r.component), "{r:?}");
            assert!(r.removed.is_none_or(|x| x > r.since), "{r:?}");
        }
    }
}
