//! [`Gate`]: the pure decision state, driven by one [`Event`] at a time through [`Gate::handle`],
//! which answers with the [`Action`]s the pipeline carries out. No I/O, no clock: the time an event
//! is handled at comes in as [`Now`], and what an action reads or writes comes back as an event.
//!
//! - `decide`: the verdict state: what each snapshot leads to, what is active, on disk, applied
//!   and refused.
//! - `grace`: the annotations file's grace period.
//! - `reloads`: the reload owed to the component, and what the reload worker reported.
//! - `spread`: a change's promotion put off by this pod's share of the reload spread.
//! - `handle`: [`Gate::handle`], the one entry: events in, actions out.
//! - `status`: readiness checks, their text and the published status.

mod decide;
mod grace;
mod handle;
mod reloads;
mod spread;
mod status;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::annotations::Annotations;
use crate::reload::{BootTicks, Kind, Outcome};
use crate::rollout::Bucket;
use crate::settings::{Confirm, Mode, Reload, Settings, Validate};
use crate::snapshot::{ContentHash, Observed, Snapshot};
use crate::state::{HeldCandidate, Rollout, RolloutView, SourceView};
use crate::validate::Checked;
use crate::variants::Choice;
use crate::verdict::{Judgement, Verdict};

pub(crate) use decide::held_refusals;
pub(crate) use grace::ANNOTATIONS_GRACE;
use grace::Grace;
use reloads::Reloads;
use spread::Spread;

/// After a failed promotion, when to try again.
pub(crate) const PROMOTE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Active {
    hash: ContentHash,
    version: Option<String>,
    since: jiff::Timestamp,
    verdict: Verdict,
    /// The variant key promoted, with the variants setting.
    variant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Newest {
    hash: Option<ContentHash>,
    modes: Modes,
    judgement: Judgement,
    variant: Option<String>,
}

/// How many contents the component rejected are remembered (and not offered to it again), in memory
/// and in the promoted dir's record.
pub(crate) const REJECTED_KEPT: usize = 8;
/// Key modes other than the default, as a snapshot carries them.
type Modes = BTreeMap<String, u32>;

fn modes(obs: &Observed) -> Modes {
    match obs {
        Observed::Config(s) => s.modes().clone(),
        _ => Modes::new(),
    }
}

/// What the component is told about a promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tell {
    /// Nothing: gate-only, the first config (the component read it itself at start).
    Silent,
    /// The first config promoted into an empty dir: the component, if it runs yet, reads it itself.
    /// A start-up check finds out whether it started on it, which makes it the rollback baseline.
    StartupCheck,
    /// It read older content: reload.
    Reload,
}

/// What a decision on a snapshot leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Keep what is in force: nothing to write, activate or tell.
    Keep,
    /// The content is already in place (or gate-only): mark it active, no write, no reload.
    Activate,
    /// Write it into the promoted dir, then mark it active, then tell the component as `tell` says.
    Promote { tell: Tell },
}

/// The time an event is handled at: the loop's monotonic clock for deadlines, the wall clock for
/// what the status shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    pub(crate) at: Instant,
    pub(crate) wall: jiff::Timestamp,
}

/// What to look at again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Files {
    /// The annotations file.
    pub(crate) annotations: bool,
    /// The config (the volume, or the feed's newest snapshot).
    pub(crate) config: bool,
}

impl Files {
    pub(crate) const CONFIG: Files = Files {
        annotations: false,
        config: true,
    };
    pub(crate) const ALL: Files = Files {
        annotations: true,
        config: true,
    };
}

/// What was last judged, to skip re-judging identical input. Holds no content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    Hash(ContentHash),
    Other(Observed),
}

impl Seen {
    pub(crate) fn of(obs: &Observed) -> Seen {
        match obs {
            Observed::Config(s) => Seen::Hash(s.hash()),
            other => Seen::Other(other.clone()),
        }
    }
}

/// What a rollout in the newest config means for the gate's decisions on one judged snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RolloutSeen {
    /// The candidate held on this pod: a held config, reported as any hold is.
    held: Option<HeldCandidate>,
    /// When the choice is the candidate: the hash of its own keys, which a refusal of it is
    /// remembered by too.
    candidate: Option<ContentHash>,
}

impl RolloutSeen {
    fn of(rollout: Option<&Rollout>) -> RolloutSeen {
        RolloutSeen {
            held: rollout.and_then(|r| r.held.clone()),
            candidate: rollout.and_then(Rollout::promoting_candidate),
        }
    }
}

