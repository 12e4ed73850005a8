//! One object read: its metadata, and its `data` and `binaryData` keys counted and kept within the
//! bounds as they are read, or why they are refused.

use super::*;

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

pub(super) struct ObjectSeed(pub(super) Kind);

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
pub(super) struct Meta {
    pub(super) name: Option<String>,
    pub(super) uid: Option<String>,
    pub(super) resource_version: Option<String>,
}

pub(super) struct MetaSeed;

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
