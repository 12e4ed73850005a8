//! The temporary links the promoted dir's records and `..data` are renamed from.

use std::io;
use std::path::Path;

use super::Error;
use super::error::io_err;
use super::remove::remove_file;

/// Links `at` to `target`. A link already there is a leftover of a crash between a link and its
/// rename: it is removed only when met, not unlinked before every link on a promotion's path.
pub(super) fn link_replacing(target: &Path, at: &Path) -> Result<(), Error> {
    if let Err(e) = std::os::unix::fs::symlink(target, at) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(io_err("link", at)(e));
        }
        remove_file(at)?;
        std::os::unix::fs::symlink(target, at).map_err(io_err("link", at))?;
    }
    Ok(())
}
