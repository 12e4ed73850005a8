//! Test and benchmark helpers: a kubelet AtomicWriter replica, the real binary on loopback, a reload
//! sink, /proc readings, and waiting with deadlines. No test picks a port for a child: children bind
//! port 0 and the test reads the bound port back.
#![allow(dead_code)]

mod docs;
mod kubelet;
mod net;
mod procfs;

// Each test crate compiles this module and uses a part of it.
#[allow(unused_imports)]
pub use docs::*;
#[allow(unused_imports)]
pub use kubelet::*;
#[allow(unused_imports)]
pub use net::*;
#[allow(unused_imports)]
pub use procfs::*;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_confgate");

/// The binary with none of the gate settings' environment variables, so that every setting comes from
/// the test's own flags whatever the environment the tests run in.
pub fn confgate_alone() -> Command {
    let mut cmd = Command::new(BIN);
    for v in [
        "CONFGATE_ACCEPTS",
        "CONFGATE_VERSION_FROM",
        "CONFGATE_REQUIRE",
        "CONFGATE_VARIANTS",
        "CONFGATE_RULES",
        "CONFGATE_RULES_FILE",
        "CONFGATE_MODE",
    ] {
        cmd.env_remove(v);
    }
    cmd
}

/// A reason as the admission policy words it: CEL cannot list the keys present nor quote the semver
/// parser's detail, so those two parts of `check`'s reason are left out; the rest, its fix included, is
/// the same.
pub fn as_admission_words_it(mut reason: String) -> String {
    // The list ends at the first `); `: a cut name inside it ends with `bytes)` followed by `)`.
    if let Some(i) = reason.find(" (present: ") {
        let end = i
            + reason[i..]
                .find("); ")
                .expect("the fix after the keys present")
            + 1;
        reason.replace_range(i..end, "");
    }
    if let (Some(i), Some(j)) = (
        reason.find(": not a semantic version ("),
        reason.find("); allowed: "),
    ) {
        reason.replace_range(i + ": not a semantic version".len()..j + 1, "");
    }
    reason
}

pub const DEADLINE: Duration = Duration::from_secs(10);

/// Polls `f` every few milliseconds until it returns `Some`, or panics with `what` after `deadline`.
pub fn wait_for<T>(what: &str, deadline: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_every(what, deadline, Duration::from_millis(2), f)
}

/// [`wait_for`] looking every 100 ms: for conditions that cost a request or a process per look.
pub fn poll<T>(what: &str, deadline: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_every(what, deadline, Duration::from_millis(100), f)
}

/// Looks at `f` every `every` until it returns `Some`, or panics with `what` after `deadline`.
pub fn wait_every<T>(
    what: &str,
    deadline: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
        std::thread::sleep(every);
    }
}

/// `active.version` of a status, when there is one.
pub fn active_version(s: &serde_json::Value) -> Option<&str> {
    s["active"]["version"].as_str()
}

/// Paths a test gate uses under one temp dir.
pub struct Dirs {
    pub root: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("podinfo")).unwrap();
        Dirs { root }
    }
    pub fn watch(&self) -> PathBuf {
        self.root.path().join("incoming")
    }
    pub fn promoted(&self) -> PathBuf {
        self.root.path().join("active")
    }
    pub fn podinfo(&self) -> PathBuf {
        self.root.path().join("podinfo")
    }
    pub fn log(&self) -> PathBuf {
        self.root.path().join("confgate.log")
    }
}

/// A running `confgate run` on a loopback port. Killed on drop; when dropped by a failing test, the end
/// of its log is printed.
pub struct Gate {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
    /// How long [`Gate::wait_status`] waits.
    pub deadline: Duration,
}

