//! The one published status: what the server, probes, `wait`, metrics and the pod reporter read.
//! Written by the decision loop only, through the one [`Publisher`] a [`Shared`] hands out; the reload
//! worker and the API source report to the loop as messages instead.
//!
//! Verdicts, mode, policy, reload result and check kinds are enums serialised kebab-case; hashes
//! are `snapshot::PrintedHash`, times `jiff::Timestamp`; the setting and verdict values come from
//! `values`. `Status` derives `Deserialize` so `probe` and the tests read `/status` back typed.
//! `Holding` is the one wording of a newer config held back (`holding 2.4.1; 3.0.0 is too-new[:
//! REASON]`) for `/readyz`, the probe, the pod's Events and `confgate status`; `Rollout` is a
//! rollout as a pod sees it, typed, whose `view` is the one place its `RolloutView` and words are
//! made. `metrics` does not import this module: the status becomes a `metrics::View` here.
//!
//! `CheckKind::gates_readiness` says which checks take readiness: a bad annotation and a failing
//! reload are reported (`[!]` in `/readyz?verbose` and on the probe's line) without gating, since
//! neither changes what the component runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast, watch};
use tokio::time::Instant;

use crate::listing;
use crate::metrics::{self, Metrics};
use crate::snapshot::{ContentHash, PrintedHash};
use crate::values::{Bucket, Mode, NEXT_SUFFIX, OnIncompatible, Percent, ROLLOUT_KEY, Verdict};

/// The config the component runs (or, in gate-only mode, would run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// RFC 3339 in `/status`.
    pub since: jiff::Timestamp,
    pub verdict: Verdict,
    /// The variant key promoted (with the variants setting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// The config the component confirmed it runs: its last reload of it succeeded (HTTP 2xx, or its
/// metrics said so), or it started on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// When it was first confirmed (RFC 3339 in `/status`).
    pub since: jiff::Timestamp,
}

/// The newest snapshot seen (the desired config), whatever its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredView {
    pub version: Option<String>,
    pub sha256: Option<PrintedHash>,
    pub verdict: Verdict,
}

/// The newest snapshot, when it is not the active one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateView {
    pub version: Option<String>,
    pub sha256: Option<PrintedHash>,
    pub verdict: Verdict,
    pub reason: String,
    /// The variant key it would promote (with the variants setting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// Which config of a rollout a pod runs: the stable keys, or the candidate's (`K.next` under `K`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Track {
    Stable,
    Candidate,
}

impl Track {
    pub fn as_str(self) -> &'static str {
        match self {
            Track::Stable => "stable",
            Track::Candidate => "candidate",
        }
    }
}

impl std::fmt::Display for Track {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rollout as this pod sees it: the ConfigMap holds `.next` keys or `confgate.rollout`. Built
/// from a [`Rollout`] ([`Rollout::view`]), the one place its words are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutView {
    /// The percentage of pods on the candidate (`25%`); `None` when `confgate.rollout` is absent.
    pub percent: Option<Percent>,
    /// This pod's bucket (`12.34%`): on the candidate when below the percentage. `None` without a
    /// pod identity.
    pub bucket: Option<Bucket>,
    /// The track the bucket gives this pod.
    pub assigned: Track,
    /// The track of what this pod promotes: stable when the candidate is held on it.
    pub track: Track,
    /// The keys the candidate changes, listed (bounded).
    pub keys: String,
    /// The candidate held on this pod (outside its range, invalid, or refused by the component).
    pub held: Option<RolloutHeld>,
    /// The assignment in words.
    pub reason: String,
}

/// A candidate held back on a pod assigned to it, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutHeld {
    pub version: Option<String>,
    pub sha256: Option<String>,
    pub verdict: Verdict,
    pub reason: String,
}

