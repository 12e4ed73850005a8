//! `confgate check`: offline verdicts for ConfigMap directories and manifests, with the same hash the
//! running sidecar reports, for CI pipelines ("will the deployed component accept this ConfigMap?").

use std::path::Path;

use base64::Engine as _;

use crate::configmap::{self, Keys};
use crate::settings::Settings;
use crate::snapshot::{self, Observed};
use crate::variants;
use crate::verdict::{Judgement, Verdict};

/// Why an input could not be checked at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: document {doc} is not valid YAML or JSON ({what})")]
    Parse {
        path: String,
        doc: usize,
        what: String,
    },
    #[error("{path}: no ConfigMap found (a manifest needs kind: ConfigMap, or kind: List of them)")]
    NoConfigMap { path: String },
    /// Without a range every verdict would be a rejection, so the check could never pass.
    #[error(
        "no accepted range to check against: pass --accepts or set CONFGATE_ACCEPTS (e.g. --accepts '>=2.4.0, <3.0.0')"
    )]
    NoRange,
    #[error("no ConfigMap named {name} in the input (--name)")]
    NoSuchName { name: String },
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// `namespace/name (path)` for a manifest, the path for a directory.
    pub what: String,
    pub judgement: Judgement,
    pub sha256: Option<String>,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<12} {:<12} {:<71} {}: {}",
            self.judgement.verdict.as_str(),
            self.judgement.version.as_deref().unwrap_or("-"),
            self.sha256.as_deref().unwrap_or("-"),
            self.what,
            self.judgement.reason
        )
    }
}

/// Keeps the lines of ConfigMaps named in `names` (all when it is empty) and every directory's line; a
/// name that matches no ConfigMap is an error, so a typo cannot pass a pipeline by checking nothing.
pub fn select(lines: Vec<Line>, names: &[String]) -> Result<Vec<Line>, Error> {
    if names.is_empty() {
        return Ok(lines);
    }
    for n in names {
        if !lines.iter().any(|l| manifest_name(&l.what) == Some(n)) {
            return Err(Error::NoSuchName { name: n.clone() });
        }
    }
    Ok(lines
        .into_iter()
        .filter(|l| manifest_name(&l.what).is_none_or(|m| names.iter().any(|n| n == m)))
        .collect())
}

/// The ConfigMap name in a manifest line's `namespace/name (place)`; None for a directory's line.
fn manifest_name(what: &str) -> Option<&str> {
    let (id, place) = what.split_once(" (")?;
    place.ends_with(')').then_some(())?;
    Some(id.rsplit_once('/').map_or(id, |(_, n)| n))
}

/// Checks every path; `-` reads a manifest from standard input.
pub fn check(paths: &[impl AsRef<Path>], settings: &Settings) -> Result<Vec<Line>, Error> {
    check_ranges(paths, std::slice::from_ref(settings))
}

/// Checks every path under each of `ranges` (settings differing in their range), one line per input
/// and range, so a CI job sees which variant each deployed range would run and which range none serves.
pub fn check_ranges(paths: &[impl AsRef<Path>], ranges: &[Settings]) -> Result<Vec<Line>, Error> {
    if ranges.is_empty() || ranges.iter().any(|s| s.accepts.is_none()) {
        return Err(Error::NoRange);
    }
    let mut inputs = Vec::new();
    for p in paths {
        let p = p.as_ref();
        if p.is_dir() {
            inputs.push((p.display().to_string(), snapshot::read(p)));
            continue;
        }
        let name = p.display().to_string();
        let text = if p == Path::new("-") {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(p)
        }
        .map_err(|source| Error::Read {
            path: name.clone(),
            source,
        })?;
        let found = manifests(&name, &text)?;
        if found.is_empty() {
            return Err(Error::NoConfigMap { path: name });
        }
        inputs.extend(found);
    }
    let mut out = Vec::new();
    for (what, obs) in &inputs {
        for settings in ranges {
            let what = match settings.accepts_text() {
                Some(range) if ranges.len() > 1 => format!("{what} [{range}]"),
                _ => what.clone(),
            };
            out.push(line(what, obs, settings));
        }
    }
    Ok(out)
}

/// Whether every line is accepted.
pub fn all_accepted(lines: &[Line]) -> bool {
    lines
        .iter()
        .all(|l| l.judgement.verdict == Verdict::Accepted)
}

/// With variants, the hash is that of the chosen variant's set: what the sidecar reports as active.
fn line(what: String, obs: &Observed, settings: &Settings) -> Line {
    let choice = variants::choose(obs, settings);
    Line {
        what,
        sha256: choice.observed.hash().map(|h| h.to_string()),
        judgement: choice.judgement,
    }
}

/// Every ConfigMap in a (multi-document) YAML or JSON text, as the kubelet would project it.
///
/// JSON is read as a stream of values (`kubectl get -o json`, or one object per line as `jq -c` writes);
/// YAML as `---`-separated documents. A top-level `kind: List` or sequence contributes each item.
pub fn manifests(path: &str, text: &str) -> Result<Vec<(String, Observed)>, Error> {
    let docs = match json_documents(path, text) {
        Some(Ok(docs)) => docs,
        Some(Err(json_err)) => yaml_documents(path, text).map_err(|_| json_err)?,
        None => yaml_documents(path, text)?,
    };
    let mut out = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        collect(doc, &Origin { path, doc: i + 1 }, None, &mut out);
    }
    Ok(out)
}

