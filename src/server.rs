//! HTTP endpoints: `/readyz`, `/livez`, `/startupz`, `/status`, `/metrics`. Reads the published status
//! only; never any config content.
//!
//! Bounded: `MAX_CONNECTIONS` (64), and `LOOPBACK_RESERVE` (8) more that only a loopback peer (the
//! exec probes, which nothing outside the pod can reach) may take, so probes are answered whatever
//! other clients hold (`Slots`). Accepting goes on when every slot is taken, and a connection with
//! no slot it may use is closed at once, so an exec probe queued behind other clients is reached.
//! Each connection has `MAX_BUF` (16 KiB) of buffer and `HEADER_READ_TIMEOUT` (3 s) for its
//! headers; accept errors back off (`Doubling`); at shutdown open connections drain within the
//! grace period, past which `run` fails.
//!
//! Every shipped probe is exec (`confgate probe`), so it reaches the server over loopback and uses
//! the reserved slots; `tests/commands/manifests.rs` reports a manifest whose probe is `httpGet`.
//!
//! `confgate run` serves on a thread of its own with its own current-thread runtime ([`spawn`]): no
//! answer waits on the decision loop's thread, whatever holds it (a small config's switch onto a
//! stalled disk, the per-turn stat of a watched dir). `/livez` alone asks the loop, by a ping that
//! crosses the threads and must be answered within `LIVENESS_DEADLINE`; the other endpoints read
//! the status as last published. Idle, the thread waits in the kernel for a connection: no timer.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::{debug, info, warn};

use crate::backoff::Doubling;
use crate::listing;
use crate::state::{Shared, Status};

/// How long `/livez` waits for the decision loop to answer; under the kubelet's default 1 s probe timeout.
pub(crate) const LIVENESS_DEADLINE: Duration = Duration::from_millis(500);
/// A client must send a request's headers within this, from connecting or from the end of the previous
/// response: hyper's timer runs while it waits for a head, so it is also the keep-alive idle timeout.
/// Probes and scrapers send theirs at once; under the default 5 s shutdown grace, so a stalled client
/// cannot make a clean shutdown late.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Connections served at once; a connection over it is closed at once. With `LOOPBACK_RESERVE` and
/// `MAX_BUF`, bounds the memory clients can make the server hold (about 72 × 24 KiB).
pub const MAX_CONNECTIONS: usize = 64;
/// Connections kept for loopback peers beyond [`MAX_CONNECTIONS`]. The kubelet's exec probes
/// (`confgate probe`) run in the pod's network namespace and connect over loopback, which nothing
/// outside the pod can reach: whatever other clients do with the shared slots, these stay free for
/// the probes (and the pod's own containers).
pub(crate) const LOOPBACK_RESERVE: usize = 8;
/// A connection's read buffer (hyper's minimum is 8 KiB, its default ~400 KiB): the endpoints take no
/// body, and a longer head is refused (431).
pub(crate) const MAX_BUF: usize = 16 * 1024;
/// Pause after an accept error such as EMFILE, doubling to [`ACCEPT_BACKOFF_MAX`]: retrying at once
/// would spin, since the pending connection keeps the listener readable.
pub(crate) const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
pub(crate) const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Serves until `shutdown` completes, then drains: accepts no more connections, lets each finish the
/// request it is reading or answering (keep-alive closed), and returns once every connection is closed.
/// Bound the drain from outside (the shutdown grace); the header-read timeout bounds it anyway.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let slots = Slots::new();
    let (drain_tx, drain_rx) = watch::channel(false);
    let mut backoff = Doubling::new(ACCEPT_BACKOFF_MIN, ACCEPT_BACKOFF_MAX);
    loop {
        // Accepting goes on when every slot is taken, so a probe behind other clients in the listen
        // backlog is reached and given its reserved slot; a connection with no slot is closed.
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(accepted) => {
                    backoff.succeeded();
                    accepted
                }
                Err(e) => {
                    if is_resource_exhaustion(&e) {
                        let wait = backoff.failed();
                        warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "accept failed: out of resources");
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = &mut shutdown => break,
                        }
                    } else {
                        // One connection's problem (reset before accept): the next is fine.
                        debug!(error = %e, "accept failed");
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(permit) = slots.take(&peer) else {
            debug!(%peer, "connection closed: every slot it may use is taken");
            drop(stream);
            continue;
        };
        let shared = shared.clone();
        let mut drain = drain_rx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(&req, &shared).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_BUF)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = drain.wait_for(|d| *d) => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = drain_tx.send(true);
    // Every connection holds a slot until it is closed: all slots back means drained.
    let in_flight = slots.in_use();
    if in_flight > 0 {
        info!(connections = in_flight, "draining HTTP connections");
    }
    slots.all_back().await;
    debug!("HTTP server drained");
}

