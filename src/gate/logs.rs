//! The log line of each [`LogLine`] the gate asks for: one line per decision, structured fields, no
//! content.

use std::path::Path;

use tracing::{error, info, warn};

use super::machine::{ANNOTATIONS_GRACE, JudgedLine, LogLine};
use crate::known_good::Recorded;

/// Where the lines name files: the annotations file, the watched dir and the promoted dir.
pub(super) struct Places<'a> {
    pub annotations: &'a Path,
    pub watch: &'a Path,
    pub promoted: Option<&'a Path>,
}

pub(super) fn log(note: &LogLine, at: &Places<'_>) {
    let file = at.annotations.display();
    match note {
        LogLine::Judged(j) => judged(j),
        LogLine::PromotionFailed {
            error,
            version,
            sha,
        } => error!(error = %error, version, sha, "promotion failed; previous config kept"),
        LogLine::Promoted {
            version,
            variant,
            sha,
        } => {
            if let Some(dir) = at.promoted {
                info!(version, variant, sha, dir = %dir.display(), "promoted");
            }
        }
        LogLine::Validated {
            version,
            sha,
            checker,
            reason: None,
        } => info!(
            version,
            sha, checker, "the component's checker passed the candidate"
        ),
        LogLine::Validated {
            version,
            sha,
            checker,
            reason: Some(reason),
        } => warn!(
            version,
            sha, checker, reason, "the component's checker refused the candidate; not promoted"
        ),
        LogLine::CheckNotAnswered {
            version,
            sha,
            checker,
            reason,
        } => warn!(
            version,
            sha,
            checker,
            reason,
            "the component's checker gave no answer; not promoted, checked again after a wait"
        ),
        LogLine::Tampered { expected, found } => warn!(
            expected,
            found = found.as_deref().unwrap_or("no config"),
            "the promoted dir was changed behind confgate's back; promoting the config in force again"
        ),
        LogLine::CheckSuperseded { sha, version } => info!(
            sha,
            version, "a newer snapshot superseded the candidate under check; its check is ended"
        ),
        LogLine::Problem(p) => warn!(problem = %p, "settings problem"),
        LogLine::ProblemCleared(p) => info!(problem = %p, "settings problem cleared"),
        LogLine::AnnotationGone { setting, value } => {
            info!(setting, value = %value, "annotation gone; the flag's value is back in force")
        }
        LogLine::AnnotationOverrides {
            setting,
            annotation,
            value,
            overrides,
        } => {
            info!(setting, annotation, value = %value, overrides = %overrides, "annotation overrides flag")
        }
        LogLine::SettingsChanged {
            accepts,
            mode,
            reload,
        } => {
            info!(accepts = accepts.as_deref().unwrap_or("none"), mode = mode.as_str(), reload = %reload, "settings changed")
        }
        LogLine::AnnotationsBack => info!(file = %file, "annotations file back"),
        LogLine::AnnotationsMissing { why } => {
            info!(file = %file, error = %why, grace_ms = ANNOTATIONS_GRACE.as_millis() as u64, "annotations file not readable; keeping the settings in force, looking again")
        }
        LogLine::AnnotationsGone { changed } => {
            warn!(file = %file, changed, "annotations file still absent; its settings no longer apply")
        }
        LogLine::NoLongerActive { sha } => {
            warn!(sha = %sha, "the active config does not pass the settings now in force; no longer active")
        }
        LogLine::AppliedBase { sha, version } => {
            info!(sha = %sha.short(), version = version.as_deref().unwrap_or(""), "the config the component applied before the restart is the rollback base")
        }
        LogLine::OwedFromBefore { sha, version } => {
            info!(sha = %sha.short(), version = version.as_deref().unwrap_or(""), "a reload was owed before the restart; requesting it")
        }
        LogLine::OwedRefused { sha } => {
            info!(sha = %sha.short(), "the reload owed before the restart is of content the component refused; not sent")
        }
        LogLine::RefusalsForgotten { count } => {
            info!(
                count,
                "the reload target changed: contents refused under the one before are no longer held against them"
            )
        }
        LogLine::RefusedInPlace { sha } => {
            warn!(sha = %sha.short(), "the promoted dir holds content the component refused before the restart; rolling back")
        }
        LogLine::NoBase { sha, refusal } => {
            warn!(sha = %sha.short(), reason = %refusal, "rejected by the component; no applied config to roll back to")
        }
        LogLine::RolledBack {
            sha,
            refusal,
            to,
            version,
        } => {
            warn!(sha = %sha.short(), reason = %refusal, rolled_back_to = %to.short(), version = version.as_deref().unwrap_or(""), "rejected by the component; rolled back")
        }
        LogLine::RollbackOther { sha } => {
            error!(sha = %sha.short(), "rollback left other content in the promoted dir")
        }
        LogLine::RollbackFailed {
            sha,
            error,
            retry_in,
        } => {
            error!(error = %error, sha = %sha.short(), retry_in_ms = retry_in.as_millis() as u64, "rollback failed; the refused config stays in place until it is tried again")
        }
        LogLine::BaseNotAccepted { sha, base, why } => {
            error!(sha = %sha.short(), base = %base.short(), why = %why, "rejected by the component; the config it applied last is not accepted under the settings in force, so it is not rolled back to")
        }
        LogLine::BaselineApplied { sha, version } => {
            info!(sha = %sha.short(), version = version.as_deref().unwrap_or(""), "the component answered a later reload: it started on the first config, which is the rollback base")
        }
        LogLine::Watch(Some(e)) => warn!(error = %e, "watch not in place; polling"),
        LogLine::Watch(None) => info!(dir = %at.watch.display(), "watching"),
        LogLine::Spread {
            version,
            sha,
            due,
            delay,
            spread,
        } => {
            let spread = crate::values::duration_text(*spread);
            info!(version, sha, due_at = %due, delay_ms = delay.as_millis() as u64, reload_spread = %spread, "change seen; promoting at {due} (reload spread {spread})")
        }
        LogLine::TrialStarted {
            sha,
            version,
            trial,
        } => {
            let trial = crate::values::duration_text(*trial);
            info!(sha = %sha.short(), version, trial = %trial, "known-good trial started: recorded if the component stays ready without restarting for {trial}")
        }
        LogLine::TrialAgain {
            sha,
            restarted,
            ready,
        } => {
            warn!(sha = %sha.short(), restarted, ready, "known-good trial starts again: the component {}", if *restarted { "restarted" } else { "is not ready" })
        }
        LogLine::TrialReadFailed { sha, why } => {
            warn!(sha = %sha.short(), error = %why, "known-good trial: cannot read the component's containers; trying again after another period")
        }
        LogLine::TrialUnavailable { why } => {
            info!(reason = %why, "no known-good trial: the component's containers cannot be read; nothing is recorded")
        }
        LogLine::TrialPassed { sha, version, line } => {
            info!(sha = %sha.short(), version, line, "known-good trial passed; recording it")
        }
        LogLine::KnownGood {
            sha,
            version,
            outcome,
        } => known_good(sha, version, outcome),
        LogLine::NoKnownGood { why } => {
            warn!(reason = %why, "no known-good to start on; waiting for an accepted config")
        }
        LogLine::KnownGoodStart {
            sha,
            version,
            record,
            because,
            reason,
        } => {
            warn!(sha = %sha.short(), version = version.as_deref().unwrap_or(""), record, because = because.as_str(), reason = %reason, "the source holds no accepted config; starting on the known-good")
        }
        LogLine::Rollout(r) => {
            let held = r.held.as_ref();
            info!(
                percent = %r.percent.map(|p| p.to_string()).unwrap_or_default(),
                bucket = %r.bucket.map(|b| b.to_string()).unwrap_or_default(),
                assigned = r.assigned.as_str(),
                track = r.track.as_str(),
                keys = %r.keys,
                held_verdict = held.map(|h| h.verdict.as_str()).unwrap_or(""),
                held_version = held.and_then(|h| h.version.as_deref()).unwrap_or(""),
                reason = %r.reason,
                "rollout"
            )
        }
        LogLine::RolloutOver => info!("rollout over: no rollout key in the config"),
    }
}

fn judged(j: &JudgedLine) {
    let JudgedLine {
        verdict,
        version,
        variant,
        sha,
        reason,
        ..
    } = j;
    if j.accepted {
        info!(verdict = %verdict, version, variant, sha, reason = %reason, "judged");
    } else {
        warn!(verdict = %verdict, version, variant, sha, reason = %reason, "judged");
    }
}

fn known_good(sha: &crate::snapshot::ContentHash, version: &str, outcome: &Recorded) {
    let sha = sha.short();
    match outcome {
        Recorded::Written { record, replaced } => {
            info!(
                sha,
                version,
                record,
                replaced = replaced.as_deref().unwrap_or(""),
                "recorded as the known-good of its version line"
            )
        }
        Recorded::Kept {
            record,
            newer: false,
            ..
        } => info!(
            sha,
            version, record, "known-good already recorded by another pod; nothing written"
        ),
        Recorded::Kept {
            record,
            recorded,
            newer: true,
        } => info!(
            sha,
            version, record, recorded, "a newer known-good is recorded; nothing written"
        ),
        Recorded::Failed(why) => {
            warn!(sha, version, error = %why, "cannot record the known-good; trying again after another trial period")
        }
    }
}
