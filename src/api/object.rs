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

/// Why an object's keys are not judged. Names a key as a reason shows it, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{}", Broken::TooManyKeys)]
    TooManyKeys,
    #[error(
        "the config is over the ConfigMap size limit of {MAX_BYTES} bytes (the limit was passed at key {key})"
    )]
    OverSize { key: String },
    #[error("{section} key {key} is not valid base64")]
    Base64 { section: &'static str, key: String },
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The keys read so far and what is left of the budget, shared by `data` and `binaryData`.
struct Gathered {
    keys: Keys,
    count: usize,
    bytes: u64,
    /// Why the keys are refused; once set, nothing more is kept.
    problem: Option<Refused>,
}

impl Gathered {
    fn new() -> Gathered {
        Gathered {
            keys: Keys::default(),
            count: 0,
            bytes: 0,
            problem: None,
        }
    }

    /// Counts one more key; false once past a limit or a problem (then its value is skipped).
    fn admit(&mut self) -> bool {
        if self.problem.is_some() {
            return false;
        }
        self.count += 1;
        if self.count > MAX_KEYS {
            self.problem = Some(Refused::TooManyKeys);
            self.keys = Keys::default();
            return false;
        }
        true
    }

    /// Adds one value, unless it takes the config past [`MAX_BYTES`].
    fn add(&mut self, section: &'static str, key: &str, bytes: Vec<u8>) {
        self.bytes += bytes.len() as u64;
        if self.bytes > MAX_BYTES {
            self.problem = Some(Refused::OverSize {
                key: listing::name(key),
            });
            self.keys = Keys::default();
            return;
        }
        if let Err(why) = self.keys.insert(section, key, bytes) {
            self.problem = Some(Refused::Key(why));
            self.keys = Keys::default();
        }
    }
}

struct ObjectSeed(Kind);

impl<'de> DeserializeSeed<'de> for ObjectSeed {
    type Value = Object;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Object, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectSeed {
    type Value = Object;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
        let mut meta = Meta::default();
        let mut gathered = Gathered::new();
        let mut status = StatusFields::default();
        let mut is_status = false;
        while let Some(key) = map.next_key::<Cow<'_, str>>()? {
            match (&*key, self.0) {
                ("metadata", _) => meta = map.next_value_seed(MetaSeed)?,
                ("data", Kind::ConfigMap) => map.next_value_seed(Section {
                    gathered: &mut gathered,
                    name: "data",
                    base64: false,
                })?,
                ("data", Kind::Secret) => map.next_value_seed(Section {
                    gathered: &mut gathered,
                    name: "data",
                    base64: true,
                })?,
                ("binaryData", Kind::ConfigMap) => map.next_value_seed(Section {
                    gathered: &mut gathered,
                    name: "binaryData",
                    base64: true,
                })?,
                ("kind", _) => {
                    is_status |= map.next_value::<Cow<'_, str>>()? == "Status";
                }
                ("code", _) => {
                    status.code = map.next_value()?;
                    is_status = true;
                }
                ("reason", _) => status.reason = map.next_value()?,
                ("message", _) => status.message = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let keys = match gathered.problem {
            Some(why) => Err(why),
            None => Ok(gathered.keys),
        };
        Ok(Object {
            name: meta.name,
            uid: meta.uid,
            resource_version: meta.resource_version,
            keys,
            status: is_status.then_some(status),
        })
    }
}

/// The metadata fields read: the rest (managedFields, annotations) is skipped.
#[derive(Debug, Default)]
struct Meta {
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

struct MetaSeed;

impl<'de> DeserializeSeed<'de> for MetaSeed {
    type Value = Meta;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Meta, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed {
    type Value = Meta;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("object metadata")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
        let mut meta = Meta::default();
        while let Some(key) = map.next_key::<Cow<'_, str>>()? {
            let field = match &*key {
                "name" => &mut meta.name,
                "uid" => &mut meta.uid,
                "resourceVersion" => &mut meta.resource_version,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *field = map.next_value()?;
        }
        Ok(meta)
    }
}

/// `data` or `binaryData`: each key counted, each value kept only within the budget.
struct Section<'a> {
    gathered: &'a mut Gathered,
    name: &'static str,
    base64: bool,
}

impl<'de> DeserializeSeed<'de> for Section<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Section<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of keys")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'_, str>>()? {
            if !self.gathered.admit() {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = map.next_value::<Cow<'_, str>>()?;
            let bytes = if self.base64 {
                match base64::engine::general_purpose::STANDARD.decode(value.as_bytes()) {
                    Ok(b) => b,
                    Err(_) => {
                        self.gathered.problem = Some(Refused::Base64 {
                            section: self.name,
                            key: listing::name(&key),
                        });
                        self.gathered.keys = Keys::default();
                        continue;
                    }
                }
            } else {
                value.into_owned().into_bytes()
            };
            self.gathered.add(self.name, &key, bytes);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(kind: Kind, v: &serde_json::Value) -> Object {
        object(kind, serde_json::to_vec(v).unwrap().as_slice()).unwrap()
    }

    #[test]
    fn a_configmap_reads_as_the_kubelet_projects_it() {
        let o = read(
            Kind::ConfigMap,
            &json!({"metadata": {"name": "app", "uid": "u", "resourceVersion": "7",
                    "managedFields": [{"manager": "x"}]},
                    "data": {"version": "2.4.1"}, "binaryData": {"blob": "AAH/"}}),
        );
        assert_eq!(
            (o.name.as_deref(), o.uid.as_deref()),
            (Some("app"), Some("u"))
        );
        assert_eq!(o.resource_version.as_deref(), Some("7"));
        assert!(o.status.is_none());
        let keys = o.keys.unwrap().into_map();
        assert_eq!(keys["version"], b"2.4.1");
        assert_eq!(keys["blob"], [0, 1, 255]);
    }

    #[test]
    fn a_secret_s_data_is_base64_and_string_data_is_never_read() {
        let o = read(
            Kind::Secret,
            &json!({"data": {"token": "MTIzNA=="}, "stringData": {"x": "write-only"}}),
        );
        let keys = o.keys.unwrap().into_map();
        assert_eq!(keys.keys().collect::<Vec<_>>(), ["token"]);
        assert_eq!(keys["token"], b"1234");
    }

    #[test]
    fn past_max_keys_nothing_more_is_kept_and_the_metadata_is_still_read() {
        let data: serde_json::Map<String, serde_json::Value> = (0..=MAX_KEYS)
            .map(|i| (format!("k{i}"), json!("x")))
            .collect();
        // Metadata after the keys: the JSON object's order is not fixed.
        let o = read(
            Kind::ConfigMap,
            &json!({"data": data, "metadata": {"resourceVersion": "9"}}),
        );
        assert_eq!(o.keys.unwrap_err(), Refused::TooManyKeys);
        assert_eq!(
            Refused::TooManyKeys.to_string(),
            Broken::TooManyKeys.to_string()
        );
        assert_eq!(o.resource_version.as_deref(), Some("9"));
    }

    #[test]
    fn past_max_bytes_the_key_is_named_and_nothing_more_is_kept() {
        let half = "x".repeat(MAX_BYTES as usize / 2);
        // `binaryData` comes first here (the encoder sorts): one byte, then `a`, then `b` passes it.
        let o = read(
            Kind::ConfigMap,
            &json!({"data": {"a": half, "b": half}, "binaryData": {"c": "AA=="}}),
        );
        let why = o.keys.unwrap_err();
        assert_eq!(why, Refused::OverSize { key: "b".into() });
        let why = why.to_string();
        assert!(
            why.contains("size limit of 1048576 bytes") && why.contains("at key b"),
            "{why}"
        );
    }

    #[test]
    fn bad_keys_and_bad_base64_are_refused_without_their_content() {
        let o = read(
            Kind::ConfigMap,
            &json!({"data": {"a": "x"}, "binaryData": {"a": "AA=="}}),
        );
        assert!(matches!(
            o.keys.unwrap_err(),
            Refused::Key(KeyError::Both(_))
        ));
        let o = read(Kind::ConfigMap, &json!({"binaryData": {"b": "hunter2!"}}));
        let why = o.keys.unwrap_err();
        assert_eq!(why.to_string(), "binaryData key b is not valid base64");
        let o = read(Kind::ConfigMap, &json!({"data": {"..data": "x"}}));
        assert!(
            o.keys
                .unwrap_err()
                .to_string()
                .contains("not a valid ConfigMap key")
        );
    }

    #[test]
    fn lists_events_and_statuses() {
        let l = list(
            Kind::ConfigMap,
            br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"app"},"data":{"a":"1"}}]}"#.as_slice(),
        )
        .unwrap();
        assert_eq!(l.resource_version.as_deref(), Some("5"));
        assert_eq!(l.item.unwrap().name.as_deref(), Some("app"));
        let empty = list(
            Kind::ConfigMap,
            br#"{"metadata":{},"items":null}"#.as_slice(),
        )
        .unwrap();
        assert!(empty.item.is_none());
        // `object` before `type`, as a sorted encoder writes it.
        let e = watch_event(
            Kind::ConfigMap,
            br#"{"object":{"kind":"Status","code":410,"reason":"Expired","message":"too old","metadata":{}},"type":"ERROR"}"#.as_slice(),
        )
        .unwrap();
        assert_eq!(e.kind, EventType::Error);
        let s = e.object.status.unwrap();
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    }

    #[test]
    fn an_unreadable_answer_is_named_without_its_text() {
        let e = object(Kind::ConfigMap, br#"{"data": {"a": 1234567}}"#.as_slice()).unwrap_err();
        assert!(!e.to_string().contains("1234567"), "{e}");
        assert!(e.to_string().starts_with("not the shape"), "{e}");
        let e =
            watch_event(Kind::ConfigMap, br#"{"type":"ADDED","object":{"#.as_slice()).unwrap_err();
        assert!(e.to_string().starts_with("the answer ends early"), "{e}");
    }
}
