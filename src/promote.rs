//! Promotion: the only writer of the promoted dir, in the kubelet's own layout.
//!
//! Order of a promotion: write every key (with its mode) into a new timestamped dir, add links for new
//! top-level keys, link `..data_tmp` to it, `rename` it over `..data` (the one atomic switch), unlink
//! vanished keys, remove the old dir. Unlike the kubelet's AtomicWriter, the links come before the
//! switch: everything the new config needs exists before it goes live, so a full disk (or an inode
//! limit) fails the promotion with the previous config whole, never a live config with a key link
//! missing. A crash before the rename leaves the old config whole; after it, the new one.
//! What is left to tidy after the switch (the old dir, stale links) is retried by [`Promoter::tidy`],
//! every later promotion, and [`Promoter::open`].
//!
//! A promotion is two calls, so that the component can be told before the tidying: [`Promoter::switch`]
//! (write, link, switch: everything the new config needs) and [`Promoter::finish`] (unlink vanished
//! keys, remove the old dir). Between them the old dir and the links of vanished keys are still there,
//! as they are in a kubelet volume between its swap and its cleanup.
//!
//! "Reload owed" is a file in the promoted dir, [`RELOAD_OWED`], holding the plain `sha256:` of the promoted
//! config the component has not yet been told about. It is written before the switch, so a crash at any
//! point after it still owes the reload at the next start-up.
//!
//! What the component did with earlier configs is kept beside it, for a restart: [`APPLIED`] links the
//! dir of the last config it applied, and [`REJECTED`] lists the contents it refused (a handful of
//! hashes, each with the component's reason). Every marker is a `..` name, which no reader of the
//! kubelet's layout lists as a key, and each is replaced with one `rename`, so a crash leaves the old
//! marker or the new one, never half of one.
//!
//! Files are not fsynced: the dir is a pod's `emptyDir`, and a process crash cannot lose page-cache
//! writes; only a node crash could, and that ends the pod and its `emptyDir` anyway.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::snapshot::{self, ContentHash, DATA_LINK, Observed, Snapshot};

const DATA_TMP: &str = "..data_tmp";
/// The "reload owed" marker in the promoted dir; `..` keeps it out of every kubelet-layout reader.
pub const RELOAD_OWED: &str = "..confgate_reload_owed";
const RELOAD_OWED_TMP: &str = "..confgate_reload_owed_tmp";
/// A link to the timestamped dir of the last config the component applied, kept for a rollback.
pub const APPLIED: &str = "..confgate_applied";
const APPLIED_TMP: &str = "..confgate_applied_tmp";
/// The contents the component refused, newest last: one `sha256:HEX REASON` line each.
pub const REJECTED: &str = "..confgate_rejected";
const REJECTED_TMP: &str = "..confgate_rejected_tmp";
/// Bound on what is read of [`REJECTED`]: the gate keeps a handful of lines; anything past this is not
/// a file this writer made.
const REJECTED_READ_MAX: u64 = 16 << 10;
/// Bound on one reason kept in [`REJECTED`].
const REJECTED_REASON_MAX: usize = 512;

/// The record of contents the component refused, as read at start-up.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Each refused content with the component's reason, oldest first.
    pub entries: Vec<(ContentHash, String)>,
    /// Why part or all of the record was ignored (a damaged or unreadable file), if it was.
    pub ignored: Option<String>,
}

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
    #[error("no config the component applied is kept in {path}")]
    NoApplied { path: PathBuf },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// A promotion that went live through [`Promoter::switch`]; what [`Promoter::finish`] tidies.
#[derive(Debug)]
#[must_use = "the old config is still in the promoted dir: pass this to Promoter::finish"]
pub struct Switched {
    old_keys: BTreeSet<String>,
    new_keys: BTreeSet<String>,
}

