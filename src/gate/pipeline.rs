//! [`Pipeline`]: one step at a time of the loop, without the waiting. The only writer of the
//! published status.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::{Action, Config, Error, Gate, Tell};
use crate::annotations;
use crate::promote::{Promoter, Switched};
use crate::reload;
use crate::rollout;
use crate::settings::Settings;
use crate::snapshot::{self, ContentHash, Observed};
use crate::source::Changes;
use crate::state::{Publisher, ReloadResult, ReloadView, RolloutView, Shared, SourceView};
use crate::verdict::{self, Verdict};

/// After a failed promotion, when to try again.
const PROMOTE_RETRY: Duration = Duration::from_secs(1);
/// How long an annotations file that existed may be absent (or unreadable) before the settings it
/// gave are dropped: the downward-API volume swaps `..data` like any AtomicWriter volume, so a read
/// can miss the file for a moment.
pub const ANNOTATIONS_GRACE: Duration = Duration::from_secs(2);

/// Where the loop takes snapshots from.
#[derive(Debug, Clone, Default)]
pub enum Feed {
    /// Read [`Config::watch`] when the file watch says it changed (the kubelet volume).
    #[default]
    Volume,
    /// Another task's observations (the API source): the newest snapshot (`None` until it has one)
    /// and the source's own view (identity, watch health), reported to the loop for `/status`.
    Channel {
        snapshots: watch::Receiver<Option<Observed>>,
        source: watch::Receiver<Option<SourceView>>,
    },
}

/// What was last judged, to skip re-judging identical input. Holds no content.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Hash(ContentHash),
    Other(Observed),
}

fn seen(obs: &Observed) -> Seen {
    match obs {
        Observed::Config(s) => Seen::Hash(s.hash()),
        other => Seen::Other(other.clone()),
    }
}

/// Something for the loop other than a file event.
#[derive(Debug)]
pub(crate) enum Input {
    /// The feed holds a newer snapshot.
    Snapshot,
    /// The API source's view changed.
    Source(Option<SourceView>),
    /// The reload worker's outcome of an attempt.
    Reload(reload::Outcome),
    /// `/livez` asks whether the loop answers.
    Ping,
}

/// One step at a time of the loop, without the waiting: read, judge, promote, request a reload,
/// publish. `run_fed` drives it from file events; tests drive it directly. The only writer of the
/// published status: the reload worker and the API source report to it as messages.
pub struct Pipeline {
    cfg: Config,
    feed: Feed,
    gate: Gate,
    promoter: Option<Promoter>,
    shared: Arc<Shared>,
    publisher: Publisher,
    reloads: reload::Handle,
    /// What the reload worker reported (target and count are filled in when publishing).
    reload: ReloadView,
    source: Option<SourceView>,
    last: Option<Seen>,
    retry_at: Option<Instant>,
    watch_error: Option<String>,
    /// The reload requested and not yet done, to send again to a corrected target.
    owed: Option<Owed>,
    /// Whether the annotations file was read at least once (absent since start means none).
    annotations_existed: bool,
    /// Since when the annotations file that existed has been absent or unreadable, and why.
    annotations_missing: Option<(Instant, String)>,
    /// The rollout in the newest config, as this pod sees it.
    rollout: Option<RolloutView>,
}

/// A reload (or start-up check) requested and not yet done.
#[derive(Debug, Clone)]
struct Owed {
    kind: reload::Kind,
    sha: ContentHash,
    version: Option<String>,
    promoted_at: Option<reload::BootTicks>,
}

