//! The start-up the commands share: the runtime, the paths checked, the source resolved (a Secret's
//! hashes sealed), the decision loop's feed, the settings in force logged, and the signal that ends
//! `run`.

use std::future::Future;

use tracing::{info, warn};

use super::outcome::Error;
use crate::annotations::Annotations;
use crate::cli::PathArgs;
use crate::gate;
use crate::rollout;
use crate::settings::{self, Settings, container};
use crate::state::Shared;

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    // One thread for the loop and every task but the HTTP server (which has its own, `server::spawn`):
    // the work is a few file reads per config change; more threads would only cost memory.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)
}

pub(super) fn gate_config(p: &PathArgs) -> gate::Config {
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
pub(crate) const POD_IDENTITY_ENV: [&str; 3] = ["POD_UID", "POD_NAME", "HOSTNAME"];

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

/// A directory setting as the file system shows it, for [`settings::check_paths`].
fn look(given: &std::path::Path) -> settings::Looked<'_> {
    settings::Looked {
        given,
        full: std::fs::canonicalize(given)
            .or_else(|_| std::path::absolute(given))
            .unwrap_or_else(|_| given.to_path_buf()),
        not_a_dir: std::fs::metadata(given).is_ok_and(|m| !m.is_dir()),
    }
}

pub(super) fn check_paths(p: &PathArgs) -> Result<(), Error> {
    let promote_to = p.promote_to.as_deref().map(look);
    Ok(settings::check_paths(
        &look(&p.watch),
        promote_to.as_ref(),
        p.resync_interval,
    )?)
}

/// The annotations as the process starts, read once for the source and the start-up log. The loop
/// reads the file again once its watches are in place, so a change after this read is not missed.
pub(super) fn start_annotations(p: &PathArgs) -> Annotations {
    crate::annotations::read_file(&p.annotations).unwrap_or_default()
}

/// The config source as resolved from `--source` and, in API mode, the `confgate.io/source` annotation.
#[cfg(feature = "api")]
pub(super) type SourceChoice = Result<crate::api::SourceSpec, crate::api::BadSource>;
/// Without the `api` feature the volume is the only source.
#[cfg(not(feature = "api"))]
#[derive(Debug)]
pub(super) struct SourceChoice;

/// Resolves the source before anything starts, so a bad flag or environment value exits 64.
pub(super) fn source_choice(p: &PathArgs, ann: &Annotations) -> Result<SourceChoice, Error> {
    #[cfg(feature = "api")]
    {
        crate::api::resolve(p.source.as_deref(), ann, p.promote_to.as_deref())
            .map_err(|i| Error::Settings(settings::Error(vec![i])))
    }
    #[cfg(not(feature = "api"))]
    let _ = ann;
    #[cfg(not(feature = "api"))]
    match p.source.as_deref() {
        None | Some("volume") => Ok(SourceChoice),
        Some(v) => Err(Error::Settings(settings::Error(vec![settings::Invalid {
            setting: container::SOURCE.named(),
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
pub(super) fn seal_if_secret(p: &PathArgs, choice: &SourceChoice) -> Result<(), Error> {
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
pub(super) async fn feed(
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

/// At start-up: each gate setting in force and where it came from, and gate-only mode said plainly.
pub(super) fn log_start<const CMD: crate::cli::For>(
    gate: &crate::cli::GateArgs<CMD>,
    paths: &PathArgs,
    ann: &Annotations,
) {
    let base = Settings::from_raw(&gate.raw()).unwrap_or_default();
    let in_force = Settings::with_annotations(&base, &base, ann).settings;
    let origins = Settings::origins(ann, |s| gate.given(s));
    for ((name, _, value), from) in in_force.describe().into_iter().zip(origins) {
        info!(setting = name, %value, %from, "setting in force");
    }
    if paths.promote_to.is_none() {
        warn!(
            "gate-only mode: no {}, so configs are judged and reported but not copied; the component \
             reads the ConfigMap mount directly and can see a rejected config",
            container::PROMOTE_TO.named()
        );
    }
}
