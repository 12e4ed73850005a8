//! Which processes a `signal:NAME:PROCESS` reload reaches, with real processes: the full name when it is
//! longer than `comm` holds, only processes started before the promotion, and a signal that would kill
//! only to a process that catches it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::common;

use confgate::reload::{BootTicks, Error, Sent, signal_by_name};
use nix::sys::signal::Signal;

const DEADLINE: Duration = Duration::from_secs(10);

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A running process, killed and reaped on drop.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    /// Sends USR1, which the shell logs after any HUP already delivered (dash runs pending traps in
    /// signal-number order), and waits for it: after that, the log says whether a HUP came.
    fn settle(&self) -> String {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid() as i32),
            Signal::SIGUSR1,
        )
        .unwrap();
        wait_for("the USR1 mark", || {
            let l = self.log();
            l.contains("usr1").then_some(l)
        })
    }
    /// Waits until the log shows a HUP: one that was sent must come.
    fn wait_hup(&self) {
        wait_for("the HUP in the log", || {
            self.log().lines().any(|l| l == "hup").then_some(())
        });
    }
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// `signal_by_name`, scanned again while the process it refused is not one of `shells`: each shell's loop
/// forks a copy of itself for every `sleep`, which shares its name, with the default handlers, until it
/// execs. A scan that met such a copy has still signalled the shells, so their logs may show a signal
/// twice.
fn signal_past_forks(
    signal: Signal,
    name: &str,
    promoted_at: Option<BootTicks>,
    shells: &[&Proc],
) -> Sent {
    wait_for(
        "a scan that meets no half-made fork",
        || match signal_by_name(signal, name, promoted_at) {
            Ok(sent) => Some(sent),
            Err(Error::NotCaught { pid, .. }) if shells.iter().all(|p| p.pid() as i32 != pid) => {
                None
            }
            Err(e) => panic!("{e}"),
        },
    )
}

/// `/bin/sh` run through a link named `name` (so `comm` is `name` cut to 15 bytes and `argv[0]` is the
/// full path), trapping HUP and USR1 into a log, once both handlers are installed.
fn shell_named(dir: &Path, name: &str, tag: &str) -> Proc {
    let exe = dir.join(name);
    if !exe.exists() {
        std::os::unix::fs::symlink("/bin/sh", &exe).unwrap();
    }
    let log = dir.join(format!("{tag}.log"));
    let ready = dir.join(format!("{tag}.ready"));
    // A shell cannot trap a signal ignored when it started (POSIX), and a test run under `nohup` or a CI
    // runner may ignore HUP: `env --default-signal` restores every default before `exe` runs.
    let child = Command::new("env")
        .arg("--default-signal")
        .arg(&exe)
        .arg("-c")
        .arg(
            "trap 'echo hup >> \"$1\"' HUP; trap 'echo usr1 >> \"$1\"' USR1; : > \"$2\"; \
             while :; do sleep 1 & wait $!; done",
        )
        .arg("sh")
        .arg(&log)
        .arg(&ready)
        .spawn()
        .unwrap();
    wait_for("the handlers", || ready.exists().then_some(()));
    Proc { child, log }
}

#[test]
fn a_long_name_matches_the_full_name_not_the_first_15_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let a = shell_named(tmp.path(), "component-server-a", "a");
    let b = shell_named(tmp.path(), "component-server-b", "b");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", b.pid())).unwrap();
    assert_eq!(comm.trim(), "component-serve");
    let sent = signal_past_forks(Signal::SIGHUP, "component-server-a", None, &[&a]);
    // At least the shell; its loop may have forked a child that has not yet exec'd `sleep`, which
    // shares the name for that instant. Whether -b was spared is what the log below shows.
    assert!(matches!(sent, Sent::Reloaded(n) if n >= 1), "{sent:?}");
    a.wait_hup();
    assert_eq!(
        b.settle(),
        "usr1\n",
        "component-server-b got the HUP meant for -a"
    );
}

