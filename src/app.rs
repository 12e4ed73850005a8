//! The commands: wiring of the modules for `run`, `wait` and `probe`. `main` maps their results to exit codes.

use std::future::Future;

use tracing::{info, warn};

use crate::cli::{PathArgs, ProbeArgs, RunArgs, WaitArgs};
use crate::gate;
use crate::http;
use crate::reload;
use crate::rollout;
use crate::server;
use crate::settings::{self, Settings};
use crate::state::Shared;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad flag or environment value (exit 64).
    #[error(transparent)]
    Settings(#[from] settings::Error),
    #[error("cannot listen on {addr}: {source} (choose another with --listen or CONFGATE_LISTEN)")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Gate(#[from] gate::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot read /dev/urandom for the key that seals a Secret's hashes: {0}")]
    Random(#[source] std::io::Error),
    #[error("the decision loop ended unexpectedly")]
    LoopDied,
    #[cfg(feature = "api")]
    #[error(transparent)]
    Api(#[from] crate::api::Error),
    #[cfg(feature = "api")]
    #[error(transparent)]
    Status(#[from] crate::api::status_cmd::Error),
}

impl Error {
    /// Errors the user fixes by changing how confgate is started (a port in use, no kubeconfig): exit 64.
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Settings(_) | Error::Listen { .. } => true,
            #[cfg(feature = "api")]
            Error::Api(crate::api::Error::Client(_))
            | Error::Status(crate::api::status_cmd::Error::Client(_)) => true,
            _ => false,
        }
    }

    /// `confgate status` could not read the fleet from the API server (exit 69).
    pub fn is_unavailable(&self) -> bool {
        #[cfg(feature = "api")]
        if let Error::Status(e) = self {
            return e.is_unavailable();
        }
        false
    }

    /// `confgate status` selected no pods (exit 66).
    pub fn is_nothing_selected(&self) -> bool {
        #[cfg(feature = "api")]
        if let Error::Status(crate::api::status_cmd::Error::NoPods { .. }) = self {
            return true;
        }
        false
    }
}

/// A command's outcome when it did not fail: success, or "not accepted / not ready / timed out".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    No(String),
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    // One thread: the work is a few file reads per config change; a second thread would only cost memory.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)
}

fn gate_config(p: &PathArgs) -> gate::Config {
    // File events carry the watched path as given; absolute paths keep them comparable whatever the cwd.
    let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    gate::Config {
        watch: abs(&p.watch),
        promote_to: p.promote_to.as_deref().map(abs),
        annotations: abs(&p.annotations),
        resync: p.resync_interval,
        bucket: pod_bucket(),
    }
}

/// The environment variables naming this pod, in the order a rollout reads them: the UID from the
/// downward API (`metadata.uid`), else the pod name (`metadata.name`, or the hostname the kubelet
/// gives the container, which is the pod name unless the pod sets one).
pub const POD_IDENTITY_ENV: [&str; 3] = ["POD_UID", "POD_NAME", "HOSTNAME"];

/// This pod's place in a rollout, from the first of [`POD_IDENTITY_ENV`] that is set.
fn pod_bucket() -> Option<rollout::Bucket> {
    let (name, id) = POD_IDENTITY_ENV.iter().find_map(|name| {
        let v = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
        Some((*name, v))
    })?;
    let bucket = rollout::Bucket::of(id.trim());
    info!(from = name, bucket = %bucket, "rollout bucket");
    Some(bucket)
}

fn check_paths(p: &PathArgs) -> Result<(), Error> {
    Ok(settings::check_paths(
        &p.watch,
        p.promote_to.as_deref(),
        p.resync_interval,
    )?)
}

/// The config source as resolved from `--source` and, in API mode, the `confgate.io/source` annotation.
#[cfg(feature = "api")]
type SourceChoice = Result<crate::api::SourceSpec, String>;
/// Without the `api` feature the volume is the only source.
#[cfg(not(feature = "api"))]
#[derive(Debug)]
struct SourceChoice;

