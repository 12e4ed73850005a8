//! The read of a resolved directory's files: every regular file under it, each within its bound and
//! by its own `stat`, with a nested dir's links kept inside the volume.

use super::*;

/// Reads every regular file under `root`, keyed by its path relative to `root`. Names starting with
/// `..` are the writer's own and are skipped. Within `small`, when given, or [`Problem::Large`].
/// `published`: `root` is the timestamped dir `..data` named, whose files were complete before the
/// swap published them and are never written again (see [`read_limited`]).
pub(super) fn read_tree(
    root: &Path,
    top: &Path,
    small: Option<Small>,
    published: bool,
) -> Result<Tree, Problem> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
    let mut total = 0u64;
    let mut listed = 0usize;
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| Problem::from((dir.as_path(), e)))?;
        for entry in entries {
            let entry = entry.map_err(|e| Problem::from((dir.as_path(), e)))?;
            // Every entry counts against a small read's bound of keys, not only the keys: a nested
            // dir, a link to one or a skipped name is looked at too, and a dir of many of them
            // would otherwise be listed whole on the loop.
            listed += 1;
            if small.is_some_and(|s| listed > s.keys) {
                return Err(Problem::Large);
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(Problem::Bad(Broken::NotUtf8 { dir }));
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
            let budget = MAX_BYTES.saturating_sub(total);
            let small_budget = small.map(|s| s.bytes.saturating_sub(total));
            // The directory entry's own type (no system call where the file system records it, as
            // every one the kubelet writes to does): a regular file is opened at once, and the open
            // file's `stat` is the only one it needs. When the open finds something else (a link
            // or a dir swapped in since the listing, or a device or FIFO mounted over the file,
            // which its entry never shows) the entry is looked at as one of another type is.
            let regular = entry.file_type().is_ok_and(|t| t.is_file());
            let opened =
                match regular.then(|| read_limited(&path, None, budget, small_budget, published)) {
                    Some(Err(Problem::Gone)) | None => None,
                    Some(opened) => Some(opened?),
                };
            let (bytes, meta) = match opened {
                Some(opened) => opened,
                None => {
                    let meta = std::fs::symlink_metadata(&path)
                        .map_err(|e| Problem::from((path.as_path(), e)))?;
                    let ft = meta.file_type();
                    // A regular entry's `lstat` is its `stat`; only a link needs a second look.
                    let (real, meta) = if ft.is_symlink() {
                        let real = resolve_inside(&path, top, &key)?;
                        let meta = std::fs::metadata(&real)
                            .map_err(|e| Problem::from((real.as_path(), e)))?;
                        (real, meta)
                    } else {
                        (path.clone(), meta)
                    };
                    if meta.is_dir() {
                        if depth + 1 >= MAX_DEPTH {
                            return Err(Problem::Bad(Broken::TooDeep { key }));
                        }
                        if !ft.is_symlink() {
                            stack.push((path, depth + 1));
                        }
                        continue;
                    }
                    if !meta.is_file() {
                        return Err(Problem::Bad(Broken::NotRegular { key }));
                    }
                    read_limited(&real, Some(meta.len()), budget, small_budget, published)?
                }
            };
            total += bytes.len() as u64;
            if total > MAX_BYTES {
                return Err(Problem::Bad(Broken::OverSizeAt { key }));
            }
            if files.len() == MAX_KEYS {
                return Err(Problem::Bad(Broken::TooManyKeys));
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

/// Follows a symlink only when it stays inside the watched directory.
fn resolve_inside(path: &Path, top: &Path, key: &str) -> Result<PathBuf, Problem> {
    let real = std::fs::canonicalize(path).map_err(|e| {
        // A link that is still there with nothing behind it is broken, not a read racing a swap:
        // retrying cannot help, and "changed while being read" would send the reader the wrong way.
        if e.kind() == io::ErrorKind::NotFound && std::fs::symlink_metadata(path).is_ok() {
            Problem::Bad(Broken::LinkToNothing {
                key: key.to_owned(),
                target: std::fs::read_link(path).unwrap_or_default(),
            })
        } else {
            Problem::from((path, e))
        }
    })?;
    let top = std::fs::canonicalize(top).map_err(|e| Problem::from((top, e)))?;
    if real.starts_with(&top) {
        Ok(real)
    } else {
        Err(Problem::Bad(Broken::LinkOutside {
            key: key.to_owned(),
            real,
        }))
    }
}

/// Whether the file changed between two `stat`s: its size, or its data's or inode's change time.
fn changed(before: &std::fs::Metadata, after: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    before.len() != after.len()
        || (before.mtime(), before.mtime_nsec()) != (after.mtime(), after.mtime_nsec())
        || (before.ctime(), before.ctime_nsec()) != (after.ctime(), after.ctime_nsec())
}

/// Reads at most `budget + 1` bytes, so an oversized file is detected without being loaded whole;
/// returns them with the open file's `stat`. `len` (from a type check's stat, when one was made)
/// only sizes the buffer: the file's own `stat` decides. Past `small`, when given, nothing is read:
/// [`Problem::Large`].
///
/// `path` was a regular file when its entry was listed or stated. Something else there now (a FIFO,
/// which would read as empty, a link, which may lead out of the volume, a socket) is
/// [`Problem::Gone`], never read: an entry listed as a regular file is then stated, and that type
/// check names what is there; one stated as a regular file was swapped since, and the read starts
/// again.
///
/// `published`: the file is in the timestamped dir a kubelet's `..data` named, written whole before
/// the swap and never in place after it (the next version is a new dir; `..data` is read again
/// after the read to prove it did not move). Its `stat` then says how much there is: exactly that
/// is read, without the read that finds the end or the second `stat`, two system calls per key on
/// the way to the reload.
pub(super) fn read_limited(
    path: &Path,
    len: Option<u64>,
    budget: u64,
    small: Option<u64>,
    published: bool,
) -> Result<(Vec<u8>, std::fs::Metadata), Problem> {
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: io::Error| Problem::from((path, e));
    // O_NONBLOCK: a FIFO swapped in after the type check must not block the decision loop.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // A link (under O_NOFOLLOW), or a socket or a device without a driver, which refuse
            // to be opened: no regular file is there.
            Some(nix::libc::ELOOP | nix::libc::ENXIO) => Problem::Gone,
            _ => failed(e),
        })?;
    let meta = f.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(Problem::Gone);
    }
    if small.is_some_and(|b| meta.len() > b) {
        return Err(Problem::Large);
    }
    let len = len.unwrap_or(meta.len());
    // A file grown since its stat is read no further than the small bound either.
    let budget = small.map_or(budget, |b| b.min(budget));
    if published {
        // One byte past the budget, when the file holds more, so the caller sees it is too large.
        let want = meta.len().min(budget + 1) as usize;
        let mut buf = vec![0u8; want];
        let mut f = f;
        let mut got = 0;
        while got < want {
            match f.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(failed(e)),
            }
        }
        if got != want {
            tracing::debug!(path = %path.display(), "shorter than its stat; reading again");
            return Err(Problem::Gone);
        }
        return Ok((buf, meta));
    }
    // One byte more than the stat said, so the read that finds the end needs no second allocation.
    let mut buf = Vec::with_capacity(len.saturating_add(1).min(budget + 1) as usize);
    let mut f = f.take(budget + 1);
    f.read_to_end(&mut buf).map_err(failed)?;
    if small.is_some_and(|b| buf.len() as u64 > b) {
        return Err(Problem::Large);
    }
    // A file written in place while it was read (a plain dir's, a hostPath's: truncated, then
    // written in chunks) may be half old, half new: its size and times must be those of the read,
    // or it is read again, as a path that vanished is.
    let after = f.into_inner().metadata().map_err(failed)?;
    if changed(&meta, &after) || (buf.len() as u64 <= budget && buf.len() as u64 != after.len()) {
        tracing::debug!(path = %path.display(), "changed while it was read; reading again");
        return Err(Problem::Gone);
    }
    Ok((buf, meta))
}
