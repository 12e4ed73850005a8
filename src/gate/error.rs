//! [`Error`]: why the decision loop could not start.

use crate::{promote, source};

/// Why the loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Promote(#[from] promote::Error),
    /// The promoted dir could not be made or read at start: the flag that names it is named.
    #[error(
        "{} {}: {source}; give a directory confgate may create and write (an emptyDir the component mounts)",
        crate::settings::container::PROMOTE_TO.named(),
        path.display()
    )]
    PromoteTo {
        path: std::path::PathBuf,
        #[source]
        source: promote::Error,
    },
    #[error(transparent)]
    Source(#[from] source::Error),
    /// Another decision loop already publishes this status.
    #[error("the status already has a publisher: one decision loop per status")]
    Publisher,
}
