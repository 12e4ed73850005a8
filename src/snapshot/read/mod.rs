//! Reading a watched directory as one [`Snapshot`], through one resolution of `..data`.
//!
//! A `..data` that still names nothing is "points nowhere" at once, not a race: the kubelet never
//! removes the dir `..data` names. `MAX_KEYS` is checked while reading; each key is a regular file
//! by its directory entry's type and by the open file's one `stat`. `read_small` is the same read,
//! stopped at the first entry (keys, nested dirs and links alike) or byte past the loop's small
//! bounds, by each open file's own `stat` before its bytes are read.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

// The values are the core's; named there, not through `super`, which declares this file.
use confgate_core::snapshot::{Broken, MAX_DEPTH, Missing, SWAP_RETRIES};
use confgate_core::snapshot::{DATA_LINK, DEFAULT_MODE, MAX_BYTES, MAX_KEYS, is_editor_leftover};
use confgate_core::snapshot::{Observed, Snapshot};

#[cfg(test)]
mod tests;
mod tree;

use tree::read_tree;

/// Reads the directory as one snapshot.
///
/// A kubelet volume is read through the directory `..data` names, and `..data` is resolved again once
/// the read is done: the kubelet removes the old directory (depth-first) only after swapping `..data`
/// away from it, and never swaps back to a name it used, so an unchanged `..data` proves nothing was
/// removed under the read. A read that raced a swap, or saw anything vanish, starts again, at most
/// `SWAP_RETRIES` times; a volume still changing after that is `Broken`, never a partial snapshot.
///
/// A reason names keys and paths as the directory holds them, which in a plain or git-sync dir may
/// hold a newline: each is shown on one line (`Broken`'s and `Missing`'s `Display`).
pub fn read(dir: &Path) -> Observed {
    read_within(dir, None).unwrap_or_else(|Large| unreachable!("a read without a bound"))
}

/// [`read`], when what `dir` holds is at most `keys` entries (keys, nested dirs and links alike) and
/// regular files of `bytes` in all; `None` as soon as a file's own `stat` (taken on the open file,
/// before its bytes are read) or the count of entries passes either bound, having read nothing past
/// it. So the decision loop reads a small config itself, in one pass, and leaves a large one to a
/// thread that may wait on the disk.
pub(crate) fn read_small(dir: &Path, keys: usize, bytes: u64) -> Option<Observed> {
    read_within(dir, Some(Small { keys, bytes })).ok()
}

/// The bounds of [`read_small`].
#[derive(Debug, Clone, Copy)]
struct Small {
    keys: usize,
    bytes: u64,
}

/// Past a [`Small`] bound.
#[derive(Debug)]
struct Large;

