//! [`Pipeline`]: the I/O around the pure [`Gate`]. It hands each event to [`Gate::handle`] and
//! carries out the actions that come back: reads, promotions, reload requests, markers, metrics and
//! logs. The only writer of the published status.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::{info, warn};

use super::feed::{off_loop, snapshot_changed, source_changed};
use super::logs::{self, Places};
use super::machine::{
    Action, Count, Event, Files, Found, Gate, Now, ReloadRequest, RollbackFailure, RolloutSeen,
    Seen,
};
use super::{Config, Error, Feed};
use crate::annotations;
use crate::promote::{self, Promoter, Switched};
use crate::reload::{self, BootTicks};
use crate::rollout;
use crate::settings::Settings;
use crate::snapshot::ContentHash;
use crate::snapshot::{self, Observed};
use crate::state::{Publisher, RolloutView, Shared};
use crate::verdict;

/// The loop's I/O around the `Gate`, without the waiting: `run_fed` drives it from file events;
/// tests drive it directly. The only writer of the published status: the reload worker and the
/// API source report to it as messages.
pub struct Pipeline {
    cfg: Config,
    feed: Feed,
    gate: Gate,
    promoter: Option<Promoter>,
    /// What the promoted dir held when opened, until the gate adopts it.
    found: Option<Observed>,
    shared: Arc<Shared>,
    publisher: Publisher,
    reloads: reload::Handle,
    /// A promotion's switch, until the gate says to finish it.
    switched: Option<Switched>,
    /// The rollout in the newest config, as this pod sees it (shown in the status).
    rollout: Option<RolloutView>,
    /// Judge the next read even if it is what was last judged: the component refused a rollout's
    /// candidate, which the same ConfigMap now holds back on this pod.
    rejudge: bool,
    /// Whether the last config read was small ([`is_small`]): the next is then read on the loop.
    small_before: bool,
}

impl Pipeline {
    /// Opens the promoted dir (cleaning leftovers), reads the annotations, adopts what is already
    /// promoted (judged off the loop, as `off_loop` does), and takes the status publisher (`Err` when
    /// another loop holds it).
    pub async fn open(
        cfg: Config,
        feed: Feed,
        base: Settings,
        shared: Arc<Shared>,
        reloads: reload::Handle,
    ) -> Result<Pipeline, Error> {
        let publisher = shared.publisher().ok_or(Error::Publisher)?;
        let (promoter, found) = match &cfg.promote_to {
            Some(dir) => {
                let (p, found) = Promoter::open(dir)?;
                (Some(p), Some(found))
            }
            None => (None, None),
        };
        let gate = Gate::new(base, promoter.is_none())
            .with_annotations_file(&cfg.annotations)
            .with_bucket(cfg.bucket);
        let read = annotations::read(&cfg.annotations);
        let mut p = Pipeline {
            cfg,
            feed,
            gate,
            promoter,
            found,
            shared,
            publisher,
            reloads,
            switched: None,
            rollout: None,
            rejudge: false,
            small_before: false,
        };
        p.handle(Event::Start(read)).await;
        p.publish();
        Ok(p)
    }

    /// Re-reads the annotations file (and, when the settings in force changed, the config, to
    /// re-judge it under them). Returns true when they changed.
    ///
    /// A file that existed and is now absent or unreadable keeps the settings in force for
    /// `ANNOTATIONS_GRACE`; only a lasting absence changes them, and it is reported in the
    /// settings check.
    pub async fn annotations_changed(&mut self) -> bool {
        let before = self.gate.settings().clone();
        self.handle(Event::Files(Files {
            annotations: true,
            config: false,
        }))
        .await;
        *self.gate.settings() != before
    }

    /// Reads the newest snapshot and acts on it; identical input under unchanged settings is skipped.
    pub async fn process(&mut self) {
        self.handle(Event::Files(Files::CONFIG)).await;
    }

    /// Hands `event` to the gate and carries out what it answers, depth first: an action's own
    /// answer is handled before the next action.
    pub(crate) async fn handle(&mut self, event: Event) {
        let refused = matches!(event, Event::Reload(reload::Outcome::Rejected { .. }));
        self.run(event, |_| {}).await;
        // A rollout's candidate refused here: the same ConfigMap now gives this pod its stable set.
        if refused && self.rollout.is_some() {
            self.rejudge = true;
            self.run(Event::Files(Files::CONFIG), |_| {}).await;
        }
    }

    /// [`Pipeline::handle`], calling `at_yield` where a promotion lets the reload worker go first.
    async fn run(&mut self, event: Event, mut at_yield: impl FnMut(&Pipeline)) {
        let mut stack = vec![self.gate.handle(event, now()).into_iter()];
        while let Some(top) = stack.last_mut() {
            let Some(action) = top.next() else {
                stack.pop();
                continue;
            };
            let yielding = matches!(action, Action::Yield);
            if let Some(answer) = self.execute(action).await {
                stack.push(self.gate.handle(answer, now()).into_iter());
            }
            if yielding {
                at_yield(self);
            }
        }
    }

