//! [`Gate`], the pure decision state, and the types of what it holds: the configs active and
//! newest, a promotion, a check or a rollback under way; and the bounds on what it keeps and when
//! it retries.
//!
//! The [`Gate`] is made of parts, each in the file of the handlers that write it (the settings in
//! force in `in_force.rs`, the verdicts in `decide.rs`, the rollbacks in `rollback.rs`, ...): a
//! part's fields are private to its file, so the compiler keeps one writer per piece of state; the
//! other files read it through accessors and change it only by the steps it names. The parts are
//! `pub(super)` fields, set whole only by the constructors here; nothing outside the gate sees
//! them. What the gate is set up for ([`Setup`]) and the work in flight ([`Work`]) are parts kept
//! here.
//!
//! Among the bounds: `REJECTED_KEPT` (8), the most refused contents remembered, newest kept, with
//! their reasons; they are written to the promoted dir before a rollback and read back at start-up.

use std::collections::BTreeMap;

use super::checking::Checks;
use super::decide::Verdicts;
use super::decision::Tell;
use super::fallback::KnownGoods;
use super::grace::Grace;
use super::in_force::InForce;
use super::messages::{Anew, JudgedLine, Seen};
use super::notices::Told;
use super::promotion::Retry;
use super::reads::Reads;
use super::reloads::Reloads;
use super::reported::Baseline;
use super::rollback::Rollbacks;
use super::rollouts::Rollouts;
use super::spread::Share;
use super::trial::Trials;
use crate::reload::Refusal;
use crate::rollout::Bucket;
use crate::settings::{Settings, Validate};
use crate::snapshot::{ContentHash, Observed};
use crate::state::{HeldCandidate, Rollout};
use crate::validate::Checked;
use crate::variants::Choice;
use crate::verdict::{Judgement, Verdict};

/// After a failed promotion, when to try again.
pub const PROMOTE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// How many contents the component rejected are remembered (and not offered to it again), in memory
/// and in the promoted dir's record.
pub const REJECTED_KEPT: usize = 8;

/// The pure decision state, in parts. Each part is a struct with private fields in the file of the
/// handlers that write it (named after the field, below), so only that file changes it: the
/// other files call its named steps or read it through `&` accessors. [`Gate::new`] and its `with_`
/// builders are the only code that sets a part whole.
#[derive(Debug, Clone)]
pub struct Gate {
    /// What the gate is set up for, fixed once it is built ([`Setup`], here).
    pub(super) setup: Setup,
    /// The settings in force and their problems ([`InForce`], `in_force.rs`).
    pub(super) in_force: InForce,
    /// What is active, on disk, newest, applied and refused ([`Verdicts`], `decide.rs`).
    pub(super) verdicts: Verdicts,
    /// The work in flight: one phase at a time, changed by its steps ([`Work`], here).
    pub(super) work: Work,
    /// What the checker last said, and its retry ([`Checks`], `checking.rs`).
    pub(super) checks: Checks,
    /// When a failed promotion or an owed rollback is tried again ([`Retry`], `promotion.rs`).
    pub(super) retry: Retry,
    /// Why a refused content stays in place, and the rollback owed ([`Rollbacks`], `rollback.rs`).
    pub(super) rollbacks: Rollbacks,
    /// The first config, until the component says it ran it ([`Baseline`], `reported.rs`).
    pub(super) baseline: Baseline,
    /// The reload owed, and the reload worker's reports ([`Reloads`], `reloads.rs`).
    pub(super) reloads: Reloads,
    /// What the loop reads and last judged ([`Reads`], `reads.rs`).
    pub(super) reads: Reads,
    /// The annotations file's presence, and its grace period ([`Grace`], `grace.rs`).
    pub(super) grace: Grace,
    /// This pod's share of the reload spread, and the change waiting for it ([`Share`], `spread.rs`).
    pub(super) share: Share,
    /// The rollout as this pod sees it ([`Rollouts`], `rollouts.rs`).
    pub(super) rollouts: Rollouts,
    /// The known-good from the record, asked for, checked and in use ([`KnownGoods`], `fallback.rs`).
    pub(super) known_goods: KnownGoods,
    /// The known-good trial and its record ([`Trials`], `trial.rs`).
    pub(super) trials: Trials,
    /// What a notice already told ([`Told`], `notices.rs`).
    pub(super) told: Told,
}

