//! The phase of a rollback: the component refused a content, the config it applied last is judged
//! again under the settings in force and put back, or the refused content stays (no base, a base
//! that does not pass, a failed rollback tried again), and the reload it is owed.

use super::messages::{Action, Count, LogLine, Now, RollbackFailure};
use super::problems::{BaseRefused, Stuck};
use super::reloads::Owed;
use super::state::{Gate, PROMOTE_RETRY, Rollback, Work, modes};
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
        if !self.gate_only {
            out.push(Action::RecordRejected(self.rejected_record().to_vec()));
        }
        self.reloads.drop(sha);
        if !self.gate_only {
            out.push(Action::ClearReloadOwed { sha, refused: true });
        }
        match base.filter(|_| !self.gate_only) {
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
        self.rollback_owed = None;
        // A check under way goes on once the rollback is made.
        let then = self.work.take_checking();
        self.work = Work::RollingBack {
            rollback: Rollback {
                refused,
                base,
                refusal,
            },
            then,
        };
        out.push(Action::JudgeBase {
            settings: Box::new(self.settings.clone()),
        });
    }

    /// A rollback that failed, tried again (its retry is due, or the safety re-read came).
    pub(super) fn retry_rollback(&mut self, out: &mut Vec<Action>) {
        if let Some(Rollback {
            refused,
            base,
            refusal,
        }) = self.rollback_owed.take()
        {
            self.retry_at = None;
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
                let then = self.work.take_checking();
                self.work = Work::RollingBack { rollback: rb, then };
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
                self.rollback_error = Some(Stuck::BaseNotAccepted(why.clone()));
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
        self.applied = None;
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
                if self.settings.reload != Reload::None {
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
                self.rollback_error = Some(Stuck::LeftOther);
            }
            Err(RollbackFailure::NoBase(_)) => self.lost_base(refused, refusal, out),
            // Owed work, like a failed promotion: tried again until the dir holds what the
            // component accepted.
            Err(RollbackFailure::Failed(error)) => {
                self.rollback_error = Some(Stuck::Failed(error.clone()));
                out.push(Action::Log(LogLine::RollbackFailed {
                    sha: refused,
                    error,
                    retry_in: PROMOTE_RETRY,
                }));
                self.rollback_owed = Some(Rollback {
                    refused,
                    base,
                    refusal,
                });
                self.retry_at = Some(now.at + PROMOTE_RETRY);
            }
        }
    }
}
