//! `Error`: why a promotion, a rollback or a marker's write could not be made, and `io_err`, which
//! names the action and the path an I/O error came from.

use std::io;
use std::path::{Path, PathBuf};

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

pub(super) fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}
