//! API mode: the Kubernetes API as a config source and as a place to report, behind the `api` feature.
//!
//! - [`source`]: one ConfigMap or Secret watched through the API, fed to the same decision loop as
//!   the volume; its hashes are sealed for a Secret (see `snapshot::seal`).
//! - [`listwatch`]: the list and watch of that one object over kube's client, and [`object`]: the
//!   object read from JSON straight into the keys the gate judges, bounded while it is read.
//! - [`backoff`]: how long the source waits before it lists again after an error.
//! - [`events`]: Events created through events.k8s.io/v1, folded only when identical.
//! - [`pod`]: Events and the conditions `confgate.io/config-compatible` (readiness) and
//!   `confgate.io/config-current` (newest config in force) on the sidecar's own pod, in API and volume
//!   mode alike.
//! - [`condition`]: those conditions' type names and reason, and their facts: the message (prose) and
//!   the annotation `status.confgate.io/facts` (JSON), both made from one value.
//! - [`status_cmd`]: `confgate status`, the fleet view read from those conditions and that annotation.
//!
//! - [`connect`]: the client's connection (server, CA, credentials) from the pod's ServiceAccount or
//!   a kubeconfig, read by confgate and handed to kube as a finished service.
//! - `spec.rs`: the source a flag or annotation names ([`SourceSpec`], its [`Target`]) and why a
//!   text names none; `explain.rs`: an API error as one line for the operator, the RBAC rule a 403
//!   calls for named; `note.rs`: one Event, as `pod` decides it and [`events`] publishes it.
//!
//! Everything here speaks to the API server through a [`kube::Client`], so tests drive it with an
//! in-process service that answers with the shapes the API server sends, and `tests/cluster` runs the
//! binary against a real kube-apiserver (when one is at hand).
//!
//! `resolve` chooses the source (`volume`, `configmap:NS/NAME` or `secret:NS/NAME`) from the flag
//! and the `confgate.io/source` annotation; `client` builds the one API client over `connect`.

pub mod backoff;
pub mod condition;
pub mod connect;
pub mod events;
mod explain;
pub mod known_good;
pub mod listwatch;
mod note;
pub mod object;
pub mod pod;
pub mod pod_view;
pub mod source;
mod spec;
pub mod status_cmd;

pub use condition::{CONDITION_TYPE, CURRENT_TYPE};
use spec::ALLOWED_SOURCE;
pub use spec::{BadSource, SourceSpec, SpecError, Target};

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use tracing::{info, warn};

use crate::annotations::Annotations;
use crate::gate::Feed;
use crate::settings::{ANN_SOURCE, Invalid, container};
use crate::snapshot::{Broken, Cause, Observed};
use crate::state::Shared;

/// Downward-API env vars naming the sidecar's pod.
pub(crate) const ENV_POD_NAME: &str = "POD_NAME";
pub(crate) const ENV_POD_NAMESPACE: &str = "POD_NAMESPACE";
/// The pod's UID from the downward API, so Events name this pod without a `get` on pods.
pub(crate) const ENV_POD_UID: &str = "POD_UID";

/// Why API mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] connect::Error),
}

/// Whether API mode's credentials are there, before anything starts: a missing or broken kubeconfig
/// is a usage error said once, not a failure after `confgate started`.
pub(crate) async fn check_credentials(spec: &Result<SourceSpec, BadSource>) -> Result<(), Error> {
    if matches!(spec, Ok(SourceSpec::ConfigMap(_) | SourceSpec::Secret(_))) {
        connect::Connection::infer()?;
    }
    Ok(())
}

/// The source in force: the annotation, else the flag or environment, else the volume.
///
/// A bad annotation does not stop confgate (a crash loop would hide the message): it becomes a
/// snapshot that is `invalid` with the annotation named, so the gate holds and reports it. So does
/// an annotation naming another source than a `--source` the container spec gives: whoever may
/// patch the pod may write it, and only the spec may widen what is read.
pub fn resolve(
    flag: Option<&str>,
    annotations: &Annotations,
    promote_to: Option<&Path>,
) -> Result<Result<SourceSpec, BadSource>, Invalid> {
    if let Some(v) = annotations.get(ANN_SOURCE) {
        let spec = v.parse::<SourceSpec>().map_err(|why| BadSource::Invalid {
            value: v.clone(),
            why,
        });
        let spec = match (spec, flag) {
            (Ok(s), Some(f)) if f.parse::<SourceSpec>().is_ok_and(|f| f != s) => {
                Err(BadSource::BeyondSpec {
                    value: v.clone(),
                    spec: f.to_owned(),
                })
            }
            (spec, _) => spec,
        };
        return Ok(match spec {
            Ok(s) if s.is_api() && promote_to.is_none() => {
                Err(BadSource::NeedsPromoteTo(v.clone()))
            }
            other => other,
        });
    }
    let Some(v) = flag else {
        return Ok(Ok(SourceSpec::Volume));
    };
    let invalid = |problem: String| Invalid {
        setting: container::SOURCE.named(),
        value: v.to_owned(),
        problem,
        allowed: ALLOWED_SOURCE,
    };
    let spec = v
        .parse::<SourceSpec>()
        .map_err(|e| invalid(e.to_string()))?;
    if spec.is_api() && promote_to.is_none() {
        let kind = if matches!(spec, SourceSpec::Secret(_)) {
            "Secret"
        } else {
            "ConfigMap"
        };
        return Err(invalid(format!(
            "a {kind} source needs {}: there is no mounted volume for the component to read",
            container::PROMOTE_TO.named()
        )));
    }
    Ok(Ok(spec))
}

