//! An operating system's error code (an `errno`) as a value the core keeps: what a `kill(2)` the
//! edge made answered. Compared by its code; shown in the words the edge gave it, which the OS's
//! binding makes from the code (`EPERM: Operation not permitted`).

use std::fmt;

/// An `errno` and its words. Two are the same when their codes are.
#[derive(Debug, Clone)]
pub struct OsError {
    code: i32,
    words: String,
}

impl OsError {
    /// The error `code`, shown as `words` (made from the code where it was met).
    pub fn new(code: i32, words: impl Into<String>) -> OsError {
        OsError {
            code,
            words: words.into(),
        }
    }

    /// The `errno`.
    pub fn code(&self) -> i32 {
        self.code
    }
}

impl PartialEq for OsError {
    fn eq(&self, other: &OsError) -> bool {
        self.code == other.code
    }
}

impl Eq for OsError {}

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_code_is_the_same_error_whatever_its_words() {
        let a = OsError::new(1, "EPERM: Operation not permitted");
        assert_eq!(a, OsError::new(1, "EPERM"));
        assert_ne!(a, OsError::new(3, "EPERM: Operation not permitted"));
        assert_eq!(a.to_string(), "EPERM: Operation not permitted");
        assert_eq!(a.code(), 1);
    }
}
