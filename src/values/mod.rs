//! Pure value types that modules on every floor share, with nothing above them imported: what a
//! gate setting holds, parsed from its text, and the verdict on a snapshot.

mod acting;
mod verdict;

pub use acting::{Confirm, Mode, OnIncompatible, Reload, redact};
pub use verdict::Verdict;
