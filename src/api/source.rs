//! The API source: a watch on one ConfigMap or Secret, turned into the same [`Observed`] snapshots
//! the volume gives, so the decision loop judges both alike.
//!
//! Each watch lists with the field selector `metadata.name=NAME` (what RBAC `resourceNames` requires
//! for list and watch), then watches from the list's resourceVersion. After any error the watch is
//! dropped and a new one lists again, after the wait `Backoff` gives (none after a `410 Gone`), so
//! the watch is called healthy only while it runs from a list made since the last error. Errors do
//! not end the source; they are reported, and a run of them longer than `STUCK_AFTER` shows in
//! `/livez`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::backoff::{Backoff, Failure};
use super::{Target, explain};
use crate::configmap::{self, Keys};
use crate::metrics::WatchSource;
use crate::snapshot::Observed;
use crate::state::{Shared, SourceView};

/// How long the watch may keep failing before `/livez` says so.
pub(crate) const STUCK_AFTER: Duration = Duration::from_secs(60);

/// The keys of a ConfigMap as the kubelet would project them: `data` as UTF-8 bytes, `binaryData` decoded.
pub fn files(cm: &ConfigMap) -> Result<Keys, String> {
    let mut keys = Keys::default();
    for (k, v) in cm.data.iter().flatten() {
        keys.insert("data", k, v.as_bytes().to_vec())?;
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        keys.insert("binaryData", k, v.0.clone())?;
    }
    Ok(keys)
}

/// What a ConfigMap object means to the gate.
pub fn observe(cm: &ConfigMap) -> Observed {
    configmap::observe(files(cm))
}

/// The kind of object watched: named in the view, the log lines and the RBAC rule a 403 calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    /// As `/status` and the log lines name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        }
    }

    /// As messages name it.
    pub fn title(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
        }
    }
}

/// Folds watcher events into snapshots and the source's view (identity, recreation, health).
#[derive(Debug)]
pub struct Tracker {
    kind: Kind,
    target: Target,
    view: SourceView,
    /// The object seen in the current initial list, if any.
    listed: Option<ConfigMap>,
}

impl Tracker {
    pub fn new(target: Target, stuck_after: Duration) -> Tracker {
        Tracker::of_kind(Kind::ConfigMap, target, stuck_after)
    }

    /// A tracker of a `kind` object; a Secret's events arrive as ConfigMaps with its `data` as
    /// `binaryData` (see `api::secret`).
    pub(crate) fn of_kind(kind: Kind, target: Target, stuck_after: Duration) -> Tracker {
        Tracker {
            kind,
            view: SourceView {
                kind: kind.as_str(),
                namespace: target.namespace.clone(),
                name: target.name.clone(),
                uid: None,
                resource_version: None,
                recreated: false,
                previous_uid: None,
                watching: false,
                last_error: None,
                failing_since: None,
                last_error_at: None,
                stuck_after,
            },
            target,
            listed: None,
        }
    }

    pub fn view(&self) -> &SourceView {
        &self.view
    }

    /// A watcher event; returns the snapshot to hand to the gate, if the event settles one.
    pub fn event(&mut self, ev: watcher::Event<ConfigMap>) -> Option<Observed> {
        // `Init` comes before the list request, so it proves nothing; every other event is an answer.
        if !matches!(ev, watcher::Event::Init) {
            self.view.failing_since = None;
            self.view.last_error = None;
        }
        match ev {
            watcher::Event::Init => {
                self.listed = None;
                self.view.watching = false;
                None
            }
            watcher::Event::InitApply(cm) => {
                self.listed = Some(cm);
                None
            }
            watcher::Event::InitDone => {
                self.view.watching = true;
                match self.listed.take() {
                    Some(cm) => Some(self.apply(&cm)),
                    None => Some(self.gone("does not exist")),
                }
            }
            watcher::Event::Apply(cm) => Some(self.apply(&cm)),
            watcher::Event::Delete(cm) => {
                self.view.resource_version = cm.metadata.resource_version.clone();
                Some(self.gone("was deleted"))
            }
        }
    }