impl Pipeline {
    /// Opens the promoted dir (cleaning leftovers), reads the annotations, adopts what is already
    /// promoted (judged off the loop, as `off_loop` does), and takes the status publisher (`Err` when another
    /// loop holds it).
    pub async fn open(
        cfg: Config,
        feed: Feed,
        base: Settings,
        shared: Arc<Shared>,
        reloads: reload::Handle,
    ) -> Result<Pipeline, Error> {
        let publisher = shared.publisher().ok_or(Error::Publisher)?;
        let promoter = match &cfg.promote_to {
            Some(dir) => Some(Promoter::open(dir)?),
            None => None,
        };
        let mut gate = Gate::new(base, promoter.is_none());
        let before = gate.settings().clone();
        let ann = annotations::read(&cfg.annotations);
        let annotations_existed = matches!(ann, Ok(Some(_)));
        gate.set_annotations(ann.map(Option::unwrap_or_default));
        log_settings_change(&before, &[], &gate);
        let mut owed = None;
        let promoter = match promoter {
            None => None,
            Some((p, on_disk)) => {
                let now = jiff::Timestamp::now();
                let settings = gate.settings().clone();
                let (on_disk, j) = off_loop(&shared, move || {
                    let j = verdict::judge(&on_disk, &settings);
                    (on_disk, j)
                })
                .await;
                gate.adopt_on_disk(&on_disk, &j, now);
                if let Some(h) = on_disk.hash() {
                    info!(dir = %p.dir().display(), sha = %h.short(), "promoted dir already holds a config");
                }
                // What the component did before the restart: what it refused is not offered again, and
                // what it applied is the rollback base again.
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
                gate.adopt_rejected(refused.entries);
                if let Some((applied, since)) = p.applied() {
                    let settings = gate.settings().clone();
                    let (applied, j) = off_loop(&shared, move || {
                        let j = verdict::judge(&applied, &settings);
                        (applied, j)
                    })
                    .await;
                    gate.adopt_applied(&applied, &j, since.unwrap_or(now));
                    if let Some(h) = applied.hash() {
                        info!(sha = %h.short(), version = gate.applied_version().as_deref().unwrap_or(""), "the config the component applied before the restart is the rollback base");
                    }
                }
                // A reload owed by a previous run: the content is in place, the component was never told.
                if let (Some(h), Some(o)) = (on_disk.hash(), p.reload_owed())
                    && h == o
                {
                    if gate.is_rejected(h) {
                        // The refusal came after the marker was written; it is not sent again.
                        info!(sha = %h.short(), "the reload owed before the restart is of content the component refused; not sent");
                        if let Err(e) = p.clear_reload_owed(h) {
                            warn!(error = %e, sha = %h.short(), "cannot clear the reload-owed marker");
                        }
                    } else {
                        let version = j.version;
                        info!(sha = %h.short(), version = version.as_deref().unwrap_or(""), "a reload was owed before the restart; requesting it");
                        owed = Some(Owed {
                            kind: reload::Kind::Reload,
                            sha: h,
                            version,
                            // Every matching process: which ones started before the promotion is unknown now.
                            promoted_at: None,
                        });
                    }
                }
                Some(p)
            }
        };
        let mut p = Pipeline {
            cfg,
            feed,
            gate,
            promoter,
            shared,
            publisher,
            reloads,
            reload: ReloadView::default(),
            source: None,
            last: None,
            retry_at: None,
            watch_error: None,
            owed,
            annotations_existed,
            annotations_missing: None,
            rollout: None,
        };
        // Stopped between recording a refusal and rolling back: the rollback is finished now (and
        // its reload requested).
        if let Some((refused, base)) = p.gate.refused_in_place() {
            warn!(sha = %refused.short(), "the promoted dir holds content the component refused before the restart; rolling back");
            p.roll_back(refused, base, "refused before the restart");
        } else {
            p.send_owed();
        }
        p.publish();
        Ok(p)
    }

