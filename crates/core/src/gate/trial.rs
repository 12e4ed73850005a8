//! The known-good trial of [`Gate`]: after the component applied a config (its reload answered or
//! confirmed, or its start-up check), the component's containers are read once for their restart
//! count, again when the trial period is over; ready then, with no restart in between, the config
//! is recorded as the known-good of its version line ([`Action::RecordKnownGood`]). A restart, or
//! not ready at the end, starts the period again; a config the component refused, or replaced by
//! another, is never recorded. Whether the record already holds a newer one is the edge's read
//! (`known_good::decide`), made under the API's optimistic concurrency.

use std::time::Instant;

use super::messages::{Action, LogLine, Now};
use super::state::Gate;
use crate::known_good::{ComponentRead, Line, Recorded, parse_like};
use crate::snapshot::ContentHash;
use crate::values::{ApiVersion, Range, SchemeVersion, Verdict};

impl Gate {
    /// The component applied `sha` (its version `version`): a trial starts, unless trials are off,
    /// the edge said it cannot read the component, the config has no version, it is not accepted
    /// under the settings in force (observe mode promotes what the range refuses: such a config is no
    /// known-good for a pod that enforces), or it is what this pod recorded or is trying already.
    pub(super) fn start_trial(
        &mut self,
        sha: ContentHash,
        version: Option<&str>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let accepted = self
            .verdicts
            .applied()
            .is_some_and(|a| a.hash == sha && a.verdict == Verdict::Accepted);
        if !accepted
            || self.settings().trial.is_zero()
            || self.trials.trial_unavailable
            || self.trials.recorded == Some(sha)
            || self.trials.trial.as_ref().is_some_and(|t| t.sha == sha)
        {
            return;
        }
        let Some((version, parsed)) = version.and_then(|v| Some((v, self.scheme_version(v)?)))
        else {
            self.trials.trial = None;
            return;
        };
        self.trials.trial = Some(Trial {
            sha,
            version: version.to_owned(),
            parsed,
            since: now.at,
            restarts: None,
            phase: Phase::Starting,
        });
        out.push(Action::Log(LogLine::TrialStarted {
            sha,
            version: version.to_owned(),
            trial: self.settings().trial,
        }));
        out.push(Action::ReadComponent);
    }

    /// `text` under the scheme of the range in force (semver without one).
    fn scheme_version(&self, text: &str) -> Option<SchemeVersion> {
        match self.settings().accepts.as_ref().map(|a| a.range()) {
            Some(Range::Api(_)) => text.parse::<ApiVersion>().ok().map(SchemeVersion::Api),
            _ => parse_like(&SchemeVersion::Semver(semver::Version::new(0, 0, 0)), text),
        }
    }

    /// The component refused `sha`: its trial, if any, ends without a record.
    pub(super) fn end_trial_refused(&mut self, sha: ContentHash) {
        if self.trials.trial.as_ref().is_some_and(|t| t.sha == sha) {
            self.trials.trial = None;
        }
    }

    /// When the running period ends.
    pub(super) fn trial_due_at(&self) -> Option<Instant> {
        let t = self
            .trials
            .trial
            .as_ref()
            .filter(|t| t.phase == Phase::Running)?;
        Some(t.since + self.settings().trial)
    }

    /// On a timer: when the period is over, the component is read again.
    pub(super) fn take_trial_due(&mut self, now: Instant, out: &mut Vec<Action>) {
        let Some(due) = self.trial_due_at().filter(|d| *d <= now) else {
            return;
        };
        let _ = due;
        if self.settings().trial.is_zero() {
            self.trials.trial = None;
            return;
        }
        if let Some(t) = self.trials.trial.as_mut() {
            // A period whose first read failed begins with this read.
            t.phase = if t.restarts.is_some() {
                Phase::Ending
            } else {
                Phase::Starting
            };
            out.push(Action::ReadComponent);
        }
    }

