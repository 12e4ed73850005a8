//! `confgate status`: the fleet view. Lists pods, reads the conditions `confgate.io/config-compatible`
//! (ready) and `confgate.io/config-current` (the newest config in force) each sidecar wrote, with
//! their facts from the annotation `status.confgate.io/facts` (never from the prose message), and,
//! given `--configmap`, compares each pod's active config with the ConfigMap's current content hash.
//! Uses the user's kubeconfig; needs only list on pods and get on the ConfigMap. The sidecar's source
//! does not matter: a volume-mode sidecar reports the same.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Client};

use super::condition::{FACTS_ANNOTATION, Facts, Reason};
use super::pod_view::PodView;
use super::{CONDITION_TYPE, CURRENT_TYPE, explain};
use crate::snapshot::{ContentHash, Snapshot};

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
    /// A newer config than the active one is held back.
    pub held: bool,
    pub version: Option<String>,
    pub sha256: Option<String>,
    /// What the component confirmed it runs (version, hash), when the sidecar knows.
    pub applied: Option<(Option<String>, Option<String>)>,
}

/// The pods and, with `--configmap`, the ConfigMap's current hash (`None` when it does not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    pub namespace: String,
    pub rows: Vec<Row>,
    pub configmap: Option<(String, Option<ContentHash>)>,
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
    let held = facts.as_ref().is_some_and(|m| m.newest.is_some());
    let active = facts.and_then(|m| m.active).unwrap_or_default();
    let (version, sha256) = (active.version, active.sha256);
    Row {
        pod: pod.metadata.name.clone().unwrap_or_default(),
        ready,
        condition: ours.map(|c| (c.status == "True", c.reason.clone().unwrap_or_default())),
        current: current.map(|c| (c.status == "True", c.reason.clone().unwrap_or_default())),
        held,
        version,
        sha256,
        applied,
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
    let configmap = match &args.configmap {
        None => None,
        Some(name) => {
            let cms: Api<ConfigMap> = Api::namespaced(client, &namespace);
            let cm = cms.get_opt(name).await.map_err(|e| Error::ConfigMap {
                namespace: namespace.clone(),
                name: name.clone(),
                why: explain(&e, "get on configmaps"),
            })?;
            let hash = cm
                .as_ref()
                .and_then(|cm| super::source::files(cm).ok())
                .map(|f| Snapshot::new(f.into_map()).hash());
            Some((name.clone(), hash))
        }
    };
    Ok(Fleet {
        namespace,
        rows,
        configmap,
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
        match &self.configmap {
            None => compatible,
            Some((_, hash)) => {
                compatible && hash.is_some_and(|h| r.sha256.as_deref() == Some(&h.to_string()))
            }
        }
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

    /// The table and the summary line.
    pub fn render(&self) -> String {
        format!("{}{}\n", self.table(), self.summary())
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

    /// `3/5 on 2.4.1, 2 holding 2.3.0: too-new`.
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
                Some((true, _)) => match &r.current {
                    Some((false, reason)) if r.held => {
                        format!("holding {}: {}", version(r), kebab(reason))
                    }
                    // Observe mode: what runs is the active config, which it does not accept.
                    Some((false, reason)) => format!("running {}: {}", version(r), kebab(reason)),
                    _ => match &self.configmap {
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
                Some((false, reason)) => format!("holding {}: {}", version(r), kebab(reason)),
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
            held: false,
            version: Some("2.1.0".into()),
            sha256: Some("sha256:210".into()),
            applied: Some((
                Some(applied.into()),
                Some(format!("sha256:{}", applied.replace('.', ""))),
            )),
        };
        let fleet = Fleet {
            namespace: "prod".into(),
            rows: vec![row("a", "2.1.0"), row("b", "2.0.0")],
            configmap: None,
        };
        assert_eq!(
            fleet.summary(),
            "1/2 on 2.1.0, 1 running 2.0.0: 2.1.0 not applied"
        );
        assert!(fleet.table().lines().nth(2).unwrap().ends_with("2.0.0"));
        assert!(!fleet.all_match());
    }

    #[test]
    fn held_observed_and_missing_configmap_are_told_apart() {
        let row = |pod: &str, current: (bool, &str), held: bool| Row {
            pod: pod.into(),
            ready: true,
            condition: Some((true, "Accepted".into())),
            current: Some((current.0, current.1.into())),
            held,
            version: Some("2.5.0".into()),
            sha256: Some("sha256:250".into()),
            applied: None,
        };
        let fleet = Fleet {
            namespace: "prod".into(),
            rows: vec![
                row("a", (false, "TooNew"), true),
                row("b", (false, "TooNew"), false),
            ],
            configmap: None,
        };
        assert_eq!(
            fleet.summary(),
            "0/2 on the expected config, 1 holding 2.5.0: too-new, 1 running 2.5.0: too-new"
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