    /// Re-reads the annotations file. Returns true when the settings in force changed: the caller must
    /// then [`Pipeline::process`] again, to re-judge under them.
    ///
    /// A file that existed and is now absent or unreadable keeps the settings in force for
    /// `ANNOTATIONS_GRACE` (`Pipeline::annotations_recheck_at` says when to look again); only a
    /// lasting absence changes them, and it is reported in the settings check.
    pub async fn annotations_changed(&mut self) -> bool {
        let read = annotations::read(&self.cfg.annotations);
        let path = self.cfg.annotations.display().to_string();
        let (ann, note) = match read {
            Ok(Some(a)) => {
                if self.annotations_missing.take().is_some() {
                    info!(file = %path, "annotations file back");
                }
                self.annotations_existed = true;
                (Ok(a), None)
            }
            Ok(None) if !self.annotations_existed => (Ok(annotations::Annotations::new()), None),
            missing => {
                let absent = matches!(missing, Ok(None));
                let why = match missing {
                    Err(e) => e,
                    _ => format!("annotations file {path} is absent"),
                };
                let since = match &self.annotations_missing {
                    Some((t, _)) => *t,
                    None => {
                        info!(file = %path, error = %why, grace_ms = ANNOTATIONS_GRACE.as_millis() as u64, "annotations file not readable; keeping the settings in force, looking again");
                        Instant::now()
                    }
                };
                self.annotations_missing = Some((since, why.clone()));
                if since.elapsed() < ANNOTATIONS_GRACE {
                    return false;
                }
                if absent {
                    let note = format!(
                        "{why} (it existed) for over {} s: settings from flags and environment",
                        ANNOTATIONS_GRACE.as_secs()
                    );
                    (Ok(annotations::Annotations::new()), Some(note))
                } else {
                    // Unreadable, not gone: the settings in force stay, and the check fails naming why.
                    (Err(why), None)
                }
            }
        };
        let lasting = note.is_some();
        self.gate.set_annotations_note(note);
        let before_settings = self.gate.settings().clone();
        let before_problems = self.gate.problems().to_vec();
        let before = (
            self.gate.settings().reload.clone(),
            self.gate.settings().confirm.clone(),
        );
        let changed = self.gate.set_annotations(ann);
        log_settings_change(&before_settings, &before_problems, &self.gate);
        if lasting {
            warn!(file = %path, changed, "annotations file still absent; its settings no longer apply");
        }
        if changed {
            let s = self.gate.settings();
            info!(accepts = s.accepts_text().unwrap_or("none"), mode = s.mode.as_str(), reload = %s.reload, "settings changed");
            self.last = None;
            self.rejudge_active().await;
            // The owed request carries the target and the confirmation in force: a corrected one of
            // either is used at once.
            let s = self.gate.settings();
            if (&s.reload, &s.confirm) != (&before.0, &before.1) {
                self.send_owed();
            }
        }
        changed
    }

    /// When the annotations file, missing for the moment, is to be read again: at the end of the
    /// grace period (past it, the absence is applied and the next event or resync looks again).
    pub(crate) fn annotations_recheck_at(&self) -> Option<Instant> {
        let (since, _) = self.annotations_missing.as_ref()?;
        let at = *since + ANNOTATIONS_GRACE;
        (at > Instant::now()).then_some(at)
    }

    /// After a settings change: the active config judged again under them, as a restart would.
    async fn rejudge_active(&mut self) {
        let Some(p) = &self.promoter else {
            return;
        };
        let (dir, settings) = (p.dir().to_path_buf(), self.gate.settings().clone());
        let (on_disk, j) = off_loop(&self.shared, move || {
            let on_disk = snapshot::read(&dir);
            let j = verdict::judge(&on_disk, &settings);
            (on_disk, j)
        })
        .await;
        if self.gate.rejudge_active(&on_disk, &j) {
            warn!(sha = %on_disk.hash().map(|h| h.short()).unwrap_or_default(), "the active config does not pass the settings now in force; no longer active");
        }
    }

    /// Sends the owed reload (or start-up check), if any, to the target in force.
    fn send_owed(&mut self) {
        if let Some(o) = self.owed.clone() {
            let target = self.gate.settings().reload.clone();
            self.reloads
                .set_confirm(self.gate.settings().confirm.clone());
            match o.kind {
                reload::Kind::Reload => {
                    info!(reload_target = %target, sha = %o.sha.short(), "reload requested")
                }
                reload::Kind::Startup { .. } => {
                    info!(reload_target = %target, sha = %o.sha.short(), "start-up check requested: does the component run the first config?")
                }
            }
            self.reloads
                .request_promoted_at(o.kind, &target, o.sha, o.version, o.promoted_at);
        }
    }

