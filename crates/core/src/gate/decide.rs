//! The verdict state of [`Gate`]: the decision on each snapshot (promote, activate, nothing), what
//! is active, on disk and applied, and the contents the component refused.

use super::decision::{Decision, Tell};
use super::state::{Active, Gate, Modes, Newest, REJECTED_KEPT, modes};
use crate::promote::RecordTarget;
use crate::reload::Refusal;
use crate::settings::{Mode, Reload};
use crate::snapshot::{ContentHash, Observed};
use crate::variants::Choice;
use crate::verdict::{Judgement, Verdict};

impl Gate {
    /// At start-up, what the promoted dir already holds (left by a previous run of this sidecar), with
    /// its judgement under [`Gate::settings`]: the promoted dir holds the promoted set, with no variant
    /// keys, so it is judged as it is ([`crate::verdict::judge`]).
    pub(super) fn adopt_on_disk(&mut self, obs: &Observed, j: &Judgement, since: jiff::Timestamp) {
        self.verdicts.on_disk = obs.hash().map(|h| (h, modes(obs)));
        if let Observed::Config(_) = obs
            && self.passes(obs, j)
        {
            self.activate(obs.hash(), modes(obs), j, None, since);
        } else if let Some(h) = obs.hash() {
            self.verdicts.outside = Some((h, j.version.clone()));
        }
    }

    /// After a settings change, the active config (`obs`, as read back) judged again (`j`, by
    /// [`crate::verdict::judge`] under [`Gate::settings`]), as a restart with these settings would: one that no
    /// longer passes stops being active, so readiness follows the policy. `obs` of other content than
    /// the active config is ignored. Returns true when the active config was dropped.
    pub(super) fn rejudge_active(&mut self, obs: &Observed, j: &Judgement) -> bool {
        let Some(a) = self.verdicts.active.clone() else {
            return false;
        };
        if obs.hash() != Some(a.hash) {
            return false;
        }
        if self.passes(obs, j) {
            self.activate(Some(a.hash), modes(obs), j, a.variant.clone(), a.since);
            false
        } else {
            self.verdicts.outside = Some((a.hash, a.version.clone()));
            self.verdicts.active = None;
            true
        }
    }

    pub(super) fn passes(&self, obs: &Observed, j: &Judgement) -> bool {
        j.verdict == Verdict::Accepted
            || (self.settings().mode == Mode::Observe && matches!(obs, Observed::Config(_)))
    }

    /// Says what to do with the newest snapshot, given what [`crate::variants::choose`] made of it under
    /// [`Gate::settings`]. The choice holds what to promote (with variants, the chosen variant's set,
    /// not the read itself).
    pub(super) fn decide(&mut self, mut choice: Choice) -> (Choice, Decision) {
        let hash = choice.observed.hash();
        if let Some(why) = hash.and_then(|h| self.rejection(h)) {
            // Not offered to the component again: it said no to these very bytes.
            choice.judgement.verdict = Verdict::RejectedByComponent;
            choice.judgement.reason = why;
            self.verdicts.newest = Some(Newest {
                hash,
                modes: modes(&choice.observed),
                judgement: choice.judgement.clone(),
                variant: choice.variant.clone(),
            });
            return (choice, Decision::Keep);
        }
        let (j, obs) = (&choice.judgement, &choice.observed);
        let action = match hash {
            Some(h) if self.passes(obs, j) => {
                let m = modes(obs);
                let in_place = if self.setup.gate_only() {
                    self.verdicts.active.as_ref().map(|a| a.hash) == Some(h)
                } else {
                    !self.reads.repair()
                        && self
                            .verdicts
                            .on_disk
                            .as_ref()
                            .is_some_and(|(oh, om)| *oh == h && *om == m)
                };
                if in_place {
                    let same = self.verdicts.active.as_ref().is_some_and(|a| {
                        a.hash == h
                            && a.verdict == j.verdict
                            && self.verdicts.active_modes == m
                            && a.variant == choice.variant
                    });
                    if same {
                        Decision::Keep
                    } else {
                        Decision::Activate
                    }
                } else {
                    // Nothing older was read before (gate-only: the component read the first config
                    // itself at start; promoting: the promoted dir was empty), so the component, if
                    // it runs yet, reads this one itself.
                    let older = if self.setup.gate_only() {
                        self.verdicts.active.is_some()
                    } else {
                        self.verdicts.on_disk.is_some()
                    };
                    Decision::Promote {
                        tell: match (older, self.setup.gate_only()) {
                            (true, _) => Tell::Reload,
                            // Gate-only, the first config seen after every restart is "first": a
                            // check there would reload on every restart.
                            (false, true) => Tell::Silent,
                            (false, false) => Tell::StartupCheck,
                        },
                    }
                }
            }
            _ => Decision::Keep,
        };
        self.verdicts.newest = Some(Newest {
            hash,
            modes: modes(obs),
            judgement: j.clone(),
            variant: choice.variant.clone(),
        });
        (choice, action)
    }