/// Writes snapshots into the promoted dir.
#[derive(Debug)]
pub struct Promoter {
    dir: PathBuf,
    /// Set when tidying after a switch failed; cleared by a [`Promoter::tidy`] that finished.
    untidy: AtomicBool,
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
            untidy: AtomicBool::new(false),
        };
        p.clean()?;
        Ok((p, snapshot::read(dir)))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a promotion went live but left something to tidy (an old dir, a stale link): call
    /// [`Promoter::tidy`] until this is false. Every promotion tidies too.
    pub fn needs_tidy(&self) -> bool {
        self.untidy.load(Ordering::Relaxed)
    }

    /// Removes what earlier promotions left behind and adds any key link missing. The live config is
    /// never touched.
    pub fn tidy(&self) -> Result<(), Error> {
        let r = self.clean();
        self.untidy.store(r.is_err(), Ordering::Relaxed);
        if r.is_ok() {
            tracing::info!(dir = %self.dir.display(), "promoted dir tidied");
        }
        r
    }

    /// The hash of a promoted config whose reload is still owed (recorded by [`Promoter::switch`]
    /// and not yet cleared), as found at start-up.
    pub fn reload_owed(&self) -> Option<ContentHash> {
        let text = std::fs::read_to_string(self.dir.join(RELOAD_OWED)).ok()?;
        parse_hash(text.trim())
    }

    /// Records durably that the component is owed a reload for `sha`.
    pub fn mark_reload_owed(&self, sha: ContentHash) -> Result<(), Error> {
        let tmp = self.dir.join(RELOAD_OWED_TMP);
        std::fs::write(&tmp, format!("{}\n", sha.plain())).map_err(io_err("write", &tmp))?;
        let path = self.dir.join(RELOAD_OWED);
        std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))
    }

    /// Clears the owed reload once the component was told about `sha`. An owed reload for another
    /// (newer) config stays; `false` then.
    pub fn clear_reload_owed(&self, sha: ContentHash) -> Result<bool, Error> {
        match self.reload_owed() {
            Some(owed) if owed != sha => Ok(false),
            _ => remove_file(&self.dir.join(RELOAD_OWED)).map(|()| true),
        }
    }

    /// The contents the component refused, as recorded by [`Promoter::record_rejected`]. A damaged
    /// record is read as far as it makes sense: lines that are not a record are skipped and said so in
    /// [`Rejected::ignored`], never an error.
    pub fn rejected(&self) -> Rejected {
        use std::io::Read;
        let path = self.dir.join(REJECTED);
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(REJECTED_READ_MAX + 1).read_to_end(&mut bytes));
        match read {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Rejected::default(),
            Err(e) => {
                return Rejected {
                    entries: Vec::new(),
                    ignored: Some(format!("cannot read {}: {e}", path.display())),
                };
            }
        }
        let mut r = parse_rejected(&bytes[..bytes.len().min(REJECTED_READ_MAX as usize)]);
        if bytes.len() as u64 > REJECTED_READ_MAX {
            r.ignored = Some(format!(
                "{} is over {REJECTED_READ_MAX} bytes; read up to there",
                path.display()
            ));
        } else if let Some(why) = r.ignored.take() {
            r.ignored = Some(format!("{}: {why}", path.display()));
        }
        r
    }

    /// Replaces the record of refused contents with `entries` (oldest first), with one `rename`.
    pub fn record_rejected(&self, entries: &[(ContentHash, String)]) -> Result<(), Error> {
        let mut text = String::new();
        for (h, why) in entries {
            // The plain form: a sealed one (a Secret's) is keyed per process and would not be
            // recognised after a restart; this file sits beside the content itself anyway.
            text.push_str(&format!("{} {}\n", h.plain(), reason_line(why)));
        }
        let tmp = self.dir.join(REJECTED_TMP);
        std::fs::write(&tmp, text).map_err(io_err("write", &tmp))?;
        let path = self.dir.join(REJECTED);
        std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))
    }

    /// The config [`APPLIED`] names, read back at start-up, and since when (when the link was made).
    pub fn applied(&self) -> Option<(Observed, Option<jiff::Timestamp>)> {
        let ts = self.applied_dir()?;
        let since = std::fs::symlink_metadata(self.dir.join(APPLIED))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| jiff::Timestamp::try_from(t).ok());
        Some((snapshot::read(&self.dir.join(ts)), since))
    }

    /// The timestamped dir [`APPLIED`] names, when it is one that exists.
    fn applied_dir(&self) -> Option<String> {
        let t = std::fs::read_link(self.dir.join(APPLIED)).ok()?;
        let name = t.to_str()?.to_owned();
        (name.starts_with("..") && !name.contains('/') && self.dir.join(&name).is_dir())
            .then_some(name)
    }

    /// Records that the component applied what `..data` points at now: that dir is kept, for
    /// [`Promoter::roll_back`], when later promotions replace it. The dir it kept before goes.
    pub fn mark_applied(&self) -> Result<(), Error> {
        let data = self.dir.join(DATA_LINK);
        let ts = std::fs::read_link(&data).map_err(io_err("read", &data))?;
        let tmp = self.dir.join(APPLIED_TMP);
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&ts, &tmp).map_err(io_err("link", &tmp))?;
        let path = self.dir.join(APPLIED);
        std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))?;
        if let Err(e) = self.clean() {
            self.untidy.store(true, Ordering::Relaxed);
            tracing::warn!(error = %e, dir = %self.dir.display(), "tidying the promoted dir failed; will retry");
        }
        Ok(())
    }

    /// Puts the last applied config back in place with one `rename` of `..data`, as a promotion
    /// would (its key links first, then the switch, then the rejected dir and links removed), and
    /// returns what the dir holds now. Nothing is copied: the applied config's dir was kept.
    pub fn roll_back(&self) -> Result<Observed, Error> {
        let Some(ts) = self.applied_dir() else {
            return Err(Error::NoApplied {
                path: self.dir.clone(),
            });
        };
        let old = std::fs::read_link(self.dir.join(DATA_LINK)).ok();
        if old.as_deref().and_then(Path::to_str) != Some(ts.as_str()) {
            let old_keys = match &old {
                Some(o) => top_level_names(&self.dir.join(o)),
                None => BTreeSet::new(),
            };
            let keys = top_level_names(&self.dir.join(&ts));
            let mut linked = Vec::new();
            if let Err(e) = self
                .link_new(&keys, &mut linked)
                .and_then(|()| self.swap(&ts))
            {
                let _ = std::fs::remove_file(self.dir.join(DATA_TMP));
                for link in &linked {
                    let _ = std::fs::remove_file(link);
                }
                return Err(e);
            }
            let tidied = self
                .unlink_vanished(&old_keys, &keys)
                .and_then(|()| self.clean());
            if let Err(e) = &tidied {
                tracing::warn!(error = %e, dir = %self.dir.display(), "rolled back, but tidying the promoted dir failed; will retry");
            }
            self.untidy.store(tidied.is_err(), Ordering::Relaxed);
        }
        Ok(snapshot::read(&self.dir))
    }

    /// Removes leftovers: `..data_tmp`, timestamped dirs `..data` does not point at, links to vanished keys,
    /// and adds links that a crash after the swap left missing.
    fn clean(&self) -> Result<(), Error> {
        let current = std::fs::read_link(self.dir.join(DATA_LINK))
            .ok()
            .and_then(|t| t.to_str().map(str::to_owned));
        let applied = self.applied_dir();
        let keys = match &current {
            Some(ts) => top_level_names(&self.dir.join(ts)),
            None => BTreeSet::new(),
        };
        let entries = std::fs::read_dir(&self.dir).map_err(io_err("list", &self.dir))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name == DATA_LINK
                || name == RELOAD_OWED
                || name == APPLIED
                || name == REJECTED
                || Some(&name) == current.as_ref()
                || Some(&name) == applied.as_ref()
            {
                continue;
            }
            let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            if name.starts_with("..") {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove_dir_all(&path)?;
                } else {
                    remove_file(&path)?;
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
        self.switch(snap, false).map(|s| self.finish(s))
    }

    /// The first half of a promotion: writes every key, links new keys, records the owed reload when
    /// `owe_reload`, and switches `..data`. On `Ok` the new config is live and whole; pass the
    /// [`Switched`] to [`Promoter::finish`] (after telling the component, which needs nothing it does).
    /// On error the previous config is in place and whole, as with [`Promoter::promote`].
    pub fn switch(&self, snap: &Snapshot, owe_reload: bool) -> Result<Switched, Error> {
        let old = std::fs::read_link(self.dir.join(DATA_LINK)).ok();
        let old_keys = match &old {
            Some(ts) => top_level_names(&self.dir.join(ts)),
            None => BTreeSet::new(),
        };
        let new_keys: BTreeSet<String> = snap
            .files()
            .keys()
            .map(|k| k.split('/').next().unwrap_or(k).to_owned())
            .collect();
        let owed_before = std::fs::read(self.dir.join(RELOAD_OWED)).ok();
        let ts = self.new_timestamp_dir()?;
        let ts_path = self.dir.join(&ts);
        let mut linked = Vec::new();
        let prepared = self
            .fill(&ts_path, snap)
            .and_then(|()| self.link_new(&new_keys, &mut linked))
            .and_then(|()| {
                if owe_reload {
                    self.mark_reload_owed(snap.hash())
                } else {
                    Ok(())
                }
            });
        if let Err(e) = prepared.and_then(|()| self.swap(&ts)) {
            let _ = std::fs::remove_dir_all(&ts_path);
            let _ = std::fs::remove_file(self.dir.join(DATA_TMP));
            // Links to keys only the new config has would dangle under the old one.
            for link in &linked {
                let _ = std::fs::remove_file(link);
            }
            if owe_reload {
                let _ = self.restore_owed(owed_before.as_deref());
            }
            return Err(e);
        }
        // Until `finish`, the old dir counts as untidy: a `switch` whose `Switched` is dropped still
        // gets tidied (`tidy`, next promotion, `open`).
        self.untidy.store(true, Ordering::Relaxed);
        Ok(Switched { old_keys, new_keys })
    }

    /// The second half of a promotion: unlinks keys the new config dropped and removes the old dir.
    /// The new config is live and whole already, so a failure here is not "previous config kept": it
    /// is logged and retried ([`Promoter::tidy`], the next promotion, [`Promoter::open`]).
    pub fn finish(&self, switched: Switched) {
        let tidied = self
            .unlink_vanished(&switched.old_keys, &switched.new_keys)
            .and_then(|()| self.clean());
        if let Err(e) = &tidied {
            tracing::warn!(error = %e, dir = %self.dir.display(), "promoted, but tidying the promoted dir failed; will retry");
        }
        self.untidy.store(tidied.is_err(), Ordering::Relaxed);
    }

    /// Links every new top-level key before the switch; `linked` gets the links this call created.
    fn link_new(&self, keys: &BTreeSet<String>, linked: &mut Vec<PathBuf>) -> Result<(), Error> {
        for key in keys {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_err() {
                self.link(key)?;
                linked.push(link);
            } else {
                self.link(key)?;
            }
        }
        Ok(())
    }

    fn unlink_vanished(
        &self,
        old_keys: &BTreeSet<String>,
        new_keys: &BTreeSet<String>,
    ) -> Result<(), Error> {
        for key in old_keys.difference(new_keys) {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                remove_file(&link)?;
            }
        }
        Ok(())
    }

    fn restore_owed(&self, before: Option<&[u8]>) -> Result<(), Error> {
        let path = self.dir.join(RELOAD_OWED);
        match before {
            None => remove_file(&path),
            Some(b) => std::fs::write(&path, b).map_err(io_err("write", &path)),
        }
    }

    fn fill(&self, ts_path: &Path, snap: &Snapshot) -> Result<(), Error> {
        for (key, bytes) in snap.files() {
            let path = ts_path.join(key);
            if let Some(parent) = path.parent().filter(|p| *p != ts_path) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(parent)
                    .map_err(io_err("create", parent))?;
            }
            std::fs::write(&path, bytes).map_err(io_err("write", &path))?;
            // Explicitly, not through the umask: a `defaultMode: 0755` script must stay executable
            // and a 0400 key must not become world-readable.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(snap.mode(key)))
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

fn parse_hash(text: &str) -> Option<ContentHash> {
    let hex = text.strip_prefix("sha256:")?;
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(ContentHash(out))
}

/// Reads a record of refused contents: `sha256:HEX REASON` lines. Lines that are not one are skipped
/// and counted in the answer's `ignored`.
fn parse_rejected(bytes: &[u8]) -> Rejected {
    let text = String::from_utf8_lossy(bytes);
    let mut r = Rejected::default();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (hash, why) = line.split_once(' ').unwrap_or((line, ""));
        match parse_hash(hash) {
            Some(h) => {
                r.entries.retain(|(seen, _)| *seen != h);
                r.entries.push((h, reason_line(why)));
            }
            None => bad += 1,
        }
    }
    if bad > 0 {
        r.ignored = Some(format!(
            "{bad} line(s) that are not a refused content's hash skipped"
        ));
    }
    r
}

