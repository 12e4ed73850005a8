//! The [`Notice`]s the gate sends: what an operator acts on (a config held, missing or refused, a
//! reload failing, a settings problem, a start on the known-good, the end of a hold), each at the
//! event it happens at. [`Gate::handle`](super::state::Gate::handle) compares what it shows before
//! and after every event ([`Shown`], typed, never its words), so a change that lasts less than one
//! published status is still told; the pod reporter only words them.
//!
//! A routine accepted promotion is no notice: the pod's conditions already say what is active, and a
//! notice per pod per healthy change is a write per pod the API server stores for nothing.

use super::problems::SettingsProblem;
use super::state::Gate;
use crate::snapshot::PrintedHash;
use crate::state::{ActiveView, AppliedView, CandidateView, KnownGoodView, Notice};
use crate::verdict::Verdict;

/// What the notices are told from, as of one event.
#[derive(Debug, Clone, Default)]
pub(super) struct Shown {
    known_good: Option<KnownGoodView>,
    active: Option<ActiveView>,
    candidate: Option<CandidateView>,
    applied: Option<AppliedView>,
    reload_failed: bool,
    problems: Vec<SettingsProblem>,
}

impl Gate {
    /// What the gate shows now, as far as notices go.
    pub(super) fn shown(&self) -> Shown {
        Shown {
            known_good: self.known_good_view(),
            active: self.active_view(),
            candidate: self.candidate_view(),
            applied: self.applied_view(),
            // Failing since the last attempt that reached the component: an attempt starting
            // again is no new failure.
            reload_failed: self.reloads.view().consecutive_failures > 0,
            problems: self.in_force.problems().to_vec(),
        }
    }

    /// The notices that going from `before` to `now` calls for, in the order they are sent.
    pub(super) fn notices(&mut self, before: &Shown, now: &Shown) -> Vec<Notice> {
        let mut out = Vec::new();
        let kg_sha = |s: &Shown| s.known_good.as_ref().map(|k| k.sha256);
        if let Some(k) = &now.known_good
            && kg_sha(before) != kg_sha(now)
        {
            out.push(Notice::KnownGood(k.clone()));
        }
        // A hold told ends when a config becomes active and none is held back any more (a
        // rollback puts one in force while the refused config is still held, which its own notice
        // says); the accepted config judged on the way to its switch does not end it.
        let active_sha = |s: &Shown| s.active.as_ref().map(|a| a.sha256);
        if let Some(a) = &now.active
            && active_sha(before) != active_sha(now)
            && (a.verdict != Verdict::Accepted || (self.told.hold && !holding_back(now)))
        {
            out.push(Notice::Active(a.clone()));
            self.told.hold = false;
        } else if now.candidate.is_none() {
            // The newest config is in force again without a change of it: nothing ends.
            self.told.hold = false;
        }
        let candidate = |s: &Shown| -> Option<(Option<PrintedHash>, Verdict, String)> {
            s.candidate
                .as_ref()
                .map(|c| (c.sha256, c.verdict, c.reason.clone()))
        };
        if let Some(c) = &now.candidate
            && c.verdict != Verdict::Accepted
            && candidate(before) != candidate(now)
        {
            out.push(Notice::Held {
                candidate: c.clone(),
                active: now.active.clone(),
                applied: now.applied.clone(),
            });
            self.told.hold = true;
        }
        if now.reload_failed && !before.reload_failed {
            out.push(Notice::ReloadFailed {
                target: self.settings().reload.to_string(),
                error: self.reloads.view().last_error.clone(),
            });
        }
        // A bad or unknown annotation, once per set of problems: the values in force before it
        // are kept and readiness stays with the config, so a notice is where it shows.
        if !now.problems.is_empty() && now.problems != before.problems {
            out.push(Notice::SettingsProblem(super::problems::shown(
                &now.problems,
            )));
        }
        out
    }
}

/// Whether `s` holds back a newest config that a notice reported (held, missing, refused).
fn holding_back(s: &Shown) -> bool {
    s.candidate
        .as_ref()
        .is_some_and(|c| c.verdict != Verdict::Accepted)
}

/// What a notice already told, so that what follows is told as its end: the [`Gate`]'s part written
/// only by this file.
#[derive(Debug, Clone, Default)]
pub(super) struct Told {
    /// A notice said the newest config is held, and no config became active since: the one that
    /// does is told as the end of the hold.
    hold: bool,
}
