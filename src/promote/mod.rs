//! Promotion: the only writer of the promoted dir, in the kubelet's own layout.
//!
//! Order of a promotion: write every key (with its mode) into a new timestamped dir, add links for new
//! top-level keys, link `..data_tmp` to it, `rename` it over `..data` (the one atomic switch), unlink
//! vanished keys, remove the old dir. Unlike the kubelet's AtomicWriter, the links come before the
//! switch: everything the new config needs exists before it goes live, so a full disk (or an inode
//! limit) fails the promotion with the previous config whole, never a live config with a key link
//! missing. A crash before the rename leaves the old config whole; after it, the new one.
//! What is left to tidy after the switch (the old dir, stale links) is retried by `Promoter::tidy`,
//! every later promotion, and [`Promoter::open`].
//!
//! A promotion is two calls, so that the component can be told before the tidying: `Promoter::switch`
//! (write, link, switch: everything the new config needs) and `Promoter::finish` (unlink vanished
//! keys, remove the old dir). Between them the old dir and the links of vanished keys are still there,
//! as they are in a kubelet volume between its swap and its cleanup.
//!
//! "Reload owed" is a link in the promoted dir, `RELOAD_OWED`, whose target is the plain `sha256:` of
//! the promoted config the component has not yet been told about. It is written before the switch, so
//! a crash at any point after it still owes the reload at the next start-up.
//!
//! What the component did with earlier configs is kept beside it, for a restart: `APPLIED` links the
//! dir of the last config it applied, and `REJECTED` lists the contents it refused (a handful of
//! hashes, each with the component's reason). Every marker is a `..` name, which no reader of the
//! kubelet's layout lists as a key, and each is replaced with one `rename`, so a crash leaves the old
//! marker or the new one, never half of one.
//!
//! On its way to the reload a promotion does not read back what this writer left in the dir itself
//! (what `..data` names, the reload-owed marker, the key links it made or looked at since the last
//! tidy): it remembers them, and forgets them when a write fails. The tidying after each promotion
//! looks at the whole dir again, and puts back a key link something else removed meanwhile.
//!
//! Files are not fsynced: the dir is a pod's `emptyDir`, and a process crash cannot lose page-cache
//! writes; only a node crash could, and that ends the pod and its `emptyDir` anyway.
//!
//! `Promoter::open` removes what the live `..data` does not point at and adds missing links (a
//! crash's leftovers); `clean` keeps the applied and the baseline config's dirs. Each timestamped
//! dir holds a link `..confgate_variant` naming the variant key its config was chosen from
//! (`switch_variant`), which `Promoter::variants` reads back for the live and the applied dir.
//! `roll_back` switches `..data` back to the applied dir with one `rename`; the first config,
//! replaced before its start-up check concluded, is kept as `..confgate_baseline` until the
//! component is known to run it (`adopt_baseline`) or a later one is applied. For the `validate`
//! checker, `stage` writes a candidate into `..confgate_candidate`, which `..data` never names, and
//! `unstage` removes it; both run on the blocking pool, in the check's task, with the checker.

mod error;
mod link;
mod markers;
#[cfg(test)]
mod record_tests;
mod remove;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::snapshot::{self, ContentHash, DATA_LINK, Observed, Snapshot};
use error::io_err;
use link::link_replacing;
pub(crate) use markers::Rejected;
use remove::{remove_dir_all, remove_file};

// The values the decision core keeps are the core's, under their old names here.
pub use confgate_core::promote::{Error, Failure, RecordTarget};
pub(crate) use markers::{APPLIED, BASELINE, REJECTED, RELOAD_OWED};

const DATA_TMP: &str = "..data_tmp";
/// Inside a timestamped dir, a link whose target is the variant key its config was promoted from
/// (with the variants setting): kept with the dir, so the applied dir's is the applied config's.
const VARIANT: &str = "..confgate_variant";

/// The staged candidate's dir, where the `validate` checker reads a config before it is promoted: a
/// `..` name, which no reader of the kubelet's layout takes for a key and `..data` never names, so
/// the component never reads it; removed after each check, and by [`Promoter::open`]'s cleanup.
pub(crate) const CANDIDATE: &str = "..confgate_candidate";

/// A promotion that went live through [`Promoter::switch`]; what [`Promoter::finish`] tidies.
#[derive(Debug)]
#[must_use = "the old config is still in the promoted dir: pass this to Promoter::finish"]
pub(crate) struct Switched {
    /// The timestamped dir the switch replaced: its keys are listed in `finish`, after the
    /// component has been told, not on the way to telling it.
    old: Option<PathBuf>,
    new_keys: BTreeSet<String>,
}

