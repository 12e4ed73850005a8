//! What is small enough to be read, judged and switched on the loop itself: [`SMALL_BYTES`],
//! [`SMALL_KEYS`], and [`is_small`].

use crate::snapshot::{Observed, Snapshot};

/// The most bytes, and keys, of a config read and judged on the loop itself: reading and judging
/// that much takes well under a millisecond, against up to 1 MiB in 8192 keys for a ConfigMap.
pub const SMALL_BYTES: usize = 64 << 10;
pub const SMALL_KEYS: usize = 64;

/// Whether `obs` is small enough to be read and judged on the loop ([`SMALL_BYTES`], [`SMALL_KEYS`]).
/// A missing or broken config is: nothing of it was judged.
pub fn is_small(obs: &Observed) -> bool {
    match obs {
        Observed::Config(s) => is_small_snapshot(s),
        _ => true,
    }
}

pub(super) fn is_small_snapshot(s: &Snapshot) -> bool {
    s.files().len() <= SMALL_KEYS && s.files().values().map(Vec::len).sum::<usize>() <= SMALL_BYTES
}
