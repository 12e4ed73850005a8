//! The API source's view of the object it watches read on the loop's clock ([`SourceClock`]), and
//! the `/status` body that shows it with the status as it stands when read.

use serde::Serialize;

use super::*;
use std::time::Duration;

/// A [`SourceView`] read at the time it is read: its times are the loop's clock's
/// (`tokio::time::Instant`, so a test with paused time reads the same clock).
pub trait SourceClock {
    /// How long the watch has been failing, when it is.
    fn failing_for(&self) -> Option<Duration>;
    /// The `/livez` reason when the watch has been failing for longer than `stuck_after`.
    fn stuck(&self) -> Option<String>;
    /// The `/status` `source` object, as it stands when read.
    fn rendered(&self) -> SourceJson<'_>;
}

/// Now, on the clock a [`SourceView`]'s times are read on.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

impl SourceClock for SourceView {
    fn failing_for(&self) -> Option<Duration> {
        self.failing_for_at(now())
    }

    fn stuck(&self) -> Option<String> {
        self.stuck_at(now())
    }

    fn rendered(&self) -> SourceJson<'_> {
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
