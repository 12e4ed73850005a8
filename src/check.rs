//! `confgate check`: offline verdicts for ConfigMap directories and manifests, with the same hash the
//! running sidecar reports, for CI pipelines ("will the deployed component accept this ConfigMap?"). A
//! ConfigMap read by a workload in the same stream is judged with that workload's annotations, as its
//! sidecar would judge it (`workloads`).
//!
//! All paths are one stream: a ConfigMap an annotated workload reads is judged once per such
//! workload, with `Settings::with_annotations` over the flag settings. A ConfigMap mid-rollout is
//! taken apart as the sidecar takes it (`rollout::choose`), one line per track. The `Report`
//! carries warnings for `main` to print.

use std::path::Path;

use base64::Engine as _;

use crate::configmap::{self, Keys};
use crate::rollout;
use crate::settings::Settings;
use crate::snapshot::{self, Observed};
use crate::variants;
use crate::verdict::{Judgement, Verdict};
use crate::workloads;

use crate::settings::{ApiVersion, SchemeVersion, Standing};
pub use crate::values::kube_release::Release;
use crate::values::kube_release::{self, NotServed};

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
    #[error(
        "{path}: more than {max} documents; check and inject read at most {max} documents per input \
         (split the stream into several inputs)",
        max = crate::manifest::MAX_DOCUMENTS
    )]
    TooManyDocuments { path: String },
    #[error(
        "{path}: no ConfigMap found (a manifest needs kind: ConfigMap, or kind: List of them, or a workload whose pods carry confgate.io/ annotations)"
    )]
    NoConfigMap { path: String },
    /// Without a range every verdict would be a rejection, so the check could never pass.
    #[error(
        "no accepted range to check against: pass --accepts or set CONFGATE_ACCEPTS (e.g. --accepts '>=2.4.0, <3.0.0')"
    )]
    NoRange,
    #[error("no ConfigMap named {name} in the input (--name)")]
    NoSuchName { name: String },
    /// The sidecar would not be ready with these annotations, so nothing could pass for it.
    #[error("{workload}: bad confgate.io/ annotations on its pods: {problems}")]
    Annotations { workload: String, problems: String },
    /// Passing on nothing judged would let a wrong input pass a pipeline.
    #[error(
        "nothing to judge: the input holds no ConfigMap or directory, and none of the ConfigMaps its workloads read ({missing}); add their manifests"
    )]
    NothingToJudge { missing: String },
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// `namespace/name (place)` for a manifest, the path for a directory.
    pub what: String,
    /// The ConfigMap's name, for `--name`; `None` for a directory.
    pub name: Option<String>,
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
        if !lines.iter().any(|l| l.name.as_ref() == Some(n)) {
            return Err(Error::NoSuchName { name: n.clone() });
        }
    }
    Ok(lines
        .into_iter()
        .filter(|l| l.name.as_ref().is_none_or(|m| names.contains(m)))
        .collect())
}

/// What `check` found: one line per judged input and settings, and what it should tell on standard
/// error without failing (subPath mounts, ConfigMaps a workload reads that are not in the input).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub lines: Vec<Line>,
    pub warnings: Vec<String>,
}

/// Checks every path; `-` reads a manifest from standard input.
pub fn check(paths: &[impl AsRef<Path>], settings: &Settings) -> Result<Report, Error> {
    check_ranges(paths, std::slice::from_ref(settings))
}

/// One ConfigMap or directory to judge.
struct Input {
    /// `namespace/name (place)`, or the path of a directory.
    what: String,
    /// `namespace/name`, or the path of a directory.
    id: String,
    /// The ConfigMap's namespace and name, for matching it to the workloads that read it.
    object: Option<(Option<String>, String)>,
    /// Where it was found: `path document N`.
    place: String,
    observed: Observed,
}

