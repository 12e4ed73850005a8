//! Runs the component's own checker (the `validate` setting) on a staged candidate: bounded in time
//! (the checker and whatever it started are killed at the bound) and in output (the first lines are
//! kept, the rest read and dropped so the checker never blocks on a full pipe). Blocking: the loop
//! calls it on the blocking pool, never on the runtime's thread.
//!
//! The checker gets no environment but `PATH` (confgate's own may name credentials), `/dev/null` as
//! its input, the candidate's dir as its working dir, and one pipe for its output and its errors.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::settings::Validate;

/// The most output read into memory; the rest is read and dropped.
const MAX_OUTPUT: usize = 16 * 1024;
/// The most lines kept for a reason.
pub(crate) const MAX_LINES: usize = 5;
/// The most bytes of each line kept.
const MAX_LINE: usize = 200;
/// After the kill at the time bound, how long to wait for the checker's exit to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// What the checker said of a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Checked {
    /// It exited 0.
    Passed,
    /// It exited non-zero or was killed by a signal (`status` as the system words it), with the first
    /// lines of what it wrote.
    Failed { status: String, lines: Vec<String> },
    /// It ran past the bound, and was killed.
    TimedOut(Duration),
    /// It could not be started (absent, not executable).
    NotRun(String),
}

/// Runs `check` on `dir` within `timeout`.
pub(crate) fn run(check: &Validate, dir: &Path, timeout: Duration) -> Checked {
    let Validate::Exec { program, .. } = check else {
        return Checked::Passed;
    };
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
    // Its own process group, so the kill at the bound reaches what it started too.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Checked::NotRun(format!("{program}: {e}")),
    };
    // `cmd` holds the pipe's write ends: dropped, the reader sees the end when the checker's go.
    drop(cmd);
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
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
        let status = child.wait();
        let _ = tx.send((status, kept));
    });
    let done = match rx.recv_timeout(timeout) {
        Ok(done) => done,
        Err(_) => {
            let group = nix::unistd::Pid::from_raw(-(pid as i32));
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            // Reaped by the reader's thread; a child of the checker that escaped its group and holds
            // the pipe leaves that thread waiting, not the loop.
            let _ = rx.recv_timeout(REAP_GRACE);
            return Checked::TimedOut(timeout);
        }
    };
    match done {
        (Ok(status), _) if status.success() => Checked::Passed,
        (Ok(status), out) => Checked::Failed {
            status: status.to_string(),
            lines: first_lines(&out),
        },
        (Err(e), _) => Checked::NotRun(format!("{program}: {e}")),
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
}
