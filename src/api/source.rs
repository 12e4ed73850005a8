//! The API source: a watch on one ConfigMap or Secret, turned into the same [`Observed`] snapshots
//! the volume gives, so the decision loop judges both alike.
//!
//! Each watch lists with the field selector `metadata.name=NAME` (what RBAC `resourceNames` requires
//! for list and watch), then watches from the list's resourceVersion (`listwatch`). After any error
//! the watch is dropped and a new one lists again, after the wait `Backoff` gives (none after a
//! `410 Gone`), so the watch is called healthy only while it runs from a list made since the last
//! error. Errors do not end the source; they are reported, and a run of them longer than
//! `STUCK_AFTER` shows in `/livez`.
//!
//! A Secret is read as the kubelet writes a Secret volume: its `data` keys as bytes (base64 in the
//! API); `stringData` is write-only and never comes back. Hashes of its content are printed sealed
//! (`snapshot::seal`, set at start-up for a `secret:` source), never as the plain `sha256:`, and
//! content never leaves the process.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::backoff::{Backoff, Failure};
use super::listwatch::{self, Event, ListWatch};
use super::object::Object;
use super::spec::Target;
use crate::configmap;
use crate::metrics::WatchSource;
use crate::snapshot::{Missing, Observed};
use crate::state::{Shared, SourceView};

/// How long the watch may keep failing before `/livez` says so.
pub(crate) const STUCK_AFTER: Duration = Duration::from_secs(60);

pub use super::object::Kind;

/// What a ConfigMap or Secret object means to the gate.
pub fn observe(obj: Object) -> Observed {
    configmap::observe(obj.keys)
}

/// Folds list and watch events into snapshots and the source's view (identity, recreation, health).
#[derive(Debug)]
pub struct Tracker {
    kind: Kind,
    target: Target,
    view: SourceView,
}

impl Tracker {
    pub fn new(target: Target, stuck_after: Duration) -> Tracker {
        Tracker::of_kind(Kind::ConfigMap, target, stuck_after)
    }

    /// A tracker of a `kind` object.
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
        }
    }

    pub fn view(&self) -> &SourceView {
        &self.view
    }

    /// An event of the list or the watch; returns the snapshot it settles. Every event is an answer,
    /// so it ends a run of failures.
    pub fn event(&mut self, ev: Event) -> Observed {
        self.view.failing_since = None;
        self.view.last_error = None;
        match ev {
            Event::Listed(obj) => {
                self.view.watching = true;
                match obj {
                    Some(obj) => self.apply(obj),
                    None => self.gone(false),
                }
            }
            Event::Apply(obj) => self.apply(obj),
            Event::Delete(obj) => {
                self.view.resource_version = obj.resource_version;
                self.gone(true)
            }
        }
    }

    fn apply(&mut self, obj: Object) -> Observed {
        let uid = obj.uid.clone();
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
        self.view.resource_version = obj.resource_version.clone();
        observe(obj)
    }

    /// The object is not there: it does not exist, or (`deleted`) a watch saw it deleted.
    fn gone(&self, deleted: bool) -> Observed {
        let what = if deleted {
            "was deleted"
        } else {
            "does not exist"
        };
        info!(source = %self.target, kind = self.kind.as_str(), "the {} {what}", self.kind.title());
        let (kind, object) = (self.kind.title(), self.target.to_string());
        Observed::Missing(if deleted {
            Missing::Deleted { kind, object }
        } else {
            Missing::NoObject { kind, object }
        })
    }

    /// A watcher error, after which the watch lists again: a `410 Gone` is the normal end of a watch
    /// window; anything else starts or continues a run of failures. Says what the error was.
    pub fn error(&mut self, e: &listwatch::Error) -> Failure {
        self.view.watching = false;
        let failure = classify(e);
        if failure == Failure::Gone {
            info!(source = %self.target, kind = self.kind.as_str(), "watch expired (410 Gone); listing again");
            return failure;
        }
        let why = self.describe(e);
        warn!(source = %self.target, kind = self.kind.as_str(), error = %why, "{} watch failed; retrying with backoff", self.kind.title());
        // The status holds the loop's clock's instants as values (`state::SourceClock` reads them).
        let now = Instant::now().into_std();
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
    pub fn describe(&self, e: &listwatch::Error) -> String {
        let rule = format!(
            "a Role rule allowing get, list and watch on {}s (apiGroups [\"\"]) with resourceNames [\"{}\"] in namespace {} (see manifests/rbac)",
            self.kind.as_str(),
            self.target.name,
            self.target.namespace
        );
        e.describe(&rule)
    }
}

