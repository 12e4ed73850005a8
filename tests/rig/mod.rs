//! Test and benchmark rig: the kubelet's AtomicWriter, a loopback reload sink, and a `confgate run`
//! process with /proc readings. Shared by `tests/soak.rs`, `tests/hostile.rs` and `benches/reaction.rs`.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// A port free right now on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// Polls `f` every few milliseconds until it yields a value or `deadline` passes; then panics with `what`
/// and the last thing `f` reported.
pub fn wait_for<T>(deadline: Duration, what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let end = Instant::now() + deadline;
    loop {
        let last = match f() {
            Ok(v) => return v,
            Err(e) => e,
        };
        assert!(
            Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}; last seen: {last}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

// === impl Volume ===

/// A directory written the way the kubelet's AtomicWriter writes a ConfigMap volume
/// (`pkg/volume/util/atomic_writer.go`), except that it swaps even when nothing changed.
#[derive(Debug, Clone)]
pub struct Volume {
    pub dir: PathBuf,
}

impl Volume {
    pub fn new(dir: impl Into<PathBuf>) -> Volume {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).expect("create volume dir");
        Volume { dir }
    }

    /// One update with `files` as the complete new payload. Returns the instant just before the
    /// `..data` rename, the switch watchers react to. Taken before rather than after: the rename wakes
    /// the watcher, which may preempt this thread before it reads the clock again, and a latency
    /// measured from a late clock reading would come out too small (even zero).
    pub fn write(&self, files: &[(&str, &[u8])]) -> io::Result<Instant> {
        self.write_with(files, |_| Ok(()))
    }

    /// [`Volume::write`], with `extra` run on the new timestamped dir before the swap: for entries a
    /// ConfigMap cannot hold (symlinks, FIFOs) that a hostile or broken writer could put there.
    pub fn write_with(
        &self,
        files: &[(&str, &[u8])],
        extra: impl FnOnce(&Path) -> io::Result<()>,
    ) -> io::Result<Instant> {
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let old_keys = old
            .as_ref()
            .map(|o| top_level(&self.dir.join(o)))
            .unwrap_or_default();
        let prefix = jiff::Timestamp::now()
            .strftime("..%Y_%m_%d_%H_%M_%S.")
            .to_string();
        let ts = loop {
            let name = format!("{prefix}{}", fastrand::u32(..));
            match std::fs::create_dir(self.dir.join(&name)) {
                Ok(()) => break name,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        let ts_path = self.dir.join(&ts);
        std::fs::set_permissions(&ts_path, std::fs::Permissions::from_mode(0o755))?;
        for (key, bytes) in files {
            let p = ts_path.join(key);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, bytes)?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))?;
        }
        extra(&ts_path)?;
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&ts, &tmp)?;
        let swapped = Instant::now();
        std::fs::rename(&tmp, self.dir.join("..data"))?;
        let new_keys: BTreeSet<String> = files
            .iter()
            .map(|(k, _)| k.split('/').next().unwrap_or(k).to_owned())
            .collect();
        for key in &new_keys {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(key), &link)?;
            }
        }
        for key in old_keys.difference(&new_keys) {
            let _ = std::fs::remove_file(self.dir.join(key));
        }
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old))?;
        }
        Ok(swapped)
    }
}

fn top_level(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with(".."))
                .collect()
        })
        .unwrap_or_default()
}

/// Names starting with `..` other than `..data` and the one dir it points at.
pub fn leftovers(dir: &Path) -> Vec<String> {
    let current = std::fs::read_link(dir.join("..data"))
        .ok()
        .map(|t| t.to_string_lossy().into_owned());
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("..") && n != "..data" && Some(n) != current.as_ref())
                .collect()
        })
        .unwrap_or_default()
}

// === impl Sink ===

