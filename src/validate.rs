//! Runs the component's own checker (the `validate` setting) on a staged candidate: bounded in time
//! (killed at the bound, or when a newer snapshot supersedes its candidate) and in output (the first
//! lines are kept, the rest read and dropped so the checker never blocks on a full pipe). Whatever it
//! started is ended with it, however it ended: this process is a child subreaper, so a descendant
//! that left the checker's group or lost its parent is still found. Blocking: the loop calls it on
//! the blocking pool, never on the runtime's thread.
//!
//! The checker gets no environment but `PATH` (confgate's own may name credentials), `/dev/null` as
//! its input, the candidate's dir as its working dir, and one pipe for its output and its errors.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::settings::Validate;

pub(crate) use confgate_core::validate::Checked;

/// The most output read into memory; the rest is read and dropped.
const MAX_OUTPUT: usize = 16 * 1024;
/// The most lines kept for a reason.
pub(crate) const MAX_LINES: usize = 5;
/// The most bytes of each line kept.
const MAX_LINE: usize = 200;
/// After the kill at the time bound, how long to wait for the checker's exit to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);
/// The most passes over `/proc` to end what a checker left: each pass kills every descendant it
/// finds, so only a tree that forks faster than it is killed needs more than a few.
const MAX_PASSES: usize = 64;

/// What the thread waiting for the checker, or the loop, tells [`run`].
enum Message {
    Exited(std::io::Result<ExitStatus>),
    Cancel,
}

/// Ends a check under way: its candidate was superseded.
#[derive(Debug, Clone)]
pub(crate) struct Cancel(mpsc::Sender<Message>);

impl Cancel {
    pub(crate) fn cancel(&self) {
        // A check that is over has dropped its receiver: nothing to end.
        let _ = self.0.send(Message::Cancel);
    }
}

/// Where [`run`] hears of the checker's exit and of a [`Cancel`].
pub(crate) struct Inbox {
    tx: mpsc::Sender<Message>,
    rx: mpsc::Receiver<Message>,
}

/// A check's [`Cancel`] and the [`Inbox`] its [`run`] listens on.
pub(crate) fn cancellable() -> (Cancel, Inbox) {
    let (tx, rx) = mpsc::channel();
    (Cancel(tx.clone()), Inbox { tx, rx })
}

/// Runs `check` on `dir` within `timeout`, unless `inbox` hears it cancelled first. Every process the
/// checker started is ended when it exits, times out or is cancelled ([`end_descendants`]).
pub(crate) fn run(check: &Validate, dir: &Path, timeout: Duration, inbox: Inbox) -> Checked {
    let Validate::Exec { program, .. } = check else {
        return Checked::Passed;
    };
    // What a checker's child leaves behind when its parent exits (a double fork, `setsid`) is
    // re-parented to this process rather than to the pod's init, so it can be found and ended.
    // Idempotent and process-wide; refused only on a kernel before 3.4.
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let (mut reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return Checked::NotRun(format!("no pipe for its output: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return Checked::NotRun(format!("no pipe for its output: {e}")),
    };
    let mut cmd = Command::new(program);
    cmd.args(check.args_for(&dir.to_string_lossy()))
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2);
    // Its own process group, so one kill reaches what it started while they stay in it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    // One tick early: start times are counted in whole ticks.
    let started = crate::reload::boot_ticks().map_or(0, |t| t.0.saturating_sub(1));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Checked::NotRun(format!("{program}: {e}")),
    };
    // `cmd` holds the pipe's write ends: dropped, the reader sees the end when the checker's go.
    drop(cmd);
    let pid = child.id();
    let (out_tx, out_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_OUTPUT.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        let _ = out_tx.send(kept);
    });
    let exits = inbox.tx.clone();
    std::thread::spawn(move || {
        let _ = exits.send(Message::Exited(child.wait()));
    });
    let ended = match inbox.rx.recv_timeout(timeout) {
        Ok(Message::Exited(status)) => Ok(status),
        Ok(Message::Cancel) => Err(Checked::Cancelled),
        Err(_) => Err(Checked::TimedOut(timeout)),
    };
    // Whatever it left running is ended, whichever way it ended: a child that outlived it would go
    // on running as confgate's user, with the pipe (and the staged dir) open.
    end_descendants(pid, started);
    let status = match ended {
        Ok(status) => status,
        Err(stopped) => {
            // Reaped by the waiting thread once the kill has reached it.
            let _ = inbox.rx.recv_timeout(REAP_GRACE);
            return stopped;
        }
    };
    // Every writer is gone: the output ends at once.
    let out = out_rx.recv_timeout(REAP_GRACE).unwrap_or_default();
    match status {
        Ok(status) if status.success() => Checked::Passed,
        Ok(status) => Checked::Failed {
            status: status.to_string(),
            lines: first_lines(&out),
        },
        Err(e) => Checked::NotRun(format!("{program}: {e}")),
    }
}