#[test]
fn a_process_that_does_not_catch_hup_is_not_sent_it_one_that_traps_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("plain-sleeper");
    std::os::unix::fs::symlink("/usr/bin/sleep", &exe).unwrap();
    let mut plain = Proc {
        child: Command::new(&exe).arg("600").spawn().unwrap(),
        log: tmp.path().join("none"),
    };
    // Exec has happened once /proc shows the new name.
    wait_for("the exec", || {
        std::fs::read_to_string(format!("/proc/{}/comm", plain.pid()))
            .ok()
            .filter(|c| c.trim() == "plain-sleeper")
    });
    let err = signal_by_name(Signal::SIGHUP, "plain-sleeper", None).unwrap_err();
    assert!(matches!(err, Error::NotCaught { .. }), "{err}");
    assert!(err.to_string().contains("does not catch SIGHUP"), "{err}");
    // A signal is never ignored into a kill later either: it was not sent, the process runs.
    assert!(plain.alive());
    // TERM is the restart strategy: it goes whether caught or not.
    assert_eq!(
        signal_by_name(Signal::SIGTERM, "plain-sleeper", None).unwrap(),
        Sent::Reloaded(1)
    );
    wait_for("the TERM to end it", || (!plain.alive()).then_some(()));

    let trapping = shell_named(tmp.path(), "trapping-shell", "t");
    // At least the shell (a fork of its loop not yet exec'd shares the name for an instant).
    let sent = signal_past_forks(Signal::SIGHUP, "trapping-shell", None, &[&trapping]);
    assert!(matches!(sent, Sent::Reloaded(n) if n >= 1), "{sent:?}");
    trapping.wait_hup();
}

/// The state letter of `/proc/PID/stat` (`T` when stopped).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..]
        .trim_start()
        .chars()
        .next()
        .unwrap()
}

/// `sleep` running as `name` (its `comm`), which catches no signal, once the exec is done.
fn sleeper(dir: &Path, name: &str) -> Proc {
    let exe = dir.join(name);
    std::os::unix::fs::symlink("/usr/bin/sleep", &exe).unwrap();
    let p = Proc {
        child: Command::new(&exe).arg("600").spawn().unwrap(),
        log: dir.join("none"),
    };
    wait_for("the exec", || {
        std::fs::read_to_string(format!("/proc/{}/comm", p.pid()))
            .ok()
            .filter(|c| c.trim() == name)
    });
    p
}

/// `signal:STOP:NAME` (or TSTP, TTIN, TTOU) is no reload: its default action freezes the process,
/// and STOP cannot be caught. A live annotation may pick a signal, so these go only to a process
/// that handles them, as a signal that would kill does: never STOP.
#[test]
fn a_signal_that_would_stop_the_process_is_not_sent_unless_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let mut plain = sleeper(tmp.path(), "stop-sleeper");
    for signal in [
        Signal::SIGSTOP,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
    ] {
        let err = signal_by_name(signal, "stop-sleeper", None).unwrap_err();
        assert!(matches!(err, Error::NotCaught { .. }), "{signal}: {err}");
        assert!(
            err.to_string()
                .contains(&format!("does not catch {}", signal.as_str())),
            "{err}"
        );
        assert_ne!(state(plain.pid()), 'T', "{signal} stopped the process");
    }
    assert!(plain.alive());
}

/// A signal whose default action is to do nothing (CHLD, URG, WINCH, CONT) reloads nothing in a
/// process that does not catch it: it is not sent, and the reload is a failure, never a reload made
/// (which would mark the config applied and start its known-good trial).
#[test]
fn a_signal_that_would_do_nothing_is_not_taken_as_a_reload_unless_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let mut plain = sleeper(tmp.path(), "idle-sleeper");
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGURG,
        Signal::SIGWINCH,
        Signal::SIGCONT,
    ] {
        let err = signal_by_name(signal, "idle-sleeper", None).unwrap_err();
        assert!(matches!(err, Error::NotCaught { .. }), "{signal}: {err}");
        assert!(
            err.to_string().contains(&format!(
                "does not catch {}, which would do nothing",
                signal.as_str()
            )),
            "{err}"
        );
    }
    assert!(plain.alive());
}

#[test]
fn only_processes_started_before_the_promotion_are_signalled() {
    let tmp = tempfile::tempdir().unwrap();
    let old = shell_named(tmp.path(), "gen-target", "old");
    // The promotion, then a restart of the component a tick later.
    let promoted_at = confgate::reload::boot_ticks().unwrap();
    wait_for("the next clock tick", || {
        (confgate::reload::boot_ticks().unwrap() > promoted_at).then_some(())
    });
    let new = shell_named(tmp.path(), "gen-target", "new");
    assert_eq!(
        signal_past_forks(
            Signal::SIGHUP,
            "gen-target",
            Some(promoted_at),
            &[&old, &new]
        ),
        Sent::Reloaded(1)
    );
    old.wait_hup();
    assert_eq!(
        new.settle(),
        "usr1\n",
        "a process started after the promotion got HUP"
    );
    drop(old);
    // Only the newer process is left: nothing to reload, not a failure.
    let got = wait_for("the old process to be gone", || {
        match signal_past_forks(Signal::SIGHUP, "gen-target", Some(promoted_at), &[&new]) {
            Sent::NothingToReload(why) => Some(why),
            Sent::Reloaded(_) | Sent::NoProcess(_) => None,
        }
    });
    assert!(got.contains("started after the promotion"), "{got}");
}

