//! [`Gate::handle`]: one event in, the actions it leads to out. Every state change of the loop
//! happens here, at the time passed in.

use std::time::Instant;

use super::decision::{Decision, Tell};
use super::grace::Step;
use super::messages::{Action, Anew, Count, Event, Files, Found, JudgedLine, LogLine, Now, Seen};
use super::problems::SettingsProblem;
use super::reloads::Owed;
use super::small::is_small_snapshot;
use super::state::{Checking, Gate, Promotion, RolloutSeen, modes};
use crate::annotations::Annotations;
use crate::reload::{Kind, Outcome};
use crate::settings::{Reload, Settings, Validate};
use crate::snapshot::Observed;
use crate::state::{ReloadView, Status};
use crate::validate::Checked;
use crate::variants::Choice;
use crate::verdict::Verdict;

impl Gate {
    /// Handles `event` at `now`; returns what to carry out, in order.
    pub fn handle(&mut self, event: Event, now: Now) -> Vec<Action> {
        let mut out = Vec::new();
        let before = self.shown();
        match event {
            Event::Start(read) => self.start(read, &mut out),
            Event::Adopted(found) => self.adopted(*found, now, &mut out),
            Event::Files(files) => self.files(files, &mut out),
            Event::Resync => {
                // What the retry would read is read now; so is a change whose spread is due, which
                // must not wait for a timer the resync took the place of. A rollback owed is tried
                // again now, too.
                self.retry.take_due(now.at);
                if self.take_spread_due(now.at) {
                    self.reads.anew(Anew::SpreadDue);
                }
                out.push(Action::Tidy);
                // The promoted dir is compared with what was promoted before the config is read,
                // so that a change behind confgate's back is repaired by this very read.
                if !self.setup.gate_only()
                    && self.verdicts.on_disk().is_some()
                    && !self.work.changing_the_dir()
                {
                    out.push(Action::VerifyPromoted);
                }
                self.retry_rollback(&mut out);
                self.files(Files::ALL, &mut out);
            }
            Event::Timer => {
                let recheck = self.grace.take_due(now.at);
                let retry = self.retry.take_due(now.at);
                let spread = self.take_spread_due(now.at);
                let check = self.checks.take_due(now.at);
                if check {
                    // The content is read and judged again, and its check run again.
                    self.reads.anew(Anew::CheckAgain);
                }
                self.take_trial_due(now.at, &mut out);
                if spread {
                    // The newest config is promoted now, whatever was judged while it waited.
                    self.reads.anew(Anew::SpreadDue);
                }
                if retry {
                    self.retry_rollback(&mut out);
                }
                if recheck {
                    self.files(Files::ALL, &mut out);
                } else if retry || spread || check {
                    self.files(Files::CONFIG, &mut out);
                }
            }
            Event::Annotations(read) => self.annotations(read, now, &mut out),
            Event::Judged {
                seen,
                choice,
                rollout,
                small,
            } => {
                self.reads.read_small(small);
                if let Some(choice) = choice {
                    self.rollout_seen(rollout, &mut out);
                    let rollout = RolloutSeen::of(self.rollouts.rollout());
                    self.judged(seen, *choice, rollout, now, &mut out);
                }
            }
            Event::Rejudged(obs, j) => {
                let j = if self.setup.secret() {
                    crate::verdict::for_a_secret(
                        j,
                        &self.settings().version_from,
                        self.setup.source_kind(),
                    )
                } else {
                    j
                };
                if self.rejudge_active(&obs, &j) {
                    out.push(Action::Log(LogLine::NoLongerActive {
                        sha: obs.hash().map(|h| h.short()).unwrap_or_default(),
                    }));
                }
            }
            Event::Verified(found) => self.verified(&found, &mut out),
            Event::Switched(r) => self.switched(r, now, &mut out),
            Event::Validated { sha, checked } => {
                if !self.known_good_validated(sha, &checked, &mut out) {
                    self.validated(sha, checked, now, &mut out);
                }
            }
            Event::BaseJudged(obs, j) => self.base_judged(&obs, &j, &mut out),
            Event::RolledBack(r) => self.rolled_back_to(r, now, &mut out),
            Event::Reload(o) => {
                let refused = matches!(o, Outcome::Rejected { .. });
                self.reload_outcome(o, now, &mut out);
                // A rollout's candidate refused here: the same ConfigMap now gives this pod its
                // stable set, so it is judged again, once what the refusal leads to is done.
                if refused && self.rollouts.rollout().is_some() {
                    self.reads.anew(Anew::CandidateRefused);
                    self.judge(&mut out);
                }
            }
            Event::Source(view) => self.reads.source_seen(view),
            Event::Component(read) => self.component_read(read, now, &mut out),
            Event::Recorded(r) => self.known_good_recorded(r, now, &mut out),
            Event::KnownGoodRead(r) => self.known_good_read(r, &mut out),
            Event::KnownGoodJudged(j) => self.known_good_judged(j, &mut out),
            Event::Watch { errors, problem } => {
                if errors > 0 {
                    out.push(Action::Count(Count::WatchErrors(errors)));
                }
                if problem != *self.reads.watch_error() {
                    out.push(Action::Log(LogLine::Watch(problem.clone())));
                    self.reads.watch_problem(problem);
                }
            }
        }
        // What this event changed of what an operator acts on, told now: the next published
        // status may already show something else.
        let notices = self.notices(&before, &self.shown());
        out.extend(notices.into_iter().map(Action::Notice));
        out
    }

