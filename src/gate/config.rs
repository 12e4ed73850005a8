//! [`Config`]: the container-level inputs the decision loop is opened with.

use std::path::PathBuf;
use std::time::Duration;

use crate::rollout;

/// Container-level inputs of the loop.
#[derive(Debug, Clone)]
pub struct Config {
    pub watch: PathBuf,
    pub promote_to: Option<PathBuf>,
    pub annotations: PathBuf,
    /// Safety re-read of everything, in case an event was lost.
    pub resync: Duration,
    /// This pod's place in a rollout (from `POD_UID`, else the pod name); `None`: unknown, so a
    /// rollout leaves it on stable.
    pub bucket: Option<rollout::Bucket>,
}
