//! Test helpers for the check, component and manifests tests: a kubelet AtomicWriter replica, loopback
//! HTTP, free ports and waiting on a condition with a deadline.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub const DEADLINE: Duration = Duration::from_secs(20);

/// Writes `files` as the complete new payload of a kubelet volume, in the AtomicWriter's order
/// (kubernetes `pkg/volume/util/atomic_writer.go`): new timestamped dir `..YYYY_MM_DD_HH_MM_SS.<random>`
/// (0755) with the files (0644), `..data_tmp` link renamed over `..data`, links `key -> ..data/key` for new
/// keys, vanished keys unlinked, old dir removed. Like the kubelet, an unchanged payload writes nothing.
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
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A plain HTTP/1.1 request on loopback; returns status code and body.
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

/// Kills and reaps a child process when dropped, so a failed assertion leaves nothing running.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