    /// Reads the newest snapshot and acts on it; identical input under unchanged settings is skipped.
    pub async fn process(&mut self) {
        if let Some(done) = self.step().await {
            self.finish(done);
        }
    }

    /// [`Pipeline::process`] for the driver: after a promotion's switch and its reload request, yields
    /// once, so the reload worker (on this thread) sends the request before the loop logs, counts and
    /// removes the old dir. None of that is needed for the component to read the new config.
    pub(crate) async fn process_reload_first(&mut self) {
        if let Some(done) = self.step().await {
            if done.reload_requested {
                tokio::task::yield_now().await;
            }
            self.finish(done);
        }
    }

    /// Read, judge, and for a promotion: switch and request the reload. What is left (logs, metrics,
    /// tidying the old dir) is returned for [`Pipeline::finish`]. Reading and judging run off the loop
    /// ([`off_loop`]); the loop takes nothing else until they are done.
    async fn step(&mut self) -> Option<Promoted> {
        let fed = match &self.feed {
            Feed::Volume => None,
            Feed::Channel { snapshots, .. } => Some(snapshots.borrow().clone()?),
        };
        let (watch, settings, last, bucket) = (
            self.cfg.watch.clone(),
            self.gate.settings().clone(),
            self.last.clone(),
            self.cfg.bucket,
        );
        // A candidate the component refused is held on this pod: the rollout falls back to stable.
        let refused: Vec<ContentHash> = self
            .gate
            .rejected_record()
            .iter()
            .map(|(h, _)| *h)
            .collect();
        let (id, choice) = off_loop(&self.shared, move || {
            let obs = fed.unwrap_or_else(|| snapshot::read(&watch));
            let id = seen(&obs);
            // Identical input under unchanged settings: nothing to judge.
            if last.as_ref() == Some(&id) {
                return (id, None);
            }
            let choice = rollout::choose(obs, &settings, bucket, &refused);
            (id, Some(choice))
        })
        .await;
        let (choice, rollout) = choice?;
        self.rollout = rollout;
        let (choice, action) = self.gate.decide(choice);
        // With variants, what is promoted (and hashed) is the chosen variant's set.
        let (j, obs, variant) = (choice.judgement, choice.observed, choice.variant);
        self.shared.metrics.candidate(j.verdict);
        let sha = obs.hash().map(|h| h.short()).unwrap_or_default();
        let judged = Judged {
            track: self
                .rollout
                .as_ref()
                .map(|r| r.track.as_str())
                .unwrap_or_default(),
            rollout: self
                .rollout
                .as_ref()
                .and_then(|r| r.percent.clone())
                .unwrap_or_default(),
            accepted: j.verdict == Verdict::Accepted,
            verdict: j.verdict.to_string(),
            version: j.version.clone().unwrap_or_default(),
            variant: variant.unwrap_or_default(),
            sha,
            reason: j.reason.to_string(),
        };
        let mut done = None;
        match action {
            Action::Nothing => judged.log(),
            Action::Activate => {
                judged.log();
                self.gate.activated(jiff::Timestamp::now());
            }
            Action::Promote { tell } => {
                let owing = tell != Tell::Nothing
                    && self.gate.settings().reload != crate::settings::Reload::None;
                let mut switched = None;
                if let (Some(p), Observed::Config(snap)) = (&self.promoter, &obs) {
                    // With a reload owed, its marker is written before the switch, so a restart after
                    // it still reloads.
                    match p.switch(snap, owing) {
                        Ok(s) => switched = Some(s),
                        Err(e) => {
                            judged.log();
                            let (version, sha) = (&judged.version, &judged.sha);
                            error!(error = %e, version, sha, "promotion failed; previous config kept");
                            self.shared.metrics.promotion_failed();
                            self.gate.promotion_failed(e.to_string());
                            self.retry_at = Some(Instant::now() + PROMOTE_RETRY);
                            self.last = None;
                            return None;
                        }
                    }
                }
                let now = jiff::Timestamp::now();
                self.gate.activated(now);
                // The one thing the component waits for comes first; the rest is bookkeeping.
                let mut reload_requested = false;
                if tell != Tell::Nothing
                    && let Some(h) = obs.hash()
                {
                    self.owed = Some(Owed {
                        kind: match tell {
                            // `now` is after the switch: a load reported at or after it read this.
                            Tell::StartupCheck => reload::Kind::Startup { promoted: now },
                            _ => reload::Kind::Reload,
                        },
                        sha: h,
                        version: j.version.clone(),
                        promoted_at: reload::BootTicks::now(),
                    });
                    self.send_owed();
                    reload_requested = true;
                }
                done = Some(Promoted {
                    judged,
                    switched,
                    at: now,
                    reload_requested,
                });
            }
        }
        self.last = Some(id);
        done
    }

