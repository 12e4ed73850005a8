//! [`Pipeline`]: one step at a time of the loop, without the waiting. The only writer of the
//! published status.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::{Action, Config, Error, Gate};
use crate::annotations;
use crate::promote::{Promoter, Switched};
use crate::reload;
use crate::settings::Settings;
use crate::snapshot::{self, ContentHash, Observed};
use crate::source::Changes;
use crate::state::{Publisher, ReloadResult, ReloadView, Shared, SourceView};
use crate::verdict::Verdict;

/// After a failed promotion, when to try again.
const PROMOTE_RETRY: Duration = Duration::from_secs(1);

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
        Observed::Config(s) => Seen::Hash(s.hash),
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
/// publish. [`run`] drives it from file events; tests drive it directly. The only writer of the
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
    /// The content of the newest reload request, which a `Nothing` outcome is about.
    requested: Option<ContentHash>,
    last: Option<Seen>,
    retry_at: Option<Instant>,
    watch_error: Option<String>,
}

impl Pipeline {
    /// Opens the promoted dir (cleaning leftovers), reads the annotations, adopts what is already
    /// promoted, and takes the status publisher (`Err` when another loop holds it).
    pub fn open(
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
        gate.set_annotations(annotations::read_file(&cfg.annotations));
        let promoter = promoter.map(|(p, on_disk)| {
            gate.adopt_on_disk(&on_disk, jiff::Timestamp::now());
            if let Some(h) = on_disk.hash() {
                info!(dir = %p.dir().display(), sha = %h.short(), "promoted dir already holds a config");
            }
            p
        });
        let p = Pipeline {
            cfg,
            feed,
            gate,
            promoter,
            shared,
            publisher,
            reloads,
            reload: ReloadView::default(),
            source: None,
            requested: None,
            last: None,
            retry_at: None,
            watch_error: None,
        };
        p.publish();
        Ok(p)
    }

    /// Re-reads the annotations file. Returns true when the settings in force changed: the caller must
    /// then [`Pipeline::process`] again, to re-judge under them.
    pub fn annotations_changed(&mut self) -> bool {
        let changed = self
            .gate
            .set_annotations(annotations::read_file(&self.cfg.annotations));
        if changed {
            let s = self.gate.settings();
            info!(accepts = ?s.accepts_text(), mode = s.mode.as_str(), reload = %s.reload, "settings changed");
            self.last = None;
        }
        changed
    }

    /// Reads the newest snapshot and acts on it; identical input under unchanged settings is skipped.
    pub fn process(&mut self) {
        if let Some(done) = self.step() {
            self.finish(done);
        }
    }

    /// [`Pipeline::process`] for the driver: after a promotion's switch and its reload request, yields
    /// once, so the reload worker (on this thread) sends the request before the loop logs, counts and
    /// removes the old dir. None of that is needed for the component to read the new config.
    pub(crate) async fn process_reload_first(&mut self) {
        if let Some(done) = self.step() {
            if done.reload_requested {
                tokio::task::yield_now().await;
            }
            self.finish(done);
        }
    }