/// Resolves the source before anything starts, so a bad flag or environment value exits 64.
fn source_choice(p: &PathArgs) -> Result<SourceChoice, Error> {
    #[cfg(feature = "api")]
    {
        crate::api::resolve(p.source.as_deref(), &p.annotations, p.promote_to.as_deref())
            .map_err(|i| Error::Settings(settings::Error(vec![i])))
    }
    #[cfg(not(feature = "api"))]
    match p.source.as_deref() {
        None | Some("volume") => Ok(SourceChoice),
        Some(v) => Err(Error::Settings(settings::Error(vec![settings::Invalid {
            setting: "--source (CONFGATE_SOURCE)".into(),
            value: v.to_owned(),
            problem: "this build has no Kubernetes API support (built without the api feature)"
                .into(),
            allowed: "volume",
        }]))),
    }
}

/// Seals every hash this process prints (`snapshot::seal`) when the content is a Secret: by
/// `--content secret` (a mounted Secret volume) or a `secret:` source. The key is random per process,
/// so no one can test guesses of the value against a published hash.
fn seal_if_secret(p: &PathArgs, choice: &SourceChoice) -> Result<(), Error> {
    #[cfg(feature = "api")]
    let from_source = matches!(choice, Ok(crate::api::SourceSpec::Secret(_)));
    #[cfg(not(feature = "api"))]
    let from_source = {
        let _ = choice;
        false
    };
    if p.content != crate::cli::Content::Secret && !from_source {
        return Ok(());
    }
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key))
        .map_err(Error::Random)?;
    crate::snapshot::seal(key);
    info!(
        "the content is a Secret: hashes are printed as hmac-sha256 under a key random to this process"
    );
    Ok(())
}

/// The decision loop's feed; in API mode a ConfigMap watch is spawned that stops with `stop`.
#[allow(clippy::unused_async)]
async fn feed(
    choice: SourceChoice,
    shared: &std::sync::Arc<Shared>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<gate::Feed, Error> {
    #[cfg(feature = "api")]
    {
        Ok(crate::api::feed(choice, shared.clone(), stop).await?)
    }
    #[cfg(not(feature = "api"))]
    {
        let _ = (choice, shared, stop);
        Ok(gate::Feed::Volume)
    }
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn terminated() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => info!(signal = "SIGTERM", "shutting down"),
        _ = tokio::signal::ctrl_c() => info!(signal = "SIGINT", "shutting down"),
    }
}

/// `confgate run`: the sidecar, until SIGTERM/SIGINT.
pub fn run(args: RunArgs) -> Result<Outcome, Error> {
    let base = Settings::from_raw(&args.gate.raw())?;
    check_paths(&args.paths)?;
    let choice = source_choice(&args.paths)?;
    seal_if_secret(&args.paths, &choice)?;
    let client = http::Client::new(args.reload_ca.as_deref()).map_err(|e| {
        Error::Settings(settings::Error(vec![settings::Invalid {
            setting: "--reload-ca (CONFGATE_RELOAD_CA)".into(),
            value: args
                .reload_ca
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            problem: match e {
                http::Error::Ca { what, .. } => what,
                other => other.to_string(),
            },
            allowed: "a readable PEM file of CA certificates",
        }]))
    })?;
    let rt = runtime()?;
    rt.block_on(async move {
        #[cfg(feature = "api")]
        crate::api::check_credentials(&choice).await?;
        let listener = listen(args.listen).await?;
        let addr = listener.local_addr().unwrap_or(args.listen);
        info!(%addr, source = args.paths.source.as_deref().unwrap_or("volume"), watch = %args.paths.watch.display(), promote_to = %promote_to_text(&args.paths), "confgate started");
        log_start(&args.gate, &args.paths);
        serve_and_decide(args, base, choice, client, listener).await
    })
}

fn promote_to_text(p: &PathArgs) -> String {
    p.promote_to
        .as_deref()
        .map_or_else(|| "none".to_owned(), |d| d.display().to_string())
}

