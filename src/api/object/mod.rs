//! A ConfigMap or Secret as the API server sends it, read straight into the keys the gate judges,
//! bounded while it is read.
//!
//! k8s-openapi's `ConfigMap` would materialise every key of `data` and `binaryData` (a `String` key and
//! value each) before anything could count them: 100,000 one-byte keys, within the API server's 1 MiB,
//! cost tens of MiB. Here each key is counted and each value's size added as it is read; past
//! [`MAX_KEYS`] keys or [`MAX_BYTES`] bytes nothing more is kept, the rest of the object is skipped
//! (its metadata is still read, wherever it comes), and the object carries why it is refused. The
//! same seed reads a watch event's `Status` (its `code`, `reason`, `message`), since the order of a
//! JSON object's fields is not fixed.
//!
//! Errors name a fixed cause and a line and column, never serde_json's text, which can quote content.

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::configmap::{KeyError, Keys};
use crate::listing;
use crate::snapshot::{Broken, MAX_BYTES, MAX_KEYS};

mod keys;
#[cfg(test)]
mod tests;

pub use keys::Refused;
use keys::{MetaSeed, ObjectSeed};

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

/// One object of a list or a watch event: its identity, and its keys or why they are refused.
#[derive(Debug)]
pub struct Object {
    pub name: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// The keys as the kubelet would project them, or why they are not judged.
    pub keys: Result<Keys, Refused>,
    /// When the object is a `Status` (a watch's `ERROR` event): its code, reason and message.
    pub status: Option<StatusFields>,
}

/// The parts of a `Status` an error reports.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StatusFields {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

impl StatusFields {
    /// As kube reports an API error.
    pub fn into_status(self) -> kube::core::Status {
        kube::core::Status::failure(&self.message, &self.reason).with_code(self.code)
    }
}

/// A list answer: its resourceVersion and the last object it held.
#[derive(Debug)]
pub struct List {
    pub resource_version: Option<String>,
    pub item: Option<Object>,
}

/// A watch event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

/// One line of a watch.
#[derive(Debug)]
pub struct WatchEvent {
    pub kind: EventType,
    pub object: Object,
}

/// Why an answer could not be read: a fixed cause and where, never the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{cause} at line {line} column {column}")]
pub struct Unreadable {
    cause: &'static str,
    line: usize,
    column: usize,
}

impl Unreadable {
    fn of(e: &serde_json::Error) -> Unreadable {
        use serde_json::error::Category;
        let cause = match e.classify() {
            Category::Io => "the answer could not be read",
            Category::Syntax => "not valid JSON",
            Category::Data => "not the shape of the object asked for",
            Category::Eof => "the answer ends early",
        };
        Unreadable {
            cause,
            line: e.line(),
            column: e.column(),
        }
    }
}

/// Reads a list answer of `kind` objects from `reader`.
pub fn list(kind: Kind, reader: impl std::io::Read) -> Result<List, Unreadable> {
    let mut de = serde_json::Deserializer::from_reader(reader);
    let list = ListSeed(kind)
        .deserialize(&mut de)
        .and_then(|l| de.end().map(|()| l))
        .map_err(|e| Unreadable::of(&e))?;
    Ok(list)
}

/// Reads one watch event (one line of a watch answer) of `kind` objects from `reader`.
pub fn watch_event(kind: Kind, reader: impl std::io::Read) -> Result<WatchEvent, Unreadable> {
    let mut de = serde_json::Deserializer::from_reader(reader);
    let ev = EventSeed(kind)
        .deserialize(&mut de)
        .and_then(|e| de.end().map(|()| e))
        .map_err(|e| Unreadable::of(&e))?;
    Ok(ev)
}

/// Reads one object of `kind` from `reader`.
pub fn object(kind: Kind, reader: impl std::io::Read) -> Result<Object, Unreadable> {
    let mut de = serde_json::Deserializer::from_reader(reader);
    let obj = ObjectSeed(kind)
        .deserialize(&mut de)
        .and_then(|o| de.end().map(|()| o))
        .map_err(|e| Unreadable::of(&e))?;
    Ok(obj)
}

struct ListSeed(Kind);

impl<'de> DeserializeSeed<'de> for ListSeed {
    type Value = List;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<List, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ListSeed {
    type Value = List;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<List, A::Error> {
        let mut list = List {
            resource_version: None,
            item: None,
        };
        while let Some(key) = map.next_key::<Cow<'_, str>>()? {
            match &*key {
                "metadata" => {
                    let meta = map.next_value_seed(MetaSeed)?;
                    list.resource_version = meta.resource_version;
                }
                "items" => {
                    if let Some(item) = map.next_value_seed(ItemsSeed(self.0))? {
                        list.item = Some(item);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(list)
    }
}

/// A list's `items`: each read with its bounds, only the last kept (a list by name holds one).
struct ItemsSeed(Kind);

impl<'de> DeserializeSeed<'de> for ItemsSeed {
    type Value = Option<Object>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Object>, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed {
    type Value = Option<Object>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<Object>, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<Object>, E> {
        Ok(None)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Object>, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Object>, A::Error> {
        let mut last = None;
        while let Some(obj) = seq.next_element_seed(ObjectSeed(self.0))? {
            last = Some(obj);
        }
        Ok(last)
    }
}

struct EventSeed(Kind);

impl<'de> DeserializeSeed<'de> for EventSeed {
    type Value = WatchEvent;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<WatchEvent, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed {
    type Value = WatchEvent;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WatchEvent, A::Error> {
        let mut kind = None;
        let mut object = None;
        while let Some(key) = map.next_key::<Cow<'_, str>>()? {
            match &*key {
                "type" => {
                    let t = map.next_value::<Cow<'_, str>>()?;
                    kind = Some(match &*t {
                        "ADDED" => EventType::Added,
                        "MODIFIED" => EventType::Modified,
                        "DELETED" => EventType::Deleted,
                        "BOOKMARK" => EventType::Bookmark,
                        "ERROR" => EventType::Error,
                        _ => return Err(de::Error::custom("unknown watch event type")),
                    });
                }
                "object" => object = Some(map.next_value_seed(ObjectSeed(self.0))?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        match (kind, object) {
            (Some(kind), Some(object)) => Ok(WatchEvent { kind, object }),
            (None, _) => Err(de::Error::missing_field("type")),
            (_, None) => Err(de::Error::missing_field("object")),
        }
    }
}
