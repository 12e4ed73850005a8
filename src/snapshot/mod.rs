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

use std::collections::BTreeMap;
use std::fmt;

mod hash;
mod problem;
mod read;

pub use hash::Plain;
pub(crate) use hash::seal;
pub use hash::{ContentHash, HashTextError, PrintedHash, sealed};
pub use problem::{Broken, Cause, IoError, Missing};
pub use read::read;
pub(crate) use read::stat_small;

/// The ConfigMap size limit (`core.MaxSecretSize`): the sum of all values.
pub const MAX_BYTES: u64 = 1024 * 1024;
/// The most keys a config may have. The API server bounds a ConfigMap's values (1 MiB) but not how many
/// keys share them; each key costs memory of its own (its name, its entry, its file and link in the
/// promoted dir), so this bound is what keeps a config of empty keys within the sidecar's memory limit.
/// Real ConfigMaps hold a few hundred at most.
pub const MAX_KEYS: usize = 8192;
pub(crate) const DATA_LINK: &str = "..data";

/// The mode a key file has when nothing else is known: the kubelet's `defaultMode` default.
pub(crate) const DEFAULT_MODE: u32 = 0o644;

/// One config version: every key with its bytes, and the modes that differ from `DEFAULT_MODE`.
///
/// Modes are not part of the hash: a ConfigMap does not carry them (the pod's `defaultMode` and
/// `items[].mode` do), and `confgate check` must print the volume's hash for a manifest.
///
/// The fields are private so the hash always matches the keys: a snapshot is made only by
/// [`Snapshot::new`] or `Snapshot::with_modes` and read through its accessors.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot {
    files: BTreeMap<String, Vec<u8>>,
    hash: ContentHash,
    /// Permission bits (`0o777` mask) of the keys whose mode is not [`DEFAULT_MODE`].
    modes: BTreeMap<String, u32>,
}

impl fmt::Debug for Snapshot {
    // Never print content: it may hold credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("keys", &self.files.keys().collect::<Vec<_>>())
            .field("hash", &self.hash)
            .field("modes", &self.modes)
            .finish()
    }
}

impl Snapshot {
    pub fn new(files: BTreeMap<String, Vec<u8>>) -> Snapshot {
        let hash = ContentHash::of(files.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        Snapshot {
            files,
            hash,
            modes: BTreeMap::new(),
        }
    }

    /// A snapshot whose keys have these permission bits; [`DEFAULT_MODE`] entries are dropped.
    pub(crate) fn with_modes(
        files: BTreeMap<String, Vec<u8>>,
        modes: BTreeMap<String, u32>,
    ) -> Snapshot {
        let mut s = Snapshot::new(files);
        s.modes = modes
            .into_iter()
            .map(|(k, m)| (k, m & 0o777))
            .filter(|(k, m)| *m != DEFAULT_MODE && s.files.contains_key(k))
            .collect();
        s
    }

    /// Every key with its bytes.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.files
    }

    /// The documented `sha256:` hash of the keys and their bytes.
    pub fn hash(&self) -> ContentHash {
        self.hash
    }

    /// Permission bits of the keys whose mode is not [`DEFAULT_MODE`].
    pub(crate) fn modes(&self) -> &BTreeMap<String, u32> {
        &self.modes
    }

    /// The keys and their bytes, taken out of the snapshot.
    pub(crate) fn into_files(self) -> BTreeMap<String, Vec<u8>> {
        self.files
    }

    /// The permission bits key `key` is promoted with.
    pub fn mode(&self, key: &str) -> u32 {
        self.modes.get(key).copied().unwrap_or(DEFAULT_MODE)
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|v| v.len() as u64).sum()
    }
}

/// The keys of a config as a judgement reads them: a snapshot's own, or a set seen through another one
/// (a variant's promoted set inside its ConfigMap) without copying or hashing it.
pub trait Keys {
    /// The bytes of `key`, when it is there.
    fn get(&self, key: &str) -> Option<&[u8]>;
    /// Every key with its bytes, keys in byte order.
    fn each(&self) -> Box<dyn Iterator<Item = (&str, &[u8])> + '_>;
    /// How many keys there are.
    fn count(&self) -> usize;
}

impl Keys for Snapshot {
    fn get(&self, key: &str) -> Option<&[u8]> {
        self.files.get(key).map(Vec::as_slice)
    }

    fn each(&self) -> Box<dyn Iterator<Item = (&str, &[u8])> + '_> {
        Box::new(self.files.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
    }

    fn count(&self) -> usize {
        self.files.len()
    }
}

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
    pub(crate) fn same_as(&self, other: &Observed) -> bool {
        match (self, other) {
            (Observed::Config(a), Observed::Config(b)) => a.hash == b.hash,
            (a, b) => a == b,
        }
    }

    pub fn hash(&self) -> Option<ContentHash> {
        match self {
            Observed::Config(s) => Some(s.hash),
            _ => None,
        }
    }
}
