//! A rollout as this pod sees it, typed ([`Rollout`]), and as `/status` shows it ([`RolloutView`],
//! made by [`Rollout::view`], the one place its words are made).

use serde::{Deserialize, Serialize};

use crate::listing;
use crate::snapshot::ContentHash;
use crate::values::{Bucket, NEXT_SUFFIX, Percent, ROLLOUT_KEY, Verdict};

/// Which config of a rollout a pod runs: the stable keys, or the candidate's (`K.next` under `K`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Track {
    Stable,
    Candidate,
}

impl Track {
    pub fn as_str(self) -> &'static str {
        match self {
            Track::Stable => "stable",
            Track::Candidate => "candidate",
        }
    }
}

impl std::fmt::Display for Track {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rollout as this pod sees it: the ConfigMap holds `.next` keys or `confgate.rollout`. Built
/// from a [`Rollout`] ([`Rollout::view`]), the one place its words are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutView {
    /// The percentage of pods on the candidate (`25%`); `None` when `confgate.rollout` is absent.
    pub percent: Option<Percent>,
    /// This pod's bucket (`12.34%`): on the candidate when below the percentage. `None` without a
    /// pod identity.
    pub bucket: Option<Bucket>,
    /// The track the bucket gives this pod.
    pub assigned: Track,
    /// The track of what this pod promotes: stable when the candidate is held on it.
    pub track: Track,
    /// The keys the candidate changes, listed (bounded).
    pub keys: String,
    /// The candidate held on this pod (outside its range, invalid, or refused by the component).
    pub held: Option<RolloutHeld>,
    /// The assignment in words.
    pub reason: String,
}

/// A candidate held back on a pod assigned to it, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutHeld {
    pub version: Option<String>,
    pub sha256: Option<String>,
    pub verdict: Verdict,
    pub reason: String,
}

/// A rollout as this pod sees it, typed: what `rollout::choose` found and the gate keeps; the
/// status shows it as a [`RolloutView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    /// The percentage in `confgate.rollout`; `None` when that key is absent.
    pub percent: Option<Percent>,
    /// This pod's bucket; `None` without a pod identity.
    pub bucket: Option<Bucket>,
    /// The track the bucket gives this pod.
    pub assigned: Track,
    /// The names the candidate gives new content (`K` for each `K.next`), in key order.
    pub keys: Vec<String>,
    /// The candidate, held on this pod although its bucket assigns it.
    pub held: Option<HeldCandidate>,
    /// On the candidate's track: the hash of the candidate's own keys (each `K.next`, named `K`),
    /// which a refusal of the candidate is remembered by, whatever stable keys change around it.
    pub candidate_own: Option<ContentHash>,
}

/// A rollout's candidate held on a pod its bucket assigns to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCandidate {
    pub version: Option<String>,
    /// The candidate set's hash.
    pub hash: Option<ContentHash>,
    pub verdict: Verdict,
    /// Why, in words: its judgement's reason, or what the component said when it refused it.
    pub reason: String,
}

impl Rollout {
    /// The track of what this pod promotes: stable when the candidate is held on it.
    pub fn track(&self) -> Track {
        match self.held {
            Some(_) => Track::Stable,
            None => self.assigned,
        }
    }

    /// The candidate's own keys' hash while this pod promotes the candidate.
    pub fn promoting_candidate(&self) -> Option<ContentHash> {
        self.candidate_own
            .filter(|_| self.track() == Track::Candidate)
    }

    /// The assignment in words.
    fn reason(&self) -> String {
        let (key, suffix) = (ROLLOUT_KEY, NEXT_SUFFIX);
        match (self.percent, self.bucket, &self.held) {
            (Some(p), Some(b), Some(h)) => format!(
                "bucket {b} is below {p}, but the candidate{} is {}: held, on stable",
                h.version
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                h.verdict
            ),
            _ if self.keys.is_empty() => format!("no {suffix} key: every pod on stable"),
            (None, _, _) => format!("no {key} key: every pod on stable"),
            (Some(_), None, _) => "no pod identity (POD_UID or POD_NAME): on stable".to_owned(),
            (Some(p), Some(b), None) if b.on_candidate(p) => {
                format!("bucket {b} is below {p}: on the candidate")
            }
            (Some(p), Some(b), None) => format!("bucket {b} is not below {p}: on stable"),
        }
    }

    /// The rollout as `/status` shows it.
    pub fn view(&self) -> RolloutView {
        RolloutView {
            percent: self.percent,
            bucket: self.bucket,
            assigned: self.assigned,
            track: self.track(),
            keys: listing::listed(&self.keys, None, |out, k| out.push_str(&listing::name(k))),
            held: self.held.as_ref().map(|h| RolloutHeld {
                version: h.version.clone(),
                sha256: h.hash.map(|h| h.to_string()),
                verdict: h.verdict,
                reason: h.reason.clone(),
            }),
            reason: self.reason(),
        }
    }
}
