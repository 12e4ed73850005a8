//! `Observed`: what one read of the watched directory found.

use super::config::Snapshot;
use super::hash::ContentHash;
use super::problem::{Broken, Missing};

/// What a read of the watched directory found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// A config was there.
    Config(Snapshot),
    /// No config: no directory, an empty volume, or a deleted ConfigMap.
    Missing(Missing),
    /// Something is there but cannot be a ConfigMap; the cause names the key and the problem.
    Broken(Broken),
}

impl Observed {
    /// Identity for de-duplication: a config's hash, or the problem (what it says).
    #[cfg(feature = "api")]
    pub fn same_as(&self, other: &Observed) -> bool {
        match (self, other) {
            (Observed::Config(a), Observed::Config(b)) => a.hash() == b.hash(),
            (a, b) => a == b,
        }
    }

    pub fn hash(&self) -> Option<ContentHash> {
        match self {
            Observed::Config(s) => Some(s.hash()),
            _ => None,
        }
    }
}
