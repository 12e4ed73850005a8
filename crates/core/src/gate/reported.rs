//! What the reload worker reported, and what it leads to: a config applied (the rollback base,
//! a known-good trial), refused (the rollback's phase), or the first config's start-up confirmed by
//! an answer about later content; and the owed reload sent to the target in force.

use super::messages::{Action, AppliedBy, LogLine, Now};
use super::state::{Active, Gate};
use crate::reload::Outcome;
use crate::settings::Reload;
use crate::snapshot::ContentHash;

impl Gate {
    /// Sends the owed reload (or start-up check), if any, to the target in force.
    pub(super) fn send_owed(&self, out: &mut Vec<Action>) {
        if let Some(r) = self.reloads.request(self.settings()) {
            out.push(Action::Reload(r));
        }
    }

    pub(super) fn reload_outcome(&mut self, o: Outcome, now: Now, out: &mut Vec<Action>) {
        self.reloads.report(&o);
        match &o {
            Outcome::Reloaded(sha) => self.component_answered(*sha, false, now, out),
            Outcome::Rejected { sha256, .. } => self.component_answered(*sha256, true, now, out),
            // Every process read it itself at start-up.
            Outcome::NothingToReload { sha256, .. } => {
                self.component_answered(*sha256, false, now, out)
            }
            _ => {}
        }
        let by = match (&o, &self.settings().confirm, &self.settings().reload) {
            (Outcome::NothingToReload { .. }, _, _) => AppliedBy::Start,
            (_, Some(_), _) => AppliedBy::Metrics,
            (_, None, Reload::Signal { .. }) => AppliedBy::SignalSent,
            _ => AppliedBy::Answer,
        };
        match o {
            Outcome::Reloaded(sha) | Outcome::NothingToReload { sha256: sha, .. } => {
                // Done: no longer owed, here or on disk.
                self.reloads.drop(sha);
                if !self.setup.gate_only() {
                    out.push(Action::ClearReloadOwed {
                        sha,
                        refused: false,
                    });
                }
                // The component runs it (with nothing to reload, whichever process runs or comes
                // read it at start-up): its promoted dir is kept as the rollback base.
                if self.reloaded(sha, now.wall) {
                    let version = self.applied_version();
                    out.push(Action::MarkApplied {
                        sha,
                        version: version.clone(),
                        by,
                    });
                    self.start_trial(sha, version.as_deref(), now, out);
                }
            }
            Outcome::Rejected { sha256, refusal } => self.refused(sha256, refusal, out),
            Outcome::Attempting | Outcome::Failed(_) | Outcome::Waiting(_) => {}
        }
    }

    /// The component answered about `sha`. While the first config's start-up check has not
    /// concluded, an answer to the reload of later content is evidence too: the component is up,
    /// and ran what was promoted before it, the first config, whose kept dir is then the rollback
    /// base.
    pub(super) fn component_answered(
        &mut self,
        sha: ContentHash,
        refused: bool,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(first) = self.baseline.first.take() else {
            return;
        };
        let kept = std::mem::take(&mut self.baseline.kept);
        if !kept || self.verdicts.applied().is_some() || self.setup.gate_only() {
            return;
        }
        // The first config itself, run: the base. Later content refused: the component ran the
        // first until then, the base. Later content run: that is applied instead (its mark drops
        // the kept dir).
        if (sha == first.hash) == refused {
            return;
        }
        out.push(Action::AdoptBaseline);
        out.push(Action::Log(LogLine::BaselineApplied {
            sha: first.hash,
            version: first.version.clone(),
        }));
        self.baseline_applied(first, now.wall);
    }
}

/// The baseline: the first config promoted into an empty dir, until the component's answers say
/// whether it started on it. The [`Gate`]'s part written only by this file.
#[derive(Debug, Clone, Default)]
pub(super) struct Baseline {
    /// The first config promoted into an empty dir, while nothing says yet whether the component
    /// started on it.
    first: Option<Active>,
    /// Its dir is kept beside a later promotion (the baseline).
    kept: bool,
}

impl Baseline {
    /// The first config promoted into an empty dir (`active` after its switch): the component's
    /// start-up check tells whether it runs it.
    pub(super) fn promoted(&mut self, active: Option<Active>) {
        self.first = active;
        self.kept = false;
    }

    /// The first config's dir is kept beside a later promotion.
    pub(super) fn keep(&mut self) {
        self.kept = true;
    }

    /// The first config, while nothing says yet whether the component started on it.
    pub(super) fn first(&self) -> Option<&Active> {
        self.first.as_ref()
    }

    /// Whether its dir is kept beside a later promotion.
    pub(super) fn is_kept(&self) -> bool {
        self.kept
    }
}
