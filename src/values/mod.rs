//! Pure value types that modules on every floor share, with nothing above them imported: the verdict
//! on a snapshot.

mod verdict;

pub use verdict::Verdict;
