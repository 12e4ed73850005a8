//! The decision loop: a pure state machine ([`Gate`]) that turns snapshots and settings into actions and
//! a status, and the async driver ([`run`]) that feeds it from the source and carries its actions out.
//!
//! The loop is the only task that reads the config, promotes, and requests reloads; one snapshot is
//! judged, acted on and published before the next is read, so no ordering of events can promote a
//! snapshot under settings other than those it was judged by.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{error, info, warn};

use crate::annotations::{self, Annotations};
use crate::promote::{self, Promoter};
use crate::reload;
use crate::settings::{Mode, OnIncompatible, Settings};
use crate::snapshot::{self, ContentHash, Observed};
use crate::source::{self, Changes, Source};
use crate::state::{
    ActiveView, CandidateView, Check, CheckKind, Publisher, ReloadResult, ReloadView, Shared,
    SourceView, Status,
};
use crate::verdict::{self, Judgement, Verdict};

/// How long a plain directory must be quiet before it is read, and the most a burst can delay a read.
const QUIET: Duration = Duration::from_millis(100);
const QUIET_MAX: Duration = Duration::from_secs(1);
/// While the watched dir is absent, how often to look for it again.
const ABSENT_POLL: Duration = Duration::from_secs(1);
/// After a failed promotion, when to try again.
const PROMOTE_RETRY: Duration = Duration::from_secs(1);

/// Why the loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Promote(#[from] promote::Error),
    #[error(transparent)]
    Source(#[from] source::Error),
    /// Another decision loop already publishes this status.
    #[error("the status already has a publisher: one decision loop per status")]
    Publisher,
}

