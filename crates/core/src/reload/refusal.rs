//! [`Refusal`]: why the component refused a content, kept as what kind of answer it was and what the
//! component said, so that the gate decides on the kind (and a record read back after a restart is
//! judged by it) and the words are made only where they are shown.

use std::fmt;

/// The component refused a content: how it said so, and its own words (bounded, one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub by: RefusedBy,
    /// The component's own words: the first line of its answer, or what its metrics said.
    pub said: String,
}

/// How the component said it refused a content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefusedBy {
    /// The reload POST to `target` (as shown, credentials removed) answered `status`.
    Answer { target: String, status: u16 },
    /// The component's metrics said the reload failed.
    Metrics,
    /// An earlier version's record: `said` is its reason as that version worded it (its error's
    /// text), and `holds` whether it refused the content (an answer that said the target was
    /// wrong did not), as told when the record was read.
    Recorded { holds: bool },
}

impl Refusal {
    /// Whether it says the content is bad: an answer only under `refuses` (a 404 or a 403 an
    /// earlier version recorded said the target was wrong, not the config); the metrics' word
    /// always; an earlier version's record as it was read.
    pub fn holds(&self) -> bool {
        match &self.by {
            RefusedBy::Answer { status, .. } => refuses(*status, self.said.trim()),
            RefusedBy::Metrics => true,
            RefusedBy::Recorded { holds } => *holds,
        }
    }
}

/// The words the reload worker's error said of it, so a log, a status or an Event reads as before.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.by {
            RefusedBy::Answer { target, status } => {
                write!(f, "POST {target} answered {status}: {}", self.said)
            }
            RefusedBy::Metrics => write!(f, "the component's metrics: {}", self.said),
            RefusedBy::Recorded { .. } => f.write_str(&self.said),
        }
    }
}

/// Whether an answer to the reload POST is the component refusing the config: 400, 422 or 500 with
/// the component's words about it (Prometheus answers a bad config with 500 and `failed to reload
/// config: ...`). Any other answer says nothing about the config.
pub fn refuses(status: u16, first_line: &str) -> bool {
    matches!(status, 400 | 422 | 500) && !first_line.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_as_the_error_it_came_from_and_holds_by_its_kind() {
        let answer = Refusal {
            by: RefusedBy::Answer {
                target: "http://127.0.0.1:9090/-/reload".into(),
                status: 500,
            },
            said: "failed to reload config: bad rule".into(),
        };
        assert_eq!(
            answer.to_string(),
            "POST http://127.0.0.1:9090/-/reload answered 500: failed to reload config: bad rule"
        );
        assert!(answer.holds());
        let not_found = Refusal {
            by: RefusedBy::Answer {
                target: "http://127.0.0.1:9090/-/relaod".into(),
                status: 404,
            },
            said: "404 page not found".into(),
        };
        assert!(!not_found.holds(), "a wrong target is no verdict");
        let metrics = Refusal {
            by: RefusedBy::Metrics,
            said: "up is 0 after the reload".into(),
        };
        assert_eq!(
            metrics.to_string(),
            "the component's metrics: up is 0 after the reload"
        );
        assert!(metrics.holds());
    }
}