/// A rollout as this pod sees it, typed: what `rollout::choose` found and the gate keeps; the
/// status shows it as a [`RolloutView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    /// The percentage in `confgate.rollout`; `None` when that key is absent.
    pub percent: Option<Percent>,
    /// This pod's bucket; `None` without a pod identity.
    pub bucket: Option<Bucket>,
    /// The track the bucket gives this pod.
    pub assigned: Track,
    /// The names the candidate gives new content (`K` for each `K.next`), in key order.
    pub keys: Vec<String>,
    /// The candidate, held on this pod although its bucket assigns it.
    pub held: Option<HeldCandidate>,
    /// On the candidate's track: the hash of the candidate's own keys (each `K.next`, named `K`),
    /// which a refusal of the candidate is remembered by, whatever stable keys change around it.
    pub candidate_own: Option<ContentHash>,
}

/// A rollout's candidate held on a pod its bucket assigns to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCandidate {
    pub version: Option<String>,
    /// The candidate set's hash.
    pub hash: Option<ContentHash>,
    pub verdict: Verdict,
    /// Why, in words: its judgement's reason, or what the component said when it refused it.
    pub reason: String,
}

impl Rollout {
    /// The track of what this pod promotes: stable when the candidate is held on it.
    pub fn track(&self) -> Track {
        match self.held {
            Some(_) => Track::Stable,
            None => self.assigned,
        }
    }

    /// The candidate's own keys' hash while this pod promotes the candidate.
    pub fn promoting_candidate(&self) -> Option<ContentHash> {
        self.candidate_own
            .filter(|_| self.track() == Track::Candidate)
    }

    /// The assignment in words.
    fn reason(&self) -> String {
        let (key, suffix) = (ROLLOUT_KEY, NEXT_SUFFIX);
        match (self.percent, self.bucket, &self.held) {
            (Some(p), Some(b), Some(h)) => format!(
                "bucket {b} is below {p}, but the candidate{} is {}: held, on stable",
                h.version
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                h.verdict
            ),
            _ if self.keys.is_empty() => format!("no {suffix} key: every pod on stable"),
            (None, _, _) => format!("no {key} key: every pod on stable"),
            (Some(_), None, _) => "no pod identity (POD_UID or POD_NAME): on stable".to_owned(),
            (Some(p), Some(b), None) if b.on_candidate(p) => {
                format!("bucket {b} is below {p}: on the candidate")
            }
            (Some(p), Some(b), None) => format!("bucket {b} is not below {p}: on stable"),
        }
    }

    /// The rollout as `/status` shows it.
    pub fn view(&self) -> RolloutView {
        RolloutView {
            percent: self.percent,
            bucket: self.bucket,
            assigned: self.assigned,
            track: self.track(),
            keys: listing::listed(&self.keys, None, |out, k| out.push_str(&listing::name(k))),
            held: self.held.as_ref().map(|h| RolloutHeld {
                version: h.version.clone(),
                sha256: h.hash.map(|h| h.to_string()),
                verdict: h.verdict,
                reason: h.reason.clone(),
            }),
            reason: self.reason(),
        }
    }
}

/// A candidate the component's checker is running on (`validate`), not promoted before it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckingView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// The checker's file name.
    pub checker: String,
    /// When the check began (RFC 3339 in `/status`).
    pub since: jiff::Timestamp,
}

/// A change this pod has seen and promotes later, after its share of the reload spread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadView {
    /// When it is promoted (RFC 3339 in `/status`).
    pub due_at: jiff::Timestamp,
    /// This pod's share of the spread: how long after the change was seen.
    pub delay_ms: u64,
    /// The reload spread in force.
    pub period_ms: u64,
}

/// The known-good config a pod runs because its source holds nothing it accepts: which one, and what
/// is wrong with the source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownGoodView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// The record it came from.
    pub record: String,
    /// The source's newest config's verdict (`too-new`, `missing`, ...), which made it used.
    pub because: Verdict,
    /// Why, as the verdict's reason says it.
    pub reason: String,
}

