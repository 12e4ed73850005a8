//! Signalling a component by process name: which processes are the component, whether each started
//! before the promotion, and whether it catches the signal yet, all read from `/proc`.

use std::collections::BTreeSet;

use super::attempt::Sent;
use super::{BootTicks, Error, OsError, Uncaught};
use crate::values::Signal;

/// The processes one request's signal reached, each by pid and start time (a pid reused by a new
/// process is another process): the attempts after the first skip them.
pub type Reached = BTreeSet<(i32, Option<BootTicks>)>;

/// Sends `signal` to every process named `name` that should get it. Looked up on every call: the
/// target restarts and changes PID, and a native sidecar starts before it.
///
/// A process is named `name` when its `argv[0]` base name is `name`, or, for a name of at most 15 bytes,
/// its `comm` is (the kernel truncates `comm` to 15 bytes, so a longer name would also match every
/// process sharing the first 15). It gets the signal only when it started no later than
/// `promoted_at` (one that started later read the promoted config itself), and, for a signal whose
/// default action terminates or stops, only when it catches it (`SigCgt`): a component that has not installed
/// its handler yet would be killed. TERM, INT and QUIT are the restart strategy and go regardless.
///
/// `Ok(Sent::NoProcess)` when none runs, `Ok(Sent::NothingToReload)` when every one started after the
/// promotion; an error when one should but does not catch the signal yet, or cannot be signalled, and
/// [`Error::Alone`] when no process but confgate's own is visible at all (no shared process namespace).
pub fn signal_by_name(
    signal: nix::sys::signal::Signal,
    name: &str,
    promoted_at: Option<BootTicks>,
) -> Result<Sent, Error> {
    signal_once(signal, name, promoted_at, &mut Reached::new())
}

/// [`signal_by_name`] for one request over its attempts: a process in `reached` got the signal
/// already and is not sent it again; each one this call reaches is added. Once one process that
/// handles the signal was reached, one that does not (a helper sharing the name, which the signal
/// would end) is reported with a warning and the reload counts as made: retrying could only repeat
/// the signal to the component. A process that cannot be signalled is an error, retried without
/// signalling again those reached.
pub fn signal_once(
    signal: nix::sys::signal::Signal,
    name: &str,
    promoted_at: Option<BootTicks>,
    reached: &mut Reached,
) -> Result<Sent, Error> {
    let me = std::process::id();
    let (mut hits, mut newer, mut before) = (0, 0, 0);
    let mut not_catching = None;
    // Whether any process but confgate is visible: a pod's shared process namespace always shows
    // its sandbox (pid 1, `pause`), so seeing none means confgate has a namespace of its own.
    let mut others = false;
    let entries = std::fs::read_dir("/proc").map_err(Error::Proc)?;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid as u32 == me {
            continue;
        }
        others = true;
        if !process_named(pid, name) {
            continue;
        }
        let started = start_ticks(pid);
        if reached.contains(&(pid, started)) {
            before += 1;
            continue;
        }
        // Ticks are 10 ms: a process started in the same tick as the promotion may have read the
        // previous config, so it is signalled (a missed reload would be silent).
        if let (Some(at), Some(started)) = (promoted_at, started)
            && started > at
        {
            newer += 1;
            tracing::debug!(
                pid,
                process = name,
                "started after the promotion; not signalled"
            );
            continue;
        }
        if !is_restart(signal) && !catches(pid, signal) {
            tracing::debug!(
                pid,
                process = name,
                signal = signal.as_str(),
                "does not catch the signal; not signalled"
            );
            not_catching = Some(pid);
            continue;
        }
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal) {
            Ok(()) => {
                hits += 1;
                reached.insert((pid, started));
            }
            // Exited between the scan and the signal.
            Err(nix::errno::Errno::ESRCH) => {}
            Err(errno) => {
                return Err(Error::Kill {
                    signal: signal.as_str(),
                    pid,
                    process: name.to_owned(),
                    errno: os_error(errno),
                });
            }
        }
    }
    let hits = hits + before;
    if let Some(pid) = not_catching {
        let e = Error::NotCaught {
            signal: signal.as_str(),
            pid,
            process: name.to_owned(),
            uncaught: uncaught(signal),
        };
        if hits == 0 {
            return Err(e);
        }
        tracing::warn!(process = name, signal = signal.as_str(), reached = hits, error = %e, "sent to each process of this name that handles the signal; one that does not is not sent it");
    }
    match (hits, newer) {
        // No process will ever come into view: the reload cannot reach the component, which is a
        // failure, not "nothing to reload".
        (0, 0) if !others => Err(Error::Alone(name.to_owned())),
        (0, 0) => Ok(Sent::NoProcess(name.to_owned())),
        (0, n) => Ok(Sent::NothingToReload(format!(
            "every process named {name} ({n}) started after the promotion and read it at start-up"
        ))),
        (n, _) => Ok(Sent::Reloaded(n)),
    }
}