/// A loopback HTTP server standing in for the component's reload endpoint. Every request's arrival
/// (headers complete) is sent on `arrivals`; when `flapping`, every other request is answered 500.
pub struct Sink {
    pub port: u16,
    pub arrivals: mpsc::Receiver<Instant>,
    pub requests: Arc<AtomicU64>,
    pub failures: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Sink {
    pub fn start(flapping: bool) -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind sink");
        let port = listener.local_addr().expect("sink addr").port();
        let (tx, rx) = mpsc::channel();
        let requests = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (req, fail, st) = (requests.clone(), failures.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (tx, req, fail) = (tx.clone(), req.clone(), fail.clone());
                std::thread::spawn(move || serve_sink(conn, tx, req, fail, flapping));
            }
        });
        Sink {
            port,
            arrivals: rx,
            requests,
            failures,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/reload", self.port)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve_sink(
    conn: TcpStream,
    tx: mpsc::Sender<Instant>,
    requests: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    flapping: bool,
) {
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut out = conn;
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" && !first {
                break;
            }
            first = false;
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let at = Instant::now();
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let n = requests.fetch_add(1, Ordering::Relaxed);
        let fail = flapping && n.is_multiple_of(2);
        if fail {
            failures.fetch_add(1, Ordering::Relaxed);
        }
        let status = if fail {
            "500 Internal Server Error"
        } else {
            "200 OK"
        };
        let _ = tx.send(at);
        if out
            .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes())
            .is_err()
        {
            return;
        }
    }
}

// === HTTP client ===

/// `GET path` on 127.0.0.1:port with a fresh connection: status code and body.
pub fn get(port: u16, path: &str) -> io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_nodelay(true)?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io::Error::other(format!("not an HTTP response: {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

// === impl Confgate ===

/// A running `confgate run` on a loopback port. Killed on drop.
pub struct Confgate {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Confgate {
    /// Starts `bin run --listen 127.0.0.1:<free port> ARGS...`, logging to `log`.
    pub fn spawn(bin: &Path, args: &[&str], log: &Path) -> Confgate {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let logfile = std::fs::File::create(log).expect("create log file");
        let child = Command::new(bin)
            .arg("run")
            .args(["--listen", &listen])
            .args(args)
            .env_remove("CONFGATE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logfile)
            .spawn()
            .expect("spawn confgate");
        Confgate {
            child,
            port,
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The parsed `/status`.
    pub fn status(&self) -> Result<serde_json::Value, String> {
        let (code, body) = get(self.port, "/status").map_err(|e| e.to_string())?;
        if code != 200 {
            return Err(format!("/status answered {code}"));
        }
        serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))
    }

    /// Waits until `/status` satisfies `pred`, returning it.
    pub fn wait_status(
        &self,
        deadline: Duration,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        wait_for(deadline, what, || {
            let s = self.status()?;
            if pred(&s) { Ok(s) } else { Err(s.to_string()) }
        })
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        self.child.wait().expect("wait confgate")
    }
}

impl Drop for Confgate {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let exited = self.child.try_wait().ok().flatten();
            let log = self.log_text();
            let tail = &log[log.len().saturating_sub(4000)..];
            eprintln!("confgate exit status: {exited:?}; end of its log:\n{tail}");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `active.version` of a status, when there is one.
pub fn active_version(s: &serde_json::Value) -> Option<&str> {
    s["active"]["version"].as_str()
}

// === /proc readings ===

/// A `kB` field of /proc/PID/status, e.g. `VmRSS` or `VmHWM`.
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Context switches summed over every thread: (voluntary, involuntary). A voluntary switch is a thread
/// going to sleep, so each wake-up adds one.
pub fn ctxt_switches(pid: u32) -> (u64, u64) {
    let mut vol = 0;
    let mut invol = 0;
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in rd.flatten() {
            let text = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            for l in text.lines() {
                if let Some(v) = l.strip_prefix("voluntary_ctxt_switches:") {
                    vol += v.trim().parse::<u64>().unwrap_or(0);
                } else if let Some(v) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                    invol += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    (vol, invol)
}

/// utime + stime of the process, in clock ticks (USER_HZ, 100 per second on Linux).
pub fn cpu_ticks(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces; fields are counted after its closing parenthesis.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, utime field 14, stime field 15.
    let get = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(14) + get(15)
}

/// Open file descriptors.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

/// Threads.
pub fn thread_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}
