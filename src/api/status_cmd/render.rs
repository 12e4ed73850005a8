//! A [`Fleet`] as `confgate status` prints it: one line per pod, the summary line, and the rollout's.

use std::collections::BTreeMap;

use super::{Fleet, Row};
use crate::api::condition::{Reason, RolloutPart};
use crate::state::Track;

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
    /// `rollout 25% of config.yaml: 3/12 pods on the candidate 2.5.0 (3 applied), 9/12 on stable
    /// 2.4.1, 0 refused`, when a pod reports a rollout.
    pub(crate) fn rollout_summary(&self) -> Option<String> {
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

    /// The table and the summary line (and the rollout's, mid-rollout).
    pub fn render(&self) -> String {
        format!("{}{}\n", self.table(), self.summary())
    }

    /// The summary line, preceded by the rollout's line when pods report one.
    pub(crate) fn summaries(&self) -> String {
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
                    (Some((false, _)), None) if r.waiting.is_some() => format!(
                        "running {}: {} waits for this pod's share of the reload spread",
                        version(r),
                        r.waiting.as_deref().unwrap_or_default()
                    ),
                    // Mid-rollout, the candidate is held on the pod: the refusal says it.
                    (Some((false, _)), None)
                        if r.rollout.as_ref().is_some_and(|p| p.held.is_some()) =>
                    {
                        format!("running {}: the candidate is held", version(r))
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::condition::{Described, Held};
    use crate::api::status_cmd::Tracks;
    use crate::rollout::Percent;
    use crate::snapshot::ContentHash;
    use crate::state::Holding;

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
            waiting: None,
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
            waiting: None,
            version: Some(version.into()),
            sha256: Some(format!("sha256:{}", version.replace('.', ""))),
            applied: Some((
                Some(version.into()),
                Some(format!("sha256:{}", version.replace('.', ""))),
            )),
            rollout: Some(RolloutPart {
                percent: Some("25%".into()),
                assigned,
                held: held.map(|sha| Held {
                    config: Described::new(Some("3.0.0"), Some(sha)),
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
        fleet.configmap = Some((
            "app".into(),
            Some(ContentHash::of([("k", b"1".as_slice())])),
        ));
        fleet.tracks = Some(Tracks {
            percent: Percent::parse("25%").ok(),
            keys: "config.yaml".into(),
            stable: ContentHash::of([("k", b"2".as_slice())]),
            candidate: ContentHash::of([("k", b"3".as_slice())]),
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
                in_place: false,
            }),
            held_sha256: None,
            waiting: None,
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

    /// What a sidecar writes while an accepted newer config waits for its share of the reload
    /// spread (`config-current` False/Spreading, the newer config in the facts): the pod is
    /// running its config and waiting, not holding anything back.
    #[test]
    fn a_pod_waiting_out_its_reload_spread_is_not_holding() {
        use crate::api::condition::{
            CONDITION_TYPE, CURRENT_TYPE, FACTS_ANNOTATION, Facts, Newest, Reason,
        };
        use crate::api::pod_view::PodView;
        let facts = Facts {
            active: Some(Described::new(Some("2.0.0"), Some("sha256:200"))),
            newest: Some(Newest {
                config: Described::new(Some("2.1.0"), Some("sha256:210")),
                verdict: crate::verdict::Verdict::Accepted,
                reason: "accepted".into(),
            }),
            ..Facts::default()
        };
        let pod: PodView = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "annotations": {FACTS_ANNOTATION: facts.to_json()}},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": CONDITION_TYPE, "status": "True", "reason": "Accepted"},
                {"type": CURRENT_TYPE, "status": "False", "reason": Reason::Spreading.to_string()},
            ]},
        }))
        .unwrap();
        let r = crate::api::status_cmd::row(&pod);
        assert_eq!(r.held, None);
        assert_eq!(r.waiting.as_deref(), Some("2.1.0"));
        let fleet = Fleet {
            namespace: "prod".into(),
            rows: vec![r],
            configmap: None,
            tracks: None,
        };
        assert_eq!(
            fleet.summary(),
            "0/1 on the expected config, 1 running 2.0.0: 2.1.0 waits for this pod's share of the reload spread"
        );
    }
}
