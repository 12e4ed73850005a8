//! The Event each of the gate's [`Notice`]s is, the pod conditions the published [`Status`] calls
//! for, and the patch that writes the conditions: pure, so the reporter only carries them out.
//!
//! `confgate.io/config-compatible`'s status is `Status::ready`, what `/readyz` answers, so a
//! readiness gate cannot disagree with it. `confgate.io/config-current` says the newest config is
//! in force, and `ReloadFailing` after `RELOAD_FAILING_AFTER` failed reloads in a row (counted by
//! the gate). Both are written with the facts annotation in one `pods/status` patch; `may_wait`
//! holds back a patch that changes no condition's status or reason (at most `SETTLE_MAX`) for the
//! reload of the promoted config, so a healthy change is one write. No Event for a routine accepted
//! promotion.

use crate::api::condition::{
    CONDITION_TYPE, CURRENT_TYPE, Described, FACTS_ANNOTATION, Facts, Held, Newest, Reason,
    ReloadFailing, RolloutPart,
};
use crate::api::note::Note;
use crate::snapshot::PrintedHash;
use crate::state::{
    ActiveView, AppliedView, CandidateView, CheckKind, Holding, Notice, ReloadResult, Status,
};
use crate::verdict::Verdict;

/// The API server's limit on an Event note.
const NOTE_MAX: usize = 1024;