/// Writes snapshots into the promoted dir.
#[derive(Debug)]
pub struct Promoter {
    dir: PathBuf,
    /// Set when tidying after a switch failed; cleared by a [`Promoter::tidy`] that finished.
    untidy: AtomicBool,
    /// The process's umask, read once; `None` when it cannot be read. A new file or dir whose mode
    /// the umask leaves whole needs no `chmod`, which saves a system call per key on the way to
    /// the reload.
    umask: Option<u32>,
    /// What this writer last left in its dir, so that a promotion does not look again, on its way
    /// to the reload, at what it made itself.
    known: Mutex<Known>,
}

/// What [`Promoter`] knows its dir holds, as it last wrote or read it; forgotten whenever a write
/// failed. Only for what comes before a switch: each promotion's tidying (`clean`) looks at the
/// whole dir again after the component was told, and puts back a key link anything else removed.
#[derive(Debug, Default)]
struct Known {
    /// What `..data` names (`None`: not known; `Some(None)`: no `..data`).
    data: Option<Option<PathBuf>>,
    /// The reload-owed marker (`None`: not known; `Some(None)`: none).
    owed: Option<Option<ContentHash>>,
    /// The top-level keys whose link to `..data/KEY` was made or looked at since the last tidy.
    links: BTreeSet<String>,
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
            umask: umask(),
            known: Mutex::default(),
        };
        // A first config kept for a start-up check that never concluded: after a restart nothing
        // is waiting for it.
        remove_file(&dir.join(BASELINE))?;
        p.clean()?;
        Ok((p, snapshot::read(dir)))
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The variant keys the live config and the applied one were promoted from, as recorded beside
    /// each ([`Promoter::switch_variant`]); a record that is not a link naming a key is ignored.
    pub(crate) fn variants(&self) -> (Option<String>, Option<String>) {
        let of = |ts: &Path| {
            let name = std::fs::read_link(ts.join(VARIANT)).ok()?.into_os_string();
            name.into_string()
                .ok()
                .filter(|n| crate::configmap::is_valid_key(n))
        };
        let applied = markers::applied_dir(&self.dir).and_then(|ts| of(&self.dir.join(ts)));
        (of(&self.dir.join(DATA_LINK)), applied)
    }

    /// Whether a promotion went live but left something to tidy (an old dir, a stale link): call
    /// `Promoter::tidy` until this is false. Every promotion tidies too.
    pub fn needs_tidy(&self) -> bool {
        self.untidy.load(Ordering::Relaxed)
    }

    /// Removes what earlier promotions left behind and adds any key link missing. The live config is
    /// never touched.
    pub(crate) fn tidy(&self) -> Result<(), Error> {
        let r = self.clean();
        self.untidy.store(r.is_err(), Ordering::Relaxed);
        if r.is_ok() {
            tracing::info!(dir = %self.dir.display(), "promoted dir tidied");
        }
        r
    }

    /// Removes leftovers: `..data_tmp`, timestamped dirs `..data` does not point at, links to vanished keys,
    /// and adds links that a crash after the swap left missing.
    fn clean(&self) -> Result<(), Error> {
        // Looked at again below; until then, and when a step fails, no link counts as known.
        self.known().links.clear();
        let current = std::fs::read_link(self.dir.join(DATA_LINK))
            .ok()
            .and_then(|t| t.to_str().map(str::to_owned));
        let applied = markers::applied_dir(&self.dir);
        let baseline = markers::baseline_dir(&self.dir);
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
                || name == markers::SETTINGS_IN_FORCE
                || name == BASELINE
                || Some(&name) == current.as_ref()
                || Some(&name) == applied.as_ref()
                || Some(&name) == baseline.as_ref()
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
        let mut known = self.known();
        known.data = Some(current.map(PathBuf::from));
        known.links = keys;
        Ok(())
    }

    /// What this writer knows of its dir (see [`Known`]).
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        // Nothing panics while holding it; a poisoned lock's data is only a cache, still usable.
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets what this writer knew of its dir: the next promotion looks at it.
    fn forget(&self) {
        *self.known() = Known::default();
    }

    /// Remembers a switch of `..data` to `ts`, whose top-level `keys` are all linked now.
    fn switched_to(&self, ts: &str, keys: &BTreeSet<String>) {
        let mut known = self.known();
        known.data = Some(Some(PathBuf::from(ts)));
        known.links.extend(keys.iter().cloned());
    }

    /// Undoes what a switch that failed made beside the live config: `..data_tmp`, and the `linked`
    /// keys only the new config has, which would dangle under the old one. What is known is
    /// forgotten: the next promotion looks at the dir.
    fn unswitched(&self, linked: &[PathBuf]) {
        let _ = std::fs::remove_file(self.dir.join(DATA_TMP));
        for link in linked {
            let _ = std::fs::remove_file(link);
        }
        self.forget();
    }

    /// Sets `path`'s mode to `mode` unless it was created with it whole, the umask taking nothing.
    fn chmod_unless_whole(&self, path: &Path, mode: u32) -> Result<(), Error> {
        if self.umask.is_some_and(|u| mode & u == 0) {
            return Ok(());
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(io_err("chmod", path))
    }

    /// Makes `top`'s link name `..data/top`; returns whether nothing stood at its name before (the
    /// link is new). Something there that is not a link (a file someone else put there) stays.
    fn link(&self, top: &str) -> Result<bool, Error> {
        let link = self.dir.join(top);
        let target = Path::new(DATA_LINK).join(top);
        match std::fs::read_link(&link) {
            Ok(t) if t == target => Ok(false),
            Ok(_) => {
                remove_file(&link)?;
                std::os::unix::fs::symlink(&target, &link).map_err(io_err("link", &link))?;
                Ok(false)
            }
            Err(e)
                if e.kind() != io::ErrorKind::NotFound
                    && std::fs::symlink_metadata(&link).is_ok() =>
            {
                Ok(false)
            }
            Err(_) => std::os::unix::fs::symlink(&target, &link)
                .map_err(io_err("link", &link))
                .map(|()| true),
        }
    }

    /// Writes `snap` (every key, with its mode) into [`CANDIDATE`], replacing what a previous check
    /// left, for the `validate` checker; returns its path. The live config is not touched.
    pub(crate) fn stage(&self, snap: &Snapshot) -> Result<PathBuf, Error> {
        let path = self.dir.join(CANDIDATE);
        self.unstage();
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&path)
            .map_err(io_err("create", &path))?;
        // The umask may have narrowed the mode; the checker may run as another user than the writer.
        self.chmod_unless_whole(&path, 0o755)?;
        if let Err(e) = self.fill(&path, snap) {
            self.unstage();
            return Err(e);
        }
        Ok(path)
    }

    /// Removes the staged candidate, if any.
    pub(crate) fn unstage(&self) {
        let path = self.dir.join(CANDIDATE);
        if std::fs::symlink_metadata(&path).is_ok() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }

    /// Promotes `snap`. On error the previous config is still in place and whole, and the new
    /// timestamped dir (if any) has been removed.
    pub fn promote(&self, snap: &Snapshot) -> Result<(), Error> {
        self.switch(snap, false, false).map(|s| self.finish(s))
    }

    /// The first half of a promotion: writes every key, links new keys, records the owed reload when
    /// `owe_reload`, keeps the dir it replaces as [`BASELINE`] when `keep_baseline`, and switches
    /// `..data`. On `Ok` the new config is live and whole; pass the [`Switched`] to
    /// [`Promoter::finish`] (after telling the component, which needs nothing it does). On error the
    /// previous config is in place and whole, as with [`Promoter::promote`].
    pub(crate) fn switch(
        &self,
        snap: &Snapshot,
        owe_reload: bool,
        keep_baseline: bool,
    ) -> Result<Switched, Error> {
        self.switch_variant(snap, owe_reload, None, keep_baseline)
    }

    /// [`Promoter::switch`], recording beside the new config the `variant` key it was chosen from.
    pub(crate) fn switch_variant(
        &self,
        snap: &Snapshot,
        owe_reload: bool,
        variant: Option<&str>,
        keep_baseline: bool,
    ) -> Result<Switched, Error> {
        // What this writer left in its dir last time is not read again on the way to the reload.
        let (old, owed_before) = {
            let known = self.known();
            (known.data.clone(), known.owed)
        };
        let old = old.unwrap_or_else(|| std::fs::read_link(self.dir.join(DATA_LINK)).ok());
        let new_keys: BTreeSet<String> = snap
            .files()
            .keys()
            .map(|k| k.split('/').next().unwrap_or(k).to_owned())
            .collect();
        let owed_before = owed_before.unwrap_or_else(|| self.reload_owed());
        let ts = self.new_timestamp_dir()?;
        let ts_path = self.dir.join(&ts);
        let mut linked = Vec::new();
        let prepared = self
            .fill(&ts_path, snap)
            .and_then(|()| match variant {
                Some(v) => {
                    let link = ts_path.join(VARIANT);
                    std::os::unix::fs::symlink(v, &link).map_err(io_err("link", &link))
                }
                None => Ok(()),
            })
            .and_then(|()| self.link_new(&new_keys, &mut linked))
            .and_then(|()| {
                if owe_reload {
                    self.mark_reload_owed(snap.hash())
                } else {
                    Ok(())
                }
            })
            .and_then(|()| {
                if keep_baseline && old.is_some() {
                    markers::keep_baseline(&self.dir)
                } else {
                    Ok(())
                }
            });
        if let Err(e) = prepared.and_then(|()| self.swap(&ts)) {
            let _ = std::fs::remove_dir_all(&ts_path);
            if owe_reload {
                let _ = self.restore_owed(owed_before);
            }
            // Last, so that what the restore wrote is forgotten too.
            self.unswitched(&linked);
            return Err(e);
        }
        self.switched_to(&ts, &new_keys);
        // Until `finish`, the old dir counts as untidy: a `switch` whose `Switched` is dropped still
        // gets tidied (`tidy`, next promotion, `open`).
        self.untidy.store(true, Ordering::Relaxed);
        Ok(Switched { old, new_keys })
    }

    /// The second half of a promotion: unlinks keys the new config dropped and removes the old dir.
    /// The new config is live and whole already, so a failure here is not "previous config kept": it
    /// is logged and retried ([`Promoter::tidy`], the next promotion, [`Promoter::open`]).
    pub(crate) fn finish(&self, switched: Switched) {
        let old_keys = match &switched.old {
            Some(ts) => top_level_names(&self.dir.join(ts)),
            None => BTreeSet::new(),
        };
        let tidied = self
            .unlink_vanished(&old_keys, &switched.new_keys)
            .and_then(|()| self.clean());
        if let Err(e) = &tidied {
            tracing::warn!(error = %e, dir = %self.dir.display(), "promoted, but tidying the promoted dir failed; will retry");
        }
        self.untidy.store(tidied.is_err(), Ordering::Relaxed);
    }

    /// Links every new top-level key before the switch; `linked` gets the links this call created.
    /// A key whose link this writer made or looked at since the last tidy is not looked at again.
    fn link_new(&self, keys: &BTreeSet<String>, linked: &mut Vec<PathBuf>) -> Result<(), Error> {
        let known = std::mem::take(&mut self.known().links);
        let r = keys
            .iter()
            .filter(|k| !known.contains(*k))
            .try_for_each(|key| {
                if self.link(key)? {
                    linked.push(self.dir.join(key));
                }
                Ok(())
            });
        // Kept only when every link is in place; a failure forgets them all.
        if r.is_ok() {
            self.known().links = known;
        }
        r
    }

    fn unlink_vanished(
        &self,
        old_keys: &BTreeSet<String>,
        new_keys: &BTreeSet<String>,
    ) -> Result<(), Error> {
        for key in old_keys.difference(new_keys) {
            self.known().links.remove(key);
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                remove_file(&link)?;
            }
        }
        Ok(())
    }

    fn restore_owed(&self, before: Option<ContentHash>) -> Result<(), Error> {
        match before {
            None => remove_file(&self.dir.join(RELOAD_OWED)),
            Some(sha) => self.mark_reload_owed(sha),
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
            let mode = snap.mode(key);
            // Created with its mode, in a dir just made, so the file is new: then set explicitly
            // where the umask took part of it, since a `defaultMode: 0755` script must stay
            // executable and a 0400 key must not become world-readable.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&path)
                .and_then(|mut f| f.write_all(bytes))
                .map_err(io_err("write", &path))?;
            self.chmod_unless_whole(&path, mode)?;
        }
        Ok(())
    }

    fn swap(&self, ts: &str) -> Result<(), Error> {
        let tmp = self.dir.join(DATA_TMP);
        link_replacing(Path::new(ts), &tmp)?;
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
                    self.chmod_unless_whole(&path, 0o755)?;
                    return Ok(name);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("create", &path)(e)),
            }
        }
    }
}