/// The last outcome of reload signalling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReloadResult {
    /// No reload attempted yet.
    #[default]
    None,
    /// An attempt is in flight, or a start-up check waits for the component to be there
    /// (`last_error` says what it waits for).
    Pending,
    Success,
    /// The reload did not reach the component (connection error, timeout, no handler, a redirect);
    /// retried.
    Failure,
    /// The component refused the content (`last_error` holds its reason); rolled back, not retried.
    Rejected,
    /// No process to signal: none runs, or each one started after the promotion and read it itself
    /// (or, at a start-up check, the component's metrics say it loaded the config since the promotion).
    NothingToReload,
}

/// The outcome of reload signalling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadView {
    pub target: String,
    pub last_result: ReloadResult,
    pub last_error: Option<String>,
    /// Content hash the last successful reload announced.
    pub last_success_sha256: Option<PrintedHash>,
    /// Reloads (and start-up checks) requested so far (coalesced requests count each).
    pub requested: u64,
    /// Whether the last finished reload was applied (false: rejected, or not reached); kept while the
    /// next one is in flight.
    pub last_reload_successful: Option<bool>,
    /// Attempts in a row that did not reach the component (`failure`), whatever content they carried;
    /// back to 0 when one reaches it (applied, refused, or nothing to reload).
    pub consecutive_failures: u32,
}

impl Default for ReloadView {
    fn default() -> Self {
        ReloadView {
            target: "none".into(),
            last_result: ReloadResult::None,
            last_error: None,
            last_success_sha256: None,
            requested: 0,
            last_reload_successful: None,
            consecutive_failures: 0,
        }
    }
}

/// Which readiness check, as `/readyz?verbose` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// The `confgate.io/` annotations.
    Settings,
    /// An accepted config is in place.
    Config,
    /// The newest snapshot is the one in force.
    Newest,
    /// The last promotion succeeded.
    Promote,
    /// The reload of the promoted config reaches the component (failing: it has not taken it).
    Reload,
    /// A candidate under the component's checker: in progress, never a failure.
    Validate,
}

impl CheckKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::Settings => "settings",
            CheckKind::Config => "config",
            CheckKind::Newest => "newest",
            CheckKind::Promote => "promote",
            CheckKind::Reload => "reload",
            CheckKind::Validate => "validate",
        }
    }

    /// Whether a failure of this check takes readiness. A bad annotation keeps the value in force
    /// before it, and a failing reload leaves the component on the config it had: neither changes
    /// the config the component runs, so both are reported (`[!]` in `/readyz?verbose`, the probe's
    /// line, the condition's message) without dropping a replica whose config in force is good.
    pub fn gates_readiness(self) -> bool {
        match self {
            CheckKind::Settings | CheckKind::Reload | CheckKind::Validate => false,
            CheckKind::Config | CheckKind::Newest | CheckKind::Promote => true,
        }
    }
}

impl std::fmt::Display for CheckKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One readiness check, as `/readyz?verbose` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: CheckKind,
    pub ok: bool,
    pub message: String,
}

/// Everything confgate reports. Never holds config content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub ready: bool,
    pub reason: String,
    pub accepts: Option<String>,
    pub stale: bool,
    /// The newest snapshot seen.
    pub desired: Option<DesiredView>,
    /// The config in the promoted dir (gate-only: the one in force).
    pub active: Option<ActiveView>,
    /// The config the component confirmed it runs.
    pub applied: Option<AppliedView>,
    pub candidate: Option<CandidateView>,
    pub reload: ReloadView,
    pub mode: Mode,
    pub on_incompatible: OnIncompatible,
    /// The start-up latch: a first accepted config has been in place.
    pub started: bool,
    pub checks: Vec<Check>,
    /// Why the config dir is not being watched (confgate then polls every second), if it is not.
    pub watch_error: Option<String>,
    /// The rollout in the newest config, as this pod sees it (none without rollout keys).
    pub rollout: Option<RolloutView>,
    /// A change waiting for this pod's share of the reload spread (none while nothing waits).
    #[serde(default)]
    pub spread: Option<SpreadView>,
    /// A check by the component's checker under way (none while none runs).
    #[serde(default)]
    pub checking: Option<CheckingView>,
    /// The known-good config in force while the source holds nothing accepted (none otherwise).
    #[serde(default)]
    pub known_good: Option<KnownGoodView>,
    /// The API source's view in API mode; `/status` renders it as `source` ([`SourceView::rendered`]),
    /// since its health depends on the time it is read at.
    #[serde(skip)]
    pub source: Option<SourceView>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            ready: false,
            reason: "starting".into(),
            accepts: None,
            stale: false,
            desired: None,
            active: None,
            applied: None,
            candidate: None,
            reload: ReloadView::default(),
            mode: Mode::Enforce,
            on_incompatible: OnIncompatible::Hold,
            started: false,
            checks: Vec::new(),
            watch_error: None,
            rollout: None,
            spread: None,
            checking: None,
            known_good: None,
            source: None,
        }
    }
}

