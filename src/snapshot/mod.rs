//! Snapshots: the keys and bytes of one config version, read through one resolution of `..data`.
//!
//! A kubelet volume is read through the directory `..data` points at, so one snapshot never mixes two
//! versions and keys linked after the swap are already there. A plain directory is read as it is (the
//! caller waits for a quiet period first). The values (`Snapshot`, its hash, `Observed`) are the
//! core's (`confgate_core::snapshot`), re-exported here; this module is the read.

mod read;
mod settle;

pub use confgate_core::snapshot::*;
pub use read::read;
pub(crate) use read::read_small;
pub(crate) use settle::settling;
