//! Starting on the known-good: a pod with no accepted config (the source's newest is too new, too
//! old, invalid, refused by a rule or the checker, or missing) and none in force reads the record
//! beside the source ([`Action::ReadKnownGood`]), has each line's config judged like any candidate
//! under the settings in force ([`Action::JudgeKnownGood`]), and promotes the newest one accepted
//! that the component never refused. It runs it, reported as such (`/status` `known_good`, the
//! config check's text, the pod condition), until the source holds an accepted config, which is
//! promoted over it as any change is. Asked once per settings in force: a range changed live (so
//! that what runs is no longer accepted) asks again.

use super::decision::Tell;
use super::messages::{Action, JudgedLine, LogLine};
use super::state::{Gate, KnownGoodUse, Promotion, modes};
use crate::settings::{Mode, Reload, Validate};
use crate::snapshot::ContentHash;
use crate::snapshot::{Observed, Snapshot};
use crate::validate::Checked;
use crate::verdict::{Judgement, Verdict};

impl Gate {
    /// After a judgement: with nothing in force and nothing accepted to promote, ask for the record.
    pub(super) fn want_known_good(&mut self, out: &mut Vec<Action>) {
        if self.setup.gate_only()
            || self.verdicts.active().is_some()
            || !self.work.is_idle()
            || self.known_goods.checking.is_some()
            || self.settings().mode == Mode::Observe
            || self.settings().accepts.is_none()
            || self
                .verdicts
                .newest()
                .is_none_or(|n| n.judgement.verdict == Verdict::Accepted)
            || self.known_goods.asked.as_ref() == Some(self.settings())
        {
            return;
        }
        self.known_goods.asked = Some(self.settings().clone());
        out.push(Action::ReadKnownGood);
    }

    /// Answer to [`Action::ReadKnownGood`]: the configs of the record's lines (or why there are none).
    pub(super) fn known_good_read(
        &mut self,
        read: Result<(String, Vec<Snapshot>), String>,
        out: &mut Vec<Action>,
    ) {
        match read {
            Err(why) => out.push(Action::Log(LogLine::NoKnownGood { why })),
            Ok((record, configs)) if configs.is_empty() => {
                out.push(Action::Log(LogLine::NoKnownGood {
                    why: format!("{record} holds no known-good yet"),
                }))
            }
            Ok((record, configs)) => {
                self.known_goods.record = record;
                out.push(Action::JudgeKnownGood {
                    settings: Box::new(self.settings().clone()),
                    configs,
                });
            }
        }
    }

    /// Answer to [`Action::JudgeKnownGood`]: the newest accepted, never refused, is promoted while
    /// nothing else is in force or on its way.
    pub(super) fn known_good_judged(
        &mut self,
        judged: Vec<(Snapshot, Judgement)>,
        out: &mut Vec<Action>,
    ) {
        let record = self.known_goods.record.clone();
        let best = judged
            .into_iter()
            .map(|(s, j)| {
                let j = if self.setup.secret() {
                    crate::verdict::for_a_secret(
                        j,
                        &self.settings().version_from,
                        self.setup.source_kind(),
                    )
                } else {
                    j
                };
                (s, j)
            })
            .filter(|(s, j)| j.verdict == Verdict::Accepted && !self.is_rejected(s.hash()))
            .max_by(|(_, a), (_, b)| match (&a.parsed, &b.parsed) {
                (Some(a), Some(b)) => a.cmp_precedence(b),
                (a, b) => a.is_some().cmp(&b.is_some()),
            });
        let Some((snapshot, j)) = best else {
            out.push(Action::Log(LogLine::NoKnownGood {
                why: format!("no config in {record} is accepted under the settings in force"),
            }));
            return;
        };
        if self.verdicts.active().is_some() || !self.work.is_idle() {
            return;
        }
        // The component's checker passes it first, as any candidate.
        if self.settings().validate != Validate::None {
            out.push(Action::Validate {
                snapshot: snapshot.clone(),
                check: self.settings().validate.clone(),
                timeout: self.settings().validate_timeout,
            });
            self.known_goods.checking = Some((snapshot, j));
            return;
        }
        self.promote_known_good(snapshot, j, out);
    }

