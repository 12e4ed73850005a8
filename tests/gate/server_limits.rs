//! The HTTP server under abuse: slow clients, descriptor exhaustion, and a drain on shutdown. Each runs
//! the real binary on loopback.

use crate::common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

fn connect(port: u16) -> TcpStream {
    TcpStream::connect(("127.0.0.1", port)).expect("connect")
}

fn started(d: &Dirs) -> Gate {
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(d, &["--accepts", "^1"]);
    g.wait_active("1.0.0");
    g
}

/// 60 clients trickling endless headers: memory stays bounded by the connection cap and buffer limit.
#[test]
fn slow_clients_do_not_grow_memory() {
    let d = Dirs::new();
    let g = started(&d);
    let base = status_kb(g.pid(), "VmRSS");
    let mut conns: Vec<Option<TcpStream>> = (0..60)
        .map(|_| {
            let mut c = connect(g.port);
            c.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nX-Pad: ")
                .unwrap();
            Some(c)
        })
        .collect();
    // One header value that never ends.
    let line = "a".repeat(1024);
    let mut peak = base;
    // Up to 300 KiB of header each, 1 KiB per round; the server may close a connection at any point.
    for _ in 0..300 {
        for slot in &mut conns {
            if let Some(c) = slot
                && c.write_all(line.as_bytes()).is_err()
            {
                *slot = None;
            }
        }
        peak = peak.max(status_kb(g.pid(), "VmRSS"));
        if conns.iter().all(Option::is_none) {
            break;
        }
        // Pacing, as a slow client trickles: the server reads each round before the next.
        std::thread::sleep(Duration::from_millis(2));
    }
    // Whatever is still in socket buffers reaches the server within this window.
    let end = Instant::now() + Duration::from_millis(500);
    while Instant::now() < end {
        peak = peak.max(status_kb(g.pid(), "VmRSS"));
        std::thread::sleep(Duration::from_millis(5));
    }
    // The probes still answer.
    assert_eq!(get(g.port, "/livez").map(|(c, _)| c), Some(200));
    eprintln!("RSS {base} kB at start, {peak} kB at peak");
    assert!(
        peak < base + 4 * 1024,
        "RSS grew from {base} kB to {peak} kB under 60 slow clients"
    );
}

/// A connection that sends nothing is closed by the header-read timeout.
#[test]
fn a_silent_connection_is_closed() {
    let d = Dirs::new();
    let g = started(&d);
    let mut c = connect(g.port);
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 64];
    // EOF (or a reset): the server gave up on it.
    let n = c.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the server answered a request never sent");
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
}

