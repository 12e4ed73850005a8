//! Promotion: the only writer of the promoted dir, in the kubelet's own layout.
//!
//! Order of a promotion (as the kubelet's AtomicWriter): write every key into a new timestamped dir,
//! link `..data_tmp` to it, `rename` it over `..data` (the one atomic switch), add links for new keys,
//! unlink vanished keys, remove the old dir. A crash before the rename leaves the old config whole;
//! after it, the new one. [`Promoter::open`] cleans whatever an interrupted promotion left behind.
//!
//! Files are not fsynced: the dir is a pod's `emptyDir`, and a process crash cannot lose page-cache
//! writes; only a node crash could, and that ends the pod and its `emptyDir` anyway.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::snapshot::{self, DATA_LINK, Observed, Snapshot};

const DATA_TMP: &str = "..data_tmp";

/// Why a promotion could not be made. The previous config is still whole in every case.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} exists and is not a directory")]
    NotADir { path: PathBuf },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Writes snapshots into the promoted dir.
#[derive(Debug)]
pub struct Promoter {
    dir: PathBuf,
}

impl Promoter {
    /// Opens (creating if needed) the promoted dir, finishes or discards an interrupted promotion, and
    /// returns what it holds now.
    pub fn open(dir: &Path) -> Result<(Promoter, Observed), Error> {
        match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(Error::NotADir {
                    path: dir.to_path_buf(),
                });
            }
            Ok(_) => {}
            Err(_) => std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(io_err("create", dir))?,
        }
        let p = Promoter {
            dir: dir.to_path_buf(),
        };
        p.clean()?;
        Ok((p, snapshot::read(dir)))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes leftovers: `..data_tmp`, timestamped dirs `..data` does not point at, links to vanished keys,
    /// and adds links that a crash after the swap left missing.
    fn clean(&self) -> Result<(), Error> {
        let current = std::fs::read_link(self.dir.join(DATA_LINK))
            .ok()
            .and_then(|t| t.to_str().map(str::to_owned));
        let keys = match &current {
            Some(ts) => top_level_names(&self.dir.join(ts)),
            None => BTreeSet::new(),
        };
        let entries = std::fs::read_dir(&self.dir).map_err(io_err("list", &self.dir))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name == DATA_LINK || Some(&name) == current.as_ref() {
                continue;
            }
            let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            if name.starts_with("..") {
                if is_link || name == DATA_TMP {
                    remove_file(&path)?;
                } else {
                    remove_dir_all(&path)?;
                }
                continue;
            }
            // Only the links this writer makes are touched: a file someone else put here stays.
            if is_link && is_key_link(&path, &name) && !keys.contains(&name) {
                remove_file(&path)?;
            }
        }
        for key in &keys {
            self.link(key)?;
        }
        Ok(())
    }

    fn link(&self, top: &str) -> Result<(), Error> {
        let link = self.dir.join(top);
        let target = Path::new(DATA_LINK).join(top);
        match std::fs::read_link(&link) {
            Ok(t) if t == target => Ok(()),
            Ok(_) => {
                remove_file(&link)?;
                std::os::unix::fs::symlink(&target, &link).map_err(io_err("link", &link))
            }
            Err(_) if std::fs::symlink_metadata(&link).is_ok() => Ok(()),
            Err(_) => std::os::unix::fs::symlink(&target, &link).map_err(io_err("link", &link)),
        }
    }

    /// Promotes `snap`. On error the previous config is still in place and whole, and the new
    /// timestamped dir (if any) has been removed.
    pub fn promote(&self, snap: &Snapshot) -> Result<(), Error> {
        let old = std::fs::read_link(self.dir.join(DATA_LINK)).ok();
        let old_keys = match &old {
            Some(ts) => top_level_names(&self.dir.join(ts)),
            None => BTreeSet::new(),
        };
        let ts = self.new_timestamp_dir()?;
        let ts_path = self.dir.join(&ts);
        if let Err(e) = self.fill(&ts_path, snap).and_then(|()| self.swap(&ts)) {
            let _ = std::fs::remove_dir_all(&ts_path);
            let _ = std::fs::remove_file(self.dir.join(DATA_TMP));
            return Err(e);
        }
        // The new config is live: a failure from here on must not be reported as "previous config kept".
        // What is left undone (a link, an old dir) is logged, and redone by the next promotion or `open`.
        if let Err(e) = self.tidy(snap, &old_keys, old.as_deref()) {
            tracing::warn!(error = %e, "promoted, but tidying the promoted dir failed");
        }
        Ok(())
    }

    /// Links new keys, unlinks vanished ones, removes the previous timestamped dir.
    fn tidy(
        &self,
        snap: &Snapshot,
        old_keys: &BTreeSet<String>,
        old: Option<&Path>,
    ) -> Result<(), Error> {
        let new_keys: BTreeSet<String> = snap
            .files
            .keys()
            .map(|k| k.split('/').next().unwrap_or(k).to_owned())
            .collect();
        for key in &new_keys {
            self.link(key)?;
        }
        for key in old_keys.difference(&new_keys) {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                remove_file(&link)?;
            }
        }
        if let Some(old) = old {
            remove_dir_all(&self.dir.join(old))?;
        }
        Ok(())
    }

    fn fill(&self, ts_path: &Path, snap: &Snapshot) -> Result<(), Error> {
        for (key, bytes) in &snap.files {
            let path = ts_path.join(key);
            if let Some(parent) = path.parent().filter(|p| *p != ts_path) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(parent)
                    .map_err(io_err("create", parent))?;
            }
            std::fs::write(&path, bytes).map_err(io_err("write", &path))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                .map_err(io_err("chmod", &path))?;
        }
        Ok(())
    }

    fn swap(&self, ts: &str) -> Result<(), Error> {
        let tmp = self.dir.join(DATA_TMP);
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(ts, &tmp).map_err(io_err("link", &tmp))?;
        let data = self.dir.join(DATA_LINK);
        std::fs::rename(&tmp, &data).map_err(io_err("rename over", &data))
    }

    /// `..YYYY_MM_DD_HH_MM_SS.<random u32>`, as the kubelet names them.
    fn new_timestamp_dir(&self) -> Result<String, Error> {
        let now = jiff::Timestamp::now()
            .strftime("..%Y_%m_%d_%H_%M_%S.")
            .to_string();
        loop {
            let name = format!("{now}{}", fastrand::u32(..));
            let path = self.dir.join(&name);
            match std::fs::DirBuilder::new().mode(0o755).create(&path) {
                Ok(()) => {
                    // The umask may have narrowed the mode; the component may run as another user.
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                        .map_err(io_err("chmod", &path))?;
                    return Ok(name);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("create", &path)(e)),
            }
        }
    }
}

