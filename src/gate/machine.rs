//! [`Gate`]: the pure decision state. Judges each snapshot under the settings in force, says what to
//! do with it, and words readiness (checks, reason) for the status. No I/O, no clock.

use std::collections::BTreeMap;

use crate::annotations::Annotations;
use crate::settings::{Mode, OnIncompatible, Settings};
use crate::snapshot::{ContentHash, Observed};
use crate::state::{
    ActiveView, AppliedView, CandidateView, Check, CheckKind, DesiredView, ReloadView, Status,
};
use crate::variants::Choice;
use crate::verdict::{Judgement, Verdict};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Active {
    hash: ContentHash,
    version: Option<String>,
    since: jiff::Timestamp,
    verdict: Verdict,
    /// The variant key promoted, with the variants setting.
    variant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Newest {
    hash: Option<ContentHash>,
    modes: Modes,
    judgement: Judgement,
    variant: Option<String>,
}

/// How many contents the component rejected are remembered (and not offered to it again), in memory
/// and in the promoted dir's record.
pub(crate) const REJECTED_KEPT: usize = 8;
/// Key modes other than the default, as a snapshot carries them.
type Modes = BTreeMap<String, u32>;

fn modes(obs: &Observed) -> Modes {
    match obs {
        Observed::Config(s) => s.modes().clone(),
        _ => Modes::new(),
    }
}

/// What the component is told about a promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tell {
    /// Nothing: gate-only, the first config (the component read it itself at start).
    Nothing,
    /// The first config promoted into an empty dir: the component, if it runs yet, reads it itself.
    /// A start-up check finds out whether it started on it, which makes it the rollback baseline.
    StartupCheck,
    /// It read older content: reload.
    Reload,
}

/// What the driver must do after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Nothing,
    /// The content is already in place (or gate-only): mark it active, no write, no reload.
    Activate,
    /// Write it into the promoted dir, then mark it active, then tell the component as `tell` says.
    Promote {
        tell: Tell,
    },
}

/// The pure decision state.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    base: Settings,
    settings: Settings,
    problems: Vec<String>,
    gate_only: bool,
    /// What the promoted dir holds (promote mode only), with the key modes: a mode-only change has the
    /// same content hash but must still be promoted.
    on_disk: Option<(ContentHash, Modes)>,
    /// The key modes of the active config.
    active_modes: Modes,
    /// Why the settings in force are not what the annotations file says now (reported, not failing).
    annotations_note: Option<String>,
    active: Option<Active>,
    newest: Option<Newest>,
    promote_error: Option<String>,
    started: bool,
    /// The config the component confirmed it runs.
    applied: Option<Active>,
    /// Contents the component refused, newest last, with its reason.
    rejected: Vec<(ContentHash, String)>,
}

