//! What a pod would start on, as `check` tells it when the input holds the source's known-good record
//! (`NAME.confgate-known-good`, a ConfigMap or a Secret): the source's config when it is accepted,
//! else the newest config of the record accepted under the same settings (judged as the sidecar
//! judges the record, line by line), else nothing, with the reason. The component's own checker is
//! not run here, as `check` runs it for no config; its refusals are known only to the running pod.

use base64::Engine as _;

use crate::known_good::Entry;
use crate::settings::{Mode, OnIncompatible, Settings};
use crate::snapshot::Observed;
use crate::verdict::{self, Judgement, Verdict};

/// A known-good record found in the input.
#[derive(Debug, Clone)]
pub(super) struct Record {
    /// The source's namespace, as the record's.
    pub(super) namespace: Option<String>,
    /// The source's name: the record's without the suffix.
    pub(super) source: String,
    /// A Secret: the record of a Secret source. A pod gated on a ConfigMap reads only the ConfigMap
    /// of the record's name, so a ConfigMap in the input never takes a Secret's record.
    pub(super) secret: bool,
    /// `namespace/name`.
    id: String,
    /// `namespace/name (place)`, as a warning names it.
    pub(super) what: String,
    /// Each line's key and its entry, or why it cannot be read back.
    entries: Vec<(String, Result<Entry, String>)>,
}

impl Record {
    /// The record in the manifest object `v`, named after `source`; a Secret's values are base64.
    /// An entry that cannot be read is kept with its reason: the pod skips it, and the report says so.
    pub(super) fn read(v: &serde_json::Value, secret: bool, source: &str, place: &str) -> Record {
        let namespace = v
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(|n| n.as_str())
            .map(str::to_owned);
        let name = crate::known_good::record_name(source);
        let id = match &namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        };
        let mut entries = Vec::new();
        // A Secret's `stringData` is what a manifest author may write instead of base64 `data`.
        let sections: &[(&str, bool)] = if secret {
            &[("data", true), ("stringData", false)]
        } else {
            &[("data", false)]
        };
        for (section, base64) in sections {
            let Some(map) = v.get(*section).and_then(|d| d.as_object()) else {
                continue;
            };
            for (line, value) in map {
                entries.push((line.clone(), entry(value, *base64)));
            }
        }
        Record {
            namespace,
            source: source.to_owned(),
            secret,
            what: format!("{id} ({place})"),
            id,
            entries,
        }
    }
}

/// One value of the record, read back; the reason names the fault, never the value.
fn entry(value: &serde_json::Value, base64: bool) -> Result<Entry, String> {
    let text = value.as_str().ok_or("not a string")?;
    let json = if base64 {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| "not base64".to_owned())?;
        String::from_utf8(bytes).map_err(|_| "not text".to_owned())?
    } else {
        text.to_owned()
    };
    Entry::from_json(&json).map_err(|e| e.to_string())
}

/// What a pod would start on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The version and hash of what it runs; `None` when it runs nothing.
    pub version: Option<String>,
    pub sha256: Option<String>,
    /// What was judged, as the source's line names it.
    pub what: String,
    pub on: On,
    pub why: String,
}

/// Which config a pod starts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    Source,
    KnownGood,
    Nothing,
}

impl std::fmt::Display for Start {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<12} {:<12} {:<71} {}: {}",
            "starts-on",
            self.version.as_deref().unwrap_or("-"),
            self.sha256.as_deref().unwrap_or("-"),
            self.what,
            self.why
        )
    }
}

/// What a pod with `settings` starts on when its source's config (hash `sha256`, `None` when it has
/// none: missing or unreadable) is judged `source`, and its record is `record`: the order the sidecar
/// follows at start-up (`gate::machine::fallback`).
pub(super) fn start(
    what: String,
    sha256: Option<String>,
    source: &Judgement,
    record: &Record,
    settings: &Settings,
) -> Start {
    let on_source = |why: String| Start {
        version: source.version.clone(),
        sha256: sha256.clone(),
        what: what.clone(),
        on: On::Source,
        why,
    };
    let nothing = |why: String| Start {
        version: None,
        sha256: None,
        what: what.clone(),
        on: On::Nothing,
        why,
    };
    if settings.mode == Mode::Observe {
        // Observe mode promotes what the source holds, whatever its verdict, and never the record.
        return match &sha256 {
            Some(_) => on_source(format!(
                "the source's config, {} (observe mode promotes it whatever its verdict; the known-good \
                 is not read)",
                source.verdict.as_str()
            )),
            _ => nothing(format!(
                "nothing: the source is {} and observe mode never starts on the known-good",
                source.verdict.as_str()
            )),
        };
    }
    if source.verdict == Verdict::Accepted {
        return on_source("the source's config, accepted; the known-good is not read".to_owned());
    }
    let because = match &source.version {
        Some(v) => format!(
            "the source's newest config {v} is {}",
            source.verdict.as_str()
        ),
        None => format!("the source's newest config is {}", source.verdict.as_str()),
    };
    let mut refused = Vec::new();
    let mut best: Option<(crate::snapshot::Snapshot, Judgement, &str)> = None;
    for (line, e) in &record.entries {
        let snap = match e.as_ref().map(|e| e.snapshot()) {
            Ok(Ok(s)) => s,
            Ok(Err(why)) => {
                refused.push(format!("{line}: unreadable, skipped ({why})"));
                continue;
            }
            Err(why) => {
                refused.push(format!("{line}: unreadable, skipped ({why})"));
                continue;
            }
        };
        let j = verdict::judge(&Observed::Config(snap.clone()), settings);
        if j.verdict != Verdict::Accepted {
            refused.push(format!(
                "{line}: {} {}",
                j.version.as_deref().unwrap_or("-"),
                j.verdict.as_str()
            ));
            continue;
        }
        let newer = best
            .as_ref()
            .is_none_or(|(_, b, _)| match (&j.parsed, &b.parsed) {
                (Some(a), Some(b)) => a.cmp_precedence(b).is_gt(),
                (a, b) => a.is_some() && b.is_none(),
            });
        if newer {
            best = Some((snap, j, line));
        }
    }
    let record_id = &record.id;
    let Some((snap, j, line)) = best else {
        let held = if record.entries.is_empty() {
            format!("{record_id} holds no known-good yet")
        } else {
            format!(
                "no known-good in {record_id} is accepted under these settings ({})",
                refused.join("; ")
            )
        };
        return nothing(format!(
            "nothing: {because} and {held}; the component does not start until the source holds an \
             accepted config"
        ));
    };
    let mut why = format!(
        "the known-good {} from {record_id} (line {line}): {because}",
        j.version.as_deref().unwrap_or("-")
    );
    if settings.on_incompatible == OnIncompatible::Unready {
        why.push_str(
            "; the component starts on it and the pod stays unready (on-incompatible: unready)",
        );
    }
    Start {
        version: j.version,
        sha256: Some(snap.hash().to_string()),
        what,
        on: On::KnownGood,
        why,
    }
}