/// Builds the decision loop's feed: the volume, or a ConfigMap or Secret watch spawned here until
/// `shutdown`.
pub async fn feed(
    spec: Result<SourceSpec, BadSource>,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Feed, Error> {
    match spec {
        Ok(SourceSpec::Volume) => Ok(Feed::Volume),
        Err(why) => {
            warn!(reason = %why, "bad source annotation; no config will be accepted");
            let (_tx, snapshots) = tokio::sync::watch::channel(Some(Observed::Broken(
                Broken::Source(Cause::new(why)),
            )));
            let (_tx, source) = tokio::sync::watch::channel(None);
            Ok(Feed::Channel { snapshots, source })
        }
        Ok(SourceSpec::ConfigMap(target)) => {
            Ok(watch(source::Kind::ConfigMap, target, shared, shutdown).await?)
        }
        Ok(SourceSpec::Secret(target)) => {
            Ok(watch(source::Kind::Secret, target, shared, shutdown).await?)
        }
    }
}

/// Spawns the watch of one object, feeding the decision loop.
async fn watch(
    kind: source::Kind,
    target: Target,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Feed, Error> {
    let client = client().await.map_err(Error::Client)?;
    info!(source = %target, kind = kind.as_str(), "watching the {} through the API", kind.title());
    let (snapshots_tx, snapshots) = tokio::sync::watch::channel(None);
    let (view, source) = tokio::sync::watch::channel(None);
    let out = source::Outputs {
        snapshots: snapshots_tx,
        view,
    };
    tokio::spawn(source::run(
        client,
        kind,
        target,
        out,
        shared,
        source::STUCK_AFTER,
        shutdown,
    ));
    Ok(Feed::Channel { snapshots, source })
}

/// Starts reporting to the sidecar's own pod (Events, the conditions, the facts annotation), in either
/// mode, unless `enabled` is false (`--pod-report off`). It needs the pod's name and namespace
/// (`POD_NAME`, `POD_NAMESPACE`) and credentials (a mounted ServiceAccount token, or a kubeconfig);
/// without them it says so once and confgate goes on without reporting.
pub(crate) async fn spawn_pod_reporter(
    enabled: bool,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    if !enabled {
        info!("--pod-report off: no Events and no pod conditions");
        return;
    }
    // Before anything else: what the loop tells from its start on is published once the reporter
    // runs.
    let notices = shared.notices();
    let env = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
    let (Some(name), Some(namespace)) = (env(ENV_POD_NAME), env(ENV_POD_NAMESPACE)) else {
        info!(
            "{ENV_POD_NAME}/{ENV_POD_NAMESPACE} not set; no Events and no pod conditions (set them from the downward API)"
        );
        return;
    };
    let client = match client().await {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "no Kubernetes credentials (no ServiceAccount token mounted, no kubeconfig); no Events and no pod conditions; --pod-report off (CONFGATE_POD_REPORT=off) says this is meant");
            return;
        }
    };
    let rx = shared.subscribe();
    tokio::spawn(pod::run(
        client,
        pod::PodRef {
            namespace,
            name,
            uid: env(ENV_POD_UID),
        },
        rx,
        notices,
        shutdown,
    ));
}

