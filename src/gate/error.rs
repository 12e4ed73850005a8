//! [`Error`]: why the decision loop could not start.

use crate::{promote, source};

/// Why the loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Promote(#[from] promote::Error),
    #[error(transparent)]
    Source(#[from] source::Error),
    /// Another decision loop already publishes this status.
    #[error("the status already has a publisher: one decision loop per status")]
    Publisher,
}
