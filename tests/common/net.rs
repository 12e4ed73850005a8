//! Loopback HTTP: the one client the tests use for every endpoint, and a reload sink standing in for a
//! component (bound to port 0, its listener kept for its whole life).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::read_promoted;

/// A plain HTTP/1.1 request on 127.0.0.1:port over a fresh connection: status code and body.
pub fn http(method: &str, port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_nodelay(true).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((code, body))
}

/// An IPv4 address of this host other than loopback, from the kernel's table of local addresses; a
/// client bound to it is not a loopback peer.
pub fn non_loopback_v4() -> Option<std::net::Ipv4Addr> {
    let table = std::fs::read_to_string("/proc/net/fib_trie").ok()?;
    let mut last = None;
    for line in table.lines() {
        let line = line.trim_start();
        if let Some(addr) = line.strip_prefix("|-- ") {
            last = addr.trim().parse::<std::net::Ipv4Addr>().ok();
        } else if line.starts_with("/32 host LOCAL")
            && let Some(a) = last.filter(|a| !a.is_loopback())
        {
            return Some(a);
        }
    }
    None
}

pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    http("GET", port, path)
}

/// The parsed `/status`, when it answers 200 with JSON.
pub fn status(port: u16) -> Option<serde_json::Value> {
    let (code, body) = get(port, "/status")?;
    (code == 200).then(|| serde_json::from_str(&body).ok())?
}

/// One request a [`Sink`] saw: when its headers were complete, its request line, and the version
/// promoted at that moment (empty when the sink watches no promoted dir or none is there).
pub type Hit = (Instant, String, String);

/// A loopback HTTP server standing in for the component's reload endpoint. Every request's arrival
/// (headers complete) is sent on `arrivals` and recorded in `hits`; it is answered with `code` after
/// `delay_ms`, except that when `flapping`, every other request is answered 503 (not reached, retried:
/// a 500 would be the component refusing the config, which is rolled back).
pub struct Sink {
    pub port: u16,
    pub arrivals: mpsc::Receiver<Instant>,
    pub requests: Arc<AtomicU64>,
    pub failures: Arc<AtomicU64>,
    pub code: Arc<AtomicU16>,
    pub delay_ms: Arc<AtomicU64>,
    pub hits: Arc<Mutex<Vec<Hit>>>,
    /// A version the component refuses (answered 500) when the promoted dir holds it; a sink
    /// [`Sink::watching`] only.
    pub refuse: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
}

/// What every connection of a sink shares.
#[derive(Clone)]
struct Shared {
    tx: mpsc::Sender<Instant>,
    requests: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    code: Arc<AtomicU16>,
    delay_ms: Arc<AtomicU64>,
    hits: Arc<Mutex<Vec<Hit>>>,
    refuse: Arc<Mutex<Option<String>>>,
    flapping: bool,
    promoted: Option<PathBuf>,
}

impl Sink {
    /// A sink answering 200, or when `flapping` 503 and 200 in turn.
    pub fn start(flapping: bool) -> Sink {
        Sink::serve(flapping, None)
    }

    /// A sink that records, with each request, the version promoted in `promoted` when it arrived.
    pub fn watching(promoted: PathBuf) -> Sink {
        Sink::serve(false, Some(promoted))
    }

    fn serve(flapping: bool, promoted: Option<PathBuf>) -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind sink");
        let port = listener.local_addr().expect("sink addr").port();
        let (tx, rx) = mpsc::channel();
        let shared = Shared {
            tx,
            requests: Arc::new(AtomicU64::new(0)),
            failures: Arc::new(AtomicU64::new(0)),
            code: Arc::new(AtomicU16::new(200)),
            delay_ms: Arc::new(AtomicU64::new(0)),
            hits: Arc::new(Mutex::new(Vec::new())),
            refuse: Arc::new(Mutex::new(None)),
            flapping,
            promoted,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let sh = sh.clone();
                std::thread::spawn(move || serve_sink(conn, sh));
            }
        });
        Sink {
            port,
            arrivals: rx,
            requests: shared.requests,
            failures: shared.failures,
            code: shared.code,
            delay_ms: shared.delay_ms,
            hits: shared.hits,
            refuse: shared.refuse,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/reload", self.port)
    }

    /// Requests seen so far.
    pub fn count(&self) -> usize {
        self.hits.lock().unwrap().len()
    }

    /// The version promoted when the latest request arrived.
    pub fn last_version(&self) -> Option<String> {
        self.hits.lock().unwrap().last().map(|h| h.2.clone())
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve_sink(conn: TcpStream, sh: Shared) {
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut out = conn;
    loop {
        let mut len = 0usize;
        let mut request_line = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if request_line.is_empty() {
                request_line = line.trim().to_owned();
                continue;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let at = Instant::now();
        let version = sh
            .promoted
            .as_deref()
            .and_then(read_promoted)
            .and_then(|m| m.get("version").cloned())
            .unwrap_or_default();
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        sh.hits
            .lock()
            .unwrap()
            .push((at, request_line, version.clone()));
        let n = sh.requests.fetch_add(1, Ordering::Relaxed);
        let fail = sh.flapping && n.is_multiple_of(2);
        if fail {
            sh.failures.fetch_add(1, Ordering::Relaxed);
        }
        let refused = sh.refuse.lock().unwrap().as_deref() == Some(version.as_str());
        let code = if fail {
            503
        } else if refused {
            500
        } else {
            sh.code.load(Ordering::Relaxed)
        };
        let _ = sh.tx.send(at);
        std::thread::sleep(Duration::from_millis(sh.delay_ms.load(Ordering::Relaxed)));
        // An error answer has the component's words, as a component refusing a config gives them.
        let body = if code >= 400 {
            "the stand-in says no\n"
        } else {
            ""
        };
        if out
            .write_all(
                format!(
                    "HTTP/1.1 {code} X\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .is_err()
        {
            return;
        }
    }
}
