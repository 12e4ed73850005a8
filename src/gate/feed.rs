//! Where the loop's input other than file events comes from: the [`Feed`] (volume, or the API
//! source's channels), the reload worker's reports and liveness pings; and [`off_loop`], the way the
//! loop reads and judges on the blocking pool while it answers pings.
//!
//! The blocking pool's threads exit after tokio's keep-alive (10 s idle), so an idle sidecar keeps
//! none, and nothing here wakes periodically.

use tokio::sync::watch;

use crate::snapshot::Observed;
use crate::state::{Shared, SourceView};

/// Where the loop takes snapshots from.
#[derive(Debug, Clone, Default)]
pub enum Feed {
    /// Read [`super::Config::watch`] when the file watch says it changed (the kubelet volume).
    #[default]
    Volume,
    /// Another task's observations (the API source): the newest snapshot (`None` until it has one)
    /// and the source's own view (identity, watch health), reported to the loop for `/status`.
    Channel {
        snapshots: watch::Receiver<Option<Observed>>,
        source: watch::Receiver<Option<SourceView>>,
    },
}

/// Runs `work` (reading and judging a config) on the blocking pool while this task answers liveness
/// pings: the loop is busy, not stuck, so `/livez` passes (the server, on its own thread, serves the
/// other endpoints whatever the loop does). Nothing else is taken meanwhile, so snapshots are still
/// judged one at a time, in order.
pub(crate) async fn off_loop<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let mut task = tokio::task::spawn_blocking(work);
    loop {
        tokio::select! {
            done = &mut task => match done {
                Ok(v) => return v,
                Err(e) => match e.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    // Only when the runtime shuts down, which drops this task too.
                    Err(_) => std::future::pending().await,
                },
            },
            () = shared.pinged() => shared.pong(),
        }
    }
}

pub(super) async fn snapshot_changed(rx: Option<&mut watch::Receiver<Option<Observed>>>) {
    if let Some(rx) = rx
        && rx.changed().await.is_ok()
    {
        return;
    }
    // The volume, or a closed channel: nothing more to say here (the source reports its own failure).
    std::future::pending().await
}

pub(super) async fn source_changed(
    rx: Option<&mut watch::Receiver<Option<SourceView>>>,
) -> Option<SourceView> {
    if let Some(rx) = rx
        && rx.changed().await.is_ok()
    {
        return rx.borrow_and_update().clone();
    }
    std::future::pending().await
}