// The markers beside the promoted config (`markers.rs`), and what a change of one does to the rest of
// the dir: the tidying after it, or the switch back to the applied config's dir.
impl Promoter {
    /// The hash of a promoted config whose reload is still owed (recorded by [`Promoter::switch`]
    /// and not yet cleared), as found at start-up.
    pub(crate) fn reload_owed(&self) -> Option<ContentHash> {
        let owed = markers::reload_owed(&self.dir);
        self.known().owed = Some(owed);
        owed
    }

    /// Records durably that the component is owed a reload for `sha` ([`RELOAD_OWED`]).
    pub(crate) fn mark_reload_owed(&self, sha: ContentHash) -> Result<(), Error> {
        let r = markers::mark_reload_owed(&self.dir, sha);
        self.known().owed = r.is_ok().then_some(Some(sha));
        r
    }

    /// Clears the owed reload once the component was told about `sha`. An owed reload for another
    /// (newer) config stays; `false` then.
    pub(crate) fn clear_reload_owed(&self, sha: ContentHash) -> Result<bool, Error> {
        let r = markers::clear_reload_owed(&self.dir, sha);
        // Cleared: none owed. Kept for a newer config, or failed: read again when needed.
        self.known().owed = matches!(r, Ok(true)).then_some(None);
        r
    }

