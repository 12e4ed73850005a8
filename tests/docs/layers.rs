//! The module graph of `src/`, read from its `crate::` paths, has no import cycle, and every module
//! imports only modules on its own floor or below (ARCHITECTURE.md, "No import cycle").
//!
//! Granularity: top-level modules; a directory module's files (`api/`, `gate/`, `policy/`,
//! `settings/`, `values/`) count as their parent. Paths in comments and string literals are not
//! imports; `#[cfg(test)]` code is, since a test's import couples the modules too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, bottom to top, as ARCHITECTURE.md lists them.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "values and formats",
        &[
            "values",
            "backoff",
            "failure",
            "snapshot",
            "annotations",
            "configmap",
            "extract",
            "manifest",
            "listing",
            "rules",
        ],
    ),
    ("settings and status", &["settings", "metrics", "state"]),
    (
        "the pure core",
        &["verdict", "variants", "rollout", "workloads"],
    ),
    (
        "I/O at the edges",
        &[
            "http", "source", "promote", "confirm", "reload", "server", "validate",
        ],
    ),
    (
        "the loop and the commands",
        &["gate", "check", "policy", "inject", "api"],
    ),
    ("the command line", &["cli", "app"]),
];

/// Where an import was first seen: file and line.
type At = String;
/// Module -> imported module -> where.
type Graph = BTreeMap<String, BTreeMap<String, At>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules `lib.rs` declares.
fn declared(lib: &str) -> BTreeSet<String> {
    code_of(lib)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_suffix(';')?;
            let name = rest.rsplit_once("mod ")?.1;
            let vis = rest.strip_suffix(name)?.trim_end().strip_suffix("mod")?;
            (vis.trim().is_empty() || vis.trim().starts_with("pub")).then(|| name.trim().to_owned())
        })
        .collect()
}

