//! What one reload attempt yields: [`Sent`] when it did not fail (an `Error`, the core's, says why
//! it did), and [`boot_ticks`], the clock a signal's processes are told apart by. The worker
//! (`mod.rs`) and the `/proc` scan (`signal.rs`) both speak them, so they live below both.

use confgate_core::reload::BootTicks;

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

/// `USER_HZ`: 100 on every architecture Kubernetes runs on.
pub(super) const USER_HZ: u64 = 100;

/// Now, on `CLOCK_BOOTTIME`, the clock process start times are counted on (and `/proc/uptime`
/// shows); read through the vDSO, with no system call on the promotion's path.
pub fn boot_ticks() -> Option<BootTicks> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let secs = u64::try_from(t.tv_sec()).ok()?;
    let ticks = u64::try_from(t.tv_nsec()).ok()? / (1_000_000_000 / USER_HZ);
    Some(BootTicks(secs * USER_HZ + ticks))
}

/// An error and its causes on one line: the client's own text ("client error (Connect)") says little.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
