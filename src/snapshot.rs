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
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The ConfigMap size limit (`core.MaxSecretSize`): the sum of all values.
pub const MAX_BYTES: u64 = 1024 * 1024;
/// Nested item paths deeper than this are not a ConfigMap.
const MAX_DEPTH: usize = 16;
/// How often a read is retried when the kubelet swapped `..data` underneath it.
const SWAP_RETRIES: usize = 8;
pub const DATA_LINK: &str = "..data";

/// `sha256:<hex>` over the documented encoding.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash(pub [u8; 32]);

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl ContentHash {
    /// The first 12 hex digits, for log lines.
    pub fn short(&self) -> String {
        self.to_string()[7..19].to_owned()
    }

    /// Hashes keys and values in the documented encoding; the order they come in does not matter.
    ///
    /// ```
    /// use confgate::snapshot::ContentHash;
    /// let a = ContentHash::of([("a", b"1".as_slice()), ("b", b"2".as_slice())]);
    /// let b = ContentHash::of([("b", b"2".as_slice()), ("a", b"1".as_slice())]);
    /// assert_eq!(a, b);
    /// assert!(a.to_string().starts_with("sha256:"));
    /// ```
    pub fn of<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> ContentHash {
        let mut sorted: Vec<(&str, &[u8])> = files.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut h = Sha256::new();
        for (k, v) in sorted {
            h.update((k.len() as u64).to_be_bytes());
            h.update(k.as_bytes());
            h.update((v.len() as u64).to_be_bytes());
            h.update(v);
        }
        ContentHash(h.finalize().into())
    }
}

/// One config version: every key with its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub files: BTreeMap<String, Vec<u8>>,
    pub hash: ContentHash,
}

impl fmt::Debug for Snapshot {
    // Never print content: it may hold credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("keys", &self.files.keys().collect::<Vec<_>>())
            .field("hash", &self.hash)
            .finish()
    }
}

impl Snapshot {
    pub fn new(files: BTreeMap<String, Vec<u8>>) -> Snapshot {
        let hash = ContentHash::of(files.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        Snapshot { files, hash }
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|v| v.len() as u64).sum()
    }
}

/// What a read of the watched directory found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// A config was there.
    Config(Snapshot),
    /// No config: no directory, an empty volume, or a deleted ConfigMap.
    Missing(String),
    /// Something is there but cannot be a ConfigMap; the reason names the key and the problem.
    Broken(String),
}

impl Observed {
    /// Identity for de-duplication: a config's hash, or the problem text.
    pub fn same_as(&self, other: &Observed) -> bool {
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

/// Reads the directory as one snapshot.
pub fn read(dir: &Path) -> Observed {
    for _ in 0..SWAP_RETRIES {
        match std::fs::read_link(dir.join(DATA_LINK)) {
            Ok(target) => {
                let Some(name) = target.to_str().filter(|n| is_timestamp_dir(n)) else {
                    return Observed::Broken(format!(
                        "{}/..data points to {}, not to a timestamped directory beside it",
                        dir.display(),
                        target.display()
                    ));
                };
                let base = dir.join(name);
                match read_tree(&base, &base) {
                    Ok(files) => return finish(files, dir),
                    // The kubelet removed the directory after a newer swap: resolve `..data` again.
                    Err(Problem::Gone) => continue,
                    Err(Problem::Bad(why)) => return Observed::Broken(why),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !dir.exists() {
                    return Observed::Missing(format!(
                        "the watched directory {} does not exist (is the ConfigMap volume mounted?)",
                        dir.display()
                    ));
                }
                match read_tree(dir, dir) {
                    Ok(files) => return finish(files, dir),
                    Err(Problem::Gone) => continue,
                    Err(Problem::Bad(why)) => return Observed::Broken(why),
                }
            }
            Err(e) => {
                return Observed::Broken(format!("cannot read {}/..data: {e}", dir.display()));
            }
        }
    }
    Observed::Broken(format!(
        "{} changed {SWAP_RETRIES} times while being read",
        dir.display()
    ))
}

/// A kubelet timestamped directory name: `..` then a single path component.
fn is_timestamp_dir(name: &str) -> bool {
    name.starts_with("..") && name.len() > 2 && !name.contains('/') && name != DATA_LINK
}

fn finish(files: BTreeMap<String, Vec<u8>>, dir: &Path) -> Observed {
    if files.is_empty() {
        Observed::Missing(format!(
            "{} holds no keys (the ConfigMap is absent, empty or was deleted)",
            dir.display()
        ))
    } else {
        Observed::Config(Snapshot::new(files))
    }
}

enum Problem {
    /// A path vanished mid-read.
    Gone,
    Bad(String),
}

impl From<(&Path, io::Error)> for Problem {
    fn from((path, e): (&Path, io::Error)) -> Problem {
        if e.kind() == io::ErrorKind::NotFound {
            Problem::Gone
        } else {
            Problem::Bad(format!("cannot read {}: {e}", path.display()))
        }
    }
}

/// Reads every regular file under `root`, keyed by its path relative to `root`. Names starting with
/// `..` are the writer's own and are skipped.
fn read_tree(root: &Path, top: &Path) -> Result<BTreeMap<String, Vec<u8>>, Problem> {
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| Problem::from((dir.as_path(), e)))?;
        for entry in entries {
            let entry = entry.map_err(|e| Problem::from((dir.as_path(), e)))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(Problem::Bad(format!(
                    "{} holds a file name that is not UTF-8",
                    dir.display()
                )));
            };
            if name.starts_with("..") {
                continue;
            }
            let path = entry.path();
            let key = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let meta =
                std::fs::symlink_metadata(&path).map_err(|e| Problem::from((path.as_path(), e)))?;
            let ft = meta.file_type();
            let real = if ft.is_symlink() {
                resolve_inside(&path, top, &key)?
            } else {
                path.clone()
            };
            let meta = std::fs::metadata(&real).map_err(|e| Problem::from((real.as_path(), e)))?;
            if meta.is_dir() {
                if depth + 1 >= MAX_DEPTH {
                    return Err(Problem::Bad(format!(
                        "key {key} is nested deeper than {MAX_DEPTH} levels"
                    )));
                }
                if !ft.is_symlink() {
                    stack.push((path, depth + 1));
                }
                continue;
            }
            if !meta.is_file() {
                return Err(Problem::Bad(format!(
                    "key {key} is not a regular file (a FIFO, socket or device cannot be a ConfigMap key)"
                )));
            }
            let budget = MAX_BYTES.saturating_sub(total);
            let bytes =
                read_limited(&real, budget).map_err(|e| Problem::from((real.as_path(), e)))?;
            total += bytes.len() as u64;
            if total > MAX_BYTES {
                return Err(Problem::Bad(format!(
                    "the config is over the ConfigMap size limit of {MAX_BYTES} bytes (the limit was passed at key {key})"
                )));
            }
            files.insert(key, bytes);
        }
    }
    Ok(files)
}