impl Gate {
    /// Starts the binary with `--watch`, `--promote-to`, `--annotations` under `dirs` plus `args`, logging
    /// at debug level, and waits until it answers `/livez`.
    pub fn start(dirs: &Dirs, args: &[&str]) -> Gate {
        let mut all: Vec<OsString> = vec![
            "--watch".into(),
            dirs.watch().into(),
            "--promote-to".into(),
            dirs.promoted().into(),
            "--annotations".into(),
            dirs.podinfo().join("annotations").into(),
        ];
        all.extend(args.iter().map(OsString::from));
        let g = Gate::launch(&all, &dirs.log(), Some("debug"));
        wait_for("confgate to answer /livez", DEADLINE, || {
            get(g.port, "/livez").filter(|(c, _)| *c == 200)
        });
        g
    }

    /// Starts `confgate run --listen 127.0.0.1:0 ARGS...` at its default log level, logging to `log`,
    /// and waits only until it has bound its port.
    pub fn spawn(args: &[&str], log: &Path) -> Gate {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        Gate::launch(&args, log, None)
    }

    fn launch(args: &[OsString], log: &Path, level: Option<&str>) -> Gate {
        let mut cmd = Command::new(BIN);
        cmd.arg("run").args(args);
        match level {
            Some(l) => cmd.env("CONFGATE_LOG", l),
            None => cmd.env_remove("CONFGATE_LOG"),
        };
        Gate::from_command(cmd, log)
    }

    /// Starts `cmd` (a `confgate run ...` the caller has built) with `--listen 127.0.0.1:0` added,
    /// stderr to `log`, and returns once the port the kernel gave it is read back from its start-up
    /// line: no port is ever chosen by the test and released before the child binds it.
    pub fn from_command(cmd: Command, log: &Path) -> Gate {
        Gate::listening(cmd, log, "127.0.0.1:0")
    }

    /// [`Gate::from_command`] listening on `listen` (port 0).
    pub fn listening(mut cmd: Command, log: &Path, listen: &str) -> Gate {
        let logfile = std::fs::File::create(log).expect("create log file");
        // The start-up line is logged at info, so a level inherited from the environment must not hide it.
        if !cmd.get_envs().any(|(k, _)| k == "CONFGATE_LOG") {
            cmd.env_remove("CONFGATE_LOG");
        }
        cmd.args(["--listen", listen])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logfile);
        let mut g = Gate {
            child: cmd.spawn().expect("spawn confgate"),
            port: 0,
            log: log.to_path_buf(),
            deadline: DEADLINE,
        };
        let port = wait_for("confgate to log the port it bound", DEADLINE, || {
            let text = g.log_text();
            if let Some(port) = bound_port(&text) {
                return Some(port);
            }
            if let Ok(Some(exit)) = g.child.try_wait() {
                panic!("confgate exited ({exit}) before listening; its log:\n{text}");
            }
            None
        });
        g.port = port;
        g
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn status(&self) -> serde_json::Value {
        status(self.port).expect("status")
    }

