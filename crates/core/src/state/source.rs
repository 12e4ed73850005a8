//! The API source's view of the object it watches, as the status holds it: its times are the
//! loop's, passed in (the edge reads the clock).

use std::time::{Duration, Instant};

/// The API source's view of the object it watches (API mode only). Never holds content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceView {
    /// `configmap` or `secret`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// The object was deleted and created again (a new UID) since confgate first saw it.
    pub recreated: bool,
    pub previous_uid: Option<String>,
    /// The watch runs from a list made since the last error: only then is what it shows current.
    pub watching: bool,
    pub last_error: Option<String>,
    /// First error of the current run of failures, with its wall-clock time.
    pub failing_since: Option<(Instant, jiff::Timestamp)>,
    pub last_error_at: Option<Instant>,
    /// How long failures may go on before `/livez` reports the watch as stuck; a run of failures ends
    /// after this long without an error (the watch backs off at most 30 s between attempts).
    pub stuck_after: Duration,
}

impl SourceView {
    /// How long the watch has been failing at `now`, when it is.
    pub fn failing_for_at(&self, now: Instant) -> Option<Duration> {
        let (since, _) = self.failing_since?;
        let last = self.last_error_at?;
        let ago = |t: Instant| now.saturating_duration_since(t);
        (ago(last) < self.stuck_after).then(|| ago(since))
    }

    /// The `/livez` reason when the watch has been failing for longer than `stuck_after` at `now`.
    pub fn stuck_at(&self, now: Instant) -> Option<String> {
        let d = self
            .failing_for_at(now)
            .filter(|d| *d >= self.stuck_after)?;
        Some(format!(
            "the {} {}/{} watch has been failing for {} s: {}",
            self.kind,
            self.namespace,
            self.name,
            d.as_secs(),
            self.last_error.as_deref().unwrap_or("unknown error")
        ))
    }
}