impl Gate {
    /// `base` is the flag/env/default settings; `gate_only` when there is no promoted dir.
    pub fn new(base: Settings, gate_only: bool) -> Gate {
        Gate {
            in_force: InForce::new(base),
            setup: Setup {
                gate_only,
                secret: false,
                source_kind: Default::default(),
            },
            reads: Reads::new(),
            rollouts: Rollouts::default(),
            retry: Retry::default(),
            baseline: Baseline::default(),
            checks: Checks::new(),
            share: Share::default(),
            known_goods: KnownGoods::default(),
            trials: Trials::default(),
            verdicts: Verdicts::default(),
            rollbacks: Rollbacks::default(),
            grace: Grace::default(),
            reloads: Reloads::default(),
            work: Work::default(),
            told: Told::default(),
        }
    }

    /// The annotations' values last in force before a restart, as the promoted dir's record holds
    /// them once checked again (`settings`: [`Settings::last_in_force`] over the base; `values`: the
    /// record's entries used): a bad annotation at start keeps these, as it would have kept them
    /// before the restart, rather than the flag's value.
    pub fn with_last_in_force(
        mut self,
        settings: Settings,
        values: crate::annotations::Annotations,
    ) -> Gate {
        self.in_force.last_in_force(settings, values);
        self
    }

    /// The content is a Secret's: a reason carries a checker's exit status only, never its output.
    pub fn with_secret_content(mut self, secret: bool) -> Gate {
        self.setup.secret = secret;
        self
    }

    /// The kind of the watched source, so that a reason's fix says what to change in it.
    pub fn with_source_kind(mut self, kind: crate::verdict::fix::Source) -> Gate {
        self.setup.source_kind = kind;
        self
    }

    /// Names the annotations file in what the settings check says of its absence.
    pub fn with_annotations_file(mut self, file: &std::path::Path) -> Gate {
        self.grace = Grace::new(file.display().to_string());
        self
    }

    /// Places this pod in the fleet: its share of the reload spread follows the bucket (`None`: no
    /// identity, no share, so a change is promoted at once).
    pub fn with_bucket(mut self, bucket: Option<Bucket>) -> Gate {
        self.share = Share::in_fleet(bucket);
        self
    }

    pub fn settings(&self) -> &Settings {
        self.in_force.settings()
    }
}

/// What the gate is set up for, fixed once it is built: written only by [`Gate::new`] and its
/// `with_` builders in this file.
#[derive(Debug, Clone)]
pub(super) struct Setup {
    /// No promoted dir: the gate only judges and tells.
    gate_only: bool,
    /// The content is a Secret's: a checker's output, which may quote it, is not shown.
    secret: bool,
    /// The kind of the watched source, which a reason's fix names.
    source_kind: crate::verdict::fix::Source,
}

impl Setup {
    /// No promoted dir: the gate only judges and tells.
    pub(super) fn gate_only(&self) -> bool {
        self.gate_only
    }

    /// The content is a Secret's: a checker's output, which may quote it, is not shown.
    pub(super) fn secret(&self) -> bool {
        self.secret
    }