/// At start-up: each gate setting in force and where it came from, and gate-only mode said plainly.
fn log_start<const CMD: crate::cli::For>(gate: &crate::cli::GateArgs<CMD>, paths: &PathArgs) {
    let ann = crate::annotations::read_file(&paths.annotations).unwrap_or_default();
    let base = Settings::from_raw(&gate.raw()).unwrap_or_default();
    let in_force = Settings::with_annotations(&base, &base, &ann).settings;
    let origins = Settings::origins(&ann, |s| gate.given(s));
    for ((name, _, value), from) in in_force.describe().into_iter().zip(origins) {
        info!(setting = name, %value, %from, "setting in force");
    }
    if paths.promote_to.is_none() {
        warn!(
            "gate-only mode: no --promote-to (CONFGATE_PROMOTE_TO), so configs are judged and reported but \
             not copied; the component reads the ConfigMap mount directly and can see a rejected config"
        );
    }
}

/// Binds `addr`; `[::]` (the default) falls back to `0.0.0.0` on a host without IPv6.
async fn listen(addr: std::net::SocketAddr) -> Result<tokio::net::TcpListener, Error> {
    use nix::errno::Errno;
    match tokio::net::TcpListener::bind(addr).await {
        // EAFNOSUPPORT: IPv6 not compiled in or disabled; EADDRNOTAVAIL: no IPv6 address configured.
        Err(e)
            if addr.ip() == std::net::Ipv6Addr::UNSPECIFIED
                && matches!(
                    e.raw_os_error().map(Errno::from_raw),
                    Some(Errno::EAFNOSUPPORT | Errno::EADDRNOTAVAIL)
                ) =>
        {
            let v4 = std::net::SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, addr.port()));
            warn!(%addr, error = %e, fallback = %v4, "no IPv6 on this host; listening on IPv4 only");
            tokio::net::TcpListener::bind(v4)
                .await
                .map_err(|source| Error::Listen { addr: v4, source })
        }
        r => r.map_err(|source| Error::Listen { addr, source }),
    }
}

async fn serve_and_decide(
    args: RunArgs,
    base: Settings,
    choice: SourceChoice,
    client: http::Client,
    listener: tokio::net::TcpListener,
) -> Result<Outcome, Error> {
    let shared = Shared::new();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let server = tokio::spawn(server::serve(
        listener,
        shared.clone(),
        stopped(stop_rx.clone()),
    ));
    let reloads = reload::spawn_with(shared.clone(), client);
    let feed = feed(choice, &shared, stopped(stop_rx.clone())).await?;
    #[cfg(feature = "api")]
    crate::api::spawn_pod_reporter(
        args.pod_report == crate::cli::PodReport::Auto,
        shared.clone(),
        stopped(stop_rx.clone()),
    )
    .await;
    let mut decide = tokio::spawn(gate::run_fed(
        gate_config(&args.paths),
        feed,
        base,
        shared.clone(),
        reloads,
        stopped(stop_rx),
    ));
    let result = tokio::select! {
        () = terminated() => None,
        r = &mut decide => Some(r),
    };
    let _ = stop_tx.send(true);
    // One grace period for the loop and the server's drain together; running out of it is a failure.
    let deadline = tokio::time::Instant::now() + args.shutdown_grace;
    let late = || {
        warn!(
            grace_ms = args.shutdown_grace.as_millis() as u64,
            "graceful shutdown did not complete in time"
        );
        Ok(Outcome::No(format!(
            "graceful shutdown did not complete within {:?}",
            args.shutdown_grace
        )))
    };
    let result = match result {
        Some(r) => r,
        None => match tokio::time::timeout_at(deadline, &mut decide).await {
            Ok(r) => r,
            Err(_) => return late(),
        },
    };
    if tokio::time::timeout_at(deadline, server).await.is_err() {
        return late();
    }
    match result {
        Ok(Ok(())) => Ok(Outcome::Ok),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Error::LoopDied),
    }
}

