//! The one published status: what the server, probes, `wait`, metrics and the pod reporter read.
//! Written by the decision loop only, through the one [`Publisher`] a [`Shared`] hands out; the reload
//! worker and the API source report to the loop as messages instead.
//!
//! The status's values (`Status`, its views, `Holding`, `Notice`, a rollout as a pod sees it) are
//! the core's (`confgate_core::state`), re-exported here; this module publishes them, and reads the
//! API source's view on the loop's clock ([`SourceClock`]). `metrics` does not import this module:
//! the status becomes a `metrics::View` here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, broadcast, watch};

use crate::metrics::{self, Metrics};

mod body;
#[cfg(test)]
mod tests;

pub use body::{SourceClock, SourceJson, StatusBody, WatchJson};
// The status's values (what it holds, the notices, a rollout as a pod sees it) are the core's:
// the gate makes them; this module publishes them.
pub use confgate_core::state::*;

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