    /// Carries out one action; an action that reads or writes returns what it found or did.
    async fn execute(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Adopt { settings } => return self.adopt(*settings).await,
            Action::ReadAnnotations => {
                return Some(Event::Annotations(annotations::read(&self.cfg.annotations)));
            }
            Action::Judge { settings, unless } => return self.judge(*settings, unless).await,
            Action::RejudgeActive { settings } => {
                let dir = self.promoter.as_ref()?.dir().to_path_buf();
                let (on_disk, j) = off_loop(&self.shared, move || {
                    let on_disk = snapshot::read(&dir);
                    let j = verdict::judge(&on_disk, &settings);
                    (on_disk, j)
                })
                .await;
                return Some(Event::Rejudged(on_disk, j));
            }
            Action::Switch {
                snapshot,
                owe_reload,
                keep_baseline,
            } => {
                let r = match &self.promoter {
                    Some(p) => p.switch(&snapshot, owe_reload, keep_baseline).map(|s| {
                        self.switched = Some(s);
                    }),
                    None => Ok(()),
                };
                return Some(Event::Switched(
                    r.map(|()| BootTicks::now()).map_err(|e| e.to_string()),
                ));
            }
            Action::JudgeBase { settings } => {
                let p = self.promoter.as_ref()?;
                let base = p
                    .applied()
                    .map(|(obs, _)| obs)
                    .unwrap_or_else(|| Observed::Missing("no applied config is kept".into()));
                let (base, j) = off_loop(&self.shared, move || {
                    let j = verdict::judge(&base, &settings);
                    (base, j)
                })
                .await;
                return Some(Event::BaseJudged(base, j));
            }
            Action::RollBack => {
                let r = self.promoter.as_ref()?.roll_back();
                return Some(Event::RolledBack(match r {
                    Ok(now) => Ok((now, BootTicks::now())),
                    Err(e @ promote::Error::NoApplied { .. }) => {
                        Err(RollbackFailure::NoBase(e.to_string()))
                    }
                    Err(e) => Err(RollbackFailure::Failed(e.to_string())),
                }));
            }
            Action::AdoptBaseline => {
                if let Some(p) = &self.promoter
                    && let Err(e) = p.adopt_baseline()
                {
                    warn!(error = %e, "the first config's dir could not be kept as the rollback base");
                }
            }
            // Any reload (a promotion's, a rollback's, one owed) is on the wire before the loop goes on
            // to publish a status that says it was made.
            Action::Reload(r) => {
                self.request(r);
                yield_to_worker().await;
            }
            // The reload worker, on this thread, sends the request before the loop logs, counts and
            // removes the old dir: none of that is needed for the component to read the new config.
            // One yield is not enough for that: see `YIELDS`.
            Action::Yield => yield_to_worker().await,
            Action::FinishSwitch => {
                if let (Some(p), Some(s)) = (&self.promoter, self.switched.take()) {
                    p.finish(s);
                }
            }
            Action::MarkApplied { sha, version } => {
                let Some(p) = &self.promoter else { return None };
                match p.mark_applied() {
                    Ok(()) => {
                        info!(sha = %sha.short(), version = version.as_deref().unwrap_or(""), "applied by the component")
                    }
                    Err(e) => {
                        warn!(error = %e, sha = %sha.short(), "applied, but keeping it for a rollback failed")
                    }
                }
            }
            Action::RecordRejected(entries) => {
                if let (Some(p), Some((sha, _))) = (&self.promoter, entries.last())
                    && let Err(e) = p.record_rejected(&entries)
                {
                    warn!(error = %e, sha = %sha.short(), "cannot record the refusal in the promoted dir; a restart would offer it again");
                }
            }
            Action::MarkReloadOwed(sha) => {
                if let Some(p) = &self.promoter
                    && let Err(e) = p.mark_reload_owed(sha)
                {
                    warn!(error = %e, sha = %sha.short(), "cannot record the rollback's reload as owed; a restart would not send it");
                }
            }
            Action::ClearReloadOwed { sha, refused } => {
                if let Some(p) = &self.promoter
                    && let Err(e) = p.clear_reload_owed(sha)
                {
                    if refused {
                        warn!(error = %e, sha = %sha.short(), "cannot clear the reload-owed marker of refused content");
                    } else {
                        warn!(error = %e, sha = %sha.short(), "cannot clear the reload-owed marker; a restart will reload again");
                    }
                }
            }
            Action::Tidy => {
                if let Some(p) = &self.promoter
                    && p.needs_tidy()
                    && let Err(e) = p.tidy()
                {
                    warn!(error = %e, dir = %p.dir().display(), "tidying the promoted dir failed; will retry");
                }
            }
            Action::Count(c) => {
                let m = &self.shared.metrics;
                match c {
                    Count::Candidate(v) => m.candidate(v),
                    Count::Promoted(at) => m.promoted(at.as_millisecond() as f64 / 1000.0),
                    Count::PromotionFailed => m.promotion_failed(),
                    Count::WatchErrors(n) => {
                        (0..n).for_each(|_| m.watch_error(crate::metrics::WatchSource::Files))
                    }
                }
            }
            Action::Log(note) => logs::log(
                &note,
                &Places {
                    annotations: &self.cfg.annotations,
                    watch: &self.cfg.watch,
                    promoted: self.promoter.as_ref().map(Promoter::dir),
                },
            ),
        }
        None
    }

    /// What a previous run left in the promoted dir, judged off the loop.
    async fn adopt(&mut self, settings: Settings) -> Option<Event> {
        let on_disk = self.found.take()?;
        let p = self.promoter.as_ref()?;
        let judged = settings.clone();
        let (on_disk, judgement) = off_loop(&self.shared, move || {
            let j = verdict::judge(&on_disk, &judged);
            (on_disk, j)
        })
        .await;
        if let Some(h) = on_disk.hash() {
            info!(dir = %p.dir().display(), sha = %h.short(), "promoted dir already holds a config");
        }
        // What the component did before the restart: what it refused is not offered again, and what
        // it applied is the rollback base again.
        let refused = p.rejected();
        if let Some(why) = &refused.ignored {
            warn!(problem = %why, "the record of contents the component refused is damaged; ignoring what cannot be read");
        }
        if !refused.entries.is_empty() {
            info!(
                count = refused.entries.len(),
                "contents the component refused before the restart are not offered again"
            );
        }
        let applied = match p.applied() {
            Some((applied, since)) => {
                let (applied, j) = off_loop(&self.shared, move || {
                    let j = verdict::judge(&applied, &settings);
                    (applied, j)
                })
                .await;
                Some((applied, j, since))
            }
            None => None,
        };
        Some(Event::Adopted(Box::new(Found {
            on_disk,
            judgement,
            refused: refused.entries,
            applied,
            owed: p.reload_owed(),
        })))
    }

    /// Reads the newest snapshot (the volume, or the feed's) and judges it, unless it is what was last
    /// judged. After a small config ([`is_small`]) the next is read, and when small again judged, on
    /// the loop itself: two thread hand-offs fewer between the `..data` swap and the reload, which is
    /// most of the reaction time on a busy node. Otherwise, and whenever content rules are in force,
    /// the work runs off the loop ([`off_loop`]), so that a large config cannot hold up `/livez`.
    async fn judge(&mut self, settings: Settings, unless: Option<Seen>) -> Option<Event> {
        let fed = match &self.feed {
            Feed::Volume => None,
            Feed::Channel { snapshots, .. } => Some(snapshots.borrow().clone()?),
        };
        let (watch, bucket) = (self.cfg.watch.clone(), self.cfg.bucket);
        let unless = unless.filter(|_| !std::mem::take(&mut self.rejudge));
        // A candidate the component refused is held on this pod: the rollout falls back to stable.
        let refused: Vec<ContentHash> = self
            .gate
            .rejected_record()
            .iter()
            .map(|(h, _)| *h)
            .collect();
        let read = move || fed.unwrap_or_else(|| snapshot::read(&watch));
        let rules = !settings.rules.is_empty();
        let (seen, choice) = if self.small_before {
            let obs = read();
            self.small_before = is_small(&obs);
            let seen = Seen::of(&obs);
            if unless.as_ref() == Some(&seen) {
                (seen, None)
            } else if self.small_before && !rules {
                (
                    seen,
                    Some(rollout::choose(obs, &settings, bucket, &refused)),
                )
            } else {
                let choice = off_loop(&self.shared, move || {
                    rollout::choose(obs, &settings, bucket, &refused)
                })
                .await;
                (seen, Some(choice))
            }
        } else {
            let (seen, small, choice) = off_loop(&self.shared, move || {
                let obs = read();
                let (seen, small) = (Seen::of(&obs), is_small(&obs));
                // Identical input under unchanged settings: nothing to judge.
                if unless.as_ref() == Some(&seen) {
                    return (seen, small, None);
                }
                let choice = rollout::choose(obs, &settings, bucket, &refused);
                (seen, small, Some(choice))
            })
            .await;
            self.small_before = small;
            (seen, choice)
        };
        let mut rollout = RolloutSeen::default();
        let choice = choice.map(|(choice, view)| {
            if let Some(v) = &view {
                rollout.held.clone_from(&v.held);
                rollout.candidate = v
                    .candidate_sha256
                    .filter(|_| v.track == crate::state::Track::Candidate);
            }
            self.rollout_seen(view);
            choice
        });
        Some(Event::Judged {
            seen,
            choice,
            rollout,
        })
    }

    /// Keeps the rollout as this pod now sees it, with a log line when that changes.
    fn rollout_seen(&mut self, view: Option<RolloutView>) {
        if view != self.rollout {
            match &view {
                Some(r) => {
                    let held = r.held.as_ref();
                    info!(
                        percent = r.percent.as_deref().unwrap_or(""),
                        bucket = r.bucket.as_deref().unwrap_or(""),
                        assigned = r.assigned.as_str(),
                        track = r.track.as_str(),
                        keys = %r.keys,
                        held_verdict = held.map(|h| h.verdict.as_str()).unwrap_or(""),
                        held_version = held.and_then(|h| h.version.as_deref()).unwrap_or(""),
                        reason = %r.reason,
                        "rollout"
                    )
                }
                None if self.rollout.is_some() => {
                    info!("rollout over: no rollout key in the config")
                }
                None => {}
            }
        }
        self.rollout = view;
    }

    /// Sends a reload (or start-up check) to the worker, with the confirmation it carries.
    fn request(&mut self, r: ReloadRequest) {
        self.reloads.set_confirm(r.confirm);
        let sha = r.sha.short();
        // The request first: the worker's thread sends it while this one writes the log line (a
        // write to stderr, which can block on a slow log pipe).
        self.reloads
            .request_promoted_at(r.kind, &r.target, r.sha, r.version, r.promoted_at);
        match r.kind {
            reload::Kind::Reload => {
                info!(reload_target = %r.target, sha, "reload requested")
            }
            reload::Kind::Startup { .. } => {
                info!(reload_target = %r.target, sha, "start-up check requested: does the component run the first config?")
            }
        }
    }

    /// Waits for input other than file events: the feed, the API source's view, the reload worker,
    /// a liveness ping (answered here: `None`). Cancel-safe, so the driver can select on it.
    pub(crate) async fn input(&mut self) -> Option<Event> {
        let Pipeline {
            feed,
            reloads,
            shared,
            ..
        } = self;
        let (snapshots, source) = match feed {
            Feed::Volume => (None, None),
            Feed::Channel { snapshots, source } => (Some(snapshots), Some(source)),
        };
        tokio::select! {
            () = snapshot_changed(snapshots) => Some(Event::Files(Files::CONFIG)),
            view = source_changed(source) => Some(Event::Source(view)),
            Some(o) = reloads.outcome() => Some(Event::Reload(o)),
            () = shared.pinged() => {
                shared.pong();
                None
            }
        }
    }

    /// When the gate waits for a deadline of its own ([`Event::Timer`]).
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        self.gate.wake_at()
    }

    /// Publishes the status for the server, `wait`, metrics and the pod reporter.
    pub(crate) fn publish(&self) {
        let mut status = self.gate.published(self.reloads.requested());
        status.rollout.clone_from(&self.rollout);
        self.publisher.publish(status);
    }
}