/// A condition as confgate writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// `version X sha256:...`; a snapshot without either (missing, unreadable) is just `config`.
fn described(version: Option<&str>, sha: Option<&PrintedHash>) -> Described {
    Described::new(version, sha.map(ToString::to_string).as_deref())
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// The Event a notice of the gate is.
///
/// The gate sends none for a routine accepted promotion: the conditions and the facts annotation
/// already say what is active, and an Event per pod per healthy change is a write per pod the API
/// server stores and serves for nothing (at 1,000 pods, 1,000 Events for one edit). Events are for
/// what an operator acts on: a config held, missing or refused by the component, a reload failing,
/// a config active in observe mode although rejected, and the promotion that ends a hold one of
/// those Events reported (so a Warning is followed by its resolution).
pub fn note(notice: &Notice) -> Note {
    let mut n = match notice {
        Notice::KnownGood(k) => Note {
            warning: true,
            reason: "KnownGood",
            action: "Promote",
            note: format!(
                "started on the known-good {} from {}: the source's newest config is {}",
                described(k.version.as_deref(), Some(&k.sha256)),
                k.record,
                k.because
            ),
        },
        Notice::Active(a) => {
            let accepted = a.verdict == Verdict::Accepted;
            Note {
                warning: !accepted,
                reason: if accepted { "Accepted" } else { "Observed" },
                action: "Promote",
                note: if accepted {
                    format!(
                        "{} is active",
                        described(a.version.as_deref(), Some(&a.sha256))
                    )
                } else {
                    format!(
                        "observe mode: {} is active although {}",
                        described(a.version.as_deref(), Some(&a.sha256)),
                        a.verdict
                    )
                },
            }
        }
        Notice::Held {
            candidate: c,
            active,
            applied,
        } => held(c, active.as_ref(), applied.as_ref()),
        Notice::ReloadFailed { target, error } => Note {
            warning: true,
            reason: "ReloadFailed",
            action: "Reload",
            note: format!(
                "reload via {target} failed: {}",
                error.as_deref().unwrap_or("unknown error")
            ),
        },
        // A bad or unknown annotation: the values in force before it are kept and readiness
        // stays with the config, so this Event and the conditions' message are where it shows.
        Notice::SettingsProblem(problem) => Note {
            warning: true,
            reason: "SettingsProblem",
            action: "Configure",
            note: format!("{problem}; the values in force before it are kept"),
        },
    };
    n.note = truncate(std::mem::take(&mut n.note), NOTE_MAX);
    n
}

/// The Event of a held newest config `c`: refused by the component, missing, or rejected.
fn held(c: &CandidateView, active: Option<&ActiveView>, applied: Option<&AppliedView>) -> Note {
    let named = described(c.version.as_deref(), c.sha256.as_ref());
    let holding = |reason: String| match active {
        Some(a) => Holding {
            held: Some(described(a.version.as_deref(), Some(&a.sha256)).to_string()),
            newest: (named != Described::default()).then(|| named.to_string()),
            verdict: c.verdict,
            reason: None,
            in_place: c.sha256.as_ref() == Some(&a.sha256),
        }
        .because(reason)
        .to_string(),
        None if c.verdict == Verdict::Missing => format!("{reason}; no config accepted yet"),
        None => format!("{named} is {}: {reason}; no config accepted yet", c.verdict),
    };
    match c.verdict {
        Verdict::RejectedByComponent => Note {
            warning: true,
            reason: "RejectedByComponent",
            action: "Rollback",
            note: format!(
                "{named} was refused by the component ({}){}",
                c.reason,
                match applied {
                    Some(a) => format!(
                        "; rolled back to {}",
                        described(a.version.as_deref(), Some(&a.sha256))
                    ),
                    None => "; no applied config to roll back to".into(),
                }
            ),
        },
        Verdict::Missing => Note {
            warning: true,
            reason: "Missing",
            action: "Hold",
            note: holding(c.reason.clone()),
        },
        _ => Note {
            warning: true,
            reason: "Rejected",
            action: "Hold",
            note: holding(c.reason.clone()),
        },
    }
}

/// Failed reload attempts in a row after which `config-current` says the reload is failing: one
/// failure retried at once (a component restarting) does not flap the condition.
pub const RELOAD_FAILING_AFTER: u32 = 3;

/// The facts both conditions and the annotation [`FACTS_ANNOTATION`] carry; none before anything
/// was read.
pub fn facts(s: &Status) -> Option<Facts> {
    if s.active.is_none() && s.candidate.is_none() {
        return None;
    }
    Some(Facts {
        rollout: s.rollout.as_ref().map(|r| RolloutPart {
            percent: r.percent.map(|p| p.to_string()),
            assigned: r.assigned,
            held: r.held.as_ref().map(|h| Held {
                config: Described::new(h.version.as_deref(), h.sha256.as_deref()),
                verdict: h.verdict,
            }),
        }),
        active: s.active.as_ref().map(|a| {
            described(a.version.as_deref(), Some(&a.sha256)).with_variant(a.variant.as_deref())
        }),
        applied: s
            .applied
            .as_ref()
            .map(|a| described(a.version.as_deref(), Some(&a.sha256))),
        newest: s.candidate.as_ref().map(|c| Newest {
            config: described(c.version.as_deref(), c.sha256.as_ref())
                .with_variant(c.variant.as_deref()),
            verdict: c.verdict,
            reason: c.reason.clone(),
        }),
        settings_problem: s.failing(CheckKind::Settings).map(|c| c.message.clone()),
        reload_failing: (s.reload.consecutive_failures >= RELOAD_FAILING_AFTER).then(|| {
            ReloadFailing {
                target: s.reload.target.clone(),
                error: s
                    .reload
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "unknown error".into()),
            }
        }),
    })
}

/// Whether the patch for `next` may wait for the reload of its active config: it leaves the status
/// and reason of every condition as last `sent` (so readiness and `config-current` are not held up)
/// and a reload of the active config is still to be answered, whose answer moves `applied` in the
/// facts. Waiting writes both in one patch instead of one for the promotion and one for the reload:
/// a healthy change costs one write per pod. Never before the first patch, after a refusal, or
/// while reloads fail (the answer may never come, and the facts say what was promoted meanwhile).
pub fn may_wait(sent: &[Condition], next: &[Condition], s: &Status) -> bool {
    let same = !sent.is_empty()
        && sent.len() == next.len()
        && sent
            .iter()
            .zip(next)
            .all(|(a, b)| (a.type_, a.status, &a.reason) == (b.type_, b.status, &b.reason));
    let reload_due = s.reload.target != "none"
        && s.reload.last_result != ReloadResult::Rejected
        && s.reload.consecutive_failures == 0
        && s.active.as_ref().map(|a| a.sha256) != s.applied.as_ref().map(|a| a.sha256);
    same && reload_due
}