    /// `/status` read as the typed struct the binary serialises.
    pub fn typed_status(&self) -> confgate::state::Status {
        let (code, body) = get(self.port, "/status").expect("status");
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// Waits up to `self.deadline` until `/status` satisfies `pred`, and returns it.
    pub fn wait_status(
        &self,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut last = None;
        let end = Instant::now() + self.deadline;
        loop {
            if let Some(s) = status(self.port) {
                if pred(&s) {
                    return s;
                }
                last = Some(s);
            }
            assert!(
                Instant::now() < end,
                "timed out after {:?} waiting for {what}; last status: {}",
                self.deadline,
                serde_json::to_string_pretty(&last).unwrap()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits until the active config has `version` and no newer snapshot is held back.
    pub fn wait_active(&self, version: &str) -> serde_json::Value {
        self.wait_status(&format!("active version {version}"), |s| {
            s["active"]["version"] == version && s["candidate"].is_null()
        })
    }

    /// Waits until the newest snapshot is held back with this verdict and exactly this version (`None`:
    /// no version could be read).
    pub fn wait_candidate(&self, version: Option<&str>, verdict: &str) -> serde_json::Value {
        self.wait_status(&format!("candidate {version:?} {verdict}"), |s| {
            s["candidate"]["verdict"] == verdict
                && match version {
                    Some(v) => s["candidate"]["version"] == v,
                    None => s["candidate"]["version"].is_null(),
                }
        })
    }

    /// Sends SIGTERM and waits up to [`DEADLINE`] for the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM confgate");
        wait_exit(&mut self.child, "confgate to stop after SIGTERM", DEADLINE)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill confgate");
        wait_exit(&mut self.child, "confgate to die after SIGKILL", DEADLINE);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let exited = self.child.try_wait().ok().flatten();
            let log = self.log_text();
            let mut from = log.len().saturating_sub(4000);
            while !log.is_char_boundary(from) {
                from += 1;
            }
            let tail = &log[from..];
            eprintln!("confgate exit status: {exited:?}; end of its log:\n{tail}");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port in confgate's start-up line (`confgate started addr=...` in text, `"addr":"..."` in JSON),
/// once it is in `log`.
pub fn bound_port(log: &str) -> Option<u16> {
    let line = log.lines().find(|l| l.contains("confgate started"))?;
    let addr = if let Some((_, rest)) = line.split_once("addr=") {
        rest.split_whitespace().next()?
    } else {
        line.split_once("\"addr\":\"")?.1.split('"').next()?
    };
    Some(addr.parse::<std::net::SocketAddr>().ok()?.port())
}

/// Waits up to `deadline` for `child` to exit and returns its status; kills it and panics past that.
pub fn wait_exit(child: &mut Child, what: &str, deadline: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + deadline;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Kills and reaps a child process when dropped, so a failed assertion leaves nothing running.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        // SIGKILL cannot be caught, so this wait is bounded by the kernel tearing the process down.
        let _ = self.0.wait();
    }
}

/// The TCP port a process listens on, read from `/proc`: its socket descriptors' inodes matched against
/// the kernel's listening sockets. A server that logs only the address it was given (Prometheus)
/// binds port 0 and the test learns the port here, without choosing one and releasing it first.
pub fn listening_port(pid: u32) -> Option<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_str()?.to_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?;
    // Columns: sl local_address rem_address st ... inode; st 0A is LISTEN.
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (local, state, inode) = (cols.get(1)?, cols.get(3)?, cols.get(9)?);
        if *state != "0A" || !inodes.iter().any(|i| i == inode) {
            return None;
        }
        u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
    })
}

/// Runs `cmd` with `stdin` as its whole standard input, capturing standard output and error.
pub fn output_with_stdin(mut cmd: Command, stdin: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Dropped at the end of the statement, so the child sees end of input. A child that refuses its
    // flags exits before it reads: its input is then a broken pipe, not a failure of the test.
    match child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin.as_bytes())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
        _ => {}
    }
    child.wait_with_output().expect("wait")
}

/// A tool on PATH or in the virtual environment `.ci/setup` makes. A missing one fails the test that
/// needs it, naming it: the README's test command runs `.ci/setup` first, so nothing is skipped.
pub fn tool(name: &str) -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::iter::once(venv)
        .chain(std::env::split_paths(&path))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("this test needs {name}: run .ci/setup (it installs it), or put it on PATH")
        })
}

/// Helm v4: `HELM_BIN` where set (as `.ci/run` sets it), else `helm` as [`tool`] finds it; fails the
/// test naming it when neither is there.
pub fn helm() -> PathBuf {
    match std::env::var_os("HELM_BIN") {
        Some(p) if Path::new(&p).is_file() => PathBuf::from(p),
        Some(p) => panic!(
            "this test needs helm: HELM_BIN is {} and no file is there; run .ci/setup (it builds it)",
            Path::new(&p).display()
        ),
        None => tool("helm"),
    }
}

/// `kubectl kustomize DIR`'s output; fails the test, naming the cause, when kubectl is missing or
/// the build fails.
pub fn kustomize(dir: &Path) -> String {
    let out = Command::new(tool("kubectl"))
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
