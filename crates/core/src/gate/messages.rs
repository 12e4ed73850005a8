//! What the [`Gate`](super::state::Gate) is told and what it answers: each [`Event`] comes with
//! the time it is handled at ([`Now`]), and the answer is the [`Action`]s the pipeline carries out,
//! with the requests, counts and log lines they carry. Plain data: no decision is made here.

use std::time::Instant;

use crate::annotations::Annotations;
use crate::known_good::{ComponentRead, Recorded};
use crate::reload::{BootTicks, Kind, Outcome, Refusal};
use crate::rollout::Bucket;
use crate::settings::{Confirm, Mode, Reload, Settings, Validate};
use crate::snapshot::{ContentHash, Observed, Snapshot};
use crate::state::{Notice, Rollout, RolloutView, SourceView};
use crate::validate::Checked;
use crate::values::SchemeVersion;
use crate::variants::Choice;
use crate::verdict::{Judgement, Verdict};

/// The time an event is handled at: the loop's monotonic clock for deadlines, the wall clock for
/// what the status shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub at: Instant,
    pub wall: jiff::Timestamp,
}

/// What to look at again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Files {
    /// The annotations file.
    pub annotations: bool,
    /// The config (the volume, or the feed's newest snapshot).
    pub config: bool,
}

impl Files {
    pub const CONFIG: Files = Files {
        annotations: false,
        config: true,
    };
    pub const ALL: Files = Files {
        annotations: true,
        config: true,
    };
}

/// What was last judged, to skip re-judging identical input. Holds no content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Hash(ContentHash),
    Other(Observed),
}

impl Seen {
    pub fn of(obs: &Observed) -> Seen {
        match obs {
            Observed::Config(s) => Seen::Hash(s.hash()),
            other => Seen::Other(other.clone()),
        }
    }
}

/// Why the newest config is judged again even if it reads as what was judged last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anew {
    /// This pod's share of the reload spread is over: the change waiting for it is promoted now.
    SpreadDue,
    /// A check that gave no answer is run again.
    CheckAgain,
    /// The settings in force changed.
    SettingsChanged,
    /// The component refused a rollout's candidate: this pod's set is the stable one now.
    CandidateRefused,
    /// The promoted dir was changed behind confgate's back: the config in force is promoted again.
    Repair,
    /// A promotion failed: it is tried again.
    PromotionFailed,
}

/// What a previous run left in the promoted dir, read and judged at start-up under the settings in
/// force.
#[derive(Debug, Clone)]
pub struct Found {
    pub on_disk: Observed,
    pub judgement: Judgement,
    /// The contents the component refused, oldest first.
    pub refused: Vec<(ContentHash, Refusal)>,
    /// The config the component applied last, its judgement, and since when.
    pub applied: Option<(Observed, Judgement, Option<jiff::Timestamp>)>,
    /// The reload-owed marker.
    pub owed: Option<ContentHash>,
    /// The variant keys the config on disk and the applied one were promoted from, as recorded.
    pub variants: (Option<String>, Option<String>),
}

