//! [`Doubling`]: the one way a retry waits longer after each failure: from a first wait, doubling
//! up to a most, back to the first after a success. Pure: it says how long, the caller sleeps (and
//! adds its own jitter), so the reload worker, the API source, the server's accept loop and the pod
//! reporter share one rule and their tests need no clock.

use std::time::Duration;

/// A wait that doubles after each failure, from `first` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubling {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Doubling {
    pub const fn new(first: Duration, max: Duration) -> Doubling {
        Doubling {
            first,
            max,
            next: first,
        }
    }

    /// The wait after this failure; the next failure waits twice as long, up to the most.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        wait
    }

    /// What the next failure waits, without counting one.
    // The pod reporter's, and `further` the API source's: built with the `api` feature only.
    #[cfg_attr(not(feature = "api"), allow(dead_code))]
    pub fn next(&self) -> Duration {
        self.next
    }

    /// A success: the next failure waits the first wait again.
    pub fn succeeded(&mut self) {
        self.next = self.first;
    }

    /// Whichever of the two has grown further (both count the same kind of failure).
    #[cfg_attr(not(feature = "api"), allow(dead_code))]
    pub fn further(self, other: Doubling) -> Doubling {
        if other.next > self.next { other } else { self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_most_and_starts_again_after_a_success() {
        let mut d = Doubling::new(Duration::from_millis(200), Duration::from_secs(2));
        let waits: Vec<u128> = (0..6).map(|_| d.failed().as_millis()).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 2000, 2000]);
        d.succeeded();
        assert_eq!(d.next(), Duration::from_millis(200));
        let mut long = Doubling::new(Duration::from_secs(1), Duration::MAX);
        for _ in 0..100 {
            long.failed();
        }
        assert_eq!(long.failed(), Duration::MAX, "saturates, never overflows");
        let grown = {
            let mut g = Doubling::new(Duration::from_millis(200), Duration::from_secs(2));
            g.failed();
            g
        };
        assert_eq!(d.further(grown), grown);
        assert_eq!(grown.further(d), grown);
    }
}