/// Checks every path under each of `ranges` (settings from flags and environment, differing in their
/// range), one line per input and range, so a CI job sees which variant each deployed range would run
/// and which range none serves.
///
/// All paths are one stream: a ConfigMap read by a workload with `confgate.io/` annotations (see
/// `workloads`) is judged once per such workload, with the settings its sidecar would have (its
/// annotations over `ranges`), instead of with `ranges` alone.
pub fn check_ranges(paths: &[impl AsRef<Path>], ranges: &[Settings]) -> Result<Report, Error> {
    let Some(first) = ranges.first() else {
        return Err(Error::NoRange);
    };
    let mut inputs = Vec::new();
    let mut found_workloads = Vec::new();
    for p in paths {
        let p = p.as_ref();
        // `-` is standard input, as for every Unix tool, even where a directory is named `-` (`./-`
        // reads that one).
        let stdin = p == Path::new("-");
        if !stdin && p.is_dir() {
            let what = p.display().to_string();
            // A directory that cannot be listed is unreadable input, as a file that cannot be read
            // is (exit 64), not a config judged invalid (exit 1).
            if let Err(source) = std::fs::read_dir(p) {
                return Err(Error::Read { path: what, source });
            }
            inputs.push(Input {
                place: what.clone(),
                id: what.clone(),
                what,
                object: None,
                observed: snapshot::read(p),
            });
            continue;
        }
        let name = p.display().to_string();
        let text = if stdin {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(p)
        }
        .map_err(|source| Error::Read {
            path: name.clone(),
            source,
        })?;
        let docs = documents(&name, &text)?;
        let found = configmaps(&name, &docs);
        let ws = workloads::collect(&docs);
        if found.is_empty() && ws.is_empty() {
            return Err(Error::NoConfigMap { path: name });
        }
        inputs.extend(found);
        found_workloads.extend(ws);
    }
    let mut report = Report::default();
    // Each workload's settings under each range, once: an annotated range makes the flag ranges equal.
    let mut settings_of: Vec<Vec<Settings>> = Vec::new();
    for w in &found_workloads {
        let mut all: Vec<Settings> = Vec::new();
        for r in ranges {
            // A manifest's annotation is its author's, who writes the container spec too (`inject`
            // puts its checker there): judged as the sidecar it makes would judge it.
            let mut r = r.clone();
            if let Some(Ok(v)) = w
                .annotations
                .get(crate::verdict::fix::ANN_VALIDATE)
                .map(|v| v.parse())
            {
                r.validate = v;
            }
            let resolved = Settings::with_annotations(&r, &r, &w.annotations);
            if !resolved.problems.is_empty() {
                return Err(Error::Annotations {
                    workload: w.id.clone(),
                    problems: resolved.problems.join("; "),
                });
            }
            if !all.contains(&resolved.settings) {
                all.push(resolved.settings);
            }
        }
        settings_of.push(all);
        report.warnings.extend(w.warnings.iter().cloned());
    }
    let mut unjudged = Vec::new();
    for input in &inputs {
        let readers: Vec<usize> = match &input.object {
            Some((ns, name)) => found_workloads
                .iter()
                .enumerate()
                .filter(|(_, w)| w.mounts.iter().any(|m| m.is(ns.as_deref(), name)))
                .map(|(i, _)| i)
                .collect(),
            None => Vec::new(),
        };
        if readers.is_empty() {
            if first.accepts.is_none() {
                unjudged.push(input.what.clone());
                continue;
            }
            for settings in ranges {
                let what = match settings.accepts_text() {
                    Some(range) if ranges.len() > 1 => format!("{} [{range}]", input.what),
                    _ => input.what.clone(),
                };
                report.lines.extend(lines(what, input, settings));
            }
            continue;
        }
        let id = &input.id;
        for i in readers {
            let all = &settings_of[i];
            for settings in all {
                let mut what = format!("{id} (for {}; {})", found_workloads[i].id, input.place);
                if all.len() > 1 || settings.variants.is_some() {
                    let range = settings.accepts_text().unwrap_or("no range");
                    what = format!("{what} [{range}]");
                }
                report.lines.extend(lines(what, input, settings));
            }
        }
    }
    let mut missing = Vec::new();
    for w in &found_workloads {
        for m in &w.mounts {
            let present = inputs.iter().any(|i| {
                i.object
                    .as_ref()
                    .is_some_and(|(ns, name)| m.is(ns.as_deref(), name))
            });
            if !present {
                missing.push(format!("{} for {}", m.id(), w.id));
                let via = match &m.volume {
                    Some(v) => format!("volume {v}"),
                    None => "its --source".to_owned(),
                };
                report.warnings.push(format!(
                    "{}: reads ConfigMap {} ({via}), which is not in the input; not judged (it may be \
                     managed elsewhere: add its manifest to check it)",
                    w.id,
                    m.id()
                ));
            }
        }
    }
    if report.lines.is_empty() {
        return Err(if unjudged.is_empty() {
            Error::NothingToJudge {
                missing: if missing.is_empty() {
                    "none".to_owned()
                } else {
                    missing.join(", ")
                },
            }
        } else {
            Error::NoRange
        });
    }
    for what in unjudged {
        report.warnings.push(format!(
            "{what}: not judged: no workload with confgate.io/ annotations reads it and no range was given \
             (--accepts or CONFGATE_ACCEPTS)"
        ));
    }
    Ok(report)
}

