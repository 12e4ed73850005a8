//! The end of a promotion's phase: the switch made (the config active, the component owed its
//! reload or start-up check) or failed (the previous config kept, tried again after a second).

use super::decision::Tell;
use super::messages::{Action, Anew, Count, LogLine, Now};
use super::reloads::Owed;
use std::time::Instant;

use super::state::{Gate, PROMOTE_RETRY};
use crate::reload::{BootTicks, Kind};

impl Gate {
    pub(super) fn switched(
        &mut self,
        r: Result<Option<BootTicks>, crate::promote::Failure>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(p) = self.work.take_promotion() else {
            return;
        };
        let p = *p;
        let promoted_at = match r {
            Ok(t) => t,
            Err(error) => {
                let (version, sha) = (p.judged.version.clone(), p.judged.sha.clone());
                out.push(Action::Log(LogLine::Judged(p.judged)));
                out.push(Action::Log(LogLine::PromotionFailed {
                    error: error.clone(),
                    version,
                    sha,
                }));
                out.push(Action::Count(Count::PromotionFailed));
                self.promotion_failed(error);
                self.retry.after_failure(now.at);
                self.reads.anew(Anew::PromotionFailed);
                return;
            }
        };
        if let Some(k) = p.known_good {
            self.known_good_activated(k, now.wall);
        } else {
            self.activated(now.wall);
        }
        self.reads.repaired();
        // The refused content a rollback owed was for is replaced; a share of the spread waited
        // out is used.
        self.spread_used();
        self.rollbacks.replaced();
        match p.tell {
            Tell::StartupCheck => {
                self.baseline.promoted(self.verdicts.active().cloned());
            }
            _ if p.keep_baseline => self.baseline.keep(),
            _ => {}
        }
        // The one thing the component waits for comes first; the rest is bookkeeping.
        if p.tell != Tell::Silent {
            self.reloads.owe(Owed {
                kind: match p.tell {
                    // `now` is after the switch: a load reported at or after it read this.
                    Tell::StartupCheck => Kind::Startup { promoted: now.wall },
                    _ => Kind::Reload,
                },
                sha: p.sha,
                version: p.version,
                promoted_at,
            });
            self.send_owed(out);
            out.push(Action::Yield);
        }
        let (version, variant, sha) = (
            p.judged.version.clone(),
            p.judged.variant.clone(),
            p.judged.sha.clone(),
        );
        out.push(Action::Log(LogLine::Judged(p.judged)));
        if !self.setup.gate_only() {
            out.push(Action::Log(LogLine::Promoted {
                version,
                variant,
                sha,
            }));
        }
        out.push(Action::Count(Count::Promoted(now.wall)));
        if !self.setup.gate_only() {
            out.push(Action::FinishSwitch { on_loop: p.on_loop });
        }
    }
}

/// When a failed promotion, or a rollback owed, is tried again: the [`Gate`]'s part written only by
/// this file (one deadline serves both).
#[derive(Debug, Clone, Default)]
pub(super) struct Retry {
    at: Option<Instant>,
}

impl Retry {
    /// A promotion or a rollback failed at `now`: tried again after [`PROMOTE_RETRY`].
    pub(super) fn after_failure(&mut self, now: Instant) {
        self.at = Some(now + PROMOTE_RETRY);
    }

    /// The retry is made now, before its deadline.
    pub(super) fn cancel(&mut self) {
        self.at = None;
    }

    pub(super) fn at(&self) -> Option<Instant> {
        self.at
    }

    /// Whether the retry is due at `now`; it is then no longer pending.
    pub(super) fn take_due(&mut self, now: Instant) -> bool {
        let due = self.at.is_some_and(|t| t <= now);
        if due {
            self.at = None;
        }
        due
    }
}