fn process_named(pid: i32, name: &str) -> bool {
    if name.len() <= 15
        && let Ok(comm) = std::fs::read(format!("/proc/{pid}/comm"))
        && comm.strip_suffix(b"\n").unwrap_or(&comm) == name.as_bytes()
    {
        return true;
    }
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        let argv0 = c.split(|b| *b == 0).next().unwrap_or(&[]);
        argv0.rsplit(|b| *b == b'/').next() == Some(name.as_bytes())
    })
}

/// Field 22 of `/proc/PID/stat`: the start time in ticks since boot.
pub(super) fn start_ticks(pid: i32) -> Option<BootTicks> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `comm` (field 2) is in parentheses and may hold spaces and parentheses: split after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok().map(BootTicks)
}

/// Whether `pid` has a handler for `signal` (`SigCgt` in `/proc/PID/status`).
fn catches(pid: i32, signal: nix::sys::signal::Signal) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (signal as i32 - 1)) != 0)
}

/// TERM, INT and QUIT: the restart strategy, meant to end the process.
pub(super) fn is_restart(signal: nix::sys::signal::Signal) -> bool {
    use nix::sys::signal::Signal::*;
    matches!(signal, SIGTERM | SIGINT | SIGQUIT)
}

/// What `signal` does to a process that does not catch it (signal(7)). None of it is a reload, and a
/// signal that did nothing, taken as delivered, would mark a config applied the component never
/// loaded and start its known-good trial.
pub(super) fn uncaught(signal: nix::sys::signal::Signal) -> Uncaught {
    use nix::sys::signal::Signal::*;
    match signal {
        SIGCHLD | SIGCONT | SIGURG | SIGWINCH => Uncaught::Nothing,
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU => Uncaught::Stops,
        _ => Uncaught::Ends,
    }
}

/// The OS's number for the signal a reload target names, at the moment it is sent: each name the
/// settings read is one of the OS's.
pub(super) fn to_nix(signal: Signal) -> nix::sys::signal::Signal {
    use nix::sys::signal::Signal as Os;
    match signal {
        Signal::Hup => Os::SIGHUP,
        Signal::Int => Os::SIGINT,
        Signal::Quit => Os::SIGQUIT,
        Signal::Ill => Os::SIGILL,
        Signal::Trap => Os::SIGTRAP,
        Signal::Abrt => Os::SIGABRT,
        Signal::Bus => Os::SIGBUS,
        Signal::Fpe => Os::SIGFPE,
        Signal::Kill => Os::SIGKILL,
        Signal::Usr1 => Os::SIGUSR1,
        Signal::Segv => Os::SIGSEGV,
        Signal::Usr2 => Os::SIGUSR2,
        Signal::Pipe => Os::SIGPIPE,
        Signal::Alrm => Os::SIGALRM,
        Signal::Term => Os::SIGTERM,
        Signal::Stkflt => Os::SIGSTKFLT,
        Signal::Chld => Os::SIGCHLD,
        Signal::Cont => Os::SIGCONT,
        Signal::Stop => Os::SIGSTOP,
        Signal::Tstp => Os::SIGTSTP,
        Signal::Ttin => Os::SIGTTIN,
        Signal::Ttou => Os::SIGTTOU,
        Signal::Urg => Os::SIGURG,
        Signal::Xcpu => Os::SIGXCPU,
        Signal::Xfsz => Os::SIGXFSZ,
        Signal::Vtalrm => Os::SIGVTALRM,
        Signal::Prof => Os::SIGPROF,
        Signal::Winch => Os::SIGWINCH,
        Signal::Io => Os::SIGIO,
        Signal::Pwr => Os::SIGPWR,
        Signal::Sys => Os::SIGSYS,
    }
}

/// A `kill(2)` error as the core keeps it: its code, in nix's words (`EPERM: Operation not
/// permitted`).
pub(super) fn os_error(errno: nix::errno::Errno) -> OsError {
    OsError::new(errno as i32, errno.to_string())
}