fn read_within(dir: &Path, small: Option<Small>) -> Result<Observed, Large> {
    for _ in 0..SWAP_RETRIES {
        let (tree, volume) = match std::fs::read_link(dir.join(DATA_LINK)) {
            Ok(target) => {
                let Some(name) = target.to_str().filter(|n| is_timestamp_dir(n)) else {
                    return Ok(Observed::Broken(Broken::DataNotTimestamped {
                        dir: dir.to_path_buf(),
                        target,
                    }));
                };
                let base = match resolve_data_dir(dir, name) {
                    Ok(base) => base,
                    Err(Problem::Gone) => match dangling(dir, &target, name) {
                        Some(why) => return Ok(Observed::Broken(why)),
                        None => continue,
                    },
                    Err(Problem::Bad(why)) => return Ok(Observed::Broken(why)),
                    Err(Problem::Large) => return Err(Large),
                };
                let tree = read_tree(&base, &base, small, true);
                if tree.is_ok()
                    && std::fs::read_link(dir.join(DATA_LINK)).ok().as_deref()
                        != Some(target.as_path())
                {
                    tracing::debug!(dir = %dir.display(), "..data moved during the read; reading again");
                    continue;
                }
                (tree, true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !dir.exists() {
                    return Ok(Observed::Missing(Missing::NoDir {
                        dir: dir.to_path_buf(),
                    }));
                }
                match read_tree(dir, dir, small, false) {
                    // A kubelet writing its first payload: the plain read may hold half of it.
                    Ok(_) if std::fs::symlink_metadata(dir.join(DATA_LINK)).is_ok() => continue,
                    // An editor's leftovers beside a plain dir's files are no keys.
                    Ok((mut files, mut modes)) => {
                        let leftover = |key: &String| {
                            key.rsplit('/')
                                .next()
                                .is_some_and(|n| is_editor_leftover(n.as_bytes()))
                        };
                        files.retain(|k, _| !leftover(k));
                        modes.retain(|k, _| !leftover(k));
                        (Ok((files, modes)), false)
                    }
                    other => (other, false),
                }
            }
            Err(e) => {
                return Ok(Observed::Broken(Broken::DataUnreadable {
                    dir: dir.to_path_buf(),
                    error: e.into(),
                }));
            }
        };
        match tree {
            Ok(tree) => return Ok(finish(tree, dir, volume)),
            // A path vanished: the kubelet removed the directory after a newer swap; resolve
            // `..data` again.
            Err(Problem::Gone) => continue,
            Err(Problem::Bad(why)) => return Ok(Observed::Broken(why)),
            Err(Problem::Large) => return Err(Large),
        }
    }
    tracing::warn!(dir = %dir.display(), attempts = SWAP_RETRIES, "volume changing too fast to read whole");
    Ok(Observed::Broken(Broken::ChangingTooFast {
        dir: dir.to_path_buf(),
    }))
}

/// The directory `..data` names, which must be a directory inside `dir`: a `..data` pointing at a
/// link that leads out of the volume (`..data -> ..x -> /outside`) is refused. `name` is one path
/// component, so a real directory of that name is inside `dir` and needs no resolving: the kubelet's
/// case, one `lstat`. Only a link is followed and checked.
fn resolve_data_dir(dir: &Path, name: &str) -> Result<PathBuf, Problem> {
    let base = dir.join(name);
    let not_a_dir = || {
        Problem::Bad(Broken::DataNotADir {
            dir: dir.to_path_buf(),
            name: name.to_owned(),
        })
    };
    let meta = std::fs::symlink_metadata(&base).map_err(|e| Problem::from((base.as_path(), e)))?;
    if !meta.file_type().is_symlink() {
        return if meta.is_dir() {
            Ok(base)
        } else {
            Err(not_a_dir())
        };
    }
    let real = std::fs::canonicalize(&base).map_err(|e| Problem::from((base.as_path(), e)))?;
    let top = std::fs::canonicalize(dir).map_err(|e| Problem::from((dir, e)))?;
    if real == top || !real.starts_with(&top) {
        return Err(Problem::Bad(Broken::DataOutside {
            dir: dir.to_path_buf(),
            real,
        }));
    }
    match std::fs::metadata(&real) {
        Ok(m) if m.is_dir() => Ok(real),
        Ok(_) => Err(not_a_dir()),
        Err(e) => Err(Problem::from((real.as_path(), e))),
    }
}

/// Why `..data` points nowhere, when it still names `name` and nothing is there; `None` when it has
/// moved (a read racing a swap). The kubelet removes a timestamped directory only after `..data` has left
/// it and never swaps back, so an unmoved `..data` naming nothing is broken: retrying cannot help.
fn dangling(dir: &Path, target: &Path, name: &str) -> Option<Broken> {
    if std::fs::read_link(dir.join(DATA_LINK)).ok().as_deref() != Some(target) {
        return None;
    }
    let entry = dir.join(name);
    match std::fs::metadata(&entry) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        _ => return None,
    }
    Some(Broken::DataDangling {
        dir: dir.to_path_buf(),
        name: name.to_owned(),
        link: std::fs::symlink_metadata(&entry).is_ok(),
    })
}

/// A kubelet timestamped directory name: `..` then a single path component.
fn is_timestamp_dir(name: &str) -> bool {
    name.starts_with("..") && name.len() > 2 && !name.contains('/') && name != DATA_LINK
}

fn finish((files, modes): Tree, dir: &Path, volume: bool) -> Observed {
    if files.is_empty() {
        Observed::Missing(Missing::NoKeys {
            dir: dir.to_path_buf(),
            volume,
        })
    } else {
        Observed::Config(Snapshot::with_modes(files, modes))
    }
}

/// Keys with their bytes, and keys with their permission bits.
type Tree = (BTreeMap<String, Vec<u8>>, BTreeMap<String, u32>);

#[derive(Debug)]
enum Problem {
    /// A path vanished mid-read.
    Gone,
    Bad(Broken),
    /// Past a [`Small`] bound: the rest is not read.
    Large,
}

impl From<(&Path, io::Error)> for Problem {
    fn from((path, e): (&Path, io::Error)) -> Problem {
        if e.kind() == io::ErrorKind::NotFound {
            Problem::Gone
        } else {
            Problem::Bad(Broken::Unreadable {
                path: path.to_path_buf(),
                error: e.into(),
            })
        }
    }
}
