//! Snapshots as values: the keys and bytes of one config version, its content hash, and what a read
//! observed (a config, nothing, or something broken). The read itself, through one resolution of
//! `..data`, is the edge's (`confgate::snapshot::read`). The content hash is order-independent:
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

pub use config::{Keys, Snapshot};
pub use hash::Plain;
pub use hash::seal;
pub use hash::{ContentHash, HashTextError, PrintedHash, sealed};
pub use limits::{DATA_LINK, DEFAULT_MODE, is_editor_leftover};
pub use limits::{MAX_BYTES, MAX_KEYS};
pub use observed::Observed;
pub use problem::{Broken, Cause, IoError, MAX_DEPTH, Missing, SWAP_RETRIES, SourceError};