impl Status {
    /// Whether the `settings` check fails (a bad or unknown annotation).
    pub(crate) fn settings_problem(&self) -> bool {
        self.failing(CheckKind::Settings).is_some()
    }

    /// The failing check of that kind, if it fails.
    pub(crate) fn failing(&self, kind: CheckKind) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == kind && !c.ok)
    }

    /// The failing checks that do not take readiness (a settings problem, a failing reload), as
    /// `NAME: MESSAGE`, for the probe's line of a ready replica.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.ok && !c.name.gates_readiness())
            .map(|c| format!("{}: {}", c.name, c.message))
            .collect()
    }

    /// The `/livez` reason when the API source's watch is stuck.
    pub(crate) fn source_stuck(&self) -> Option<String> {
        self.source.as_ref().and_then(SourceView::stuck)
    }
}

/// A newer config held back while an older one stays in force: `holding 2.4.1; 3.0.0 is too-new`,
/// then `: REASON` when the reason is known. The one wording of that fact, for `/readyz` and
/// `/status`, the probe's line, the pod's Events and `confgate status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The config in force as the reader names it (a version, or a version and hash); `None`: it
    /// has no version.
    pub held: Option<String>,
    /// The newest config, named the same way; `None`: it has none (missing, unreadable).
    pub newest: Option<String>,
    pub verdict: Verdict,
    pub reason: Option<String>,
    /// The newest config is the one in place (the component refused it and no config it applied
    /// is kept to roll back to): nothing is held in its place.
    pub in_place: bool,
}

impl Holding {
    /// What `status` holds back, when the active config is not the newest; `None` otherwise (an
    /// observe-mode replica running a config it does not accept holds nothing back).
    pub fn of(status: &Status) -> Option<Holding> {
        let (active, newest) = (status.active.as_ref()?, status.candidate.as_ref()?);
        status.stale.then(|| Holding {
            held: active.version.clone(),
            newest: newest.version.clone(),
            verdict: newest.verdict,
            reason: None,
            in_place: newest.sha256.as_ref() == Some(&active.sha256),
        })
    }

    /// The same, with the newest config's reason after it.
    pub(crate) fn because(self, reason: impl Into<String>) -> Holding {
        Holding {
            reason: Some(reason.into()),
            ..self
        }
    }
}

impl std::fmt::Display for Holding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.in_place {
            write!(
                f,
                "no config the component applied to roll back to; {} stays in place and is {}",
                self.newest.as_deref().unwrap_or("the newest config"),
                self.verdict
            )?;
        } else {
            write!(
                f,
                "holding {}; {} is {}",
                self.held.as_deref().unwrap_or("the previous config"),
                self.newest.as_deref().unwrap_or("the newest config"),
                self.verdict
            )?;
        }
        match &self.reason {
            Some(r) => write!(f, ": {r}"),
            None => Ok(()),
        }
    }
}

