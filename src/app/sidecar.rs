//! `run` (the sidecar: server, reload worker, pod reporter and the decision loop, until a signal) and
//! `wait` (the same loop without server or reloads, until an accepted config is in place).
//!
//! Two threads: this one runs every task but the server on the current-thread runtime of
//! `startup::runtime`, and the server runs on its own (`server::spawn`), so that a probe's answer
//! never waits on the loop. A signal stops both, and both must end within one grace period.

use tracing::{info, warn};

use super::outcome::{Error, Outcome};
use super::startup::{
    SourceChoice, check_paths, feed, gate_config, log_start, runtime, seal_if_secret,
    source_choice, start_annotations, terminated,
};
use crate::cli::{PathArgs, RunArgs, WaitArgs};
use crate::gate;
use crate::http;
use crate::reload;
use crate::server;
use crate::settings::{self, Settings};
use crate::state::Shared;

/// `confgate run`: the sidecar, until SIGTERM/SIGINT.
pub fn run(args: RunArgs) -> Result<Outcome, Error> {
    let base = Settings::from_raw(&args.gate.raw())?;
    check_paths(&args.paths)?;
    let ann = start_annotations(&args.paths);
    let choice = source_choice(&args.paths, &ann)?;
    seal_if_secret(&args.paths, &choice)?;
    let client = http::Client::new(args.reload_ca.as_deref()).map_err(|e| {
        Error::Settings(settings::Error(vec![settings::Invalid {
            setting: settings::container::RELOAD_CA.named(),
            value: args
                .reload_ca
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            problem: match e {
                http::Error::Ca { what, .. } => what,
                #[cfg(feature = "tls")]
                other @ http::Error::Tls(_) => other.to_string(),
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
        log_start(&args.gate, &args.paths, &ann);
        serve_and_decide(args, base, choice, client, listener).await
    })
}

fn promote_to_text(p: &PathArgs) -> String {
    p.promote_to
        .as_deref()
        .map_or_else(|| "none".to_owned(), |d| d.display().to_string())
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
    // The server on its own thread: its answers never wait on this one, which runs the loop.
    let listener = listener.into_std().map_err(Error::Server)?;
    let server =
        server::spawn(listener, shared.clone(), stopped(stop_rx.clone())).map_err(Error::Server)?;
    let reloads = reload::spawn_with(shared.clone(), client);
    #[cfg(feature = "api")]
    let known_good = crate::api::spawn_known_good(
        args.pod_report == crate::cli::PodReport::Auto,
        &choice,
        &args.paths.watch,
        stopped(stop_rx.clone()),
    )
    .await;
    #[cfg(not(feature = "api"))]
    let known_good = None;
    let feed = feed(choice, &shared, stopped(stop_rx.clone())).await?;
    #[cfg(feature = "api")]
    crate::api::spawn_pod_reporter(
        args.pod_report == crate::cli::PodReport::Auto,
        shared.clone(),
        stopped(stop_rx.clone()),
    )
    .await;
    let mut decide = tokio::spawn(gate::run_fed_with(
        gate_config(&args.paths),
        feed,
        base,
        shared.clone(),
        reloads,
        known_good,
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
    if tokio::time::timeout_at(deadline, server.ended())
        .await
        .is_err()
    {
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
    let ann = start_annotations(&args.paths);
    let choice = source_choice(&args.paths, &ann)?;
    seal_if_secret(&args.paths, &choice)?;
    log_start(&args.gate, &args.paths, &ann);
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
