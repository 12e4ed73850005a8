//! The reference tables in `docs/` that the code defines stay in step with it: the endpoints with the
//! routes the server answers, the `/status` fields with what it serialises, the metrics with what
//! `/metrics` renders; and every link between the README and `docs/` names a file and a heading that
//! exist.

use std::collections::{BTreeMap, BTreeSet};

use confgate::rollout::Percent;
use confgate::state::{ActiveView, AppliedView, RolloutView, Shared, Status, Track};
use confgate::verdict::Verdict;

use crate::common;
use common::{documents, read};

/// The rows of the table between `<!-- NAME: …-->` and `<!-- end of NAME -->` in `doc`, each row's cells
/// trimmed, without the header and the separator.
fn table(doc: &str, name: &str) -> Vec<Vec<String>> {
    let text = read(doc);
    let begin = format!("<!-- {name}:");
    let start = text
        .find(&begin)
        .unwrap_or_else(|| panic!("{doc} marks where its {name} table begins ({begin} …)"));
    let end = format!("<!-- end of {name} -->");
    let len = text[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("{doc} marks where its {name} table ends ({end})"));
    text[start..start + len]
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The text inside the first pair of backticks of a cell.
fn code(cell: &str) -> &str {
    cell.split('`').nth(1).unwrap_or(cell)
}

#[test]
fn the_endpoint_table_lists_exactly_the_routes_the_server_answers() {
    let server = read("src/server.rs");
    // Each route is a match arm on the path: `"/readyz" => {`.
    let routes: BTreeSet<String> = server
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("\"/")?.split_once("\" =>"))
        .map(|(path, _)| format!("/{path}"))
        .collect();
    assert!(
        routes.len() >= 5,
        "found the routes of src/server.rs: {routes:?}"
    );
    let documented: BTreeSet<String> = table("docs/endpoints.md", "endpoints")
        .iter()
        .map(|row| {
            let cell = code(&row[0]);
            let path = cell.strip_prefix("GET ").unwrap_or_else(|| {
                panic!("docs/endpoints.md: endpoint `{cell}` is not written `GET /path`")
            });
            path.to_owned()
        })
        .collect();
    assert_eq!(
        documented, routes,
        "docs/endpoints.md's endpoint table (left) and the routes of src/server.rs (right) differ"
    );
    // The 404 answer lists them too, in the order of the match.
    let in_order: Vec<String> = server
        .lines()
        .filter_map(|l| l.trim().strip_prefix("\"/")?.split_once("\" =>"))
        .map(|(p, _)| format!("/{p}"))
        .collect();
    let answer = format!("endpoints: {}", in_order.join(" "));
    assert!(
        server.contains(&answer),
        "the 404 answer of src/server.rs lists every route: {answer}"
    );
}

#[test]
fn the_status_field_table_lists_exactly_what_status_serialises() {
    let value = serde_json::to_value(Status::default()).unwrap();
    let mut fields: BTreeSet<String> = value.as_object().unwrap().keys().cloned().collect();
    // Added by the server in API mode (`SourceView::to_json`), not serialised with the rest.
    fields.insert("source".into());
    let documented: BTreeSet<String> = table("docs/endpoints.md", "status fields")
        .iter()
        .map(|row| code(&row[0]).to_owned())
        .collect();
    assert_eq!(
        documented, fields,
        "docs/endpoints.md's /status table (left) and the fields of state::Status (right) differ"
    );
}

/// Every metric `/metrics` can show: name -> (type, label names).
fn rendered_metrics() -> BTreeMap<String, (String, BTreeSet<String>)> {
    // Every optional series present: an active config from a variant, an applied one, a finished reload.
    let mut status = Status {
        ready: true,
        stale: true,
        started: true,
        active: Some(ActiveView {
            version: Some("2.4.1".into()),
            sha256: confgate::snapshot::PrintedHash::Sha256([0; 32]),
            since: "2026-01-01T00:00:00Z".parse().unwrap(),
            verdict: Verdict::Accepted,
            variant: Some("config.v2.yaml".into()),
        }),
        applied: Some(AppliedView {
            version: Some("2.4.1".into()),
            sha256: confgate::snapshot::PrintedHash::Sha256([0; 32]),
            since: "2026-01-01T00:00:00Z".parse().unwrap(),
        }),
        ..Status::default()
    };
    status.reload.last_reload_successful = Some(true);
    // Mid-rollout, on the candidate.
    status.rollout = Some(RolloutView {
        percent: Percent::parse("25%").ok(),
        bucket: None,
        assigned: Track::Candidate,
        track: Track::Candidate,
        keys: "config.yaml".into(),
        held: None,
        reason: "bucket 3.1% is below 25%: on the candidate".into(),
    });
    let text = Shared::new().metrics.render(&status);
    let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.insert(name.into(), (kind.into(), BTreeSet::new()));
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let series = line.split(' ').next().unwrap();
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let base = out
            .keys()
            .find(|m| {
                name == m.as_str()
                    || ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name.strip_suffix(s) == Some(m.as_str()))
            })
            .unwrap_or_else(|| panic!("sample {name} has no # TYPE line"))
            .clone();
        for label in labels.trim_end_matches('}').split(',') {
            if let Some((key, _)) = label.split_once('=')
                && key != "le"
            {
                out.get_mut(&base).unwrap().1.insert(key.to_owned());
            }
        }
    }
    out
}

#[test]
fn the_metric_table_lists_exactly_the_metrics_rendered_with_their_types_and_labels() {
    let rendered = rendered_metrics();
    assert!(rendered.len() >= 10, "rendered: {rendered:?}");
    let mut documented = BTreeMap::new();
    for row in table("docs/endpoints.md", "metrics") {
        let cell = code(&row[0]);
        let (name, labels) = cell.split_once('{').unwrap_or((cell, ""));
        let labels: BTreeSet<String> = labels
            .trim_end_matches('}')
            .split(',')
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        let previous = documented.insert(name.to_owned(), (row[1].clone(), labels));
        assert!(previous.is_none(), "docs/endpoints.md lists {name} twice");
    }
    assert_eq!(
        documented, rendered,
        "docs/endpoints.md's metric table (left) and what src/metrics.rs renders (right) differ"
    );
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation other than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#').replace('`', "").as_str()));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside code.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans can hold `](`; drop them first.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    out
}

#[test]
fn every_link_between_the_documents_names_a_file_and_a_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            checked += 1;
            if !path.exists() {
                broken.push(format!("{}: {target}: no such file", doc.display()));
                continue;
            }
            if !anchor.is_empty() {
                let there = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&there).contains(anchor) {
                    broken.push(format!("{}: {target}: no such heading", doc.display()));
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