    /// Records that the newest snapshot is now in place.
    pub(super) fn activated(&mut self, now: jiff::Timestamp) {
        if let Some(n) = self.verdicts.newest.clone() {
            self.activate(n.hash, n.modes, &n.judgement, n.variant, now);
        }
    }

    pub(super) fn activate(
        &mut self,
        hash: Option<ContentHash>,
        modes: Modes,
        j: &Judgement,
        variant: Option<String>,
        since: jiff::Timestamp,
    ) {
        let Some(hash) = hash else { return };
        let since = match &self.verdicts.active {
            Some(a) if a.hash == hash => a.since,
            _ => since,
        };
        self.verdicts.active = Some(Active {
            hash,
            version: j.version.clone(),
            since,
            verdict: j.verdict,
            variant,
        });
        if !self.setup.gate_only() {
            self.verdicts.on_disk = Some((hash, modes.clone()));
        }
        self.verdicts.active_modes = modes;
        self.verdicts.promote_error = None;
        self.verdicts.started = true;
        self.verdicts.outside = None;
    }

    /// The reason shown for content the component refused: its refusal, worded.
    fn rejection(&self, h: ContentHash) -> Option<String> {
        self.refusal_of(h)
            .map(|why| format!("the component rejected it: {why}"))
    }

    /// How the component refused `h`, if it did.
    pub(super) fn refusal_of(&self, h: ContentHash) -> Option<&Refusal> {
        self.verdicts
            .rejected
            .iter()
            .find(|(r, _)| *r == h)
            .map(|(_, r)| r)
    }

    /// The component confirmed it runs `hash` (a reload of it succeeded, or it started on it). Returns
    /// true when that is what the promoted dir holds, so its dir is to be kept as the rollback base.
    pub(super) fn reloaded(&mut self, hash: ContentHash, now: jiff::Timestamp) -> bool {
        let Some(a) = self.verdicts.active.as_ref().filter(|a| a.hash == hash) else {
            return false;
        };
        let since = match &self.verdicts.applied {
            Some(p) if p.hash == hash => p.since,
            _ => now,
        };
        self.verdicts.applied = Some(Active { since, ..a.clone() });
        !self.setup.gate_only() && self.verdicts.on_disk.as_ref().map(|(h, _)| *h) == Some(hash)
    }

    /// At start-up, the config the component applied last, as kept in the promoted dir by a previous
    /// run (`since`: when that was recorded). It is the rollback base again, as before the restart.
    pub(super) fn adopt_applied(&mut self, obs: &Observed, j: &Judgement, since: jiff::Timestamp) {
        let Some(hash) = obs.hash().filter(|h| !self.is_rejected(*h)) else {
            return;
        };
        self.verdicts.applied = Some(Active {
            hash,
            version: j.version.clone(),
            since,
            verdict: j.verdict,
            variant: None,
        });
    }

