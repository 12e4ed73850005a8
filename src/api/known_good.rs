//! The known-good edge: reads the component's containers for the loop's trial, and writes the record
//! (`NAME.confgate-known-good`, a ConfigMap, or a Secret for a Secret source, in the source's
//! namespace) once a trial passes, under the API's optimistic concurrency: the record is created
//! only when absent (a create of a name that exists fails) and replaced only at the
//! resourceVersion it was read at (a write after another pod's fails, is read again and judged
//! again by `known_good::decide`), so the first pod whose trial passes writes and the others, and
//! any lagging or older pod, write nothing.
//!
//! The pod is read through an empty strategic merge patch of its `pods/status`, which the pod
//! reporter's Role already allows: the API server answers with the whole pod and writes nothing (a
//! patch that changes nothing is not stored), so no `get` on pods (which would read every pod of the
//! namespace) is needed. In volume mode the same read names the source: the ConfigMap or Secret
//! volume mounted at `--watch`.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;

use base64::Engine as _;
use kube::Client;
use serde::Deserialize;
use tracing::{info, warn};

use super::explain::explain;
use super::object::Kind;
use super::pod::PodRef;
use super::spec::Target;
use crate::gate::known_good::{Answer, Ask, Edge};
use crate::known_good::{
    ComponentFacts, ComponentRead, Entry, Line, Recorded, Write, decide, record_name,
};
use crate::values::SchemeVersion;

/// The container not counted as the component: confgate's own, as `inject` and the manifests name it.
pub(crate) const SIDECAR_CONTAINER: &str = "confgate";

/// How often a write is tried again after a conflict (another pod wrote in between) before giving
/// up until the next trial period.
const CONFLICT_TRIES: usize = 8;

/// Where the record is: beside the source the API watches, or beside the volume's (found from the
/// pod's spec at the first read).
#[derive(Debug, Clone)]
pub(crate) enum Beside {
    Source { kind: Kind, target: Target },
    Volume { watch: PathBuf },
}

/// Answers the loop's asks until `shutdown`.
pub(crate) async fn run(
    client: Client,
    pod: PodRef,
    beside: Beside,
    mut edge: Edge,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    // The trial's reads of the pod come after the window the routine status patches are spread
    // over, at this pod's offset into the next one: a fleet that applied one change together
    // reads its pods neither together nor on top of its patches.
    let read_after = super::pod::REPORT_SPREAD + super::pod::report_offset(&pod);
    let mut record: Option<(Kind, Target)> = match &beside {
        Beside::Source { kind, target } => Some((
            *kind,
            Target {
                namespace: target.namespace.clone(),
                name: record_name(&target.name),
            },
        )),
        Beside::Volume { .. } => None,
    };
    loop {
        let ask = tokio::select! {
            () = &mut shutdown => return,
            ask = edge.asks.recv() => match ask {
                Some(a) => a,
                None => return,
            },
        };
        let answer = match ask {
            Ask::Component => {
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(read_after) => {}
                }
                let (read, found) = read_pod(&client, &pod, &beside).await;
                if record.is_none()
                    && let Some(found) = found
                {
                    info!(record = %found.1, kind = found.0.title(), "known-good record for the volume's source");
                    record = Some(found);
                }
                Answer::Component(read)
            }
            Ask::Read => {
                if record.is_none()
                    && let (_, Some(found)) = read_pod(&client, &pod, &beside).await
                {
                    record = Some(found);
                }
                Answer::Read(match &record {
                    Some((kind, target)) => read_configs(&client, *kind, target).await,
                    None => Err(
                        "no ConfigMap or Secret volume is mounted at the watched path, so no record is named"
                            .into(),
                    ),
                })
            }
            Ask::Record {
                line,
                parsed,
                entry,
            } => Answer::Recorded(match &record {
                Some((kind, target)) => write(&client, *kind, target, &line, &parsed, &entry).await,
                None => Recorded::Failed(
                    "no ConfigMap or Secret volume is mounted at the watched path, so no record is named"
                        .into(),
                ),
            }),
        };
        if edge.answers.send(answer).is_err() {
            return;
        }
    }
}