impl<'a> From<&'a Status> for metrics::View<'a> {
    fn from(s: &'a Status) -> Self {
        metrics::View {
            ready: s.ready,
            stale: s.stale,
            started: s.started,
            settings_problem: s.settings_problem(),
            active: s
                .active
                .as_ref()
                .map(|a| (a.version.as_deref().unwrap_or(""), &a.sha256)),
            applied: s
                .applied
                .as_ref()
                .map(|a| (a.version.as_deref().unwrap_or(""), &a.sha256)),
            last_reload_successful: s.reload.last_reload_successful,
            variant: s.active.as_ref().and_then(|a| a.variant.as_deref()),
            rollout: s.rollout.as_ref().map(|r| (r.track.as_str(), r.percent)),
            known_good: s.known_good.is_some(),
        }
    }
}

/// The API source's view of the object it watches (API mode only). Never holds content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceView {
    /// `configmap` or `secret`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// The object was deleted and created again (a new UID) since confgate first saw it.
    pub recreated: bool,
    pub previous_uid: Option<String>,
    /// The watch runs from a list made since the last error: only then is what it shows current.
    pub watching: bool,
    pub last_error: Option<String>,
    /// First error of the current run of failures, with its wall-clock time.
    pub failing_since: Option<(Instant, jiff::Timestamp)>,
    pub last_error_at: Option<Instant>,
    /// How long failures may go on before `/livez` reports the watch as stuck; a run of failures ends
    /// after this long without an error (the watch backs off at most 30 s between attempts).
    pub stuck_after: Duration,
}

impl SourceView {
    /// How long the watch has been failing, when it is.
    pub fn failing_for(&self) -> Option<Duration> {
        let (since, _) = self.failing_since?;
        let last = self.last_error_at?;
        (last.elapsed() < self.stuck_after).then(|| since.elapsed())
    }

    /// The `/livez` reason when the watch has been failing for longer than `stuck_after`.
    pub fn stuck(&self) -> Option<String> {
        let d = self.failing_for().filter(|d| *d >= self.stuck_after)?;
        Some(format!(
            "the {} {}/{} watch has been failing for {} s: {}",
            self.kind,
            self.namespace,
            self.name,
            d.as_secs(),
            self.last_error.as_deref().unwrap_or("unknown error")
        ))
    }

    /// The `/status` `source` object, as it stands when read.
    pub fn rendered(&self) -> SourceJson<'_> {
        let failing = self.failing_for();
        SourceJson {
            kind: self.kind,
            namespace: &self.namespace,
            name: &self.name,
            uid: self.uid.as_deref(),
            resource_version: self.resource_version.as_deref(),
            recreated: self.recreated,
            previous_uid: self.previous_uid.as_deref(),
            watch: WatchJson {
                healthy: self.watching,
                failing_since: failing.and(self.failing_since.map(|(_, t)| t)),
                last_error: self.last_error.as_deref(),
            },
        }
    }
}

/// The `/status` `source` object: a [`SourceView`] at the time it is read.
#[derive(Debug, Serialize)]
pub struct SourceJson<'a> {
    pub kind: &'static str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
    pub resource_version: Option<&'a str>,
    pub recreated: bool,
    pub previous_uid: Option<&'a str>,
    pub watch: WatchJson<'a>,
}

/// The watch's health inside [`SourceJson`].
#[derive(Debug, Serialize)]
pub struct WatchJson<'a> {
    pub healthy: bool,
    /// Only while the watch is failing.
    pub failing_since: Option<jiff::Timestamp>,
    pub last_error: Option<&'a str>,
}

/// The `/status` body: the status with the API source's view as it stands when read, serialised
/// once.
#[derive(Debug, Serialize)]
pub struct StatusBody<'a> {
    #[serde(flatten)]
    pub status: &'a Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceJson<'a>>,
}