    /// Read, judge, and for a promotion: switch and request the reload. What is left (logs, metrics,
    /// tidying the old dir) is returned for [`Pipeline::finish`].
    fn step(&mut self) -> Option<Promoted> {
        let obs = match &self.feed {
            Feed::Volume => snapshot::read(&self.cfg.watch),
            Feed::Channel { snapshots, .. } => snapshots.borrow().clone()?,
        };
        let id = seen(&obs);
        if self.last.as_ref() == Some(&id) {
            return None;
        }
        let (j, action) = self.gate.decide(&obs);
        self.shared.metrics.candidate(j.verdict);
        let sha = obs.hash().map(|h| h.short()).unwrap_or_default();
        let judged = Judged {
            accepted: j.verdict == Verdict::Accepted,
            verdict: j.verdict.to_string(),
            version: j.version.clone().unwrap_or_default(),
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
            Action::Promote { reload } => {
                let mut switched = None;
                if let (Some(p), Observed::Config(snap)) = (&self.promoter, &obs) {
                    match p.switch(snap, false) {
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
                if reload && let Some(h) = obs.hash() {
                    self.request_reload(h, j.version.clone());
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
        let (version, sha) = (&done.judged.version, &done.judged.sha);
        if let Some(p) = &self.promoter {
            info!(version, sha, dir = %p.dir().display(), "promoted");
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
                self.reload_outcome(o);
                Changes::default()
            }
            Input::Ping => {
                self.shared.pong();
                Changes::default()
            }
        }
    }

    fn request_reload(&mut self, h: ContentHash, version: Option<String>) {
        let s = self.gate.settings();
        self.reloads.set_confirm(s.confirm.clone());
        self.reloads.request(&s.reload, h, version);
        self.requested = Some(h);
    }

    fn reload_outcome(&mut self, o: reload::Outcome) {
        let r = &mut self.reload;
        match o {
            reload::Outcome::Attempting => r.last_result = ReloadResult::Pending,
            reload::Outcome::Reloaded(_) | reload::Outcome::Nothing(_) => {
                r.last_reload_successful = Some(true);
            }
            reload::Outcome::Failed(_) | reload::Outcome::Rejected { .. } => {
                r.last_reload_successful = Some(false);
            }
        }
        match o {
            reload::Outcome::Attempting => {}
            reload::Outcome::Reloaded(h) => {
                r.last_result = ReloadResult::Success;
                r.last_error = None;
                r.last_success_sha256 = Some(h.to_string());
                self.applied(h);
            }
            reload::Outcome::Failed(e) => {
                r.last_result = ReloadResult::Failure;
                r.last_error = Some(e);
            }
            reload::Outcome::Nothing(why) => {
                r.last_result = ReloadResult::NothingToReload;
                r.last_error = Some(why);
                // Whichever process runs (or comes) read the promoted config at start-up.
                if let Some(h) = self.requested {
                    self.applied(h);
                }
            }
            reload::Outcome::Rejected { sha256, reason } => {
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

    /// The component refused `h`: put back what it applied last, and tell it to load that again.
    fn rejected(&mut self, h: ContentHash, reason: &str) {
        let base = self.gate.rejected_by_component(h, reason);
        self.shared
            .metrics
            .candidate(crate::verdict::Verdict::RejectedByComponent);
        let (Some(base), Some(p)) = (base, &self.promoter) else {
            warn!(sha = %h.short(), reason, "rejected by the component; no applied config to roll back to");
            return;
        };
        match p.roll_back() {
            Ok(now) if now.hash() == Some(base) => {
                self.gate.rolled_back();
                let version = self.gate.applied_version();
                warn!(sha = %h.short(), reason, rolled_back_to = %base.short(), version = version.as_deref().unwrap_or(""), "rejected by the component; rolled back");
                self.request_reload(base, version);
            }
            Ok(_) => {
                error!(sha = %h.short(), "rollback left other content in the promoted dir");
                self.gate
                    .promotion_failed("rollback left other content in place".into());
            }
            Err(e) => {
                error!(error = %e, sha = %h.short(), "rollback failed");
                self.gate.promotion_failed(format!("rollback failed: {e}"));
            }
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
        next.source.clone_from(&self.source);
        self.publisher.publish(next);
    }
}

/// The "judged" log line of one decision, kept until the work it must not delay is done.
struct Judged {
    accepted: bool,
    verdict: String,
    version: String,
    sha: String,
    reason: String,
}

impl Judged {
    fn log(&self) {
        let Judged {
            verdict,
            version,
            sha,
            reason,
            ..
        } = self;
        if self.accepted {
            info!(verdict = %verdict, version, sha, reason = %reason, "judged");
        } else {
            warn!(verdict = %verdict, version, sha, reason = %reason, "judged");
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

    #[test]
    fn the_reload_is_requested_before_the_old_dir_is_tidied() {
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
        .unwrap();
        p.process();
        let old = promoted.join(std::fs::read_link(promoted.join("..data")).unwrap());
        let requested = p.reloads.requested();

        volume.promote(&version("1.1.0")).unwrap();
        let done = p.step().expect("a promotion");
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