    fn apply(&mut self, cm: &ConfigMap) -> Observed {
        let uid = cm.metadata.uid.clone();
        if let (Some(old), Some(new)) = (&self.view.uid, &uid)
            && old != new
        {
            warn!(source = %self.target, kind = self.kind.as_str(), old_uid = %old, new_uid = %new, "the {} was recreated (new UID)", self.kind.title());
            self.view.recreated = true;
            self.view.previous_uid = Some(old.clone());
        }
        if uid.is_some() {
            self.view.uid = uid;
        }
        self.view.resource_version = cm.metadata.resource_version.clone();
        observe(cm)
    }

    fn gone(&self, what: &str) -> Observed {
        info!(source = %self.target, kind = self.kind.as_str(), "the {} {what}", self.kind.title());
        Observed::Missing(format!("{} {} {what}", self.kind.title(), self.target))
    }

    /// A watcher error, after which the watch lists again: a `410 Gone` is the normal end of a watch
    /// window; anything else starts or continues a run of failures. Says what the error was.
    pub fn error(&mut self, e: &watcher::Error) -> Failure {
        self.view.watching = false;
        let failure = classify(e);
        if failure == Failure::Gone {
            info!(source = %self.target, kind = self.kind.as_str(), "watch expired (410 Gone); listing again");
            return failure;
        }
        let why = self.describe(e);
        warn!(source = %self.target, kind = self.kind.as_str(), error = %why, "{} watch failed; retrying with backoff", self.kind.title());
        let now = Instant::now();
        let ended = self
            .view
            .last_error_at
            .is_none_or(|t| now.duration_since(t) >= self.view.stuck_after);
        if self.view.failing_since.is_none() || ended {
            self.view.failing_since = Some((now, jiff::Timestamp::now()));
        }
        self.view.last_error_at = Some(now);
        self.view.last_error = Some(why);
        failure
    }

    /// The error as a user can act on it; a 403 names the Role rule that is missing.
    pub fn describe(&self, e: &watcher::Error) -> String {
        let rule = format!(
            "a Role rule allowing get, list and watch on {}s (apiGroups [\"\"]) with resourceNames [\"{}\"] in namespace {} (see manifests/rbac)",
            self.kind.as_str(),
            self.target.name,
            self.target.namespace
        );
        match e {
            watcher::Error::InitialListFailed(k) => format!("list: {}", explain(k, &rule)),
            watcher::Error::WatchStartFailed(k) => format!("watch: {}", explain(k, &rule)),
            watcher::Error::WatchFailed(k) => format!("watch: {}", explain(k, &rule)),
            watcher::Error::WatchError(s) => {
                format!("watch: {}", explain(&kube::Error::Api(s.clone()), &rule))
            }
            other => other.to_string(),
        }
    }
}

/// Whether the API server answered the failed request, and whether it said `410 Gone`.
fn classify(e: &watcher::Error) -> Failure {
    let status = match e {
        watcher::Error::WatchError(s) => Some(s.code),
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => match k {
            kube::Error::Api(s) => Some(s.code),
            _ => None,
        },
        // The server answered, with something kube could not use.
        _ => Some(0),
    };
    match status {
        Some(410) => Failure::Gone,
        Some(_) => Failure::Answered,
        None => Failure::Unanswered,
    }
}

/// The channels the source feeds the decision loop through.
pub struct Outputs {
    /// Each settled snapshot.
    pub snapshots: watch::Sender<Option<Observed>>,
    /// The source's view (identity, recreation, health).
    pub view: watch::Sender<Option<SourceView>>,
}

