//! `Snapshot`: one config version's keys, bytes and modes, with its hash; `Keys`: how a judgement reads them.

use std::collections::BTreeMap;
use std::fmt;

use super::hash::ContentHash;
use super::limits::DEFAULT_MODE;

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
    pub fn with_modes(files: BTreeMap<String, Vec<u8>>, modes: BTreeMap<String, u32>) -> Snapshot {
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
    pub fn modes(&self) -> &BTreeMap<String, u32> {
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
