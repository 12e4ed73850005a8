//! What a decision on a snapshot leads to ([`Decision`]), and what the component is told of a
//! promotion ([`Tell`]).
//!
//! Only a promoting sidecar checks the first config at start-up: in gate-only mode every restart
//! sees a "first" config, and a check there would reload the component on every restart.

/// What the component is told about a promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tell {
    /// Nothing: gate-only, the first config (the component read it itself at start).
    Silent,
    /// The first config promoted into an empty dir: the component, if it runs yet, reads it itself.
    /// A start-up check finds out whether it started on it, which makes it the rollback baseline.
    StartupCheck,
    /// It read older content: reload.
    Reload,
}

/// What a decision on a snapshot leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Keep what is in force: nothing to write, activate or tell.
    Keep,
    /// The content is already in place (or gate-only): mark it active, no write, no reload.
    Activate,
    /// Write it into the promoted dir, then mark it active, then tell the component as `tell` says.
    Promote { tell: Tell },
}
