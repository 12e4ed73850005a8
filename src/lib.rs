//! confgate: a sidecar that lets a control-plane component run only a ConfigMap version it accepts.
//!
//! # Layout
//! One direction of flow, one job per module. The decision core (values, settings, snapshots as
//! values, [`verdict`], [`variants`], [`rollout`], [`known_good`]) is the `confgate-core` crate
//! (crates/core): no tokio, no file system, no HTTP client, no Kubernetes client. This crate is the
//! edges and re-exports the core's modules under the same names, so `crate::values::Verdict` is the
//! core's. Modules stand on floors and import only their own floor or below (ARCHITECTURE.md, "No
//! import cycle"; `tests/docs/layers.rs` checks this crate's). Bottom to top:
//!
//! 1. Values and formats: the core's `values`, `failure`, `configmap`, `extract`, `listing`,
//!    [`rules`] and `backoff`, the one rule of a retry's wait; [`snapshot`], the core's values and the
//!    read through `..data`; [`annotations`], the core's format and the file's one read;
//!    `manifest`, how `check` and `inject` read a manifest stream.
//! 2. Settings and status.
//!    - [`settings`] (the core's): flags, environment and pod annotations resolved into
//!      [`settings::Settings`].
//!    - [`state`]: publishes the one [`state::Status`] (the core's); `metrics` renders it for
//!      Prometheus.
//! 3. The pure core: the core's [`verdict`], [`variants`], [`rollout`] and [`known_good`];
//!    `workloads`: the ConfigMaps the annotated workloads in a manifest stream read, so `check`
//!    judges each with its workload's settings.
//! 4. I/O at the edges.
//!    - `http`: the outgoing HTTP client (reload POSTs, `confirm`'s reads) and `probe`'s GET.
//!    - `source`: inotify watches on the kubelet volumes, read in tokio's reactor; events only say
//!      "look again".
//!    - [`promote`]: the only writer of the promoted dir, in the kubelet's layout.
//!    - [`reload`]: HTTP or signal reloads with backoff and coalescing; `confirm`: a reload confirmed
//!      through the component's own metrics.
//!    - [`server`]: `/readyz`, `/livez`, `/startupz`, `/status`, `/metrics`.
//! 5. The loop and the commands.
//!    - [`gate`]: the decision loop tying the above together; its `Gate` is the core's.
//!    - [`check`]: offline verdicts for directories and manifests.
//!    - `policy` (cargo feature `policy`, off by default): the admission policy for `confgate policy`.
//!    - [`inject`]: adds the sidecar to workload manifests.
//!    - `api` (feature `api`, on by default): the ConfigMap source over the API, Events, the pod
//!      condition and `confgate status`.
//! 6. The command line: [`cli`] (every clap type) and [`app`] (the commands); `main.rs` only maps
//!    their results to exit codes.
//!
//! # Public surface
//! Modules the binary, the integration tests, the examples, the benchmark and the fuzz targets use
//! are `pub`; the rest (`source`, `configmap`, `metrics`, `extract`, `confirm`, `http`, `values`,
//! `workloads`, `manifest`, `listing`, the gate's state machine and the pipeline's driver-facing methods) are crate-private,
//! so the compiler reports what in this crate's nothing uses (the core's items this crate uses are
//! `pub` there); `values`' types reach the public through [`settings`] and [`verdict`], which
//! re-export them. The status has one writer: the decision loop
//! holds the only [`state::Publisher`]; everyone else reads a [`state::Shared`].

// A `pub` item that no path outside the crate reaches says `pub(crate)`, so the public surface is
// what the binary, tests, benches and fuzz targets use, and reads as such.
#![warn(unreachable_pub)]

pub mod annotations;
#[cfg(feature = "api")]
pub mod api;
pub mod app;
pub(crate) use confgate_core::backoff;
pub mod check;
pub mod cli;
pub(crate) use confgate_core::configmap;
pub(crate) mod confirm;
pub(crate) use confgate_core::extract;
pub mod gate;
pub(crate) mod http;
pub mod inject;
pub use confgate_core::known_good;
pub(crate) use confgate_core::listing;
pub(crate) mod manifest;
pub(crate) mod metrics;
#[cfg(feature = "policy")]
pub mod policy;
pub mod promote;
pub mod reload;
pub use confgate_core::rollout;
pub use confgate_core::rules;
pub mod server;
pub use confgate_core::settings;
pub mod snapshot;
pub(crate) mod source;
pub mod state;
pub(crate) mod validate;
pub(crate) use confgate_core::values;
pub use confgate_core::variants;
pub use confgate_core::verdict;
pub(crate) mod workloads;
