//! The async driver: waits for file events, the pipeline's inputs and timers, and hands each to the
//! pipeline as an [`Event`]. Plain-directory edits are debounced here, and only here.
//!
//! The safety re-read is a deadline (`resync_at`): pings, reload outcomes and other wake-ups never
//! move it. On it the gate gets `Event::Resync`, which also retries unfinished tidying.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::info;

use super::config::Config;
use super::error::Error;
use super::feed::Feed;
use super::known_good::Link;
use super::machine::{Event, Files};
use super::pipeline::Pipeline;
use crate::reload;
use crate::settings::Settings;
use crate::source::{Changes, Source};
use crate::state::Shared;

/// How long a plain directory must be quiet before it is read, and the most a burst can delay a read.
const QUIET: Duration = Duration::from_millis(100);
const QUIET_MAX: Duration = Duration::from_secs(1);
/// How long a file open for writing holds the config's reads before it is reported as never settling
/// (it is still not read while it stays open).
const SETTLE_MAX: Duration = Duration::from_secs(30);
/// While the watched dir is absent, how often to look for it again.
const ABSENT_POLL: Duration = Duration::from_secs(1);

/// The debounce of plain-directory edits: a burst is read once it has been quiet for [`QUIET`], or
/// [`QUIET_MAX`] after it began, whichever comes first. A `..data` swap is never debounced: it is
/// already atomic. The source only records when the last plain event happened.
#[derive(Debug, Default)]
struct Debounce {
    /// When the current burst began.
    since: Option<Instant>,
}

impl Debounce {
    fn plain_event(&mut self, now: Instant) {
        self.since.get_or_insert(now);
    }

    /// Whether the burst is over at `now`, given the time since its last event.
    fn ready(&self, quiet_for: Duration, now: Instant) -> bool {
        self.since
            .is_some_and(|t| quiet_for >= QUIET || now.saturating_duration_since(t) >= QUIET_MAX)
    }

    fn pending(&self) -> bool {
        self.since.is_some()
    }

    fn clear(&mut self) {
        self.since = None;
    }

    /// When to look again while a burst is pending.
    fn wake_at(&self, quiet_for: Duration, now: Instant) -> Option<Instant> {
        let t = self.since?;
        Some(
            now + QUIET
                .saturating_sub(quiet_for)
                .max(Duration::from_millis(5))
                .min(QUIET_MAX.saturating_sub(now.saturating_duration_since(t))),
        )
    }
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
    run_fed_with(cfg, feed, base, shared, reloads, None, shutdown).await
}