    /// What follows a promotion's switch and reload request: its log lines, metrics and the tidying.
    fn finish(&mut self, done: Promoted) {
        done.judged.log();
        let (version, variant, sha) =
            (&done.judged.version, &done.judged.variant, &done.judged.sha);
        if let Some(p) = &self.promoter {
            info!(version, variant, sha, dir = %p.dir().display(), "promoted");
        }
        self.shared
            .metrics
            .promoted(done.at.as_millisecond() as f64 / 1000.0);
        if let (Some(p), Some(s)) = (&self.promoter, done.switched) {
            p.finish(s);
        }
    }

    /// Waits for input other than file events: the feed, the API source's view, the reload worker,
    /// a liveness ping. Cancel-safe, so the driver can select on it.
    pub(crate) async fn input(&mut self) -> Input {
        let Pipeline { feed, reloads, .. } = self;
        let (snapshots, source) = match feed {
            Feed::Volume => (None, None),
            Feed::Channel { snapshots, source } => (Some(snapshots), Some(source)),
        };
        tokio::select! {
            () = snapshot_changed(snapshots) => Input::Snapshot,
            view = source_changed(source) => Input::Source(view),
            Some(o) = reloads.outcome() => Input::Reload(o),
            () = self.shared.pinged() => Input::Ping,
        }
    }

    /// Applies an [`Input`]; returns what must be read again.
    pub(crate) fn take(&mut self, input: Input) -> Changes {
        match input {
            Input::Snapshot => Changes::CONFIG,
            Input::Source(view) => {
                self.source = view;
                Changes::default()
            }
            Input::Reload(o) => {
                let refused = matches!(o, reload::Outcome::Rejected { .. });
                self.reload_outcome(o);
                // A rollout's candidate refused here is held on this pod from now on: judged again,
                // the ConfigMap gives this pod its stable set.
                if refused && self.rollout.is_some() {
                    self.last = None;
                    Changes::CONFIG
                } else {
                    Changes::default()
                }
            }
            Input::Ping => {
                self.shared.pong();
                Changes::default()
            }
        }
    }

