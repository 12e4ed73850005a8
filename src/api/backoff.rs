//! How long the API source waits before it lists and watches again after a failure. Pure: the time
//! and the random part of each wait are passed in.
//!
//! - An error the API server answered (a 403, a 5xx, a failed list) waits 0.8 s, doubling to 30 s.
//! - An attempt nothing answered (connection refused, reset or timed out) waits 0.8 s, doubling to
//!   5 s: it costs the API server nothing, and a restarted server is found within 5 s of its return.
//!   The two run separately, so the errors a server answers just after it came back start at 0.8 s.
//! - A `410 Gone` ends a watch window normally: the list is made again at once.
//! - A successful list resets both. A watch that fails within [`MAX`] of the list it started from,
//!   before it delivered any change, continues the doubling where the list found it (a list that
//!   succeeds while the watch after it is refused is not made every 0.8 s), and a `410 Gone` so
//!   soon counts as an answered error.
//!
//! Each wait is drawn between half and all of its nominal value, so sidecars that lost the API
//! server together do not come back in step.

use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Doubling;

/// The first wait.
pub(crate) const FIRST: Duration = Duration::from_millis(800);
/// The longest wait after errors the API server answered.
pub const MAX: Duration = Duration::from_secs(30);
/// The longest wait while nothing answers.
pub(crate) const UNANSWERED_MAX: Duration = Duration::from_secs(5);

/// What a failed attempt met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// `410 Gone`: the resourceVersion the watch was at is no longer kept.
    Gone,
    /// Any other answer of the API server (a Status).
    Answered,
    /// No answer at all (connection refused, reset, timed out, TLS).
    Unanswered,
}

/// The waits of each kind of failure, and the last successful list.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    answered: Doubling,
    unanswered: Doubling,
    /// The waits the last successful list reset, kept while its watch has not proved itself.
    before_list: (Doubling, Doubling),
    listed_at: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Backoff {
        let (answered, unanswered) = (
            Doubling::new(FIRST, MAX),
            Doubling::new(FIRST, UNANSWERED_MAX),
        );
        Backoff {
            answered,
            unanswered,
            before_list: (answered, unanswered),
            listed_at: None,
        }
    }
}

impl Backoff {
    /// A list succeeded at `now`.
    pub(crate) fn listed(&mut self, now: Instant) {
        self.before_list = (self.answered, self.unanswered);
        self.answered.succeeded();
        self.unanswered.succeeded();
        self.listed_at = Some(now);
    }

    /// The watch delivered a change: the list it started from is good, whenever it fails next.
    pub(crate) fn watched(&mut self) {
        self.listed_at = None;
    }

    /// The wait after a failure at `now`; `random` in `[0, 1)` picks it between half and all of the
    /// nominal value.
    pub(crate) fn failed(&mut self, failure: Failure, now: Instant, random: f64) -> Duration {
        let soon = self
            .listed_at
            .take()
            .is_some_and(|at| now.saturating_duration_since(at) < MAX);
        if soon {
            (self.answered, self.unanswered) = (
                self.answered.further(self.before_list.0),
                self.unanswered.further(self.before_list.1),
            );
        }
        let nominal = match failure {
            Failure::Gone if !soon => return Duration::ZERO,
            Failure::Gone | Failure::Answered => self.answered.failed(),
            Failure::Unanswered => self.unanswered.failed(),
        };
        nominal.mul_f64(1.0 - random.clamp(0.0, 1.0) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(b: &mut Backoff, f: Failure, n: usize, now: Instant) -> Vec<f64> {
        (0..n)
            .map(|_| b.failed(f, now, 0.0).as_secs_f64())
            .collect()
    }

    #[test]
    fn answered_errors_double_from_0_8_s_to_30_s() {
        let now = Instant::now();
        let mut b = Backoff::default();
        assert_eq!(
            waits(&mut b, Failure::Answered, 8, now),
            [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
        );
    }

    #[test]
    fn no_answer_doubles_to_5_s_and_a_returning_server_starts_at_0_8_s() {
        let now = Instant::now();
        let mut b = Backoff::default();
        assert_eq!(
            waits(&mut b, Failure::Unanswered, 6, now),
            [0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
        );
        assert_eq!(waits(&mut b, Failure::Answered, 2, now), [0.8, 1.6]);
    }

    #[test]
    fn a_list_resets_and_gone_relists_at_once() {
        let now = Instant::now();
        let mut b = Backoff::default();
        waits(&mut b, Failure::Answered, 6, now);
        b.listed(now);
        let later = now + MAX;
        assert_eq!(b.failed(Failure::Gone, later, 0.0), Duration::ZERO);
        assert_eq!(waits(&mut b, Failure::Answered, 1, later), [0.8]);
    }

    #[test]
    fn a_watch_failing_right_after_its_list_keeps_the_doubling() {
        let now = Instant::now();
        let mut b = Backoff::default();
        assert_eq!(waits(&mut b, Failure::Answered, 3, now), [0.8, 1.6, 3.2]);
        b.listed(now);
        assert_eq!(waits(&mut b, Failure::Answered, 1, now), [6.4]);
        b.listed(now);
        // A 410 at once after a list is not the end of a window: it backs off too.
        assert_eq!(b.failed(Failure::Gone, now, 0.0).as_secs_f64(), 12.8);
        // Unless the watch delivered a change first.
        b.listed(now);
        b.watched();
        assert_eq!(b.failed(Failure::Gone, now, 0.0), Duration::ZERO);
        assert_eq!(waits(&mut b, Failure::Answered, 1, now), [0.8]);
    }

    #[test]
    fn each_wait_is_between_half_and_all_of_it() {
        let now = Instant::now();
        for r in [0.0, 0.3, 0.999] {
            let mut b = Backoff::default();
            let d = b.failed(Failure::Answered, now, r);
            assert!(d <= FIRST && d > FIRST / 2, "{r}: {d:?}");
        }
    }
}
