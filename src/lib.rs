//! confgate: a sidecar that lets a control-plane component run only a ConfigMap version it accepts.
//!
//! # Layout
//! One direction of flow, one job per module; the core ([`verdict`], [`gate::Gate`]) is pure.
//!
//! - [`settings`]: flags, environment and pod annotations resolved into [`settings::Settings`].
//! - [`annotations`]: the kubelet's downward-API annotations file format.
//! - [`source`]: notify watches on the kubelet volumes; events only say "look again".
//! - [`snapshot`]: keys, bytes and the `sha256:` content hash, read through `..data`.
//! - [`verdict`]: version extraction, semver range, required keys. No I/O.
//! - [`promote`]: the only writer of the promoted dir, in the kubelet's layout.
//! - [`reload`]: HTTP or signal reloads with backoff and coalescing.
//! - [`gate`]: the decision loop tying the above together.
//! - [`state`]: the one published [`state::Status`]; [`metrics`] renders it for Prometheus.
//! - [`server`]: `/readyz`, `/livez`, `/startupz`, `/status`, `/metrics`.
//! - [`check`]: offline verdicts for directories and manifests.
//! - [`inject`]: adds the sidecar to workload manifests.
//! - [`cli`] and [`app`]: the commands; `main.rs` only maps their results to exit codes.
//! - `api` (feature `api`, on by default): the ConfigMap source over the API, Events, the pod
//!   condition and `confgate status`.

pub mod annotations;
#[cfg(feature = "api")]
pub mod api;
pub mod app;
pub mod check;
pub mod cli;
pub mod gate;
pub mod inject;
pub mod metrics;
pub mod promote;
pub mod reload;
pub mod server;
pub mod settings;
pub mod snapshot;
pub mod source;
pub mod state;
pub mod verdict;