/// At the descriptor limit, accept errors back off instead of spinning, and `/livez` answers again
/// once descriptors are free.
#[test]
fn descriptor_exhaustion_backs_off_and_recovers() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let mut cmd = Command::new("prlimit");
    cmd.arg("--nofile=40:40")
        .arg(BIN)
        .args(["run", "--accepts", "^1"])
        .arg("--watch")
        .arg(d.watch())
        .arg("--promote-to")
        .arg(d.promoted())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"));
    let g = Gate::from_command(cmd, &d.log());
    let port = g.port;
    g.wait_active("1.0.0");
    // More connections than descriptors left: the rest wait in the backlog and accept fails.
    let held: Vec<TcpStream> = (0..60).map(|_| connect(port)).collect();
    wait_for("every descriptor in use", DEADLINE, || {
        (fd_count(g.pid()) >= 40).then_some(())
    });
    let before = cpu_ticks(g.pid());
    let t = Instant::now();
    // A measurement window, not a synchronisation: what the accept loop does while the limit is hit.
    std::thread::sleep(Duration::from_millis(1000));
    let used = cpu_ticks(g.pid()) - before;
    let window = t.elapsed();
    eprintln!("{used} ticks of CPU in {window:?} at the descriptor limit");
    // What proves the backoff is its schedule, as logged, not CPU time (other tests' load moves it):
    // each failure's pause doubles from 5 ms to 1 s, or starts again at 5 ms after a connection was
    // accepted; a loop that spins logs the same pause over and over.
    let pauses: Vec<u64> = g
        .log_text()
        .lines()
        .filter(|l| l.contains("accept failed: out of resources"))
        .filter_map(|l| {
            let at = l.find("retry_in_ms")? + "retry_in_ms".len();
            let digits: String = l[at..]
                .trim_start_matches(['=', '"', ':'])
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect();
    eprintln!("pauses logged: {pauses:?}");
    assert!(!pauses.is_empty(), "no accept failure logged");
    assert_eq!(pauses[0], 5, "{pauses:?}");
    for w in pauses.windows(2) {
        assert!(
            w[1] == (w[0] * 2).min(1000) || (w[1] == 5 && w[0] != 5),
            "the pause after {} ms was {} ms: the accept loop spins: {pauses:?}",
            w[0],
            w[1]
        );
    }
    drop(held);
    wait_for("/livez to answer again", DEADLINE, || {
        get(port, "/livez").filter(|(c, _)| *c == 200)
    });
}

/// On SIGTERM a request being read is still answered, then the process exits 0.
#[test]
fn shutdown_drains_a_request_in_flight() {
    let d = Dirs::new();
    let mut g = started(&d);
    let mut c = connect(g.port);
    c.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\n").unwrap();
    // The server has the connection (a second connection's answer proves the first was accepted).
    assert_eq!(get(g.port, "/readyz").map(|(c, _)| c), Some(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(g.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_for("the shutdown to begin", DEADLINE, || {
        g.log_text().contains("shutting down").then_some(())
    });
    c.write_all(b"\r\n").unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut answer = String::new();
    let _ = c.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 "),
        "no answer during the drain: {answer:?}"
    );
    assert!(answer.contains("connection: close"), "{answer}");
    let status = g.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A drain that outlasts the grace period ends the process with a non-zero exit.
#[test]
fn a_drain_past_the_grace_period_exits_non_zero() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let mut g = Gate::start(&d, &["--accepts", "^1", "--shutdown-grace", "500ms"]);
    g.wait_active("1.0.0");
    let mut c = connect(g.port);
    c.write_all(b"GET /livez HTTP/1.1\r\n").unwrap();
    assert_eq!(get(g.port, "/readyz").map(|(c, _)| c), Some(200));
    let t = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(g.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = g.child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{}", g.log_text());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(g.log_text().contains("did not complete in time"));
    drop(c);
}

/// A keep-alive client from `from` asking `/livez` once a second (the pacing is the client's
/// behaviour, not a synchronisation), reconnecting whenever its connection is closed, until `stop`.
fn keep_alive_client(
    from: std::net::Ipv4Addr,
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    answered: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut c) = TcpStream::connect((from, port)) else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut counted = false;
            while !stop.load(Ordering::Relaxed) {
                if c.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
                    .is_err()
                {
                    break;
                }
                // Read one whole answer: the head, then its Content-Length.
                let mut got = Vec::new();
                let mut buf = [0u8; 512];
                let complete = loop {
                    let Ok(n) = c.read(&mut buf) else { break false };
                    if n == 0 {
                        break false;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got);
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().to_owned())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if body.len() >= len {
                            break true;
                        }
                    }
                };
                if !complete {
                    break;
                }
                if !counted {
                    answered.fetch_add(1, Ordering::Relaxed);
                    counted = true;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            if counted {
                answered.fetch_sub(1, Ordering::Relaxed);
            }
        }
    })
}

/// 72 keep-alive clients from another address of this host (as other pods reach the sidecar on its
/// pod IP), each asking `/livez` once a second, hold every shared connection slot; the real
/// `confgate probe live|ready|startup`, over loopback as the kubelet's exec probes run, still answer
/// within their deadline.
#[test]
#[ignore = "needs an IPv4 address of this host other than loopback"]
fn exec_probes_answer_while_remote_keep_alive_clients_hold_every_slot() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let remote = non_loopback_v4().expect("an IPv4 address of this host other than loopback");
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--accepts", "^1"])
        .arg("--watch")
        .arg(d.watch())
        .arg("--promote-to")
        .arg(d.promoted())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"));
    let g = Gate::listening(cmd, &d.log(), "0.0.0.0:0");
    g.wait_active("1.0.0");
    let (stop, answered) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let clients: Vec<_> = (0..72)
        .map(|_| keep_alive_client(remote, g.port, stop.clone(), answered.clone()))
        .collect();
    // Every shared slot is held by one of them.
    wait_for(
        "the clients to hold every slot",
        Duration::from_secs(30),
        || (answered.load(Ordering::Relaxed) >= confgate::server::MAX_CONNECTIONS).then_some(()),
    );
    for kind in ["live", "ready", "startup"] {
        let t = Instant::now();
        let out = Command::new(BIN)
            .args(["probe", kind, "--addr"])
            .arg(format!("127.0.0.1:{}", g.port))
            .output()
            .unwrap();
        let took = t.elapsed();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "probe {kind} failed after {took:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("probe {kind}: {took:?} {}", text.trim());
    }
    assert!(
        answered.load(Ordering::Relaxed) >= confgate::server::MAX_CONNECTIONS,
        "the clients lost their slots"
    );
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
}
