//! [`Pipeline`]: the I/O around the pure [`Gate`]. It hands each event to [`Gate::handle`] and
//! carries out the actions that come back: reads, promotions, reload requests, markers, metrics and
//! logs. The only writer of the published status.
//!
//! It gets its `Feed` (the volume, or the API source's channels) when opened, takes the status's
//! one `Publisher`, and holds a switch's `Switched` token until the gate says to finish it. After a
//! promotion the gate answers the switch with the reload request, then `Action::Yield`, then its
//! logs, metrics and `FinishSwitch`: the request is on its way before any bookkeeping, and the
//! pipeline logs it only once it is. A status is built only after the gate was handed something, so
//! a liveness ping rebuilds none.
//!
//! What runs where: reading and judging, the promoted dir's opening and adoption, rollbacks,
//! markers, tidying and the annotations read run on the blocking pool (`off_loop`,
//! `Pipeline::on_dir`), one at a time in the gate's order, while the loop answers pings. The
//! `validate` checker runs there in the background: its answer is an input, and
//! `Action::CancelCheck` ends it when a newer snapshot supersedes its candidate. A small config after a small one (the gate remembers, `is_small`, and says so in
//! `Action::Judge` and `Action::Switch`) is read, judged when no content rule is in force, switched
//! and tidied on the loop itself: two thread hand-offs fewer per reaction. The checker's candidate
//! is staged and unstaged (`Promoter::stage`, `unstage`) on the blocking pool, in the check's task.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::config::Config;
use super::error::Error;
use super::feed::{Feed, off_loop, snapshot_changed, source_changed};
use super::known_good::{Answer, Ask, Link};
use super::logs::{self, Places};
use super::machine::{
    Action, AppliedBy, Count, Event, Files, Found, Gate, Now, ReloadRequest, RollbackFailure,
    SMALL_BYTES, SMALL_KEYS, Seen, held_refusals, is_small,
};
use crate::annotations;
use crate::known_good::{ComponentRead, Entry, Line, Recorded};
use crate::promote::{self, Promoter, Switched};
use crate::reload::{self, BootTicks, Refusal};
use crate::rollout::{self, Bucket};
use crate::settings::Settings;
use crate::snapshot::ContentHash;
use crate::snapshot::{self, Observed};
use crate::state::{Publisher, Shared};
use crate::verdict;

/// The kind of source the loop reads, for the words of each reason's fix: through the API, the
/// object's kind; a volume with the kubelet's `..data` is a ConfigMap's or (`--content secret`, which
/// sealed the hashes) a Secret's; any other directory is plain files on the node (a hostPath).
fn source_kind(feed: &Feed, watch: &std::path::Path) -> verdict::fix::Source {
    use verdict::fix::Source;
    let secret = snapshot::sealed();
    match feed {
        Feed::Channel { .. } if secret => Source::ApiSecret,
        Feed::Channel { .. } => Source::ApiConfigMap,
        Feed::Volume if std::fs::symlink_metadata(watch.join(snapshot::DATA_LINK)).is_err() => {
            Source::PlainDir
        }
        Feed::Volume if secret => Source::SecretVolume,
        Feed::Volume => Source::ConfigMapVolume,
    }
}

/// The settings the promoted dir's record of the annotations' values last in force puts in force
/// over `base` (each value checked again as an annotation), and the values used; what was not used
/// is logged, never fatal.
fn last_in_force(
    base: &Settings,
    record: Result<annotations::Annotations, String>,
) -> (Settings, annotations::Annotations) {
    let record = record.unwrap_or_else(|why| {
        warn!(problem = %why, "the record of the settings in force is not one confgate wrote; not trusted");
        annotations::Annotations::new()
    });
    let (settings, used, unused) = Settings::last_in_force(base, &record);
    for why in unused {
        warn!(problem = %why, "a value in the record of the settings in force is not used; a bad annotation of it falls back to the flag's value");
    }
    for (annotation, value) in &used {
        info!(annotation = %annotation, value = %value, "setting last in force before the restart, kept where its annotation is bad");
    }
    (settings, used)
}

