//! What a bad setting's value is reported as: `Problem`, why its parser refused it; `Invalid`, the
//! value with the setting it was given to; `Error`, every bad flag or environment value at once.

/// A setting's value that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {setting} {value:?}: {problem}; allowed: {allowed}")]
pub struct Invalid {
    /// Where the value came from, as the user wrote it: `--accepts (CONFGATE_ACCEPTS)` or an annotation key.
    pub setting: String,
    pub value: String,
    pub problem: String,
    pub allowed: &'static str,
}

/// Why a gate setting's value was refused: its parser's own error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error(transparent)]
    Judging(#[from] crate::values::JudgingError),
    #[error(transparent)]
    Acting(#[from] crate::values::ActingError),
    #[error(transparent)]
    Duration(#[from] crate::values::DurationError),
    #[error(transparent)]
    Rules(#[from] crate::rules::Error),
    /// Several values given to a setting that takes one.
    #[error("takes one value")]
    OneValue,
}

/// Every bad flag or environment value, reported together so one restart fixes them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct Error(pub Vec<Invalid>);
