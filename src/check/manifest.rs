//! `check`'s reading of manifests: the documents of a YAML or JSON stream, and in them each ConfigMap
//! as the kubelet would project it, and each known-good record (a ConfigMap or Secret named
//! `NAME.confgate-known-good`), which is what a pod may start on, not a config to judge.

use base64::Engine as _;

use super::error::Error;
use super::known_good::Record;
use crate::configmap::{self, Keys};
use crate::known_good::RECORD_SUFFIX;
use crate::snapshot::Observed;

/// One ConfigMap or directory to judge.
pub(super) struct Input {
    /// `namespace/name (place)`, or the path of a directory.
    pub(super) what: String,
    /// `namespace/name`, or the path of a directory.
    pub(super) id: String,
    /// The ConfigMap's namespace and name, for matching it to the workloads that read it.
    pub(super) object: Option<(Option<String>, String)>,
    /// Where it was found: `path document N`.
    pub(super) place: String,
    pub(super) observed: Observed,
}

/// What a stream holds for `check`: the configs to judge and the known-good records.
#[derive(Default)]
pub(super) struct Found {
    pub(super) inputs: Vec<Input>,
    pub(super) records: Vec<Record>,
}

/// Every ConfigMap in a (multi-document) YAML or JSON text, as the kubelet would project it.
///
/// JSON is read as a stream of values (`kubectl get -o json`, or one object per line as `jq -c` writes);
/// YAML as `---`-separated documents. A top-level `kind: List` or sequence contributes each item.
pub fn manifests(path: &str, text: &str) -> Result<Vec<(String, Observed)>, Error> {
    let docs = documents(path, text)?;
    Ok(configmaps(path, &docs)
        .inputs
        .into_iter()
        .map(|i| (i.what, i.observed))
        .collect())
}

/// The documents of a YAML or JSON stream.
pub(super) fn documents(path: &str, text: &str) -> Result<Vec<serde_json::Value>, Error> {
    match json_documents(path, text) {
        Some(Ok(docs)) => Ok(docs),
        Some(Err(json_err)) => yaml_documents(path, text).map_err(|_| json_err),
        None => yaml_documents(path, text),
    }
}

pub(super) fn configmaps(path: &str, docs: &[serde_json::Value]) -> Found {
    let mut out = Found::default();
    for (i, doc) in docs.iter().enumerate() {
        collect(doc, &Origin { path, doc: i + 1 }, None, &mut out);
    }
    out
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
            Ok(_) if docs.len() == crate::manifest::MAX_DOCUMENTS => {
                return Some(Err(Error::TooManyDocuments {
                    path: path.to_owned(),
                }));
            }
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
    serde_saphyr::from_multiple_with_options(text, crate::manifest::yaml_options(text.len()))
        .map_err(|e| {
            if crate::manifest::too_many_documents(&e) {
                return Error::TooManyDocuments {
                    path: path.to_owned(),
                };
            }
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

fn collect(v: &serde_json::Value, origin: &Origin<'_>, item: Option<usize>, out: &mut Found) {
    let kind = v.get("kind").and_then(|k| k.as_str());
    let name = v
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str());
    // A record is judged only as what a pod may start on, never as a config of its own.
    if let (Some(kind @ ("ConfigMap" | "Secret")), Some(name)) = (kind, name)
        && let Some(source) = name.strip_suffix(RECORD_SUFFIX)
    {
        return out.records.push(Record::read(
            v,
            kind == "Secret",
            source,
            &place(origin, item),
        ));
    }
    let items = match kind {
        Some("ConfigMap") => return out.inputs.push(configmap(v, origin, item)),
        Some("List") | Some("ConfigMapList") => v.get("items").and_then(|i| i.as_array()),
        _ => v.as_array(),
    };
    for (n, it) in items.into_iter().flatten().enumerate() {
        collect(it, origin, Some(n + 1), out);
    }
}

fn configmap(v: &serde_json::Value, origin: &Origin<'_>, item: Option<usize>) -> Input {
    let meta = v.get("metadata");
    let field = |k: &str| meta.and_then(|m| m.get(k)).and_then(|x| x.as_str());
    let name = field("name").unwrap_or("<unnamed>");
    let place = place(origin, item);
    let namespace = field("namespace").map(str::to_owned);
    let id = match &namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    };
    Input {
        what: format!("{id} ({place})"),
        id,
        object: field("name").map(|n| (namespace, n.to_owned())),
        place,
        observed: configmap::observe(files(v)),
    }
}

/// `path document N`, and `item M` within a list.
fn place(origin: &Origin<'_>, item: Option<usize>) -> String {
    match item {
        Some(n) => format!("{} document {} item {n}", origin.path, origin.doc),
        None => format!("{} document {}", origin.path, origin.doc),
    }
}

/// Why a manifest's ConfigMap gives no keys. Names sections and keys, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FilesError {
    #[error("{0} is not a mapping")]
    NotMapping(&'static str),
    #[error("{section}.{key} is not a string (quote numbers and booleans)")]
    NotString { section: &'static str, key: String },
    #[error("binaryData.{key} is not valid base64 ({why})")]
    Base64 {
        key: String,
        why: base64::DecodeError,
    },
    #[error(transparent)]
    Key(#[from] configmap::KeyError),
}

fn files(v: &serde_json::Value) -> Result<Keys, FilesError> {
    let mut files = Keys::default();
    for (section, binary) in [("data", false), ("binaryData", true)] {
        let Some(map) = v.get(section) else { continue };
        if map.is_null() {
            continue;
        }
        let map = map.as_object().ok_or(FilesError::NotMapping(section))?;
        for (k, val) in map {
            let key = k.as_str();
            let text = val.as_str().ok_or_else(|| FilesError::NotString {
                section,
                key: key.to_owned(),
            })?;
            let bytes = if binary {
                base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|why| FilesError::Base64 {
                        key: key.to_owned(),
                        why,
                    })?
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
                Observed::Broken(why) => why.to_string(),
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
