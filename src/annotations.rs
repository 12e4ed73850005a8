//! The annotations file's one read; its format (parsing, quoting) is the core's
//! (`confgate_core::annotations`), re-exported here.
//!
//! `read_file` opens without blocking (a FIFO waits for no writer), reads regular files only, at
//! most 256 KiB, and `read` tells an absent file apart. At start `app` reads the file once and
//! hands it to the source's resolution and the start-up log; the loop reads it again once its
//! watches are in place, so no change in between is missed.

use std::path::Path;

pub use confgate_core::annotations::*;

/// Reads and parses the annotations file; an absent file is no annotations. `Err` says why the file
/// could not be used, naming the file (and line), never a value.
pub(crate) fn read_file(path: &Path) -> Result<Annotations, ReadError> {
    read_typed(path).map(Option::unwrap_or_default)
}

/// [`read_typed`] with its error shared, as the decision loop's `Event::Annotations` carries it.
pub fn read(path: &Path) -> Result<Option<Annotations>, ReadFailure> {
    read_typed(path).map_err(ReadFailure::new)
}

/// `read_file`, telling an absent file (`Ok(None)`) from an empty one. The read never blocks (a FIFO
/// or device in its place is refused) and is bounded by [`MAX_BYTES`].
pub fn read_typed(path: &Path) -> Result<Option<Annotations>, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let cannot = |source: std::io::Error| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, and stop the loop.
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cannot(e)),
    };
    let meta = f.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile(path.to_path_buf()));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_BYTES + 1) as usize);
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(ReadError::TooBig(path.to_path_buf()));
    }
    parse_bytes(&bytes)
        .map(Some)
        .map_err(|source| ReadError::Parse {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_in_place_of_the_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("annotations");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(matches!(read_typed(&path), Err(ReadError::NotAFile(_))));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read(&path), Ok(None));
        std::fs::write(&path, "").unwrap();
        assert_eq!(read(&path), Ok(Some(Annotations::new())));
    }
}
