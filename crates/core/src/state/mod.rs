//! The one published status, as values: [`Status`], its views, [`Holding`] (the one wording of a
//! newer config held back) and [`Notice`], what an operator acts on. The decision core makes them;
//! the edge's `state` publishes them (one writer, through its `Publisher`) and re-exports these.
//!
//! Verdicts, mode, policy, reload result and check kinds are enums serialised kebab-case; hashes
//! are `snapshot::PrintedHash`, times `jiff::Timestamp`; the setting and verdict values come from
//! `values`. `Status` derives `Deserialize` so `probe` and the tests read `/status` back typed.
//! `CheckKind::gates_readiness` says which checks take readiness: a bad annotation and a failing
//! reload are reported (`[!]` in `/readyz?verbose` and on the probe's line) without gating, since
//! neither changes what the component runs.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::snapshot::PrintedHash;
use crate::values::{Mode, OnIncompatible, Verdict};

mod source;
mod views;

pub use source::SourceView;
pub use views::{ActiveView, AppliedView, CandidateView, CheckingView, DesiredView, KnownGoodView};
pub use views::{Check, CheckKind, ReloadResult, ReloadView, SpreadView};

// A rollout as a pod sees it is the rollout's: `rollout::choose` makes it, the gate keeps it.
pub use crate::rollout::{HeldCandidate, Rollout, RolloutHeld, RolloutView, Track};

/// Everything confgate reports. Never holds config content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub ready: bool,
    pub reason: String,
    pub accepts: Option<String>,
    pub stale: bool,
    /// The newest snapshot seen.
    pub desired: Option<DesiredView>,
    /// The config in the promoted dir (gate-only: the one in force).
    pub active: Option<ActiveView>,
    /// The config the component confirmed it runs.
    pub applied: Option<AppliedView>,
    pub candidate: Option<CandidateView>,
    pub reload: ReloadView,
    pub mode: Mode,
    pub on_incompatible: OnIncompatible,
    /// The start-up latch: a first accepted config has been in place.
    pub started: bool,
    pub checks: Vec<Check>,
    /// Why the config dir is not being watched (confgate then polls every second), if it is not.
    pub watch_error: Option<String>,
    /// The rollout in the newest config, as this pod sees it (none without rollout keys).
    pub rollout: Option<RolloutView>,
    /// A change waiting for this pod's share of the reload spread (none while nothing waits).
    #[serde(default)]
    pub spread: Option<SpreadView>,
    /// A check by the component's checker under way (none while none runs).
    #[serde(default)]
    pub checking: Option<CheckingView>,
    /// The known-good config in force while the source holds nothing accepted (none otherwise).
    #[serde(default)]
    pub known_good: Option<KnownGoodView>,
    /// The API source's view in API mode; `/status` renders it as `source` (the edge's
    /// `SourceClock::rendered`), since its health depends on the time it is read at.
    #[serde(skip)]
    pub source: Option<SourceView>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            ready: false,
            reason: "starting".into(),
            accepts: None,
            stale: false,
            desired: None,
            active: None,
            applied: None,
            candidate: None,
            reload: ReloadView::default(),
            mode: Mode::Enforce,
            on_incompatible: OnIncompatible::Hold,
            started: false,
            checks: Vec::new(),
            watch_error: None,
            rollout: None,
            spread: None,
            checking: None,
            known_good: None,
            source: None,
        }
    }
}

impl Status {
    /// Whether the `settings` check fails (a bad or unknown annotation).
    pub fn settings_problem(&self) -> bool {
        self.failing(CheckKind::Settings).is_some()
    }

    /// The failing check of that kind, if it fails.
    pub fn failing(&self, kind: CheckKind) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == kind && !c.ok)
    }

    /// The failing checks that do not take readiness (a settings problem, a failing reload), as
    /// `NAME: MESSAGE`, for the probe's line of a ready replica.
    pub fn warnings(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.ok && !c.name.gates_readiness())
            .map(|c| format!("{}: {}", c.name, c.message))
            .collect()
    }

    /// The `/livez` reason when the API source's watch is stuck, at `now`.
    pub fn source_stuck_at(&self, now: Instant) -> Option<String> {
        self.source.as_ref().and_then(|s| s.stuck_at(now))
    }
}

/// A newer config held back while an older one stays in force: `holding 2.4.1; 3.0.0 is too-new`,
/// then `: REASON` when the reason is known. The one wording of that fact, for `/readyz` and
/// `/status`, the probe's line, the pod's Events and `confgate status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The config in force as the reader names it (a version, or a version and hash); `None`: it
    /// has no version.
    pub held: Option<String>,
    /// The newest config, named the same way; `None`: it has none (missing, unreadable).
    pub newest: Option<String>,
    pub verdict: Verdict,
    pub reason: Option<String>,
    /// The newest config is the one in place (the component refused it and no config it applied
    /// is kept to roll back to): nothing is held in its place.
    pub in_place: bool,
}

impl Holding {
    /// What `status` holds back, when the active config is not the newest; `None` otherwise (an
    /// observe-mode replica running a config it does not accept holds nothing back).
    pub fn of(status: &Status) -> Option<Holding> {
        let (active, newest) = (status.active.as_ref()?, status.candidate.as_ref()?);
        status.stale.then(|| Holding {
            held: active.version.clone(),
            newest: newest.version.clone(),
            verdict: newest.verdict,
            reason: None,
            in_place: newest.sha256.as_ref() == Some(&active.sha256),
        })
    }

    /// The same, with the newest config's reason after it.
    pub fn because(self, reason: impl Into<String>) -> Holding {
        Holding {
            reason: Some(reason.into()),
            ..self
        }
    }
}

impl std::fmt::Display for Holding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.in_place {
            write!(
                f,
                "no config the component applied to roll back to; {} stays in place and is {}",
                self.newest.as_deref().unwrap_or("the newest config"),
                self.verdict
            )?;
        } else {
            write!(
                f,
                "holding {}; {} is {}",
                self.held.as_deref().unwrap_or("the previous config"),
                self.newest.as_deref().unwrap_or("the newest config"),
                self.verdict
            )?;
        }
        match &self.reason {
            Some(r) => write!(f, ": {r}"),
            None => Ok(()),
        }
    }
}

/// What an operator acts on, as the decision loop saw it happen, at the event it happened at: each
/// becomes a pod Event (none for a routine accepted promotion). Sent through the edge's `Publisher::notice`
/// and received through its `Shared::notices`, every one in order, so a change that lasts less than
/// the time between two published statuses is reported all the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Started on the known-good from the record: the source holds nothing accepted.
    KnownGood(KnownGoodView),
    /// A config became active that is not accepted (observe mode), or one that ends a hold a notice
    /// reported.
    Active(ActiveView),
    /// The newest config is held: missing, rejected, or refused by the component (then rolled back
    /// to `applied`, if any), while `active` is in force.
    Held {
        candidate: CandidateView,
        active: Option<ActiveView>,
        applied: Option<AppliedView>,
    },
    /// The reload of the promoted config failed, after it had not: via `target` (as shown), with the
    /// error.
    ReloadFailed {
        target: String,
        error: Option<String>,
    },
    /// A settings problem appeared: what the `settings` check says of it.
    SettingsProblem(String),
}