/// A reason as one bounded line: control characters (a newline would start a record) become spaces.
fn reason_line(why: &str) -> String {
    let mut out = String::new();
    for c in why.trim().chars() {
        if out.len() + c.len_utf8() > REJECTED_REASON_MAX {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
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
    fn rolls_back_to_the_applied_dir_in_one_switch() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        assert!(matches!(p.roll_back(), Err(Error::NoApplied { .. })));
        let a = snap(&[("version", "1.0.0"), ("rules.yml", "good")]);
        p.promote(&a).unwrap();
        p.mark_applied().unwrap();
        let b = snap(&[("version", "1.1.0"), ("extra.yml", "bad")]);
        p.promote(&b).unwrap();
        // The applied dir outlives the promotion that replaced it; nothing else is left.
        let dirs = names(&dir)
            .into_iter()
            .filter(|n| n.starts_with("..2"))
            .count();
        assert_eq!(dirs, 2, "{:?}", names(&dir));
        let now = p.roll_back().unwrap();
        assert_eq!(now.hash(), Some(a.hash()));
        assert_eq!(
            std::fs::read_to_string(dir.join("rules.yml")).unwrap(),
            "good"
        );
        assert!(std::fs::symlink_metadata(dir.join("extra.yml")).is_err());
        let dirs = names(&dir)
            .into_iter()
            .filter(|n| n.starts_with("..2"))
            .count();
        assert_eq!(dirs, 1, "{:?}", names(&dir));
        // A restart of the component reads the rolled-back files; a later promotion keeps them.
        p.promote(&b).unwrap();
        assert_eq!(p.roll_back().unwrap().hash(), Some(a.hash()));
        let (_, reopened) = Promoter::open(&dir).unwrap();
        assert_eq!(reopened.hash(), Some(a.hash()));
    }

    #[test]
    fn what_the_component_did_is_read_back_after_a_restart() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        assert!(p.applied().is_none());
        assert_eq!(p.rejected(), Rejected::default());
        let a = snap(&[("version", "1.0.0"), ("sub/rules.yml", "good")]);
        let b = snap(&[("version", "1.1.0")]);
        p.promote(&a).unwrap();
        p.mark_applied().unwrap();
        p.promote(&b).unwrap();
        let refused = vec![
            (b.hash(), "POST u answered 500: bad\nrule\tx".to_owned()),
            (snap(&[("v", "9")]).hash(), String::new()),
        ];
        p.record_rejected(&refused).unwrap();
        // A crash while recording leaves a temporary file; a restart removes it and keeps the record.
        std::fs::write(dir.join(REJECTED_TMP), "sha256:half").unwrap();
        let (p, now) = Promoter::open(&dir).unwrap();
        assert_eq!(now.hash(), Some(b.hash()));
        assert!(!dir.join(REJECTED_TMP).exists());
        let (applied, since) = p.applied().unwrap();
        assert_eq!(applied.hash(), Some(a.hash()));
        assert!(since.is_some());
        let back = p.rejected();
        assert_eq!(back.ignored, None);
        // The reason is one line: a newline in it would have started a record.
        assert_eq!(
            back.entries,
            [
                (b.hash(), "POST u answered 500: bad rule x".to_owned()),
                (refused[1].0, String::new())
            ]
        );
        // The markers are not keys.
        assert_eq!(snapshot::read(&dir), Observed::Config(b));
    }

    #[test]
    fn a_damaged_record_of_refusals_is_read_as_far_as_it_makes_sense() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        let good = snap(&[("version", "1.0.0")]).hash();
        let mut text = b"garbage\nsha256:12ab\n\xff\xfe\x00\n".to_vec();
        text.extend_from_slice(
            format!("{good} it said no\nsha256:{}\n", "g".repeat(64)).as_bytes(),
        );
        std::fs::write(dir.join(REJECTED), &text).unwrap();
        let r = p.rejected();
        assert_eq!(r.entries, [(good, "it said no".to_owned())]);
        let why = r.ignored.unwrap();
        assert!(why.contains("4 line(s)"), "{why}");
        // Too big to be ours: read up to the bound, said so.
        let mut big = format!("{good} first\n").into_bytes();
        big.resize(REJECTED_READ_MAX as usize * 4, b'x');
        std::fs::write(dir.join(REJECTED), &big).unwrap();
        let r = p.rejected();
        assert_eq!(r.entries, [(good, "first".to_owned())]);
        assert!(r.ignored.unwrap().contains("over"));
        // Not a file at all.
        std::fs::remove_file(dir.join(REJECTED)).unwrap();
        std::fs::create_dir(dir.join(REJECTED)).unwrap();
        let r = p.rejected();
        assert!(r.entries.is_empty() && r.ignored.is_some(), "{r:?}");
        // A long reason is cut.
        std::fs::remove_dir(dir.join(REJECTED)).unwrap();
        p.record_rejected(&[(good, "é".repeat(1000))]).unwrap();
        let (_, why) = &p.rejected().entries[0];
        assert!(why.len() <= REJECTED_REASON_MAX + '…'.len_utf8() && why.ends_with('…'));
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

    #[test]
    fn key_modes_are_promoted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        let files: BTreeMap<String, Vec<u8>> = [
            ("run.sh", "#!/bin/sh"),
            ("secret", "s"),
            ("sub/x", "y"),
            ("version", "1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
        .collect();
        let modes = [("run.sh", 0o755), ("secret", 0o400), ("sub/x", 0o600)]
            .iter()
            .map(|(k, m)| ((*k).to_owned(), *m))
            .collect();
        let a = Snapshot::with_modes(files, modes);
        p.promote(&a).unwrap();
        let mode = |k: &str| std::fs::metadata(dir.join(k)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("run.sh"), 0o755);
        assert_eq!(mode("secret"), 0o400);
        assert_eq!(mode("sub/x"), 0o600);
        assert_eq!(mode("version"), 0o644);
        // Read back, the promoted dir is the same snapshot, modes included.
        assert_eq!(snapshot::read(&dir), Observed::Config(a));
    }

    #[test]
    fn reload_owed_is_recorded_before_the_switch_and_cleared_by_its_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        assert_eq!(p.reload_owed(), None);
        let a = snap(&[("version", "1.0.0")]);
        let b = snap(&[("version", "2.0.0")]);
        p.switch(&a, true).map(|s| p.finish(s)).unwrap();
        // A restart (a new `open`) finds it, and start-up cleaning keeps it.
        let (p, _) = Promoter::open(&dir).unwrap();
        assert_eq!(p.reload_owed(), Some(a.hash()));
        p.switch(&b, true).map(|s| p.finish(s)).unwrap();
        // A late success for the older config does not clear the newer debt.
        assert!(!p.clear_reload_owed(a.hash()).unwrap());
        assert_eq!(p.reload_owed(), Some(b.hash()));
        assert!(p.clear_reload_owed(b.hash()).unwrap());
        assert_eq!(p.reload_owed(), None);
        // A failed promotion leaves the record as it was.
        p.mark_reload_owed(b.hash()).unwrap();
        let bad = snap(&[("version", "3.0.0"), ("x", "1"), ("x/y", "2")]);
        assert!(p.switch(&bad, true).map(|s| p.finish(s)).is_err());
        assert_eq!(p.reload_owed(), Some(b.hash()));
        assert_eq!(snapshot::read(&dir), Observed::Config(b.clone()));
        // The marker is not a key, and a plain promotion keeps it.
        p.promote(&a).unwrap();
        assert_eq!(snapshot::read(&dir), Observed::Config(a));
        assert_eq!(p.reload_owed(), Some(b.hash()));
    }

    #[test]
    fn switch_makes_the_new_config_live_and_finish_removes_the_old_one() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        let a = snap(&[("version", "1.0.0"), ("gone", "x")]);
        p.promote(&a).unwrap();
        let old = std::fs::read_link(dir.join("..data")).unwrap();
        let b = snap(&[("version", "2.0.0"), ("new", "y")]);
        let switched = p.switch(&b, false).unwrap();
        // Live and whole before any tidying: what a reload requested now would read.
        assert_eq!(snapshot::read(&dir), Observed::Config(b.clone()));
        assert_eq!(std::fs::read_to_string(dir.join("new")).unwrap(), "y");
        assert!(dir.join(&old).is_dir(), "the old dir waits for finish");
        assert!(p.needs_tidy());
        p.finish(switched);
        assert!(!dir.join(&old).exists());
        assert!(std::fs::symlink_metadata(dir.join("gone")).is_err());
        assert!(!p.needs_tidy());
        assert_eq!(names(&dir).len(), 4, "{:?}", names(&dir));
        assert_eq!(snapshot::read(&dir), Observed::Config(b));
    }

    #[test]
    fn leftovers_of_an_unfinished_tidy_go_at_the_next_promotion_or_tidy() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("promoted");
        let (p, _) = Promoter::open(&dir).unwrap();
        p.promote(&snap(&[("version", "1.0.0")])).unwrap();
        // What a removal cut short leaves: an old dir half gone.
        std::fs::create_dir_all(dir.join("..2026_01_01_00_00_00.7/sub")).unwrap();
        p.promote(&snap(&[("version", "2.0.0")])).unwrap();
        assert_eq!(names(&dir).len(), 3, "{:?}", names(&dir));
        assert!(!p.needs_tidy());
        std::fs::create_dir_all(dir.join("..2026_01_01_00_00_00.8")).unwrap();
        p.tidy().unwrap();
        assert_eq!(names(&dir).len(), 3, "{:?}", names(&dir));
    }
}