/// The most bytes, and keys, of a config read and judged on the loop itself: reading and judging
/// that much takes well under a millisecond, against up to 1 MiB in 8192 keys for a ConfigMap.
pub(crate) const SMALL_BYTES: usize = 64 << 10;
pub(crate) const SMALL_KEYS: usize = 64;

/// Whether `obs` is small enough to be read and judged on the loop ([`SMALL_BYTES`], [`SMALL_KEYS`]).
/// A missing or broken config is: nothing of it was judged.
pub(crate) fn is_small(obs: &Observed) -> bool {
    match obs {
        Observed::Config(s) => is_small_snapshot(s),
        _ => true,
    }
}

fn is_small_snapshot(s: &Snapshot) -> bool {
    s.files().len() <= SMALL_KEYS && s.files().values().map(Vec::len).sum::<usize>() <= SMALL_BYTES
}

/// What a previous run left in the promoted dir, read and judged at start-up under the settings in
/// force.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) on_disk: Observed,
    pub(crate) judgement: Judgement,
    /// The contents the component refused, oldest first.
    pub(crate) refused: Vec<(ContentHash, String)>,
    /// The config the component applied last, its judgement, and since when.
    pub(crate) applied: Option<(Observed, Judgement, Option<jiff::Timestamp>)>,
    /// The reload-owed marker.
    pub(crate) owed: Option<ContentHash>,
    /// The variant keys the config on disk and the applied one were promoted from, as recorded.
    pub(crate) variants: (Option<String>, Option<String>),
}

/// Everything the gate is told: what changed, and what an action read or did.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// At start-up, the annotations file as read (no grace period: nothing was in force before).
    Start(Result<Option<Annotations>, crate::annotations::ReadFailure>),
    /// Answer to [`Action::Adopt`].
    Adopted(Box<Found>),
    /// The file watch or the feed says to look again.
    Files(Files),
    /// The safety re-read: everything is looked at again, and the promoted dir tidied.
    Resync,
    /// A deadline of [`Gate::wake_at`] has come.
    Timer,
    /// Answer to [`Action::ReadAnnotations`].
    Annotations(Result<Option<Annotations>, crate::annotations::ReadFailure>),
    /// Answer to [`Action::Judge`]: what was read, and what it was judged (`None`: identical to the
    /// last judged, not judged again), with the rollout in it as this pod sees it; `small`: what
    /// was read is small ([`is_small`]), so the next read may be made on the loop.
    Judged {
        seen: Seen,
        // Boxed: a choice is most of the event's size, and the other events are small.
        choice: Option<Box<Choice>>,
        rollout: Option<Rollout>,
        small: bool,
    },
    /// Answer to [`Action::Validate`]: what the component's checker said of the staged `sha`.
    Validated { sha: ContentHash, checked: Checked },
    /// Answer to [`Action::RejudgeActive`]: the promoted dir read back, and its judgement.
    Rejudged(Observed, Judgement),
    /// Answer to [`Action::Switch`]: the new config is live (with the boot clock right after), or
    /// why the promotion failed.
    Switched(Result<Option<BootTicks>, crate::promote::Failure>),
    /// Answer to [`Action::JudgeBase`]: the config the component applied last, read back from its
    /// kept dir, and its judgement under the settings in force.
    BaseJudged(Observed, Judgement),
    /// Answer to [`Action::RollBack`]: what the promoted dir holds now (with the boot clock right
    /// after), or why the rollback failed.
    RolledBack(Result<(Observed, Option<BootTicks>), RollbackFailure>),
    /// The reload worker's report of an attempt.
    Reload(Outcome),
    /// The API source's view, shown in the status.
    Source(Option<SourceView>),
    /// The file watch: errors counted since the last report, and why the config dir is not watched.
    Watch {
        errors: u64,
        problem: Option<String>,
    },
}

/// Why a rollback did not put the applied config back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RollbackFailure {
    /// No config the component applied is kept in the promoted dir (its record is gone or was
    /// never written): there is nothing to roll back to.
    NoBase(crate::promote::Failure),
    /// The rollback could not be made (a full disk); it is tried again.
    Failed(crate::promote::Failure),
}

/// A reload (or start-up check) to send to the reload worker: the target and confirmation in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReloadRequest {
    pub(crate) kind: Kind,
    pub(crate) target: Reload,
    pub(crate) confirm: Option<Confirm>,
    pub(crate) sha: ContentHash,
    pub(crate) version: Option<String>,
    pub(crate) promoted_at: Option<BootTicks>,
}

