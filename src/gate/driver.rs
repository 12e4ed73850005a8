//! The async driver: waits for file events, the pipeline's inputs and timers, and runs the pipeline.
//! Plain-directory edits are debounced here, and only here.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::info;

use super::{Config, Error, Feed, Pipeline};
use crate::reload;
use crate::settings::Settings;
use crate::source::{Changes, Source};
use crate::state::Shared;

/// How long a plain directory must be quiet before it is read, and the most a burst can delay a read.
const QUIET: Duration = Duration::from_millis(100);
const QUIET_MAX: Duration = Duration::from_secs(1);
/// While the watched dir is absent, how often to look for it again.
const ABSENT_POLL: Duration = Duration::from_secs(1);
/// Runs the decision loop on the volume until `shutdown` completes.
pub async fn run(
    cfg: Config,
    base: Settings,
    shared: Arc<Shared>,
    reloads: reload::Handle,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    run_fed(cfg, Feed::Volume, base, shared, reloads, shutdown).await
}

/// Runs the decision loop on snapshots from `feed` until `shutdown` completes.
pub async fn run_fed(
    cfg: Config,
    feed: Feed,
    base: Settings,
    shared: Arc<Shared>,
    reloads: reload::Handle,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let mut source = Source::new(&cfg.watch, Some(&cfg.annotations))?;
    let mut pipeline = Pipeline::open(cfg, feed, base, shared, reloads)?;
    let mut changes = Changes::ALL;
    let mut plain_since: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        if changes.contains(Changes::ANNOTATIONS) && pipeline.annotations_changed() {
            changes |= Changes::CONFIG;
        }
        if changes.contains(Changes::PLAIN) && !changes.contains(Changes::CONFIG) {
            plain_since.get_or_insert_with(Instant::now);
        }
        let plain_ready = plain_since
            .is_some_and(|t| source.since_plain_event() >= QUIET || t.elapsed() >= QUIET_MAX);
        if changes.contains(Changes::CONFIG) || plain_ready {
            plain_since = None;
            pipeline.process();
        }
        pipeline.watch_errors(source.take_errors());
        // The API feed needs no volume; only the annotations dir is watched for it.
        let watched = source.ensure_watches() || !pipeline.reads_volume();
        pipeline.set_watch_error(match (&source.watch_error, watched) {
            (Some(e), _) => Some(e.clone()),
            (None, false) => Some(format!("{} is absent", pipeline.watch_dir().display())),
            (None, true) => None,
        });
        pipeline.publish();
        let mut wake = Instant::now() + pipeline.resync();
        if !watched {
            wake = wake.min(Instant::now() + ABSENT_POLL);
        }
        if let Some(t) = plain_since {
            wake = wake.min(
                Instant::now()
                    + QUIET
                        .saturating_sub(source.since_plain_event())
                        .max(Duration::from_millis(5))
                        .min(QUIET_MAX.saturating_sub(t.elapsed())),
            );
        }
        if let Some(t) = pipeline.retry_at() {
            wake = wake.min(t);
        }
        changes = tokio::select! {
            c = source.changed() => c,
            input = pipeline.input() => pipeline.take(input),
            () = tokio::time::sleep_until(wake) => {
                if plain_since.is_some() || pipeline.retry_due() {
                    Changes::CONFIG
                } else {
                    Changes::ALL
                }
            }
            () = &mut shutdown => break,
        };
    }
    info!("decision loop stopped");
    Ok(())
}
