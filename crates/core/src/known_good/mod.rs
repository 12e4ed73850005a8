//! The last known-good record: the config a pod applied and whose component then stayed ready
//! without restarting for the trial period, kept in the cluster beside the source (one object,
//! `NAME.confgate-known-good`), newest per schema version line, so a pod that starts while the source
//! holds nothing it accepts can start on it. Pure: what a line is, what one entry holds, and whether
//! a write replaces what is recorded. The API reads and writes are `api::known_good`'s.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::snapshot::Snapshot;
use crate::values::ApiVersion;
pub use crate::values::SchemeVersion;
use crate::verdict::parse_lenient;

/// The suffix of the record's name: the source's name, then this.
pub const RECORD_SUFFIX: &str = ".confgate-known-good";

/// The record's name for a source named `source`.
pub fn record_name(source: &str) -> String {
    format!("{source}{RECORD_SUFFIX}")
}

/// A schema version line: one known-good is kept per line, so pods with different accepted ranges
/// each find the newest one they accept. Semver: the major version; API versions: the group and
/// version, each its own line (their order is Kubernetes', not a number's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Line {
    Major(u64),
    Api(String),
}

impl Line {
    /// `None` for a config of several files each with its own version (`version-from` `yaml:*#...`):
    /// it has no one line, so it is never recorded (a trial starts only on a semver or API version).
    pub fn of(v: &SchemeVersion) -> Option<Line> {
        match v {
            SchemeVersion::Semver(v) => Some(Line::Major(v.major)),
            SchemeVersion::Api(a) => Some(Line::Api(a.to_string())),
            SchemeVersion::Each(_) => None,
        }
    }

    /// The record's key for this line: a ConfigMap key (`[-._a-zA-Z0-9]+`), so `/` becomes `_`.
    pub fn key(&self) -> String {
        match self {
            Line::Major(m) => format!("v{m}"),
            Line::Api(a) => format!("api.{}", a.replace('/', "_")),
        }
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Line::Major(m) => write!(f, "{m}.x"),
            Line::Api(a) => f.write_str(a),
        }
    }
}

/// `text` read under the scheme `like` is of (semver leniently, as the verdict reads it).
pub fn parse_like(like: &SchemeVersion, text: &str) -> Option<SchemeVersion> {
    match like {
        SchemeVersion::Semver(_) => parse_lenient(text).ok().map(SchemeVersion::Semver),
        SchemeVersion::Api(_) => text.parse::<ApiVersion>().ok().map(SchemeVersion::Api),
        SchemeVersion::Each(_) => None,
    }
}

/// One line's known-good config as the record holds it: the version as written and every key's
/// bytes (base64) with its mode when not the default. Its `Debug` shows no content.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub version: String,
    pub keys: BTreeMap<String, EntryKey>,
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryKey {
    pub data: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

impl std::fmt::Debug for Entry {
    // Never print content: it may be a Secret's.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("version", &self.version)
            .field("keys", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why an entry of the record cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("the entry is not the record's JSON ({0}); the next known-good written replaces it")]
    Json(String),
    #[error("key {0:?} is not base64; the next known-good written replaces the entry")]
    Base64(String),
    #[error(
        "key {0:?} is not a path inside the promoted dir (absolute, empty, a `.` or `..` part, or a \
         name starting with `..`, which the dir's own links and markers use); the next known-good \
         written replaces the entry"
    )]
    Key(String),
}

/// Whether `key` names a file inside the promoted dir, as a ConfigMap volume's keys and item paths
/// do: relative, each part a name (not empty, `.` or `..`), the first not starting with `..` (the
/// kubelet's `..data` and timestamped dirs, confgate's markers). A record is written by any holder of
/// its Role: its keys are joined to the promoted dir, so one like `../x` or `/x` would be written
/// outside the config's own dir.
fn is_inside(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('/')
        && !key.starts_with("..")
        && key
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
}

impl Entry {
    pub fn of(snapshot: &Snapshot, version: &str) -> Entry {
        let b64 = base64::engine::general_purpose::STANDARD;
        let keys = snapshot
            .files()
            .iter()
            .map(|(k, v)| {
                let mode = snapshot.modes().get(k).copied();
                (
                    k.clone(),
                    EntryKey {
                        data: b64.encode(v),
                        mode,
                    },
                )
            })
            .collect();
        Entry {
            version: version.to_owned(),
            keys,
        }
    }

    /// The config it holds, as a snapshot (its hash is the config's own).
    pub fn snapshot(&self) -> Result<Snapshot, EntryError> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut files = BTreeMap::new();
        let mut modes = BTreeMap::new();
        for (k, e) in &self.keys {
            if !is_inside(k) {
                return Err(EntryError::Key(k.clone()));
            }
            let bytes = b64
                .decode(&e.data)
                .map_err(|_| EntryError::Base64(k.clone()))?;
            files.insert(k.clone(), bytes);
            if let Some(m) = e.mode {
                modes.insert(k.clone(), m);
            }
        }
        Ok(Snapshot::with_modes(files, modes))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<Entry, EntryError> {
        // serde_json's message names a line and column, never the text it read.
        serde_json::from_str(text).map_err(|e| EntryError::Json(e.classify_str().to_owned()))
    }
}

trait Classify {
    fn classify_str(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_str(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "not an entry",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

/// What a pod whose trial passed does with the record's entry for its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Nothing is recorded for the line (or what is cannot be read): write it.
    Create,
    /// What is recorded is older: replace it.
    Replace { older: String },
    /// What is recorded is this version already (another pod was first) or newer: write nothing.
    Keep { recorded: String, newer: bool },
}

/// Whether `version` (the applied config's, parsed) replaces what the record holds for its line
/// (`recorded`: the entry's version as written, `None` when there is none or it cannot be read). A
/// lagging or older pod never replaces a newer known-good, and an equal one is another pod's write
/// of the same change: the first write stands, so the fleet writes once per change. A recorded
/// version of another line (`99.0.0` in line `v2`) is no pod's write: it is replaced, so a forged
/// entry cannot keep the line from ever being written again.
pub fn decide(recorded: Option<&str>, version: &SchemeVersion) -> Write {
    let Some(text) = recorded else {
        return Write::Create;
    };
    match parse_like(version, text) {
        None => Write::Replace {
            older: text.to_owned(),
        },
        Some(r) if Line::of(&r) != Line::of(version) => Write::Replace {
            older: text.to_owned(),
        },
        Some(r) => match version.cmp_precedence(&r) {
            std::cmp::Ordering::Greater => Write::Replace {
                older: text.to_owned(),
            },
            std::cmp::Ordering::Equal => Write::Keep {
                recorded: text.to_owned(),
                newer: false,
            },
            std::cmp::Ordering::Less => Write::Keep {
                recorded: text.to_owned(),
                newer: true,
            },
        },
    }
}

/// The component's containers as the pod object says at one moment: all ready, and their restarts
/// summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentFacts {
    pub ready: bool,
    pub restarts: u64,
}

/// An answer to a read of the component's containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentRead {
    Facts(ComponentFacts),
    /// The read failed this time (the API server away): the trial goes on and asks again.
    Failed(String),
    /// It cannot be read at all (no credentials, no pod identity, `--pod-report off`): no trial,
    /// no record.
    Unavailable(String),
}

/// An answer to a write of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Written: the line had nothing (`replaced: None`) or an older version.
    Written {
        record: String,
        replaced: Option<String>,
    },
    /// Not written: the record holds this version already, or a newer one.
    Kept {
        record: String,
        recorded: String,
        newer: bool,
    },
    Failed(String),
}

#[cfg(test)]
mod tests;