/// What the pipeline carries out, in order. An action that reads or writes answers with an event,
/// handled before the next action (depth first), so the order of the list is the order of effects.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    /// Read what a previous run left in the promoted dir and judge it under `settings`: answer
    /// [`Event::Adopted`].
    Adopt { settings: Box<Settings> },
    /// Read the annotations file: answer [`Event::Annotations`].
    ReadAnnotations,
    /// Read the newest config and judge it under `settings` (a rollout in it for this pod's
    /// `bucket`, the candidate held when `refused` holds it), unless it is `unless`: answer
    /// [`Event::Judged`]. `on_loop`: the last read was small, so this one is read on the loop when
    /// its `stat` proves it small too, and judged there when small and without content rules.
    Judge {
        settings: Box<Settings>,
        unless: Option<Seen>,
        bucket: Option<Bucket>,
        refused: Vec<(ContentHash, String)>,
        on_loop: bool,
    },
    /// Read the promoted dir back and judge it under `settings`: answer [`Event::Rejudged`].
    RejudgeActive { settings: Box<Settings> },
    /// Write `snapshot` into the promoted dir and switch to it, writing the reload-owed marker first
    /// when `owe_reload`, and keeping the dir it replaces as the baseline when `keep_baseline` (the
    /// first config, whose start-up check has not concluded); keep the switch for
    /// [`Action::FinishSwitch`]. Answer [`Event::Switched`] (at once, `Ok`, without a promoted dir).
    Switch {
        snapshot: Snapshot,
        owe_reload: bool,
        /// The variant key it was chosen from (with the variants setting), recorded beside it.
        variant: Option<String>,
        keep_baseline: bool,
        /// A small config after a small one: switched on the loop, as it was read (its few files
        /// cost less than the two thread hand-offs on the way to the reload).
        on_loop: bool,
    },
    /// Stage `snapshot` beside the promoted dir's live config and run the component's checker `check`
    /// on it within `timeout`, off the runtime's thread: answer [`Event::Validated`].
    Validate {
        snapshot: Snapshot,
        check: Validate,
        timeout: std::time::Duration,
    },
    /// Send this request to the reload worker (the newest replaces an unsent one).
    Reload(ReloadRequest),
    /// Let the reload worker, on this thread, send what was just requested before the rest.
    Yield,
    /// Tidy after the switch: unlink vanished keys, remove the old dir; on the loop when the switch
    /// was.
    FinishSwitch { on_loop: bool },
    /// Keep the live dir as the rollback base: the component applied it.
    MarkApplied {
        sha: ContentHash,
        version: Option<String>,
    },
    /// The component ran the first config, kept as the baseline: it becomes the rollback base.
    AdoptBaseline,
    /// Read the config the component applied last back from its kept dir and judge it under
    /// `settings`: answer [`Event::BaseJudged`].
    JudgeBase { settings: Box<Settings> },
    /// Replace the promoted dir's record of refused contents.
    RecordRejected(Vec<(ContentHash, String)>),
    /// Write the reload-owed marker for `sha`.
    MarkReloadOwed(ContentHash),
    /// Remove the reload-owed marker if it is `sha`'s; `refused`: because the component refused it.
    ClearReloadOwed { sha: ContentHash, refused: bool },
    /// Put the applied config back in the promoted dir: answer [`Event::RolledBack`].
    RollBack,
    /// Finish tidying the promoted dir, if a promotion could not.
    Tidy,
    /// Count in the metrics.
    Count(Count),
    /// Log one line.
    Log(LogLine),
}

/// A metric to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    Candidate(Verdict),
    Promoted(jiff::Timestamp),
    PromotionFailed,
    WatchErrors(u64),
}

/// The "judged" log line of one decision. Holds no content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JudgedLine {
    pub(crate) accepted: bool,
    pub(crate) verdict: Verdict,
    pub(crate) version: String,
    /// The variant key chosen, with the variants setting; empty without.
    pub(crate) variant: String,
    pub(crate) sha: String,
    pub(crate) reason: String,
}

