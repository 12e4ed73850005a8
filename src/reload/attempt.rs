//! What one reload attempt yields: [`Sent`] when it did not fail, an [`Error`] saying why it did,
//! and [`BootTicks`], the instant a signal's processes are told apart by. The worker (`mod.rs`) and
//! the `/proc` scan (`signal.rs`) both speak them, so they live below both.

use std::time::Duration;

use super::refusal::{Refusal, RefusedBy, refuses};
use crate::values::Url;

/// Why one reload attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("POST {url}: {}", chain(source))]
    Request {
        url: Url,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
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
    #[error("{url}: {source}")]
    Build {
        url: Url,
        #[source]
        source: hyper::http::Error,
    },
    /// `/proc` could not be listed: no process can be found to signal.
    #[error("/proc: {0}")]
    Proc(#[source] std::io::Error),
    /// The thread scanning `/proc` ended without an answer.
    #[error("the /proc scan failed: {0}")]
    Scan(#[source] tokio::task::JoinError),
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
        "{process} (pid {pid}) does not catch {signal}, whose default action would end it; not sent (is it still starting?)"
    )]
    NotCaught {
        signal: &'static str,
        pid: i32,
        process: String,
    },
    #[error(
        "cannot send {signal} to pid {pid} ({process}): {errno}; confgate must run as the same user as the process"
    )]
    Kill {
        signal: &'static str,
        pid: i32,
        process: String,
        errno: nix::errno::Errno,
    },
}

impl Error {
    /// Whether the component answered and refused (not retried), as opposed to not being reached.
    #[cfg(test)]
    pub(crate) fn is_rejection(&self) -> bool {
        self.refusal().is_some()
    }

    /// The component's refusal this error is, kept typed: what kind of answer, and what it said.
    pub(crate) fn refusal(&self) -> Option<Refusal> {
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

/// What an attempt did when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The target was told (an HTTP POST answered 2xx, or signals sent to this many processes).
    Reloaded(usize),
    /// Nothing to reload, and why: each process started after the promotion and read it at
    /// start-up (or, at a start-up check, the component's metrics say it loaded it).
    NothingToReload(String),
    /// No process of this name runs (`Error::NoProcess` says why that can be).
    NoProcess(String),
}

/// A boot-relative instant in the kernel's clock ticks (`USER_HZ`), the unit of the start time in
/// `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BootTicks(pub u64);

/// `USER_HZ`: 100 on every architecture Kubernetes runs on.
pub(super) const USER_HZ: u64 = 100;

impl BootTicks {
    /// Now, on `CLOCK_BOOTTIME`, the clock process start times are counted on (and `/proc/uptime`
    /// shows); read through the vDSO, with no system call on the promotion's path.
    pub fn now() -> Option<BootTicks> {
        let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
        let secs = u64::try_from(t.tv_sec()).ok()?;
        let ticks = u64::try_from(t.tv_nsec()).ok()? / (1_000_000_000 / USER_HZ);
        Some(BootTicks(secs * USER_HZ + ticks))
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