/// `signal:HUP:compx` where two processes are named `compx`: the component, which traps HUP, and a
/// helper that does not. The component gets HUP once, the helper is left alone, and the reload
/// counts as made; another attempt of the same request does not signal the component again.
#[test]
fn a_name_shared_with_a_helper_that_does_not_catch_the_signal_reloads_the_component_once() {
    let tmp = tempfile::tempdir().unwrap();
    let component = shell_named(tmp.path(), "compx-shared", "c");
    // The same base name, another program: a sleep, with HUP's default action.
    let bin = tmp.path().join("helper");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink("/usr/bin/sleep", bin.join("compx-shared")).unwrap();
    let mut helper = Proc {
        child: Command::new(bin.join("compx-shared"))
            .arg("600")
            .spawn()
            .unwrap(),
        log: tmp.path().join("none"),
    };
    wait_for("the helper's exec", || {
        std::fs::read_to_string(format!("/proc/{}/comm", helper.pid()))
            .ok()
            .filter(|c| c.trim() == "compx-shared")
    });
    let mut reached = confgate::reload::Reached::new();
    let sent =
        confgate::reload::signal_once(Signal::SIGHUP, "compx-shared", None, &mut reached).unwrap();
    assert!(matches!(sent, Sent::Reloaded(n) if n >= 1), "{sent:?}");
    component.wait_hup();
    // The same request tried again (the worker retries on any error): nothing more is sent.
    let again =
        confgate::reload::signal_once(Signal::SIGHUP, "compx-shared", None, &mut reached).unwrap();
    assert!(matches!(again, Sent::Reloaded(n) if n >= 1), "{again:?}");
    let hups = component.settle().lines().filter(|l| *l == "hup").count();
    assert_eq!(hups, 1, "the component was signalled again");
    assert!(helper.alive(), "the helper got a HUP it does not catch");
}

/// `unshare`, once it has shown that this machine lets a user make a user and a PID namespace
/// (`unshare -Urpf`); a machine that does not fails the test saying so, never skips it.
fn own_pid_namespace() -> PathBuf {
    let unshare = common::tool("unshare");
    let ok = Command::new(&unshare)
        .args(["-Urpf", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs user and PID namespaces (`unshare -Urpf --mount-proc true` failed)"
    );
    unshare
}

/// A pod without `shareProcessNamespace`: confgate is alone in its PID namespace, so a signal reload
/// can never reach the component. That is a failed reload with the fix (never "nothing to reload",
/// which would count as a success and mark the config applied).
#[test]
fn alone_in_its_pid_namespace_a_signal_reload_fails_naming_the_fix() {
    let unshare = own_pid_namespace();
    let d = common::Dirs::new();
    common::write_version(&d.watch(), "2.0.0");
    let mut cmd = Command::new(unshare);
    // --kill-child: confgate (PID 1 inside) dies with the unshare process the test kills.
    cmd.args(["-Urpf", "--mount-proc", "--kill-child", common::BIN, "run"])
        .arg("--watch")
        .arg(d.watch())
        .arg("--promote-to")
        .arg(d.promoted())
        .args(["--accepts", "^2", "--reload", "signal:HUP:agent"]);
    let mut g = common::Gate::from_command(cmd, &d.log());
    g.deadline = DEADLINE;
    g.wait_active("2.0.0");
    common::write_version(&d.watch(), "2.1.0");
    let s = g.wait_status("the reload of 2.1.0 to fail", |s| {
        s["active"]["version"] == "2.1.0" && s["reload"]["last_result"] == "failure"
    });
    let why = s["reload"]["last_error"].as_str().unwrap_or_default();
    assert!(why.contains("shareProcessNamespace: true"), "{s}");
    assert_ne!(s["applied"]["version"], "2.1.0", "{s}");
    let (_, metrics) = common::get(g.port, "/metrics").expect("/metrics");
    assert!(
        metrics.contains("confgate_last_reload_successful 0"),
        "{metrics}"
    );
    assert!(
        !g.log_text().contains("nothing to reload"),
        "{}",
        g.log_text()
    );
}
