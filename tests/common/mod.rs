//! Test helpers: a kubelet AtomicWriter replica, the real binary on loopback, and waiting with deadlines.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_confgate");

/// Writes `files` as the complete new payload of a kubelet volume, in the AtomicWriter's order
/// (kubernetes `pkg/volume/util/atomic_writer.go`): new timestamped dir (0755) with the files (0644),
/// `..data_tmp` link, rename over `..data`, links for new top-level keys, unlink vanished keys, remove
/// the old dir. Like the kubelet, an unchanged payload writes nothing.
pub fn kubelet_write(dir: &Path, files: &[(&str, &[u8])]) {
    std::fs::create_dir_all(dir).unwrap();
    let data = dir.join("..data");
    let old = std::fs::read_link(&data).ok();
    let old_keys: Vec<String> = old
        .as_ref()
        .map(|o| {
            std::fs::read_dir(dir.join(o))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if let Some(o) = &old {
        let same = old_keys.len() == files.len()
            && files
                .iter()
                .all(|(k, v)| std::fs::read(dir.join(o).join(k)).ok().as_deref() == Some(*v));
        if same {
            return;
        }
    }
    let stamp = jiff::Timestamp::now()
        .strftime("..%Y_%m_%d_%H_%M_%S.")
        .to_string();
    let ts = loop {
        let name = format!("{stamp}{}", fastrand::u32(..));
        if std::fs::create_dir(dir.join(&name)).is_ok() {
            break name;
        }
    };
    std::fs::set_permissions(dir.join(&ts), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (k, v) in files {
        let p = dir.join(&ts).join(k);
        std::fs::write(&p, v).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&ts, &tmp).unwrap();
    std::fs::rename(&tmp, &data).unwrap();
    for (k, _) in files {
        let link = dir.join(k);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(k), &link).unwrap();
        }
    }
    for k in &old_keys {
        if !files.iter().any(|(f, _)| f == k) {
            let _ = std::fs::remove_file(dir.join(k));
        }
    }
    if let Some(o) = old {
        std::fs::remove_dir_all(dir.join(o)).unwrap();
    }
}

/// A volume holding one key `version`.
pub fn write_version(dir: &Path, version: &str) {
    kubelet_write(dir, &[("version", version.as_bytes())]);
}

/// The downward-API annotations file, as the kubelet formats it, written through the same AtomicWriter.
pub fn write_annotations(dir: &Path, pairs: &[(&str, &str)]) {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let text = confgate::annotations::format(&map);
    kubelet_write(dir, &[("annotations", text.as_bytes())]);
}

/// Reads every key of a kubelet-layout dir through one resolution of `..data`.
pub fn read_promoted(dir: &Path) -> Option<BTreeMap<String, String>> {
    let ts = std::fs::read_link(dir.join("..data")).ok()?;
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir.join(ts)).ok()?.flatten() {
        let v = std::fs::read_to_string(e.path()).ok()?;
        out.insert(e.file_name().to_string_lossy().into_owned(), v);
    }
    Some(out)
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` until it returns `Some`, or panics with `what` after `deadline`.
pub fn wait_for<T>(what: &str, deadline: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub const DEADLINE: Duration = Duration::from_secs(10);

/// A plain HTTP/1.1 request; returns status code and body.
pub fn http(method: &str, port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.split(' ').nth(1)?.parse().ok()?;
    let body = buf
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_owned();
    Some((code, body))
}

pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    http("GET", port, path)
}

pub fn status(port: u16) -> Option<serde_json::Value> {
    let (code, body) = get(port, "/status")?;
    (code == 200).then(|| serde_json::from_str(&body).ok())?
}

/// A running `confgate run` on loopback, killed on drop.
pub struct Gate {
    pub child: Child,
    pub port: u16,
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

impl Gate {
    /// Starts the binary with `--watch`, `--promote-to`, `--annotations` under `dirs` plus `args`, and waits
    /// until it answers `/livez`.
    pub fn start(dirs: &Dirs, args: &[&str]) -> Gate {
        let port = free_port();
        let log = std::fs::File::create(dirs.log()).unwrap();
        let child = Command::new(BIN)
            .arg("run")
            .arg("--watch")
            .arg(dirs.watch())
            .arg("--promote-to")
            .arg(dirs.promoted())
            .arg("--annotations")
            .arg(dirs.podinfo().join("annotations"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .env("CONFGATE_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let g = Gate { child, port };
        wait_for("confgate to answer /livez", DEADLINE, || {
            get(port, "/livez").filter(|(c, _)| *c == 200)
        });
        g
    }

    pub fn status(&self) -> serde_json::Value {
        status(self.port).expect("status")
    }

    /// Waits until `/status` satisfies `pred`, and returns it.
    pub fn wait_status(
        &self,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut last = None;
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(s) = status(self.port) {
                if pred(&s) {
                    return s;
                }
                last = Some(s);
            }
            assert!(
                Instant::now() < end,
                "timed out waiting for {what}; last status: {}",
                serde_json::to_string_pretty(&last).unwrap()
            );
            std::thread::sleep(Duration::from_millis(5));
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

    pub fn stop(mut self) -> std::process::ExitStatus {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills and reaps a child process when dropped, so a failed assertion leaves nothing running.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