    fn reload_outcome(&mut self, o: reload::Outcome) {
        match &o {
            reload::Outcome::Reloaded(h) => self.reload_done(*h),
            reload::Outcome::Nothing { sha256, .. } => self.reload_done(*sha256),
            _ => {}
        }
        let r = &mut self.reload;
        match o {
            reload::Outcome::Attempting => r.last_result = ReloadResult::Pending,
            reload::Outcome::Reloaded(h) => {
                r.last_reload_successful = Some(true);
                r.last_result = ReloadResult::Success;
                r.last_error = None;
                r.last_success_sha256 = Some(h.to_string());
                self.applied(h);
            }
            reload::Outcome::Failed(e) => {
                r.last_reload_successful = Some(false);
                r.last_result = ReloadResult::Failure;
                r.last_error = Some(e);
            }
            // A start-up check still looking for the component: pending, with what it waits for.
            reload::Outcome::Waiting(why) => {
                r.last_result = ReloadResult::Pending;
                r.last_error = Some(why);
            }
            reload::Outcome::Nothing { sha256, why } => {
                r.last_reload_successful = Some(true);
                r.last_result = ReloadResult::NothingToReload;
                r.last_error = Some(why);
                // Whichever process runs (or comes) read the promoted config at start-up.
                self.applied(sha256);
            }
            reload::Outcome::Rejected { sha256, reason } => {
                r.last_reload_successful = Some(false);
                r.last_result = ReloadResult::Rejected;
                r.last_error = Some(reason.clone());
                self.rejected(sha256, &reason);
            }
        }
    }

    /// The component runs `h`: its promoted dir is kept as the rollback base.
    fn applied(&mut self, h: ContentHash) {
        if self.gate.reloaded(h, jiff::Timestamp::now())
            && let Some(p) = &self.promoter
        {
            match p.mark_applied() {
                Ok(()) => {
                    info!(sha = %h.short(), version = self.gate.applied_version().as_deref().unwrap_or(""), "applied by the component")
                }
                Err(e) => {
                    warn!(error = %e, sha = %h.short(), "applied, but keeping it for a rollback failed")
                }
            }
        }
    }

    /// The component refused `h`: remember that on disk (a restart must not offer it again), drop its
    /// owed reload, put back what it applied last, and tell it to load that again.
    fn rejected(&mut self, h: ContentHash, reason: &str) {
        let base = self.gate.rejected_by_component(h, reason);
        self.shared
            .metrics
            .candidate(crate::verdict::Verdict::RejectedByComponent);
        // Recorded before the rollback: stopped in between, the next start finds the refused content
        // in place and finishes the rollback, rather than offering it again.
        if let Some(p) = &self.promoter
            && let Err(e) = p.record_rejected(self.gate.rejected_record())
        {
            warn!(error = %e, sha = %h.short(), "cannot record the refusal in the promoted dir; a restart would offer it again");
        }
        if self.owed.as_ref().is_some_and(|o| o.sha == h) {
            self.owed = None;
        }
        if let Some(p) = &self.promoter
            && let Err(e) = p.clear_reload_owed(h)
        {
            warn!(error = %e, sha = %h.short(), "cannot clear the reload-owed marker of refused content");
        }
        let Some(base) = base.filter(|_| self.promoter.is_some()) else {
            warn!(sha = %h.short(), reason, "rejected by the component; no applied config to roll back to");
            return;
        };
        self.roll_back(h, base, reason);
    }

    /// Puts `base`, the config the component applied last, back in place of the refused `refused`,
    /// and requests its reload (owed, like a promotion's, until done).
    fn roll_back(&mut self, refused: ContentHash, base: ContentHash, reason: &str) {
        let Some(p) = &self.promoter else { return };
        match p.roll_back() {
            Ok(now) if now.hash() == Some(base) => {
                self.gate.rolled_back();
                let version = self.gate.applied_version();
                warn!(sha = %refused.short(), reason, rolled_back_to = %base.short(), version = version.as_deref().unwrap_or(""), "rejected by the component; rolled back");
                let owing = self.gate.settings().reload != crate::settings::Reload::None;
                if owing && let Err(e) = p.mark_reload_owed(base) {
                    warn!(error = %e, sha = %base.short(), "cannot record the rollback's reload as owed; a restart would not send it");
                }
                self.owed = Some(Owed {
                    kind: reload::Kind::Reload,
                    sha: base,
                    version,
                    promoted_at: reload::BootTicks::now(),
                });
                self.send_owed();
            }
            Ok(_) => {
                error!(sha = %refused.short(), "rollback left other content in the promoted dir");
                self.gate
                    .promotion_failed("rollback left other content in place".into());
            }
            Err(e) => {
                error!(error = %e, sha = %refused.short(), "rollback failed");
                self.gate.promotion_failed(format!("rollback failed: {e}"));
            }
        }
    }

