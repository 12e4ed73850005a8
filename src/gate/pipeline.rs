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
use crate::promote::Promoter;
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
        let before = gate.settings().clone();
        gate.set_annotations(annotations::read_file(&cfg.annotations));
        log_settings_change(&before, &[], &gate);
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
        let before = self.gate.settings().clone();
        let before_problems = self.gate.problems().to_vec();
        let changed = self
            .gate
            .set_annotations(annotations::read_file(&self.cfg.annotations));
        log_settings_change(&before, &before_problems, &self.gate);
        if changed {
            let s = self.gate.settings();
            info!(accepts = s.accepts_text().unwrap_or("none"), mode = s.mode.as_str(), reload = %s.reload, "settings changed");
            self.last = None;
        }
        changed
    }

    /// Reads the newest snapshot and acts on it; identical input under unchanged settings is skipped.
    pub fn process(&mut self) {
        let obs = match &self.feed {
            Feed::Volume => snapshot::read(&self.cfg.watch),
            Feed::Channel { snapshots, .. } => match snapshots.borrow().clone() {
                Some(obs) => obs,
                None => return,
            },
        };
        let id = seen(&obs);
        if self.last.as_ref() == Some(&id) {
            return;
        }
        let (j, action) = self.gate.decide(&obs);
        self.shared.metrics.candidate(j.verdict);
        let sha = obs.hash().map(|h| h.short()).unwrap_or_default();
        let version = j.version.as_deref().unwrap_or("");
        if j.verdict == Verdict::Accepted {
            info!(verdict = %j.verdict, version, sha, reason = %j.reason, "judged");
        } else {
            warn!(verdict = %j.verdict, version, sha, reason = %j.reason, "judged");
        }
        match action {
            Action::Nothing => {}
            Action::Activate => self.gate.activated(jiff::Timestamp::now()),
            Action::Promote { reload } => {
                if let (Some(p), Observed::Config(snap)) = (&self.promoter, &obs) {
                    if let Err(e) = p.promote(snap) {
                        error!(error = %e, version, sha, "promotion failed; previous config kept");
                        self.shared.metrics.promotion_failed();
                        self.gate.promotion_failed(e.to_string());
                        self.retry_at = Some(Instant::now() + PROMOTE_RETRY);
                        self.last = None;
                        return;
                    }
                    info!(version, sha, dir = %p.dir().display(), "promoted");
                }
                let now = jiff::Timestamp::now();
                self.shared
                    .metrics
                    .promoted(now.as_millisecond() as f64 / 1000.0);
                self.gate.activated(now);
                if reload && let Some(h) = obs.hash() {
                    self.reloads
                        .request(&self.gate.settings().reload, h, j.version.clone());
                }
            }
        }
        self.last = Some(id);
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

    fn reload_outcome(&mut self, o: reload::Outcome) {
        let r = &mut self.reload;
        match o {
            reload::Outcome::Attempting => r.last_result = ReloadResult::Pending,
            reload::Outcome::Reloaded(h) => {
                r.last_result = ReloadResult::Success;
                r.last_error = None;
                r.last_success_sha256 = Some(h.to_string());
            }
            reload::Outcome::Failed(e) => {
                r.last_result = ReloadResult::Failure;
                r.last_error = Some(e);
            }
            reload::Outcome::Nothing(why) => {
                r.last_result = ReloadResult::NothingToReload;
                r.last_error = Some(why);
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
