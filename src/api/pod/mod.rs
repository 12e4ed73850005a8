//! What confgate reports on its own pod: Events (a config held, missing or refused, a reload failed,
//! the end of a hold; never a routine promotion) through `EventSink` (events.k8s.io/v1, only identical repeats folded into a series), and the conditions
//! `confgate.io/config-compatible` and `confgate.io/config-current` on pods/status by strategic
//! merge patch. A routine patch (only the facts move) waits for the pod's offset into
//! [`REPORT_SPREAD`], so a fleet's patches for one change are spread, not sent at once.
//!
//! The Events are the decision loop's notices ([`Notice`], each sent at the event it happened at,
//! so none is lost between two published statuses); the conditions follow the published
//! [`Status`]. The loop knows nothing of the API. An API failure is logged and never stops the gate.
//!
//! This file is the reporter (the API calls and their retries); `derive/` is what it reports,
//! worded without I/O.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::{broadcast, watch};
use tracing::{debug, warn};

use super::events::EventSink;
use super::explain::explain;
use super::pod_view::PodView;
use crate::backoff::Doubling;
use crate::state::{Notice, Status};

pub(crate) mod derive;

pub use super::note::Note;
pub use derive::{
    Condition, RELOAD_FAILING_AFTER, condition_patch, conditions, facts, may_wait, note,
};

/// After a failed condition patch, when to try again; doubled after each failure up to
/// [`PATCH_RETRY_MAX`], so a Role that lacks the rule costs the API server a request every few
/// minutes, not every 30 s.
const PATCH_RETRY: Duration = Duration::from_secs(30);
const PATCH_RETRY_MAX: Duration = Duration::from_secs(300);

/// The longest a patch waits for the reload of a promoted config ([`may_wait`]): the facts then say
/// what was promoted even if the component never answers.
pub const SETTLE_MAX: Duration = Duration::from_secs(10);

/// The window over which a fleet's routine patches are spread: each pod makes a patch that changes
/// no condition's status or reason (a healthy change: only the facts move) at its own offset into
/// it, [`report_offset`], so a thousand pods promoting one change within half a second do not send
/// their thousand patches in that half second, which the API server's priority and fairness turns
/// away in part (429). A patch that flips a condition's status or reason (readiness gates read it)
/// is never held back by it; the promotion itself never waits for any patch.
pub const REPORT_SPREAD: Duration = Duration::from_secs(4);

/// This pod's offset into [`REPORT_SPREAD`]: its rollout bucket (from its UID, else its name, as
/// the reload spread takes it), so the fleet's routine writes are spread evenly and each pod's
/// always comes at the same point of the window.
pub fn report_offset(pod: &PodRef) -> Duration {
    let id = pod.uid.as_deref().unwrap_or(&pod.name);
    REPORT_SPREAD.mul_f64(crate::rollout::Bucket::of(id.trim()).fraction())
}

/// What a report did with the pod's conditions and facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patched {
    /// Written, or nothing to write.
    Done,
    /// The patch failed; retried with backoff.
    Failed,
    /// Nothing written yet: the reload in flight changes the facts again soon ([`may_wait`]).
    Waiting,
    /// Nothing written yet: a routine patch waits for this pod's offset into [`REPORT_SPREAD`].
    Spreading,
}

/// Which patches a report may put off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Defer {
    /// One that [`may_wait`] for the reload in flight.
    pub reload: bool,
    /// A routine one (no condition's status or reason changes), for the pod's share of
    /// [`REPORT_SPREAD`].
    pub routine: bool,
}

/// Whether `next` changes no condition's type, status or reason from what was `sent`: a routine
/// patch (only the message and the facts move). The first patch never is.
fn routine(sent: &[Condition], next: &[Condition]) -> bool {
    !sent.is_empty()
        && sent.len() == next.len()
        && sent
            .iter()
            .zip(next)
            .all(|(a, b)| (a.type_, a.status, &a.reason) == (b.type_, b.status, &b.reason))
}

/// The sidecar's pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    /// From the downward API (`POD_UID`); without it the reporter reads it once (`get` on pods).
    pub uid: Option<String>,
}

/// Publishes Events and patches the condition on `pod`; state kept between changes.
pub struct PodReporter {
    pods: Api<PodView>,
    pod: PodRef,
    events: EventSink,
    sent: Vec<Condition>,
    /// The facts annotation last written.
    sent_facts: String,
    /// Per condition type, its status and when it last changed.
    transition: Vec<(&'static str, bool, jiff::Timestamp)>,
    last_error: Option<String>,
}

/// The reporter for `pod`: Events point at this incarnation of it through its UID, given or read
/// once (best effort).
pub async fn reporter(client: Client, pod: PodRef) -> PodReporter {
    let pods: Api<PodView> = Api::namespaced(client.clone(), &pod.namespace);
    let uid = match &pod.uid {
        Some(uid) => Some(uid.clone()),
        None => match pods.get_metadata(&pod.name).await {
            Ok(p) => p.metadata.uid,
            Err(e) => {
                warn!(pod = %pod.name, error = %explain(&e, "get on pods"), "cannot read the pod; Events will not carry its UID (set POD_UID from the downward API)");
                None
            }
        },
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
        sent_facts: String::new(),
        transition: Vec::new(),
        last_error: None,
    }
}

impl PodReporter {
    /// Publishes the Event of each of `notices`, then patches the conditions for `next`. Returns
    /// false when the condition could not be patched.
    pub async fn report(&mut self, notices: &[Notice], next: &Status) -> bool {
        self.report_or_wait(notices, next, Defer::default()).await != Patched::Failed
    }