/// The server running on its own thread ([`spawn`]).
#[derive(Debug)]
pub struct Running {
    /// Closed when the thread ends: `serve` returned (drained), or the thread is gone.
    ended: tokio::sync::oneshot::Receiver<()>,
}

impl Running {
    /// Resolves once the server has drained and its thread is ending.
    pub async fn ended(self) {
        let _ = self.ended.await;
    }
}

/// [`serve`] on a new OS thread (`confgate-http`) with its own current-thread runtime, so that no
/// answer waits on the thread that runs the decision loop. `listener` is registered with that
/// runtime here, so an error comes back before the thread starts; `shutdown` may be driven from any
/// runtime (a `watch` of the caller's), and [`Running::ended`] may be awaited on any. `/livez`'s ping
/// and the published status are thread-safe (`Shared`).
pub fn spawn(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Running> {
    // One thread, and no blocking work: the server only reads what the loop published.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    listener.set_nonblocking(true)?;
    let listener = {
        let _in = rt.enter();
        TcpListener::from_std(listener)?
    };
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("confgate-http".into())
        .spawn(move || {
            rt.block_on(serve(listener, shared, shutdown));
            drop(done);
        })?;
    Ok(Running { ended })
}

/// The connection slots: [`MAX_CONNECTIONS`] for anyone, and [`LOOPBACK_RESERVE`] more that only a
/// loopback peer may take, once the shared ones are all in use.
struct Slots {
    shared: Arc<Semaphore>,
    loopback: Arc<Semaphore>,
}

impl Slots {
    fn new() -> Slots {
        Slots {
            shared: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            loopback: Arc::new(Semaphore::new(LOOPBACK_RESERVE)),
        }
    }

    /// A slot for a connection from `peer`, if one it may use is free.
    fn take(&self, peer: &std::net::SocketAddr) -> Option<OwnedSemaphorePermit> {
        self.shared.clone().try_acquire_owned().ok().or_else(|| {
            // `[::]` sees an IPv4 peer as ::ffff:a.b.c.d.
            peer.ip()
                .to_canonical()
                .is_loopback()
                .then(|| self.loopback.clone().try_acquire_owned().ok())
                .flatten()
        })
    }

    fn in_use(&self) -> usize {
        MAX_CONNECTIONS - self.shared.available_permits() + LOOPBACK_RESERVE
            - self.loopback.available_permits()
    }

    /// Resolves once every slot is free again.
    async fn all_back(&self) {
        let _ = self.shared.acquire_many(MAX_CONNECTIONS as u32).await;
        let _ = self.loopback.acquire_many(LOOPBACK_RESERVE as u32).await;
    }
}

/// Errors that a later accept can get past once something is freed: wait instead of spinning.
fn is_resource_exhaustion(e: &std::io::Error) -> bool {
    use nix::libc::{EMFILE, ENFILE, ENOBUFS, ENOMEM};
    matches!(e.raw_os_error(), Some(EMFILE | ENFILE | ENOBUFS | ENOMEM))
}

fn text(code: StatusCode, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(hyper::header::CACHE_CONTROL, "no-store")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

async fn handle(req: &Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
    }
    let asks = |name: &str| {
        req.uri().query().is_some_and(|q| {
            q.split('&')
                .any(|p| p == name || p.strip_prefix(name).is_some_and(|v| v.starts_with('=')))
        })
    };
    match req.uri().path() {
        "/readyz" if asks("line") => {
            let s = shared.snapshot();
            readyz_line(&s)
        }
        "/readyz" => {
            let s = shared.snapshot();
            readyz(&s, asks("verbose"))
        }
        "/livez" => {
            let stuck = shared
                .snapshot()
                .source_stuck_at(tokio::time::Instant::now().into_std());
            if let Some(why) = stuck {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("{}\n", listing::one_line(&why)),
                )
            } else if shared.loop_answers(LIVENESS_DEADLINE).await {
                text(StatusCode::OK, "ok\n".into())
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "the decision loop did not answer within {} ms\n",
                        LIVENESS_DEADLINE.as_millis()
                    ),
                )
            }
        }
        "/startupz" => {
            let s = shared.snapshot();
            if s.started {
                text(StatusCode::OK, "ok\n".into())
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("{}\n", listing::one_line(&s.reason)),
                )
            }
        }
        "/status" => {
            let s = shared.snapshot();
            let body =
                serde_json::to_vec_pretty(&crate::state::StatusBody::of(&s)).unwrap_or_default();
            Response::builder()
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .header(hyper::header::CACHE_CONTROL, "no-store")
                .body(Full::new(Bytes::from(body)))
                .unwrap_or_default()
        }
        "/metrics" => {
            let s = shared.snapshot();
            Response::builder()
                .header(
                    hyper::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )
                .body(Full::new(Bytes::from(shared.metrics.render(&s))))
                .unwrap_or_default()
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; endpoints: /readyz /livez /startupz /status /metrics\n".into(),
        ),
    }
}