impl<'a> StatusBody<'a> {
    pub fn of(status: &'a Status) -> StatusBody<'a> {
        StatusBody {
            status,
            source: status.source.as_ref().map(SourceView::rendered),
        }
    }
}

/// Shared between the decision loop, the reload worker, the API source and the server: the published
/// status (one writer), the metrics counters and the liveness ping.
#[derive(Debug)]
pub struct Shared {
    status: watch::Sender<Status>,
    /// What the decision loop saw happen, for the pod's Events ([`Notice`]).
    notices: broadcast::Sender<Notice>,
    /// The one [`Publisher`] has been handed out.
    published: AtomicBool,
    pub metrics: Metrics,
    /// `/livez` rings this; the decision loop answers by bumping `pong`. An idle loop costs nothing.
    ping: Notify,
    pong: watch::Sender<u64>,
}

/// What an operator acts on, as the decision loop saw it happen, at the event it happened at: each
/// becomes a pod Event (none for a routine accepted promotion). Sent through [`Publisher::notice`]
/// and received through [`Shared::notices`], every one in order, so a change that lasts less than
/// the time between two published statuses is reported all the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Started on the known-good from the record: the source holds nothing accepted.
    KnownGood(KnownGoodView),
    /// A config became active that is not accepted (observe mode), or one that ends a hold a notice
    /// reported.
    Active(ActiveView),
    /// The newest config is held: missing, rejected, or refused by the component (then rolled back
    /// to `applied`, if any), while `active` is in force.
    Held {
        candidate: CandidateView,
        active: Option<ActiveView>,
        applied: Option<AppliedView>,
    },
    /// The reload of the promoted config failed, after it had not: via `target` (as shown), with the
    /// error.
    ReloadFailed {
        target: String,
        error: Option<String>,
    },
    /// A settings problem appeared: what the `settings` check says of it.
    SettingsProblem(String),
}

/// How many notices wait for a slow reader before the oldest are dropped (the reader says so).
pub const NOTICES_KEPT: usize = 256;

/// The only way to write the published status and send notices; [`Shared::publisher`] hands out
/// one per [`Shared`].
#[derive(Debug)]
pub struct Publisher(watch::Sender<Status>, broadcast::Sender<Notice>);

impl Publisher {
    /// Sends `notice` to every reader of [`Shared::notices`] (none: it goes nowhere).
    pub fn notice(&self, notice: Notice) {
        let _ = self.1.send(notice);
    }