/// Container-level inputs of the loop.
#[derive(Debug, Clone)]
pub struct Config {
    pub watch: PathBuf,
    pub promote_to: Option<PathBuf>,
    pub annotations: PathBuf,
    /// Safety re-read of everything, in case an event was lost.
    pub resync: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Active {
    hash: ContentHash,
    version: Option<String>,
    since: jiff::Timestamp,
    verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Newest {
    hash: Option<ContentHash>,
    judgement: Judgement,
}

/// What the driver must do after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// The content is already in place (or gate-only): mark it active, no write, no reload.
    Activate,
    /// Write it into the promoted dir, then mark it active; signal a reload when `reload`.
    Promote {
        reload: bool,
    },
}

/// Where the loop takes snapshots from.
#[derive(Debug, Clone, Default)]
pub enum Feed {
    /// Read [`Config::watch`] when the file watch says it changed (the kubelet volume).
    #[default]
    Volume,
    /// Another task's observations (the API source): the newest snapshot (`None` until it has one)
    /// and the source's own view (identity, watch health), reported to the loop for `/status`.
    Channel {
        snapshots: tokio::sync::watch::Receiver<Option<Observed>>,
        source: tokio::sync::watch::Receiver<Option<SourceView>>,
    },
}

/// The pure decision state.
#[derive(Debug, Clone)]
pub struct Gate {
    base: Settings,
    settings: Settings,
    problems: Vec<String>,
    gate_only: bool,
    /// What the promoted dir holds (promote mode only).
    on_disk: Option<ContentHash>,
    active: Option<Active>,
    newest: Option<Newest>,
    promote_error: Option<String>,
    started: bool,
}

impl Gate {
    /// `base` is the flag/env/default settings; `gate_only` when there is no promoted dir.
    pub fn new(base: Settings, gate_only: bool) -> Gate {
        Gate {
            settings: base.clone(),
            base,
            problems: Vec::new(),
            gate_only,
            on_disk: None,
            active: None,
            newest: None,
            promote_error: None,
            started: false,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Applies the annotations file as read; `Err` is a file that could not be read or parsed, which keeps
    /// the settings in force. Returns true when the settings in force changed.
    pub fn set_annotations(&mut self, ann: Result<Annotations, String>) -> bool {
        match ann {
            Ok(ann) => {
                let r = Settings::with_annotations(&self.base, &self.settings, &ann);
                let changed = r.settings != self.settings;
                self.settings = r.settings;
                self.problems = r.problems;
                changed
            }
            Err(e) => {
                self.problems = vec![e];
                false
            }
        }
    }

    /// At start-up, what the promoted dir already holds (left by a previous run of this sidecar).
    pub fn adopt_on_disk(&mut self, obs: &Observed, since: jiff::Timestamp) {
        self.on_disk = obs.hash();
        if let Observed::Config(_) = obs {
            let j = verdict::judge(obs, &self.settings);
            if self.passes(obs, &j) {
                self.activate(obs.hash(), &j, since);
            }
        }
    }

    fn passes(&self, obs: &Observed, j: &Judgement) -> bool {
        j.verdict == Verdict::Accepted
            || (self.settings.mode == Mode::Observe && matches!(obs, Observed::Config(_)))
    }

    /// Judges the newest snapshot and says what to do with it.
    pub fn decide(&mut self, obs: &Observed) -> (Judgement, Action) {
        let j = verdict::judge(obs, &self.settings);
        let hash = obs.hash();
        let action = match hash {
            Some(h) if self.passes(obs, &j) => {
                let in_place = if self.gate_only {
                    self.active.as_ref().map(|a| a.hash)
                } else {
                    self.on_disk
                };
                if in_place == Some(h) {
                    let same = self
                        .active
                        .as_ref()
                        .is_some_and(|a| a.hash == h && a.verdict == j.verdict);
                    if same {
                        Action::Nothing
                    } else {
                        Action::Activate
                    }
                } else {
                    Action::Promote {
                        // Gate-only: the component read the first config itself at start.
                        reload: !self.gate_only || self.active.is_some(),
                    }
                }
            }
            _ => Action::Nothing,
        };
        self.newest = Some(Newest {
            hash,
            judgement: j.clone(),
        });
        (j, action)
    }

    /// Records that the newest snapshot is now in place.
    pub fn activated(&mut self, now: jiff::Timestamp) {
        if let Some(n) = self.newest.clone() {
            self.activate(n.hash, &n.judgement, now);
        }
    }

    fn activate(&mut self, hash: Option<ContentHash>, j: &Judgement, since: jiff::Timestamp) {
        let Some(hash) = hash else { return };
        let since = match &self.active {
            Some(a) if a.hash == hash => a.since,
            _ => since,
        };
        self.active = Some(Active {
            hash,
            version: j.version.clone(),
            since,
            verdict: j.verdict,
        });
        if !self.gate_only {
            self.on_disk = Some(hash);
        }
        self.promote_error = None;
        self.started = true;
    }

    pub fn promotion_failed(&mut self, why: String) {
        self.promote_error = Some(why);
    }

    /// Whether the newest snapshot is the one in force.
    fn newest_is_active(&self) -> bool {
        match (&self.newest, &self.active) {
            (Some(n), Some(a)) => {
                n.hash == Some(a.hash)
                    && (n.judgement.verdict == Verdict::Accepted
                        || self.settings.mode == Mode::Observe)
            }
            (None, Some(_)) => true,
            _ => false,
        }
    }

    /// The readiness checks, the verdict on readiness and the status (reload view left to the caller).
    pub fn status(&self, reload: ReloadView) -> Status {
        let mut checks = Vec::with_capacity(4);
        checks.push(Check {
            name: CheckKind::Settings,
            ok: self.problems.is_empty(),
            message: if self.problems.is_empty() {
                "annotations valid".into()
            } else {
                self.problems.join("; ")
            },
        });
        let newest_text = |n: &Newest| {
            format!(
                "newest config{} is {}: {}",
                n.judgement
                    .version
                    .as_ref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                n.judgement.verdict,
                n.judgement.reason
            )
        };
        checks.push(match (&self.active, &self.newest) {
            (Some(a), _) => Check {
                name: CheckKind::Config,
                ok: true,
                message: format!(
                    "active {} ({})",
                    a.version.as_deref().unwrap_or("unversioned config"),
                    a.hash
                ),
            },
            (None, Some(n)) => Check {
                name: CheckKind::Config,
                ok: false,
                message: format!("no accepted config yet: {}", newest_text(n)),
            },
            (None, None) => Check {
                name: CheckKind::Config,
                ok: false,
                message: "no config read yet".into(),
            },
        });
        let current = self.newest_is_active();
        if let (Some(a), Some(n), false) = (&self.active, &self.newest, current) {
            let held = a.version.as_deref().unwrap_or("the previous config");
            checks.push(Check {
                name: CheckKind::Newest,
                ok: self.settings.on_incompatible == OnIncompatible::Hold,
                message: format!("{}; holding {held}", newest_text(n)),
            });
        }
        if let Some(e) = &self.promote_error {
            checks.push(Check {
                name: CheckKind::Promote,
                ok: false,
                message: format!("promotion failed, previous config kept: {e}"),
            });
        }
        let failing = checks.iter().find(|c| !c.ok);
        let observe = self.settings.mode == Mode::Observe;
        let ready = observe || failing.is_none();
        let stale = self.active.is_some() && !current;
        let reason = match (failing, observe) {
            (Some(c), false) => c.message.clone(),
            (Some(c), true) => format!("observe mode (not enforced): {}", c.message),
            (None, _) if stale => checks
                .iter()
                .find(|c| c.name == CheckKind::Newest)
                .map(|c| c.message.clone())
                .unwrap_or_default(),
            (None, _) => "ok".into(),
        };
        let candidate = match (&self.newest, current) {
            (Some(n), false) => Some(CandidateView {
                version: n.judgement.version.clone(),
                sha256: n.hash.map(|h| h.to_string()),
                verdict: n.judgement.verdict,
                reason: n.judgement.reason.clone(),
            }),
            _ => None,
        };
        Status {
            ready,
            reason,
            accepts: self.settings.accepts_text().map(str::to_owned),
            stale,
            active: self.active.as_ref().map(|a| ActiveView {
                version: a.version.clone(),
                sha256: a.hash.to_string(),
                since: a.since.to_string(),
                verdict: a.verdict,
            }),
            candidate,
            reload,
            mode: self.settings.mode,
            on_incompatible: self.settings.on_incompatible,
            started: self.started,
            checks,
            watch_error: None,
            source: None,
        }
    }
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

/// Something for the loop other than a file event.
#[derive(Debug)]
pub enum Input {
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
            last: None,
            retry_at: None,
            watch_error: None,
        };
        p.publish();
        Ok(p)
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
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
    pub async fn input(&mut self) -> Input {
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
    pub fn take(&mut self, input: Input) -> Changes {
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
        }
    }

    /// Counts file-watch errors and overflows.
    pub fn watch_errors(&self, n: u64) {
        for _ in 0..n {
            self.shared.metrics.watch_error();
        }
    }

    /// Whether snapshots come from the watched volume (not from a feed).
    pub fn reads_volume(&self) -> bool {
        matches!(self.feed, Feed::Volume)
    }

    pub fn watch_dir(&self) -> &Path {
        &self.cfg.watch
    }

    pub fn resync(&self) -> Duration {
        self.cfg.resync
    }

    /// Why the config dir is not watched, if it is not; logged when it changes.
    pub fn set_watch_error(&mut self, now: Option<String>) {
        if now != self.watch_error {
            match &now {
                Some(e) => warn!(error = %e, "watch not in place; polling"),
                None => info!(dir = %self.cfg.watch.display(), "watching"),
            }
            self.watch_error = now;
        }
    }

    /// When a failed promotion is to be tried again.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Whether the retry time has come; clears it when it has.
    pub fn retry_due(&mut self) -> bool {
        let due = self.retry_at.is_some_and(|t| t <= Instant::now());
        if due {
            self.retry_at = None;
        }
        due
    }

    /// Publishes the status for the server, `wait`, metrics and the pod reporter.
    pub fn publish(&self) {
        let mut reload = self.reload.clone();
        reload.target = self.gate.settings().reload.to_string();
        reload.requested = self.reloads.requested();
        let mut next = self.gate.status(reload);
        next.watch_error.clone_from(&self.watch_error);
        next.source.clone_from(&self.source);
        self.publisher.publish(next);
    }
}

async fn snapshot_changed(rx: Option<&mut tokio::sync::watch::Receiver<Option<Observed>>>) {
    if let Some(rx) = rx
        && rx.changed().await.is_ok()
    {
        return;
    }
    // The volume, or a closed channel: nothing more to say here (the source reports its own failure).
    std::future::pending().await
}

async fn source_changed(
    rx: Option<&mut tokio::sync::watch::Receiver<Option<SourceView>>>,
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
    use crate::snapshot::Snapshot;
    use std::collections::BTreeMap;

    fn base(accepts: &str, extra: impl FnOnce(&mut Raw)) -> Settings {
        let mut raw = Raw {
            accepts: Some(accepts.into()),
            ..Raw::default()
        };
        extra(&mut raw);
        Settings::from_raw(&raw).unwrap()
    }

    fn cfg(version: &str) -> Observed {
        Observed::Config(Snapshot::new(BTreeMap::from([(
            "version".to_owned(),
            version.as_bytes().to_vec(),
        )])))
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::UNIX_EPOCH
    }

    fn reload_view() -> crate::state::ReloadView {
        Status::default().reload
    }

    fn step(g: &mut Gate, obs: &Observed) -> Action {
        let (_, a) = g.decide(obs);
        if a != Action::Nothing {
            g.activated(now());
        }
        a
    }

    #[test]
    fn hold_stays_ready_and_stale_unready_does_not() {
        for (policy, ready_when_held) in [("hold", true), ("unready", false)] {
            let mut g = Gate::new(
                base("^2", |r| r.on_incompatible = Some(policy.into())),
                false,
            );
            assert!(!g.status(reload_view()).ready);
            assert_eq!(
                step(&mut g, &cfg("2.1.0")),
                Action::Promote { reload: true }
            );
            let s = g.status(reload_view());
            assert!(
                s.ready && !s.stale && s.started && s.candidate.is_none(),
                "{s:?}"
            );
            assert_eq!(step(&mut g, &cfg("3.0.0")), Action::Nothing);
            let s = g.status(reload_view());
            assert_eq!(
                (s.ready, s.stale),
                (ready_when_held, true),
                "{policy}: {s:?}"
            );
            assert_eq!(s.candidate.as_ref().unwrap().verdict, Verdict::TooNew);
            assert!(s.reason.contains("holding 2.1.0"), "{}", s.reason);
            assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.1.0"));
            assert_eq!(
                step(&mut g, &Observed::Missing("deleted".into())),
                Action::Nothing
            );
            assert_eq!(g.status(reload_view()).ready, ready_when_held);
            assert_eq!(step(&mut g, &cfg("2.1.0")), Action::Nothing);
            let s = g.status(reload_view());
            assert!(s.ready && !s.stale, "{s:?}");
        }
    }

    #[test]
    fn not_ready_before_any_accepted_config_whatever_the_policy() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        step(&mut g, &cfg("3.0.0"));
        let s = g.status(reload_view());
        assert!(!s.ready && !s.started && !s.stale);
        assert!(
            s.reason
                .starts_with("no accepted config yet: newest config 3.0.0 is too-new"),
            "{}",
            s.reason
        );
    }

    #[test]
    fn observe_promotes_everything_and_stays_ready() {
        let mut g = Gate::new(base("^2", |r| r.mode = Some("observe".into())), false);
        assert!(g.status(reload_view()).ready);
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { reload: true }
        );
        let s = g.status(reload_view());
        assert!(s.ready && s.started);
        assert_eq!(s.active.unwrap().verdict, Verdict::TooNew);
        assert_eq!(
            step(&mut g, &Observed::Missing("x".into())),
            Action::Nothing
        );
        assert!(g.status(reload_view()).ready);
    }