/// The conditions for a status, none before anything was read: `confgate.io/config-compatible`
/// first, then `confgate.io/config-current`.
///
/// `config-compatible` is what `readinessGates` reads, so its status is exactly `/readyz`'s (a replica
/// holding an older config under `hold`, or observing under `--mode observe`, stays ready; so does
/// one whose reload keeps failing, since the component still runs the config it had).
/// `config-current` is True when the newest config is the one in force, accepted, and taken by the
/// component; its reason is the newest config's verdict (`TooNew` while one is held; mid-rollout, the
/// held candidate's verdict on a pod its bucket assigns the candidate), or
/// `ReloadFailing` when the reload of an accepted newest config keeps failing. Both carry the same
/// message, the [`Facts`] in prose.
pub fn conditions(s: &Status) -> Vec<Condition> {
    let Some(facts) = facts(s) else {
        return Vec::new();
    };
    let newest = match (&s.candidate, &s.active) {
        (Some(c), _) => c.verdict,
        (None, Some(a)) => a.verdict,
        (None, None) => return Vec::new(),
    };
    let verdict_reason = match &s.candidate {
        // Started on the known-good: the source's newest is not in force, and the reason says what
        // runs instead; the message says why.
        Some(_) if s.known_good.is_some() => Reason::KnownGood,
        // Accepted but not in place: the promotion failed.
        // Accepted and waiting for this pod's share of the reload spread.
        Some(_) if s.spread.is_some() => Reason::Spreading,
        Some(c) if c.verdict == Verdict::Accepted => Reason::NotPromoted,
        _ => Reason::Verdict(newest),
    };
    let held = facts.rollout.as_ref().and_then(|r| r.held.as_ref());
    let current_reason = match verdict_reason {
        // The candidate this pod's bucket assigns is held back: what the ConfigMap assigns it is not
        // in force, whatever the stable config's verdict. The reason says so, so that health checks
        // read it rather than the message.
        Reason::Verdict(Verdict::Accepted) if held.is_some() => {
            Reason::Verdict(held.map_or(Verdict::Accepted, |h| h.verdict))
        }
        Reason::Verdict(Verdict::Accepted) if facts.reload_failing.is_some() => {
            Reason::ReloadFailing
        }
        other => other,
    };
    let current = current_reason == Reason::Verdict(Verdict::Accepted);
    let active_accepted = s
        .active
        .as_ref()
        .is_some_and(|a| a.verdict == Verdict::Accepted);
    let compatible_reason = match (s.ready, active_accepted) {
        (true, true) => Reason::Verdict(Verdict::Accepted),
        // Ready only because observe mode does not enforce.
        (true, false) => Reason::Observed,
        // Unready on the known-good (`unready`): what is wrong with the source is why.
        (false, _) if verdict_reason == Reason::KnownGood => Reason::Verdict(newest),
        (false, _)
            if !matches!(
                verdict_reason,
                Reason::Verdict(Verdict::Accepted) | Reason::Spreading
            ) =>
        {
            verdict_reason
        }
        (false, _) => Reason::NotReady,
    };
    let message = truncate(facts.to_string(), NOTE_MAX);
    vec![
        Condition {
            type_: CONDITION_TYPE,
            status: s.ready,
            reason: compatible_reason.to_string(),
            message: message.clone(),
        },
        Condition {
            type_: CURRENT_TYPE,
            status: current,
            reason: current_reason.to_string(),
            message,
        },
    ]
}

/// The strategic merge patch for the conditions, each with its last transition time, and the facts
/// annotation. `conditions` merges on `type`, so other conditions stay, and `annotations` on the key,
/// so other annotations stay; the pods/status subresource takes both (it keeps the spec as it is).
pub fn condition_patch(cs: &[(Condition, jiff::Timestamp)], facts: &str) -> serde_json::Value {
    let conditions: Vec<serde_json::Value> = cs
        .iter()
        .map(|(c, since)| {
            serde_json::json!({
                "type": c.type_,
                "status": if c.status { "True" } else { "False" },
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": since.round(jiff::Unit::Second).unwrap_or(*since).to_string(),
            })
        })
        .collect();
    serde_json::json!({
        "metadata": { "annotations": { FACTS_ANNOTATION: facts } },
        "status": { "conditions": conditions },
    })
}

#[cfg(test)]
mod tests;
