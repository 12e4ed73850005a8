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
/// The most keys a config may have. The API server bounds a ConfigMap's values (1 MiB) but not how many
/// keys share them; each key costs memory of its own (its name, its entry, its file and link in the
/// promoted dir), so this bound is what keeps a config of empty keys within the sidecar's memory limit.
/// Real ConfigMaps hold a few hundred at most.
pub const MAX_KEYS: usize = 8192;
/// How often a read is retried when the kubelet swapped `..data` underneath it.
const SWAP_RETRIES: usize = 8;
pub const DATA_LINK: &str = "..data";

/// `sha256:<hex>` over the documented encoding; `hmac-sha256:<hex>` once [`seal`] was called.
///
/// The bytes are always the plain digest, so comparisons, de-duplication and the reload-owed marker
/// (in the promoted dir, beside the content itself) work alike; only the text form is sealed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash(pub [u8; 32]);

/// The process's key for sealed hashes, set once at start-up when the content is a Secret.
static SEAL: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();

/// From now on every hash this process prints is `hmac-sha256:` under `key`, never the plain
/// `sha256:` of the content: a Secret's plain hash can be brute-forced when its value is short.
/// Returns false when another key was already set (the first one stays).
pub fn seal(key: [u8; 32]) -> bool {
    SEAL.set(key).is_ok() || SEAL.get() == Some(&key)
}

/// Whether printed hashes are sealed.
pub fn sealed() -> bool {
    SEAL.get().is_some()
}

/// HMAC-SHA256 (RFC 2104) of `msg` under a 32-byte key.
pub fn hmac_sha256(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    let (mut ipad, mut opad) = ([0x36u8; 64], [0x5cu8; 64]);
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .into()
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match SEAL.get() {
            Some(key) => {
                f.write_str("hmac-sha256:")?;
                write_hex(f, &hmac_sha256(key, &self.0))
            }
            None => fmt::Display::fmt(&self.plain(), f),
        }
    }
}

/// The plain `sha256:` text of a hash, for files beside the content (never for output).
pub struct Plain<'a>(&'a ContentHash);

impl fmt::Display for Plain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        write_hex(f, &self.0.0)
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl ContentHash {
    /// The first 12 hex digits of the printed form, for log lines.
    pub fn short(&self) -> String {
        let text = self.to_string();
        let hex = text.split_once(':').map_or(text.as_str(), |(_, h)| h);
        hex[..12].to_owned()
    }

    /// The plain `sha256:` form even when sealed: only for the promoted dir, which holds the
    /// content itself.
    pub fn plain(&self) -> Plain<'_> {
        Plain(self)
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

/// The mode a key file has when nothing else is known: the kubelet's `defaultMode` default.
pub const DEFAULT_MODE: u32 = 0o644;

/// One config version: every key with its bytes, and the modes that differ from [`DEFAULT_MODE`].
///
/// Modes are not part of the hash: a ConfigMap does not carry them (the pod's `defaultMode` and
/// `items[].mode` do), and `confgate check` must print the volume's hash for a manifest.
///
/// The fields are private so the hash always matches the keys: a snapshot is made only by
/// [`Snapshot::new`] or [`Snapshot::with_modes`] and read through its accessors.
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
    pub fn into_files(self) -> BTreeMap<String, Vec<u8>> {
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
///
/// A kubelet volume is read through the directory `..data` names, and `..data` is resolved again once
/// the read is done: the kubelet removes the old directory (depth-first) only after swapping `..data`
/// away from it, and never swaps back to a name it used, so an unchanged `..data` proves nothing was
/// removed under the read. A read that raced a swap, or saw anything vanish, starts again, at most
/// `SWAP_RETRIES` times; a volume still changing after that is `Broken`, never a partial snapshot.
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
                let base = match resolve_data_dir(dir, name) {
                    Ok(base) => base,
                    Err(Problem::Gone) => match dangling(dir, &target, name) {
                        Some(why) => return Observed::Broken(why),
                        None => continue,
                    },
                    Err(Problem::Bad(why)) => return Observed::Broken(why),
                };
                match read_tree(&base, &base) {
                    Ok(tree) => {
                        if std::fs::read_link(dir.join(DATA_LINK)).ok().as_deref()
                            != Some(target.as_path())
                        {
                            tracing::debug!(dir = %dir.display(), "..data moved during the read; reading again");
                            continue;
                        }
                        return finish(tree, dir);
                    }
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
                    // A kubelet writing its first payload: the plain read may hold half of it.
                    Ok(_) if std::fs::symlink_metadata(dir.join(DATA_LINK)).is_ok() => continue,
                    Ok(tree) => return finish(tree, dir),
                    Err(Problem::Gone) => continue,
                    Err(Problem::Bad(why)) => return Observed::Broken(why),
                }
            }
            Err(e) => {
                return Observed::Broken(format!("cannot read {}/..data: {e}", dir.display()));
            }
        }
    }
    tracing::warn!(dir = %dir.display(), attempts = SWAP_RETRIES, "volume changing too fast to read whole");
    Observed::Broken(format!(
        "volume changing too fast: {} changed under each of {SWAP_RETRIES} reads",
        dir.display()
    ))
}

