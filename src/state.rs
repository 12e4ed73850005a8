//! The one published status: what the server, probes, `wait` and metrics read. Written by the gate
//! loop and the reload worker only, through [`Shared`].

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{Notify, watch};

use crate::metrics::Metrics;

/// The config the component runs (or, in gate-only mode, would run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActiveView {
    pub version: Option<String>,
    pub sha256: String,
    /// RFC 3339.
    pub since: String,
    pub verdict: &'static str,
}

/// The newest snapshot, when it is not the active one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateView {
    pub version: Option<String>,
    pub sha256: Option<String>,
    pub verdict: &'static str,
    pub reason: String,
}

/// The outcome of reload signalling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReloadView {
    pub target: String,
    /// `none`, `pending`, `success` or `failure`.
    pub last_result: &'static str,
    pub last_error: Option<String>,
    /// Content hash the last successful reload announced.
    pub last_success_sha256: Option<String>,
    /// Reloads requested by promotions so far (coalesced requests count each).
    pub requested: u64,
}

/// One readiness check, as `/readyz?verbose` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub message: String,
}

/// Everything confgate reports. Never holds config content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    pub ready: bool,
    pub reason: String,
    pub accepts: Option<String>,
    pub stale: bool,
    pub active: Option<ActiveView>,
    pub candidate: Option<CandidateView>,
    pub reload: ReloadView,
    pub mode: &'static str,
    pub on_incompatible: &'static str,
    /// The start-up latch: a first accepted config has been in place.
    pub started: bool,
    pub checks: Vec<Check>,
    /// Why the config dir is not being watched (confgate then polls every second), if it is not.
    pub watch_error: Option<String>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            ready: false,
            reason: "starting".into(),
            accepts: None,
            stale: false,
            active: None,
            candidate: None,
            reload: ReloadView {
                target: "none".into(),
                last_result: "none",
                last_error: None,
                last_success_sha256: None,
                requested: 0,
            },
            mode: "enforce",
            on_incompatible: "hold",
            started: false,
            checks: Vec::new(),
            watch_error: None,
        }
    }
}

/// Shared between the gate loop, the reload worker and the server.
#[derive(Debug)]
pub struct Shared {
    pub status: watch::Sender<Status>,
    pub metrics: Metrics,
    /// `/livez` rings this; the decision loop answers by bumping `pong`. An idle loop costs nothing.
    ping: Notify,
    pong: watch::Sender<u64>,
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared {
            status: watch::Sender::new(Status::default()),
            metrics: Metrics::default(),
            ping: Notify::new(),
            pong: watch::Sender::new(0),
        })
    }

    pub fn snapshot(&self) -> Status {
        self.status.borrow().clone()
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
    pub async fn loop_answers(&self, deadline: Duration) -> bool {
        let mut rx = self.pong.subscribe();
        rx.mark_unchanged();
        self.ping.notify_one();
        matches!(
            tokio::time::timeout(deadline, rx.changed()).await,
            Ok(Ok(()))
        )
    }
}