    /// As [`PodReporter::report`]; a patch that [`may_wait`] for the reload in flight
    /// (`defer.reload`: `Waiting`), or a routine one (`defer.routine`: `Spreading`), is not made yet,
    /// while the Events are published at once.
    pub async fn report_or_wait(
        &mut self,
        notices: &[Notice],
        next: &Status,
        defer: Defer,
    ) -> Patched {
        self.publish(notices).await;
        self.patch(next, defer).await
    }

    /// Publishes the Event of each of `notices`, in order.
    pub async fn publish(&mut self, notices: &[Notice]) {
        for n in notices {
            if let Err(e) = self.events.publish(&note(n)).await {
                self.failed(explain(
                    &e,
                    "create and patch on events (apiGroups [\"events.k8s.io\"])",
                ));
            }
        }
    }

    async fn patch(&mut self, s: &Status, defer: Defer) -> Patched {
        let cs = conditions(s);
        let facts = facts(s).map(|f| f.to_json()).unwrap_or_default();
        if cs.is_empty() || (&self.sent, &self.sent_facts) == (&cs, &facts) {
            return Patched::Done;
        }
        if defer.reload && may_wait(&self.sent, &cs, s) {
            debug!(
                current = %cs[1].reason,
                "pod conditions wait for the reload of the promoted config"
            );
            return Patched::Waiting;
        }
        if defer.routine && routine(&self.sent, &cs) {
            debug!(
                current = %cs[1].reason,
                "pod conditions wait for this pod's share of the report spread"
            );
            return Patched::Spreading;
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
        let body = condition_patch(&timed, &facts);
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
                self.sent_facts = facts;
                Patched::Done
            }
            Err(e) => {
                self.failed(explain(&e, "patch on pods/status"));
                Patched::Failed
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

/// Reports every notice (as an Event) and every published status change (as the conditions) on
/// `pod` until `shutdown`.
pub async fn run(
    client: Client,
    pod: PodRef,
    mut rx: watch::Receiver<Status>,
    mut notices: broadcast::Receiver<Notice>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut r = tokio::select! {
        r = reporter(client, pod) => r,
        () = &mut shutdown => return,
    };
    let offset = report_offset(&r.pod);
    let mut open = true;
    let mut retry = Doubling::new(PATCH_RETRY, PATCH_RETRY_MAX);
    // While a patch waits for a reload: until when it may (fixed when the wait began, so a stream
    // of statuses cannot put the patch off for longer).
    let mut settle_by: Option<tokio::time::Instant> = None;
    // While a routine patch waits for this pod's offset: until when (fixed at the first status it
    // waits with, so the statuses that come meanwhile are coalesced into one patch, not put off).
    let mut spread_by: Option<tokio::time::Instant> = None;
    loop {
        let next = rx.borrow_and_update().clone();
        let now = tokio::time::Instant::now();
        let defer = Defer {
            reload: settle_by.is_none_or(|t| now < t),
            routine: spread_by.is_none_or(|t| now < t),
        };
        // The notices sent before this status come first; a retry, or the wait over, repeats no
        // Event: only the condition patch is tried again.
        let pending = waiting(&mut notices, &mut open);
        let done = r.report_or_wait(&pending, &next, defer).await;
        let wake = match done {
            Patched::Waiting => Some(*settle_by.get_or_insert(now + SETTLE_MAX)),
            Patched::Spreading => Some(*spread_by.get_or_insert(now + offset)),
            Patched::Done => {
                retry.succeeded();
                (settle_by, spread_by) = (None, None);
                None
            }
            Patched::Failed => {
                (settle_by, spread_by) = (None, None);
                None
            }
        };
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            n = notices.recv(), if open => match n {
                Ok(n) => {
                    let mut all = vec![n];
                    all.extend(waiting(&mut notices, &mut open));
                    r.publish(&all).await;
                }
                Err(e) => said_lost(&e, &mut open),
            },
            () = tokio::time::sleep(retry.next()), if done == Patched::Failed => {
                retry.failed();
            }
            () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
            () = &mut shutdown => return,
        }
    }
}

/// The notices already sent and not yet read.
fn waiting(notices: &mut broadcast::Receiver<Notice>, open: &mut bool) -> Vec<Notice> {
    let mut out = Vec::new();
    while *open {
        match notices.try_recv() {
            Ok(n) => out.push(n),
            Err(broadcast::error::TryRecvError::Empty) => break,
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                said_lost(&broadcast::error::RecvError::Lagged(n), open)
            }
            Err(broadcast::error::TryRecvError::Closed) => *open = false,
        }
    }
    out
}

/// Says that notices were dropped before they were read (the API server was slower than the loop
/// for [`crate::state::NOTICES_KEPT`] of them), or that no more will come.
fn said_lost(e: &broadcast::error::RecvError, open: &mut bool) {
    match e {
        broadcast::error::RecvError::Lagged(n) => {
            warn!(
                dropped = n,
                "pod Events fell behind the decision loop; the oldest were not published"
            )
        }
        broadcast::error::RecvError::Closed => *open = false,
    }
}