/// The source with comments and the contents of string and char literals blanked (lines kept), so
/// only code is searched.
fn code_of(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
        let ident_before = i > 0 && is_ident(c[i - 1]);
        // `b'x'`, `b"x"` and `br"x"` are literals too.
        let literal_prefix = ident_before && c[i - 1] == 'b' && (i < 2 || !is_ident(c[i - 2]));
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (!ident_before || literal_prefix)
            && matches!(c.get(i + 1), Some('"' | '#'))
            && c[i + 1..].iter().find(|ch| **ch != '#') == Some(&'"')
        {
            // A raw string: r"..." or r#"..."#.
            let hashes = c[i + 1..].iter().take_while(|ch| **ch == '#').count();
            i += 2 + hashes;
            out.push('"');
            while i < c.len() {
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|ch| **ch == '#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('"');
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && (!ident_before || literal_prefix) {
            // A char literal ('x', '\n', '\u{..}'); otherwise a lifetime or label, kept.
            let end = if c.get(i + 1) == Some(&'\\') {
                // The escaped character itself may be a quote: `'\''`.
                c.get(i + 3..)
                    .and_then(|rest| rest.iter().position(|ch| *ch == '\''))
                    .map(|p| i + 3 + p)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The first segment of every `crate::` path in `code`, with its 1-based line; a group
/// (`crate::{a, b::c}`) gives each of its members.
fn crate_paths(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (n, _) in code.match_indices("crate::") {
        let before = code[..n].chars().next_back();
        if before.is_some_and(|b| b.is_alphanumeric() || b == '_') {
            continue;
        }
        let line = code[..n].matches('\n').count() + 1;
        let rest = code[n + "crate::".len()..].trim_start();
        let ident = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut start) = (0usize, 0usize);
            for (k, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.push((ident(group[start..k].trim_start()), line));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push((ident(group[start..k].trim_start()), line));
                        start = k + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.push((ident(rest), line));
        }
    }
    found.retain(|(m, _)| !m.is_empty());
    found
}

/// The top-level module a file of `src/` belongs to; `None` for the crate root and the binary.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

fn graph() -> (Graph, BTreeSet<String>) {
    let root = src();
    let modules = declared(&std::fs::read_to_string(root.join("lib.rs")).unwrap());
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut g = Graph::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap();
        let Some(module) = module_of(rel) else {
            continue;
        };
        assert!(
            modules.contains(&module),
            "src/{} belongs to no module lib.rs declares",
            rel.display()
        );
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let imports = g.entry(module.clone()).or_default();
        for (target, line) in crate_paths(&code) {
            if target != module && modules.contains(&target) {
                imports
                    .entry(target)
                    .or_insert_with(|| format!("src/{}:{line}", rel.display()));
            }
        }
    }
    (g, modules)
}

/// A cycle, as the modules along it (the first repeated at the end), if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        m: &str,
        g: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(m) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|p| p == m).unwrap();
                let mut cycle = path[start..].to_vec();
                cycle.push(m.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(m.to_owned(), Mark::Open);
        path.push(m.to_owned());
        for next in g.get(m).into_iter().flat_map(BTreeMap::keys) {
            if let Some(c) = visit(next, g, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(m.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for m in g.keys() {
        if let Some(c) = visit(m, g, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

fn show(g: &Graph) -> String {
    g.iter()
        .map(|(m, to)| {
            let to: Vec<&str> = to.keys().map(String::as_str).collect();
            format!("{m} -> {}\n", to.join(" "))
        })
        .collect()
}

#[test]
fn no_import_cycle() {
    let (g, _) = graph();
    assert!(
        g.get("app").is_some_and(|to| to.contains_key("cli")),
        "the scan found no import of cli by app; is it reading src/?\n{}",
        show(&g)
    );
    if let Some(cycle) = find_cycle(&g) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("{} -> {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
            .collect();
        panic!(
            "import cycle:\n  {}\nthe module graph:\n{}",
            steps.join("\n  "),
            show(&g)
        );
    }
}

#[test]
fn each_module_imports_only_its_floor_or_below() {
    let (g, modules) = graph();
    let floor_of: BTreeMap<&str, usize> = FLOORS
        .iter()
        .enumerate()
        .flat_map(|(n, (_, ms))| ms.iter().map(move |m| (*m, n)))
        .collect();
    let placed: BTreeSet<String> = floor_of.keys().map(|m| (*m).to_owned()).collect();
    assert_eq!(
        placed, modules,
        "every module lib.rs declares is on exactly one floor (FLOORS here and ARCHITECTURE.md)"
    );
    let mut upward = Vec::new();
    for (m, to) in &g {
        for (t, at) in to {
            let (from, into) = (floor_of[m.as_str()], floor_of[t.as_str()]);
            if into > from {
                upward.push(format!(
                    "{m} ({}) imports {t} ({}) at {at}",
                    FLOORS[from].0, FLOORS[into].0
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports upward:\n  {}",
        upward.join("\n  ")
    );
}

#[test]
fn the_scan_reads_code_only() {
    let code = code_of(
        "use crate::{a, b::{c, d}, e as f};\n// crate::x\n/* crate::y /* crate::z */ */\n\
         let s = \"crate::w\"; let r = br#\"crate::v\"#; let c = '\"'; let b = b'\"'; let q = '\\''; fn l<'a>() {}\n\
         crate::g::h(); pub(crate) fn i() {} mycrate::j; $crate::k\n",
    );
    let names: Vec<String> = crate_paths(&code).into_iter().map(|(m, _)| m).collect();
    assert_eq!(names, ["a", "b", "e", "g", "k"]);
    assert_eq!(code.lines().count(), 5, "lines are kept for the locations");
    let lib =
        "pub mod a;\n#[cfg(feature = \"x\")]\npub mod b;\npub(crate) mod c;\nmod d;\nmod e {}\n";
    assert_eq!(declared(lib), ["a", "b", "c", "d"].map(String::from).into());
}

/// What the pipeline may hold: the I/O it carries the gate's actions out with, never what the loop
/// knows or decides (ARCHITECTURE.md, "Adding to the loop's state": that lives in `Gate`). A new
/// field is either one more handle of this kind, added here with its reason, or decision state that
/// belongs in `src/gate/machine/`.
const PIPELINE_HOLDS: &[(&str, &str)] = &[
    ("cfg", "the paths and identity it was opened with"),
    ("feed", "the inputs other than file events"),
    ("gate", "the pure decision state itself"),
    ("promoter", "the promoted dir's writer"),
    (
        "found",
        "what the promoted dir held when opened, until the Adopt action reads it",
    ),
    ("shared", "the status receivers, metrics and liveness ping"),
    ("publisher", "the status's one writer"),
    ("reloads", "the reload worker's handle"),
    ("switched", "a switch's token, until FinishSwitch"),
    (
        "dirty",
        "whether the gate was handed anything since the last publish",
    ),
    ("built", "a count of statuses built, for the tests"),
];

/// The fields of `struct NAME { .. }` in `code` (comments and attributes skipped).
fn fields(code: &str, name: &str) -> Vec<String> {
    let start = code
        .find(&format!("struct {name} {{"))
        .unwrap_or_else(|| panic!("no struct {name}"));
    let body = &code[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            Some(l.split_once(':')?.0.trim().to_owned())
        })
        .collect()
}

#[test]
fn the_pipeline_holds_no_decision_state() {
    let text = std::fs::read_to_string(src().join("gate/pipeline/mod.rs")).unwrap();
    let held = fields(&code_of(&text), "Pipeline");
    assert!(
        held.contains(&"gate".to_owned()),
        "read no fields: {held:?}"
    );
    let known: BTreeSet<&str> = PIPELINE_HOLDS.iter().map(|(f, _)| *f).collect();
    let new: Vec<&String> = held
        .iter()
        .filter(|f| !known.contains(f.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "Pipeline holds {new:?}: what the loop knows or decides lives in Gate (src/gate/machine/), \
         which asks for what it needs in an Action and hears back in an Event; an I/O handle is \
         listed in PIPELINE_HOLDS with its reason"
    );
}

/// No test runs cargo: what a test needs built (the example component) is a target cargo builds before
/// it runs the tests, so a test never waits on, or races, a nested build in the same target dir.
#[test]
fn no_test_runs_cargo() {
    let needles = [
        concat!("Command::new(", "\"cargo\")"),
        concat!("env!(", "\"CARGO\")"),
        concat!("var_os(", "\"CARGO\")"),
        concat!("var(", "\"CARGO\")"),
    ];
    let mut found = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests"
    ))];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for needle in needles {
                    if text.contains(needle) {
                        found.push(format!("{}: {needle}", path.display()));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "tests run cargo: {found:?}");
}