/// One log line the gate asks for: what it decided or learnt, with the facts the line shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LogLine {
    Judged(JudgedLine),
    /// The component's checker ran on a candidate: `reason` is `None` when it passed.
    Validated {
        version: String,
        sha: String,
        checker: String,
        reason: Option<String>,
    },
    /// The switch failed; the previous config is kept.
    PromotionFailed {
        error: crate::promote::Failure,
        version: String,
        sha: String,
    },
    Promoted {
        version: String,
        variant: String,
        sha: String,
    },
    /// A settings problem (a bad or unknown annotation) appeared.
    Problem(String),
    ProblemCleared(String),
    /// An annotation no longer overrides a setting: the flag's value is back.
    AnnotationGone {
        setting: &'static str,
        value: String,
    },
    AnnotationOverrides {
        setting: &'static str,
        annotation: &'static str,
        value: String,
        overrides: String,
    },
    SettingsChanged {
        accepts: Option<String>,
        mode: Mode,
        reload: Reload,
    },
    /// The annotations file, missing for a moment, was read again.
    AnnotationsBack,
    /// The annotations file that existed cannot be read; the settings in force stay for the grace
    /// period.
    AnnotationsMissing {
        why: String,
    },
    /// The annotations file is still absent after the grace period: its settings no longer apply.
    AnnotationsGone {
        changed: bool,
    },
    /// After a settings change, the active config no longer passes.
    NoLongerActive {
        sha: String,
    },
    /// At start-up, the config the component applied before is the rollback base again.
    AppliedBase {
        sha: ContentHash,
        version: Option<String>,
    },
    /// At start-up, a reload owed before the restart, requested now.
    OwedFromBefore {
        sha: ContentHash,
        version: Option<String>,
    },
    /// At start-up, a reload owed before the restart of content the component refused: not sent.
    OwedRefused {
        sha: ContentHash,
    },
    /// The reload target changed: the refusals made under the one before are not held against those
    /// contents any more (a wrong target's answer was no verdict on them).
    RefusalsForgotten {
        count: usize,
    },
    /// At start-up, the promoted dir holds content the component refused: rolling back.
    RefusedInPlace {
        sha: ContentHash,
    },
    /// The component refused `sha`, and no config it applied is known to roll back to.
    NoBase {
        sha: ContentHash,
        reason: String,
    },
    RolledBack {
        sha: ContentHash,
        reason: String,
        to: ContentHash,
        version: Option<String>,
    },
    RollbackOther {
        sha: ContentHash,
    },
    RollbackFailed {
        sha: ContentHash,
        error: crate::promote::Failure,
        retry_in: std::time::Duration,
    },
    /// The config the component applied last does not pass under the settings in force: no
    /// rollback to it; `sha` stays in place.
    BaseNotAccepted {
        sha: ContentHash,
        base: ContentHash,
        why: String,
    },
    /// The component answered a reload of later content: it is up, and ran the first config
    /// (`sha`), which is the rollback base now.
    BaselineApplied {
        sha: ContentHash,
        version: Option<String>,
    },
    /// The config dir's watch is not in place (`Some`, why), or is again (`None`).
    Watch(Option<String>),
    /// The rollout in the newest config, as this pod sees it, changed.
    Rollout(Box<RolloutView>),
    /// The newest config holds no rollout any more.
    RolloutOver,
    /// A change is seen and put off by this pod's share of the reload spread: promoted at `due`.
    Spread {
        version: String,
        sha: String,
        due: jiff::Timestamp,
        delay: std::time::Duration,
        spread: std::time::Duration,
    },
}

/// A promotion whose switch was asked for and not yet answered.
#[derive(Debug, Clone)]
struct Promotion {
    judged: JudgedLine,
    tell: Tell,
    /// The dir it replaces is kept as the baseline.
    keep_baseline: bool,
    sha: ContentHash,
    version: Option<String>,
    /// Switched on the loop: finished there too.
    on_loop: bool,
}

/// A judged snapshot whose promotion waits for the component's checker.
#[derive(Debug, Clone)]
struct Checking {
    seen: Seen,
    choice: Choice,
    rollout: RolloutSeen,
    sha: ContentHash,
}

/// What the component's checker last said: of which content, under which setting, and why it
/// refused (`None`: it passed).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CheckedBy {
    sha: ContentHash,
    check: Validate,
    refused: Option<String>,
}

/// A rollback asked for and not yet answered.
#[derive(Debug, Clone)]
struct Rollback {
    refused: ContentHash,
    base: ContentHash,
    reason: String,
}

