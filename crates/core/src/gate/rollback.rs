//! The phase of a rollback: the component refused a content, the config it applied last is judged
//! again under the settings in force and put back, or the refused content stays (no base, a base
//! that does not pass, a failed rollback tried again), and the reload it is owed.
//!
//! [`Rollbacks`] is this phase's part of the state, written only here: why a refused content stays
//! in place, and the rollback owed after a failure.
//!
//! The owed rollback is not a phase of the work in flight ([`Work`](super::state::Work)), by
//! choice: it waits for its retry (the retry deadline, or the safety re-read) while other work goes
//! on, a check under way or a promotion that would replace the refused content. Folded into `Work`,
//! each of those phases would have to carry it along. Kept here, it is a value of [`Left::Owed`]
//! only, beside the failure it is owed for, so an owed rollback with no failure shown, or beside a
//! base that does not pass, cannot be built. It is retried from the states it can overlap: the
//! work idle or a candidate under the checker (a switch or a rollback is answered before the next
//! input, so neither is in flight when the retry comes); [`Rollbacks::take_owed`] then hands it to
//! the work as a rollback in flight, which keeps the check it came in the middle of. A promotion
//! that replaces the refused content ends it ([`Rollbacks::replaced`]).

use super::messages::{Action, Count, LogLine, Now, RollbackFailure};
use super::problems::{BaseRefused, Stuck};
use super::reloads::Owed;
use super::state::{Gate, PROMOTE_RETRY, Rollback, modes};
use crate::reload::{BootTicks, Kind, Refusal};
use crate::settings::Reload;
use crate::snapshot::{ContentHash, Observed};
use crate::verdict::Verdict;

impl Gate {
    /// The component refused `sha`: remember that on disk (a restart must not offer it again), drop
    /// its owed reload, put back what it applied last, and tell it to load that again.
    pub(super) fn refused(&mut self, sha: ContentHash, refusal: Refusal, out: &mut Vec<Action>) {
        self.end_trial_refused(sha);
        let base = self.rejected_by_component(sha, &refusal);
        out.push(Action::Count(Count::Candidate(
            Verdict::RejectedByComponent,
        )));
        // Recorded before the rollback: stopped in between, the next start finds the refused
        // content in place and finishes the rollback, rather than offering it again.
        if !self.setup.gate_only() {
            out.push(Action::RecordRejected(self.rejected_record().to_vec()));
        }
        self.reloads.drop(sha);
        if !self.setup.gate_only() {
            out.push(Action::ClearReloadOwed { sha, refused: true });
        }
        match base.filter(|_| !self.setup.gate_only()) {
            Some(base) => self.roll_back(sha, base, refusal, out),
            None => self.no_base(sha, refusal, out),
        }
    }

    /// Asks to put `base`, the config the component applied last, back in place of `refused`,
    /// once it is judged again under the settings in force, like any candidate.
    pub(super) fn roll_back(
        &mut self,
        refused: ContentHash,
        base: ContentHash,
        refusal: Refusal,
        out: &mut Vec<Action>,
    ) {
        self.rollbacks.under_way();
        // A check under way goes on once the rollback is made.
        self.work.roll_back(Rollback {
            refused,
            base,
            refusal,
        });
        out.push(Action::JudgeBase {
            settings: Box::new(self.settings().clone()),
        });
    }

    /// A rollback that failed, tried again (its retry is due, or the safety re-read came).
    pub(super) fn retry_rollback(&mut self, out: &mut Vec<Action>) {
        if let Some(Rollback {
            refused,
            base,
            refusal,
        }) = self.rollbacks.take_owed()
        {
            self.retry.cancel();
            self.roll_back(refused, base, refusal, out);
        }
    }

    /// The rollback base judged under the settings in force: rolled back to when it passes;
    /// otherwise the refused content stays, and the pod says why, not ready.
    pub(super) fn base_judged(
        &mut self,
        obs: &Observed,
        j: &crate::verdict::Judgement,
        out: &mut Vec<Action>,
    ) {
        let Some(rb) = self.work.take_rollback() else {
            return;
        };
        match obs.hash() {
            // Its kept dir is gone: there is nothing to roll back to.
            None => self.lost_base(rb.refused, rb.refusal, out),
            Some(h) if h == rb.base && self.passes(obs, j) => {
                self.work.roll_back(rb);
                out.push(Action::RollBack);
            }
            Some(h) => {
                let why = if h == rb.base {
                    BaseRefused::Judged {
                        version: j.version.clone(),
                        verdict: j.verdict,
                        reason: j.reason.clone(),
                    }
                } else {
                    BaseRefused::OtherContent
                };
                self.rollbacks.stays(Stuck::BaseNotAccepted(why.clone()));
                out.push(Action::Log(LogLine::BaseNotAccepted {
                    sha: rb.refused,
                    base: rb.base,
                    why,
                }));
            }
        }
    }

