//! The rollout as this pod sees it: the rollout in the newest config, the candidate held on this pod
//! and the candidate last promoted. [`Rollouts`] is the [`Gate`]'s part for them, written only here:
//! the rollout read with each judged config, and what the decision on it held or promoted.

use super::messages::{Action, LogLine};
use super::state::Gate;
use crate::snapshot::ContentHash;
use crate::state::{HeldCandidate, Rollout};

impl Gate {
    /// Keeps the rollout as this pod now sees it, with a log line when that changes.
    pub(super) fn rollout_seen(&mut self, rollout: Option<Rollout>, out: &mut Vec<Action>) {
        if rollout != self.rollouts.rollout {
            match &rollout {
                Some(r) => out.push(Action::Log(LogLine::Rollout(Box::new(r.view())))),
                None => out.push(Action::Log(LogLine::RolloutOver)),
            }
        }
        self.rollouts.rollout = rollout;
    }
}

/// The rollout as this pod sees it: the [`Gate`]'s part written only by this file.
#[derive(Debug, Clone, Default)]
pub(super) struct Rollouts {
    /// The rollout candidate held on this pod, as last decided on.
    held: Option<HeldCandidate>,
    /// The rollout in the newest config, as this pod sees it (shown in the status).
    rollout: Option<Rollout>,
    /// The last rollout candidate promoted: its set's hash and its own keys' hash.
    candidate: Option<(ContentHash, ContentHash)>,
}

impl Rollouts {
    /// A judged config was decided on: the candidate it held on this pod, if any.
    pub(super) fn decided(&mut self, held: Option<HeldCandidate>) {
        self.held = held;
    }

    /// The rollout candidate is promoted: its set's hash and its own keys' hash.
    pub(super) fn promoting(&mut self, set: ContentHash, own: ContentHash) {
        self.candidate = Some((set, own));
    }

    /// The rollout in the newest config.
    pub(super) fn rollout(&self) -> Option<&Rollout> {
        self.rollout.as_ref()
    }

    /// The rollout candidate held on this pod, as last decided on.
    pub(super) fn held(&self) -> Option<&HeldCandidate> {
        self.held.as_ref()
    }

    /// The last rollout candidate promoted: its set's hash and its own keys' hash.
    pub(super) fn candidate(&self) -> Option<(ContentHash, ContentHash)> {
        self.candidate
    }
}
