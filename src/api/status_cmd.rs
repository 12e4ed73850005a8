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

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Client};

use super::condition::{FACTS_ANNOTATION, Facts, Reason, RolloutPart};
use super::pod_view::PodView;
use super::{CONDITION_TYPE, CURRENT_TYPE, explain};
use crate::rollout::{self, Percent, Plan};
use crate::snapshot::{ContentHash, Snapshot};
use crate::state::{Holding, Track};

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
    #[error("{}", super::credentials_problem(.0))]
    Client(#[source] kube::Error),
    #[error("cannot list pods in {namespace}: {why}")]
    ListPods { namespace: String, why: String },
    #[error("cannot read ConfigMap {namespace}/{name}: {why}")]
    ConfigMap {
        namespace: String,
        name: String,
        why: String,
    },
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
        matches!(self, Error::ListPods { .. } | Error::ConfigMap { .. })
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
    let held = facts.and_then(|m| m.newest).map(|n| Holding {
        held: active.version.clone(),
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
            let cms: Api<ConfigMap> = Api::namespaced(client, &namespace);
            let cm = cms.get_opt(name).await.map_err(|e| Error::ConfigMap {
                namespace: namespace.clone(),
                name: name.clone(),
                why: explain(&e, "get on configmaps"),
            })?;
            let snap = cm
                .as_ref()
                .and_then(|cm| super::source::files(cm).ok())
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

/// A condition reason as the summary words it (`TooNew` is `too-new`); another writer's as written.
fn kebab(reason: &str) -> String {
    reason
        .parse::<Reason>()
        .map_or_else(|_| reason.to_owned(), |r| r.as_kebab().to_owned())
}

/// The first 12 characters of the hash, cut on a character boundary whatever the text.
fn short(sha: &str) -> &str {
    sha.strip_prefix("sha256:")
        .map(|h| h.char_indices().nth(12).map_or(h, |(i, _)| &h[..i]))
        .unwrap_or(sha)
}

impl Fleet {
    /// Whether a pod runs what it should: both conditions are True (a sidecar that writes only
    /// `config-compatible` is judged by it alone), the component applied the promoted config (when the
    /// sidecar knows what it applied) and, with `--configmap`, that config is the ConfigMap's current
    /// content.
    pub fn matches(&self, r: &Row) -> bool {
        let compatible = matches!(r.condition, Some((true, _)))
            && !matches!(r.current, Some((false, _)))
            && !Self::not_applied(r);
        let expected = match (&self.tracks, &r.rollout) {
            (Some(t), Some(part)) => Some(match part.assigned {
                Track::Candidate => t.candidate,
                Track::Stable => t.stable,
            }),
            // The pod has not seen the rollout yet (or its confgate does not know rollouts).
            (Some(_), None) => return false,
            (None, _) => self
                .configmap
                .as_ref()
                .map(|(_, h)| h.unwrap_or(ContentHash([0; 32]))),
        };
        let sha_ok = match (&self.configmap, expected) {
            (None, _) | (_, None) => true,
            (Some((_, None)), _) => false,
            (Some(_), Some(h)) => r.sha256.as_deref() == Some(&h.to_string()),
        };
        compatible && sha_ok && self.refusal(r).is_none()
    }

    /// The content the ConfigMap assigns a pod, with `--configmap`: its track's set mid-rollout.
    fn assigned(&self, r: &Row) -> Option<String> {
        let (_, hash) = self.configmap.as_ref()?;
        let h = match (&self.tracks, r.rollout.as_ref().map(|p| p.assigned)) {
            (Some(t), Some(Track::Candidate)) => t.candidate,
            (Some(t), _) => t.stable,
            (None, _) => (*hash)?,
        };
        Some(h.to_string())
    }

    /// Why a pod will not run what it is assigned without a change: it holds its rollout's
    /// candidate back (outside its range, or refused by the component), or holds back the newest
    /// config for a verdict (too-new, rejected-by-component...). With `--configmap`, only a refusal
    /// of the ConfigMap's current content counts: a condition not yet updated after an edit is no
    /// refusal.
    fn refusal(&self, r: &Row) -> Option<String> {
        let current = |sha: Option<&String>| match self.assigned(r) {
            Some(want) => sha == Some(&want),
            None => true,
        };
        if let Some((c, v)) = r
            .rollout
            .as_ref()
            .and_then(|p| p.held.as_ref())
            .map(|h| (&h.config, h.verdict))
        {
            return current(c.sha256.as_ref())
                .then(|| format!("pod {} holds the candidate {c}: {v}", r.pod));
        }
        if r.held.is_none() || !current(r.held_sha256.as_ref()) {
            return None;
        }
        match &r.current {
            Some((false, reason)) => {
                match reason.parse::<Reason>() {
                    Ok(Reason::Verdict(v)) if v != crate::verdict::Verdict::Accepted => Some(
                        format!("pod {} holds back the newest config: {}", r.pod, v.as_str()),
                    ),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The first refusal among the pods, in pod order.
    pub fn first_refusal(&self) -> Option<String> {
        self.rows.iter().find_map(|r| self.refusal(r))
    }

    /// `rollout 25% of config.yaml: 3/12 pods on the candidate 2.5.0 (3 applied), 9/12 on stable
    /// 2.4.1, 0 refused`, when a pod reports a rollout.
    pub fn rollout_summary(&self) -> Option<String> {
        let reporting: Vec<(&Row, &RolloutPart)> = self
            .rows
            .iter()
            .filter_map(|r| Some((r, r.rollout.as_ref()?)))
            .collect();
        let first = reporting.first()?;
        let total = self.rows.len();
        let percent = match &self.tracks {
            Some(t) => t.percent.map(|p| p.to_string()),
            None => first.1.percent.clone(),
        };
        let of = self
            .tracks
            .as_ref()
            .map(|t| format!(" of {}", t.keys))
            .unwrap_or_default();
        let most = |rows: &[&Row]| {
            let mut count: BTreeMap<&str, usize> = BTreeMap::new();
            for r in rows {
                *count
                    .entry(r.version.as_deref().unwrap_or("-"))
                    .or_default() += 1;
            }
            let mut v: Vec<(&str, usize)> = count.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            v.iter()
                .map(|(k, _)| (*k).to_owned())
                .collect::<Vec<_>>()
                .join(" and ")
        };
        let on = |t: Track| -> Vec<&Row> {
            reporting
                .iter()
                .filter(|(_, p)| p.held.is_none() && p.track() == t)
                .map(|(r, _)| *r)
                .collect()
        };
        let (cand, stable) = (on(Track::Candidate), on(Track::Stable));
        let applied = cand
            .iter()
            .filter(
                |r| matches!(&r.applied, Some((_, Some(sha))) if r.sha256.as_deref() == Some(sha)),
            )
            .count();
        let mut refused: BTreeMap<String, usize> = BTreeMap::new();
        for (_, p) in &reporting {
            if let Some(h) = &p.held {
                *refused.entry(h.verdict.to_string()).or_default() += 1;
            }
        }
        let n_refused: usize = refused.values().sum();
        let mut line = format!(
            "rollout {}{of}: {}/{total} pods on the candidate{} ({applied} applied), {}/{total} on stable{}, {n_refused} refused",
            percent.as_deref().unwrap_or("(no confgate.rollout key)"),
            cand.len(),
            if cand.is_empty() {
                String::new()
            } else {
                format!(" {}", most(&cand))
            },
            stable.len(),
            if stable.is_empty() {
                String::new()
            } else {
                format!(" {}", most(&stable))
            },
        );
        if n_refused > 0 {
            let detail: Vec<String> = refused.iter().map(|(v, n)| format!("{n} {v}")).collect();
            line.push_str(&format!(" ({})", detail.join(", ")));
        }
        let silent = total - reporting.len();
        if silent > 0 {
            line.push_str(&format!(", {silent} not reporting the rollout"));
        }
        Some(line)
    }

    /// The sidecar knows what the component runs, and it is not the promoted config.
    fn not_applied(r: &Row) -> bool {
        r.applied
            .as_ref()
            .is_some_and(|(_, sha)| sha.is_some() && *sha != r.sha256)
    }

    pub fn all_match(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| self.matches(r))
    }

    /// The table and the summary line (and the rollout's, mid-rollout).
    pub fn render(&self) -> String {
        format!("{}{}\n", self.table(), self.summary())
    }

    /// The summary line, preceded by the rollout's line when pods report one.
    pub fn summaries(&self) -> String {
        match self.rollout_summary() {
            Some(r) => format!("{r}\n{}", self.summary()),
            None => self.summary(),
        }
    }

    /// One line per pod, then the ConfigMap's hash when asked for.
    pub fn table(&self) -> String {
        let mut table: Vec<[String; 7]> = vec![[
            "POD".to_owned(),
            "READY".into(),
            "CONDITION".into(),
            "CURRENT".into(),
            "VERSION".into(),
            "SHA256".into(),
            "APPLIED".into(),
        ]];
        for r in &self.rows {
            table.push([
                r.pod.clone(),
                r.ready.to_string(),
                match &r.condition {
                    Some((s, reason)) => format!("{}/{reason}", if *s { "True" } else { "False" }),
                    None => "-".into(),
                },
                match &r.current {
                    Some((s, reason)) => format!("{}/{reason}", if *s { "True" } else { "False" }),
                    None => "-".into(),
                },
                r.version.clone().unwrap_or_else(|| "-".into()),
                r.sha256.as_deref().map(short).unwrap_or("-").to_owned(),
                match &r.applied {
                    Some((Some(v), _)) => v.clone(),
                    Some((None, Some(sha))) => short(sha).to_owned(),
                    _ => "-".into(),
                },
            ]);
        }
        let widths: Vec<usize> = (0..7)
            .map(|i| table.iter().map(|row| row[i].len()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for row in &table {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
        if let Some((name, hash)) = &self.configmap {
            out.push_str(&match hash {
                Some(h) => format!(
                    "configmap {}/{name}: {}\n",
                    self.namespace,
                    short(&h.to_string())
                ),
                None => format!("no such ConfigMap {}/{name}\n", self.namespace),
            });
        }
        out
    }

    /// `3/5 on 2.4.1, 2 holding 2.3.0; 2.4.1 is too-new`.
    pub fn summary(&self) -> String {
        let total = self.rows.len();
        if total == 0 {
            return format!("no pods found in namespace {}", self.namespace);
        }
        let version = |r: &Row| {
            r.version
                .clone()
                .unwrap_or_else(|| "an unversioned config".into())
        };
        let mut on: BTreeMap<String, usize> = BTreeMap::new();
        let mut off: BTreeMap<String, usize> = BTreeMap::new();
        for r in &self.rows {
            if self.matches(r) {
                *on.entry(version(r)).or_default() += 1;
                continue;
            }
            let running = |r: &Row| match &r.applied {
                Some((Some(v), _)) => v.clone(),
                _ => "an unversioned config".into(),
            };
            let what = match &r.condition {
                None => "not reporting".to_owned(),
                Some(_) if Self::not_applied(r) => {
                    format!("running {}: {} not applied", running(r), version(r))
                }
                Some((true, _)) => match (&r.current, &r.held) {
                    (Some((false, _)), Some(held)) => held.to_string(),
                    // Observe mode: what runs is the active config, which it does not accept.
                    (Some((false, reason)), None) => {
                        format!("running {}: {}", version(r), kebab(reason))
                    }
                    (_, _) => match &self.configmap {
                        Some((name, None)) => format!(
                            "running {}: no such ConfigMap {}/{name}",
                            version(r),
                            self.namespace
                        ),
                        _ => format!("running {}: not yet the ConfigMap's content", version(r)),
                    },
                },
                Some((false, reason)) if r.sha256.is_none() => {
                    format!("without an accepted config: {}", kebab(reason))
                }
                Some((false, _)) if r.held.is_some() => {
                    r.held.as_ref().map(ToString::to_string).unwrap_or_default()
                }
                Some((false, reason)) => format!("not ready on {}: {}", version(r), kebab(reason)),
            };
            *off.entry(what).or_default() += 1;
        }
        let mut parts: Vec<(usize, String)> = on
            .into_iter()
            .map(|(v, n)| (n, format!("{n}/{total} on {v}")))
            .collect();
        parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        if parts.is_empty() {
            parts.push((0, format!("0/{total} on the expected config")));
        }
        let mut rest: Vec<(usize, String)> = off
            .into_iter()
            .map(|(w, n)| (n, format!("{n} {w}")))
            .collect();
        rest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        parts
            .into_iter()
            .chain(rest)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `confgate status` with the user's kubeconfig; an empty selection is [`Error::NoPods`].
pub async fn run(args: &Query) -> Result<Fleet, Error> {
    let client = super::client().await.map_err(Error::Client)?;
    let fleet = fleet(client, args).await?;
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
/// passes. `progress` gets each summary that differs from the last. A failed read is retried until
/// the timeout (the API server may be restarting under a pipeline), then returned.
pub async fn wait(
    args: &Query,
    timeout: std::time::Duration,
    mut progress: impl FnMut(&str),
) -> Result<Waited, Error> {
    let client = Client::try_default().await.map_err(Error::Client)?;
    let end = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let read = fleet(client.clone(), args).await;
        let expired = tokio::time::Instant::now() >= end;
        let f = match read {
            Ok(f) => f,
            Err(e) if expired => return Err(e),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_hash_cuts_on_a_character_boundary() {
        assert_eq!(short("sha256:0123456789abcdef"), "0123456789ab");
        assert_eq!(short("sha256:ééééééééééééééé"), "éééééééééééé");
        assert_eq!(short("sha256:é"), "é");
    }

    #[test]
    fn summary_counts_what_pods_run() {
        let row = |pod: &str, applied: &str| Row {
            pod: pod.into(),
            ready: true,
            condition: Some((true, "Accepted".into())),
            current: Some((true, "Accepted".into())),
            held: None,
            held_sha256: None,
            version: Some("2.1.0".into()),
            sha256: Some("sha256:210".into()),
            applied: Some((
                Some(applied.into()),
                Some(format!("sha256:{}", applied.replace('.', ""))),
            )),
            rollout: None,
        };
        let fleet = Fleet {
            namespace: "prod".into(),
            rows: vec![row("a", "2.1.0"), row("b", "2.0.0")],
            configmap: None,
            tracks: None,
        };
        assert_eq!(
            fleet.summary(),
            "1/2 on 2.1.0, 1 running 2.0.0: 2.1.0 not applied"
        );
        assert!(fleet.table().lines().nth(2).unwrap().ends_with("2.0.0"));
        assert!(!fleet.all_match());
    }

    /// Mid-rollout the summary counts the tracks, and only a refusal of the ConfigMap's current
    /// content ends a wait: a condition not yet updated after an edit is no refusal.
    #[test]
    fn a_rollout_is_summarised_and_only_a_current_refusal_counts() {
        use crate::state::Track;
        let row = |pod: &str, version: &str, assigned: Track, held: Option<&str>| Row {
            pod: pod.into(),
            ready: true,
            condition: Some((true, "Accepted".into())),
            current: Some((true, "Accepted".into())),
            held: None,
            held_sha256: None,
            version: Some(version.into()),
            sha256: Some(format!("sha256:{}", version.replace('.', ""))),
            applied: Some((
                Some(version.into()),
                Some(format!("sha256:{}", version.replace('.', ""))),
            )),
            rollout: Some(RolloutPart {
                percent: Some("25%".into()),
                assigned,
                held: held.map(|sha| super::super::condition::Held {
                    config: super::super::condition::Described::new(Some("3.0.0"), Some(sha)),
                    verdict: crate::verdict::Verdict::TooNew,
                }),
            }),
        };
        let mut fleet = Fleet {
            namespace: "prod".into(),
            rows: vec![
                row("a", "2.5.0", Track::Candidate, None),
                row("b", "2.4.1", Track::Stable, None),
                row("c", "2.4.1", Track::Stable, None),
                row("d", "2.4.1", Track::Candidate, Some("sha256:old")),
            ],
            configmap: None,
            tracks: None,
        };
        assert_eq!(
            fleet.rollout_summary().unwrap(),
            "rollout 25%: 1/4 pods on the candidate 2.5.0 (1 applied), 2/4 on stable 2.4.1, 1 refused (1 too-new)"
        );
        assert!(
            fleet
                .first_refusal()
                .unwrap()
                .starts_with("pod d holds the candidate version 3.0.0")
        );
        // With the ConfigMap read, a refusal of content it no longer holds is not one.
        fleet.configmap = Some(("app".into(), Some(ContentHash([1; 32]))));
        fleet.tracks = Some(Tracks {
            percent: Percent::parse("25%").ok(),
            keys: "config.yaml".into(),
            stable: ContentHash([2; 32]),
            candidate: ContentHash([3; 32]),
        });
        assert_eq!(fleet.first_refusal(), None);
        assert!(
            fleet
                .rollout_summary()
                .unwrap()
                .starts_with("rollout 25% of config.yaml: ")
        );
    }

    #[test]
    fn held_observed_and_missing_configmap_are_told_apart() {
        let row = |pod: &str, current: (bool, &str), held: bool| Row {
            pod: pod.into(),
            ready: true,
            condition: Some((true, "Accepted".into())),
            current: Some((current.0, current.1.into())),
            held: held.then(|| Holding {
                held: Some("2.5.0".into()),
                newest: Some("3.0.0".into()),
                verdict: crate::verdict::Verdict::TooNew,
                reason: None,
            }),
            held_sha256: None,
            version: Some("2.5.0".into()),
            sha256: Some("sha256:250".into()),
            applied: None,
            rollout: None,
        };
        let fleet = Fleet {
            namespace: "prod".into(),
            rows: vec![
                row("a", (false, "TooNew"), true),
                row("b", (false, "TooNew"), false),
            ],
            configmap: None,
            tracks: None,
        };
        assert_eq!(
            fleet.summary(),
            "0/2 on the expected config, 1 holding 2.5.0; 3.0.0 is too-new, 1 running 2.5.0: too-new"
        );
        assert!(fleet.table().contains("True/Accepted  False/TooNew"));
        let gone = Fleet {
            rows: vec![row("a", (true, "Accepted"), false)],
            configmap: Some(("app".into(), None)),
            ..fleet
        };
        assert_eq!(
            gone.summary(),
            "0/1 on the expected config, 1 running 2.5.0: no such ConfigMap prod/app"
        );
    }
}