    /// The component refused `sha` and no config it applied is kept to roll back to: said so, and
    /// held (ready under `hold`), the refused content in place.
    fn no_base(&mut self, sha: ContentHash, refusal: Refusal, out: &mut Vec<Action>) {
        out.push(Action::Log(LogLine::NoBase { sha, refusal }));
    }

    /// What the gate took for the rollback base is not kept on disk (its record was damaged or
    /// never written): there is none, and the refusal of `sha` is held as one without a base.
    fn lost_base(&mut self, sha: ContentHash, refusal: Refusal, out: &mut Vec<Action>) {
        self.base_lost();
        self.no_base(sha, refusal, out);
    }

    /// The rollback's result: the applied config back in place, its reload owed like a
    /// promotion's, until done.
    pub(super) fn rolled_back_to(
        &mut self,
        r: Result<(Observed, Option<BootTicks>), RollbackFailure>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(Rollback {
            refused,
            base,
            refusal,
        }) = self.work.take_rollback()
        else {
            return;
        };
        match r {
            Ok((holds, promoted_at)) if holds.hash() == Some(base) => {
                // The modes of what is in place now are what a later snapshot is compared with.
                self.rolled_back(modes(&holds));
                let version = self.applied_version();
                out.push(Action::Log(LogLine::RolledBack {
                    sha: refused,
                    refusal,
                    to: base,
                    version: version.clone(),
                }));
                if self.settings().reload != Reload::None {
                    out.push(Action::MarkReloadOwed(base));
                }
                self.reloads.owe(Owed {
                    kind: Kind::Reload,
                    sha: base,
                    version,
                    promoted_at,
                });
                self.send_owed(out);
            }
            Ok(_) => {
                out.push(Action::Log(LogLine::RollbackOther { sha: refused }));
                self.rollbacks.stays(Stuck::LeftOther);
            }
            Err(RollbackFailure::NoBase(_)) => self.lost_base(refused, refusal, out),
            // Owed work, like a failed promotion: tried again until the dir holds what the
            // component accepted.
            Err(RollbackFailure::Failed(error)) => {
                out.push(Action::Log(LogLine::RollbackFailed {
                    sha: refused,
                    error: error.clone(),
                    retry_in: PROMOTE_RETRY,
                }));
                self.rollbacks.owed(
                    error,
                    Rollback {
                        refused,
                        base,
                        refusal,
                    },
                );
                self.retry.after_failure(now.at);
            }
        }
    }
}

/// Why a refused content stays in place, and the rollback owed: the rollback phase's part of the
/// [`Gate`], written only by this file.
#[derive(Debug, Clone, Default)]
pub(super) struct Rollbacks {
    left: Left,
}

/// What a refusal left in the promoted dir, as far as no rollback under way will change it.
#[derive(Debug, Clone, Default)]
enum Left {
    /// Nothing: what the component accepted is in place, or a first rollback is under way.
    #[default]
    Nothing,
    /// The refused content stays, for this reason; nothing is tried again by itself (a rollback
    /// that failed and is being tried again stays here as `Stuck::Failed` until it is answered).
    Stays(Stuck),
    /// The rollback failed and is owed: tried again at the retry, unless a promotion replaces the
    /// refused content first.
    Owed {
        failed: crate::promote::Failure,
        rollback: Rollback,
    },
}

impl Rollbacks {
    /// Why the refused content stays in place, as the status shows it.
    pub(super) fn stuck(&self) -> Option<Stuck> {
        match &self.left {
            Left::Nothing => None,
            Left::Stays(why) => Some(why.clone()),
            Left::Owed { failed, .. } => Some(Stuck::Failed(failed.clone())),
        }
    }

    /// A rollback is asked for: one owed is no longer (the failure is shown until it is answered).
    fn under_way(&mut self) {
        if let Left::Owed { failed, .. } = std::mem::take(&mut self.left) {
            self.left = Left::Stays(Stuck::Failed(failed));
        }
    }

    /// The rollback owed, taken to be tried again now.
    fn take_owed(&mut self) -> Option<Rollback> {
        match std::mem::take(&mut self.left) {
            Left::Owed { failed, rollback } => {
                self.left = Left::Stays(Stuck::Failed(failed));
                Some(rollback)
            }
            other => {
                self.left = other;
                None
            }
        }
    }

    /// The refused content stays, for this reason.
    fn stays(&mut self, why: Stuck) {
        self.left = Left::Stays(why);
    }

    /// The rollback failed: owed, and tried again.
    fn owed(&mut self, failed: crate::promote::Failure, rollback: Rollback) {
        self.left = Left::Owed { failed, rollback };
    }

    /// The config the component applied is back in place.
    pub(super) fn put_back(&mut self) {
        self.left = Left::Nothing;
    }

    /// A promotion replaced the refused content: nothing stays, and nothing is owed.
    pub(super) fn replaced(&mut self) {
        self.left = Left::Nothing;
    }
}
