//! The commands: wiring of the modules for `run`, `wait`, `probe` and `status`. `main` maps their
//! results to exit codes.
//!
//! This file only declares and re-exports. `startup.rs` is the start-up the commands share (the
//! runtime, the source, the settings in force); `outcome.rs` is what a command returns (`Outcome`,
//! `Error`); `sidecar.rs` is `run` and `wait`; `ask.rs` is `probe` and `status`, which ask a running
//! sidecar or the fleet.

mod ask;
mod outcome;
mod sidecar;
mod startup;

pub use ask::probe;
#[cfg(feature = "api")]
pub use ask::status;
pub use outcome::{Error, Outcome};
pub use sidecar::{run, wait};
pub use startup::terminated;
