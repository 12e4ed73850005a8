//! Reload signalling: one worker, at most one attempt in flight, newer promotions coalesced into the next
//! attempt, jittered exponential backoff on failure. The decision loop only posts the newest request
//! and never waits for the worker, so a failing target cannot delay watching, deciding or promoting.
//! The worker reports each attempt's [`Outcome`] back to the loop, which alone publishes the status.
//!
//! A request is a reload or a start-up check (`Kind::Startup`, for the first promotion into an
//! empty dir): the check gathers evidence that the component runs that config, and waits for a
//! component not there yet (`Waiting`, never a failure). Evidence is every process started after
//! the promotion (by boot ticks, no wall clock), metrics reporting a load after it, or a first
//! contact answered 2xx; no process at all is no evidence. `Handle::on_its_way` lets the loop wait
//! until the newest request is on its way (the first write on the client's connection, seen by
//! `http::Wire`; the signal handed to its thread; or the attempt over), at most `ON_ITS_WAY_MAX`,
//! never for an answer or a retry: no status says a reload was made before it is on the wire, and
//! the loop is not held by a slow component.
//!
//! Signals (`signal.rs`) reach each process once per request (`Reached`): the full name past 15
//! bytes, only processes started before the promotion (`BootTicks`), and a signal that would kill
//! only to a process that catches it. The `/proc` scan runs on the blocking pool. Seeing no process
//! but its own (no shared process namespace) is `Error::Alone`, a failed reload, never "nothing to
//! reload".

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::backoff::Doubling;
use crate::confirm;
use crate::http::Client;
use crate::snapshot::ContentHash;
use crate::state::Shared;
use crate::values::{Confirm, Reload, Url};

mod attempt;
mod signal;

pub use attempt::{Sent, boot_ticks};
// The values the decision core keeps are the core's, under their old names here.
pub use confgate_core::reload::{
    BootTicks, Error, Failure, Kind, OsError, Outcome, Refusal, RefusedBy, Uncaught, refuses,
};
pub use signal::{Reached, signal_by_name, signal_once};

/// First retry delay; doubles up to [`BACKOFF_MAX`], each delay jittered by ±20 %.
pub(crate) const BACKOFF_BASE: Duration = Duration::from_millis(200);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A start-up check looks again for a component still starting at most this far apart, so the
/// baseline is known soon after it is up (a component that takes minutes to start is looked for
/// every 2 s, not after a back-off grown with its start-up time).
pub(crate) const STARTUP_POLL_MAX: Duration = Duration::from_secs(2);
/// The most the decision loop waits for a request to be on its way ([`Handle::on_its_way`]): a
/// connection the network takes longer to make (a remote target, a dropped SYN) is not waited for,
/// and the request goes when it is made. A loopback connection is made in one turn of the reactor.
pub(crate) const ON_ITS_WAY_MAX: Duration = Duration::from_millis(250);
/// Bound on one attempt (connect, request, response).
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Bound on the component's text kept with a rejection.
pub(crate) const REASON_MAX: usize = 200;