    /// At start-up, the variant keys the active and the applied config were promoted from, as
    /// recorded beside each (shown only with the variants setting in force).
    pub(super) fn adopt_variants(&mut self, (active, applied): (Option<String>, Option<String>)) {
        if self.settings().variants.is_none() {
            return;
        }
        if let Some(a) = &mut self.verdicts.active {
            a.variant = active;
        }
        if let Some(a) = &mut self.verdicts.applied {
            a.variant = applied;
        }
    }

    /// At start-up, the contents the component refused, as recorded by a previous run (oldest first):
    /// they are not offered to it again.
    pub(super) fn adopt_rejected(&mut self, refused: Vec<(ContentHash, Refusal)>) {
        for (h, why) in refused {
            self.remember_rejected(h, why);
        }
    }

    /// The reload target in force changed from `before`: what was refused under it is no longer
    /// held (an answer of a wrong target is no verdict on a config; a right one refuses it again).
    /// The number of refusals forgotten.
    pub(super) fn forget_refusals_of(&mut self, before: &Reload) -> usize {
        if self.settings().reload == *before {
            return 0;
        }
        std::mem::take(&mut self.verdicts.rejected).len()
    }

    /// The contents the component refused that are remembered, oldest first: what a restart must know.
    pub fn rejected_record(&self) -> &[(ContentHash, Refusal)] {
        &self.verdicts.rejected
    }

    /// Whether the component refused `hash` (then it is not offered to it again, not even by a reload
    /// owed from before a restart).
    pub(super) fn is_rejected(&self, hash: ContentHash) -> bool {
        self.verdicts.is_rejected(hash)
    }

    /// At start-up: when the promoted dir holds content the component refused (a previous run stopped
    /// between recording the refusal and rolling back) and an applied config is known, the refused
    /// content and the applied config to roll back to.
    pub(super) fn refused_in_place(&self) -> Option<(ContentHash, ContentHash, Refusal)> {
        let (on_disk, _) = self
            .verdicts
            .on_disk
            .as_ref()
            .filter(|_| !self.setup.gate_only())?;
        let base = self.verdicts.applied.as_ref().map(|a| a.hash)?;
        let refusal = self.refusal_of(*on_disk)?;
        (base != *on_disk).then(|| (*on_disk, base, refusal.clone()))
    }

    fn remember_rejected(&mut self, hash: ContentHash, why: Refusal) {
        self.verdicts.rejected.retain(|(h, _)| *h != hash);
        if self.verdicts.rejected.len() >= REJECTED_KEPT {
            self.verdicts.rejected.remove(0);
        }
        self.verdicts.rejected.push((hash, why));
    }

    /// The component refused `hash`. Returns the applied config to roll back to, when the refused one
    /// is what the promoted dir holds and an applied one is known.
    pub(super) fn rejected_by_component(
        &mut self,
        hash: ContentHash,
        why: &Refusal,
    ) -> Option<ContentHash> {
        self.remember_rejected(hash, why.clone());
        // A rollout candidate is refused for its own keys too: an edit of a stable key beside it
        // makes another set, not another candidate.
        if let Some((_, own)) = self.rollouts.candidate().filter(|(set, _)| *set == hash) {
            self.remember_rejected(own, why.clone());
        }
        let reason = self.rejection(hash).unwrap_or_default();
        if let Some(n) = self
            .verdicts
            .newest
            .as_mut()
            .filter(|n| n.hash == Some(hash))
        {
            n.judgement.verdict = Verdict::RejectedByComponent;
            n.judgement.reason = reason;
        }
        if self
            .verdicts
            .applied
            .as_ref()
            .is_some_and(|a| a.hash == hash)
        {
            self.verdicts.applied = None;
        }
        let base = self.verdicts.applied.as_ref().map(|a| a.hash)?;
        (!self.setup.gate_only() && self.verdicts.on_disk.as_ref().map(|(h, _)| *h) == Some(hash))
            .then_some(base)
    }

    /// The applied config is back in the promoted dir, with these key modes (as read back, so that
    /// the same snapshot seen again is no change to promote).
    pub(super) fn rolled_back(&mut self, modes: Modes) {
        if let Some(a) = self.verdicts.applied.clone() {
            self.verdicts.on_disk = Some((a.hash, modes.clone()));
            self.verdicts.active_modes = modes;
            self.verdicts.active = Some(a);
            self.rollbacks.put_back();
        }
    }

