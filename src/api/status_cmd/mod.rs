//! `confgate status`: the fleet view. Lists pods, reads the conditions `confgate.io/config-compatible`
//! (ready) and `confgate.io/config-current` (the newest config in force) each sidecar wrote, with
//! their facts from the annotation `status.confgate.io/facts` (never from the prose message), and,
//! given `--configmap`, compares each pod's active config with the ConfigMap's current content hash.
//! Uses the user's kubeconfig; needs only list on pods and get on the ConfigMap. The sidecar's source
//! does not matter: a volume-mode sidecar reports the same.
//!
//! Mid-rollout each pod is compared with the set the ConfigMap assigns its track (the stable keys, or
//! the candidate's), and a summary line counts the tracks. `--wait` polls until every pod has applied
//! what it is assigned, and stops at the first refusal.
//!
//! This file reads the fleet (and waits on it); `judge.rs` decides whether each pod runs what it
//! should; `render.rs` prints the table and the summary lines.

use kube::api::ListParams;
use kube::{Api, Client};

use super::condition::{
    CONDITION_TYPE, CURRENT_TYPE, FACTS_ANNOTATION, Facts, Reason, RolloutPart,
};
use super::explain::explain;
use super::pod_view::PodView;
use crate::rollout::{self, Percent, Plan};
use crate::snapshot::{ContentHash, Snapshot};
use crate::state::Holding;
use crate::verdict::Verdict;

mod judge;
mod render;

/// Which pods `confgate status` reads, and the ConfigMap it compares them with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// The pods' (and the ConfigMap's) namespace; `None`: the kubeconfig's.
    pub namespace: Option<String>,
    /// A label selector for the pods.
    pub selector: Option<String>,
    /// The ConfigMap whose current content each pod's active config is compared with.
    pub configmap: Option<String>,
}

/// Why the fleet could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(super::connect::Error),
    #[error("cannot list pods in {namespace}: {why}")]
    ListPods { namespace: String, why: String },
    #[error("cannot read ConfigMap {namespace}/{name}: {why}")]
    ConfigMap {
        namespace: String,
        name: String,
        why: String,
    },
    /// The fleet could not be read from the API server at `server` (its URL, as the kubeconfig or the
    /// in-cluster config names it): the server to check is named.
    #[error("{source} (API server {server})")]
    At {
        server: String,
        #[source]
        source: Box<Error>,
    },
    /// `--wait` with nothing to wait for: without a ConfigMap no pod's config is compared with anything,
    /// so every pod would match at once.
    #[error(
        "--wait needs --configmap NAME: it waits until every pod runs that ConfigMap's current content (mid-rollout, its track's); without it nothing is compared"
    )]
    WaitWithoutConfigMap,
    /// Nothing to judge: neither a failure of the pods nor a success.
    #[error("no pods in namespace {namespace}{}: nothing to compare", selector.as_ref().map(|s| format!(" match -l {s}")).unwrap_or_default())]
    NoPods {
        namespace: String,
        selector: Option<String>,
    },
}

impl Error {
    /// The API server could not be reached, or refused or failed the request (not a problem of the
    /// pods, nor of how the command was called).
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::At { source, .. } => source.is_unavailable(),
            e => matches!(e, Error::ListPods { .. } | Error::ConfigMap { .. }),
        }
    }

    /// This error, saying the server it came from when the server was not read.
    fn at(self, server: &str) -> Error {
        if self.is_unavailable() {
            Error::At {
                server: server.to_owned(),
                source: Box::new(self),
            }
        } else {
            self
        }
    }
}

