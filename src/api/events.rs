//! Events about the sidecar's pod, created through events.k8s.io/v1 by confgate itself.
//!
//! A repeat is folded into the series of an earlier Event only when it says the same thing: same
//! type, reason, action and note. kube's `Recorder` folds on type, reason and action alone, so a
//! second promotion would count as a repeat of the first and the Event would keep naming the first
//! version. `Folding` decides (pure, time passed in); `EventSink` talks to the API.

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

use super::note::Note;

/// A repeat later than this after the last one starts a new Event, as kube's recorder does.
pub(crate) const FOLD_WITHIN: SignedDuration = SignedDuration::from_mins(6);

/// What makes two Events the same: everything the reader sees.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    warning: bool,
    reason: &'static str,
    action: &'static str,
    note: String,
}

impl Key {
    fn of(n: &Note) -> Key {
        Key {
            warning: n.warning,
            reason: n.reason,
            action: n.action,
            note: n.note.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct Sent {
    name: String,
    count: i32,
    last: Timestamp,
}

/// What to do with a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing identical was sent recently: a new Event.
    Create,
    /// The same note was sent as Event `name`: its series now counts `count`.
    Series { name: String, count: i32 },
}

/// The Events sent recently, keyed by all they say.
#[derive(Debug, Default)]
pub(crate) struct Folding {
    sent: HashMap<Key, Sent>,
}

impl Folding {
    /// Whether `n`, at `now`, is a new Event or a repeat of one sent within [`FOLD_WITHIN`].
    pub(crate) fn step(&mut self, n: &Note, now: Timestamp) -> Step {
        self.sent
            .retain(|_, s| now.duration_since(s.last) < FOLD_WITHIN);
        match self.sent.get(&Key::of(n)) {
            Some(s) => Step::Series {
                name: s.name.clone(),
                count: s.count + 1,
            },
            None => Step::Create,
        }
    }

    /// Records that `n` went out as Event `name`, counting `count`, at `now`.
    pub(crate) fn sent(&mut self, n: &Note, name: String, count: i32, now: Timestamp) {
        self.sent.insert(
            Key::of(n),
            Sent {
                name,
                count,
                last: now,
            },
        );
    }

    /// Forgets `n` (its Event is gone from the API server).
    pub(crate) fn forget(&mut self, n: &Note) {
        self.sent.remove(&Key::of(n));
    }
}

/// Creates Events regarding one object and patches their series.
pub(crate) struct EventSink {
    api: Api<Event>,
    regarding: ObjectReference,
    controller: &'static str,
    instance: String,
    folding: Folding,
}

impl EventSink {
    pub(crate) fn new(
        client: Client,
        regarding: ObjectReference,
        controller: &'static str,
        instance: String,
    ) -> EventSink {
        let ns = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        EventSink {
            api: Api::namespaced(client, &ns),
            regarding,
            controller,
            instance,
            folding: Folding::default(),
        }
    }

    /// Publishes `n`: a new Event, or the next count of an identical one.
    pub(crate) async fn publish(&mut self, n: &Note) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        if let Step::Series { name, count } = self.folding.step(n, now) {
            let patch = serde_json::json!({
                "series": {"count": count, "lastObservedTime": MicroTime(now)}
            });
            match self
                .api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.folding.sent(n, name, count, now);
                    return Ok(());
                }
                // Expired on the server (its Event TTL): start again with a new Event.
                Err(kube::Error::Api(s)) if s.code == 404 => self.folding.forget(n),
                Err(e) => return Err(e),
            }
        }
        let event = self.event(n, now);
        let name = event.metadata.name.clone().unwrap_or_default();
        self.api.create(&PostParams::default(), &event).await?;
        self.folding.sent(n, name, 1, now);
        Ok(())
    }

    fn event(&self, n: &Note, now: Timestamp) -> Event {
        let base = self.regarding.name.as_deref().unwrap_or(self.controller);
        Event {
            action: Some(n.action.into()),
            reason: Some(n.reason.into()),
            note: Some(n.note.clone()),
            type_: Some(if n.warning { "Warning" } else { "Normal" }.into()),
            event_time: Some(MicroTime(now)),
            regarding: Some(self.regarding.clone()),
            reporting_controller: Some(self.controller.into()),
            reporting_instance: Some(self.instance.clone()),
            metadata: ObjectMeta {
                name: Some(format!("{base}.{:x}", now.as_nanosecond())),
                namespace: self.regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            ..Event::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(text: &str) -> Note {
        Note {
            warning: false,
            reason: "Accepted",
            action: "Promote",
            note: text.into(),
        }
    }

    #[test]
    fn only_an_identical_note_is_folded() {
        let mut f = Folding::default();
        let t0 = Timestamp::from_second(1_000_000).unwrap();
        let a = note("version 2.4.1 sha256:aa is active");
        let b = note("version 2.5.0 sha256:bb is active");
        assert_eq!(f.step(&a, t0), Step::Create);
        f.sent(&a, "web-0.1".into(), 1, t0);
        let t1 = t0 + SignedDuration::from_secs(10);
        assert_eq!(
            f.step(&b, t1),
            Step::Create,
            "another version is another Event"
        );
        f.sent(&b, "web-0.2".into(), 1, t1);
        assert_eq!(
            f.step(&a, t1),
            Step::Series {
                name: "web-0.1".into(),
                count: 2
            }
        );
        f.sent(&a, "web-0.1".into(), 2, t1);
        let warning = Note {
            warning: true,
            ..a.clone()
        };
        assert_eq!(f.step(&warning, t1), Step::Create);
        // Long after the last repeat: a new Event.
        let later = t1 + FOLD_WITHIN;
        assert_eq!(f.step(&a, later), Step::Create);
    }
}
