//! [`Failure`]: an error an I/O edge reports to the pure core, shared rather than turned into text,
//! so the core can keep it in its state (which is cloned and compared) and the message is made once,
//! where it is shown.

use std::sync::Arc;

/// `E`, shared. Two are equal when they say the same: the core compares states, not causes.
#[derive(Debug)]
pub struct Failure<E>(Arc<E>);

impl<E> Failure<E> {
    pub fn new(e: E) -> Failure<E> {
        Failure(Arc::new(e))
    }

    /// The error itself, for a caller that tells causes apart.
    pub fn error(&self) -> &E {
        &self.0
    }
}

impl<E> Clone for Failure<E> {
    fn clone(&self) -> Failure<E> {
        Failure(Arc::clone(&self.0))
    }
}

impl<E: std::fmt::Display> PartialEq for Failure<E> {
    fn eq(&self, other: &Failure<E>) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl<E: std::fmt::Display> Eq for Failure<E> {}

impl<E: std::fmt::Display> std::fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_equal_when_they_say_the_same() {
        let a = Failure::new(std::io::Error::other("disk full"));
        assert_eq!(a, a.clone());
        assert_eq!(a, Failure::new(std::io::Error::other("disk full")));
        assert_ne!(a, Failure::new(std::io::Error::other("gone")));
        assert_eq!(a.to_string(), "disk full");
        assert_eq!(a.error().kind(), std::io::ErrorKind::Other);
    }
}
