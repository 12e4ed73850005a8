//! The one published status: what the server, probes, `wait` and metrics read. Written by the gate
//! loop and the reload worker only, through [`Shared`].

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

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

/// The API source's view of the object it watches (API mode only). Never holds content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceView {
    /// `configmap`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// The object was deleted and created again (a new UID) since confgate first saw it.
    pub recreated: bool,
    pub previous_uid: Option<String>,
    pub last_error: Option<String>,
    /// First error of the current run of failures, with its wall-clock time.
    pub failing_since: Option<(Instant, jiff::Timestamp)>,
    pub last_error_at: Option<Instant>,
    /// How long failures may go on before `/livez` reports the watch as stuck; a run of failures ends
    /// after this long without an error (the watch backs off at most 30 s between attempts).
    pub stuck_after: Duration,
}

impl SourceView {
    /// How long the watch has been failing, when it is.
    pub fn failing_for(&self) -> Option<Duration> {
        let (since, _) = self.failing_since?;
        let last = self.last_error_at?;
        (last.elapsed() < self.stuck_after).then(|| since.elapsed())
    }

    /// The `/livez` reason when the watch has been failing for longer than `stuck_after`.
    pub fn stuck(&self) -> Option<String> {
        let d = self.failing_for().filter(|d| *d >= self.stuck_after)?;
        Some(format!(
            "the {} {}/{} watch has been failing for {} s: {}",
            self.kind,
            self.namespace,
            self.name,
            d.as_secs(),
            self.last_error.as_deref().unwrap_or("unknown error")
        ))
    }

    /// The `/status` `source` object.
    pub fn to_json(&self) -> serde_json::Value {
        let failing = self.failing_for();
        serde_json::json!({
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "resource_version": self.resource_version,
            "recreated": self.recreated,
            "previous_uid": self.previous_uid,
            "watch": {
                "healthy": failing.is_none(),
                "failing_since": failing.and(self.failing_since.map(|(_, t)| t.to_string())),
                "last_error": self.last_error,
            },
        })
    }
}

/// Shared between the gate loop, the reload worker and the server.
#[derive(Debug)]
pub struct Shared {
    pub status: watch::Sender<Status>,
    pub metrics: Metrics,
    /// Set by the API source in API mode; `None` on the volume.
    pub source: watch::Sender<Option<SourceView>>,
    /// `/livez` rings this; the decision loop answers by bumping `pong`. An idle loop costs nothing.
    ping: Notify,
    pong: watch::Sender<u64>,
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared {
            status: watch::Sender::new(Status::default()),
            metrics: Metrics::default(),
            source: watch::Sender::new(None),
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