/// Starts the known-good edge (`known_good`): it reads the pod's component containers for the
/// loop's trial and writes the record beside the source. `None` (the loop then records nothing, and
/// says so once) with `--pod-report off`, without the pod's identity or credentials, or with a bad
/// source annotation.
pub(crate) async fn spawn_known_good(
    enabled: bool,
    spec: &Result<SourceSpec, BadSource>,
    watch: &Path,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Option<crate::gate::known_good::Link> {
    let beside = match spec {
        Ok(SourceSpec::Volume) => known_good::Beside::Volume {
            watch: watch.to_path_buf(),
        },
        Ok(SourceSpec::ConfigMap(t)) => known_good::Beside::Source {
            kind: object::Kind::ConfigMap,
            target: t.clone(),
        },
        Ok(SourceSpec::Secret(t)) => known_good::Beside::Source {
            kind: object::Kind::Secret,
            target: t.clone(),
        },
        Err(_) => return None,
    };
    let env = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
    let (Some(name), Some(namespace)) = (env(ENV_POD_NAME), env(ENV_POD_NAMESPACE)) else {
        return None;
    };
    if !enabled {
        return None;
    }
    let client = client().await.ok()?;
    let (link, edge) = crate::gate::known_good::link();
    let pod = pod::PodRef {
        namespace,
        name,
        uid: env(ENV_POD_UID),
    };
    tokio::spawn(known_good::run(client, pod, beside, edge, shutdown));
    Some(link)
}

/// A client from the kubeconfig (`KUBECONFIG`, `~/.kube/config`) or the in-cluster config, built by
/// [`connect`]: a token file is read at every request, trimmed as kubectl trims it, so a rotated
/// token is in use at once.
pub async fn client() -> Result<kube::Client, connect::Error> {
    client_at().await.map(|(c, _)| c)
}

/// [`client`], with the API server's URL it talks to, for messages that must say where.
pub(crate) async fn client_at() -> Result<(kube::Client, String), connect::Error> {
    let connection = connect::Connection::infer()?;
    let server = connection.server();
    Ok((connection.client().await?, server))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_source_needs_promote_to() {
        let tmp = tempfile::tempdir().unwrap();
        let ann = Annotations::default();
        let e = resolve(Some("configmap:ns/cm"), &ann, None).unwrap_err();
        assert_eq!(e.setting, "--source (CONFGATE_SOURCE)");
        assert!(e.to_string().contains("needs --promote-to"), "{e}");
        let e = resolve(Some("secret:ns/s"), &ann, None).unwrap_err();
        assert!(e.to_string().contains("needs --promote-to"), "{e}");
        let ok = resolve(Some("configmap:ns/cm"), &ann, Some(tmp.path())).unwrap();
        assert!(matches!(ok, Ok(SourceSpec::ConfigMap(_))));
        assert_eq!(resolve(None, &ann, None).unwrap(), Ok(SourceSpec::Volume));
    }

    /// Who may patch the pod may write the annotation; only the container spec may name the object
    /// read: an annotation may repeat a `--source` the spec gives, never name another.
    #[test]
    fn an_annotation_cannot_name_another_source_than_the_spec_gives() {
        let tmp = tempfile::tempdir().unwrap();
        let ann = |text: &str| crate::annotations::parse(text).unwrap();
        let spec = Some("configmap:web/app");
        for other in [
            "secret:web/db-password",
            "configmap:kube-system/kubeadm-config",
            "volume",
        ] {
            let given = ann(&format!("confgate.io/source=\"{other}\""));
            let why = resolve(spec, &given, Some(tmp.path()))
                .unwrap()
                .unwrap_err();
            assert_eq!(
                why,
                BadSource::BeyondSpec {
                    value: other.into(),
                    spec: "configmap:web/app".into()
                },
                "{other}"
            );
            assert!(
                why.to_string()
                    .contains("the container spec names configmap:web/app"),
                "{why}"
            );
        }
        let same = ann("confgate.io/source=\"configmap:web/app\"");
        assert!(matches!(
            resolve(spec, &same, Some(tmp.path())).unwrap(),
            Ok(SourceSpec::ConfigMap(_))
        ));
    }

    #[test]
    fn annotation_wins_and_a_bad_one_is_reported_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        let ann = |text: &str| crate::annotations::parse(text).unwrap();
        let given = ann("confgate.io/source=\"configmap:prod/app\"");
        let got = resolve(None, &given, Some(tmp.path())).unwrap();
        assert_eq!(
            got,
            Ok(SourceSpec::ConfigMap(Target {
                namespace: "prod".into(),
                name: "app".into()
            }))
        );
        let bad = ann("confgate.io/source=\"configmap:prod\"");
        let why = resolve(None, &bad, Some(tmp.path())).unwrap().unwrap_err();
        assert_eq!(
            why,
            BadSource::Invalid {
                value: "configmap:prod".into(),
                why: SpecError::NoTarget("configmap".into())
            }
        );
        assert_eq!(
            why.to_string(),
            "annotation confgate.io/source \"configmap:prod\": configmap: needs NAMESPACE/NAME; allowed: volume, configmap:NAMESPACE/NAME or secret:NAMESPACE/NAME"
        );
    }
}