/// [`run_fed`], with the link to the known-good edge (`None`: the component cannot be read, so
/// nothing is recorded).
pub(crate) async fn run_fed_with(
    cfg: Config,
    feed: Feed,
    base: Settings,
    shared: Arc<Shared>,
    reloads: reload::Handle,
    known_good: Option<Link>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let mut source = Source::new(&cfg.watch, Some(&cfg.annotations))?;
    let resync = cfg.resync;
    let absent = format!("{} is absent", cfg.watch.display());
    // The API feed needs no volume; only the annotations dir is watched for it.
    let volume = matches!(feed, Feed::Volume);
    let mut pipeline = Pipeline::open(cfg, feed, base, shared, reloads)
        .await?
        .with_known_good(known_good);
    // The annotations were read by `open`, after the watches were in place: a change since is an event.
    let mut changes = Changes::CONFIG;
    let mut debounce = Debounce::default();
    // The safety re-read is a deadline: liveness pings and other wake-ups must not postpone it.
    let mut resync_at = Instant::now() + resync;
    // The watch's problem last told to the gate: an unchanged one is not told again, so a wake-up
    // that changed nothing (a liveness ping) hands the gate nothing and rebuilds no status.
    let mut told: Option<Option<String>> = None;
    tokio::pin!(shutdown);
    loop {
        // A file still open for writing (truncated, then written in chunks, as `cp` or `cat >` do)
        // is never read: whatever asked for a read waits, as a plain edit does, until it is closed.
        let writing = source.writing();
        pipeline.set_writing(writing.is_some());
        if pipeline.take_settled(Instant::now()) {
            changes |= Changes::CONFIG;
        }
        if (changes.contains(Changes::PLAIN) && !changes.contains(Changes::CONFIG))
            || (writing.is_some() && changes.contains(Changes::CONFIG))
        {
            debounce.plain_event(Instant::now());
        }
        let files = Files {
            annotations: changes.contains(Changes::ANNOTATIONS),
            config: writing.is_none()
                && (changes.contains(Changes::CONFIG)
                    || debounce.ready(source.since_plain_event(), Instant::now())),
        };
        if files.config {
            debounce.clear();
        }
        if files != Files::default() {
            pipeline.handle(Event::Files(files)).await;
        }
        let watched = source.ensure_watches() || !volume;
        let unsettled = writing
            .as_ref()
            .filter(|(_, t)| *t >= SETTLE_MAX)
            .map(|(name, t)| {
                format!(
                    "{} has been open for writing for {}s and is not read until it is closed; a \
                 writer should write a new file and rename it over the old one",
                    crate::listing::one_line(name),
                    t.as_secs()
                )
            });
        let problem = match (&source.watch_error, watched) {
            (Some(e), _) => Some(e.clone()),
            (None, false) => Some(absent.clone()),
            (None, true) => unsettled,
        };
        let errors = source.take_errors();
        if errors > 0 || told.as_ref() != Some(&problem) {
            told = Some(problem.clone());
            pipeline.handle(Event::Watch { errors, problem }).await;
        }
        pipeline.publish();
        let mut wake = resync_at;
        if !watched {
            wake = wake.min(Instant::now() + ABSENT_POLL);
        }
        match &writing {
            // Woken by its close; or when it has been open too long, to say so.
            Some((_, t)) if *t < SETTLE_MAX => wake = wake.min(Instant::now() + (SETTLE_MAX - *t)),
            Some(_) => {}
            None => {
                if let Some(t) = debounce.wake_at(source.since_plain_event(), Instant::now()) {
                    wake = wake.min(t);
                }
            }
        }
        if let Some(t) = pipeline.wake_at() {
            wake = wake.min(t);
        }
        if let Some(t) = pipeline.settle_at() {
            wake = wake.min(t);
        }
        changes = tokio::select! {
            c = source.changed() => c,
            input = pipeline.input() => {
                if let Some(event) = input {
                    pipeline.handle(event).await;
                }
                Changes::default()
            }
            () = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                pipeline.set_writing(source.writing().is_some());
                if (now >= resync_at || !watched) && source.writing().is_some() {
                    // The safety re-read waits for the close, as any read does.
                    resync_at = now + resync;
                    debounce.plain_event(now);
                    Changes::default()
                } else if now >= resync_at || !watched {
                    resync_at = now + resync;
                    debounce.clear();
                    pipeline.handle(Event::Resync).await;
                    Changes::default()
                } else {
                    pipeline.handle(Event::Timer).await;
                    if debounce.pending() {
                        Changes::CONFIG
                    } else {
                        Changes::default()
                    }
                }
            }
            () = &mut shutdown => break,
        };
    }
    info!("decision loop stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_is_read_once_quiet_or_at_most_a_second_after_it_began() {
        let t0 = Instant::now();
        let mut d = Debounce::default();
        assert!(!d.pending() && !d.ready(QUIET, t0));
        assert_eq!(d.wake_at(Duration::ZERO, t0), None);
        d.plain_event(t0);
        // More events of the same burst do not move its start.
        d.plain_event(t0 + 50 * MS);
        assert!(!d.ready(Duration::ZERO, t0 + 50 * MS));
        assert_eq!(d.wake_at(Duration::ZERO, t0 + 50 * MS), Some(t0 + 150 * MS));
        assert!(!d.ready(99 * MS, t0 + 149 * MS));
        assert!(d.ready(QUIET, t0 + 150 * MS), "quiet for long enough");
        // A burst that never goes quiet is read a second after it began.
        assert_eq!(
            d.wake_at(Duration::ZERO, t0 + 950 * MS),
            Some(t0 + QUIET_MAX)
        );
        assert!(!d.ready(Duration::ZERO, t0 + 999 * MS));
        assert!(d.ready(Duration::ZERO, t0 + QUIET_MAX));
        // Never a busy loop: at least a few milliseconds between looks.
        assert_eq!(d.wake_at(QUIET, t0 + 200 * MS), Some(t0 + 205 * MS));
        d.clear();
        assert!(!d.pending());
    }
}
