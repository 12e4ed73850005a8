//! What confgate reports on its own pod: Events (accepted, rejected, missing, reload failed) through
//! [`EventSink`] (events.k8s.io/v1, only identical repeats folded into a series), and the conditions
//! `confgate.io/config-compatible` and `confgate.io/config-current` on pods/status by strategic
//! merge patch.
//!
//! Both are derived from changes of the published [`Status`], so the decision loop knows nothing of
//! the API. An API failure is logged and never stops the gate.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tracing::{debug, warn};

use super::condition::{ConditionMessage, Described, Newest, Reason, RolloutPart};
use super::events::EventSink;
use super::pod_view::PodView;
use super::{CONDITION_TYPE, CURRENT_TYPE, explain};
use crate::state::{ReloadResult, Status};
use crate::verdict::Verdict;

/// After a failed condition patch, when to try again.
const PATCH_RETRY: Duration = Duration::from_secs(30);
/// The API server's limit on an Event note.
const NOTE_MAX: usize = 1024;

/// The sidecar's pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

/// One Event to publish, before it meets the Recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

/// A condition as confgate writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// `version X sha256:...`; a snapshot without either (missing, unreadable) is just `config`.
fn described(version: Option<&str>, sha: Option<&str>) -> Described {
    Described::new(version, sha)
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

/// The Events a change of status calls for.
pub fn notes(prev: &Status, next: &Status) -> Vec<Note> {
    let mut out = Vec::new();
    let active_sha = |s: &Status| s.active.as_ref().map(|a| a.sha256.clone());
    if let Some(a) = &next.active
        && active_sha(prev) != active_sha(next)
    {
        let accepted = a.verdict == Verdict::Accepted;
        out.push(Note {
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
        });
    }
    let cand_id = |s: &Status| {
        s.candidate
            .as_ref()
            .map(|c| (c.sha256.clone(), c.verdict, c.reason.clone()))
    };
    if let Some(c) = &next.candidate
        && c.verdict != Verdict::Accepted
        && cand_id(prev) != cand_id(next)
    {
        let holding = match &next.active {
            Some(a) => format!(
                "; holding {}",
                described(a.version.as_deref(), Some(&a.sha256))
            ),
            None => "; no config accepted yet".into(),
        };
        out.push(if c.verdict == Verdict::RejectedByComponent {
            Note {
                warning: true,
                reason: "RejectedByComponent",
                action: "Rollback",
                note: format!(
                    "{} was refused by the component ({}){}",
                    described(c.version.as_deref(), c.sha256.as_deref()),
                    c.reason,
                    match &next.applied {
                        Some(a) => format!(
                            "; rolled back to {}",
                            described(a.version.as_deref(), Some(&a.sha256))
                        ),
                        None => "; no applied config to roll back to".into(),
                    }
                ),
            }
        } else if c.verdict == Verdict::Missing {
            Note {
                warning: true,
                reason: "Missing",
                action: "Hold",
                note: format!("{}{holding}", c.reason),
            }
        } else {
            Note {
                warning: true,
                reason: "Rejected",
                action: "Hold",
                note: format!(
                    "{} is {}: {}{holding}",
                    described(c.version.as_deref(), c.sha256.as_deref()),
                    c.verdict,
                    c.reason
                ),
            }
        });
    }
    if next.reload.last_result == ReloadResult::Failure
        && prev.reload.last_result != ReloadResult::Failure
    {
        out.push(Note {
            warning: true,
            reason: "ReloadFailed",
            action: "Reload",
            note: format!(
                "reload via {} failed: {}",
                next.reload.target,
                next.reload.last_error.as_deref().unwrap_or("unknown error")
            ),
        });
    }
    for n in &mut out {
        n.note = truncate(std::mem::take(&mut n.note), NOTE_MAX);
    }
    out
}

/// The conditions for a status, none before anything was read: `confgate.io/config-compatible`
/// first, then `confgate.io/config-current`.
///
/// `config-compatible` is what `readinessGates` reads, so its status is exactly `/readyz`'s (a replica
/// holding an older config under `hold`, or observing under `--mode observe`, stays ready).
/// `config-current` is True when the newest config is the one in force and accepted; its reason is
/// the newest config's verdict (`TooNew` while one is held). Both carry the same message: the active
/// config (`version X sha256:...`, or `no accepted config`), which `confgate status` reads back, and a
/// newest config that is not active after `; newest`.
pub fn conditions(s: &Status) -> Vec<Condition> {
    let newest = match (&s.candidate, &s.active) {
        (Some(c), _) => c.verdict,
        (None, Some(a)) => a.verdict,
        (None, None) => return Vec::new(),
    };
    let current = s.candidate.is_none() && newest == Verdict::Accepted;
    let current_reason = match &s.candidate {
        // Accepted but not in place: the promotion failed.
        Some(c) if c.verdict == Verdict::Accepted => Reason::NotPromoted,
        _ => Reason::Verdict(newest),
    };
    let active_accepted = s
        .active
        .as_ref()
        .is_some_and(|a| a.verdict == Verdict::Accepted);
    let compatible_reason = match (s.ready, active_accepted) {
        (true, true) => Reason::Verdict(Verdict::Accepted),
        // Ready only because observe mode does not enforce.
        (true, false) => Reason::Observed,
        (false, _) if current_reason != Reason::Verdict(Verdict::Accepted) => current_reason,
        (false, _) => Reason::NotReady,
    };
    let message = ConditionMessage {
        active: s.active.as_ref().map(|a| {
            described(a.version.as_deref(), Some(&a.sha256)).from_variant(a.variant.as_deref())
        }),
        applied: s
            .applied
            .as_ref()
            .map(|a| described(a.version.as_deref(), Some(&a.sha256))),
        rollout: s.rollout.as_ref().map(|r| RolloutPart {
            percent: r.percent.clone(),
            assigned: r.assigned,
            held: r.held.as_ref().map(|h| {
                (
                    described(h.version.as_deref(), h.sha256.as_deref()),
                    h.verdict,
                )
            }),
        }),
        newest: s.candidate.as_ref().map(|c| Newest {
            config: described(c.version.as_deref(), c.sha256.as_deref())
                .from_variant(c.variant.as_deref()),
            verdict: c.verdict,
            reason: c.reason.clone(),
        }),
    };
    let message = truncate(message.to_string(), NOTE_MAX);
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

/// The strategic merge patch for the conditions, each with its last transition time; `conditions`
/// merges on `type`, so other conditions stay.
pub fn condition_patch(cs: &[(Condition, jiff::Timestamp)]) -> serde_json::Value {
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
    serde_json::json!({ "status": { "conditions": conditions } })
}

/// Publishes Events and patches the condition on `pod`; state kept between changes.
pub struct PodReporter {
    pods: Api<PodView>,
    pod: PodRef,
    events: EventSink,
    sent: Vec<Condition>,
    /// Per condition type, its status and when it last changed.
    transition: Vec<(&'static str, bool, jiff::Timestamp)>,
    last_error: Option<String>,
}

/// The reporter for `pod`: reads the pod's UID (best effort) so Events point at this incarnation.
pub async fn reporter(client: Client, pod: PodRef) -> PodReporter {
    let pods: Api<PodView> = Api::namespaced(client.clone(), &pod.namespace);
    let uid = match pods.get_metadata(&pod.name).await {
        Ok(p) => p.metadata.uid,
        Err(e) => {
            warn!(pod = %pod.name, error = %explain(&e, "get on pods"), "cannot read the pod; Events will not carry its UID");
            None
        }
    };
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid,
        ..ObjectReference::default()
    };
    let events = EventSink::new(client, reference, "confgate", pod.name.clone());
    PodReporter {
        pods,
        pod,
        events,
        sent: Vec::new(),
        transition: Vec::new(),
        last_error: None,
    }
}

impl PodReporter {
    /// Reports the change from `prev` to `next`. Returns false when the condition could not be patched.
    pub async fn report(&mut self, prev: &Status, next: &Status) -> bool {
        for n in notes(prev, next) {
            if let Err(e) = self.events.publish(&n).await {
                self.failed(explain(
                    &e,
                    "create and patch on events (apiGroups [\"events.k8s.io\"])",
                ));
            }
        }
        self.patch(next).await
    }

    async fn patch(&mut self, s: &Status) -> bool {
        let cs = conditions(s);
        if cs.is_empty() || self.sent == cs {
            return true;
        }
        let now = jiff::Timestamp::now();
        let timed: Vec<(Condition, jiff::Timestamp)> = cs
            .iter()
            .map(|c| {
                let since = self
                    .transition
                    .iter()
                    .find(|(t, status, _)| *t == c.type_ && *status == c.status)
                    .map_or(now, |(_, _, since)| *since);
                (c.clone(), since)
            })
            .collect();
        let body = condition_patch(&timed);
        match self
            .pods
            .patch_status(
                &self.pod.name,
                &PatchParams::default(),
                &Patch::Strategic(body),
            )
            .await
        {
            Ok(_) => {
                debug!(
                    ready = cs[0].status,
                    compatible = %cs[0].reason,
                    current = %cs[1].reason,
                    "pod conditions updated"
                );
                self.transition = timed
                    .iter()
                    .map(|(c, since)| (c.type_, c.status, *since))
                    .collect();
                self.sent = cs;
                true
            }
            Err(e) => {
                self.failed(explain(&e, "patch on pods/status"));
                false
            }
        }
    }

    fn failed(&mut self, why: String) {
        // The same failure every time would flood the log; say it once until it changes.
        if self.last_error.as_ref() != Some(&why) {
            warn!(pod = %self.pod.name, error = %why, "reporting to the pod failed");
            self.last_error = Some(why);
        }
    }
}

/// Reports every published status change on `pod` until `shutdown`.
pub async fn run(
    client: Client,
    pod: PodRef,
    mut rx: watch::Receiver<Status>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut r = tokio::select! {
        r = reporter(client, pod) => r,
        () = &mut shutdown => return,
    };
    let mut prev = Status::default();
    loop {
        let next = rx.borrow_and_update().clone();
        // With `prev == next` (a retry) no Event repeats; only the condition patch is tried again.
        let patched = r.report(&prev, &next).await;
        prev = next;
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(PATCH_RETRY), if !patched => {}
            () = &mut shutdown => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ActiveView, CandidateView};

    /// `confgate.io/config-current`.
    fn condition(s: &Status) -> Option<Condition> {
        conditions(s).get(1).cloned()
    }

    fn compatible(s: &Status) -> (bool, String) {
        let c = conditions(s).swap_remove(0);
        assert_eq!(c.type_, CONDITION_TYPE);
        (c.status, c.reason)
    }

    #[test]
    fn the_readiness_condition_is_readyz_and_the_held_config_shows_in_the_other() {
        let held = Status {
            ready: true,
            active: Some(ActiveView {
                version: Some("2.5.0".into()),
                sha256: "sha256:ab".into(),
                since: String::new(),
                verdict: Verdict::Accepted,
                variant: None,
            }),
            candidate: Some(CandidateView {
                version: Some("3.0.0".into()),
                sha256: Some("sha256:cd".into()),
                verdict: Verdict::TooNew,
                reason: "too new".into(),
                variant: None,
            }),
            ..Status::default()
        };
        // `hold`: ready, compatible; not current.
        assert_eq!(compatible(&held), (true, "Accepted".into()));
        let c = condition(&held).unwrap();
        assert_eq!(
            (c.type_, c.status, c.reason.as_str()),
            (CURRENT_TYPE, false, "TooNew")
        );
        // `unready`: the same facts, not ready.
        let unready = Status {
            ready: false,
            ..held.clone()
        };
        assert_eq!(compatible(&unready), (false, "TooNew".into()));
        // Observe mode running a too-new config: ready, so compatible; not current.
        let mut observe = held.clone();
        observe.candidate = None;
        observe.active.as_mut().unwrap().verdict = Verdict::TooNew;
        assert_eq!(compatible(&observe), (true, "Observed".into()));
        assert_eq!(condition(&observe).unwrap().reason, "TooNew");
        // Not ready for another reason (its settings), with the newest config accepted.
        let mut settings = held;
        settings.candidate = None;
        settings.ready = false;
        assert_eq!(compatible(&settings), (false, "NotReady".into()));
        assert!(condition(&settings).unwrap().status);
    }

    #[test]
    fn no_condition_before_anything_was_read_and_observe_mode_is_false() {
        assert_eq!(condition(&Status::default()), None);
        let observed = Status {
            active: Some(ActiveView {
                version: Some("3.0.0".into()),
                sha256: "sha256:ab".into(),
                since: String::new(),
                verdict: Verdict::TooNew,
                variant: None,
            }),
            ..Status::default()
        };
        let c = condition(&observed).unwrap();
        assert_eq!((c.status, c.reason.as_str()), (false, "TooNew"));
        assert_eq!(c.message, "version 3.0.0 sha256:ab");
        let first_missing = Status {
            candidate: Some(CandidateView {
                version: None,
                sha256: None,
                verdict: Verdict::Missing,
                reason: "ConfigMap ns/cm does not exist".into(),
                variant: None,
            }),
            ..Status::default()
        };
        let c = condition(&first_missing).unwrap();
        assert_eq!((c.status, c.reason.as_str()), (false, "Missing"));
        assert_eq!(
            c.message,
            "no accepted config; newest config is missing: ConfigMap ns/cm does not exist"
        );
    }

    #[test]
    fn the_condition_names_the_variant_in_use() {
        let s = Status {
            active: Some(ActiveView {
                version: Some("2.5.0".into()),
                sha256: "sha256:ab".into(),
                since: String::new(),
                verdict: Verdict::Accepted,
                variant: Some("config.v2.yaml".into()),
            }),
            ..Status::default()
        };
        let c = condition(&s).unwrap();
        assert_eq!(
            (c.status, c.message.as_str()),
            (true, "version 2.5.0 sha256:ab from config.v2.yaml")
        );
        let m: ConditionMessage = c.message.parse().unwrap();
        assert_eq!(m.active.unwrap().variant.as_deref(), Some("config.v2.yaml"));
    }

    #[test]
    fn rejection_by_the_component_is_an_event_and_the_condition_says_what_runs() {
        let running = ActiveView {
            version: Some("2.0.0".into()),
            sha256: "sha256:aa".into(),
            since: String::new(),
            verdict: Verdict::Accepted,
            variant: None,
        };
        let prev = Status {
            active: Some(running.clone()),
            applied: Some(crate::state::AppliedView {
                version: Some("2.0.0".into()),
                sha256: "sha256:aa".into(),
                since: String::new(),
            }),
            ..Status::default()
        };
        let next = Status {
            candidate: Some(CandidateView {
                version: Some("2.1.0".into()),
                sha256: Some("sha256:bb".into()),
                verdict: Verdict::RejectedByComponent,
                reason: "the component rejected it: POST u answered 500: bad rule".into(),
                variant: None,
            }),
            ..prev.clone()
        };
        let n = notes(&prev, &next);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(
            (n[0].reason, n[0].action, n[0].warning),
            ("RejectedByComponent", "Rollback", true)
        );
        assert!(
            n[0].note.contains("version 2.1.0 sha256:bb")
                && n[0].note.contains("500: bad rule")
                && n[0]
                    .note
                    .ends_with("rolled back to version 2.0.0 sha256:aa"),
            "{}",
            n[0].note
        );
        let c = condition(&next).unwrap();
        assert_eq!(
            (c.status, c.reason.as_str()),
            (false, "RejectedByComponent")
        );
        let m: ConditionMessage = c.message.parse().unwrap();
        assert_eq!(m.applied.unwrap().version.as_deref(), Some("2.0.0"));
        assert_eq!(m.newest.unwrap().verdict, Verdict::RejectedByComponent);
    }
}
