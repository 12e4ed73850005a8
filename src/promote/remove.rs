//! Removal in the promoted dir, where a name already gone is what was wanted: a tidy redone after a
//! crash or a failed try finds part of its work done, and that is no error.

use std::io;
use std::path::Path;

use super::Error;
use super::error::io_err;

pub(super) fn remove_file(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", path)(e)),
        _ => Ok(()),
    }
}

pub(super) fn remove_dir_all(path: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", path)(e)),
        _ => Ok(()),
    }
}