/// The directory `..data` names, fully resolved, which must be a directory inside `dir`: a `..data`
/// pointing at a link that leads out of the volume (`..data -> ..x -> /outside`) is refused.
fn resolve_data_dir(dir: &Path, name: &str) -> Result<PathBuf, Problem> {
    let base = dir.join(name);
    let real = std::fs::canonicalize(&base).map_err(|e| Problem::from((base.as_path(), e)))?;
    let top = std::fs::canonicalize(dir).map_err(|e| Problem::from((dir, e)))?;
    if real == top || !real.starts_with(&top) {
        return Err(Problem::Bad(format!(
            "{}/..data resolves to {}, outside the watched directory",
            dir.display(),
            real.display()
        )));
    }
    match std::fs::metadata(&real) {
        Ok(m) if m.is_dir() => Ok(real),
        Ok(_) => Err(Problem::Bad(format!(
            "{}/..data points to {name}, which is not a directory",
            dir.display()
        ))),
        Err(e) => Err(Problem::from((real.as_path(), e))),
    }
}

/// Why `..data` points nowhere, when it still names `name` and nothing is there; `None` when it has
/// moved (a read racing a swap). The kubelet removes a timestamped directory only after `..data` has left
/// it and never swaps back, so an unmoved `..data` naming nothing is broken: retrying cannot help.
fn dangling(dir: &Path, target: &Path, name: &str) -> Option<String> {
    if std::fs::read_link(dir.join(DATA_LINK)).ok().as_deref() != Some(target) {
        return None;
    }
    let entry = dir.join(name);
    match std::fs::metadata(&entry) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        _ => return None,
    }
    let what = match std::fs::symlink_metadata(&entry) {
        Ok(_) => "is a link to nothing",
        Err(_) => "does not exist",
    };
    Some(format!(
        "{}/..data points nowhere: {name} {what}",
        dir.display()
    ))
}

/// A kubelet timestamped directory name: `..` then a single path component.
fn is_timestamp_dir(name: &str) -> bool {
    name.starts_with("..") && name.len() > 2 && !name.contains('/') && name != DATA_LINK
}

fn finish((files, modes): Tree, dir: &Path) -> Observed {
    if files.is_empty() {
        Observed::Missing(format!(
            "{} holds no keys (the ConfigMap is absent, empty or was deleted)",
            dir.display()
        ))
    } else {
        Observed::Config(Snapshot::with_modes(files, modes))
    }
}

/// Keys with their bytes, and keys with their permission bits.
type Tree = (BTreeMap<String, Vec<u8>>, BTreeMap<String, u32>);

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
fn read_tree(root: &Path, top: &Path) -> Result<Tree, Problem> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
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
            if files.len() == MAX_KEYS {
                return Err(Problem::Bad(too_many_keys()));
            }
            let mode = meta.permissions().mode() & 0o777;
            if mode != DEFAULT_MODE {
                modes.insert(key.clone(), mode);
            }
            files.insert(key, bytes);
        }
    }
    Ok((files, modes))
}

/// Why a config with more than [`MAX_KEYS`] keys is refused.
pub fn too_many_keys() -> String {
    format!("the config has more than {MAX_KEYS} keys; at most {MAX_KEYS} are judged")
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
    fn hmac_is_rfc_2104() {
        // python3 -c "import hmac,hashlib;print(hmac.new(bytes([0x0b]*32),b'Hi There',hashlib.sha256).hexdigest())"
        let mac = hmac_sha256(&[0x0b; 32], b"Hi There");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
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
    fn dangling_data_link_is_broken_at_once_and_named() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, ts) = (tmp.path(), "..2024_01_01_00_00_00.1");
        let why = |what: &str| {
            Observed::Broken(format!(
                "{}/..data points nowhere: {ts} {what}",
                dir.display()
            ))
        };
        std::fs::write(dir.join("version"), "1.0.0").unwrap();
        std::os::unix::fs::symlink(ts, dir.join("..data")).unwrap();
        assert_eq!(read(dir), why("does not exist"));
        // A timestamped name that is itself a link to nothing.
        std::os::unix::fs::symlink("..gone", dir.join(ts)).unwrap();
        assert_eq!(read(dir), why("is a link to nothing"));
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

    #[test]
    fn data_escaping_in_two_hops_is_broken() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("version"), "1.0.0").unwrap();
        let dir = tmp.path().join("cfg");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("..x")).unwrap();
        std::os::unix::fs::symlink("..x", dir.join("..data")).unwrap();
        match read(&dir) {
            Observed::Broken(why) => {
                assert!(why.contains("outside the watched directory"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        // One hop that stays inside is how a kubelet volume looks.
        std::fs::remove_file(dir.join("..x")).unwrap();
        std::fs::create_dir(dir.join("..x")).unwrap();
        std::fs::write(dir.join("..x/version"), "1.0.0").unwrap();
        assert!(matches!(read(&dir), Observed::Config(_)));
    }

    #[test]
    fn modes_other_than_the_default_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        for (k, m) in [("run.sh", 0o755), ("secret", 0o400), ("plain", 0o644)] {
            std::fs::write(tmp.path().join(k), "x").unwrap();
            std::fs::set_permissions(tmp.path().join(k), std::fs::Permissions::from_mode(m))
                .unwrap();
        }
        let Observed::Config(s) = read(tmp.path()) else {
            panic!()
        };
        assert_eq!(s.mode("run.sh"), 0o755);
        assert_eq!(s.mode("secret"), 0o400);
        assert_eq!(s.mode("plain"), DEFAULT_MODE);
        assert_eq!(s.modes.len(), 2, "{:?}", s.modes);
        // Modes are not content: the hash is the same as for the bytes alone.
        assert_eq!(s.hash, Snapshot::new(s.files.clone()).hash);
    }
}