/// The lines as an upgrade to `release` would find them (`check --kubernetes-version`): an accepted
/// config whose group/version the table knows (`kube_release`) and `release` no longer (or not yet)
/// serves is flagged, `too-old` when the release removed it, `too-new` when only a later release serves
/// it, naming the component, the release and the version to move to. Every other line is as judged.
pub fn for_release(lines: Vec<Line>, release: Release) -> Vec<Line> {
    lines
        .into_iter()
        .map(|mut l| {
            if l.judgement.verdict != Verdict::Accepted {
                return l;
            }
            // Each file's API version, named by its key when the config has several.
            let files: Vec<(Option<&str>, &ApiVersion)> = match &l.judgement.parsed {
                Some(SchemeVersion::Api(v)) => vec![(None, v)],
                Some(SchemeVersion::Each(each)) => each
                    .iter()
                    .filter_map(|(k, v)| match v {
                        SchemeVersion::Api(a) => Some((Some(k.as_str()), a)),
                        _ => None,
                    })
                    .collect(),
                _ => return l,
            };
            let stops: Vec<(Option<&str>, Verdict, String)> = files
                .into_iter()
                .filter_map(|(key, v)| {
                    let why = kube_release::upgrade_stops(v, release)?;
                    let (verdict, reason) = not_served(v, &why);
                    Some((key, verdict, reason))
                })
                .collect();
            let Some((_, verdict, _)) = stops.first() else {
                return l;
            };
            l.judgement.verdict = *verdict;
            l.judgement.reason = stops
                .iter()
                .map(|(key, _, reason)| match key {
                    Some(k) => format!("{}: {reason}", crate::listing::name(k)),
                    None => reason.clone(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            l
        })
        .collect()
}

/// The verdict and reason of a config at `v` that `why.release` does not serve.
fn not_served(v: &ApiVersion, why: &NotServed) -> (Verdict, String) {
    let release = why.release;
    let verdict = match (why.removed_in, why.added_in) {
        (Some(_), _) => Verdict::TooOld,
        (None, Some(_)) => Verdict::TooNew,
        (None, None) => match why.served.standing(v) {
            Standing::Newer => Verdict::TooNew,
            Standing::Older => Verdict::TooOld,
            _ => Verdict::OutOfRange,
        },
    };
    let when = match (why.removed_in, why.added_in) {
        (Some(r), _) => format!("removed in {r}"),
        (None, Some(a)) => format!("served from {a} on"),
        (None, None) => "no release serves it".to_owned(),
    };
    let group = why.of_group(&v.group);
    let to = match group.first() {
        Some(newest) => format!(
            "{release} serves {}; update the config to {newest} before upgrading to {release}",
            group.join(", ")
        ),
        None => format!("{release} serves no version of group {}", v.group),
    };
    (
        verdict,
        format!(
            "version {v}{} is accepted now, but {} {release} does not serve it ({when}): {to}",
            match kube_release::kinds(v).as_slice() {
                [] => String::new(),
                kinds => format!(" ({})", kinds.join(", ")),
            },
            why.component
        ),
    )
}

/// Whether every line is accepted.
pub fn all_accepted(lines: &[Line]) -> bool {
    lines
        .iter()
        .all(|l| l.judgement.verdict == Verdict::Accepted)
}

/// The lines of one input under one workload's (or the flags') settings: one, or, for a ConfigMap
/// mid-rollout, one per track. The hash is that of the set a pod promotes (with variants, the chosen
/// variant's): what the sidecar reports as active.
///
/// A ConfigMap with `confgate.rollout` or a `.next` key is taken apart as the sidecar takes it
/// ([`rollout::choose`], [`rollout::split`]): the stable set is judged as every pod off the candidate
/// judges it (a rollout key that cannot be read makes it invalid); while some pods are on the
/// candidate, the candidate's set is judged too, on a line of its own, and a candidate that would be
/// held on those pods is a line that is not accepted: the rollout cannot go on with it.
fn lines(what: String, input: &Input, settings: &Settings) -> Vec<Line> {
    let name = input.object.as_ref().map(|(_, n)| n.clone());
    let line = |what: String, choice: variants::Choice| Line {
        what,
        name: name.clone(),
        sha256: choice.observed.hash().map(|h| h.to_string()),
        judgement: choice.judgement,
    };
    let plan = match &input.observed {
        Observed::Config(snap) => rollout::Plan::read(snap, settings.variants.as_ref()),
        _ => Ok(None),
    };
    let plan = match plan {
        Ok(None) => {
            return vec![line(
                what,
                variants::choose(input.observed.clone(), settings),
            )];
        }
        Ok(Some(plan)) => Some(plan),
        Err(_) => None,
    };
    let (stable, _) = rollout::choose(input.observed.clone(), settings, None, &[]);
    let mut out = vec![line(format!("{what} stable"), stable)];
    let (Some(plan), Observed::Config(snap)) = (plan, &input.observed) else {
        return out;
    };
    let Some(percent) = plan.percent.filter(|_| plan.live()) else {
        return out;
    };
    let mut candidate = variants::choose(
        Observed::Config(rollout::split(snap.clone()).candidate()),
        settings,
    );
    let j = &mut candidate.judgement;
    j.reason = if j.verdict == Verdict::Accepted {
        format!("promoted on the candidate pods ({percent}): {}", j.reason)
    } else if settings.mode == crate::settings::Mode::Observe {
        // Observe mode holds nothing back; the verdict still fails the check, as for a stable set.
        format!(
            "promoted on the candidate pods ({percent}) in observe mode, although {}",
            j.reason
        )
    } else {
        format!(
            "would be held on the candidate pods ({percent}), which keep stable: {}",
            j.reason
        )
    };
    out.push(line(format!("{what} candidate {percent}"), candidate));
    out
}

/// Every ConfigMap in a (multi-document) YAML or JSON text, as the kubelet would project it.
///
/// JSON is read as a stream of values (`kubectl get -o json`, or one object per line as `jq -c` writes);
/// YAML as `---`-separated documents. A top-level `kind: List` or sequence contributes each item.
pub fn manifests(path: &str, text: &str) -> Result<Vec<(String, Observed)>, Error> {
    let docs = documents(path, text)?;
    Ok(configmaps(path, &docs)
        .into_iter()
        .map(|i| (i.what, i.observed))
        .collect())
}

/// The documents of a YAML or JSON stream.
fn documents(path: &str, text: &str) -> Result<Vec<serde_json::Value>, Error> {
    match json_documents(path, text) {
        Some(Ok(docs)) => Ok(docs),
        Some(Err(json_err)) => yaml_documents(path, text).map_err(|_| json_err),
        None => yaml_documents(path, text),
    }
}

fn configmaps(path: &str, docs: &[serde_json::Value]) -> Vec<Input> {
    let mut out = Vec::new();
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

fn collect(v: &serde_json::Value, origin: &Origin<'_>, item: Option<usize>, out: &mut Vec<Input>) {
    let items = match v.get("kind").and_then(|k| k.as_str()) {
        Some("ConfigMap") => return out.push(configmap(v, origin, item)),
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
    let place = match item {
        Some(n) => format!("{} document {} item {n}", origin.path, origin.doc),
        None => format!("{} document {}", origin.path, origin.doc),
    };
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