    /// Publishes `next`, waking readers only when it differs from what they saw.
    pub fn publish(&self, next: Status) {
        self.0.send_if_modified(|s| {
            if *s == next {
                false
            } else {
                *s = next;
                true
            }
        });
    }
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared {
            status: watch::Sender::new(Status::default()),
            notices: broadcast::Sender::new(NOTICES_KEPT),
            published: AtomicBool::new(false),
            metrics: Metrics::default(),
            ping: Notify::new(),
            pong: watch::Sender::new(0),
        })
    }

    /// The status writer, once: `None` when it was already taken, so two loops cannot both publish.
    pub fn publisher(&self) -> Option<Publisher> {
        (!self.published.swap(true, Ordering::AcqRel))
            .then(|| Publisher(self.status.clone(), self.notices.clone()))
    }

    /// The status as last published.
    pub fn snapshot(&self) -> Status {
        self.status.borrow().clone()
    }

    /// A receiver of every published status.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// A receiver of every notice sent from now on.
    pub fn notices(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    /// Waits for a liveness ping (the decision loop selects on this).
    pub async fn pinged(&self) {
        self.ping.notified().await;
    }

    /// The decision loop's answer to a ping.
    pub fn pong(&self) {
        self.pong.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether the decision loop answers within `deadline`.
    pub(crate) async fn loop_answers(&self, deadline: Duration) -> bool {
        let mut rx = self.pong.subscribe();
        rx.mark_unchanged();
        self.ping.notify_one();
        matches!(
            tokio::time::timeout(deadline, rx.changed()).await,
            Ok(Ok(()))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding_status(stale: bool, newest: Option<&str>, verdict: Verdict) -> Status {
        Status {
            stale,
            active: Some(ActiveView {
                version: Some("2.4.1".into()),
                sha256: PrintedHash::Sha256([1; 32]),
                since: jiff::Timestamp::UNIX_EPOCH,
                verdict: Verdict::Accepted,
                variant: None,
            }),
            candidate: Some(CandidateView {
                version: newest.map(str::to_owned),
                sha256: None,
                verdict,
                reason: "why".into(),
                variant: None,
            }),
            ..Status::default()
        }
    }

    #[test]
    fn status_body_is_the_status_in_its_order_then_the_source() {
        let now = Instant::now();
        let source = SourceView {
            kind: "configmap",
            namespace: "prod".into(),
            name: "app".into(),
            uid: Some("uid-1".into()),
            resource_version: None,
            recreated: false,
            previous_uid: None,
            watching: false,
            last_error: Some("list: forbidden".into()),
            failing_since: Some((now, "2026-01-02T03:04:05Z".parse().unwrap())),
            last_error_at: Some(now),
            stuck_after: Duration::from_secs(3600),
        };
        let plain = Status::default();
        let with_source = Status {
            source: Some(source),
            ..Status::default()
        };
        let text = serde_json::to_string(&StatusBody::of(&with_source)).unwrap();
        // One serialisation of the typed struct: its fields in their declared order, `source` last.
        let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
        assert!(
            at("ready") < at("reason") && at("reason") < at("accepts"),
            "{text}"
        );
        assert!(at("spread") < at("source"), "{text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["source"]["uid"], "uid-1");
        assert_eq!(body["source"]["watch"]["healthy"], false);
        assert_eq!(
            body["source"]["watch"]["failing_since"],
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(body["source"]["watch"]["last_error"], "list: forbidden");
        // Without a source the body is the status alone.
        assert_eq!(
            serde_json::to_value(StatusBody::of(&plain)).unwrap(),
            serde_json::to_value(&plain).unwrap()
        );
    }

    #[test]
    fn holding_names_what_runs_and_what_is_refused() {
        let s = holding_status(true, Some("3.0.0"), Verdict::TooNew);
        let h = Holding::of(&s).unwrap();
        assert_eq!(h.to_string(), "holding 2.4.1; 3.0.0 is too-new");
        assert_eq!(
            h.because("version 3.0.0 is newer than ^2 allows")
                .to_string(),
            "holding 2.4.1; 3.0.0 is too-new: version 3.0.0 is newer than ^2 allows"
        );
        let missing = holding_status(true, None, Verdict::Missing);
        assert_eq!(
            Holding::of(&missing).unwrap().to_string(),
            "holding 2.4.1; the newest config is missing"
        );
        // Observe mode runs the newest config: nothing is held back.
        let mut observe = holding_status(false, None, Verdict::TooNew);
        observe.candidate = None;
        assert_eq!(Holding::of(&observe), None);
    }

    #[test]
    fn status_reads_back_as_it_was_written() {
        let mut s = holding_status(true, Some("3.0.0"), Verdict::TooNew);
        s.reload.last_success_sha256 = Some(PrintedHash::HmacSha256([2; 32]));
        s.applied = Some(AppliedView {
            version: None,
            sha256: PrintedHash::Sha256([3; 32]),
            since: "2026-11-29T22:00:00Z".parse().unwrap(),
        });
        s.rollout = Some(
            Rollout {
                percent: Percent::parse("25%").ok(),
                bucket: Bucket::from_hundredths(1234),
                assigned: Track::Candidate,
                keys: vec!["config.yaml".into()],
                held: None,
                candidate_own: None,
            }
            .view(),
        );
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""since":"2026-11-29T22:00:00Z""#), "{json}");
        // The percentage is held once, typed, and shown as the text it was read from.
        assert!(
            json.contains(r#""percent":"25%","bucket":"12.34%""#)
                && json.contains("bucket 12.34% is below 25%: on the candidate"),
            "{json}"
        );
        let back: Status = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }
}
