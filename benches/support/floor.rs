//! The physical floor of a reaction: the least any reloader can do between a `..data` rename and a
//! reload POST. One thread blocks on inotify for the rename of `..data` in one directory and writes a
//! fixed POST on one kept-alive loopback connection, then reads the answer. Nothing is read, hashed,
//! judged, copied or logged. The benchmark runs it as a process of its own (itself, re-executed with
//! `--floor`), so it pays the same process and scheduler costs as the reloaders it is compared with.
//!
//! The copy floor (`--floor-copy`) adds the least a gate must do before it may POST: read every key
//! behind `..data`, write each into a new dir beside the component's `..data` and swap that link in
//! by a rename, the kubelet's layout. Nothing is parsed, judged, hashed or logged, no marker is kept
//! for a crash and nothing is checked; the previous dir is removed after the POST.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// The argument that makes the benchmark binary run the floor instead of the benchmark.
pub const FLAG: &str = "--floor";
/// The argument that makes it run the copy floor, promoting into the directory that follows.
pub const COPY_FLAG: &str = "--floor-copy";

/// Runs the floor for `dir`, POSTing to `127.0.0.1:port/reload`, until killed; with `promote_to`, the
/// copy floor, which promotes each new `..data` there first. Prints `ready` once the watch is in place.
pub fn main(dir: &Path, port: u16, promote_to: Option<&Path>) -> ! {
    let ino = Inotify::init(InitFlags::IN_CLOEXEC).expect("inotify_init");
    ino.add_watch(dir, AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE)
        .expect("inotify_add_watch");
    println!("ready");
    let _ = std::io::stdout().flush();
    let request =
        format!("POST /reload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\r\n");
    let mut conn: Option<TcpStream> = None;
    let mut buf = [0u8; 512];
    let mut copier = promote_to.map(Copier::new);
    loop {
        let events = ino.read_events().expect("read inotify events");
        if !events
            .iter()
            .any(|e| e.name.as_deref() == Some(OsStr::new("..data")))
        {
            continue;
        }
        let old = copier.as_mut().map(|c| c.promote(dir));
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
        if let Some(Some(old)) = old {
            std::fs::remove_dir_all(old).expect("remove the previous dir");
        }
    }
}

/// The copy floor's promotions into one directory.
struct Copier {
    out: PathBuf,
    /// How many dirs it made: each new one's name.
    made: u64,
    /// The dir `..data` names now.
    current: Option<PathBuf>,
    /// Keys that already have their `key -> ..data/key` link.
    linked: BTreeSet<std::ffi::OsString>,
}

impl Copier {
    fn new(out: &Path) -> Copier {
        std::fs::create_dir_all(out).expect("create the copy floor's dir");
        Copier {
            out: out.to_owned(),
            made: 0,
            current: None,
            linked: BTreeSet::new(),
        }
    }

    /// Copies what `dir`'s `..data` names into a new dir and swaps it in; returns the dir it replaced.
    fn promote(&mut self, dir: &Path) -> Option<PathBuf> {
        let from = dir.join(std::fs::read_link(dir.join("..data")).expect("read ..data"));
        self.made += 1;
        let name = format!("..{}", self.made);
        let to = self.out.join(&name);
        std::fs::create_dir(&to).expect("create the new dir");
        for entry in std::fs::read_dir(&from).expect("list the volume") {
            let key = entry.expect("a volume entry").file_name();
            let bytes = std::fs::read(from.join(&key)).expect("read a key");
            std::fs::write(to.join(&key), bytes).expect("write a key");
            if !self.linked.contains(&key) {
                let link = self.out.join(&key);
                let _ = std::fs::remove_file(&link);
                std::os::unix::fs::symlink(Path::new("..data").join(&key), link)
                    .expect("link a key");
                self.linked.insert(key);
            }
        }
        let tmp = self.out.join("..data_tmp");
        std::os::unix::fs::symlink(&name, &tmp).expect("link the new dir");
        std::fs::rename(&tmp, self.out.join("..data")).expect("swap ..data");
        self.current.replace(to)
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

/// The floor as a child process watching `dir` and POSTing to `port` (the copy floor with
/// `promote_to`); returns once it watches.
pub fn spawn(dir: &Path, port: u16, promote_to: Option<&Path>) -> Child {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mut cmd = Command::new(exe);
    match promote_to {
        None => cmd.arg(FLAG),
        Some(out) => cmd.arg(COPY_FLAG).arg(out),
    };
    let mut child = cmd
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
