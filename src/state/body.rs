//! The API source's view of the object it watches, and the `/status` body that shows it with the
//! status as it stands when read.

use super::*;

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

    /// The `/status` `source` object, as it stands when read.
    pub fn rendered(&self) -> SourceJson<'_> {
        let failing = self.failing_for();
        SourceJson {
            kind: self.kind,
            namespace: &self.namespace,
            name: &self.name,
            uid: self.uid.as_deref(),
            resource_version: self.resource_version.as_deref(),
            recreated: self.recreated,
            previous_uid: self.previous_uid.as_deref(),
            watch: WatchJson {
                healthy: self.watching,
                failing_since: failing.and(self.failing_since.map(|(_, t)| t)),
                last_error: self.last_error.as_deref(),
            },
        }
    }
}

/// The `/status` `source` object: a [`SourceView`] at the time it is read.
#[derive(Debug, Serialize)]
pub struct SourceJson<'a> {
    pub kind: &'static str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
    pub resource_version: Option<&'a str>,
    pub recreated: bool,
    pub previous_uid: Option<&'a str>,
    pub watch: WatchJson<'a>,
}

/// The watch's health inside [`SourceJson`].
#[derive(Debug, Serialize)]
pub struct WatchJson<'a> {
    pub healthy: bool,
    /// Only while the watch is failing.
    pub failing_since: Option<jiff::Timestamp>,
    pub last_error: Option<&'a str>,
}

/// The `/status` body: the status with the API source's view as it stands when read, serialised
/// once.
#[derive(Debug, Serialize)]
pub struct StatusBody<'a> {
    #[serde(flatten)]
    pub status: &'a Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceJson<'a>>,
}

impl<'a> StatusBody<'a> {
    pub fn of(status: &'a Status) -> StatusBody<'a> {
        StatusBody {
            status,
            source: status.source.as_ref().map(SourceView::rendered),
        }
    }
}