    /// The applied config's version.
    pub(super) fn applied_version(&self) -> Option<String> {
        self.verdicts
            .applied
            .as_ref()
            .and_then(|a| a.version.clone())
    }

    pub(super) fn promotion_failed(&mut self, why: crate::promote::Failure) {
        self.verdicts.promote_error = Some(why);
    }

    /// What the gate took for the rollback base is not kept on disk: there is none.
    pub(super) fn base_lost(&mut self) {
        self.verdicts.applied = None;
    }

    /// The first config, whose dir was kept beside a later promotion, is what the component ran:
    /// the rollback base, applied since `now`.
    pub(super) fn baseline_applied(&mut self, first: Active, now: jiff::Timestamp) {
        self.verdicts.applied = Some(Active {
            since: now,
            ..first
        });
    }
}

/// The verdict state: what is active, on disk and newest, what the component applied and refused.
/// The [`Gate`]'s part written only by this file's decisions; the rest of the gate reads it.
#[derive(Debug, Clone, Default)]
pub(super) struct Verdicts {
    /// What the promoted dir holds (promote mode only), with the key modes: a mode-only change has
    /// the same content hash but must still be promoted.
    on_disk: Option<(ContentHash, Modes)>,
    /// The key modes of the active config.
    active_modes: Modes,
    active: Option<Active>,
    newest: Option<Newest>,
    /// Why the last promotion failed (the previous config is kept).
    promote_error: Option<crate::promote::Failure>,
    /// A config was active once.
    started: bool,
    /// The config the component confirmed it runs.
    applied: Option<Active>,
    /// Contents the component refused, newest last, with its reason.
    rejected: Vec<(ContentHash, Refusal)>,
    /// The config in the promoted dir that the settings in force no longer accept (the component
    /// may still run it), with its version, while nothing is active.
    outside: Option<(ContentHash, Option<String>)>,
}

impl Verdicts {
    /// What the promoted dir holds (promote mode only), with its key modes.
    pub(super) fn on_disk(&self) -> Option<&(ContentHash, Modes)> {
        self.on_disk.as_ref()
    }

    pub(super) fn active(&self) -> Option<&Active> {
        self.active.as_ref()
    }

    pub(super) fn newest(&self) -> Option<&Newest> {
        self.newest.as_ref()
    }

    /// Why the last promotion failed.
    pub(super) fn promote_error(&self) -> Option<&crate::promote::Failure> {
        self.promote_error.as_ref()
    }

    /// Whether a config was active once.
    pub(super) fn started(&self) -> bool {
        self.started
    }

    /// The config the component confirmed it runs.
    pub(super) fn applied(&self) -> Option<&Active> {
        self.applied.as_ref()
    }

    /// Whether the component refused `hash`.
    pub(super) fn is_rejected(&self, hash: ContentHash) -> bool {
        self.rejected.iter().any(|(h, _)| *h == hash)
    }

    /// The config in the promoted dir the settings in force no longer accept, with its version.
    pub(super) fn outside(&self) -> Option<&(ContentHash, Option<String>)> {
        self.outside.as_ref()
    }
}

/// At start-up, the refusals of a previous run's record that still hold under the reload target in
/// force: none when it was made under another target (or names none that reads), and of an earlier
/// version's record (which names no target) only those that are refusals under today's rule
/// ([`Refusal::holds`]: a 404 or a 403 it recorded said the target was wrong, not the config).
pub fn held_refusals(
    record_target: &RecordTarget,
    entries: Vec<(ContentHash, Refusal)>,
    target: &Reload,
) -> Vec<(ContentHash, Refusal)> {
    match record_target {
        RecordTarget::Named(t) if t.same_target(target) => entries,
        RecordTarget::Named(_) | RecordTarget::Unreadable => Vec::new(),
        RecordTarget::Unnamed => entries.into_iter().filter(|(_, r)| r.holds()).collect(),
    }
}