/// Whether the API server answered the failed request, and whether it said `410 Gone`.
fn classify(e: &listwatch::Error) -> Failure {
    use listwatch::Error as E;
    let status = match e {
        E::Event(s) => Some(s.code),
        E::List(k) | E::WatchStart(k) | E::Watch(k) => match k {
            kube::Error::Api(s) => Some(s.code),
            _ => None,
        },
        // The server answered, with something that could not be used.
        E::Unreadable { .. } | E::TooLarge { .. } | E::NoResourceVersion { .. } => Some(0),
        // Connected, and nothing came back: as good as unreachable.
        E::NoAnswer { .. } => None,
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
    let tracker = Tracker::of_kind(kind, target.clone(), stuck_after);
    let watch = || ListWatch::new(client.clone(), kind, &target);
    drive(watch, tracker, out, shared, shutdown).await;
}

/// Feeds the events of the list-watches `watch` makes through `tracker` until `shutdown`: a new one
/// (which lists first) after each error, once the backoff's wait is over.
async fn drive(
    mut watch: impl FnMut() -> ListWatch,
    mut tracker: Tracker,
    out: Outputs,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
) {
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
        let mut lw = watch();
        let wait = loop {
            let item = tokio::select! {
                item = lw.next() => item,
                () = &mut shutdown => return,
            };
            match item {
                Ok(ev) => {
                    let listed = matches!(ev, Event::Listed(_));
                    if !listed {
                        backoff.watched();
                    }
                    let obs = tracker.event(ev);
                    out.snapshots.send_if_modified(|cur| {
                        let same = cur.as_ref().is_some_and(|c| c.same_as(&obs));
                        *cur = Some(obs);
                        !same
                    });
                    if listed {
                        backoff.listed(Instant::now());
                    }
                    publish(&tracker);
                }
                Err(e) => {
                    let failure = tracker.error(&e);
                    if failure != Failure::Gone {
                        shared.metrics.watch_error(WatchSource::Api);
                    }
                    break backoff.failed(failure, Instant::now(), fastrand::f64());
                }
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
    use crate::api::object;
    use crate::state::SourceClock;

    fn read(kind: Kind, v: serde_json::Value) -> Object {
        object::object(kind, serde_json::to_vec(&v).unwrap().as_slice()).unwrap()
    }

    fn cm(v: serde_json::Value) -> Observed {
        observe(read(Kind::ConfigMap, v))
    }

    fn target(name: &str) -> Target {
        Target {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn forbidden() -> listwatch::Error {
        let status = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
        listwatch::Error::List(kube::Error::Api(status.boxed()))
    }

    #[test]
    fn same_content_same_hash_as_the_volume_and_check() {
        let obs =
            cm(serde_json::json!({"data": {"version": "2.4.1"}, "binaryData": {"blob": "AP8="}}));
        let expected = crate::snapshot::ContentHash::of([
            ("version", b"2.4.1".as_slice()),
            ("blob", [0u8, 255].as_slice()),
        ]);
        assert_eq!(obs.hash(), Some(expected));
    }

    #[test]
    fn empty_overlapping_and_bad_keys() {
        assert!(
            matches!(cm(serde_json::json!({})), Observed::Missing(m) if m.to_string().contains("no keys"))
        );
        assert!(matches!(
            cm(serde_json::json!({"data": {"a": "x"}, "binaryData": {"a": "eQ=="}})),
            Observed::Broken(m) if m.to_string().contains("in both data and binaryData")
        ));
        assert!(matches!(
            cm(serde_json::json!({"data": {"..data": "x"}})),
            Observed::Broken(m) if m.to_string().contains("not a valid ConfigMap key")
        ));
    }

    #[test]
    fn an_answer_ends_a_run_of_failures() {
        let mut t = Tracker::new(target("cm"), STUCK_AFTER);
        t.error(&forbidden());
        assert!(t.view().failing_for().is_some());
        assert!(!t.view().watching);
        t.event(Event::Listed(None));
        assert!(t.view().failing_for().is_none());
        assert!(t.view().watching);
    }

    #[test]
    fn a_deleted_secret_is_named_as_a_secret() {
        let mut t = Tracker::of_kind(Kind::Secret, target("tokens"), STUCK_AFTER);
        assert_eq!(t.view().kind, "secret");
        let obs = t.event(Event::Listed(None));
        assert_eq!(
            obs,
            Observed::Missing(Missing::NoObject {
                kind: "Secret",
                object: "ns/tokens".into()
            })
        );
        let why = t.describe(&forbidden());
        assert!(
            why.contains("on secrets (apiGroups [\"\"]) with resourceNames [\"tokens\"]"),
            "{why}"
        );
    }

    #[test]
    fn a_secret_s_keys_are_its_data_as_bytes() {
        let obs = observe(read(
            Kind::Secret,
            serde_json::json!({"data": {"token": "MTIzNA==", "blob": "AP8="}}),
        ));
        let Observed::Config(s) = obs else {
            panic!("{obs:?}")
        };
        assert_eq!(s.files().keys().collect::<Vec<_>>(), ["blob", "token"]);
        assert_eq!(s.files()["blob"], [0, 255]);
        assert_eq!(s.files()["token"], b"1234");
    }
}