/// `confgate wait`: the same loop, no server and no reloads, until a first accepted config is in place.
pub fn wait(args: WaitArgs) -> Result<Outcome, Error> {
    let base = Settings::from_raw(&args.gate.raw())?;
    check_paths(&args.paths)?;
    let choice = source_choice(&args.paths)?;
    seal_if_secret(&args.paths, &choice)?;
    log_start(&args.gate, &args.paths);
    let rt = runtime()?;
    rt.block_on(async move {
        let shared = Shared::new();
        let mut rx = shared.subscribe();
        let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
        let reloads = reload::spawn(shared.clone());
        // The component is not running yet: nothing to reload.
        let mut base = base;
        base.reload = settings::Reload::None;
        let source_stop = {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let feed = feed(choice, &shared, source_stop).await?;
        let decide = tokio::spawn(gate::run_fed(
            gate_config(&args.paths),
            feed,
            base,
            shared.clone(),
            reloads,
            async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            },
        ));
        let started = tokio::time::timeout(args.timeout, rx.wait_for(|s| s.started)).await;
        let _ = stop_tx.send(true);
        let outcome = match started {
            Ok(Ok(s)) => {
                info!(
                    version = s
                        .active
                        .as_ref()
                        .and_then(|a| a.version.as_deref())
                        .unwrap_or(""),
                    "accepted config in place"
                );
                Outcome::Ok
            }
            Ok(Err(_)) => Outcome::No("the decision loop ended".into()),
            Err(_) => Outcome::No(format!(
                "timed out after {:?}: {}",
                args.timeout,
                shared.snapshot().reason
            )),
        };
        match decide.await {
            Ok(Err(e)) => Err(e.into()),
            _ => Ok(outcome),
        }
    })
}

/// `confgate status`: the table, then the summary; `No` unless every pod matches.
#[cfg(feature = "api")]
pub fn status(args: crate::cli::StatusArgs) -> Result<Outcome, Error> {
    let query = crate::api::status_cmd::Query {
        namespace: args.namespace,
        selector: args.selector,
        configmap: args.configmap,
    };
    let rt = runtime()?;
    if args.wait {
        use crate::api::status_cmd::Waited;
        let timeout = args.timeout;
        let waited = rt.block_on(crate::api::status_cmd::wait(&query, timeout, |s| {
            println!("{s}")
        }))?;
        return Ok(match waited {
            Waited::Done(f) => {
                print!("{}", f.table());
                Outcome::Ok
            }
            Waited::Refused(why, f) => {
                print!("{}", f.table());
                Outcome::No(format!("refused: {why}"))
            }
            Waited::TimedOut(f) => {
                print!("{}", f.table());
                Outcome::No(format!(
                    "timed out after {}: {}",
                    humantime_like(timeout),
                    f.summaries().replace('\n', "; ")
                ))
            }
        });
    }
    let fleet = rt.block_on(crate::api::status_cmd::run(&query))?;
    print!("{}", fleet.table());
    if fleet.all_match() {
        println!("{}", fleet.summaries());
        Ok(Outcome::Ok)
    } else {
        Ok(Outcome::No(fleet.summaries()))
    }
}

/// `confgate probe`: GET the endpoint, print its body, succeed on 2xx.
pub fn probe(args: ProbeArgs) -> Result<Outcome, Error> {
    let listen = std::env::var("CONFGATE_LISTEN").ok();
    let host_port = probe_addr(args.addr.as_deref(), listen.as_deref())?;
    let url = format!("http://{host_port}{}", args.kind.path());
    let held = args.kind == crate::cli::ProbeKind::Ready;
    let deadline = std::time::Instant::now() + args.timeout;
    let got = http::get(&host_port, args.kind.path(), deadline).map(|(code, body)| {
        // Ready while holding back a newer config: say so, as the exec probe's one line.
        let holding = if held && (200..300).contains(&code) {
            http::get(&host_port, "/status", deadline)
                .ok()
                .and_then(|(_, s)| holding_line(&s))
        } else {
            None
        };
        (code, holding.map_or(body, |h| format!("{h}\n")))
    });
    Ok(match got {
        Ok((code, body)) if (200..300).contains(&code) => {
            print!("{body}");
            Outcome::Ok
        }
        // The kubelet shows this line in the pod's events: the reason alone, ending with its fix.
        Ok((_, body)) => Outcome::No(body.trim_end().to_owned()),
        Err(e) => Outcome::No(format!("GET {url}: {e}")),
    })
}