/// How long a plain dir's newest change must be past before it is read: the driver's quiet period
/// for plain edits, applied by the files' change times, so a read asked for by a timer or a settings
/// change while a writer pauses mid-file waits too.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

/// The loop's I/O around the `Gate`, without the waiting: `run_fed` drives it from file events;
/// tests drive it directly. The only writer of the published status: the reload worker and the
/// API source report to it as messages.
pub struct Pipeline {
    cfg: Config,
    feed: Feed,
    gate: Gate,
    /// Shared with the blocking pool, where its file work runs ([`Pipeline::on_dir`]).
    promoter: Option<Arc<Promoter>>,
    /// What the promoted dir held when opened, until the gate adopts it.
    found: Option<Observed>,
    shared: Arc<Shared>,
    publisher: Publisher,
    reloads: reload::Handle,
    /// A promotion's switch, until the gate says to finish it.
    switched: Option<Switched>,
    /// The component's checker running on a staged candidate, until it answers or is cancelled.
    check: Option<Running>,
    /// A file of the watched dir is open for writing (the driver's watch says so): the dir is not
    /// read, whatever asks for it, until it is closed.
    writing: bool,
    /// A read was put off because a plain dir's file changed less than [`SETTLE`] ago: when it may be
    /// made, which the driver turns into a read of the config.
    settling: Option<Instant>,
    /// The known-good edge's link (`None`: the component cannot be read).
    known_good: Option<Link>,
    /// Whether anything was handed to the gate since the last [`Pipeline::publish`]: only then can
    /// the status differ, so a liveness ping does not rebuild it.
    dirty: bool,
    /// How many statuses were built, for the tests.
    #[cfg(test)]
    built: u64,
}

impl Drop for Pipeline {
    /// A check still running when the loop stops is ended with what it started, not left to its
    /// time bound.
    fn drop(&mut self) {
        if let Some(running) = &self.check {
            running.cancel.cancel();
        }
    }
}

/// A check under way on the blocking pool.
struct Running {
    sha: ContentHash,
    cancel: crate::validate::Cancel,
    task: tokio::task::JoinHandle<crate::validate::Checked>,
}