    /// A reload (or start-up check) of `sha` is done: it is no longer owed, here or on disk.
    fn reload_done(&mut self, sha: ContentHash) {
        if self.owed.as_ref().is_some_and(|o| o.sha == sha) {
            self.owed = None;
        }
        if let Some(p) = &self.promoter
            && let Err(e) = p.clear_reload_owed(sha)
        {
            warn!(error = %e, sha = %sha.short(), "cannot clear the reload-owed marker; a restart will reload again");
        }
    }

    /// Finishes tidying the promoted dir after a promotion that could not (called on the resync timer).
    pub(crate) fn tidy(&self) {
        if let Some(p) = &self.promoter
            && p.needs_tidy()
            && let Err(e) = p.tidy()
        {
            warn!(error = %e, dir = %p.dir().display(), "tidying the promoted dir failed; will retry");
        }
    }

    /// Counts file-watch errors and overflows.
    pub(crate) fn watch_errors(&self, n: u64) {
        for _ in 0..n {
            self.shared.metrics.watch_error();
        }
    }

    /// Whether snapshots come from the watched volume (not from a feed).
    pub(crate) fn reads_volume(&self) -> bool {
        matches!(self.feed, Feed::Volume)
    }

    pub(crate) fn watch_dir(&self) -> &Path {
        &self.cfg.watch
    }

    pub(crate) fn resync(&self) -> Duration {
        self.cfg.resync
    }

    /// Why the config dir is not watched, if it is not; logged when it changes.
    pub(crate) fn set_watch_error(&mut self, now: Option<String>) {
        if now != self.watch_error {
            match &now {
                Some(e) => warn!(error = %e, "watch not in place; polling"),
                None => info!(dir = %self.cfg.watch.display(), "watching"),
            }
            self.watch_error = now;
        }
    }

    /// When a failed promotion is to be tried again.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Whether the retry time has come; clears it when it has.
    pub(crate) fn retry_due(&mut self) -> bool {
        let due = self.retry_at.is_some_and(|t| t <= Instant::now());
        if due {
            self.retry_at = None;
        }
        due
    }

    /// Publishes the status for the server, `wait`, metrics and the pod reporter.
    pub(crate) fn publish(&self) {
        let mut reload = self.reload.clone();
        reload.target = self.gate.settings().reload.to_string();
        reload.requested = self.reloads.requested();
        let mut next = self.gate.status(reload);
        next.watch_error.clone_from(&self.watch_error);
        next.rollout.clone_from(&self.rollout);
        next.source.clone_from(&self.source);
        self.publisher.publish(next);
    }
}

/// The "judged" log line of one decision, kept until the work it must not delay is done.
struct Judged {
    /// With a rollout: the track of what was judged, and the rollout's percentage; empty without.
    track: &'static str,
    rollout: String,
    accepted: bool,
    verdict: String,
    version: String,
    /// The variant key chosen, with the variants setting; empty without.
    variant: String,
    sha: String,
    reason: String,
}

impl Judged {
    fn log(&self) {
        let Judged {
            verdict,
            version,
            variant,
            sha,
            reason,
            track,
            rollout,
            ..
        } = self;
        if self.accepted {
            info!(verdict = %verdict, version, variant, track, rollout, sha, reason = %reason, "judged");
        } else {
            warn!(verdict = %verdict, version, variant, track, rollout, sha, reason = %reason, "judged");
        }
    }
}

/// A promotion whose switch is made and whose reload is requested; [`Pipeline::finish`] does the rest.
struct Promoted {
    judged: Judged,
    /// `None` without a promoted dir (observe-only runs still "promote" in the gate).
    switched: Option<Switched>,
    at: jiff::Timestamp,
    reload_requested: bool,
}