/// The parts of a pod read here.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PodFacts {
    spec: PodSpec,
    status: PodStatus,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodSpec {
    containers: Vec<Container>,
    init_containers: Vec<Container>,
    volumes: Vec<Volume>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Container {
    volume_mounts: Vec<Mount>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Mount {
    name: String,
    mount_path: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Volume {
    name: String,
    config_map: Option<Named>,
    secret: Option<SecretRef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Named {
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SecretRef {
    secret_name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodStatus {
    container_statuses: Vec<ContainerStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatus {
    name: String,
    ready: bool,
    restart_count: u64,
}

impl PodFacts {
    /// The component's containers: every regular container but confgate's own. None reported yet is
    /// not ready.
    fn component(&self) -> ComponentFacts {
        let c: Vec<&ContainerStatus> = self
            .status
            .container_statuses
            .iter()
            .filter(|c| c.name != SIDECAR_CONTAINER)
            .collect();
        ComponentFacts {
            ready: !c.is_empty() && c.iter().all(|c| c.ready),
            restarts: c.iter().map(|c| c.restart_count).sum(),
        }
    }

    /// The ConfigMap or Secret volume mounted at `watch`, in any container.
    fn source_at(&self, watch: &std::path::Path) -> Option<(Kind, String)> {
        let mount = self
            .spec
            .containers
            .iter()
            .chain(&self.spec.init_containers)
            .flat_map(|c| &c.volume_mounts)
            .find(|m| std::path::Path::new(&m.mount_path) == watch)?;
        let v = self.spec.volumes.iter().find(|v| v.name == mount.name)?;
        match (&v.config_map, &v.secret) {
            (Some(cm), _) => Some((Kind::ConfigMap, cm.name.clone())),
            (None, Some(s)) => Some((Kind::Secret, s.secret_name.clone())),
            _ => None,
        }
    }
}

/// Reads the pod (an empty patch of its status, see the module's note): the component's facts, and
/// in volume mode the record beside the mounted source.
async fn read_pod(
    client: &Client,
    pod: &PodRef,
    beside: &Beside,
) -> (ComponentRead, Option<(Kind, Target)>) {
    let path = format!(
        "/api/v1/namespaces/{}/pods/{}/status",
        pod.namespace, pod.name
    );
    let req = hyper::Request::patch(&path)
        .header(
            hyper::header::CONTENT_TYPE,
            "application/strategic-merge-patch+json",
        )
        .body(b"{}".to_vec());
    let req = match req {
        Ok(r) => r,
        Err(e) => return (ComponentRead::Unavailable(e.to_string()), None),
    };
    let text = match client.request_text(req).await {
        Ok(t) => t,
        Err(e @ kube::Error::Api(_)) if matches!(&e, kube::Error::Api(s) if s.code == 403 || s.code == 404) =>
        {
            return (
                ComponentRead::Unavailable(explain(&e, "patch on pods/status")),
                None,
            );
        }
        Err(e) => {
            return (
                ComponentRead::Failed(explain(&e, "patch on pods/status")),
                None,
            );
        }
    };
    let facts: PodFacts = match serde_json::from_str(&text) {
        Ok(f) => f,
        Err(_) => {
            return (
                ComponentRead::Failed("the API server's answer is not a pod".into()),
                None,
            );
        }
    };
    let found = match beside {
        Beside::Volume { watch } => facts.source_at(watch).map(|(kind, name)| {
            (
                kind,
                Target {
                    namespace: pod.namespace.clone(),
                    name: record_name(&name),
                },
            )
        }),
        Beside::Source { .. } => None,
    };
    (ComponentRead::Facts(facts.component()), found)
}

/// The record as read: its resourceVersion and the entry of each line (a Secret's values decoded).
#[derive(Debug, Deserialize)]
struct RecordObject {
    metadata: RecordMeta,
    #[serde(default)]
    data: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordMeta {
    resource_version: Option<String>,
}

fn collection(kind: Kind, namespace: &str) -> String {
    let plural = match kind {
        Kind::ConfigMap => "configmaps",
        Kind::Secret => "secrets",
    };
    format!("/api/v1/namespaces/{namespace}/{plural}")
}

/// A record value as stored: a Secret's `data` is base64.
fn encode(kind: Kind, json: &str) -> String {
    match kind {
        Kind::ConfigMap => json.to_owned(),
        Kind::Secret => base64::engine::general_purpose::STANDARD.encode(json),
    }
}

fn decode(kind: Kind, stored: &str) -> Option<String> {
    match kind {
        Kind::ConfigMap => Some(stored.to_owned()),
        Kind::Secret => base64::engine::general_purpose::STANDARD
            .decode(stored)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
    }
}

/// Reads the record: `None` when there is none. The entries are those that read back (a damaged
/// one is skipped with its reason).
pub async fn read(
    client: &Client,
    kind: Kind,
    target: &Target,
) -> Result<Option<(String, BTreeMap<String, Result<Entry, String>>)>, kube::Error> {
    let path = format!("{}/{}", collection(kind, &target.namespace), target.name);
    let req = hyper::Request::get(&path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let text = match client.request_text(req).await {
        Ok(t) => t,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    let obj: RecordObject = serde_json::from_str(&text).map_err(kube::Error::SerdeError)?;
    let entries = obj
        .data
        .iter()
        .map(|(line, v)| {
            let e = decode(kind, v)
                .ok_or_else(|| "not base64 text".to_owned())
                .and_then(|j| Entry::from_json(&j).map_err(|e| e.to_string()));
            (line.clone(), e)
        })
        .collect();
    Ok(Some((
        obj.metadata.resource_version.unwrap_or_default(),
        entries,
    )))
}

/// The record's name and the config of each line that reads back (a damaged line is skipped,
/// logged); an error names the Role rule a 403 calls for.
async fn read_configs(
    client: &Client,
    kind: Kind,
    target: &Target,
) -> Result<(String, Vec<crate::snapshot::Snapshot>), String> {
    let rule = format!(
        "get on {} (resourceNames [\"{}\"])",
        match kind {
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
        },
        target.name
    );
    let Some((_, entries)) = read(client, kind, target).await.map_err(|e| {
        format!(
            "reading {} {}: {}",
            kind.title(),
            target,
            explain(&e, &rule)
        )
    })?
    else {
        return Err(format!("no {} {} yet", kind.title(), target));
    };
    let mut configs = Vec::new();
    for (line, e) in entries {
        match e.and_then(|e| e.snapshot().map_err(|e| e.to_string())) {
            Ok(s) => configs.push(s),
            Err(why) => {
                warn!(record = %target.name, line, reason = %why, "a known-good line cannot be read back; skipped")
            }
        }
    }
    Ok((target.name.clone(), configs))
}

/// Writes `entry` as `line`'s known-good unless the record holds it or a newer one: created when
/// absent, else replaced at the resourceVersion read; a conflict is read and judged again.
pub async fn write(
    client: &Client,
    kind: Kind,
    target: &Target,
    line: &Line,
    parsed: &SchemeVersion,
    entry: &Entry,
) -> Recorded {
    let rule = write_rule(kind, &target.name);
    let key = line.key();
    let value = encode(kind, &entry.to_json());
    for _ in 0..CONFLICT_TRIES {
        let read = match read(client, kind, target).await {
            Ok(r) => r,
            Err(e) => return Recorded::Failed(explain(&e, &rule)),
        };
        let recorded = read
            .as_ref()
            .and_then(|(_, entries)| entries.get(&key))
            .and_then(|e| e.as_ref().ok())
            .map(|e| e.version.clone());
        let (write, version) = match decide(recorded.as_deref(), parsed) {
            Write::Keep { recorded, newer } => {
                return Recorded::Kept {
                    record: target.name.clone(),
                    recorded,
                    newer,
                };
            }
            Write::Create => (None, read.as_ref().map(|(rv, _)| rv.clone())),
            Write::Replace { older } => (Some(older), read.as_ref().map(|(rv, _)| rv.clone())),
        };
        let r = match version {
            None => create(client, kind, target, &key, &value).await,
            Some(rv) => replace(client, kind, target, &rv, &key, &value).await,
        };
        match r {
            Ok(()) => {
                return Recorded::Written {
                    record: target.name.clone(),
                    replaced: write,
                };
            }
            // Another pod wrote in between (409: the name exists, or the resourceVersion moved).
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Recorded::Failed(explain(&e, &rule)),
        }
    }
    warn!(record = %target.name, "the known-good record kept changing while it was written");
    Recorded::Failed(format!(
        "{} conflicting writes of {} in a row",
        CONFLICT_TRIES, target.name
    ))
}

/// The Role rule a write needs, as a 403 names it: the verbs `read`, `create` and `replace` send
/// (a replace is a merge patch, so `patch`, not `update`), as the shipped Roles grant them.
fn write_rule(kind: Kind, record: &str) -> String {
    format!(
        "get, patch and create on {} (resourceNames [\"{record}\"] for get and patch)",
        match kind {
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
        },
    )
}

async fn create(
    client: &Client,
    kind: Kind,
    target: &Target,
    key: &str,
    value: &str,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": kind.title(),
        "metadata": {
            "name": target.name,
            "namespace": target.namespace,
            "labels": {"app.kubernetes.io/managed-by": "confgate"},
        },
        "data": {key: value},
    });
    let req = hyper::Request::post(collection(kind, &target.namespace))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).map_err(kube::Error::SerdeError)?)
        .map_err(kube::Error::HttpError)?;
    client.request_text(req).await.map(|_| ())
}

/// Replaces one line's entry at resourceVersion `rv` (a JSON merge patch carrying it: the API
/// server refuses it with a 409 when the object moved since).
async fn replace(
    client: &Client,
    kind: Kind,
    target: &Target,
    rv: &str,
    key: &str,
    value: &str,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "metadata": {"resourceVersion": rv},
        "data": {key: value},
    });
    let path = format!("{}/{}", collection(kind, &target.namespace), target.name);
    let req = hyper::Request::patch(path)
        .header(hyper::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(serde_json::to_vec(&body).map_err(kube::Error::SerdeError)?)
        .map_err(kube::Error::HttpError)?;
    client.request_text(req).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_is_every_container_but_confgate_and_the_source_is_the_watched_volume() {
        let pod: PodFacts = serde_json::from_value(serde_json::json!({
            "spec": {
                "initContainers": [{"name": "confgate", "volumeMounts": [
                    {"name": "raw", "mountPath": "/config-raw"},
                    {"name": "podinfo", "mountPath": "/podinfo"}
                ]}],
                "containers": [{"name": "app"}],
                "volumes": [
                    {"name": "raw", "configMap": {"name": "app-config"}},
                    {"name": "podinfo", "downwardAPI": {}}
                ]
            },
            "status": {"containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 2},
                {"name": "confgate", "ready": false, "restartCount": 7}
            ]}
        }))
        .unwrap();
        assert_eq!(
            pod.component(),
            ComponentFacts {
                ready: true,
                restarts: 2
            }
        );
        assert_eq!(
            pod.source_at("/config-raw".as_ref()),
            Some((Kind::ConfigMap, "app-config".to_owned()))
        );
        assert_eq!(pod.source_at("/podinfo".as_ref()), None);
        assert!(!PodFacts::default().component().ready, "no container yet");
    }

    /// A 403 on a write names the verbs the write sends: a replace is a PATCH, so a Role granting
    /// `update` instead of `patch` would still be refused.
    #[test]
    fn a_refused_write_names_patch_the_verb_a_replace_sends() {
        let rule = write_rule(Kind::ConfigMap, "web.confgate-known-good");
        assert_eq!(
            rule,
            "get, patch and create on configmaps (resourceNames [\"web.confgate-known-good\"] for get and patch)"
        );
        assert!(!rule.contains("update"), "{rule}");
        assert!(write_rule(Kind::Secret, "s").contains("on secrets"));
    }

    #[test]
    fn a_secret_record_is_stored_base64_and_read_back() {
        let json = "{\"version\":\"1.0.0\",\"keys\":{}}";
        let stored = encode(Kind::Secret, json);
        assert_ne!(stored, json);
        assert_eq!(decode(Kind::Secret, &stored).as_deref(), Some(json));
        assert_eq!(decode(Kind::ConfigMap, json).as_deref(), Some(json));
    }
}