/// "holding 2.4.1; 3.0.0 is too-new" from a `/status` body whose active config is not the newest.
fn holding_line(status: &str) -> Option<String> {
    let s: crate::state::Status = serde_json::from_str(status).ok()?;
    crate::state::Holding::of(&s).map(|h| h.to_string())
}

/// The HOST:PORT `probe` asks: `--addr`/`CONFGATE_PROBE_ADDR` (an `http://` prefix and a trailing
/// `/` are dropped, since users copy URLs), else loopback at `CONFGATE_LISTEN`'s port, else 9797.
fn probe_addr(addr: Option<&str>, listen: Option<&str>) -> Result<String, Error> {
    let bad = |value: &str, problem: &str| {
        Error::Settings(settings::Error(vec![settings::Invalid {
            setting: "--addr (CONFGATE_PROBE_ADDR)".into(),
            value: value.to_owned(),
            problem: problem.to_owned(),
            allowed: "HOST:PORT, e.g. 127.0.0.1:9797 or [::1]:9797 (http:// may prefix it)",
        }]))
    };
    let Some(given) = addr else {
        let port = listen
            .and_then(|l| l.parse::<std::net::SocketAddr>().ok())
            .map_or(9797, |a| a.port());
        let host = match listen.and_then(|l| l.parse::<std::net::SocketAddr>().ok()) {
            // A wildcard listener answers on loopback; 127.0.0.1 exists in every pod, IPv6-only too.
            Some(a) if !a.ip().is_unspecified() => a.ip().to_string(),
            _ => "127.0.0.1".to_owned(),
        };
        return Ok(if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        });
    };
    if given.starts_with("https://") {
        return Err(bad(given, "confgate serves plain HTTP"));
    }
    let hp = given.strip_prefix("http://").unwrap_or(given);
    let hp = hp.strip_suffix('/').unwrap_or(hp);
    let valid = hp
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        && !hp.contains(['/', '?', '#', '@']);
    if valid {
        Ok(hp.to_owned())
    } else {
        Err(bad(given, "not HOST:PORT"))
    }
}

/// A timeout as the user would write it back: whole seconds, or milliseconds below one second.
#[cfg(feature = "api")]
fn humantime_like(d: std::time::Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::probe_addr;

    #[test]
    fn holding_line_reads_the_status_back() {
        use crate::state::{ActiveView, CandidateView, Status};
        use crate::verdict::Verdict;
        let mut s = Status {
            stale: true,
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
        let body = serde_json::to_string(&s).unwrap();
        assert_eq!(
            super::holding_line(&body).as_deref(),
            Some("holding 2.4.1; 3.0.0 is too-new")
        );
        s.stale = false;
        let body = serde_json::to_string(&s).unwrap();
        assert_eq!(super::holding_line(&body), None);
        assert_eq!(super::holding_line(r#"{"stale":true}"#), None);
    }

    #[test]
    fn probe_address_from_flag_url_or_listen() {
        let ok = |a: Option<&str>, l: Option<&str>| probe_addr(a, l).unwrap();
        assert_eq!(ok(None, None), "127.0.0.1:9797");
        assert_eq!(ok(None, Some("[::]:9000")), "127.0.0.1:9000");
        assert_eq!(ok(None, Some("0.0.0.0:9001")), "127.0.0.1:9001");
        assert_eq!(ok(None, Some("[::1]:9002")), "[::1]:9002");
        assert_eq!(ok(Some("10.0.0.1:9797"), Some("[::]:1")), "10.0.0.1:9797");
        assert_eq!(ok(Some("http://127.0.0.1:9797/"), None), "127.0.0.1:9797");
        assert_eq!(ok(Some("[::1]:9797"), None), "[::1]:9797");
        for bad in [
            "http://http://127.0.0.1:9797",
            "https://127.0.0.1:9797",
            "127.0.0.1",
            "127.0.0.1:9797/readyz",
        ] {
            let e = probe_addr(Some(bad), None).unwrap_err().to_string();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }
}