    /// The kind of the watched source, which a reason's fix names.
    pub(super) fn source_kind(&self) -> crate::verdict::fix::Source {
        self.source_kind
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Active {
    pub(super) hash: ContentHash,
    pub(super) version: Option<String>,
    pub(super) since: jiff::Timestamp,
    pub(super) verdict: Verdict,
    /// The variant key promoted, with the variants setting.
    pub(super) variant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Newest {
    pub(super) hash: Option<ContentHash>,
    pub(super) modes: Modes,
    pub(super) judgement: Judgement,
    pub(super) variant: Option<String>,
}

/// Key modes other than the default, as a snapshot carries them.
pub(super) type Modes = BTreeMap<String, u32>;

pub(super) fn modes(obs: &Observed) -> Modes {
    match obs {
        Observed::Config(s) => s.modes().clone(),
        _ => Modes::new(),
    }
}

/// What a rollout in the newest config means for the gate's decisions on one judged snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RolloutSeen {
    /// The candidate held on this pod: a held config, reported as any hold is.
    pub(super) held: Option<HeldCandidate>,
    /// When the choice is the candidate: the hash of its own keys, which a refusal of it is
    /// remembered by too.
    pub(super) candidate: Option<ContentHash>,
}

impl RolloutSeen {
    pub(super) fn of(rollout: Option<&Rollout>) -> RolloutSeen {
        RolloutSeen {
            held: rollout.and_then(|r| r.held.clone()),
            candidate: rollout.and_then(Rollout::promoting_candidate),
        }
    }
}

/// What was last judged, so that identical input is not judged again; or why the next read is
/// judged whatever it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Last {
    /// Nothing judged yet.
    Nothing,
    Judged(Seen),
    Anew(Anew),
}

impl Last {
    /// What a read identical to is not judged again.
    pub(super) fn unless(&self) -> Option<Seen> {
        match self {
            Last::Judged(seen) => Some(seen.clone()),
            Last::Nothing | Last::Anew(_) => None,
        }
    }

    /// Why the next read is judged again, if it is for a reason.
    pub(super) fn anew(&self) -> Option<Anew> {
        match self {
            Last::Anew(why) => Some(*why),
            _ => None,
        }
    }
}

/// The gate's work in flight, one phase at a time: nothing, a candidate waiting for the component's
/// checker, a switch asked for, or a rollback asked for. A switch and a rollback are answered before
/// the next input (the pipeline carries actions out depth first); a check is answered later, and a
/// refusal that comes meanwhile rolls back first, the check going on after it. The phase is
/// private: the steps below are the only way from one to the next, so a rollback always keeps the
/// check it came in the middle of, and a switch or a rollback is taken only by its own answer.
#[derive(Debug, Clone, Default)]
pub(super) struct Work {
    now: InFlight,
}

#[derive(Debug, Clone, Default)]
enum InFlight {
    #[default]
    Idle,
    Checking(Box<Checking>),
    Promoting(Box<Promotion>),
    RollingBack {
        rollback: Rollback,
        /// The check the refusal came in the middle of.
        then: Option<Box<Checking>>,
    },
}

impl Work {
    /// Whether nothing is under way.
    pub(super) fn is_idle(&self) -> bool {
        matches!(self.now, InFlight::Idle)
    }

    /// The candidate waiting for the checker, also while a rollback comes first.
    pub(super) fn checking(&self) -> Option<&Checking> {
        match &self.now {
            InFlight::Checking(c) | InFlight::RollingBack { then: Some(c), .. } => Some(c),
            _ => None,
        }
    }

    /// The candidate waiting for the checker, while nothing else comes first.
    pub(super) fn checking_alone(&self) -> Option<&Checking> {
        match &self.now {
            InFlight::Checking(c) => Some(c),
            _ => None,
        }
    }

    /// The content under the checker read again: the newer read is kept for when it answers.
    pub(super) fn read_again(&mut self, seen: Seen, choice: Choice, rollout: RolloutSeen) {
        if let InFlight::Checking(c) = &mut self.now {
            c.seen = seen;
            c.choice = choice;
            c.rollout = rollout;
        }
    }

    /// A candidate goes to the component's checker.
    pub(super) fn check(&mut self, c: Checking) {
        self.now = InFlight::Checking(Box::new(c));
    }

    /// The check under way is cancelled: nothing is.
    pub(super) fn cancel_check(&mut self) {
        if let InFlight::Checking(_) = self.now {
            self.now = InFlight::Idle;
        }
    }

    /// A switch is asked for.
    pub(super) fn promote(&mut self, p: Promotion) {
        self.now = InFlight::Promoting(Box::new(p));
    }

