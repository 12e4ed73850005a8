//! `io_err`, which names the action and the path an I/O error came from in an `Error` (the core's:
//! why a promotion, a rollback or a marker's write could not be made).

use std::io;
use std::path::Path;

use confgate_core::promote::Error;

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