/// Follows a symlink only when it stays inside the watched directory.
fn resolve_inside(path: &Path, top: &Path, key: &str) -> Result<PathBuf, Problem> {
    let real = std::fs::canonicalize(path).map_err(|e| {
        // A link that is still there with nothing behind it is broken, not a read racing a swap:
        // retrying cannot help, and "changed while being read" would send the reader the wrong way.
        if e.kind() == io::ErrorKind::NotFound && std::fs::symlink_metadata(path).is_ok() {
            let target = std::fs::read_link(path).unwrap_or_default();
            Problem::Bad(format!(
                "key {key} is a symlink to a missing target ({})",
                target.display()
            ))
        } else {
            Problem::from((path, e))
        }
    })?;
    let top = std::fs::canonicalize(top).map_err(|e| Problem::from((top, e)))?;
    if real.starts_with(&top) {
        Ok(real)
    } else {
        Err(Problem::Bad(format!(
            "key {key} is a symlink to {}, outside the watched directory",
            real.display()
        )))
    }
}

/// Reads at most `budget + 1` bytes, so an oversized file is detected without being loaded whole.
fn read_limited(path: &Path, budget: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: a FIFO swapped in after the type check must not block the decision loop.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let hint = f.metadata().map(|m| m.len()).unwrap_or(0).min(budget + 1);
    let mut buf = Vec::with_capacity(hint as usize);
    f.take(budget + 1).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hash_is_documented_encoding() {
        // Computed independently: printf '\0\0\0\0\0\0\0\x01a\0\0\0\0\0\0\0\x01b' | sha256sum
        let h = ContentHash::of([("a", b"b".as_slice())]);
        let mut manual = Sha256::new();
        manual.update([0, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 0, 0, 0, 0, 0, 1, b'b']);
        assert_eq!(h.0, <[u8; 32]>::from(manual.finalize()));
        assert!(h.to_string().starts_with("sha256:") && h.to_string().len() == 71);
    }

    #[test]
    fn hash_separates_keys_from_values() {
        let a = ContentHash::of([("ab", b"c".as_slice())]);
        let b = ContentHash::of([("a", b"bc".as_slice())]);
        assert_ne!(a, b);
    }

    proptest! {
        #[test]
        fn hash_ignores_order(mut pairs in proptest::collection::vec(("[a-z.]{1,6}", proptest::collection::vec(any::<u8>(), 0..16)), 0..8)) {
            pairs.sort();
            pairs.dedup_by(|a, b| a.0 == b.0);
            let fwd = ContentHash::of(pairs.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
            let rev = ContentHash::of(pairs.iter().rev().map(|(k, v)| (k.as_str(), v.as_slice())));
            prop_assert_eq!(fwd, rev);
        }
    }

    #[test]
    fn plain_directory_and_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cfg");
        assert!(matches!(read(&dir), Observed::Missing(m) if m.contains("does not exist")));
        std::fs::create_dir(&dir).unwrap();
        assert!(matches!(read(&dir), Observed::Missing(m) if m.contains("holds no keys")));
        std::fs::write(dir.join("version"), "1.0.0").unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/x"), "y").unwrap();
        let Observed::Config(s) = read(&dir) else {
            panic!()
        };
        assert_eq!(s.files.keys().collect::<Vec<_>>(), ["sub/x", "version"]);
    }

    #[test]
    fn symlink_outside_is_broken_and_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cfg");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(tmp.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), dir.join("k")).unwrap();
        match read(&dir) {
            Observed::Broken(why) => assert!(why.contains("key k is a symlink"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dangling_symlink_is_broken_and_named() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("version"), "1.0.0").unwrap();
        std::os::unix::fs::symlink("nowhere", tmp.path().join("k")).unwrap();
        match read(tmp.path()) {
            Observed::Broken(why) => {
                assert_eq!(why, "key k is a symlink to a missing target (nowhere)")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn oversized_is_broken_without_loading_it_all() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a"), vec![b'x'; MAX_BYTES as usize]).unwrap();
        assert!(matches!(read(tmp.path()), Observed::Config(_)));
        std::fs::write(tmp.path().join("b"), "y").unwrap();
        match read(tmp.path()) {
            Observed::Broken(why) => assert!(why.contains("size limit of 1048576"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn fifo_is_refused_not_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&tmp.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        match read(tmp.path()) {
            Observed::Broken(why) => assert!(why.contains("not a regular file"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