    /// A rollback is asked for: a check under way goes on once it is made.
    pub(super) fn roll_back(&mut self, rollback: Rollback) {
        let then = self.take_checking();
        self.now = InFlight::RollingBack { rollback, then };
    }

    /// The check under way, taken: the work is then what is left of it.
    pub(super) fn take_checking(&mut self) -> Option<Box<Checking>> {
        match std::mem::take(&mut self.now) {
            InFlight::Checking(c) => Some(c),
            InFlight::RollingBack {
                rollback,
                then: Some(c),
            } => {
                self.now = InFlight::RollingBack {
                    rollback,
                    then: None,
                };
                Some(c)
            }
            other => {
                self.now = other;
                None
            }
        }
    }

    /// The switch asked for, taken: the work is then idle.
    pub(super) fn take_promotion(&mut self) -> Option<Box<Promotion>> {
        match std::mem::take(&mut self.now) {
            InFlight::Promoting(p) => Some(p),
            other => {
                self.now = other;
                None
            }
        }
    }

    /// The rollback asked for, taken: a check it came in the middle of goes on.
    pub(super) fn take_rollback(&mut self) -> Option<Rollback> {
        match std::mem::take(&mut self.now) {
            InFlight::RollingBack { rollback, then } => {
                self.now = then.map_or(InFlight::Idle, InFlight::Checking);
                Some(rollback)
            }
            other => {
                self.now = other;
                None
            }
        }
    }

    /// Whether a switch or a rollback is under way (the promoted dir is being changed).
    pub(super) fn changing_the_dir(&self) -> bool {
        matches!(
            self.now,
            InFlight::Promoting(_) | InFlight::RollingBack { .. }
        )
    }
}

/// A promotion whose switch was asked for and not yet answered.
#[derive(Debug, Clone)]
pub(super) struct Promotion {
    pub(super) judged: JudgedLine,
    pub(super) tell: Tell,
    /// The dir it replaces is kept as the baseline.
    pub(super) keep_baseline: bool,
    pub(super) sha: ContentHash,
    pub(super) version: Option<String>,
    /// Switched on the loop: finished there too.
    pub(super) on_loop: bool,
    /// The known-good from the record, not the source's newest config.
    pub(super) known_good: Option<KnownGoodUse>,
}

/// How long a check that timed out or could not run waits before it is run again: doubling from a
/// second (an init container still copying the checker) to a minute.
pub(super) const CHECK_BACKOFF: crate::backoff::Doubling = crate::backoff::Doubling::new(
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(60),
);

/// A judged snapshot whose promotion waits for the component's checker.
#[derive(Debug, Clone)]
pub(super) struct Checking {
    pub(super) seen: Seen,
    pub(super) choice: Choice,
    pub(super) rollout: RolloutSeen,
    pub(super) sha: ContentHash,
    /// The setting it runs under: a new one supersedes it.
    pub(super) check: Validate,
    /// When it began, for the status.
    pub(super) since: jiff::Timestamp,
}

/// What the component's checker last said: of which content, under which setting, and its answer.
/// An answer that is no verdict (it timed out or could not run) says nothing of the content, so it
/// is run again at the checks' retry (`retry_in` from the answer), never kept as a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CheckedBy {
    pub(super) sha: ContentHash,
    pub(super) check: Validate,
    pub(super) answer: Checked,
    pub(super) retry_in: Option<std::time::Duration>,
}

/// A rollback asked for and not yet answered: of the content refused, to `base`, for `refusal`.
#[derive(Debug, Clone)]
pub(super) struct Rollback {
    pub(super) refused: ContentHash,
    pub(super) base: ContentHash,
    pub(super) refusal: Refusal,
}

/// A known-good from the record, promoted because the source holds nothing accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KnownGoodUse {
    pub(super) hash: ContentHash,
    pub(super) modes: Modes,
    pub(super) judgement: Judgement,
    pub(super) record: String,
    /// The source's newest config's verdict and reason when it was promoted.
    pub(super) because: Verdict,
    pub(super) reason: String,
}