/// The pure decision state.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    base: Settings,
    settings: Settings,
    problems: Vec<String>,
    gate_only: bool,
    /// What the promoted dir holds (promote mode only), with the key modes: a mode-only change has the
    /// same content hash but must still be promoted.
    on_disk: Option<(ContentHash, Modes)>,
    /// The key modes of the active config.
    active_modes: Modes,
    /// Why the settings in force are not what the annotations file says now (reported, not failing).
    annotations_note: Option<String>,
    active: Option<Active>,
    newest: Option<Newest>,
    promote_error: Option<String>,
    /// Why the refused content stays in place (a rollback failed, or its base does not pass).
    rollback_error: Option<String>,
    /// A rollback that failed, tried again at `retry_at`.
    rollback_owed: Option<Rollback>,
    started: bool,
    /// The config the component confirmed it runs.
    applied: Option<Active>,
    /// The first config promoted into an empty dir, while nothing says yet whether the component
    /// started on it; `first_kept`: its dir is kept beside a later promotion (the baseline).
    first: Option<Active>,
    first_kept: bool,
    /// Contents the component refused, newest last, with its reason.
    rejected: Vec<(ContentHash, String)>,
    /// The annotations file's presence, and its grace period.
    grace: Grace,
    /// The reload owed, and the reload worker's reports.
    reloads: Reloads,
    /// What was last judged; `None` makes the next read judged whatever it is.
    last: Option<Seen>,
    /// When a failed promotion is to be tried again.
    retry_at: Option<Instant>,
    /// The config is to be looked at once the annotations file asked for is read.
    config_wanted: bool,
    promoting: Option<Promotion>,
    rolling_back: Option<Rollback>,
    /// The API source's view, as last reported.
    source: Option<SourceView>,
    /// Why the config dir is not watched, if it is not.
    watch_error: Option<String>,
    /// This pod's place in the fleet, which sets its share of the reload spread.
    bucket: Option<Bucket>,
    /// A change waiting for this pod's share of the reload spread.
    spread: Option<Spread>,
    /// A promotion waiting for the component's checker.
    checking: Option<Box<Checking>>,
    /// What the checker last said.
    checked: Option<CheckedBy>,
    /// The content is a Secret's: a checker's output, which may quote it, is not shown.
    secret: bool,
    /// The rollout candidate held on this pod, as last decided on.
    held: Option<HeldCandidate>,
    /// The rollout in the newest config, as this pod sees it (shown in the status).
    rollout: Option<Rollout>,
    /// Whether the last config read was small ([`is_small`]): the next is then read on the loop.
    small_before: bool,
    /// The last rollout candidate promoted: its set's hash and its own keys' hash.
    candidate: Option<(ContentHash, ContentHash)>,
    /// This pod's share of the spread was waited out and the promotion is not made yet (it failed):
    /// its retry does not wait again.
    spread_served: bool,
    /// Per setting of [`crate::settings::SETTINGS`], whether the annotations give it a valid value.
    annotated: Vec<bool>,
}

impl Gate {
    /// `base` is the flag/env/default settings; `gate_only` when there is no promoted dir.
    pub(crate) fn new(base: Settings, gate_only: bool) -> Gate {
        Gate {
            settings: base.clone(),
            base,
            problems: Vec::new(),
            gate_only,
            on_disk: None,
            active_modes: Modes::new(),
            annotations_note: None,
            active: None,
            newest: None,
            promote_error: None,
            rollback_error: None,
            rollback_owed: None,
            started: false,
            applied: None,
            first: None,
            first_kept: false,
            rejected: Vec::new(),
            grace: Grace::default(),
            reloads: Reloads::default(),
            last: None,
            retry_at: None,
            config_wanted: false,
            promoting: None,
            rolling_back: None,
            source: None,
            watch_error: None,
            bucket: None,
            spread: None,
            checking: None,
            checked: None,
            secret: false,
            spread_served: false,
            held: None,
            rollout: None,
            small_before: false,
            candidate: None,
            annotated: Vec::new(),
        }
    }

    /// The content is a Secret's: a reason carries a checker's exit status only, never its output.
    pub(crate) fn with_secret_content(mut self, secret: bool) -> Gate {
        self.secret = secret;
        self
    }

    /// Names the annotations file in what the settings check says of its absence.
    pub(crate) fn with_annotations_file(mut self, file: &std::path::Path) -> Gate {
        self.grace = Grace::new(file.display().to_string());
        self
    }

    /// Places this pod in the fleet: its share of the reload spread follows the bucket (`None`: no
    /// identity, no share, so a change is promoted at once).
    pub(crate) fn with_bucket(mut self, bucket: Option<Bucket>) -> Gate {
        self.bucket = bucket;
        self
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }
}