/// One pod as its sidecar reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub pod: String,
    pub ready: bool,
    /// `config-compatible`'s status and reason (the sidecar's readiness), when it wrote one.
    pub condition: Option<(bool, String)>,
    /// `config-current`'s status and reason (the newest config in force), when it wrote one.
    pub current: Option<(bool, String)>,
    /// The newer config held back while the active one stays, when one is.
    pub held: Option<Holding>,
    /// The hash of the config held back, when it is known.
    pub held_sha256: Option<String>,
    /// An accepted newer config waiting for this pod's share of the reload spread (its version,
    /// or hash when it has none): not a hold.
    pub waiting: Option<String>,
    pub version: Option<String>,
    pub sha256: Option<String>,
    /// What the component confirmed it runs (version, hash), when the sidecar knows.
    pub applied: Option<(Option<String>, Option<String>)>,
    /// With a rollout in the ConfigMap: the pod's part in it, as its sidecar reported it.
    pub rollout: Option<RolloutPart>,
}

/// The two tracks of a ConfigMap mid-rollout, as `--configmap` reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracks {
    pub percent: Option<Percent>,
    /// The keys the candidate changes, listed.
    pub keys: String,
    pub stable: ContentHash,
    pub candidate: ContentHash,
}

/// The pods and, with `--configmap`, the ConfigMap's current hash (`None` when it does not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    pub namespace: String,
    pub rows: Vec<Row>,
    pub configmap: Option<(String, Option<ContentHash>)>,
    /// With `--configmap` naming a ConfigMap mid-rollout: its tracks.
    pub tracks: Option<Tracks>,
}

/// What a pod's status says.
pub fn row(pod: &PodView) -> Row {
    let conditions = pod.conditions();
    let ready = conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let ours = conditions.iter().find(|c| c.type_ == CONDITION_TYPE);
    let current = conditions.iter().find(|c| c.type_ == CURRENT_TYPE);
    let facts = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FACTS_ANNOTATION))
        .and_then(|f| Facts::from_json(f));
    let applied = facts
        .as_ref()
        .and_then(|m| m.applied.clone())
        .map(|a| (a.version, a.sha256));
    let held_sha256 = facts
        .as_ref()
        .and_then(|m| m.newest.as_ref())
        .and_then(|n| n.config.sha256.clone());
    let rollout = facts.as_ref().and_then(|m| m.rollout.clone());
    let active = facts
        .as_ref()
        .and_then(|m| m.active.clone())
        .unwrap_or_default();
    // Waiting out its share of the reload spread, a pod holds nothing back: the newer config is
    // accepted and promoted at its time.
    let spreading = current
        .and_then(|c| c.reason.as_deref())
        .is_some_and(|r| r.parse::<Reason>() == Ok(Reason::Spreading));
    let newest = facts.and_then(|m| m.newest);
    let waiting = newest
        .as_ref()
        .filter(|n| spreading && n.verdict == Verdict::Accepted)
        .map(|n| {
            n.config
                .version
                .clone()
                .or_else(|| n.config.sha256.clone())
                .unwrap_or_else(|| "a newer config".into())
        });
    let held = newest.filter(|_| waiting.is_none()).map(|n| Holding {
        held: active.version.clone(),
        in_place: n.config.sha256.is_some() && n.config.sha256 == active.sha256,
        newest: n.config.version,
        verdict: n.verdict,
        reason: None,
    });
    let (version, sha256) = (active.version, active.sha256);
    Row {
        pod: pod.metadata.name.clone().unwrap_or_default(),
        ready,
        condition: ours.map(|c| (c.status == "True", c.reason.clone().unwrap_or_default())),
        current: current.map(|c| (c.status == "True", c.reason.clone().unwrap_or_default())),
        held,
        held_sha256,
        waiting,
        version,
        sha256,
        applied,
        rollout,
    }
}