/// The answer of the check under way, once it comes (never, when none runs); the check is then over.
async fn check_answered(check: &mut Option<Running>) -> (ContentHash, crate::validate::Checked) {
    let Some(running) = check.as_mut() else {
        return std::future::pending().await;
    };
    let checked = match (&mut running.task).await {
        Ok(c) => c,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Only when the runtime shuts down, which drops this task too.
            Err(_) => std::future::pending().await,
        },
    };
    let sha = running.sha;
    *check = None;
    (sha, checked)
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
        // The cleanup of the promoted dir and the annotations read, off the thread the server's
        // `/livez` runs on: the port answers while a slow disk holds them up.
        let (dir, file) = (cfg.promote_to.clone(), cfg.annotations.clone());
        let (opened, read, record) = off_loop(&shared, move || {
            let opened = dir
                .as_deref()
                .map(|d| {
                    Promoter::open(d).map_err(|source| Error::PromoteTo {
                        path: d.to_path_buf(),
                        source,
                    })
                })
                .transpose();
            // The annotations' values in force before a restart, for a bad annotation to keep.
            let record = match &opened {
                Ok(Some((p, _))) => p.settings_in_force(),
                _ => Ok(Default::default()),
            };
            (opened, annotations::read(&file), record)
        })
        .await;
        let (promoter, found) = match opened? {
            Some((p, found)) => (Some(Arc::new(p)), Some(found)),
            None => (None, None),
        };
        let (in_force, values) = last_in_force(&base, record);
        let source_kind = source_kind(&feed, &cfg.watch);
        let gate = Gate::new(base, promoter.is_none())
            .with_last_in_force(in_force, values)
            .with_source_kind(source_kind)
            .with_secret_content(snapshot::sealed())
            .with_annotations_file(&cfg.annotations)
            .with_bucket(cfg.bucket);
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
            check: None,
            writing: false,
            settling: None,
            known_good: None,
            dirty: true,
            #[cfg(test)]
            built: 0,
        };
        p.handle(Event::Start(read)).await;
        p.publish();
        Ok(p)
    }

    /// Links the loop to the known-good edge, which reads the component's containers and writes the
    /// record.
    pub(crate) fn with_known_good(mut self, link: Option<Link>) -> Pipeline {
        self.known_good = link;
        self
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
        self.run(event, |_| {}).await;
    }

    /// [`Pipeline::handle`], calling `at_yield` where a promotion lets the reload worker go first.
    async fn run(&mut self, event: Event, mut at_yield: impl FnMut(&Pipeline)) {
        self.dirty = true;
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
                let file = self.cfg.annotations.clone();
                let read = off_loop(&self.shared, move || annotations::read(&file)).await;
                return Some(Event::Annotations(read));
            }
            Action::Judge {
                settings,
                unless,
                anew,
                bucket,
                refused,
                on_loop,
            } => {
                if let Some(why) = anew {
                    debug!(why = ?why, "the newest config is judged again, whatever it reads as");
                }
                return self
                    .judge(*settings, unless, bucket, refused, on_loop)
                    .await;
            }
            Action::VerifyPromoted => {
                let dir = self.promoter.as_ref()?.dir().to_path_buf();
                let found = off_loop(&self.shared, move || snapshot::read(&dir)).await;
                return Some(Event::Verified(found));
            }
            Action::RejudgeActive { settings } => {
                let kind = source_kind(&self.feed, &self.cfg.watch);
                let dir = self.promoter.as_ref()?.dir().to_path_buf();
                let (on_disk, j) = off_loop(&self.shared, move || {
                    let on_disk = snapshot::read(&dir);
                    let j = verdict::judge_as(&on_disk, &settings, kind);
                    (on_disk, j)
                })
                .await;
                return Some(Event::Rejudged(on_disk, j));
            }
            Action::Switch {
                snapshot,
                owe_reload,
                variant,
                keep_baseline,
                on_loop,
            } => {
                let Some(p) = self.promoter.clone() else {
                    return Some(Event::Switched(Ok(BootTicks::now())));
                };
                // Anything but a small config after a small one is written on the blocking pool
                // while the loop answers pings.
                let r = if on_loop {
                    p.switch_variant(&snapshot, owe_reload, variant.as_deref(), keep_baseline)
                } else {
                    off_loop(&self.shared, move || {
                        p.switch_variant(&snapshot, owe_reload, variant.as_deref(), keep_baseline)
                    })
                    .await
                };
                let r = r.map(|s| self.switched = Some(s));
                return Some(Event::Switched(
                    r.map(|()| BootTicks::now()).map_err(promote::Failure::new),
                ));
            }
            Action::Validate {
                snapshot,
                check,
                timeout,
            } => {
                let sha = snapshot.hash();
                let promoter = self.promoter.clone()?;
                // Staged, checked and unstaged on the blocking pool while the loop goes on (writing
                // up to 1 MiB and removing the staged dir never hold the thread that answers
                // probes): the answer comes back as an input (`Pipeline::input`), and a newer
                // snapshot can end it meanwhile (`Action::CancelCheck`).
                let (cancel, inbox) = crate::validate::cancellable();
                let task = tokio::task::spawn_blocking(move || {
                    let checked = match promoter.stage(&snapshot) {
                        Ok(dir) => crate::validate::run(&check, &dir, timeout, inbox),
                        Err(e) => {
                            crate::validate::Checked::NotRun(format!("staging the candidate: {e}"))
                        }
                    };
                    promoter.unstage();
                    checked
                });
                self.check = Some(Running { sha, cancel, task });
            }
            Action::CancelCheck => {
                if let Some(running) = self.check.take() {
                    running.cancel.cancel();
                    // Ended (and unstaged, by the task) before the next candidate is staged in its
                    // place; the loop answers pings meanwhile.
                    let mut task = running.task;
                    loop {
                        tokio::select! {
                            _ = &mut task => break,
                            () = self.shared.pinged() => self.shared.pong(),
                        }
                    }
                }
            }
            Action::JudgeBase { settings } => {
                let kind = source_kind(&self.feed, &self.cfg.watch);
                // The applied config is read back and judged off the loop, like any candidate.
                let (base, j) = self
                    .on_dir(move |p| {
                        let base = p.applied().map(|(obs, _)| obs).unwrap_or_else(|| {
                            Observed::Missing(crate::snapshot::Missing::NoApplied)
                        });
                        let j = verdict::judge_as(&base, &settings, kind);
                        (base, j)
                    })
                    .await?;
                return Some(Event::BaseJudged(base, j));
            }
            Action::RollBack => {
                let r = self.on_dir(Promoter::roll_back).await?;
                return Some(Event::RolledBack(match r {
                    Ok(now) => Ok((now, BootTicks::now())),
                    Err(e @ promote::Error::NoApplied { .. }) => {
                        Err(RollbackFailure::NoBase(promote::Failure::new(e)))
                    }
                    Err(e) => Err(RollbackFailure::Failed(promote::Failure::new(e))),
                }));
            }
            Action::AdoptBaseline => {
                if let Some(Err(e)) = self.on_dir(|p| p.adopt_baseline()).await {
                    warn!(error = %e, "the first config's dir could not be kept as the rollback base");
                }
            }
            // Any reload (a promotion's, a rollback's, one owed) is on its way before the loop goes
            // on to publish a status that says it was made, and to its logs and tidying: the worker
            // and the HTTP client's connection task run on this thread.
            Action::Reload(r) => {
                let ReloadRequest {
                    kind,
                    target,
                    confirm,
                    sha,
                    version,
                    promoted_at,
                } = r;
                self.reloads.set_confirm(confirm);
                self.reloads
                    .request_promoted_at(kind, &target, sha, version, promoted_at);
                self.on_its_way().await;
                // The log line after the request is on the wire: the worker runs on this thread,
                // so a line written first (formatting, a write to stderr that a slow log pipe can
                // block) would come between the promotion and the component's reload.
                match kind {
                    reload::Kind::Reload => {
                        info!(reload_target = %target, sha = sha.short(), "reload requested")
                    }
                    reload::Kind::Startup { .. } => {
                        info!(reload_target = %target, sha = sha.short(), "start-up check requested: does the component run the first config?")
                    }
                }
            }
            // The reload just requested is on its way already (`Action::Reload`).
            Action::Yield => {}
            Action::FinishSwitch { on_loop } => {
                if let (Some(p), Some(s)) = (self.promoter.clone(), self.switched.take()) {
                    if on_loop {
                        p.finish(s);
                    } else {
                        off_loop(&self.shared, move || p.finish(s)).await;
                    }
                }
            }
            Action::MarkApplied { sha, version, by } => {
                match self.on_dir(Promoter::mark_applied).await? {
                    Ok(()) => {
                        let (sha, version) = (sha.short(), version.as_deref().unwrap_or(""));
                        match by {
                            AppliedBy::Answer => {
                                info!(sha = %sha, version, "applied by the component: its reload endpoint answered success")
                            }
                            AppliedBy::Metrics => {
                                info!(sha = %sha, version, "applied by the component: its metrics confirmed the reload")
                            }
                            AppliedBy::SignalSent => {
                                info!(sha = %sha, version, "signal delivered; taken as applied, unconfirmed (set confgate.io/confirm to check the component's metrics)")
                            }
                            AppliedBy::Start => {
                                info!(sha = %sha, version, "taken as applied: the component read it at start, nothing to reload")
                            }
                        }
                    }
                    Err(e) => {
                        warn!(error = %e, sha = %sha.short(), "applied, but keeping it for a rollback failed")
                    }
                }
            }
            Action::RecordRejected(entries) => {
                let (sha, _) = *entries.last()?;
                let target = self.gate.settings().reload.clone();
                if let Err(e) = self
                    .on_dir(move |p| p.record_rejected(&target, &entries))
                    .await?
                {
                    warn!(error = %e, sha = %sha.short(), "cannot record the refusals in the promoted dir; a restart would not know them");
                }
            }
            Action::RecordSettings(values) => {
                if let Err(e) = self.on_dir(move |p| p.record_settings(&values)).await? {
                    warn!(error = %e, "cannot record the settings in force in the promoted dir; after a restart a bad annotation would fall back to the flag's value");
                }
            }
            Action::MarkReloadOwed(sha) => {
                if let Err(e) = self.on_dir(move |p| p.mark_reload_owed(sha)).await? {
                    warn!(error = %e, sha = %sha.short(), "cannot record the rollback's reload as owed; a restart would not send it");
                }
            }
            Action::ClearReloadOwed { sha, refused } => {
                if let Err(e) = self.on_dir(move |p| p.clear_reload_owed(sha)).await? {
                    if refused {
                        warn!(error = %e, sha = %sha.short(), "cannot clear the reload-owed marker of refused content");
                    } else {
                        warn!(error = %e, sha = %sha.short(), "cannot clear the reload-owed marker; a restart will reload again");
                    }
                }
            }
            Action::Tidy => {
                let tidied = self
                    .on_dir(|p| p.needs_tidy().then(|| p.tidy()).transpose())
                    .await?;
                if let (Err(e), Some(p)) = (tidied, &self.promoter) {
                    warn!(error = %e, dir = %p.dir().display(), "tidying the promoted dir failed; will retry");
                }
            }
            Action::ReadComponent => {
                let Some(link) = &self.known_good else {
                    return Some(Event::Component(ComponentRead::Unavailable(
                        "no Kubernetes client for the pod (no credentials, no POD_NAME/POD_NAMESPACE, or --pod-report off)".into(),
                    )));
                };
                if link.asks.send(Ask::Component).is_err() {
                    return Some(Event::Component(ComponentRead::Unavailable(
                        "the known-good task has stopped".into(),
                    )));
                }
            }
            Action::ReadKnownGood => {
                let sent = self
                    .known_good
                    .as_ref()
                    .is_some_and(|l| l.asks.send(Ask::Read).is_ok());
                if !sent {
                    return Some(Event::KnownGoodRead(Err(
                        "no Kubernetes client for the record (no credentials, no POD_NAME/POD_NAMESPACE, or --pod-report off)".into(),
                    )));
                }
            }
            Action::JudgeKnownGood { settings, configs } => {
                // Judged off the loop, like any candidate: content rules may cost.
                let judged = off_loop(&self.shared, move || {
                    configs
                        .into_iter()
                        .map(|s| {
                            let j = verdict::judge(&Observed::Config(s.clone()), &settings);
                            (s, j)
                        })
                        .collect()
                })
                .await;
                return Some(Event::KnownGoodJudged(judged));
            }
            Action::RecordKnownGood {
                sha,
                version,
                parsed,
            } => return self.record_known_good(sha, version, parsed).await,
            Action::Count(c) => {
                let m = &self.shared.metrics;
                match c {
                    Count::Candidate(v) => m.candidate(v),
                    Count::Promoted(at) => m.promoted(at.as_millisecond() as f64 / 1000.0),
                    Count::PromotionFailed => m.promotion_failed(),
                    Count::Repaired => m.repaired(),
                    Count::WatchErrors(n) => {
                        (0..n).for_each(|_| m.watch_error(crate::metrics::WatchSource::Files))
                    }
                }
            }
            Action::Notice(n) => self.publisher.notice(n),
            Action::Log(note) => logs::log(
                &note,
                &Places {
                    annotations: &self.cfg.annotations,
                    watch: &self.cfg.watch,
                    promoted: self.promoter.as_deref().map(Promoter::dir),
                },
            ),
        }
        None
    }

    /// Reads the applied config back from its kept dir and hands it to the known-good edge to record;
    /// answers at once only when it cannot be sent.
    async fn record_known_good(
        &mut self,
        sha: ContentHash,
        version: String,
        parsed: crate::values::SchemeVersion,
    ) -> Option<Event> {
        let failed = |why: String| Some(Event::Recorded(Recorded::Failed(why)));
        let applied = self
            .on_dir(|p| p.applied().map(|(obs, _)| obs))
            .await
            .flatten();
        let snap = match applied {
            Some(Observed::Config(s)) if s.hash() == sha => s,
            _ => return failed("the applied config's kept dir no longer holds it".into()),
        };
        let Some(link) = &self.known_good else {
            return failed("no Kubernetes client".into());
        };
        let Some(line) = Line::of(&parsed) else {
            return failed("a config of several files has no one version line to record".into());
        };
        let ask = Ask::Record {
            line,
            parsed,
            entry: Entry::of(&snap, &version),
        };
        if link.asks.send(ask).is_err() {
            return failed("the known-good task has stopped".into());
        }
        None
    }

    /// What a previous run left in the promoted dir, read and judged off the loop.
    async fn adopt(&mut self, settings: Settings) -> Option<Event> {
        let on_disk = self.found.take()?;
        let p = self.promoter.clone()?;
        let reload = settings.reload.clone();
        let kind = source_kind(&self.feed, &self.cfg.watch);
        let (on_disk, judgement, (refused, owed, variants), applied) =
            off_loop(&self.shared, move || {
                let judgement = verdict::judge_as(&on_disk, &settings, kind);
                // What the component did before the restart: what it refused is not offered again, and
                // what it applied is the rollback base again.
                let applied = p.applied().map(|(applied, since)| {
                    let j = verdict::judge_as(&applied, &settings, kind);
                    (applied, j, since)
                });
                let record = (p.rejected(), p.reload_owed(), p.variants());
                (on_disk, judgement, record, applied)
            })
            .await;
        let dir = self.promoter.as_ref()?.dir();
        if let Some(h) = on_disk.hash() {
            info!(dir = %dir.display(), sha = %h.short(), "promoted dir already holds a config");
        }
        if let Some(why) = &refused.ignored {
            warn!(problem = %why, "the record of contents the component refused is damaged; ignoring what cannot be read");
        }
        let recorded = refused.entries.len();
        let entries = held_refusals(&refused.target, refused.entries, &reload);
        if entries.len() < recorded {
            info!(
                count = recorded - entries.len(),
                "refusals recorded under another reload target, or answers that said the target was wrong, are not held against those contents"
            );
        }
        if !entries.is_empty() {
            info!(
                count = entries.len(),
                "contents the component refused before the restart are not offered again"
            );
        }
        Some(Event::Adopted(Box::new(Found {
            on_disk,
            judgement,
            refused: entries,
            applied,
            owed,
            variants,
        })))
    }

    /// Runs `work` on the promoted dir on the blocking pool, answering liveness pings meanwhile
    /// (`None` without a promoted dir). The loop waits for it: the dir's writes stay in order.
    async fn on_dir<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Promoter) -> T + Send + 'static,
    ) -> Option<T> {
        let p = self.promoter.clone()?;
        Some(off_loop(&self.shared, move || work(&p)).await)
    }

    /// Reads the newest snapshot (the volume, or the feed's) and judges it, unless it is what was last
    /// judged. With `on_loop` (the last config was small, [`is_small`]) the next is read, and when
    /// small again judged, on the loop itself: two thread hand-offs fewer between the `..data` swap
    /// and the reload, which is most of the reaction time on a busy node. Otherwise, and whenever
    /// content rules are in force, the work runs off the loop ([`off_loop`]), so that a large config
    /// cannot hold up `/livez`.
    async fn judge(
        &mut self,
        settings: Settings,
        unless: Option<Seen>,
        bucket: Option<Bucket>,
        refused: Vec<(ContentHash, Refusal)>,
        on_loop: bool,
    ) -> Option<Event> {
        // The rollout shows a refused candidate's reason: the refusals, worded.
        let refused: Vec<(ContentHash, String)> = refused
            .into_iter()
            .map(|(h, r)| (h, r.to_string()))
            .collect();
        // One look at `..data` tells the kind of source, and whether the settling check applies.
        let kind = source_kind(&self.feed, &self.cfg.watch);
        let fed = match &self.feed {
            // Half-written, maybe: the read waits for the close.
            Feed::Volume if self.writing => return None,
            Feed::Volume if kind == verdict::fix::Source::PlainDir => {
                if let Some(wait) = snapshot::settling(&self.cfg.watch, SETTLE) {
                    self.settling = Some(Instant::now() + wait);
                    return None;
                }
                None
            }
            Feed::Volume => None,
            Feed::Channel { snapshots, .. } => Some(snapshots.borrow().clone()?),
        };
        let watch = self.cfg.watch.clone();
        // After a small config the next is read on the loop when it is small too: the read stops
        // at the first entry or byte past the bounds, and a 1 MiB config after a small one is then
        // read off the loop, like any large one.
        let (here, fed) = match fed {
            Some(obs) if on_loop => (Some(obs), None),
            None if on_loop => (
                snapshot::read_small(&watch, SMALL_KEYS, SMALL_BYTES as u64),
                None,
            ),
            fed => (None, fed),
        };
        let read = move || fed.unwrap_or_else(|| snapshot::read(&watch));
        let rules = !settings.rules.is_empty();
        let (seen, small, choice) = if let Some(obs) = here {
            let (seen, small) = (Seen::of(&obs), is_small(&obs));
            if unless.as_ref() == Some(&seen) {
                (seen, small, None)
            } else if small && !rules {
                let choice = rollout::choose_as(obs, &settings, bucket, &refused, kind);
                (seen, small, Some(choice))
            } else {
                let choice = off_loop(&self.shared, move || {
                    rollout::choose_as(obs, &settings, bucket, &refused, kind)
                })
                .await;
                (seen, small, Some(choice))
            }
        } else {
            off_loop(&self.shared, move || {
                let obs = read();
                let (seen, small) = (Seen::of(&obs), is_small(&obs));
                // Identical input under unchanged settings: nothing to judge.
                if unless.as_ref() == Some(&seen) {
                    return (seen, small, None);
                }
                let choice = rollout::choose_as(obs, &settings, bucket, &refused, kind);
                (seen, small, Some(choice))
            })
            .await
        };
        let (choice, rollout) = choice.unzip();
        Some(Event::Judged {
            seen,
            choice: choice.map(Box::new),
            rollout: rollout.flatten(),
            small,
        })
    }

    /// Waits for the reload worker to have the request just made on its way
    /// ([`reload::Handle::on_its_way`]), answering liveness pings meanwhile.
    async fn on_its_way(&mut self) {
        let shared = self.shared.clone();
        let way = self.reloads.on_its_way();
        tokio::pin!(way);
        loop {
            tokio::select! {
                () = &mut way => return,
                () = shared.pinged() => shared.pong(),
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
            check,
            known_good,
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
            (sha, checked) = check_answered(check) => Some(Event::Validated { sha, checked }),
            Some(a) = known_good_answer(known_good.as_mut()) => Some(match a {
                Answer::Component(c) => Event::Component(c),
                Answer::Recorded(r) => Event::Recorded(r),
                Answer::Read(r) => Event::KnownGoodRead(r),
            }),
            () = shared.pinged() => {
                shared.pong();
                None
            }
        }
    }

    /// Whether a file of the watched dir is open for writing: while it is, no read of it is made
    /// (a read asked for meanwhile is made once it is closed, as the driver then asks for one).
    pub(crate) fn set_writing(&mut self, writing: bool) {
        self.writing = writing;
    }

    /// When a read put off until a plain dir settled may be made.
    pub(crate) fn settle_at(&self) -> Option<Instant> {
        self.settling
    }

    /// Whether a read put off until a plain dir settled is due at `now` (then it is no longer owed).
    pub(crate) fn take_settled(&mut self, now: Instant) -> bool {
        let due = self.settling.is_some_and(|t| t <= now);
        if due {
            self.settling = None;
        }
        due
    }

    /// When the gate waits for a deadline of its own ([`Event::Timer`]).
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        self.gate.wake_at()
    }

    /// Publishes the status for the server, `wait`, metrics and the pod reporter, when the gate
    /// was handed anything since the last time (nothing else changes what it shows).
    pub(crate) fn publish(&mut self) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        #[cfg(test)]
        {
            self.built += 1;
        }
        self.publisher
            .publish(self.gate.published(self.reloads.requested()));
    }
}

/// The known-good edge's next answer; never, without a link.
async fn known_good_answer(link: Option<&mut Link>) -> Option<Answer> {
    match link {
        Some(l) => l.answers.recv().await,
        None => std::future::pending().await,
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