    /// Answer to [`Action::ReadComponent`].
    pub(super) fn component_read(&mut self, read: ComponentRead, now: Now, out: &mut Vec<Action>) {
        let applied = self.verdicts.applied().map(|a| a.hash);
        let Some(t) = self.trials.trial.as_mut() else {
            return;
        };
        // Applied no more (refused, rolled back, replaced): nothing of it is recorded.
        if applied != Some(t.sha) || self.verdicts.is_rejected(t.sha) {
            self.trials.trial = None;
            return;
        }
        match read {
            ComponentRead::Unavailable(why) => {
                out.push(Action::Log(LogLine::TrialUnavailable { why }));
                self.trials.trial = None;
                self.trials.trial_unavailable = true;
            }
            ComponentRead::Failed(why) => {
                out.push(Action::Log(LogLine::TrialReadFailed { sha: t.sha, why }));
                t.phase = Phase::Running;
                t.since = now.at;
            }
            ComponentRead::Facts(f) => match t.phase {
                Phase::Ending if f.ready && Some(f.restarts) == t.restarts => {
                    t.phase = Phase::Recording;
                    out.push(Action::Log(LogLine::TrialPassed {
                        sha: t.sha,
                        version: t.version.clone(),
                        line: Line::of(&t.parsed)
                            .map(|l| l.to_string())
                            .unwrap_or_default(),
                    }));
                    out.push(Action::RecordKnownGood {
                        sha: t.sha,
                        version: t.version.clone(),
                        parsed: t.parsed.clone(),
                    });
                }
                Phase::Ending => {
                    out.push(Action::Log(LogLine::TrialAgain {
                        sha: t.sha,
                        restarted: Some(f.restarts) != t.restarts,
                        ready: f.ready,
                    }));
                    t.restarts = Some(f.restarts);
                    t.since = now.at;
                    t.phase = Phase::Running;
                }
                // The period begins now, whatever the component's readiness: it must be ready at
                // the end, with no restart in between.
                _ => {
                    t.restarts = Some(f.restarts);
                    t.since = now.at;
                    t.phase = Phase::Running;
                }
            },
        }
    }

    /// Answer to [`Action::RecordKnownGood`].
    pub(super) fn known_good_recorded(&mut self, r: Recorded, now: Now, out: &mut Vec<Action>) {
        let Some(t) = self.trials.trial.take_if(|t| t.phase == Phase::Recording) else {
            return;
        };
        match &r {
            Recorded::Written { .. } | Recorded::Kept { .. } => self.trials.recorded = Some(t.sha),
            // Tried again after another period.
            Recorded::Failed(_) => {
                self.trials.trial = Some(Trial {
                    since: now.at,
                    phase: Phase::Running,
                    ..t.clone()
                });
            }
        }
        out.push(Action::Log(LogLine::KnownGood {
            sha: t.sha,
            version: t.version,
            outcome: r,
        }));
    }
}

/// The known-good trial part of the [`Gate`]: the trial under way, what was recorded, and whether a
/// trial can run at all. Written only by this file.
#[derive(Debug, Clone, Default)]
pub(super) struct Trials {
    /// The known-good trial of the config the component applied last.
    trial: Option<Trial>,
    /// The content this pod recorded as known-good, or found recorded: not tried again.
    recorded: Option<ContentHash>,
    /// The component cannot be read (no API client): no trial starts.
    trial_unavailable: bool,
}

/// A trial under way.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Trial {
    sha: ContentHash,
    version: String,
    parsed: SchemeVersion,
    /// When the current period began: the config applied, or a restart seen.
    since: Instant,
    /// The component's restarts when the period began (`None`: not read yet).
    restarts: Option<u64>,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The component is being read for the period's start.
    Starting,
    /// The period runs until `since` plus the trial setting.
    Running,
    /// The period is over; the component is being read.
    Ending,
    /// The trial passed; the record is being written.
    Recording,
}