    /// The earliest deadline the gate waits for (the end of the annotations grace period, a
    /// promotion's retry, a change's share of the reload spread): [`Event::Timer`] is due then. Whatever the gate is to do later, rather than
    /// now, is state with a deadline that joins this one, and is done on the timer.
    pub fn wake_at(&self) -> Option<Instant> {
        [
            self.grace.recheck_at(),
            self.retry.at(),
            self.spread_due_at(),
            self.checks.retry_at(),
            self.trial_due_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The status to publish; `requested` is the reload worker's count of requests.
    pub fn published(&self, requested: u64) -> Status {
        let mut reload: ReloadView = self.reloads.view().clone();
        reload.target = self.settings().reload.to_string();
        reload.requested = requested;
        let mut s = self.status(reload);
        s.watch_error.clone_from(self.reads.watch_error());
        s.source.clone_from(self.reads.source());
        s
    }

    fn start(
        &mut self,
        read: Result<Option<Annotations>, crate::annotations::ReadFailure>,
        out: &mut Vec<Action>,
    ) {
        // Said against the flags' values, as if nothing were in force before: the values last in
        // force before a restart (`with_last_in_force`) are only what a bad annotation keeps.
        let before = self.in_force.base().clone();
        let ann = self.grace.first(read);
        self.set_annotations(ann);
        self.settings_notes(&before, &[], out);
        self.record_settings(out);
        if !self.setup.gate_only() {
            out.push(Action::Adopt {
                settings: Box::new(self.settings().clone()),
            });
        }
    }

    /// What a previous run left: what is on disk, what the component applied and refused, and a
    /// reload it was owed.
    fn adopted(&mut self, found: Found, now: Now, out: &mut Vec<Action>) {
        let Found {
            on_disk,
            judgement,
            refused,
            applied,
            owed,
            variants,
        } = found;
        self.adopt_on_disk(&on_disk, &judgement, now.wall);
        self.adopt_rejected(refused);
        if let Some((applied, j, since)) = applied {
            self.adopt_applied(&applied, &j, since.unwrap_or(now.wall));
            if let Some(sha) = applied.hash() {
                out.push(Action::Log(LogLine::AppliedBase {
                    sha,
                    version: self.applied_version(),
                }));
            }
        }
        self.adopt_variants(variants);
        // A reload owed by a previous run: the content is in place, the component was never told.
        if let (Some(h), Some(o)) = (on_disk.hash(), owed)
            && h == o
        {
            if self.is_rejected(h) {
                // The refusal came after the marker was written; it is not sent again.
                out.push(Action::Log(LogLine::OwedRefused { sha: h }));
                out.push(Action::ClearReloadOwed {
                    sha: h,
                    refused: true,
                });
            } else {
                out.push(Action::Log(LogLine::OwedFromBefore {
                    sha: h,
                    version: judgement.version.clone(),
                }));
                self.reloads.owe(Owed {
                    kind: Kind::Reload,
                    sha: h,
                    version: judgement.version,
                    // Every matching process: which ones started before the promotion is unknown now.
                    promoted_at: None,
                });
            }
        }
        // Stopped between recording a refusal and rolling back: the rollback is finished now (and
        // its reload requested).
        if let Some((refused, base, refusal)) = self.refused_in_place() {
            out.push(Action::Log(LogLine::RefusedInPlace { sha: refused }));
            self.roll_back(refused, base, refusal, out);
        } else {
            self.send_owed(out);
        }
    }

    fn files(&mut self, files: Files, out: &mut Vec<Action>) {
        if files.annotations {
            self.reads.want_config(files.config);
            out.push(Action::ReadAnnotations);
        } else if files.config {
            self.judge(out);
        }
    }

    pub(super) fn judge(&mut self, out: &mut Vec<Action>) {
        out.push(Action::Judge {
            settings: Box::new(self.settings().clone()),
            unless: self.reads.last().unless(),
            anew: self.reads.last().anew(),
            bucket: self.share.bucket(),
            // A candidate the component refused is held on this pod: the rollout falls back to
            // stable.
            refused: self.rejected_record().to_vec(),
            on_loop: self.reads.small_before(),
        });
    }

    fn annotations(
        &mut self,
        read: Result<Option<Annotations>, crate::annotations::ReadFailure>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let config = self.reads.take_config_wanted();
        let (annotations, note, lasting) = match self.grace.read(read, now.at) {
            Step::Keep { began, why } => {
                if began {
                    out.push(Action::Log(LogLine::AnnotationsMissing { why }));
                }
                if config {
                    self.judge(out);
                }
                return;
            }
            Step::Apply {
                annotations,
                note,
                back,
                lasting,
            } => {
                if back {
                    out.push(Action::Log(LogLine::AnnotationsBack));
                }
                (annotations, note, lasting)
            }
        };
        self.set_annotations_note(note);
        let (before, before_problems) =
            (self.settings().clone(), self.in_force.problems().to_vec());
        let changed = self.set_annotations(annotations);
        self.settings_notes(&before, &before_problems, out);
        self.record_settings(out);
        if lasting {
            out.push(Action::Log(LogLine::AnnotationsGone { changed }));
        }
        if changed {
            let s = &self.settings();
            out.push(Action::Log(LogLine::SettingsChanged {
                accepts: s.accepts_text().map(str::to_owned),
                mode: s.mode,
                reload: s.reload.clone(),
            }));
            self.reads.anew(Anew::SettingsChanged);
            // The active config judged again under them, as a restart would.
            if !self.setup.gate_only() {
                out.push(Action::RejudgeActive {
                    settings: Box::new(self.settings().clone()),
                });
            }
            // Refused under another target: not held against those contents now.
            let count = self.forget_refusals_of(&before.reload);
            if count > 0 {
                out.push(Action::Log(LogLine::RefusalsForgotten { count }));
                if !self.setup.gate_only() {
                    out.push(Action::RecordRejected(Vec::new()));
                }
            }
            // The owed request carries the target and the confirmation in force: a corrected one of
            // either is used at once.
            if (&self.settings().reload, &self.settings().confirm)
                != (&before.reload, &before.confirm)
            {
                self.send_owed(out);
            }
        }
        if changed || config {
            self.judge(out);
        }
    }

    /// One line per settings problem that appeared or cleared, and per setting an annotation now
    /// overrides (or, removed, gives back to the flag), so a typo'd annotation is never silent.
    fn settings_notes(
        &self,
        before: &Settings,
        before_problems: &[SettingsProblem],
        out: &mut Vec<Action>,
    ) {
        for p in self.in_force.problems() {
            if !before_problems.contains(p) {
                out.push(Action::Log(LogLine::Problem(p.clone())));
            }
        }
        for p in before_problems {
            if !self.in_force.problems().contains(p) {
                out.push(Action::Log(LogLine::ProblemCleared(p.clone())));
            }
        }
        let base = self.in_force.base().describe();
        let new = self.settings().describe();
        // Compared as values, not as text: a changed password shows as the same text.
        let settings = crate::settings::SETTINGS.iter();
        for (i, ((b, n), setting)) in base.iter().zip(new).zip(settings).enumerate() {
            if setting.same(self.settings(), before) {
                continue;
            }
            // Gone only when no annotation gives it: one that equals the flag's value (a spread of
            // "0") is still in force.
            let annotated = self.in_force.annotated(i);
            out.push(Action::Log(
                if !annotated && setting.same(self.settings(), self.in_force.base()) {
                    LogLine::AnnotationGone {
                        setting: n.0,
                        value: n.2,
                    }
                } else {
                    LogLine::AnnotationOverrides {
                        setting: n.0,
                        annotation: n.1,
                        value: n.2,
                        overrides: b.2.clone(),
                    }
                },
            ));
        }
    }

    pub(super) fn judged(
        &mut self,
        seen: Seen,
        choice: Choice,
        rollout: RolloutSeen,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let mut choice = choice;
        if self.setup.secret() {
            choice.judgement = crate::verdict::for_a_secret(
                choice.judgement,
                &self.settings().version_from,
                self.setup.source_kind(),
            );
        }
        if self.superseded(&seen, &choice, &rollout, out) {
            return;
        }
        let (mut choice, mut decision) = self.decide(choice);
        if let (Decision::Promote { .. }, Observed::Config(snapshot)) = (decision, &choice.observed)
            && self.settings().validate != Validate::None
            && !self.setup.gate_only()
        {
            let sha = snapshot.hash();
            match self
                .checks
                .checked()
                .filter(|c| c.sha == sha && c.check == self.settings().validate)
            {
                // Not promoted before the checker says: its answer comes back as `Validated`.
                None => {
                    // One check at a time (both stage into the one candidate dir): an accepted
                    // candidate makes the known-good's check moot, so it ends first.
                    if self.known_good_check_ended() {
                        out.push(Action::CancelCheck);
                    }
                    out.push(Action::Validate {
                        snapshot: snapshot.clone(),
                        check: self.settings().validate.clone(),
                        timeout: self.settings().validate_timeout,
                    });
                    self.work.check(Checking {
                        seen,
                        choice,
                        rollout,
                        sha,
                        check: self.settings().validate.clone(),
                        since: now.wall,
                    });
                    return;
                }
                Some(by) if by.answer != Checked::Passed => {
                    let by = by.clone();
                    choice.judgement = self.refused_by_checker(choice.judgement, &by);
                    (choice, decision) = self.decide(choice);
                }
                Some(_) => {}
            }
        }
        // With variants, what is promoted (and hashed) is the chosen variant's set.
        let (j, obs, variant) = (choice.judgement, choice.observed, choice.variant);
        let promoted_variant = variant.clone();
        out.push(Action::Count(Count::Candidate(j.verdict)));
        // A rollout candidate held on this pod is a judgement too, counted under its verdict.
        if let Some(h) = &rollout.held {
            out.push(Action::Count(Count::Candidate(h.verdict)));
        }
        self.rollouts.decided(rollout.held);
        if let (Decision::Promote { .. }, Some(own), Some(set)) =
            (decision, rollout.candidate, obs.hash())
        {
            self.rollouts.promoting(set, own);
        }
        let judged = JudgedLine {
            accepted: j.verdict == Verdict::Accepted,
            verdict: j.verdict,
            version: j.version.clone().unwrap_or_default(),
            variant: variant.unwrap_or_default(),
            sha: obs.hash().map(|h| h.short()).unwrap_or_default(),
            reason: j.reason.to_string(),
        };
        self.reads.judged(seen);
        if !matches!(decision, Decision::Promote { .. }) {
            self.spread_done();
        }
        match (decision, obs) {
            (Decision::Promote { tell }, Observed::Config(_))
                if self.spread_waits(tell, &judged, now, out) => {}
            (Decision::Promote { tell }, Observed::Config(snapshot)) => {
                let owe_reload = tell != Tell::Silent && self.settings().reload != Reload::None;
                // The first config is replaced before anything said whether the component started
                // on it: its dir is kept, so that an answer to this reload can make it the base.
                let keep_baseline = tell == Tell::Reload
                    && !self.setup.gate_only()
                    && self.verdicts.applied().is_none()
                    && !self.baseline.is_kept()
                    && self.baseline.first().map(|f| f.hash)
                        == self.verdicts.on_disk().map(|d| d.0);
                let on_loop = self.reads.small_before() && is_small_snapshot(&snapshot);
                self.work.promote(Promotion {
                    judged,
                    tell,
                    keep_baseline,
                    sha: snapshot.hash(),
                    version: j.version,
                    on_loop,
                    known_good: None,
                });
                // With a reload owed, its marker is written before the switch, so a restart after
                // it still reloads.
                out.push(Action::Switch {
                    snapshot,
                    owe_reload,
                    variant: promoted_variant,
                    keep_baseline,
                    on_loop,
                });
            }
            (Decision::Activate, _) => {
                out.push(Action::Log(LogLine::Judged(judged)));
                self.activated(now.wall);
            }
            _ => out.push(Action::Log(LogLine::Judged(judged))),
        }
        self.want_known_good(out);
    }

    /// The promoted dir as read back, against what was promoted: the same, or changed behind
    /// confgate's back (by the component, which shares it, or anyone who can write it), which is
    /// logged, counted and shown, and repaired: the next read of the config in force promotes it again.
    fn verified(&mut self, found: &Observed, out: &mut Vec<Action>) {
        let Some((hash, m)) = self.verdicts.on_disk() else {
            return;
        };
        if self.work.changing_the_dir() {
            return;
        }
        if found.hash() == Some(*hash) && modes(found) == *m {
            self.reads.whole();
            return;
        }
        out.push(Action::Log(LogLine::Tampered {
            expected: hash.short(),
            found: found.hash().map(|h| h.short()),
        }));
        out.push(Action::Count(Count::Repaired));
        self.reads.tampered_with(found.hash());
    }
}
