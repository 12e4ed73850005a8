//! The decision loop: a pure state machine (`Gate`) that takes one event at a time and answers
//! with actions; [`Pipeline`], the I/O that carries them out; and the async driver ([`run_fed`])
//! that waits for file events, the feed, timers and liveness pings and turns them into events.
//!
//! The loop is the only task that reads the config, promotes, requests reloads and publishes the
//! status; one snapshot is judged, acted on and published before the next is read, so no ordering of
//! events can promote a snapshot under settings other than those it was judged by.
//!
//! - `machine`: `Gate`, pure: every decision and every piece of the loop's state (the verdict
//!   state, the annotations grace period, the reload owed), `Event` in, `Action`s out. It is the
//!   core's (`confgate_core::gate`), named `machine` here.
//! - `pipeline`: [`Pipeline`]: carries out the actions (read, judge, promote, request a reload,
//!   write markers, log, count) and publishes.
//! - `feed`: [`Feed`], the inputs other than file events, and `off_loop`.
//! - `logs`: the log line of each decision.
//! - `driver`: [`run_fed`]: the waiting, including the one debounce of plain-directory edits.
//! - `config`: [`Config`], the container-level inputs the loop is opened with.
//! - `error`: [`Error`], why the loop could not start.
//! - `known_good`: the link to the known-good edge (the component's containers, the record).

mod config;
mod driver;
mod error;
mod feed;
pub(crate) mod known_good;
mod logs;
// The Gate is the core's (`confgate_core::gate`), named here as before.
use confgate_core::gate as machine;
mod pipeline;

pub use config::Config;
pub use driver::run_fed;
pub(crate) use driver::run_fed_with;
pub use error::Error;
pub use feed::Feed;
pub use pipeline::Pipeline;