/// `ok`, or the one-line reason; with `verbose`, one line per check as the Kubernetes API server does.
/// `/readyz?line`, the exec probe's one line in one request: `/readyz`'s answer, except that a ready
/// pod holding back a newer config says what it holds (`holding 2.4.1; 3.0.0 is too-new`), and one
/// with a check that does not take readiness failing (a bad annotation, a failing reload) says that
/// too (`ok; reload: …`).
pub fn readyz_line(s: &Status) -> Response<Full<Bytes>> {
    match holding_line(s) {
        Some(line) => text(StatusCode::OK, format!("{line}\n")),
        None => readyz(s, false),
    }
}

/// "holding 2.4.1; 3.0.0 is too-new" while ready and the active config is not the newest, then
/// each failing check that does not take readiness ("ok; settings: …" when nothing is held).
fn holding_line(s: &Status) -> Option<String> {
    if !s.ready {
        return None;
    }
    let mut parts: Vec<String> = crate::state::Holding::of(s)
        .map(|h| h.to_string())
        .into_iter()
        .collect();
    let warnings = s.warnings();
    if parts.is_empty() && !warnings.is_empty() {
        parts.push("ok".into());
    }
    parts.extend(warnings);
    (!parts.is_empty()).then(|| listing::one_line(&parts.join("; ")).into_owned())
}

pub fn readyz(s: &Status, verbose: bool) -> Response<Full<Bytes>> {
    let code = if s.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    // Each check is one line whatever its message holds (a name from a plain or git-sync dir may hold a
    // newline), so no message can add a check line of its own.
    if !verbose {
        let body = if s.ready {
            "ok".into()
        } else {
            listing::one_line(&s.reason)
        };
        return text(code, format!("{body}\n"));
    }
    let mut body = String::new();
    for c in &s.checks {
        let message = listing::one_line(&c.message);
        if c.ok {
            body.push_str(&format!("[+]{} ok: {message}\n", c.name));
        } else if !c.name.gates_readiness() {
            // Reported, and readiness left to the config in force.
            body.push_str(&format!("[!]{} warning: {message}\n", c.name));
        } else {
            body.push_str(&format!("[-]{} failed: {message}\n", c.name));
        }
    }
    if s.mode == crate::settings::Mode::Observe {
        body.push_str("observe mode: checks are reported, not enforced\n");
    }
    body.push_str(if s.ready {
        "readyz check passed\n"
    } else {
        "readyz check failed\n"
    });
    text(code, body)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_probe_line_names_what_is_held_while_ready() {
        use crate::state::{ActiveView, CandidateView, Status};
        use crate::verdict::Verdict;
        let mut s = Status {
            stale: true,
            ready: true,
            active: Some(ActiveView {
                version: Some("2.4.1".into()),
                sha256: crate::snapshot::ContentHash::of([]).printed(),
                since: jiff::Timestamp::UNIX_EPOCH,
                verdict: Verdict::Accepted,
                variant: None,
            }),
            candidate: Some(CandidateView {
                version: Some("3.0.0".into()),
                sha256: None,
                verdict: Verdict::TooNew,
                reason: "version 3.0.0 is newer than ^2 allows".into(),
                variant: None,
            }),
            ..Status::default()
        };
        assert_eq!(
            super::holding_line(&s).as_deref(),
            Some("holding 2.4.1; 3.0.0 is too-new")
        );
        // Not ready: `/readyz`'s reason, not the holding line.
        s.ready = false;
        assert_eq!(super::holding_line(&s), None);
        s.ready = true;
        s.stale = false;
        assert_eq!(super::holding_line(&s), None);
    }
}
