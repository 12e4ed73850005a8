//! confgate's decision core: what a config is and how it is judged, with no I/O.
//!
//! No tokio, no file system, no HTTP, no Kubernetes client: the `confgate` crate (the edges: the
//! sources, the promoter, the reloads, the server, the API) depends on this one, never the reverse,
//! and re-exports its modules under the same names, so `confgate::verdict` is this crate's `verdict`.
//! Modules stand on floors and import only their own floor or below (ARCHITECTURE.md):
//!
//! 1. Values and formats.
//!    - [`values`]: what each gate setting holds, with its parser, and the verdict.
//!    - [`failure`]: an edge's typed error the core keeps.
//!    - [`snapshot`]: keys, bytes and the `sha256:` content hash; what a read observed.
//!    - [`annotations`]: the kubelet's downward-API annotations file format.
//!    - [`configmap`]: a ConfigMap object's keys as a snapshot, and the key-name rule.
//!    - [`extract`]: the value at a JSON/YAML pointer, streamed without a document tree.
//!    - [`listing`]: bounded lists of names in reasons ("a, b, c and 995 more").
//!    - [`rules`]: content rules, CEL over `data`/`binaryData` (feature `policy`).
//!    - [`backoff`]: the one rule of a retry's wait.
//!    - [`reload`], [`promote`], [`validate`]: what the reload worker, the promoter and the
//!      component's checker tell the decision core, as values (their I/O is the edge's).
//! 2. Settings: [`settings`], flags, environment and pod annotations resolved into
//!    [`settings::Settings`].
//! 3. The judgement.
//!    - [`verdict`]: version extraction, semver range, required keys.
//!    - [`variants`]: the one choice among several versions of the config file in one ConfigMap.
//!    - [`rollout`]: a config rolled out to a share of the fleet, each pod's track from its bucket.
//!    - [`known_good`]: the known-good record's lines, entries and `decide`.
//!    - [`state`]: the published status, its views and the notices, as values.
//! 4. The decision: [`gate`], the `Gate`: events in, actions out, time passed in.

pub mod annotations;
pub mod backoff;
pub mod configmap;
pub mod extract;
pub mod failure;
pub mod gate;
pub mod known_good;
pub mod listing;
pub mod promote;
pub mod reload;
pub mod rollout;
pub mod rules;
pub mod settings;
pub mod snapshot;
pub mod state;
pub mod validate;
pub mod values;
pub mod variants;
pub mod verdict;