/// How often the loop yields to the reload worker after requesting a reload. The worker runs at the
/// first, and hands the request to the HTTP client, whose connection task writes it: that task is
/// woken through the runtime's shared queue, which the scheduler looks at after the loop has run
/// again. With one yield the POST went out only once the loop had logged, tidied and gone idle
/// (measured: 1.5 ms after the `..data` swap on a loaded machine); with four it goes out right after
/// the swap. Each yield that finds nothing to run costs a non-blocking `epoll_wait`.
const YIELDS: usize = 4;

/// Lets the reload worker, and the HTTP client's connection task, write a request just made.
async fn yield_to_worker() {
    for _ in 0..YIELDS {
        tokio::task::yield_now().await;
    }
}

/// The most bytes, and keys, of a config read and judged on the loop itself: reading and judging
/// that much takes well under a millisecond, against up to 1 MiB in 8192 keys for a ConfigMap.
const SMALL_BYTES: usize = 64 << 10;
const SMALL_KEYS: usize = 64;

/// Whether `obs` is small enough to be read and judged on the loop ([`SMALL_BYTES`], [`SMALL_KEYS`]).
/// A missing or broken config is: nothing of it was judged.
fn is_small(obs: &Observed) -> bool {
    match obs {
        Observed::Config(s) => {
            s.files().len() <= SMALL_KEYS
                && s.files().values().map(Vec::len).sum::<usize>() <= SMALL_BYTES
        }
        _ => true,
    }
}

fn now() -> Now {
    Now {
        at: Instant::now(),
        wall: jiff::Timestamp::now(),
    }
}

#[cfg(test)]
mod tests;
