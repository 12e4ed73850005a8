//! Volumes written as the kubelet's AtomicWriter writes them, and readers of the kubelet layout.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A directory written the way the kubelet's AtomicWriter writes a ConfigMap volume
/// (kubernetes `pkg/volume/util/atomic_writer.go`): new timestamped dir (0755) with the files (0644),
/// `..data_tmp` link, rename over `..data`, links for new top-level keys, unlink vanished keys, remove
/// the old dir. Unlike the kubelet it swaps even when nothing changed; [`kubelet_write`] does not.
#[derive(Debug, Clone)]
pub struct Volume {
    pub dir: PathBuf,
}

impl Volume {
    pub fn new(dir: impl Into<PathBuf>) -> Volume {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).expect("create volume dir");
        Volume { dir }
    }

    /// One update with `files` as the complete new payload. Returns the instant just before the
    /// `..data` rename, the switch watchers react to. Taken before rather than after: the rename wakes
    /// the watcher, which may preempt this thread before it reads the clock again, and a latency
    /// measured from a late clock reading would come out too small (even zero).
    pub fn write(&self, files: &[(&str, &[u8])]) -> io::Result<Instant> {
        self.write_with(files, |_| Ok(()))
    }

    /// [`Volume::write`], with `extra` run on the new timestamped dir before the swap: for entries a
    /// ConfigMap cannot hold (symlinks, FIFOs) that a hostile or broken writer could put there.
    pub fn write_with(
        &self,
        files: &[(&str, &[u8])],
        extra: impl FnOnce(&Path) -> io::Result<()>,
    ) -> io::Result<Instant> {
        self.write_inner(files, extra, None)
    }

    /// [`Volume::write`], removing the old timestamped dir as the kubelet does (`os.RemoveAll`, after the
    /// swap, children before their dir) with `pause` after each removal: a slow disk or a busy node, so
    /// that readers overlap the removal.
    pub fn write_removing_slowly(
        &self,
        files: &[(&str, &[u8])],
        pause: std::time::Duration,
    ) -> io::Result<Instant> {
        self.write_inner(files, |_| Ok(()), Some(pause))
    }

    fn write_inner(
        &self,
        files: &[(&str, &[u8])],
        extra: impl FnOnce(&Path) -> io::Result<()>,
        slow: Option<std::time::Duration>,
    ) -> io::Result<Instant> {
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let old_keys = old
            .as_ref()
            .map(|o| top_level(&self.dir.join(o)))
            .unwrap_or_default();
        let prefix = jiff::Timestamp::now()
            .strftime("..%Y_%m_%d_%H_%M_%S.")
            .to_string();
        let ts = loop {
            let name = format!("{prefix}{}", fastrand::u32(..));
            match std::fs::create_dir(self.dir.join(&name)) {
                Ok(()) => break name,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        let ts_path = self.dir.join(&ts);
        std::fs::set_permissions(&ts_path, std::fs::Permissions::from_mode(0o755))?;
        for (key, bytes) in files {
            let p = ts_path.join(key);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, bytes)?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))?;
        }
        extra(&ts_path)?;
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&ts, &tmp)?;
        let swapped = Instant::now();
        std::fs::rename(&tmp, self.dir.join("..data"))?;
        let new_keys: BTreeSet<String> = files
            .iter()
            .map(|(k, _)| k.split('/').next().unwrap_or(k).to_owned())
            .collect();
        for key in &new_keys {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(key), &link)?;
            }
        }
        for key in old_keys.difference(&new_keys) {
            let _ = std::fs::remove_file(self.dir.join(key));
        }
        if let Some(old) = old {
            match slow {
                None => std::fs::remove_dir_all(self.dir.join(old))?,
                Some(pause) => remove_depth_first(&self.dir.join(old), pause)?,
            }
        }
        Ok(swapped)
    }

    /// Whether the current payload is exactly `files`.
    fn holds(&self, files: &[(&str, &[u8])]) -> bool {
        let Ok(current) = std::fs::read_link(self.dir.join("..data")) else {
            return false;
        };
        let current = self.dir.join(current);
        top_level(&current).len() == files.len()
            && files
                .iter()
                .all(|(k, v)| std::fs::read(current.join(k)).ok().as_deref() == Some(*v))
    }
}

/// Writes `files` as the complete new payload of the kubelet volume at `dir`. Like the kubelet, an
/// unchanged payload writes nothing.
pub fn kubelet_write(dir: &Path, files: &[(&str, &[u8])]) {
    let vol = Volume::new(dir);
    if !vol.holds(files) {
        vol.write(files).expect("volume update");
    }
}

/// A volume holding one key `version`.
pub fn write_version(dir: &Path, version: &str) {
    kubelet_write(dir, &[("version", version.as_bytes())]);
}

/// The downward-API annotations file, as the kubelet formats it, written through the same AtomicWriter.
pub fn write_annotations(dir: &Path, pairs: &[(&str, &str)]) {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let text = confgate::annotations::format(&map);
    kubelet_write(dir, &[("annotations", text.as_bytes())]);
}

/// Reads every key of a kubelet-layout dir through one resolution of `..data`.
pub fn read_promoted(dir: &Path) -> Option<BTreeMap<String, String>> {
    let ts = std::fs::read_link(dir.join("..data")).ok()?;
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir.join(ts)).ok()?.flatten() {
        // A `..` name is the writer's own (confgate's record of the variant), as at the top.
        if e.file_name().to_string_lossy().starts_with("..") {
            continue;
        }
        let v = std::fs::read_to_string(e.path()).ok()?;
        out.insert(e.file_name().to_string_lossy().into_owned(), v);
    }
    Some(out)
}

/// Leftovers of a writer in a kubelet-layout dir: names starting with `..` other than `..data` and the
/// dir it points at. Panics when the dir or its `..data` link cannot be read.
pub fn leftovers(dir: &Path) -> Vec<String> {
    let live = std::fs::read_link(dir.join("..data")).expect("read ..data");
    std::fs::read_dir(dir)
        .expect("read the dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("..") && n != "..data" && Path::new(n) != live)
        .collect()
}

/// Removes `path` children first, pausing after each removal.
fn remove_depth_first(path: &Path, pause: std::time::Duration) -> io::Result<()> {
    for e in std::fs::read_dir(path)?.flatten() {
        if e.file_type()?.is_dir() {
            remove_depth_first(&e.path(), pause)?;
        } else {
            std::fs::remove_file(e.path())?;
            std::thread::sleep(pause);
        }
    }
    std::fs::remove_dir(path)?;
    std::thread::sleep(pause);
    Ok(())
}

fn top_level(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with(".."))
                .collect()
        })
        .unwrap_or_default()
}