    /// The contents the component refused, as recorded by [`Promoter::record_rejected`]; a damaged
    /// record is read as far as it makes sense, never an error.
    pub(crate) fn rejected(&self) -> Rejected {
        markers::rejected(&self.dir)
    }

    /// Replaces the record of refused contents ([`REJECTED`]) with `entries` (oldest first), refused
    /// under the reload target `target` (as shown).
    pub(crate) fn record_rejected(
        &self,
        target: &crate::values::Reload,
        entries: &[(ContentHash, crate::reload::Refusal)],
    ) -> Result<(), Error> {
        markers::record_rejected(&self.dir, target, entries)
    }

    /// The annotations' values last in force, as recorded by [`Promoter::record_settings`]; `Err`
    /// says why a record that is not one confgate wrote was set aside.
    pub(crate) fn settings_in_force(&self) -> Result<crate::annotations::Annotations, String> {
        markers::settings_in_force(&self.dir)
    }

    /// Replaces the record of the annotations' values in force (`..confgate_settings`) with `values`.
    pub(crate) fn record_settings(
        &self,
        values: &crate::annotations::Annotations,
    ) -> Result<(), Error> {
        markers::record_settings(&self.dir, values)
    }

    /// The config [`APPLIED`] names, read back at start-up, and since when (when the link was made).
    pub(crate) fn applied(&self) -> Option<(Observed, Option<jiff::Timestamp>)> {
        markers::applied(&self.dir)
    }

