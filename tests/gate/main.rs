//! The gate through the real binary on real files in the kubelet's layout: verdicts, promotion,
//! reloads, rollback, hostile inputs and the endpoints, one module per subject.

#[path = "../common/mod.rs"]
mod common;

mod applied;
mod atomicity;
#[cfg(feature = "example-component")]
mod component;
mod decisions;
mod gate;
mod hostile;
mod leaks;
mod listen;
mod logs;
mod prometheus;
mod promote_faults;
mod races;
mod refusals;
mod rollout;
mod rules;
mod secrets;
mod server_limits;
mod signal_targets;
mod soak;
mod surface;
mod validate;
mod variants;
