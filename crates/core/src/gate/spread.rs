//! The reload spread: a change of what this pod promotes waits for the pod's share of the
//! `reload-spread` setting (its bucket's fraction of it), so an in-place edit reaches the fleet over
//! that period instead of all at once. The deadline is state of the gate, joined to
//! [`Gate::wake_at`]; nothing here reads a clock.

use std::time::Duration;

use std::time::Instant;

use super::decision::Tell;
use super::messages::{Action, JudgedLine, LogLine, Now};
use super::state::Gate;
use crate::rollout::Bucket;
use crate::state::SpreadView;

impl Gate {
    /// This pod's share of the spread in force: its bucket's fraction of the period, in whole
    /// milliseconds. No identity: none.
    fn spread_delay(&self) -> Duration {
        let Some(bucket) = self.share.bucket else {
            return Duration::ZERO;
        };
        let ms = self.settings().reload_spread.as_millis() as f64 * bucket.fraction();
        Duration::from_millis(ms as u64)
    }

    /// Whether the promotion of a change (`tell`, `judged`) decided at `now` waits for this pod's
    /// share of the spread. Only a change that replaces an accepted config the component was told
    /// of waits: the first promotion (nothing accepted yet, or an empty promoted dir) and a
    /// pod whose active config no longer passes promote at once. A change seen during the wait
    /// keeps the first deadline.
    pub(super) fn spread_waits(
        &mut self,
        tell: Tell,
        judged: &JudgedLine,
        now: Now,
        out: &mut Vec<Action>,
    ) -> bool {
        let delay = self.spread_delay();
        if tell != Tell::Reload || self.verdicts.active().is_none() || delay.is_zero() {
            self.share.waiting = None;
            return false;
        }
        // This pod's share was waited out, and the promotion made at its end failed: the retry
        // keeps its place, on the promotion's retry deadline, not a new share of the spread.
        if self.share.served {
            return false;
        }
        let spread = self.settings().reload_spread;
        let s = self.share.waiting.get_or_insert_with(|| Spread {
            seen: now.at,
            seen_wall: now.wall,
            sha: String::new(),
            asked: false,
        });
        if now.at >= s.seen + delay {
            self.share.waiting = None;
            self.share.served = true;
            return false;
        }
        if s.sha != judged.sha {
            s.sha.clone_from(&judged.sha);
            out.push(Action::Log(LogLine::Spread {
                version: judged.version.clone(),
                sha: judged.sha.clone(),
                due: s.seen_wall + delay,
                delay,
                spread,
            }));
        }
        true
    }

    /// The newest snapshot is no change to promote (the same as in force, or not accepted): nothing
    /// waits any more.
    pub(super) fn spread_done(&mut self) {
        self.share.waiting = None;
        self.share.served = false;
    }

    /// A promotion was made: a share of the spread waited out for it is used.
    pub(super) fn spread_used(&mut self) {
        self.share.served = false;
    }

    /// When the waiting change is due, unless it was already asked for.
    pub(super) fn spread_due_at(&self) -> Option<Instant> {
        let delay = self.spread_delay();
        self.share
            .waiting
            .as_ref()
            .filter(|s| !s.asked)
            .map(|s| s.seen + delay)
    }

    /// Whether the waiting change is due at `now`; it is then asked for once.
    pub(super) fn take_spread_due(&mut self, now: Instant) -> bool {
        let delay = self.spread_delay();
        match self.share.waiting.as_mut() {
            Some(s) if !s.asked && s.seen + delay <= now => {
                s.asked = true;
                true
            }
            _ => false,
        }
    }

    /// What `/status` shows of the wait.
    pub(super) fn spread_view(&self) -> Option<SpreadView> {
        let delay = self.spread_delay();
        self.share.waiting.as_ref().map(|s| SpreadView {
            due_at: s.seen_wall + delay,
            delay_ms: delay.as_millis() as u64,
            period_ms: self.settings().reload_spread.as_millis() as u64,
        })
    }
}

/// This pod's share of the reload spread: its place in the fleet and the change waiting for it. The
/// [`Gate`]'s part written only by this file.
#[derive(Debug, Clone, Default)]
pub(super) struct Share {
    /// This pod's place in the fleet, which sets its share of the reload spread.
    bucket: Option<Bucket>,
    /// A change waiting for this pod's share of the reload spread.
    waiting: Option<Spread>,
    /// This pod's share of the spread was waited out and the promotion is not made yet (it failed):
    /// its retry does not wait again.
    served: bool,
}

impl Share {
    /// This pod's place in the fleet (`None`: no identity, no share).
    pub(super) fn in_fleet(bucket: Option<Bucket>) -> Share {
        Share {
            bucket,
            ..Share::default()
        }
    }

    pub(super) fn bucket(&self) -> Option<Bucket> {
        self.bucket
    }
}

/// A change waiting for this pod's share of the spread (`spread.rs` decides on it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spread {
    /// When the first change of this wait was seen: newer ones during the wait do not move it. The
    /// deadline is this plus the share of the spread *in force*, so a spread lowered (or raised)
    /// mid-wait moves it at once, and what `/status` shows never outlasts the period.
    seen: Instant,
    seen_wall: jiff::Timestamp,
    /// The change last said to wait (short hash), so a newer one gets its own log line.
    sha: String,
    /// The deadline has come and the newest config was asked for: no more timer for it.
    asked: bool,
}