    /// Records that the component applied what `..data` points at now: that dir is kept, for
    /// [`Promoter::roll_back`], when later promotions replace it. The dir it kept before goes.
    pub(crate) fn mark_applied(&self) -> Result<(), Error> {
        markers::mark_applied(&self.dir)?;
        self.tidy_after_marker();
        Ok(())
    }

    /// The component ran the kept first config ([`BASELINE`]): it becomes [`APPLIED`], the rollback
    /// base, with one `rename`.
    pub(crate) fn adopt_baseline(&self) -> Result<(), Error> {
        markers::adopt_baseline(&self.dir)?;
        self.tidy_after_marker();
        Ok(())
    }

    /// Removes the dir a marker no longer keeps. The marker is written already, so a failure here is
    /// only logged and left to [`Promoter::tidy`].
    fn tidy_after_marker(&self) {
        if let Err(e) = self.clean() {
            self.untidy.store(true, Ordering::Relaxed);
            tracing::warn!(error = %e, dir = %self.dir.display(), "tidying the promoted dir failed; will retry");
        }
    }

    /// Puts the last applied config back in place with one `rename` of `..data`, as a promotion
    /// would (its key links first, then the switch, then the rejected dir and links removed), and
    /// returns what the dir holds now. Nothing is copied: the applied config's dir was kept.
    pub(crate) fn roll_back(&self) -> Result<Observed, Error> {
        let Some(ts) = markers::applied_dir(&self.dir) else {
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
                self.unswitched(&linked);
                return Err(e);
            }
            self.switched_to(&ts, &keys);
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
}

/// The process's umask, from `/proc/self/status` (Linux 4.7 and later): reading it there changes
/// nothing, where `umask(2)` can only be read by setting it, for every thread at once.
fn umask() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(value.trim(), 8).ok()
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
