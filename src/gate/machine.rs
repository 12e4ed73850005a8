//! [`Gate`]: the pure decision state. Judges each snapshot under the settings in force, says what to
//! do with it, and words readiness (checks, reason) for the status. No I/O, no clock.

use crate::annotations::Annotations;
use crate::settings::{Mode, OnIncompatible, Settings};
use crate::snapshot::{ContentHash, Observed};
use crate::state::{ActiveView, CandidateView, Check, CheckKind, ReloadView, Status};
use crate::verdict::{self, Judgement, Verdict};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Active {
    hash: ContentHash,
    version: Option<String>,
    since: jiff::Timestamp,
    verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Newest {
    hash: Option<ContentHash>,
    judgement: Judgement,
}

/// What the driver must do after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Nothing,
    /// The content is already in place (or gate-only): mark it active, no write, no reload.
    Activate,
    /// Write it into the promoted dir, then mark it active; signal a reload when `reload`.
    Promote {
        reload: bool,
    },
}

/// The pure decision state.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    base: Settings,
    settings: Settings,
    problems: Vec<String>,
    gate_only: bool,
    /// What the promoted dir holds (promote mode only).
    on_disk: Option<ContentHash>,
    active: Option<Active>,
    newest: Option<Newest>,
    promote_error: Option<String>,
    started: bool,
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
            active: None,
            newest: None,
            promote_error: None,
            started: false,
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

    /// At start-up, what the promoted dir already holds (left by a previous run of this sidecar).
    pub fn adopt_on_disk(&mut self, obs: &Observed, since: jiff::Timestamp) {
        self.on_disk = obs.hash();
        if let Observed::Config(_) = obs {
            let j = verdict::judge(obs, &self.settings);
            if self.passes(obs, &j) {
                self.activate(obs.hash(), &j, since);
            }
        }
    }

    fn passes(&self, obs: &Observed, j: &Judgement) -> bool {
        j.verdict == Verdict::Accepted
            || (self.settings.mode == Mode::Observe && matches!(obs, Observed::Config(_)))
    }

    /// Judges the newest snapshot and says what to do with it.
    pub fn decide(&mut self, obs: &Observed) -> (Judgement, Action) {
        let j = verdict::judge(obs, &self.settings);
        let hash = obs.hash();
        let action = match hash {
            Some(h) if self.passes(obs, &j) => {
                let in_place = if self.gate_only {
                    self.active.as_ref().map(|a| a.hash)
                } else {
                    self.on_disk
                };
                if in_place == Some(h) {
                    let same = self
                        .active
                        .as_ref()
                        .is_some_and(|a| a.hash == h && a.verdict == j.verdict);
                    if same {
                        Action::Nothing
                    } else {
                        Action::Activate
                    }
                } else {
                    Action::Promote {
                        // Gate-only: the component read the first config itself at start.
                        reload: !self.gate_only || self.active.is_some(),
                    }
                }
            }
            _ => Action::Nothing,
        };
        self.newest = Some(Newest {
            hash,
            judgement: j.clone(),
        });
        (j, action)
    }

    /// Records that the newest snapshot is now in place.
    pub fn activated(&mut self, now: jiff::Timestamp) {
        if let Some(n) = self.newest.clone() {
            self.activate(n.hash, &n.judgement, now);
        }
    }

    fn activate(&mut self, hash: Option<ContentHash>, j: &Judgement, since: jiff::Timestamp) {
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
        });
        if !self.gate_only {
            self.on_disk = Some(hash);
        }
        self.promote_error = None;
        self.started = true;
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
            message: if self.problems.is_empty() {
                "annotations valid".into()
            } else {
                self.problems.join("; ")
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
            }),
            candidate,
            reload,
            mode: self.settings.mode,
            on_incompatible: self.settings.on_incompatible,
            started: self.started,
            checks,
            watch_error: None,
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Raw;
    use crate::snapshot::Snapshot;
    use std::collections::BTreeMap;

    fn base(accepts: &str, extra: impl FnOnce(&mut Raw)) -> Settings {
        let mut raw = Raw {
            accepts: Some(accepts.into()),
            ..Raw::default()
        };
        extra(&mut raw);
        Settings::from_raw(&raw).unwrap()
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

    fn step(g: &mut Gate, obs: &Observed) -> Action {
        let (_, a) = g.decide(obs);
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
                Action::Promote { reload: true }
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
        let mut g = Gate::new(base("^2", |_| {}), false);
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
            Action::Promote { reload: true }
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
        let mut g = Gate::new(base("^2", |_| {}), false);
        g.adopt_on_disk(&cfg("2.0.0"), now());
        assert!(g.status(reload_view()).started);
        assert_eq!(step(&mut g, &cfg("2.0.0")), Action::Nothing);
        assert_eq!(
            step(&mut g, &cfg("2.0.1")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn on_disk_config_no_longer_accepted_is_not_active() {
        let mut g = Gate::new(base("^3", |_| {}), false);
        g.adopt_on_disk(&cfg("2.0.0"), now());
        assert!(!g.status(reload_view()).started);
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn gate_only_does_not_reload_the_first_config() {
        let mut g = Gate::new(base("^2", |_| {}), true);
        assert_eq!(
            step(&mut g, &cfg("2.0.0")),
            Action::Promote { reload: false }
        );
        assert_eq!(
            step(&mut g, &cfg("2.0.1")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn widened_range_via_annotation_promotes_the_held_snapshot() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        step(&mut g, &cfg("2.0.0"));
        assert_eq!(step(&mut g, &cfg("3.0.0")), Action::Nothing);
        let ann = Annotations::from([(
            crate::settings::ANN_ACCEPTS.to_owned(),
            ">=2, <4".to_owned(),
        )]);
        assert!(g.set_annotations(Ok(ann)));
        assert_eq!(
            step(&mut g, &cfg("3.0.0")),
            Action::Promote { reload: true }
        );
    }

    #[test]
    fn bad_annotation_is_not_ready_and_named_but_keeps_settings() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        step(&mut g, &cfg("2.0.0"));
        let ann = Annotations::from([(crate::settings::ANN_ACCEPTS.to_owned(), "two".to_owned())]);
        assert!(!g.set_annotations(Ok(ann)));
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
    fn failed_promotion_is_reported_and_not_active() {
        let mut g = Gate::new(base("^2", |_| {}), false);
        step(&mut g, &cfg("2.0.0"));
        let (_, a) = g.decide(&cfg("2.1.0"));
        assert_eq!(a, Action::Promote { reload: true });
        g.promotion_failed("disk full".into());
        let s = g.status(reload_view());
        assert!(!s.ready && s.reason.contains("disk full"), "{s:?}");
        assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    }
}