/// Lists the pods and reads the ConfigMap.
pub async fn fleet(client: Client, args: &Query) -> Result<Fleet, Error> {
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let pods: Api<PodView> = Api::namespaced(client.clone(), &namespace);
    let mut lp = ListParams::default();
    if let Some(sel) = &args.selector {
        lp = lp.labels(sel);
    }
    let list = pods.list(&lp).await.map_err(|e| Error::ListPods {
        namespace: namespace.clone(),
        why: explain(&e, "list on pods"),
    })?;
    let mut rows: Vec<Row> = list.items.iter().map(row).collect();
    rows.sort_by(|a, b| a.pod.cmp(&b.pod));
    let mut tracks = None;
    let configmap = match &args.configmap {
        None => None,
        Some(name) => {
            let target = super::Target {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            let cm = super::listwatch::get(client, super::source::Kind::ConfigMap, &target)
                .await
                .map_err(|e| Error::ConfigMap {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    why: match &e {
                        super::listwatch::Error::List(k) => explain(k, "get on configmaps"),
                        other => other.to_string(),
                    },
                })?;
            let snap = cm
                .and_then(|cm| cm.keys.ok())
                .map(|f| Snapshot::new(f.into_map()));
            tracks = snap.as_ref().and_then(tracks_of);
            Some((name.clone(), snap.map(|s| s.hash())))
        }
    };
    Ok(Fleet {
        namespace,
        rows,
        configmap,
        tracks,
    })
}

/// The tracks of a ConfigMap that holds a rollout (`None` without one, or when it cannot be read:
/// the pods say why).
fn tracks_of(snap: &Snapshot) -> Option<Tracks> {
    let plan = Plan::read(snap, None).ok()??;
    let split = rollout::split(snap.clone());
    Some(Tracks {
        percent: plan.percent,
        keys: crate::listing::listed(&plan.keys, None, |out, k| {
            out.push_str(&crate::listing::name(k))
        }),
        stable: split.stable.hash(),
        candidate: split.candidate().hash(),
    })
}

/// `confgate status` with the user's kubeconfig; an empty selection is [`Error::NoPods`].
pub async fn run(args: &Query) -> Result<Fleet, Error> {
    let (client, server) = super::client_at().await.map_err(Error::Client)?;
    let fleet = fleet(client, args).await.map_err(|e| e.at(&server))?;
    if fleet.rows.is_empty() {
        return Err(Error::NoPods {
            namespace: fleet.namespace,
            selector: args.selector.clone(),
        });
    }
    Ok(fleet)
}

/// How `confgate status --wait` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// Every selected pod applied what it is assigned.
    Done(Fleet),
    /// A pod refused its config: why, and the fleet as last read.
    Refused(String, Fleet),
    /// The timeout came first.
    TimedOut(Fleet),
}

/// How often `--wait` reads the fleet again.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// `confgate status --wait`: reads the fleet until every pod matches, a pod refuses, or `timeout`
/// passes; refused without a ConfigMap to compare with. `progress` gets each summary that differs from
/// the last. A failed read is retried until
/// the timeout (the API server may be restarting under a pipeline), then returned.
pub async fn wait(
    args: &Query,
    timeout: std::time::Duration,
    mut progress: impl FnMut(&str),
) -> Result<Waited, Error> {
    if args.configmap.is_none() {
        return Err(Error::WaitWithoutConfigMap);
    }
    let (client, server) = super::client_at().await.map_err(Error::Client)?;
    let end = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let read = fleet(client.clone(), args).await;
        let expired = tokio::time::Instant::now() >= end;
        let f = match read {
            Ok(f) => f,
            Err(e) if expired => return Err(e.at(&server)),
            Err(_) => {
                tokio::time::sleep(WAIT_POLL).await;
                continue;
            }
        };
        let summary = f.summaries();
        if summary != last {
            progress(&summary);
            last = summary;
        }
        if f.all_match() {
            return Ok(Waited::Done(f));
        }
        if let Some(why) = f.first_refusal() {
            return Ok(Waited::Refused(why, f));
        }
        if expired {
            return Ok(Waited::TimedOut(f));
        }
        tokio::time::sleep(WAIT_POLL.min(end - tokio::time::Instant::now())).await;
    }
}