/// Watches the `kind` object `target` until `shutdown`, sending each settled snapshot and the
/// source's view to the decision loop; failures are counted in `shared`'s metrics.
pub async fn run(
    client: Client,
    kind: Kind,
    target: Target,
    out: Outputs,
    shared: Arc<Shared>,
    stuck_after: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let fields = format!("metadata.name={}", target.name);
    let config = watcher::Config::default().fields(&fields);
    let tracker = Tracker::of_kind(kind, target.clone(), stuck_after);
    match kind {
        Kind::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(client, &target.namespace);
            let watch = || watcher(api.clone(), config.clone());
            drive(watch, tracker, out, shared, shutdown).await;
        }
        Kind::Secret => {
            let api: Api<Secret> = Api::namespaced(client, &target.namespace);
            let watch =
                || watcher(api.clone(), config.clone()).map(|item| item.map(super::secret::event));
            drive(watch, tracker, out, shared, shutdown).await;
        }
    }
}

/// Feeds the events of the watches `watch` makes through `tracker` until `shutdown`: a new watch
/// (which lists first) after each error, once the backoff's wait is over.
pub(crate) async fn drive<S>(
    mut watch: impl FnMut() -> S,
    mut tracker: Tracker,
    out: Outputs,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
) where
    S: futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>>,
{
    let publish = |tracker: &Tracker| {
        out.view.send_if_modified(|v| {
            let same = v.as_ref() == Some(tracker.view());
            *v = Some(tracker.view().clone());
            !same
        });
    };
    publish(&tracker);
    tokio::pin!(shutdown);
    let mut backoff = Backoff::default();
    loop {
        let stream = watch();
        tokio::pin!(stream);
        let wait = loop {
            let item = tokio::select! {
                item = stream.next() => item,
                () = &mut shutdown => return,
            };
            match item {
                Some(Ok(ev)) => {
                    let listed = matches!(ev, watcher::Event::InitDone);
                    if matches!(ev, watcher::Event::Apply(_) | watcher::Event::Delete(_)) {
                        backoff.watched();
                    }
                    if let Some(obs) = tracker.event(ev) {
                        out.snapshots.send_if_modified(|cur| {
                            let same = cur.as_ref().is_some_and(|c| c.same_as(&obs));
                            *cur = Some(obs);
                            !same
                        });
                    }
                    if listed {
                        backoff.listed(Instant::now());
                    }
                    publish(&tracker);
                }
                Some(Err(e)) => {
                    let failure = tracker.error(&e);
                    if failure != Failure::Gone {
                        shared.metrics.watch_error(WatchSource::Api);
                    }
                    break backoff.failed(failure, Instant::now(), fastrand::f64());
                }
                // kube's watcher does not end; should it, start again as after an error.
                None => break backoff.failed(Failure::Answered, Instant::now(), fastrand::f64()),
            }
        };
        publish(&tracker);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = &mut shutdown => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn cm(data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            binary_data: Some(
                binary
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn same_content_same_hash_as_the_volume_and_check() {
        let obs = observe(&cm(&[("version", "2.4.1")], &[("blob", &[0, 255])]));
        let expected = crate::snapshot::ContentHash::of([
            ("version", b"2.4.1".as_slice()),
            ("blob", [0u8, 255].as_slice()),
        ]);
        assert_eq!(obs.hash(), Some(expected));
    }

    #[test]
    fn empty_overlapping_and_bad_keys() {
        assert!(matches!(observe(&cm(&[], &[])), Observed::Missing(m) if m.contains("no keys")));
        assert!(matches!(
            observe(&cm(&[("a", "x")], &[("a", b"y")])),
            Observed::Broken(m) if m.contains("in both data and binaryData")
        ));
        assert!(matches!(
            observe(&cm(&[("..data", "x")], &[])),
            Observed::Broken(m) if m.contains("not a valid ConfigMap key")
        ));
    }

    #[test]
    fn init_alone_does_not_end_a_run_of_failures() {
        let mut t = Tracker::new(
            Target {
                namespace: "ns".into(),
                name: "cm".into(),
            },
            STUCK_AFTER,
        );
        let forbidden = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
        t.error(&watcher::Error::InitialListFailed(kube::Error::Api(
            forbidden.boxed(),
        )));
        assert!(t.view().failing_for().is_some());
        t.event(watcher::Event::Init);
        assert!(t.view().failing_for().is_some());
        t.event(watcher::Event::InitDone);
        assert!(t.view().failing_for().is_none());
    }
}