fn is_key_link(path: &Path, name: &str) -> bool {
    std::fs::read_link(path).is_ok_and(|t| t == Path::new(DATA_LINK).join(name))
}

fn top_level_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with(".."))
                .collect()
        })
        .unwrap_or_default()
}

fn remove_file(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", path)(e)),
        _ => Ok(()),
    }
}

fn remove_dir_all(path: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn snap(pairs: &[(&str, &str)]) -> Snapshot {
        Snapshot::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn promotes_in_kubelet_layout_and_unlinks_removed_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, now) = Promoter::open(&dir).unwrap();
        assert!(matches!(now, Observed::Missing(_)));
        let a = snap(&[("version", "1.0.0"), ("extra.txt", "x")]);
        p.promote(&a).unwrap();
        assert_eq!(snapshot::read(&dir), Observed::Config(a));
        let listing = names(&dir);
        assert_eq!(listing.len(), 4, "{listing:?}");
        assert!(listing[0].starts_with("..20") && listing[1] == "..data");
        assert_eq!(
            std::fs::read_link(dir.join("extra.txt")).unwrap(),
            Path::new("..data/extra.txt")
        );
        let b = snap(&[("version", "1.1.0"), ("sub/deep", "y")]);
        p.promote(&b).unwrap();
        assert_eq!(snapshot::read(&dir), Observed::Config(b));
        let listing = names(&dir);
        assert_eq!(listing.len(), 4, "{listing:?}");
        assert!(listing.contains(&"sub".into()) && !listing.contains(&"extra.txt".into()));
        assert_eq!(std::fs::read_to_string(dir.join("sub/deep")).unwrap(), "y");
        let ts = std::fs::read_link(dir.join("..data")).unwrap();
        let mode = std::fs::metadata(dir.join(ts))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn open_cleans_every_kind_of_leftover() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        let a = snap(&[("version", "1.0.0"), ("gone", "x")]);
        p.promote(&a).unwrap();
        // What a crash at each step could leave: a filled dir never swapped in, a dangling tmp link,
        // a link to a key the live config no longer has, a missing link for a live key.
        std::fs::create_dir(dir.join("..2026_01_01_00_00_00.1")).unwrap();
        std::fs::write(dir.join("..2026_01_01_00_00_00.1/version"), "9.9.9").unwrap();
        std::os::unix::fs::symlink("..2026_01_01_00_00_00.1", dir.join("..data_tmp")).unwrap();
        std::os::unix::fs::symlink("..data/stale", dir.join("stale")).unwrap();
        std::fs::remove_file(dir.join("gone")).unwrap();
        std::fs::write(dir.join("not-ours"), "keep").unwrap();
        let (_, now) = Promoter::open(&dir).unwrap();
        assert_eq!(now, Observed::Config(a));
        let listing = names(&dir);
        assert_eq!(listing.len(), 5, "{listing:?}");
        assert!(listing.contains(&"gone".into()) && listing.contains(&"not-ours".into()));
        assert!(!listing.contains(&"stale".into()) && !listing.contains(&"..data_tmp".into()));
    }

    #[test]
    fn a_failed_write_leaves_the_previous_config_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        let a = snap(&[("version", "1.0.0")]);
        p.promote(&a).unwrap();
        // A key whose parent is a file cannot be written: the promotion fails midway.
        let bad = snap(&[("version", "2.0.0"), ("x", "1"), ("x/y", "2")]);
        assert!(p.promote(&bad).is_err());
        assert_eq!(snapshot::read(&dir), Observed::Config(a));
        assert_eq!(names(&dir).len(), 3, "{:?}", names(&dir));
    }

    #[test]
    fn refuses_a_file_as_the_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("file");
        std::fs::write(&f, "").unwrap();
        let err = Promoter::open(&f).unwrap_err().to_string();
        assert!(err.contains("is not a directory"), "{err}");
    }
}
