//! [`Checked`]: what the component's checker said of a candidate, as the decision core keeps it.
//! The checker's run is the edge's (`confgate`'s `validate`), which re-exports it.

use std::time::Duration;

/// What the checker said of a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// It exited 0.
    Passed,
    /// It exited non-zero or was killed by a signal (`status` as the system words it), with the first
    /// lines of what it wrote.
    Failed { status: String, lines: Vec<String> },
    /// It ran past the bound, and was killed.
    TimedOut(Duration),
    /// It could not be started (absent, not executable).
    NotRun(String),
    /// A newer snapshot superseded the candidate: the check was ended before its answer.
    Cancelled,
}

impl Checked {
    /// Whether the answer says something of the content (an exit status), rather than of the
    /// checker's run (a time-out, a checker not there yet), which is tried again.
    pub fn is_verdict(&self) -> bool {
        matches!(self, Checked::Passed | Checked::Failed { .. })
    }
}