/// Runs `work` (reading and judging a config) on the blocking pool while this task answers liveness
/// pings: the loop is busy, not stuck, and the HTTP server, on the runtime's one thread, goes on
/// serving. Nothing else is taken meanwhile, so snapshots are still judged one at a time, in order.
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

async fn snapshot_changed(rx: Option<&mut watch::Receiver<Option<Observed>>>) {
    if let Some(rx) = rx
        && rx.changed().await.is_ok()
    {
        return;
    }
    // The volume, or a closed channel: nothing more to say here (the source reports its own failure).
    std::future::pending().await
}

async fn source_changed(
    rx: Option<&mut watch::Receiver<Option<SourceView>>>,
) -> Option<SourceView> {
    if let Some(rx) = rx
        && rx.changed().await.is_ok()
    {
        return rx.borrow_and_update().clone();
    }
    std::future::pending().await
}

/// One line per settings problem that appeared or cleared, and per setting an annotation now overrides
/// (or, removed, gives back to the flag), so a typo'd annotation is never silent in the logs.
fn log_settings_change(before: &Settings, before_problems: &[String], gate: &Gate) {
    for p in gate.problems() {
        if !before_problems.contains(p) {
            warn!(problem = %p, "settings problem");
        }
    }
    for p in before_problems {
        if !gate.problems().contains(p) {
            info!(problem = %p, "settings problem cleared");
        }
    }
    let base = gate.base().describe();
    let new = gate.settings().describe();
    for ((b, o), n) in base.iter().zip(before.describe()).zip(&new) {
        if n.2 == o.2 {
            continue;
        }
        if n.2 == b.2 {
            info!(setting = n.0, value = %n.2, "annotation gone; the flag's value is back in force");
        } else {
            info!(setting = n.0, annotation = n.1, value = %n.2, overrides = %b.2, "annotation overrides flag");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Raw;
    use std::collections::BTreeMap;

    fn version(v: &str) -> snapshot::Snapshot {
        snapshot::Snapshot::new(BTreeMap::from([(
            "version".to_owned(),
            v.as_bytes().to_vec(),
        )]))
    }

    #[tokio::test]
    async fn the_reload_is_requested_before_the_old_dir_is_tidied() {
        let tmp = tempfile::tempdir().unwrap();
        let (watch, promoted) = (tmp.path().join("watch"), tmp.path().join("promoted"));
        // The volume in the kubelet's layout, written by the same code that writes the promoted dir.
        let (volume, _) = Promoter::open(&watch).unwrap();
        volume.promote(&version("1.0.0")).unwrap();
        let cfg = Config {
            watch,
            promote_to: Some(promoted.clone()),
            annotations: tmp.path().join("podinfo/annotations"),
            resync: Duration::from_secs(30),
            bucket: None,
        };
        let base = Settings::from_raw(&Raw {
            accepts: Some("^1".into()),
            reload: Some("http://127.0.0.1:9/reload".into()),
            ..Default::default()
        })
        .unwrap();
        let mut p = Pipeline::open(
            cfg,
            Feed::Volume,
            base,
            Shared::new(),
            reload::Handle::inert(),
        )
        .await
        .unwrap();
        p.process().await;
        let old = promoted.join(std::fs::read_link(promoted.join("..data")).unwrap());
        let requested = p.reloads.requested();

        volume.promote(&version("1.1.0")).unwrap();
        let done = p.step().await.expect("a promotion");
        assert_eq!(p.reloads.requested(), requested + 1);
        assert!(done.reload_requested);
        // When the request goes out the new config is live, and nothing was tidied yet.
        assert_eq!(
            snapshot::read(&promoted),
            Observed::Config(version("1.1.0"))
        );
        assert!(old.is_dir(), "the old dir is removed after the request");
        p.finish(done);
        assert!(!old.exists());
        assert_eq!(
            snapshot::read(&promoted),
            Observed::Config(version("1.1.0"))
        );
    }
}
