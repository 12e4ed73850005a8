//! What the reload worker tells the decision core: each attempt's [`Outcome`], why one failed
//! ([`Error`], a client's error kept as its words, made where it happened), the component's
//! [`Refusal`], what a request asks ([`Kind`]) and [`BootTicks`], the instant a signal's processes
//! are told apart by. Values only: the worker that sends the reloads is the edge's (`confgate`'s
//! `reload`), which re-exports these.

use std::time::Duration;

use crate::snapshot::ContentHash;
use crate::values::Url;

mod os_error;
mod refusal;

pub use os_error::OsError;

/// What a signal does to a process that does not catch it (signal(7)): none of it is a reload, so a
/// reload signal goes only to a process that catches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Uncaught {
    /// Term or Core: the process ends.
    #[error("would end it")]
    Ends,
    /// Stop: the process stays frozen (STOP cannot be caught at all).
    #[error("would stop it")]
    Stops,
    /// Ign or Cont: nothing happens, so a reload taken as made would mark a config applied the
    /// component never loaded.
    #[error("would do nothing, so the component would not reload")]
    Nothing,
}
pub use refusal::{Refusal, RefusedBy, refuses};

/// What a request asks of the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Tell the component to load what is promoted.
    Reload,
    /// The first config promoted into an empty dir, at `promoted`: find out whether the component
    /// started on it (so that it is the rollback baseline), telling it only when it may have read
    /// something else. A component not there yet is looked for again, quietly, until it is.
    Startup { promoted: jiff::Timestamp },
}

/// What the worker tells the decision loop about an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// An attempt started.
    Attempting,
    /// The target took the reload of this content.
    Reloaded(ContentHash),
    /// The attempt did not reach the component (connection error, timeout, no handler yet, or its
    /// metrics never confirmed); the worker retries with backoff.
    Failed(Failure),
    /// The component answered that it refused this content (an HTTP 4xx/5xx, or its metrics said the
    /// reload failed), and how. Not retried.
    Rejected {
        sha256: ContentHash,
        refusal: Refusal,
    },
    /// Nothing to tell the component about this content, and why: every process started after its
    /// promotion and read it at start-up (with confirmation, its metrics say that load succeeded), or,
    /// for a reload, no process runs.
    NothingToReload { sha256: ContentHash, why: String },
    /// A start-up check did not reach the component yet (it is still starting), and why; it looks
    /// again.
    Waiting(String),
}

/// A failed attempt's error, shared: the loop keeps it (the status's `last_error` shows it) while
/// the worker goes on.
pub type Failure = crate::failure::Failure<Error>;

/// Why one reload attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The POST was not answered; `why` is the client's error with its causes on one line (the
    /// client's own text, "client error (Connect)", says little).
    #[error("POST {url}: {why}")]
    Request { url: Url, why: String },
    /// The component answered and refused: a rejection, not retried.
    #[error("POST {url} answered {status}: {first_line}")]
    Status {
        url: Url,
        status: u16,
        /// The first line of the component's answer, bounded and sanitised: its own text.
        first_line: String,
    },
    /// An answer that says the target is wrong, not the config (404, 405, 401/403, any answer
    /// other than 400, 422 or 500 with words about the config): the POST did not reach a component judging it.
    #[error(
        "POST {url} answered {status}{}; not reached: the reload target is misconfigured (a wrong path or method, missing credentials, or an endpoint that is off)",
        if first_line.is_empty() { String::new() } else { format!(": {first_line}") }
    )]
    Misconfigured {
        url: Url,
        status: u16,
        first_line: String,
    },
    /// A redirect (an auth proxy, http to https): the POST is not followed, so the component never
    /// saw the request.
    #[error(
        "POST {url} answered {status}, a redirect (not followed): the component was not reached"
    )]
    Redirect { url: Url, status: u16 },
    /// An https target, and a build without a TLS client.
    #[error(
        "{url}: this build has no TLS client (cargo feature tls); use an http:// target or a signal"
    )]
    NoTls { url: Url },
    /// The POST could not be made from the target (hyper refused its parts).
    #[error("{url}: {why}")]
    Build { url: Url, why: String },
    /// `/proc` could not be listed: no process can be found to signal.
    #[error("/proc: {0}")]
    Proc(#[source] std::io::Error),
    /// The thread scanning `/proc` ended without an answer.
    #[error("the /proc scan failed: {0}")]
    Scan(String),
    /// The component's metrics say the reload failed.
    #[error("the component's metrics: {0}")]
    Confirmed(String),
    #[error("not confirmed by the component's metrics: {0}")]
    Unconfirmed(String),
    #[error("attempt timed out after {0:?}")]
    Timeout(Duration),
    #[error(
        "no process named {0} is visible (the pod needs shareProcessNamespace: true, and the process must be running)"
    )]
    NoProcess(String),
    /// confgate sees no process but its own: it runs in a process namespace of its own, so no
    /// signal can ever reach the component.
    #[error(
        "cannot signal {0}: confgate sees no other process, so it has a process namespace of its own; set shareProcessNamespace: true on the pod"
    )]
    Alone(String),
    #[error(
        "{process} (pid {pid}) does not catch {signal}, which {uncaught}; not sent (is it still starting?)"
    )]
    NotCaught {
        signal: &'static str,
        pid: i32,
        process: String,
        uncaught: Uncaught,
    },
    #[error(
        "cannot send {signal} to pid {pid} ({process}): {errno}; confgate must run as the same user as the process"
    )]
    Kill {
        signal: &'static str,
        pid: i32,
        process: String,
        errno: OsError,
    },
}

impl Error {
    /// Whether the component answered and refused (not retried), as opposed to not being reached.
    pub fn is_rejection(&self) -> bool {
        self.refusal().is_some()
    }

    /// The component's refusal this error is, kept typed: what kind of answer, and what it said.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            // Busy, or a proxy that did not reach it: the component has not judged the config.
            Error::Status {
                url,
                status,
                first_line,
            } if refuses(*status, first_line) => Some(Refusal {
                by: RefusedBy::Answer {
                    target: url.to_string(),
                    status: *status,
                },
                said: first_line.clone(),
            }),
            Error::Confirmed(said) => Some(Refusal {
                by: RefusedBy::Metrics,
                said: said.clone(),
            }),
            _ => None,
        }
    }
}

/// A boot-relative instant in the kernel's clock ticks (`USER_HZ`), the unit of the start time in
/// `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BootTicks(pub u64);
