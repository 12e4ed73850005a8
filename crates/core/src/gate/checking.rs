//! The phase of a candidate waiting for the component's checker: a check started, superseded by a
//! newer read, answered (passed, refused, or no answer: run again after a backoff), and the words a
//! held candidate shows for the checker's answer.

use super::messages::{Action, LogLine, Now, Seen};
use std::time::Instant;

use super::state::{CHECK_BACKOFF, CheckedBy, Gate, RolloutSeen};
use crate::snapshot::ContentHash;
use crate::validate::Checked;
use crate::variants::Choice;
use crate::verdict::{Judgement, Verdict};

impl Gate {
    /// Whether a check under way covers this read: the same content under the same checker goes
    /// on (the newer read is kept for when it answers, and `true`); anything else supersedes it,
    /// and it is cancelled, so the newer snapshot does not wait for an answer no longer wanted.
    pub(super) fn superseded(
        &mut self,
        seen: &Seen,
        choice: &Choice,
        rollout: &RolloutSeen,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(c) = self.work.checking_alone() else {
            return false;
        };
        if choice.observed.hash() == Some(c.sha) && c.check == self.settings().validate {
            self.work
                .read_again(seen.clone(), choice.clone(), rollout.clone());
            return true;
        }
        out.push(Action::CancelCheck);
        out.push(Action::Log(LogLine::CheckSuperseded {
            sha: c.sha.short(),
            version: c.choice.judgement.version.clone().unwrap_or_default(),
        }));
        self.work.cancel_check();
        false
    }

    /// The checker's answer on the candidate waiting for it: remembered for that content under
    /// the setting in force (a snapshot read again is not checked again), then the candidate is
    /// decided on as it would have been, promoted or held. A time-out or a checker that could not
    /// run says nothing of the content: the candidate is held meanwhile, and checked again after a
    /// backoff.
    pub(super) fn validated(
        &mut self,
        sha: ContentHash,
        checked: Checked,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if checked == Checked::Cancelled {
            return;
        }
        // A late answer on content since superseded leaves the check under way alone.
        if self.work.checking().is_none_or(|c| c.sha != sha) {
            return;
        }
        let Some(c) = self.work.take_checking() else {
            return;
        };
        let again = !checked.is_verdict();
        let retry_in = if again {
            let wait = self.checks.backoff.failed();
            self.checks.retry = Some(now.at + wait);
            Some(wait)
        } else {
            self.checks.backoff.succeeded();
            self.checks.retry = None;
            None
        };
        let checker = self.settings().validate.name();
        let said = self.checker_said(&checked, retry_in);
        let version = c.choice.judgement.version.clone().unwrap_or_default();
        out.push(Action::Log(match (said, again) {
            (Some(reason), true) => LogLine::CheckNotAnswered {
                version,
                sha: sha.short(),
                checker: checker.to_owned(),
                reason,
            },
            (reason, _) => LogLine::Validated {
                version,
                sha: sha.short(),
                checker: checker.to_owned(),
                reason,
            },
        }));
        self.checks.checked = Some(CheckedBy {
            sha,
            check: self.settings().validate.clone(),
            answer: checked,
            retry_in,
        });
        self.judged(c.seen, c.choice, c.rollout, now, out);
    }

    /// What the checker in force said of a candidate, worded for its log line and the reason a
    /// held candidate shows (`None`: it passed); `retry_in`: when an answer that is no verdict is
    /// run again. A Secret's content is never quoted: only the exit status is shown.
    fn checker_said(
        &self,
        checked: &Checked,
        retry_in: Option<std::time::Duration>,
    ) -> Option<String> {
        let checker = self.settings().validate.name();
        let why = match checked {
            Checked::Passed | Checked::Cancelled => return None,
            Checked::Failed { status, lines } if self.setup.secret() || lines.is_empty() => {
                format!(
                    "{checker} refused it ({status}{})",
                    if self.setup.secret() {
                        "; its output is not shown: the content is a Secret's"
                    } else {
                        ""
                    }
                )
            }
            Checked::Failed { status, lines } => {
                format!("{checker} refused it ({status}): {}", lines.join(" / "))
            }
            Checked::TimedOut(d) => format!(
                "{checker} did not finish within {} (killed)",
                crate::values::duration_text(*d)
            ),
            Checked::NotRun(why) => format!("the checker could not be run: {why}"),
        };
        Some(match retry_in {
            Some(wait) => format!(
                "{why}; it is run again in {}",
                crate::values::duration_text(wait)
            ),
            None => why,
        })
    }

    /// `j`, accepted by the range and rules, held by the component's checker (`by`, which did not
    /// pass it): invalid, with the checker's words and the fix for its kind of answer.
    pub(super) fn refused_by_checker(&self, j: Judgement, by: &CheckedBy) -> Judgement {
        let fix = match by.answer {
            Checked::NotRun(_) => crate::verdict::fix::checker_missing(),
            Checked::TimedOut(_) => crate::verdict::fix::checker_timed_out(),
            _ => crate::verdict::fix::checker_refused(self.setup.source_kind()),
        };
        let why = self
            .checker_said(&by.answer, by.retry_in)
            .unwrap_or_default();
        Judgement {
            verdict: Verdict::Invalid,
            reason: format!("{}, but {why}; {fix}", j.reason),
            ..j
        }
    }
}

/// What the component's checker last said, and when a check that gave no verdict is run again: the
/// [`Gate`]'s part written only by this file.
#[derive(Debug, Clone)]
pub(super) struct Checks {
    /// What the checker last said.
    checked: Option<CheckedBy>,
    /// When a check that timed out or could not run is run again, and how long the next waits.
    retry: Option<Instant>,
    backoff: crate::backoff::Doubling,
}

impl Checks {
    pub(super) fn new() -> Checks {
        Checks {
            checked: None,
            retry: None,
            backoff: CHECK_BACKOFF,
        }
    }

    /// What the checker last said.
    pub(super) fn checked(&self) -> Option<&CheckedBy> {
        self.checked.as_ref()
    }

    /// When a check that gave no verdict is run again.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry
    }

    /// Whether a check that gave no verdict is due again at `now`: then what it said is forgotten,
    /// so the content is checked again.
    pub(super) fn take_due(&mut self, now: Instant) -> bool {
        let due = self.retry.is_some_and(|t| t <= now);
        if due {
            self.retry = None;
            self.checked = None;
        }
        due
    }
}