/// `None` when the text does not look like JSON; YAML is a superset for one document, but not for a
/// stream of concatenated JSON values.
fn json_documents(path: &str, text: &str) -> Option<Result<Vec<serde_json::Value>, Error>> {
    if !text.trim_start().starts_with(['{', '[']) {
        return None;
    }
    let mut docs = Vec::new();
    for (i, v) in serde_json::Deserializer::from_str(text)
        .into_iter::<serde_json::Value>()
        .enumerate()
    {
        match v {
            Ok(v) => docs.push(v),
            // Described by position only: parser messages may quote the manifest's content.
            Err(e) => {
                return Some(Err(Error::Parse {
                    path: path.to_owned(),
                    doc: i + 1,
                    what: format!("line {}, column {}", e.line(), e.column()),
                }));
            }
        }
    }
    Some(Ok(docs))
}

fn yaml_documents(path: &str, text: &str) -> Result<Vec<serde_json::Value>, Error> {
    serde_saphyr::from_multiple_with_options(text, crate::extract::yaml_options(text.len()))
        .map_err(|e| {
            let line = e.location().map_or(0, |l| l.line());
            let column = e.location().map_or(0, |l| l.column());
            Error::Parse {
                path: path.to_owned(),
                doc: document_at(text, line),
                what: format!("line {line}, column {column}"),
            }
        })
}

/// The 1-based document of a stream that holds `line`, counting `---` separators before it.
fn document_at(text: &str, line: u64) -> usize {
    let mut doc = 1;
    let mut content = false;
    for l in text.lines().take(line.saturating_sub(1) as usize) {
        if l.starts_with("---") && content {
            doc += 1;
        } else if !l.trim().is_empty() && !l.trim_start().starts_with('#') {
            content = true;
        }
    }
    doc
}

/// Where a ConfigMap was found, for its report line.
struct Origin<'a> {
    path: &'a str,
    doc: usize,
}

fn collect(
    v: &serde_json::Value,
    origin: &Origin<'_>,
    item: Option<usize>,
    out: &mut Vec<(String, Observed)>,
) {
    let items = match v.get("kind").and_then(|k| k.as_str()) {
        Some("ConfigMap") => return out.push(configmap(v, origin, item)),
        Some("List") | Some("ConfigMapList") => v.get("items").and_then(|i| i.as_array()),
        _ => v.as_array(),
    };
    for (n, it) in items.into_iter().flatten().enumerate() {
        collect(it, origin, Some(n + 1), out);
    }
}

fn configmap(
    v: &serde_json::Value,
    origin: &Origin<'_>,
    item: Option<usize>,
) -> (String, Observed) {
    let meta = v.get("metadata");
    let field = |k: &str| meta.and_then(|m| m.get(k)).and_then(|x| x.as_str());
    let name = field("name").unwrap_or("<unnamed>");
    let place = match item {
        Some(n) => format!("{} document {} item {n}", origin.path, origin.doc),
        None => format!("{} document {}", origin.path, origin.doc),
    };
    let what = match field("namespace") {
        Some(ns) => format!("{ns}/{name} ({place})"),
        None => format!("{name} ({place})"),
    };
    (what, configmap::observe(files(v)))
}

fn files(v: &serde_json::Value) -> Result<Keys, String> {
    let mut files = Keys::default();
    for (section, binary) in [("data", false), ("binaryData", true)] {
        let Some(map) = v.get(section) else { continue };
        if map.is_null() {
            continue;
        }
        let map = map
            .as_object()
            .ok_or_else(|| format!("{section} is not a mapping"))?;
        for (k, val) in map {
            let key = k.as_str();
            let text = val.as_str().ok_or_else(|| {
                format!("{section}.{key} is not a string (quote numbers and booleans)")
            })?;
            let bytes = if binary {
                base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|e| format!("binaryData.{key} is not valid base64 ({e})"))?
            } else {
                text.as_bytes().to_vec()
            };
            files.insert(section, key, bytes)?;
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(found: &[(String, Observed)]) -> Vec<&str> {
        found.iter().map(|(w, _)| w.as_str()).collect()
    }

    #[test]
    fn yaml_flow_mapping_is_not_mistaken_for_json() {
        let found = manifests(
            "f",
            "{kind: ConfigMap, metadata: {name: a}, data: {version: '1'}}\n",
        )
        .unwrap();
        assert_eq!(names(&found), ["a (f document 1)"]);
        assert!(matches!(found[0].1, Observed::Config(_)));
    }

    #[test]
    fn broken_json_reports_the_json_error() {
        let err =
            manifests("f", "{\"kind\": \"ConfigMap\", \"data\": {\"a\": \"b\"}\n").unwrap_err();
        assert!(
            matches!(&err, Error::Parse { doc: 1, what, .. } if what == "line 2, column 0"),
            "{err}"
        );
    }

    #[test]
    fn top_level_sequence_and_nested_lists() {
        let text = "- kind: ConfigMap\n  metadata: {name: a}\n  data: {k: v}\n- kind: List\n  items:\n  - kind: ConfigMap\n    metadata: {name: b}\n";
        let found = manifests("f", text).unwrap();
        assert_eq!(
            names(&found),
            ["a (f document 1 item 1)", "b (f document 1 item 1)"]
        );
        assert!(matches!(&found[1].1, Observed::Missing(_)));
    }

    #[test]
    fn non_string_data_and_bad_keys_are_named() {
        let found = manifests(
            "f",
            "kind: ConfigMap\ndata: {version: 2.4}\n---\nkind: ConfigMap\ndata: {..data: x}\n",
        )
        .unwrap();
        let reasons: Vec<String> = found
            .iter()
            .map(|(_, o)| match o {
                Observed::Broken(why) => why.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(
            reasons[0].contains("data.version is not a string"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].contains("not a valid ConfigMap key"),
            "{reasons:?}"
        );
    }
}
