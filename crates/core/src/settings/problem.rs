//! [`AnnotationProblem`]: what is wrong with the pod's annotations, as a value the decision loop
//! keeps and compares, worded only where it is shown.

use super::describe::known_annotations;
use super::error::Invalid;

/// What is wrong with the pod's annotations, kept as a value: the decision loop compares these, and
/// they are worded only where shown (the `settings` check, a log line, an Event).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationProblem {
    /// A known annotation's value could not be used: the value in force before it is kept.
    #[error(transparent)]
    Invalid(Invalid),
    /// A `confgate.io/` annotation no setting has, and the known one nearest to it (after the
    /// prefix), if any.
    #[error(
        "unknown annotation {};{} known: {}",
        crate::listing::name(key),
        nearest.map(|k| format!(" did you mean confgate.io/{k}?")).unwrap_or_default(),
        known_annotations().collect::<Vec<_>>().join(", ")
    )]
    Unknown {
        key: String,
        nearest: Option<&'static str>,
    },
}
