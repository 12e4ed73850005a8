//! The readiness of [`Gate`]: its checks, their text and the status it publishes.

use super::state::{Gate, Newest};
use crate::settings::{Mode, OnIncompatible};
use crate::state::{
    ActiveView, AppliedView, CandidateView, Check, CheckKind, CheckingView, DesiredView, Holding,
    KnownGoodView, ReloadView, Rollout, Status,
};
use crate::verdict::Verdict;

impl Gate {
    /// Whether the newest snapshot is the one in force.
    fn newest_is_active(&self) -> bool {
        match (self.verdicts.newest(), self.verdicts.active()) {
            (Some(n), Some(a)) => {
                n.hash == Some(a.hash)
                    && (n.judgement.verdict == Verdict::Accepted
                        || self.settings().mode == Mode::Observe)
            }
            (None, Some(_)) => true,
            _ => false,
        }
    }

    /// The readiness checks, the verdict on readiness and the status (reload view left to the caller).
    pub(super) fn status(&self, reload: ReloadView) -> Status {
        let mut checks = Vec::with_capacity(4);
        checks.push(Check {
            name: CheckKind::Settings,
            ok: self.in_force.problems().is_empty(),
            message: match (
                self.in_force.problems().is_empty(),
                self.in_force.annotations_note(),
            ) {
                (true, None) => "annotations valid".into(),
                (true, Some(note)) => note.to_owned(),
                (false, _) => super::problems::shown(self.in_force.problems()),
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
        // The reload of the config in place keeps failing: the component has not taken it.
        let reload_failing = self
            .reloads
            .failing()
            .filter(|(owed, _)| self.verdicts.active().is_some_and(|a| a.hash == owed.sha));
        checks.push(match (self.verdicts.active(), self.verdicts.newest()) {
            (Some(a), _) => Check {
                name: CheckKind::Config,
                ok: true,
                message: match reload_failing {
                    None => format!(
                        "active {} ({})",
                        a.version.as_deref().unwrap_or("unversioned config"),
                        a.hash
                    ),
                    Some(_) => format!(
                        "promoted {} ({}), not taken by the component: its reload keeps failing; it runs {}",
                        a.version.as_deref().unwrap_or("unversioned config"),
                        a.hash,
                        match self.verdicts.applied() {
                            Some(ap) => format!(
                                "{} ({})",
                                ap.version.as_deref().unwrap_or("an unversioned config"),
                                ap.hash
                            ),
                            None => "the config it had".into(),
                        }
                    ),
                },
            },
            (None, Some(n)) => Check {
                name: CheckKind::Config,
                ok: false,
                message: match self.verdicts.outside() {
                    // Said plainly: the component may well run it, and nothing accepted replaces it.
                    Some((h, v)) => format!(
                        "no accepted config yet: the promoted dir holds {} ({h}), outside the range in force; {}",
                        v.as_deref().unwrap_or("an unversioned config"),
                        newest_text(n)
                    ),
                    None => format!("no accepted config yet: {}", newest_text(n)),
                },
            },
            // In API mode, what keeps the first read from coming (a 403 names the Role rule).
            (None, None) => Check {
                name: CheckKind::Config,
                ok: false,
                message: match self
                    .reads
                    .source()
                    .as_ref()
                    .filter(|s| !s.watching)
                    .and_then(|s| Some((s, s.last_error.as_ref()?)))
                {
                    Some((s, e)) => format!(
                        "no config read yet: cannot read {} {}/{}: {e}",
                        s.kind, s.namespace, s.name
                    ),
                    None => "no config read yet".into(),
                },
            },
        });
        let current = self.newest_is_active();
        // A rollout candidate held on this pod, while it runs the stable config it chose: a held
        // config, reported as any other.
        let held = self
            .rollouts
            .held()
            .filter(|_| current && self.verdicts.active().is_some());
        let spread = self.spread_view();
        if let (Some(a), Some(n), false, Some(sp)) = (
            self.verdicts.active(),
            self.verdicts.newest(),
            current,
            &spread,
        ) {
            // Waiting for this pod's share of the spread is no holding back: readiness stays.
            checks.push(Check {
                name: CheckKind::Newest,
                ok: true,
                message: format!(
                    "keeping {} until {}: {} is {}, promoted after this pod's {} ms of the {} ms reload spread",
                    a.version.as_deref().unwrap_or("the previous config"),
                    sp.due_at,
                    n.judgement.version.as_deref().unwrap_or("the newest config"),
                    n.judgement.verdict,
                    sp.delay_ms,
                    sp.period_ms
                ),
            });
        } else if let (Some(a), Some(h)) = (self.verdicts.active(), held) {
            let holding = Holding {
                held: a.version.clone(),
                newest: h.version.clone(),
                verdict: h.verdict,
                reason: None,
                in_place: false,
            };
            checks.push(Check {
                name: CheckKind::Newest,
                ok: self.settings().on_incompatible == OnIncompatible::Hold,
                message: holding
                    .because(format!(
                        "the rollout's candidate, held on this pod: {}",
                        h.reason
                    ))
                    .to_string(),
            });
        } else if let (Some(k), Some(n), false) =
            (self.known_good_in_force(), self.verdicts.newest(), current)
        {
            // Started on the known-good: what runs, where from, and what is wrong with the source.
            checks.push(Check {
                name: CheckKind::Newest,
                ok: self.settings().on_incompatible == OnIncompatible::Hold,
                message: format!(
                    "running the known-good {} from {}; the source's {}",
                    k.judgement.version.as_deref().unwrap_or("config"),
                    k.record,
                    newest_text(n)
                ),
            });
        } else if let (Some(a), Some(n), false) =
            (self.verdicts.active(), self.verdicts.newest(), current)
        {
            let holding = Holding {
                held: a.version.clone(),
                newest: n.judgement.version.clone(),
                verdict: n.judgement.verdict,
                reason: None,
                // The refused content itself is what the promoted dir holds: nothing is held back
                // in its place.
                in_place: n.hash == Some(a.hash),
            };
            checks.push(Check {
                name: CheckKind::Newest,
                ok: self.settings().on_incompatible == OnIncompatible::Hold,
                message: holding.because(n.judgement.reason.clone()).to_string(),
            });
        }
        if let Some(e) = self.verdicts.promote_error() {
            checks.push(Check {
                name: CheckKind::Promote,
                ok: false,
                message: format!("promotion failed, previous config kept: {e}"),
            });
        }
        if let Some(found) = self.reads.tampered() {
            // Reported, not failed: the config in force is promoted again.
            checks.push(Check {
                name: CheckKind::Promote,
                ok: true,
                message: format!(
                    "the promoted dir was changed behind confgate's back (it held {}); the config in force is promoted again",
                    found.map_or_else(|| "no config".to_owned(), |h| h.short())
                ),
            });
        }
        if let Some(e) = self.rollbacks.stuck() {
            checks.push(Check {
                name: CheckKind::Promote,
                ok: false,
                message: e.to_string(),
            });
        }
        if let Some((owed, failures)) = reload_failing {
            checks.push(Check {
                name: CheckKind::Reload,
                ok: false,
                message: format!(
                    "the reload of {} via {} failed {failures} time{} in a row, retried with backoff: {}",
                    owed.version.as_deref().unwrap_or("the promoted config"),
                    self.settings().reload,
                    if failures == 1 { "" } else { "s" },
                    self.reloads
                        .view()
                        .last_error
                        .as_deref()
                        .unwrap_or("unknown error")
                ),
            });
        }
        let checking = self.work.checking().map(|c| CheckingView {
            version: c.choice.judgement.version.clone(),
            sha256: c.sha.printed(),
            checker: c.check.name().to_owned(),
            since: c.since,
        });
        if let Some(c) = &checking {
            // In progress: what readiness says meanwhile is the other checks'.
            checks.push(Check {
                name: CheckKind::Validate,
                ok: true,
                message: format!(
                    "checking {} with {} since {}; promoted once it passes",
                    c.version.as_deref().unwrap_or("the newest config"),
                    c.checker,
                    c.since
                ),
            });
        }
        let failing = checks.iter().find(|c| !c.ok && c.name.gates_readiness());
        let observe = self.settings().mode == Mode::Observe;
        let ready = observe || failing.is_none();
        let stale =
            self.verdicts.active().is_some() && (!current || held.is_some()) && spread.is_none();
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
        let candidate = self.candidate_view();
        Status {
            ready,
            reason,
            accepts: self.settings().accepts_text().map(str::to_owned),
            stale,
            active: self.active_view(),
            candidate,
            desired: self.verdicts.newest().map(|n| DesiredView {
                version: n.judgement.version.clone(),
                sha256: n.hash.map(|h| h.printed()),
                verdict: n.judgement.verdict,
            }),
            applied: self.applied_view(),
            reload,
            mode: self.settings().mode,
            on_incompatible: self.settings().on_incompatible,
            started: self.verdicts.started(),
            checks,
            watch_error: None,
            rollout: self.rollouts.rollout().map(Rollout::view),
            spread,
            checking,
            known_good: self.known_good_view(),
            source: None,
        }
    }

    /// The config in force, as the status shows it.
    pub(super) fn active_view(&self) -> Option<ActiveView> {
        self.verdicts.active().map(|a| ActiveView {
            version: a.version.clone(),
            sha256: a.hash.printed(),
            since: a.since,
            verdict: a.verdict,
            variant: a.variant.clone(),
        })
    }

    /// The config the component applied last, as the status shows it.
    pub(super) fn applied_view(&self) -> Option<AppliedView> {
        self.verdicts.applied().map(|a| AppliedView {
            version: a.version.clone(),
            sha256: a.hash.printed(),
            since: a.since,
        })
    }

    /// The known-good in force, as the status shows it.
    pub(super) fn known_good_view(&self) -> Option<KnownGoodView> {
        self.known_good_in_force().map(|k| KnownGoodView {
            version: k.judgement.version.clone(),
            sha256: k.hash.printed(),
            record: k.record.clone(),
            because: self
                .verdicts
                .newest()
                .map_or(k.because, |n| n.judgement.verdict),
            reason: self
                .verdicts
                .newest()
                .map_or_else(|| k.reason.clone(), |n| n.judgement.reason.clone()),
        })
    }

    /// The newest config when it is not the one in force (or the rollout candidate held on this
    /// pod), as the status shows it.
    pub(super) fn candidate_view(&self) -> Option<CandidateView> {
        let current = self.newest_is_active();
        let held = self
            .rollouts
            .held()
            .filter(|_| current && self.verdicts.active().is_some());
        match (self.verdicts.newest(), current) {
            _ if held.is_some() => held.map(|h| CandidateView {
                version: h.version.clone(),
                sha256: h.hash.map(|h| h.printed()),
                verdict: h.verdict,
                reason: h.reason.clone(),
                variant: None,
            }),
            (Some(n), false) => Some(CandidateView {
                version: n.judgement.version.clone(),
                sha256: n.hash.map(|h| h.printed()),
                verdict: n.judgement.verdict,
                reason: n.judgement.reason.clone(),
                variant: n.variant.clone(),
            }),
            _ => None,
        }
    }
}