impl Gate {
    /// `base` is the flag/env/default settings; `gate_only` when there is no promoted dir.
    pub fn new(base: Settings, gate_only: bool) -> Gate {
        Gate {
            settings: base.clone(),
            base,
            problems: Vec::new(),
            gate_only,
            on_disk: None,
            active_modes: Modes::new(),
            annotations_note: None,
            active: None,
            newest: None,
            promote_error: None,
            started: false,
            applied: None,
            rejected: Vec::new(),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The flag/env/default settings that annotations override.
    pub fn base(&self) -> &Settings {
        &self.base
    }

    /// Bad or unknown annotations (or an unreadable annotations file) in force now.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Applies the annotations file as read; `Err` is a file that could not be read or parsed, which keeps
    /// the settings in force. Returns true when the settings in force changed.
    pub fn set_annotations(&mut self, ann: Result<Annotations, String>) -> bool {
        match ann {
            Ok(ann) => {
                let r = Settings::with_annotations(&self.base, &self.settings, &ann);
                let changed = r.settings != self.settings;
                self.settings = r.settings;
                self.problems = r.problems;
                changed
            }
            Err(e) => {
                self.problems = vec![e];
                false
            }
        }
    }

    /// At start-up, what the promoted dir already holds (left by a previous run of this sidecar), with
    /// its judgement under [`Gate::settings`]: the promoted dir holds the promoted set, with no variant
    /// keys, so it is judged as it is ([`crate::verdict::judge`]).
    pub fn adopt_on_disk(&mut self, obs: &Observed, j: &Judgement, since: jiff::Timestamp) {
        self.on_disk = obs.hash().map(|h| (h, modes(obs)));
        if let Observed::Config(_) = obs
            && self.passes(obs, j)
        {
            self.activate(obs.hash(), modes(obs), j, None, since);
        }
    }

    /// After a settings change, the active config (`obs`, as read back) judged again (`j`, by
    /// [`crate::verdict::judge`] under [`Gate::settings`]), as a restart with these settings would: one that no
    /// longer passes stops being active, so readiness follows the policy. `obs` of other content than
    /// the active config is ignored. Returns true when the active config was dropped.
    pub fn rejudge_active(&mut self, obs: &Observed, j: &Judgement) -> bool {
        let Some(a) = self.active.clone() else {
            return false;
        };
        if obs.hash() != Some(a.hash) {
            return false;
        }
        if self.passes(obs, j) {
            self.activate(Some(a.hash), modes(obs), j, a.variant.clone(), a.since);
            false
        } else {
            self.active = None;
            true
        }
    }

    /// Notes why the settings in force differ from what the annotations file now says (`None`: they
    /// do not); shown in the settings check without failing it.
    pub fn set_annotations_note(&mut self, note: Option<String>) {
        self.annotations_note = note;
    }

    fn passes(&self, obs: &Observed, j: &Judgement) -> bool {
        j.verdict == Verdict::Accepted
            || (self.settings.mode == Mode::Observe && matches!(obs, Observed::Config(_)))
    }

    /// Says what to do with the newest snapshot, given what [`crate::variants::choose`] made of it under
    /// [`Gate::settings`]. The choice holds what to promote (with variants, the chosen variant's set,
    /// not the read itself).
    pub fn decide(&mut self, mut choice: Choice) -> (Choice, Action) {
        let hash = choice.observed.hash();
        if let Some(why) = hash.and_then(|h| self.rejection(h)) {
            // Not offered to the component again: it said no to these very bytes.
            choice.judgement.verdict = Verdict::RejectedByComponent;
            choice.judgement.reason = why;
            self.newest = Some(Newest {
                hash,
                modes: modes(&choice.observed),
                judgement: choice.judgement.clone(),
                variant: choice.variant.clone(),
            });
            return (choice, Action::Nothing);
        }
        let (j, obs) = (&choice.judgement, &choice.observed);
        let action = match hash {
            Some(h) if self.passes(obs, j) => {
                let m = modes(obs);
                let in_place = if self.gate_only {
                    self.active.as_ref().map(|a| a.hash) == Some(h)
                } else {
                    self.on_disk
                        .as_ref()
                        .is_some_and(|(oh, om)| *oh == h && *om == m)
                };
                if in_place {
                    let same = self.active.as_ref().is_some_and(|a| {
                        a.hash == h
                            && a.verdict == j.verdict
                            && self.active_modes == m
                            && a.variant == choice.variant
                    });
                    if same {
                        Action::Nothing
                    } else {
                        Action::Activate
                    }
                } else {
                    // Nothing older was read before (gate-only: the component read the first config
                    // itself at start; promoting: the promoted dir was empty), so the component, if
                    // it runs yet, reads this one itself.
                    let older = if self.gate_only {
                        self.active.is_some()
                    } else {
                        self.on_disk.is_some()
                    };
                    Action::Promote {
                        tell: match (older, self.gate_only) {
                            (true, _) => Tell::Reload,
                            // Gate-only, the first config seen after every restart is "first": a
                            // check there would reload on every restart.
                            (false, true) => Tell::Nothing,
                            (false, false) => Tell::StartupCheck,
                        },
                    }
                }
            }
            _ => Action::Nothing,
        };
        self.newest = Some(Newest {
            hash,
            modes: modes(obs),
            judgement: j.clone(),
            variant: choice.variant.clone(),
        });
        (choice, action)
    }

    /// Records that the newest snapshot is now in place.
    pub fn activated(&mut self, now: jiff::Timestamp) {
        if let Some(n) = self.newest.clone() {
            self.activate(n.hash, n.modes, &n.judgement, n.variant, now);
        }
    }

    fn activate(
        &mut self,
        hash: Option<ContentHash>,
        modes: Modes,
        j: &Judgement,
        variant: Option<String>,
        since: jiff::Timestamp,
    ) {
        let Some(hash) = hash else { return };
        let since = match &self.active {
            Some(a) if a.hash == hash => a.since,
            _ => since,
        };
        self.active = Some(Active {
            hash,
            version: j.version.clone(),
            since,
            verdict: j.verdict,
            variant,
        });
        if !self.gate_only {
            self.on_disk = Some((hash, modes.clone()));
        }
        self.active_modes = modes;
        self.promote_error = None;
        self.started = true;
    }

    fn rejection(&self, h: ContentHash) -> Option<String> {
        self.rejected
            .iter()
            .find(|(r, _)| *r == h)
            .map(|(_, why)| format!("the component rejected it: {why}"))
    }

    /// The component confirmed it runs `hash` (a reload of it succeeded, or it started on it). Returns
    /// true when that is what the promoted dir holds, so its dir is to be kept as the rollback base.
    pub fn reloaded(&mut self, hash: ContentHash, now: jiff::Timestamp) -> bool {
        let Some(a) = self.active.as_ref().filter(|a| a.hash == hash) else {
            return false;
        };
        let since = match &self.applied {
            Some(p) if p.hash == hash => p.since,
            _ => now,
        };
        self.applied = Some(Active { since, ..a.clone() });
        !self.gate_only && self.on_disk.as_ref().map(|(h, _)| *h) == Some(hash)
    }

    /// At start-up, the config the component applied last, as kept in the promoted dir by a previous
    /// run (`since`: when that was recorded). It is the rollback base again, as before the restart.
    pub fn adopt_applied(&mut self, obs: &Observed, j: &Judgement, since: jiff::Timestamp) {
        let Some(hash) = obs.hash().filter(|h| !self.is_rejected(*h)) else {
            return;
        };
        self.applied = Some(Active {
            hash,
            version: j.version.clone(),
            since,
            verdict: j.verdict,
            variant: None,
        });
    }

    /// At start-up, the contents the component refused, as recorded by a previous run (oldest first):
    /// they are not offered to it again.
    pub fn adopt_rejected(&mut self, refused: Vec<(ContentHash, String)>) {
        for (h, why) in refused {
            self.remember_rejected(h, why);
        }
    }

    /// The contents the component refused that are remembered, oldest first: what a restart must know.
    pub fn rejected_record(&self) -> &[(ContentHash, String)] {
        &self.rejected
    }

    /// Whether the component refused `hash` (then it is not offered to it again, not even by a reload
    /// owed from before a restart).
    pub fn is_rejected(&self, hash: ContentHash) -> bool {
        self.rejected.iter().any(|(h, _)| *h == hash)
    }

    /// At start-up: when the promoted dir holds content the component refused (a previous run stopped
    /// between recording the refusal and rolling back) and an applied config is known, the refused
    /// content and the applied config to roll back to.
    pub fn refused_in_place(&self) -> Option<(ContentHash, ContentHash)> {
        let (on_disk, _) = self.on_disk.as_ref().filter(|_| !self.gate_only)?;
        let base = self.applied.as_ref().map(|a| a.hash)?;
        (self.is_rejected(*on_disk) && base != *on_disk).then_some((*on_disk, base))
    }

    fn remember_rejected(&mut self, hash: ContentHash, why: String) {
        self.rejected.retain(|(h, _)| *h != hash);
        if self.rejected.len() >= REJECTED_KEPT {
            self.rejected.remove(0);
        }
        self.rejected.push((hash, why));
    }

    /// The component refused `hash`. Returns the applied config to roll back to, when the refused one
    /// is what the promoted dir holds and an applied one is known.
    pub fn rejected_by_component(&mut self, hash: ContentHash, why: &str) -> Option<ContentHash> {
        self.remember_rejected(hash, why.to_owned());
        let reason = self.rejection(hash).unwrap_or_default();
        if let Some(n) = self.newest.as_mut().filter(|n| n.hash == Some(hash)) {
            n.judgement.verdict = Verdict::RejectedByComponent;
            n.judgement.reason = reason;
        }
        if self.applied.as_ref().is_some_and(|a| a.hash == hash) {
            self.applied = None;
        }
        let base = self.applied.as_ref().map(|a| a.hash)?;
        (!self.gate_only && self.on_disk.as_ref().map(|(h, _)| *h) == Some(hash)).then_some(base)
    }

    /// The applied config is back in the promoted dir.
    pub fn rolled_back(&mut self) {
        if let Some(a) = self.applied.clone() {
            // The applied dir's modes are not tracked: an empty map makes a later same-content,
            // other-modes snapshot a promotion rather than a no-op, which is the safe side.
            self.on_disk = Some((a.hash, Modes::new()));
            self.active_modes = Modes::new();
            self.active = Some(a);
        }
    }

    /// The applied config's version.
    pub fn applied_version(&self) -> Option<String> {
        self.applied.as_ref().and_then(|a| a.version.clone())
    }

    pub fn promotion_failed(&mut self, why: String) {
        self.promote_error = Some(why);
    }

    /// Whether the newest snapshot is the one in force.
    fn newest_is_active(&self) -> bool {
        match (&self.newest, &self.active) {
            (Some(n), Some(a)) => {
                n.hash == Some(a.hash)
                    && (n.judgement.verdict == Verdict::Accepted
                        || self.settings.mode == Mode::Observe)
            }
            (None, Some(_)) => true,
            _ => false,
        }
    }

    /// The readiness checks, the verdict on readiness and the status (reload view left to the caller).
    pub fn status(&self, reload: ReloadView) -> Status {
        let mut checks = Vec::with_capacity(4);
        checks.push(Check {
            name: CheckKind::Settings,
            ok: self.problems.is_empty(),
            message: match (self.problems.is_empty(), &self.annotations_note) {
                (true, None) => "annotations valid".into(),
                (true, Some(note)) => note.clone(),
                (false, _) => self.problems.join("; "),
            },
        });
        let newest_text = |n: &Newest| {
            format!(
                "newest config{} is {}: {}",
                n.judgement
                    .version
                    .as_ref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                n.judgement.verdict,
                n.judgement.reason
            )
        };
        checks.push(match (&self.active, &self.newest) {
            (Some(a), _) => Check {
                name: CheckKind::Config,
                ok: true,
                message: format!(
                    "active {} ({})",
                    a.version.as_deref().unwrap_or("unversioned config"),
                    a.hash
                ),
            },
            (None, Some(n)) => Check {
                name: CheckKind::Config,
                ok: false,
                message: format!("no accepted config yet: {}", newest_text(n)),
            },
            (None, None) => Check {
                name: CheckKind::Config,
                ok: false,
                message: "no config read yet".into(),
            },
        });
        let current = self.newest_is_active();
        if let (Some(a), Some(n), false) = (&self.active, &self.newest, current) {
            let held = a.version.as_deref().unwrap_or("the previous config");
            checks.push(Check {
                name: CheckKind::Newest,
                ok: self.settings.on_incompatible == OnIncompatible::Hold,
                message: format!("{}; holding {held}", newest_text(n)),
            });
        }
        if let Some(e) = &self.promote_error {
            checks.push(Check {
                name: CheckKind::Promote,
                ok: false,
                message: format!("promotion failed, previous config kept: {e}"),
            });
        }
        let failing = checks.iter().find(|c| !c.ok);
        let observe = self.settings.mode == Mode::Observe;
        let ready = observe || failing.is_none();
        let stale = self.active.is_some() && !current;
        let reason = match (failing, observe) {
            (Some(c), false) => c.message.clone(),
            (Some(c), true) => format!("observe mode (not enforced): {}", c.message),
            (None, _) if stale => checks
                .iter()
                .find(|c| c.name == CheckKind::Newest)
                .map(|c| c.message.clone())
                .unwrap_or_default(),
            (None, _) => "ok".into(),
        };
        let candidate = match (&self.newest, current) {
            (Some(n), false) => Some(CandidateView {
                version: n.judgement.version.clone(),
                sha256: n.hash.map(|h| h.to_string()),
                verdict: n.judgement.verdict,
                reason: n.judgement.reason.clone(),
                variant: n.variant.clone(),
            }),
            _ => None,
        };
        Status {
            ready,
            reason,
            accepts: self.settings.accepts_text().map(str::to_owned),
            stale,
            active: self.active.as_ref().map(|a| ActiveView {
                version: a.version.clone(),
                sha256: a.hash.to_string(),
                since: a.since.to_string(),
                verdict: a.verdict,
                variant: a.variant.clone(),
            }),
            candidate,
            desired: self.newest.as_ref().map(|n| DesiredView {
                version: n.judgement.version.clone(),
                sha256: n.hash.map(|h| h.to_string()),
                verdict: n.judgement.verdict,
            }),
            applied: self.applied.as_ref().map(|a| AppliedView {
                version: a.version.clone(),
                sha256: a.hash.to_string(),
                since: a.since.to_string(),
            }),
            reload,
            mode: self.settings.mode,
            on_incompatible: self.settings.on_incompatible,
            started: self.started,
            checks,
            watch_error: None,
            rollout: None,
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Raw;
    use crate::snapshot::Snapshot;
    use crate::{variants, verdict};
    use std::collections::BTreeMap;

    fn base(accepts: &str, extra: impl FnOnce(&mut Raw)) -> Settings {
        let mut raw = Raw {
            accepts: Some(accepts.into()),
            ..Raw::default()
        };
        extra(&mut raw);
        Settings::from_raw(&raw).unwrap()
    }

    /// A gate over a promoted dir with `accepts` from a flag and every other setting by default.
    fn gate(accepts: &str) -> Gate {
        Gate::new(base(accepts, |_| {}), false)
    }

    /// [`gate`] with `version` already promoted.
    fn running(accepts: &str, version: &str) -> Gate {
        let mut g = gate(accepts);
        step(&mut g, &cfg(version));
        g
    }

    fn ann(key: &str, value: &str) -> Annotations {
        Annotations::from([(key.to_owned(), value.to_owned())])
    }

    fn cfg(version: &str) -> Observed {
        Observed::Config(Snapshot::new(BTreeMap::from([(
            "version".to_owned(),
            version.as_bytes().to_vec(),
        )])))
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::UNIX_EPOCH
    }

    fn reload_view() -> crate::state::ReloadView {
        Status::default().reload
    }

    /// The gate's decision on `read`, judged under its settings as the pipeline judges it.
    fn decide(g: &mut Gate, read: &Observed) -> (Choice, Action) {
        let choice = variants::choose(read.clone(), g.settings());
        g.decide(choice)
    }

    fn adopt(g: &mut Gate, obs: &Observed) {
        let j = verdict::judge(obs, g.settings());
        g.adopt_on_disk(obs, &j, now());
    }

    fn adopt_applied(g: &mut Gate, obs: &Observed) {
        let j = verdict::judge(obs, g.settings());
        g.adopt_applied(obs, &j, now());
    }

    fn rejudge(g: &mut Gate, obs: &Observed) -> bool {
        let j = verdict::judge(obs, g.settings());
        g.rejudge_active(obs, &j)
    }

    fn step(g: &mut Gate, obs: &Observed) -> Action {
        let (_, a) = decide(g, obs);
        if a != Action::Nothing {
            g.activated(now());
        }
        a
    }

    #[test]
    fn hold_stays_ready_and_stale_unready_does_not() {
        for (policy, ready_when_held) in [("hold", true), ("unready", false)] {
            let mut g = Gate::new(
                base("^2", |r| r.on_incompatible = Some(policy.into())),
                false,
            );
            assert!(!g.status(reload_view()).ready);
            assert_eq!(
                step(&mut g, &cfg("2.1.0")),
                Action::Promote {
                    tell: Tell::StartupCheck
                }
            );
            let s = g.status(reload_view());
            assert!(
                s.ready && !s.stale && s.started && s.candidate.is_none(),
                "{s:?}"
            );
            assert_eq!(step(&mut g, &cfg("3.0.0")), Action::Nothing);
            let s = g.status(reload_view());
            assert_eq!(
                (s.ready, s.stale),
                (ready_when_held, true),
                "{policy}: {s:?}"
            );
            assert_eq!(s.candidate.as_ref().unwrap().verdict, Verdict::TooNew);
            assert!(s.reason.contains("holding 2.1.0"), "{}", s.reason);
            assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.1.0"));
            assert_eq!(
                step(&mut g, &Observed::Missing("deleted".into())),
                Action::Nothing
            );
            assert_eq!(g.status(reload_view()).ready, ready_when_held);
            assert_eq!(step(&mut g, &cfg("2.1.0")), Action::Nothing);
            let s = g.status(reload_view());
            assert!(s.ready && !s.stale, "{s:?}");
        }
    }

    #[test]
    fn not_ready_before_any_accepted_config_whatever_the_policy() {
        let mut g = gate("^2");
        step(&mut g, &cfg("3.0.0"));
        let s = g.status(reload_view());
        assert!(!s.ready && !s.started && !s.stale);
        assert!(
            s.reason
                .starts_with("no accepted config yet: newest config 3.0.0 is too-new"),
            "{}",
            s.reason
        );
    }

    #[test]
    fn observe_promotes_everything_and_stays_ready() {
        let mut g = Gate::new(base("^2", |r| r.mode = Some("observe".into())), false);
        assert!(g.status(reload_view()).ready);
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote {
                tell: Tell::StartupCheck
            }
        );
        let s = g.status(reload_view());
        assert!(s.ready && s.started);
        assert_eq!(s.active.unwrap().verdict, Verdict::TooNew);
        assert_eq!(
            step(&mut g, &Observed::Missing("x".into())),
            Action::Nothing
        );
        assert!(g.status(reload_view()).ready);
    }

    #[test]
    fn restart_with_same_content_neither_writes_nor_reloads() {
        let mut g = gate("^2");
        adopt(&mut g, &cfg("2.0.0"));
        assert!(g.status(reload_view()).started);
        assert_eq!(step(&mut g, &cfg("2.0.0")), Action::Nothing);
        assert_eq!(
            step(&mut g, &cfg("2.0.1")),
            Action::Promote { tell: Tell::Reload }
        );
    }

    #[test]
    fn on_disk_config_no_longer_accepted_is_not_active() {
        let mut g = gate("^3");
        adopt(&mut g, &cfg("2.0.0"));
        assert!(!g.status(reload_view()).started);
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { tell: Tell::Reload }
        );
    }

    #[test]
    fn gate_only_does_not_reload_the_first_config() {
        let mut g = Gate::new(base("^2", |_| {}), true);
        // Nor check it: gate-only, every restart sees a "first" config.
        assert_eq!(
            step(&mut g, &cfg("2.0.0")),
            Action::Promote {
                tell: Tell::Nothing
            }
        );
        assert_eq!(
            step(&mut g, &cfg("2.0.1")),
            Action::Promote { tell: Tell::Reload }
        );
    }

    #[test]
    fn widened_range_via_annotation_promotes_the_held_snapshot() {
        let mut g = running("^2", "2.0.0");
        assert_eq!(step(&mut g, &cfg("3.0.0")), Action::Nothing);
        assert!(g.set_annotations(Ok(ann("confgate.io/accepts", ">=2, <4"))));
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { tell: Tell::Reload }
        );
    }

    #[test]
    fn bad_annotation_is_not_ready_and_named_but_keeps_settings() {
        let mut g = running("^2", "2.0.0");
        assert!(!g.set_annotations(Ok(ann("confgate.io/accepts", "two"))));
        let s = g.status(reload_view());
        assert!(!s.ready);
        assert!(
            s.reason.contains("confgate.io/accepts \"two\""),
            "{}",
            s.reason
        );
        assert_eq!(s.accepts.as_deref(), Some("^2"));
        g.set_annotations(Err("annotations file line 3: bad".into()));
        assert!(g.status(reload_view()).reason.contains("line 3"));
        g.set_annotations(Ok(Annotations::new()));
        assert!(g.status(reload_view()).ready);
    }

    #[test]
    fn rejected_content_is_rolled_back_held_and_not_offered_again() {
        for (policy, ready_when_held) in [("hold", true), ("unready", false)] {
            let mut g = Gate::new(
                base("^2", |r| r.on_incompatible = Some(policy.into())),
                false,
            );
            let good = cfg("2.0.0");
            step(&mut g, &good);
            assert!(g.reloaded(good.hash().unwrap(), now()));
            let bad = cfg("2.1.0");
            assert_eq!(step(&mut g, &bad), Action::Promote { tell: Tell::Reload });
            let base = g.rejected_by_component(bad.hash().unwrap(), "500: bad rule");
            assert_eq!(base, good.hash());
            g.rolled_back();
            let s = g.status(reload_view());
            assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.0.0"));
            assert_eq!(
                s.applied.as_ref().unwrap().version.as_deref(),
                Some("2.0.0")
            );
            let d = s.desired.as_ref().unwrap();
            assert_eq!(
                (d.version.as_deref(), d.verdict),
                (Some("2.1.0"), Verdict::RejectedByComponent)
            );
            assert_eq!(
                (s.ready, s.stale),
                (ready_when_held, true),
                "{policy}: {s:?}"
            );
            assert!(s.reason.contains("500: bad rule"), "{}", s.reason);
            // The same bytes again (a resync, a settings change) are not promoted.
            g.set_annotations(Ok(Annotations::new()));
            let (j, a) = decide(&mut g, &bad);
            assert_eq!(
                (j.judgement.verdict, a),
                (Verdict::RejectedByComponent, Action::Nothing)
            );
            // Different content is judged afresh.
            assert_eq!(
                step(&mut g, &cfg("2.1.1")),
                Action::Promote { tell: Tell::Reload }
            );
        }
    }

    #[test]
    fn the_first_config_is_checked_at_start_up_and_is_then_the_rollback_base() {
        let mut g = gate("^2");
        adopt(&mut g, &Observed::Missing("empty".into()));
        let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
        assert_eq!(
            step(&mut g, &a),
            Action::Promote {
                tell: Tell::StartupCheck
            }
        );
        // The check found the component runs it: kept as the base.
        assert!(g.reloaded(a.hash().unwrap(), now()));
        assert_eq!(step(&mut g, &b), Action::Promote { tell: Tell::Reload });
        assert_eq!(
            g.rejected_by_component(b.hash().unwrap(), "500: bad rule"),
            a.hash()
        );
        g.rolled_back();
        let s = g.status(reload_view());
        assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
        assert_eq!(s.applied.unwrap().version.as_deref(), Some("2.0.0"));
    }

    /// What a run learnt (applied, refused), read back by the next one, gives the same decisions.
    #[test]
    fn a_restart_knows_what_was_applied_and_what_was_refused() {
        let (a, b) = (cfg("2.1.0"), cfg("2.2.0"));
        let mut first = running("^2", "2.1.0");
        first.reloaded(a.hash().unwrap(), now());
        step(&mut first, &b);
        assert_eq!(
            first.rejected_by_component(b.hash().unwrap(), "500: bad rule"),
            a.hash()
        );
        first.rolled_back();
        let record = first.rejected_record().to_vec();
        assert_eq!(record, [(b.hash().unwrap(), "500: bad rule".to_owned())]);

        let mut g = gate("^2");
        adopt(&mut g, &a);
        g.adopt_rejected(record);
        adopt_applied(&mut g, &a);
        assert_eq!(g.refused_in_place(), None);
        assert!(g.is_rejected(b.hash().unwrap()));
        let s = g.status(reload_view());
        assert_eq!(s.applied.unwrap().version.as_deref(), Some("2.1.0"));
        // The refused content is not offered again, and says why.
        let (j, action) = decide(&mut g, &b);
        assert_eq!(
            (j.judgement.verdict, action),
            (Verdict::RejectedByComponent, Action::Nothing)
        );
        assert!(j.judgement.reason.contains("500: bad rule"));
        // Other content is promoted and reloaded as usual.
        assert_eq!(
            step(&mut g, &cfg("2.2.1")),
            Action::Promote { tell: Tell::Reload }
        );
    }

    #[test]
    fn a_restart_that_finds_refused_content_in_place_rolls_back_to_the_applied_config() {
        let (a, b) = (cfg("2.1.0"), cfg("2.2.0"));
        let mut g = gate("^2");
        adopt(&mut g, &b);
        g.adopt_rejected(vec![(b.hash().unwrap(), "no".into())]);
        adopt_applied(&mut g, &a);
        assert_eq!(
            g.refused_in_place(),
            Some((b.hash().unwrap(), a.hash().unwrap()))
        );
        g.rolled_back();
        assert_eq!(g.refused_in_place(), None);
        assert_eq!(
            g.status(reload_view()).active.unwrap().version.as_deref(),
            Some("2.1.0")
        );
        // Without an applied config the refused content stays, reported.
        let mut g = gate("^2");
        adopt(&mut g, &b);
        g.adopt_rejected(vec![(b.hash().unwrap(), "no".into())]);
        assert_eq!(g.refused_in_place(), None);
        // An applied config the component refused later is no base.
        let mut g = gate("^2");
        adopt(&mut g, &b);
        g.adopt_rejected(vec![(a.hash().unwrap(), "no".into())]);
        adopt_applied(&mut g, &a);
        assert!(g.status(reload_view()).applied.is_none());
    }

    #[test]
    fn the_refusals_remembered_are_bounded_newest_kept() {
        let mut g = gate("^2");
        let many: Vec<_> = (0..20)
            .map(|i| (cfg(&format!("2.0.{i}")).hash().unwrap(), format!("no {i}")))
            .collect();
        g.adopt_rejected(many[..12].to_vec());
        for (h, why) in &many[12..] {
            g.rejected_by_component(*h, why);
        }
        assert_eq!(g.rejected_record(), &many[20 - REJECTED_KEPT..]);
        // Refused again, it moves to the newest place rather than being kept twice.
        g.rejected_by_component(many[15].0, "again");
        let record = g.rejected_record();
        assert_eq!(record.len(), REJECTED_KEPT);
        assert_eq!(record.last().unwrap(), &(many[15].0, "again".to_owned()));
    }

    #[test]
    fn rejection_without_an_applied_config_has_nothing_to_roll_back_to() {
        let mut g = gate("^2");
        let first = cfg("2.0.0");
        step(&mut g, &first);
        assert_eq!(g.rejected_by_component(first.hash().unwrap(), "no"), None);
        assert!(g.status(reload_view()).applied.is_none());
    }

    #[test]
    fn no_reload_for_the_first_promotion_into_an_empty_dir() {
        let mut g = gate("^2");
        adopt(&mut g, &Observed::Missing("empty".into()));
        assert_eq!(
            step(&mut g, &cfg("2.0.0")),
            Action::Promote {
                tell: Tell::StartupCheck
            }
        );
        assert_eq!(
            step(&mut g, &cfg("2.0.1")),
            Action::Promote { tell: Tell::Reload }
        );
        // Something was in the promoted dir, even rejected: the component read it, so it reloads.
        let mut g = gate("^3");
        adopt(&mut g, &cfg("2.0.0"));
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { tell: Tell::Reload }
        );
    }

