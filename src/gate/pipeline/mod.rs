//! [`Pipeline`]: the I/O around the pure [`Gate`]. It hands each event to [`Gate::handle`] and
//! carries out the actions that come back (`execute.rs`): reads (`reads.rs`), promotions, reload
//! requests, markers, metrics and logs. The only writer of the published status.
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
use tracing::{info, warn};

use super::config::Config;
use super::error::Error;
use super::feed::{Feed, off_loop, snapshot_changed, source_changed};
use super::known_good::{Answer, Link};
use super::machine::{Action, Event, Files, Gate, Now};
use crate::annotations;
use crate::promote::{Promoter, Switched};
use crate::reload::{self};
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
        // The cleanup of the promoted dir and the annotations read, off the loop's thread, which
        // answers `/livez`'s ping: the loop is live while a slow disk holds them up.
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

    /// Runs `work` on the promoted dir on the blocking pool, answering liveness pings meanwhile
    /// (`None` without a promoted dir). The loop waits for it: the dir's writes stay in order.
    async fn on_dir<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Promoter) -> T + Send + 'static,
    ) -> Option<T> {
        let p = self.promoter.clone()?;
        Some(off_loop(&self.shared, move || work(&p)).await)
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
        self.gate.wake_at().map(Instant::from_std)
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

/// Now, for the gate: the loop's clock (tokio's, so a test with paused time moves it), handed in
/// as a value.
fn now() -> Now {
    Now {
        at: Instant::now().into_std(),
        wall: jiff::Timestamp::now(),
    }
}

mod execute;
mod reads;
#[cfg(test)]
mod tests;
