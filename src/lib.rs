//! confgate: a sidecar that lets a control-plane component run only a ConfigMap version it accepts.
//!
//! # Layout
//! One direction of flow, one job per module; the core ([`verdict`], the gate's state machine) is pure.
//! Modules stand on floors and import only their own floor or below (ARCHITECTURE.md, "No import
//! cycle"; `tests/docs/layers.rs` checks it). Bottom to top:
//!
//! 1. Values and formats.
//!    - `values`: what each gate setting holds, with its parser, and the verdict; no I/O.
//!    - `backoff`: the one rule of a retry's wait; `failure`: an edge's typed error the core keeps.
//!    - [`snapshot`]: keys, bytes and the `sha256:` content hash, read through `..data`.
//!    - [`annotations`]: the kubelet's downward-API annotations file format.
//!    - `configmap`: a ConfigMap object's keys as a snapshot (manifests, the API), and the key-name rule.
//!    - `extract`: the value at a JSON/YAML pointer, streamed without a document tree.
//!    - `manifest`: how `check` and `inject` read a manifest stream (YAML or JSON, its document limit).
//!    - `listing`: bounded lists of names in reasons ("a, b, c and 995 more").
//!    - [`rules`]: content rules, CEL over `data`/`binaryData`.
//! 2. Settings and status.
//!    - [`settings`]: flags, environment and pod annotations resolved into [`settings::Settings`].
//!    - [`state`]: the one published [`state::Status`]; `metrics` renders it for Prometheus.
//! 3. The pure core.
//!    - [`verdict`]: version extraction, semver range, required keys. No I/O.
//!    - [`variants`]: the one choice among several versions of the config file in one ConfigMap.
//!    - [`rollout`]: a config rolled out to a share of the fleet (`K.next`, `confgate.rollout`), each
//!      pod's track from its bucket.
//!    - `workloads`: the ConfigMaps the annotated workloads in a manifest stream read, so `check`
//!      judges each with its workload's settings.
//! 4. I/O at the edges.
//!    - `http`: the outgoing HTTP client (reload POSTs, `confirm`'s reads) and `probe`'s GET.
//!    - `source`: inotify watches on the kubelet volumes, read in tokio's reactor; events only say
//!      "look again".
//!    - [`promote`]: the only writer of the promoted dir, in the kubelet's layout.
//!    - [`reload`]: HTTP or signal reloads with backoff and coalescing; `confirm`: a reload confirmed
//!      through the component's own metrics.
//!    - [`server`]: `/readyz`, `/livez`, `/startupz`, `/status`, `/metrics`.
//! 5. The loop and the commands.
//!    - [`gate`]: the decision loop tying the above together.
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
//! so the compiler reports what in them nothing uses; `values`' types reach the public through
//! [`settings`] and [`verdict`], which re-export them. The status has one writer: the decision loop
//! holds the only [`state::Publisher`]; everyone else reads a [`state::Shared`].

// A `pub` item that no path outside the crate reaches says `pub(crate)`, so the public surface is
// what the binary, tests, benches and fuzz targets use, and reads as such.
#![warn(unreachable_pub)]

pub mod annotations;
#[cfg(feature = "api")]
pub mod api;
pub mod app;
pub(crate) mod backoff;
pub mod check;
pub mod cli;
pub(crate) mod configmap;
pub(crate) mod confirm;
pub(crate) mod extract;
pub(crate) mod failure;
pub mod gate;
pub(crate) mod http;
pub mod inject;
pub mod known_good;
pub(crate) mod listing;
pub(crate) mod manifest;
pub(crate) mod metrics;
#[cfg(feature = "policy")]
pub mod policy;
pub mod promote;
pub mod reload;
pub mod rollout;
pub mod rules;
pub mod server;
pub mod settings;
pub mod snapshot;
pub(crate) mod source;
pub mod state;
pub(crate) mod validate;
pub(crate) mod values;
pub mod variants;
pub mod verdict;
pub(crate) mod workloads;