/// Everything the gate is told: what changed, and what an action read or did.
#[derive(Debug, Clone)]
pub enum Event {
    /// At start-up, the annotations file as read (no grace period: nothing was in force before).
    Start(Result<Option<Annotations>, crate::annotations::ReadFailure>),
    /// Answer to [`Action::Adopt`].
    Adopted(Box<Found>),
    /// The file watch or the feed says to look again.
    Files(Files),
    /// The safety re-read: everything is looked at again, and the promoted dir tidied.
    Resync,
    /// A deadline of [`Gate::wake_at`](super::state::Gate::wake_at) has come.
    Timer,
    /// Answer to [`Action::ReadAnnotations`].
    Annotations(Result<Option<Annotations>, crate::annotations::ReadFailure>),
    /// Answer to [`Action::Judge`]: what was read, and what it was judged (`None`: identical to the
    /// last judged, not judged again), with the rollout in it as this pod sees it; `small`: what
    /// was read is small ([`is_small`](super::small::is_small)), so the next read may be made on
    /// the loop.
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
    /// Answer to [`Action::VerifyPromoted`]: what the promoted dir holds now.
    Verified(Observed),
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
    /// Answer to [`Action::ReadComponent`]: the component's containers as the pod says now.
    Component(ComponentRead),
    /// Answer to [`Action::RecordKnownGood`].
    Recorded(Recorded),
    /// Answer to [`Action::ReadKnownGood`]: the record's name and the config of each of its lines,
    /// or why there is none.
    KnownGoodRead(Result<(String, Vec<Snapshot>), String>),
    /// Answer to [`Action::JudgeKnownGood`]: each config with its judgement.
    KnownGoodJudged(Vec<(Snapshot, Judgement)>),
    /// The file watch: errors counted since the last report, and why the config dir is not watched.
    Watch {
        errors: u64,
        problem: Option<String>,
    },
}

/// Why a rollback did not put the applied config back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackFailure {
    /// No config the component applied is kept in the promoted dir (its record is gone or was
    /// never written): there is nothing to roll back to.
    NoBase(crate::promote::Failure),
    /// The rollback could not be made (a full disk); it is tried again.
    Failed(crate::promote::Failure),
}

/// What says the component runs a config, as the log says it: only an answer or its metrics confirm;
/// a signal without a confirmation is only known to have been sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppliedBy {
    /// Its reload endpoint answered 2xx.
    Answer,
    /// Its metrics said the reload succeeded (`confirm`).
    Metrics,
    /// The signal was delivered; nothing confirms the component loaded the config.
    SignalSent,
    /// No process needed telling: each read it at start.
    Start,
}

/// A reload (or start-up check) to send to the reload worker: the target and confirmation in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadRequest {
    pub kind: Kind,
    pub target: Reload,
    pub confirm: Option<Confirm>,
    pub sha: ContentHash,
    pub version: Option<String>,
    pub promoted_at: Option<BootTicks>,
}

/// What the pipeline carries out, in order. An action that reads or writes answers with an event,
/// handled before the next action (depth first), so the order of the list is the order of effects.
#[derive(Debug, Clone)]
pub enum Action {
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
        /// Why it is judged whatever it is, when that is for a reason (the log says it).
        anew: Option<Anew>,
        bucket: Option<Bucket>,
        refused: Vec<(ContentHash, Refusal)>,
        on_loop: bool,
    },
    /// Read the promoted dir back, to compare it with what was promoted: answer [`Event::Verified`].
    VerifyPromoted,
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
    /// End the check under way, without its answer: a newer snapshot superseded its candidate.
    CancelCheck,
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
        /// What says so, for the log line.
        by: AppliedBy,
    },
    /// The component ran the first config, kept as the baseline: it becomes the rollback base.
    AdoptBaseline,
    /// Read the config the component applied last back from its kept dir and judge it under
    /// `settings`: answer [`Event::BaseJudged`].
    JudgeBase { settings: Box<Settings> },
    /// Replace the promoted dir's record of refused contents.
    RecordRejected(Vec<(ContentHash, Refusal)>),
    /// Replace the promoted dir's record of the annotations' values in force (by annotation), which a
    /// restart keeps where an annotation is bad.
    RecordSettings(Annotations),
    /// Write the reload-owed marker for `sha`.
    MarkReloadOwed(ContentHash),
    /// Remove the reload-owed marker if it is `sha`'s; `refused`: because the component refused it.
    ClearReloadOwed { sha: ContentHash, refused: bool },
    /// Put the applied config back in the promoted dir: answer [`Event::RolledBack`].
    RollBack,
    /// Finish tidying the promoted dir, if a promotion could not.
    Tidy,
    /// Read the component's containers (ready, restarts) from the pod: answer [`Event::Component`],
    /// at once or later, through the pipeline's input.
    ReadComponent,
    /// Record the applied config `sha` (its dir, read back) as the known-good of its version line:
    /// answer [`Event::Recorded`], at once or later.
    RecordKnownGood {
        sha: ContentHash,
        version: String,
        parsed: SchemeVersion,
    },
    /// Read the known-good record beside the source: answer [`Event::KnownGoodRead`], at once or
    /// later.
    ReadKnownGood,
    /// Judge each of `configs` under `settings`, as any candidate: answer [`Event::KnownGoodJudged`].
    JudgeKnownGood {
        settings: Box<Settings>,
        configs: Vec<Snapshot>,
    },
    /// Tell the pod reporter what an operator acts on ([`Notice`]).
    Notice(Notice),
    /// Count in the metrics.
    Count(Count),
    /// Log one line.
    Log(LogLine),
}

