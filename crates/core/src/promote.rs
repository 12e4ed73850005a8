//! What the promoter tells the decision core: why a promotion, a rollback or a marker's write
//! could not be made ([`Error`], shared as a [`Failure`]), and the reload target a record of
//! refusals names ([`RecordTarget`]). Values only: the promoter, the only writer of the promoted
//! dir, is the edge's (`confgate`'s `promote`), which re-exports these.

use std::io;
use std::path::PathBuf;

use crate::values::Reload;

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

/// A promotion's or rollback's error, as the loop hands it to the gate.
pub type Failure = crate::failure::Failure<Error>;

/// The reload target a record of refusals names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum RecordTarget {
    /// An earlier version's record, which names none.
    #[default]
    Unnamed,
    /// The target, read back as the setting's value (with credentials removed as shown, which
    /// [`Reload::same_target`] does not compare).
    Named(Reload),
    /// A target line that is no reload target (not one confgate wrote).
    Unreadable,
}
