//! `Snapshot`: one config version's keys, bytes and modes, with its hash; `Keys`: how a judgement reads them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::hash::ContentHash;
use super::limits::DEFAULT_MODE;

/// One config version: every key with its bytes, and the modes that differ from `DEFAULT_MODE`.
///
/// Modes are not part of the hash: a ConfigMap does not carry them (the pod's `defaultMode` and
/// `items[].mode` do), and `confgate check` must print the volume's hash for a manifest.
///
/// The fields are private so the hash always matches the keys: a snapshot is made only by
/// [`Snapshot::new`] or `Snapshot::with_modes` and read through its accessors.
///
/// A snapshot is never changed once made, so its clones share it: handing one to the validator,
/// keeping the API source's latest beside the one the loop judges, or the rollback base beside the
/// active config copies a pointer, not up to 1 MiB of keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot(Arc<Parts>);

#[derive(PartialEq, Eq)]
struct Parts {
    files: BTreeMap<String, Vec<u8>>,
    hash: ContentHash,
    /// Permission bits (`0o777` mask) of the keys whose mode is not [`DEFAULT_MODE`].
    modes: BTreeMap<String, u32>,
}

impl fmt::Debug for Snapshot {
    // Never print content: it may hold credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("keys", &self.0.files.keys().collect::<Vec<_>>())
            .field("hash", &self.0.hash)
            .field("modes", &self.0.modes)
            .finish()
    }
}

impl Snapshot {
    pub fn new(files: BTreeMap<String, Vec<u8>>) -> Snapshot {
        Snapshot(Arc::new(Parts::new(files)))
    }

    /// A snapshot whose keys have these permission bits; [`DEFAULT_MODE`] entries are dropped.
    pub fn with_modes(files: BTreeMap<String, Vec<u8>>, modes: BTreeMap<String, u32>) -> Snapshot {
        let mut s = Parts::new(files);
        s.modes = modes
            .into_iter()
            .map(|(k, m)| (k, m & 0o777))
            .filter(|(k, m)| *m != DEFAULT_MODE && s.files.contains_key(k))
            .collect();
        Snapshot(Arc::new(s))
    }

    /// Every key with its bytes.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.0.files
    }

    /// The documented `sha256:` hash of the keys and their bytes.
    pub fn hash(&self) -> ContentHash {
        self.0.hash
    }

    /// Permission bits of the keys whose mode is not [`DEFAULT_MODE`].
    pub fn modes(&self) -> &BTreeMap<String, u32> {
        &self.0.modes
    }

    /// The keys and their bytes, taken out of the snapshot (copied only when a clone still shares
    /// them).
    pub(crate) fn into_files(self) -> BTreeMap<String, Vec<u8>> {
        Arc::try_unwrap(self.0).map_or_else(|shared| shared.files.clone(), |p| p.files)
    }

    /// The permission bits key `key` is promoted with.
    pub fn mode(&self, key: &str) -> u32 {
        self.0.modes.get(key).copied().unwrap_or(DEFAULT_MODE)
    }

    pub fn total_bytes(&self) -> u64 {
        self.0.files.values().map(|v| v.len() as u64).sum()
    }
}

impl Parts {
    fn new(files: BTreeMap<String, Vec<u8>>) -> Parts {
        let hash = ContentHash::of(files.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        Parts {
            files,
            hash,
            modes: BTreeMap::new(),
        }
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
        self.0.files.get(key).map(Vec::as_slice)
    }

    fn each(&self) -> Box<dyn Iterator<Item = (&str, &[u8])> + '_> {
        Box::new(self.0.files.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
    }

    fn count(&self) -> usize {
        self.0.files.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clone (the validator's, the API source's latest, the rollback base) is the same bytes, not
    /// a copy of them; taking the keys out of the last one copies nothing either.
    #[test]
    fn clones_share_the_bytes() {
        let s = Snapshot::with_modes(
            BTreeMap::from([("config.yaml".to_owned(), vec![7u8; 1 << 20])]),
            BTreeMap::from([("config.yaml".to_owned(), 0o600)]),
        );
        let at = s.files()["config.yaml"].as_ptr();
        let c = s.clone();
        assert_eq!(c.files()["config.yaml"].as_ptr(), at);
        assert_eq!((c.hash(), c.mode("config.yaml")), (s.hash(), 0o600));
        assert_eq!(c, s);
        // Still shared: the keys are copied out, the snapshot kept intact.
        let out = c.into_files();
        assert_ne!(out["config.yaml"].as_ptr(), at);
        assert_eq!(s.files()["config.yaml"].as_ptr(), at);
        // The last one: moved out.
        assert_eq!(s.into_files()["config.yaml"].as_ptr(), at);
    }
}
