//! What a bad setting's value is reported as: `Problem`, why its parser refused it; `Invalid`, the
//! value with the setting it was given to; `Error`, every bad flag or environment value at once.

/// The most of a bad value shown, in bytes: an annotation may hold 256 KiB, and its problem is shown in
/// `/status`, `/readyz?verbose` and a log line.
const MAX_VALUE: usize = 256;
/// The most of a parser's reason shown, in bytes: some quote the value, or a part of it.
const MAX_PROBLEM: usize = 1024;

/// A setting's value that could not be used. Its words show the value and the reason cut (with their
/// length) and escaped (the reason's control characters; the value is quoted as Rust quotes it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {setting} {:?}: {}; allowed: {allowed}",
    crate::listing::cut(value, MAX_VALUE),
    crate::listing::cut(&crate::listing::one_line(problem), MAX_PROBLEM)
)]
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
