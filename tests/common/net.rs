//! Loopback HTTP: a plain client for the endpoints, and a reload sink standing in for a component.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}

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

pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    http("GET", port, path)
}

/// The parsed `/status`, when it answers 200 with JSON.
pub fn status(port: u16) -> Option<serde_json::Value> {
    let (code, body) = get(port, "/status")?;
    (code == 200).then(|| serde_json::from_str(&body).ok())?
}

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
