//! Snapshots: the keys and bytes of one config version, read through one resolution of `..data`.
//!
//! A kubelet volume is read through the directory `..data` points at, so one snapshot never mixes two
//! versions and keys linked after the swap are already there. A plain directory is read as it is (the
//! caller waits for a quiet period first). The content hash is order-independent:
//!
//! ```text
//! sha256( for each key in byte order:  u64be(len(key)) ‖ key ‖ u64be(len(value)) ‖ value )
//! ```
//!
//! printed as `sha256:<64 hex digits>`. Length prefixes make the encoding injective, so two different
//! ConfigMaps never share an encoding.

mod config;
mod hash;
mod limits;
mod observed;
mod problem;
mod read;
mod settle;

pub use config::{Keys, Snapshot};
pub use hash::Plain;
pub(crate) use hash::seal;
pub use hash::{ContentHash, HashTextError, PrintedHash, sealed};
pub(crate) use limits::{DATA_LINK, is_editor_leftover};
pub use limits::{MAX_BYTES, MAX_KEYS};
pub use observed::Observed;
pub use problem::{Broken, Cause, IoError, Missing, SourceError};
pub use read::read;
pub(crate) use read::read_small;
pub(crate) use settle::settling;
