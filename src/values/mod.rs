//! Pure value types that modules on every floor share, with nothing above them imported: what a
//! gate setting holds, parsed from its text, and the verdict on a snapshot.

mod acting;
mod judging;
mod verdict;

pub use acting::{Confirm, Mode, OnIncompatible, Reload, redact};
pub use judging::{Accepts, Variants, VersionFrom, parse_accepts, parse_require, parse_variants};
pub use verdict::Verdict;