/// The first line of `body`, at most [`REASON_MAX`] bytes (cut on a char boundary), control characters
/// replaced: the component's own words, safe for a log line, a status and an Event.
pub(crate) fn first_line(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out = String::new();
    for c in line.chars() {
        if out.len() + c.len_utf8() > REASON_MAX {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

/// One reload to perform: the target in force when the promotion happened, and what was promoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub seq: u64,
    pub kind: Kind,
    pub target: Reload,
    pub sha256: ContentHash,
    pub version: Option<String>,
    /// When the promotion was made: a signal goes only to processes started by then (a process
    /// started later read the promoted config itself). `None`: every matching process.
    pub promoted_at: Option<BootTicks>,
    /// The component's metrics to confirm the reload with (the setting in force at the promotion).
    pub confirm: Option<Confirm>,
}

/// What the worker is doing, for [`Handle::on_its_way`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Progress {
    /// The request it works on (or last worked on).
    on: u64,
    /// Whether an attempt is under way (not waiting for a request or a retry).
    busy: bool,
}

/// The decision loop's side of the worker: requests go out, outcomes come back.
#[derive(Debug)]
pub struct Handle {
    tx: watch::Sender<Option<Request>>,
    seq: u64,
    outcomes: mpsc::UnboundedReceiver<Outcome>,
    /// The newest request the worker has sent on its way ([`crate::http::Wire`]).
    wire: watch::Receiver<u64>,
    progress: watch::Receiver<Progress>,
    /// The confirmation setting in force, attached to each request.
    confirm: Option<Confirm>,
    /// Keeps an inert handle's outcome channel open, so waiting on it waits forever.
    _inert: Option<mpsc::UnboundedSender<Outcome>>,
}

impl Handle {
    /// Posts a reload of the newest promotion, made just now; an unsent older one is replaced.
    pub fn request(&mut self, target: &Reload, sha256: ContentHash, version: Option<String>) {
        self.request_promoted_at(Kind::Reload, target, sha256, version, boot_ticks());
    }

    /// [`Handle::request`] of this kind, for a promotion made at `promoted_at` (e.g. one found owed
    /// at start-up: `None` signals every matching process).
    pub(crate) fn request_promoted_at(
        &mut self,
        kind: Kind,
        target: &Reload,
        sha256: ContentHash,
        version: Option<String>,
        promoted_at: Option<BootTicks>,
    ) {
        if *target == Reload::None {
            return;
        }
        self.seq += 1;
        self.tx.send_replace(Some(Request {
            seq: self.seq,
            kind,
            target: target.clone(),
            sha256,
            version,
            promoted_at,
            confirm: self.confirm.clone(),
        }));
    }

    /// Sets the metrics that confirm later requests (the `confirm` setting in force).
    pub(crate) fn set_confirm(&mut self, confirm: Option<Confirm>) {
        self.confirm = confirm;
    }

    /// Waits until the newest request is on its way: its first bytes written (the POST, or the
    /// metrics read before it), its signal handed to the thread that sends it, or the attempt over;
    /// at most [`ON_ITS_WAY_MAX`], for a connection the network is slow to make. Without it, the
    /// worker and the client's connection task, on this thread, would wait for whatever the caller
    /// does next. An attempt of an older request still under way is not waited for: the newest goes
    /// after it.
    pub(crate) async fn on_its_way(&mut self) {
        let seq = self.seq;
        let (wire, progress) = (&mut self.wire, &mut self.progress);
        // The worker takes a turn to hand the request over, the connection's task one to write it.
        let _ = timeout_after_turns(ON_ITS_WAY_MAX, 3, async move {
            loop {
                if *wire.borrow_and_update() >= seq {
                    return;
                }
                let p = *progress.borrow_and_update();
                if p.busy && p.on < seq {
                    return;
                }
                tokio::select! {
                    r = wire.changed() => if r.is_err() { return },
                    r = progress.changed() => if r.is_err() { return },
                }
            }
        })
        .await;
    }
}

impl Handle {
    /// A handle with no worker: requests are recorded and dropped. For running the pipeline without reloads.
    pub fn inert() -> Handle {
        let (otx, outcomes) = mpsc::unbounded_channel();
        Handle {
            tx: watch::Sender::new(None),
            seq: 0,
            outcomes,
            // Closed: nothing is ever on its way, and nothing is waited for.
            wire: watch::channel(0).1,
            progress: watch::channel(Progress::default()).1,
            confirm: None,
            _inert: Some(otx),
        }
    }

    /// The worker's next outcome; `None` once the worker is gone.
    pub async fn outcome(&mut self) -> Option<Outcome> {
        self.outcomes.recv().await
    }

    /// How many reloads were requested so far.
    pub fn requested(&self) -> u64 {
        self.seq
    }
}

/// Starts the worker on the current runtime, trusting the system roots for https targets.
pub fn spawn(shared: Arc<Shared>) -> Handle {
    match Client::new(None) {
        Ok(client) => spawn_with(shared, client),
        // Without a CA file nothing can fail: the system roots are read at the first https
        // connection, and the crypto provider's protocol versions are fixed at build.
        Err(e) => unreachable!("a client without a CA file: {e}"),
    }
}

/// Starts the worker with this client, on the current runtime. Not on a thread of its own: measured
/// side by side on a loaded machine, waking another thread for each POST cost more (median 0.80
/// against 0.56 ms, p99 15 against 1.1 ms) than the loop's bookkeeping the POST waits for here.
pub(crate) fn spawn_with(shared: Arc<Shared>, client: Client) -> Handle {
    let (tx, rx) = watch::channel(None);
    // Unbounded: at most three outcomes per attempt, and attempts are spaced by backoff.
    let (otx, outcomes) = mpsc::unbounded_channel();
    let (progress_tx, progress) = watch::channel(Progress::default());
    let wire = client.wire().subscribe();
    tokio::spawn(worker(rx, otx, progress_tx, shared, client));
    Handle {
        tx,
        seq: 0,
        outcomes,
        wire,
        progress,
        confirm: None,
        _inert: None,
    }
}

async fn worker(
    mut rx: watch::Receiver<Option<Request>>,
    report: mpsc::UnboundedSender<Outcome>,
    progress: watch::Sender<Progress>,
    shared: Arc<Shared>,
    client: Client,
) {
    while rx.changed().await.is_ok() {
        let Some(req) = rx.borrow_and_update().clone() else {
            continue;
        };
        let busy = |busy| {
            progress.send_replace(Progress { on: req.seq, busy });
        };
        let startup = matches!(req.kind, Kind::Startup { .. });
        let max = if startup {
            STARTUP_POLL_MAX
        } else {
            BACKOFF_MAX
        };
        let mut delay = Doubling::new(BACKOFF_BASE, max);
        // The processes this request's signal reached: a retry never signals them again.
        let mut reached = Reached::new();
        // A start-up check says once why it waits (and again when that changes), not every attempt.
        let mut waiting_for: Option<String> = None;
        loop {
            busy(true);
            client.wire().arm(req.seq);
            let _ = report.send(Outcome::Attempting);
            // What the component's metrics say before the reload, to see them move.
            let before = match &req.confirm {
                Some(c) => confirm::read(&client, c).await.ok(),
                None => None,
            };
            let sent_at = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
            let started = Instant::now();
            // The connection's task writes the request in the turn after this one hands it over.
            let mut result = match timeout_after_turns(
                ATTEMPT_TIMEOUT,
                1,
                attempt(&client, &req, before, &mut reached),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => Err(Error::Timeout(ATTEMPT_TIMEOUT)),
            };
            match (&result, &req.confirm, &req.target) {
                (Ok(Sent::Reloaded(_)), Some(c), _) => {
                    match confirm::wait(&client, c, before, sent_at).await {
                        confirm::Said::Applied => {}
                        confirm::Said::Rejected(why) => result = Err(Error::Confirmed(why)),
                        confirm::Said::Unconfirmed(why) => result = Err(Error::Unconfirmed(why)),
                    }
                }
                // Every process started after the promotion: its metrics say whether the load it
                // made at start-up succeeded.
                (Ok(Sent::NothingToReload(_)), Some(c), Reload::Signal { .. }) => {
                    if let confirm::Said::Unconfirmed(why) | confirm::Said::Rejected(why) =
                        confirm::started(&client, c).await
                    {
                        result = Err(Error::Unconfirmed(why));
                    }
                }
                _ => {}
            }
            client.wire().fire_now(req.seq);
            let took = started.elapsed();
            // The loop, on this thread, says the request was made once it is on its way, which an
            // attempt over before anything was written (a refused connection) tells it only here:
            // it runs first, so its line comes before this one's of how the attempt went.
            tokio::task::yield_now().await;
            let sha = req.sha256.short();
            let version = req.version.as_deref().unwrap_or("");
            let why = match result {
                // Not a failure: no process there was started before this promotion, so whichever
                // runs now read the promoted config itself. Retrying could only hit one too early.
                Ok(Sent::NothingToReload(why)) => {
                    info!(reload_target = %req.target, version, sha, why = %why, "nothing to reload");
                    let _ = report.send(Outcome::NothingToReload {
                        sha256: req.sha256,
                        why,
                    });
                    break;
                }
                // For a reload, as above: the process that comes reads the promoted config. For a
                // start-up check, nothing is known until a process is there.
                Ok(Sent::NoProcess(process)) if !startup => {
                    let why = Error::NoProcess(process).to_string();
                    info!(reload_target = %req.target, version, sha, why = %why, "nothing to reload");
                    let _ = report.send(Outcome::NothingToReload {
                        sha256: req.sha256,
                        why,
                    });
                    break;
                }
                Ok(Sent::NoProcess(process)) => Error::NoProcess(process).to_string(),
                Ok(Sent::Reloaded(_)) => {
                    shared.metrics.reload(true, took.as_secs_f64());
                    info!(reload_target = %req.target, version, sha, took_ms = took.as_millis() as u64, "reloaded");
                    let _ = report.send(Outcome::Reloaded(req.sha256));
                    break;
                }
                Err(e) => match e.refusal() {
                    Some(refusal) => {
                        shared.metrics.reload(false, took.as_secs_f64());
                        warn!(reload_target = %req.target, version, sha, reason = %refusal, "reload rejected by the component; not retried");
                        let _ = report.send(Outcome::Rejected {
                            sha256: req.sha256,
                            refusal,
                        });
                        break;
                    }
                    None if startup => e.to_string(),
                    None => {
                        shared.metrics.reload(false, took.as_secs_f64());
                        let wait = jitter(delay.failed());
                        warn!(reload_target = %req.target, error = %e, retry_in_ms = wait.as_millis() as u64, "reload failed");
                        let _ = report.send(Outcome::Failed(Failure::new(e)));
                        busy(false);
                        if superseded(&mut rx, wait).await {
                            break;
                        }
                        continue;
                    }
                },
            };
            // A start-up check that did not reach the component: it is still starting. Not a
            // failure and not counted as a reload; looked at again.
            let wait = jitter(delay.failed());
            if waiting_for.as_deref() != Some(why.as_str()) {
                info!(reload_target = %req.target, version, sha, why = %why, retry_in_ms = wait.as_millis() as u64, "start-up check: the component is not reached yet; looking again");
            } else {
                debug!(reload_target = %req.target, version, sha, why = %why, retry_in_ms = wait.as_millis() as u64, "start-up check: still waiting for the component");
            }
            let _ = report.send(Outcome::Waiting(why.clone()));
            waiting_for = Some(why);
            busy(false);
            if superseded(&mut rx, wait).await {
                break;
            }
        }
        busy(false);
    }
}

/// `fut` bounded by `limit` from now, as `tokio::time::timeout`, its timer set only when `fut` is
/// still pending after the tasks ready to run had `turns` turns (each a wake of this task that puts
/// it behind them). Setting a timer that ends before the runtime's next one wakes the reactor (an
/// `eventfd` write, then a spurious wake of the reactor): on the way to a reload POST, which the loop,
/// the worker and the connection's task hand on to each other in a few turns, it would cost the
/// request two system calls and a wake-up for a bound that is rarely reached.
pub(crate) async fn timeout_after_turns<F: std::future::Future>(
    limit: Duration,
    turns: u32,
    fut: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut fut = std::pin::pin!(fut);
    let mut left = turns;
    let early = std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        std::task::Poll::Ready(out) => std::task::Poll::Ready(Some(out)),
        std::task::Poll::Pending if left == 0 => std::task::Poll::Ready(None),
        std::task::Poll::Pending => {
            left -= 1;
            // Woken at once: the runtime runs the tasks already waiting, then this one again.
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
    match early {
        Some(out) => Ok(out),
        None => tokio::time::timeout_at(deadline, fut).await,
    }
}

/// Sleeps `wait` before the next attempt; true when a newer request came meanwhile (it supersedes
/// this one: the outer loop takes it). A closed channel ends the worker's wait forever.
async fn superseded(rx: &mut watch::Receiver<Option<Request>>, wait: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => false,
        r = rx.changed() => {
            if r.is_ok() {
                rx.mark_changed();
            }
            true
        }
    }
}

/// An error and its causes on one line: the client's own text ("client error (Connect)") says little.
fn jitter(d: Duration) -> Duration {
    d.mul_f64(0.8 + fastrand::f64() * 0.4)
}

async fn attempt(
    client: &Client,
    req: &Request,
    before: Option<confirm::Reading>,
    reached: &mut Reached,
) -> Result<Sent, Error> {
    match &req.target {
        Reload::None => Ok(Sent::Reloaded(0)),
        Reload::Http(url) => {
            // At a start-up check, metrics with a success since the promotion settle it without a
            // reload: the component loaded the promoted config when it started.
            if let (Kind::Startup { promoted }, Some(c), Some(r)) = (req.kind, &req.confirm, before)
                && confirm::loaded_since(r, promoted.as_millisecond() as f64 / 1000.0)
            {
                return Ok(Sent::NothingToReload(format!(
                    "the component's {} says it loaded a config after the promotion",
                    c.success_time.as_deref().unwrap_or(&c.success)
                )));
            }
            #[cfg(not(feature = "tls"))]
            if url.is_https() {
                return Err(Error::NoTls { url: url.clone() });
            }
            let req = crate::http::request(hyper::Method::POST, url)
                .body(Empty::<Bytes>::new())
                .map_err(|source| Error::Build {
                    url: url.clone(),
                    why: source.to_string(),
                })?;
            let resp = client.send(req).await.map_err(|source| Error::Request {
                url: url.clone(),
                why: attempt::chain(&source),
            })?;
            let status = resp.status();
            // Only the start of the answer is kept: at most a line's worth, whatever it sends.
            let mut head = Vec::new();
            let mut body = resp.into_body();
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    let room = (4 * REASON_MAX).saturating_sub(head.len());
                    head.extend_from_slice(&data[..data.len().min(room)]);
                    if head.len() >= 4 * REASON_MAX || head.contains(&b'\n') {
                        break;
                    }
                }
            }
            answered(url, status, &head)
        }
        Reload::Signal { signal, process } => {
            let (signal, process, since) =
                (signal::to_nix(*signal), process.clone(), req.promoted_at);
            let mut seen = std::mem::take(reached);
            // The /proc scan reads a file or three per process: off the loop's thread.
            let scan = tokio::task::spawn_blocking(move || {
                let r = signal_once(signal, &process, since, &mut seen);
                (r, seen)
            });
            // Sent from that thread, whatever this one does meanwhile.
            client.wire().fire_now(req.seq);
            match scan.await {
                Ok((r, seen)) => {
                    *reached = seen;
                    r
                }
                Err(e) => Err(Error::Scan(e.to_string())),
            }
        }
    }
}

/// What an answer to the reload POST means: 2xx applied; a redirect not reached (it is not followed);
/// the component's refusal only when [`refuses`] says so; busy (429, 502, 503, 504, a 5xx with no
/// words) not reached; any other answer a misconfigured target, never a verdict on the config.
fn answered(url: &Url, status: hyper::StatusCode, head: &[u8]) -> Result<Sent, Error> {
    let (code, first_line) = (status.as_u16(), first_line(head));
    if status.is_success() {
        Ok(Sent::Reloaded(1))
    } else if status.is_redirection() {
        Err(Error::Redirect {
            url: url.clone(),
            status: code,
        })
    } else if refuses(code, &first_line) || (status.is_server_error() && !matches!(code, 501 | 505))
    {
        Err(Error::Status {
            url: url.clone(),
            status: code,
            first_line,
        })
    } else {
        Err(Error::Misconfigured {
            url: url.clone(),
            status: code,
            first_line,
        })
    }
}

#[cfg(test)]
mod tests;