    /// Answer to the checker's run on the known-good; false when it was not about the known-good.
    pub(super) fn known_good_validated(
        &mut self,
        sha: ContentHash,
        checked: &Checked,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some((snapshot, j)) = self.known_goods.checking.take_if(|(s, _)| s.hash() == sha)
        else {
            return false;
        };
        match checked {
            Checked::Passed => {
                if self.verdicts.active().is_none() && self.work.is_idle() {
                    self.promote_known_good(snapshot, j, out);
                }
            }
            // Its status only: the known-good may be a Secret's, and its output may quote it.
            Checked::Failed { status, .. } => out.push(Action::Log(LogLine::NoKnownGood {
                why: format!(
                    "{} refused the known-good {} ({status})",
                    self.settings().validate.name(),
                    j.version.as_deref().unwrap_or("config")
                ),
            })),
            // Cancelled: the loop is stopping, or a newer candidate came first.
            Checked::Cancelled => {}
            Checked::TimedOut(_) | Checked::NotRun(_) => {
                out.push(Action::Log(LogLine::NoKnownGood {
                    why: format!(
                        "{} did not pass the known-good {}",
                        self.settings().validate.name(),
                        j.version.as_deref().unwrap_or("config")
                    ),
                }))
            }
        }
        true
    }

    /// Promotes the known-good `snapshot`, judged `j`.
    fn promote_known_good(&mut self, snapshot: Snapshot, j: Judgement, out: &mut Vec<Action>) {
        let record = self.known_goods.record.clone();
        let Some(because) = self.verdicts.newest().map(|n| n.judgement.clone()) else {
            return;
        };
        let sha = snapshot.hash();
        let tell = if self.verdicts.on_disk().is_some() {
            Tell::Reload
        } else {
            Tell::StartupCheck
        };
        out.push(Action::Log(LogLine::KnownGoodStart {
            sha,
            version: j.version.clone(),
            record: record.clone(),
            because: because.verdict,
            reason: because.reason.clone(),
        }));
        let known_good = KnownGoodUse {
            hash: sha,
            modes: modes(&Observed::Config(snapshot.clone())),
            judgement: j.clone(),
            record,
            because: because.verdict,
            reason: because.reason,
        };
        self.work.promote(Promotion {
            judged: JudgedLine {
                accepted: true,
                verdict: j.verdict,
                version: j.version.clone().unwrap_or_default(),
                variant: String::new(),
                sha: sha.short(),
                reason: j.reason.clone(),
            },
            tell,
            keep_baseline: false,
            sha,
            version: j.version,
            on_loop: false,
            known_good: Some(known_good),
        });
        out.push(Action::Switch {
            snapshot,
            owe_reload: self.settings().reload != Reload::None,
            variant: None,
            keep_baseline: false,
            on_loop: false,
        });
    }

    /// The known-good is in the promoted dir: it is the active config, marked as the known-good.
    pub(super) fn known_good_activated(&mut self, k: KnownGoodUse, now: jiff::Timestamp) {
        self.activate(Some(k.hash), k.modes.clone(), &k.judgement, None, now);
        self.known_goods.in_use = Some(k);
    }

    /// An accepted candidate goes to the component's checker: the known-good's check, if one is
    /// under way, is moot (both stage into the one candidate dir). Whether one was.
    pub(super) fn known_good_check_ended(&mut self) -> bool {
        self.known_goods.checking.take().is_some()
    }

    /// The known-good in force, while it is what is active.
    pub(super) fn known_good_in_force(&self) -> Option<&KnownGoodUse> {
        let active = self.verdicts.active()?.hash;
        self.known_goods
            .in_use
            .as_ref()
            .filter(|k| k.hash == active)
    }
}

/// The fallback part of the [`Gate`]: the known-good from the record, asked for, checked and promoted.
/// Written only by this file.
#[derive(Debug, Clone, Default)]
pub(super) struct KnownGoods {
    /// The settings the known-good record was last asked for under: asked again only under others.
    asked: Option<crate::settings::Settings>,
    /// The record's name, as the edge said it.
    record: String,
    /// The known-good waiting for the component's checker.
    checking: Option<(Snapshot, Judgement)>,
    /// The known-good promoted last (in force while it is the active config).
    in_use: Option<KnownGoodUse>,
}