    #[test]
    fn a_mode_change_alone_is_promoted() {
        let mut g = gate("^2");
        let files = BTreeMap::from([("version".to_owned(), b"2.0.0".to_vec())]);
        let plain = Observed::Config(Snapshot::new(files.clone()));
        let exec = Observed::Config(Snapshot::with_modes(
            files,
            BTreeMap::from([("version".to_owned(), 0o755)]),
        ));
        assert_eq!(plain.hash(), exec.hash(), "the content hash ignores modes");
        step(&mut g, &plain);
        assert_eq!(step(&mut g, &exec), Action::Promote { tell: Tell::Reload });
        assert_eq!(step(&mut g, &exec), Action::Nothing);
    }

    #[test]
    fn narrowed_settings_drop_the_active_config_as_a_restart_would() {
        let narrow = || ann("confgate.io/accepts", "^3");
        let mut g = running("^2", "2.0.0");
        assert!(g.set_annotations(Ok(narrow())));
        assert!(!rejudge(&mut g, &cfg("2.0.1")), "other content is ignored");
        assert!(rejudge(&mut g, &cfg("2.0.0")));
        assert_eq!(step(&mut g, &cfg("2.0.0")), Action::Nothing);
        let live = g.status(reload_view());
        let mut restarted = gate("^2");
        restarted.set_annotations(Ok(narrow()));
        adopt(&mut restarted, &cfg("2.0.0"));
        step(&mut restarted, &cfg("2.0.0"));
        let again = restarted.status(reload_view());
        assert!(!live.ready && live.active.is_none(), "{live:?}");
        assert_eq!((live.ready, &live.reason), (again.ready, &again.reason));
        // Observe to enforce: what observe let through stops being active.
        let mut g = Gate::new(base("^2", |r| r.mode = Some("observe".into())), false);
        step(&mut g, &cfg("3.0.0"));
        assert!(g.set_annotations(Ok(ann("confgate.io/mode", "enforce"))));
        assert!(rejudge(&mut g, &cfg("3.0.0")));
        assert!(!g.status(reload_view()).ready);
        // Widened back: the same content is active again, without a write.
        assert!(g.set_annotations(Ok(Annotations::new())));
        assert_eq!(step(&mut g, &cfg("3.0.0")), Action::Activate);
    }

    #[test]
    fn failed_promotion_is_reported_and_not_active() {
        let mut g = running("^2", "2.0.0");
        let (_, a) = decide(&mut g, &cfg("2.1.0"));
        assert_eq!(a, Action::Promote { tell: Tell::Reload });
        g.promotion_failed("disk full".into());
        let s = g.status(reload_view());
        assert!(!s.ready && s.reason.contains("disk full"), "{s:?}");
        assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    }
}