    #[test]
    fn restart_with_same_content_neither_writes_nor_reloads() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        g.adopt_on_disk(&cfg("2.0.0"), now());
        assert!(g.status(reload_view()).started);
        assert_eq!(step(&mut g, &cfg("2.0.0")), Action::Nothing);
        assert_eq!(
            step(&mut g, &cfg("2.0.1")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn on_disk_config_no_longer_accepted_is_not_active() {
        let mut g = Gate::new(base("^3", |_| {}), false);
        g.adopt_on_disk(&cfg("2.0.0"), now());
        assert!(!g.status(reload_view()).started);
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn gate_only_does_not_reload_the_first_config() {
        let mut g = Gate::new(base("^2", |_| {}), true);
        assert_eq!(
            step(&mut g, &cfg("2.0.0")),
            Action::Promote { reload: false }
        );
        assert_eq!(
            step(&mut g, &cfg("2.0.1")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn widened_range_via_annotation_promotes_the_held_snapshot() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        step(&mut g, &cfg("2.0.0"));
        assert_eq!(step(&mut g, &cfg("3.0.0")), Action::Nothing);
        let ann = Annotations::from([(
            crate::settings::ANN_ACCEPTS.to_owned(),
            ">=2, <4".to_owned(),
        )]);
        assert!(g.set_annotations(Ok(ann)));
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn bad_annotation_is_not_ready_and_named_but_keeps_settings() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        step(&mut g, &cfg("2.0.0"));
        let ann = Annotations::from([(crate::settings::ANN_ACCEPTS.to_owned(), "two".to_owned())]);
        assert!(!g.set_annotations(Ok(ann)));
        let s = g.status(reload_view());
        assert!(!s.ready);
        assert!(
            s.reason.contains("confgate.io/accepts \"two\""),
            "{}",
            s.reason
        );
        assert_eq!(s.accepts.as_deref(), Some("^2"));
        g.set_annotations(Err("annotations file line 3: bad".into()));
        assert!(g.status(reload_view()).reason.contains("line 3"));
        g.set_annotations(Ok(Annotations::new()));
        assert!(g.status(reload_view()).ready);
    }

    #[test]
    fn failed_promotion_is_reported_and_not_active() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        step(&mut g, &cfg("2.0.0"));
        let (_, a) = g.decide(&cfg("2.1.0"));
        assert_eq!(a, Action::Promote { reload: true });
        g.promotion_failed("disk full".into());
        let s = g.status(reload_view());
        assert!(!s.ready && s.reason.contains("disk full"), "{s:?}");
        assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    }
}
