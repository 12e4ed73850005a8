//! The one published status: what the server, probes, `wait`, metrics and the pod reporter read.
//! Written by the decision loop only, through the one [`Publisher`] a [`Shared`] hands out; the reload
//! worker and the API source report to the loop as messages instead.
//!
//! Verdicts, mode, policy, reload result and check kinds are enums serialised kebab-case; hashes
//! are `snapshot::PrintedHash`, times `jiff::Timestamp`; the setting and verdict values come from
//! `values`. `Status` derives `Deserialize` so `probe` and the tests read `/status` back typed.
//! `Holding` is the one wording of a newer config held back (`holding 2.4.1; 3.0.0 is too-new[:
//! REASON]`) for `/readyz`, the probe, the pod's Events and `confgate status`; `Rollout` is a
//! rollout as a pod sees it, typed, whose `view` is the one place its `RolloutView` and words are
//! made. `metrics` does not import this module: the status becomes a `metrics::View` here.
//!
//! `CheckKind::gates_readiness` says which checks take readiness: a bad annotation and a failing
//! reload are reported (`[!]` in `/readyz?verbose` and on the probe's line) without gating, since
//! neither changes what the component runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast, watch};
use tokio::time::Instant;

use crate::metrics::{self, Metrics};
use crate::snapshot::PrintedHash;
use crate::values::{Mode, OnIncompatible, Verdict};

mod body;
#[cfg(test)]
mod tests;
mod views;

pub use body::{SourceJson, SourceView, StatusBody, WatchJson};
pub use views::{ActiveView, AppliedView, CandidateView, CheckingView, DesiredView, KnownGoodView};
pub use views::{Check, CheckKind, ReloadResult, ReloadView, SpreadView};

// A rollout as a pod sees it is the core's: `rollout::choose` makes it, the gate keeps it.
pub use confgate_core::rollout::{HeldCandidate, Rollout, RolloutHeld, RolloutView, Track};

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
    /// The API source's view in API mode; `/status` renders it as `source` ([`SourceView::rendered`]),
    /// since its health depends on the time it is read at.
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
    pub(crate) fn settings_problem(&self) -> bool {
        self.failing(CheckKind::Settings).is_some()
    }

    /// The failing check of that kind, if it fails.
    pub(crate) fn failing(&self, kind: CheckKind) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == kind && !c.ok)
    }

    /// The failing checks that do not take readiness (a settings problem, a failing reload), as
    /// `NAME: MESSAGE`, for the probe's line of a ready replica.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.ok && !c.name.gates_readiness())
            .map(|c| format!("{}: {}", c.name, c.message))
            .collect()
    }

    /// The `/livez` reason when the API source's watch is stuck.
    pub(crate) fn source_stuck(&self) -> Option<String> {
        self.source.as_ref().and_then(SourceView::stuck)
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
    pub(crate) fn because(self, reason: impl Into<String>) -> Holding {
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

impl<'a> From<&'a Status> for metrics::View<'a> {
    fn from(s: &'a Status) -> Self {
        metrics::View {
            ready: s.ready,
            stale: s.stale,
            started: s.started,
            settings_problem: s.settings_problem(),
            active: s
                .active
                .as_ref()
                .map(|a| (a.version.as_deref().unwrap_or(""), &a.sha256)),
            applied: s
                .applied
                .as_ref()
                .map(|a| (a.version.as_deref().unwrap_or(""), &a.sha256)),
            last_reload_successful: s.reload.last_reload_successful,
            variant: s.active.as_ref().and_then(|a| a.variant.as_deref()),
            rollout: s.rollout.as_ref().map(|r| (r.track.as_str(), r.percent)),
            known_good: s.known_good.is_some(),
        }
    }
}

/// Shared between the decision loop, the reload worker, the API source and the server: the published
/// status (one writer), the metrics counters and the liveness ping.
#[derive(Debug)]
pub struct Shared {
    status: watch::Sender<Status>,
    /// What the decision loop saw happen, for the pod's Events ([`Notice`]).
    notices: broadcast::Sender<Notice>,
    /// The one [`Publisher`] has been handed out.
    published: AtomicBool,
    pub metrics: Metrics,
    /// `/livez` rings this; the decision loop answers by bumping `pong`. An idle loop costs nothing.
    ping: Notify,
    pong: watch::Sender<u64>,
}

/// What an operator acts on, as the decision loop saw it happen, at the event it happened at: each
/// becomes a pod Event (none for a routine accepted promotion). Sent through [`Publisher::notice`]
/// and received through [`Shared::notices`], every one in order, so a change that lasts less than
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

/// How many notices wait for a slow reader before the oldest are dropped (the reader says so).
pub const NOTICES_KEPT: usize = 256;

/// The only way to write the published status and send notices; [`Shared::publisher`] hands out
/// one per [`Shared`].
#[derive(Debug)]
pub struct Publisher(watch::Sender<Status>, broadcast::Sender<Notice>);

impl Publisher {
    /// Sends `notice` to every reader of [`Shared::notices`] (none: it goes nowhere).
    pub fn notice(&self, notice: Notice) {
        let _ = self.1.send(notice);
    }

    /// Publishes `next`, waking readers only when it differs from what they saw.
    pub fn publish(&self, next: Status) {
        self.0.send_if_modified(|s| {
            if *s == next {
                false
            } else {
                *s = next;
                true
            }
        });
    }
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared {
            status: watch::Sender::new(Status::default()),
            notices: broadcast::Sender::new(NOTICES_KEPT),
            published: AtomicBool::new(false),
            metrics: Metrics::default(),
            ping: Notify::new(),
            pong: watch::Sender::new(0),
        })
    }

    /// The status writer, once: `None` when it was already taken, so two loops cannot both publish.
    pub fn publisher(&self) -> Option<Publisher> {
        (!self.published.swap(true, Ordering::AcqRel))
            .then(|| Publisher(self.status.clone(), self.notices.clone()))
    }

    /// The status as last published.
    pub fn snapshot(&self) -> Status {
        self.status.borrow().clone()
    }

    /// A receiver of every published status.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// A receiver of every notice sent from now on.
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    /// Waits for a liveness ping (the decision loop selects on this).
    pub async fn pinged(&self) {
        self.ping.notified().await;
    }

    /// The decision loop's answer to a ping.
    pub fn pong(&self) {
        self.pong.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether the decision loop answers within `deadline`.
    pub(crate) async fn loop_answers(&self, deadline: Duration) -> bool {
        let mut rx = self.pong.subscribe();
        rx.mark_unchanged();
        self.ping.notify_one();
        matches!(
            tokio::time::timeout(deadline, rx.changed()).await,
            Ok(Ok(()))
        )
    }
}
