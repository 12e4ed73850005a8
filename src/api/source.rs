//! The ConfigMap source: a watch on one object through the API, turned into the same [`Observed`]
//! snapshots the volume gives, so the decision loop judges both alike.
//!
//! The watch lists with the field selector `metadata.name=NAME` (what RBAC `resourceNames` requires
//! for list and watch), then watches from the list's resourceVersion. kube's watcher re-lists after a
//! `410 Gone`, and `default_backoff` spaces reconnects (0.8 s doubling to 30 s). Errors do not end the
//! stream; they are reported, and a run of them longer than [`STUCK_AFTER`] shows in `/livez`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::{Target, explain};
use crate::configmap::{self, Keys};
use crate::snapshot::Observed;
use crate::state::{Shared, SourceView};

/// How long the watch may keep failing before `/livez` says so.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);

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
    fn as_str(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        }
    }

    fn title(self) -> &'static str {
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
    pub fn of_kind(kind: Kind, target: Target, stuck_after: Duration) -> Tracker {
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
                None
            }
            watcher::Event::InitApply(cm) => {
                self.listed = Some(cm);
                None
            }
            watcher::Event::InitDone => match self.listed.take() {
                Some(cm) => Some(self.apply(&cm)),
                None => Some(self.gone("does not exist")),
            },
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
            warn!(configmap = %self.target, old_uid = %old, new_uid = %new, "the {} was recreated (new UID)", self.kind.title());
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
        info!(configmap = %self.target, "the {} {what}", self.kind.title());
        Observed::Missing(format!("{} {} {what}", self.kind.title(), self.target))
    }

    /// A watcher error: a `410 Gone` is the normal end of a watch window (kube lists again); anything
    /// else starts or continues a run of failures. Returns whether it was a failure.
    pub fn error(&mut self, e: &watcher::Error) -> bool {
        if let watcher::Error::WatchError(s) = e
            && s.code == 410
        {
            info!(configmap = %self.target, "watch expired (410 Gone); listing again");
            return false;
        }
        let why = self.describe(e);
        warn!(configmap = %self.target, error = %why, "{} watch failed; retrying with backoff", self.kind.title());
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
        true
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

/// Watches `target` until `shutdown`, sending each settled snapshot to `tx` and the source's view to
/// `view`, both for the decision loop; failures are counted in `shared`'s metrics.
pub async fn run(
    client: Client,
    target: Target,
    tx: watch::Sender<Option<Observed>>,
    view: watch::Sender<Option<SourceView>>,
    shared: Arc<Shared>,
    stuck_after: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &target.namespace);
    let fields = format!("metadata.name={}", target.name);
    let stream = watcher(api, watcher::Config::default().fields(&fields)).default_backoff();
    let tracker = Tracker::new(target, stuck_after);
    drive(stream, tracker, tx, view, shared, shutdown).await;
}

/// Feeds a watch's events through `tracker` until `shutdown` or the end of the stream.
pub(crate) async fn drive(
    stream: impl futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>>,
    mut tracker: Tracker,
    tx: watch::Sender<Option<Observed>>,
    view: watch::Sender<Option<SourceView>>,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
) {
    view.send_replace(Some(tracker.view().clone()));
    tokio::pin!(stream);
    tokio::pin!(shutdown);
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = &mut shutdown => return,
        };
        match item {
            Some(Ok(ev)) => {
                if let Some(obs) = tracker.event(ev) {
                    tx.send_if_modified(|cur| {
                        let same = cur.as_ref().is_some_and(|c| c.same_as(&obs));
                        *cur = Some(obs);
                        !same
                    });
                }
            }
            Some(Err(e)) => {
                if tracker.error(&e) {
                    shared.metrics.watch_error();
                }
            }
            None => return,
        }
        view.send_if_modified(|v| {
            let same = v.as_ref() == Some(tracker.view());
            *v = Some(tracker.view().clone());
            !same
        });
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