/// One process as `/proc/PID/stat` shows it.
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    start: u64,
}

fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `comm` is in parentheses and may hold spaces and parentheses: fields after the last `)`.
        let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        Some(Proc {
            pid,
            ppid: rest.get(1)?.parse().ok()?,
            pgid: rest.get(2)?.parse().ok()?,
            start: rest.get(19)?.parse().ok()?,
        })
    })
    .collect()
}

/// Kills every process the checker `root` started, and reaps those re-parented here.
///
/// A descendant is found three ways, so none escapes by leaving the group or its parent: it is in
/// the checker's process group; or its parent chain reaches the checker (or another one found); or
/// it was re-parented to this process (a subreaper, see [`run`]) after its parent died, started
/// after the checker did and is outside this process's own group (the checker started a group of its
/// own, which its descendants inherit or leave for a group or session of their own; this process's
/// own children, such as a kubeconfig's credential plugin, stay in its group). Passes repeat until a pass finds none: a process forking while
/// it is killed leaves children that the next pass finds re-parented here.
fn end_descendants(root: u32, started: u64) {
    let Ok(root) = i32::try_from(root) else {
        return;
    };
    let me = nix::unistd::getpid().as_raw();
    let own_group = nix::unistd::getpgrp().as_raw();
    for _ in 0..MAX_PASSES {
        let all = processes();
        let mut found: BTreeSet<i32> = all
            .iter()
            .filter(|p| {
                p.pid != root
                    && (p.pgid == root
                        || p.ppid == root
                        || (p.ppid == me && p.start >= started && p.pgid != own_group))
            })
            .map(|p| p.pid)
            .collect();
        loop {
            let more: Vec<i32> = all
                .iter()
                .filter(|p| found.contains(&p.ppid) && !found.contains(&p.pid))
                .map(|p| p.pid)
                .collect();
            if more.is_empty() {
                break;
            }
            found.extend(more);
        }
        // The checker itself, if still running (its group is gone with it otherwise).
        let _ = kill(Pid::from_raw(-root), Signal::SIGKILL);
        if found.is_empty() {
            return;
        }
        for &pid in &found {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        for p in all
            .iter()
            .filter(|p| p.ppid == me && found.contains(&p.pid))
        {
            // Ours to reap now that it is re-parented here; one killed but not yet dead is reaped
            // on the next pass.
            let _ = waitpid(Pid::from_raw(p.pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// The first non-empty lines of `out`, each trimmed and cut at [`MAX_LINE`] bytes on a character
/// boundary.
fn first_lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(MAX_LINES)
        .map(|l| {
            let mut end = l.len().min(MAX_LINE);
            while !l.is_char_boundary(end) {
                end -= 1;
            }
            l[..end].to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks run one at a time in confgate; the tests' threads take turns too, or one check's
    /// ending would take another's checker for a descendant of its own.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn run(check: &Validate, dir: &Path, timeout: Duration) -> Checked {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        super::run(check, dir, timeout, cancellable().1)
    }

    /// Waits (with a deadline) until `pid` is gone, reaped.
    fn gone(pid: &str) -> bool {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < end {
            if !Path::new("/proc").join(pid).exists() {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    fn sh(script: &str) -> Validate {
        Validate::Exec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into(), "{dir}".into()],
        }
    }

    #[test]
    fn exit_status_and_first_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.yml"), "x").unwrap();
        let t = Duration::from_secs(30);
        assert_eq!(run(&sh("test -f c.yml"), dir.path(), t), Checked::Passed);
        let Checked::Failed { status, lines } = run(
            &sh("printf 'one\\n\\n two \\n'; echo err >&2; seq 1 100; exit 3"),
            dir.path(),
            t,
        ) else {
            panic!()
        };
        assert!(status.contains('3'), "{status}");
        assert_eq!(lines, ["one", "two", "err", "1", "2"]);
        let Checked::Failed { lines, .. } = run(
            &sh("head -c 1000000 /dev/zero | tr '\\0' x; exit 1"),
            dir.path(),
            t,
        ) else {
            panic!()
        };
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), MAX_LINE);
        let env = run(&sh("test -z \"$HOME$CONFGATE_RELOAD\""), dir.path(), t);
        assert_eq!(env, Checked::Passed, "no environment but PATH");
    }

    #[test]
    fn a_checker_past_its_bound_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        // The checker's child holds the pipe open: the kill reaches it through the group.
        let r = run(
            &sh("sleep 600 & sleep 600"),
            dir.path(),
            Duration::from_millis(200),
        );
        assert_eq!(r, Checked::TimedOut(Duration::from_millis(200)));
    }

    #[test]
    fn a_checker_that_is_not_there_is_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let v = Validate::Exec {
            program: "/validators/nothing-here".into(),
            args: vec!["{dir}".into()],
        };
        let Checked::NotRun(why) = run(&v, dir.path(), Duration::from_secs(5)) else {
            panic!()
        };
        assert!(why.starts_with("/validators/nothing-here: "), "{why}");
    }

    /// A checker that exits at once, leaving a child in a session of its own and one whose parent
    /// exited (re-parented): both are ended with it, not left running as confgate's user.
    #[test]
    fn every_descendant_of_a_checker_is_ended_when_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        // The staged dir is `c`; what escaped is noted beside it.
        std::fs::create_dir(dir.path().join("c")).unwrap();
        let r = run(
            &sh(
                "setsid sleep 600 >/dev/null 2>&1 & echo $! > ../escaped-setsid; \
                 (sleep 600 >/dev/null 2>&1 & echo $! > ../escaped-orphan); exit 0",
            ),
            &dir.path().join("c"),
            Duration::from_secs(30),
        );
        assert_eq!(r, Checked::Passed);
        for name in ["escaped-setsid", "escaped-orphan"] {
            let pid = std::fs::read_to_string(dir.path().join(name)).unwrap();
            assert!(gone(pid.trim()), "{name} {pid} outlived the checker");
        }
    }

    /// A cancelled check ends at once, with whatever the checker started.
    #[test]
    fn a_cancelled_check_ends_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let (cancel, inbox) = cancellable();
        let d = dir.path().to_path_buf();
        let check = sh("setsid sleep 600 >/dev/null 2>&1 & echo $! > pid; sleep 600");
        let t = std::thread::spawn(move || {
            let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
            super::run(&check, &d, Duration::from_secs(300), inbox)
        });
        let pid_file = dir.path().join("pid");
        let end = std::time::Instant::now() + Duration::from_secs(10);
        let pid = loop {
            if let Ok(p) = std::fs::read_to_string(&pid_file)
                && p.ends_with('\n')
            {
                break p;
            }
            assert!(std::time::Instant::now() < end, "the checker never started");
            std::thread::yield_now();
        };
        cancel.cancel();
        assert_eq!(t.join().unwrap(), Checked::Cancelled);
        assert!(gone(pid.trim()), "{pid} outlived the cancelled check");
    }
}
