//! The physical floor of a reaction: the least any reloader can do between a `..data` rename and a
//! reload POST. One thread blocks on inotify for the rename of `..data` in one directory and writes a
//! fixed POST on one kept-alive loopback connection, then reads the answer. Nothing is read, hashed,
//! judged, copied or logged. The benchmark runs it as a process of its own (itself, re-executed with
//! `--floor`), so it pays the same process and scheduler costs as the reloaders it is compared with.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// The argument that makes the benchmark binary run the floor instead of the benchmark.
pub const FLAG: &str = "--floor";

/// Runs the floor for `dir`, POSTing to `127.0.0.1:port/reload`, until killed. Prints `ready` once
/// the watch is in place.
pub fn main(dir: &Path, port: u16) -> ! {
    let ino = Inotify::init(InitFlags::IN_CLOEXEC).expect("inotify_init");
    ino.add_watch(dir, AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE)
        .expect("inotify_add_watch");
    println!("ready");
    let _ = std::io::stdout().flush();
    let request =
        format!("POST /reload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\r\n");
    let mut conn: Option<TcpStream> = None;
    let mut buf = [0u8; 512];
    loop {
        let events = ino.read_events().expect("read inotify events");
        if !events
            .iter()
            .any(|e| e.name.as_deref() == Some(OsStr::new("..data")))
        {
            continue;
        }
        // A connection the sink closed fails on write or read; one fresh connection is tried then.
        for _ in 0..2 {
            let s = match conn.take() {
                Some(s) => s,
                None => {
                    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the sink");
                    s.set_nodelay(true).expect("TCP_NODELAY");
                    s
                }
            };
            if post(&s, request.as_bytes(), &mut buf) {
                conn = Some(s);
                break;
            }
        }
    }
}

/// Writes the request and reads the answer's head (the sink answers with no body).
fn post(mut s: &TcpStream, request: &[u8], buf: &mut [u8]) -> bool {
    if s.write_all(request).is_err() {
        return false;
    }
    let mut got = 0;
    while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
        if got == buf.len() {
            return false;
        }
    }
    true
}

/// The floor as a child process watching `dir` and POSTing to `port`; returns once it watches.
pub fn spawn(dir: &Path, port: u16) -> Child {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mut child = Command::new(exe)
        .arg(FLAG)
        .arg(dir)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the floor");
    let mut out = child.stdout.take().expect("the floor's stdout");
    let mut line = [0u8; 6];
    out.read_exact(&mut line).expect("the floor says ready");
    assert_eq!(&line, b"ready\n", "the floor's first line");
    child
}