/// A metric to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Candidate(Verdict),
    Promoted(jiff::Timestamp),
    PromotionFailed,
    WatchErrors(u64),
    /// The promoted dir was found changed behind confgate's back, and is promoted again.
    Repaired,
}

/// The "judged" log line of one decision. Holds no content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgedLine {
    pub accepted: bool,
    pub verdict: Verdict,
    pub version: String,
    /// The variant key chosen, with the variants setting; empty without.
    pub variant: String,
    pub sha: String,
    pub reason: String,
}

/// One log line the gate asks for: what it decided or learnt, with the facts the line shows.
// `pub` like the rest of this file: the edge's `gate/logs.rs` words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLine {
    Judged(JudgedLine),
    /// The component's checker ran on a candidate: `reason` is `None` when it passed.
    Validated {
        version: String,
        sha: String,
        checker: String,
        reason: Option<String>,
    },
    /// The component's checker timed out or could not run: no answer on the candidate, which is held
    /// and checked again after a wait.
    CheckNotAnswered {
        version: String,
        sha: String,
        checker: String,
        reason: String,
    },
    /// The promoted dir no longer holds what was promoted (`found`: its hash now, if it reads as a
    /// config): it is promoted again.
    Tampered {
        expected: String,
        found: Option<String>,
    },
    /// A newer snapshot superseded the candidate under check: its check is ended.
    CheckSuperseded {
        sha: String,
        version: String,
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
    Problem(super::problems::SettingsProblem),
    ProblemCleared(super::problems::SettingsProblem),
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
        refusal: Refusal,
    },
    RolledBack {
        sha: ContentHash,
        refusal: Refusal,
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
        why: super::problems::BaseRefused,
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
    /// A known-good trial began: the component applied `sha`.
    TrialStarted {
        sha: ContentHash,
        version: String,
        trial: std::time::Duration,
    },
    /// The period ended with the component restarted or not ready: it begins again.
    TrialAgain {
        sha: ContentHash,
        restarted: bool,
        ready: bool,
    },
    /// The component could not be read this time: the period begins again.
    TrialReadFailed {
        sha: ContentHash,
        why: String,
    },
    /// The component cannot be read at all: nothing is recorded.
    TrialUnavailable {
        why: String,
    },
    /// The trial passed: recording it.
    TrialPassed {
        sha: ContentHash,
        version: String,
        line: String,
    },
    /// No known-good to start on: why.
    NoKnownGood {
        why: String,
    },
    /// The source holds nothing accepted: starting on the known-good.
    KnownGoodStart {
        sha: ContentHash,
        version: Option<String>,
        record: String,
        because: Verdict,
        reason: String,
    },
    /// What the record's write did.
    KnownGood {
        sha: ContentHash,
        version: String,
        outcome: Recorded,
    },
    /// A change is seen and put off by this pod's share of the reload spread: promoted at `due`.
    Spread {
        version: String,
        sha: String,
        due: jiff::Timestamp,
        delay: std::time::Duration,
        spread: std::time::Duration,
    },
}
