//! The layer checks the compiler cannot make. The decision core is its own crate (crates/core), so
//! the compiler already keeps it from importing the edges; what is left to check here is:
//!
//! - the core's dependencies (its `[dependencies]` and everything they pull in, as Cargo.lock
//!   resolves them) hold no I/O crate, and its code reaches no file, socket, process, environment
//!   or clock through `std` (its tests aside);
//! - within each crate, every module imports only modules on its own floor or below, and no two
//!   modules import each other (ARCHITECTURE.md, "No import cycle"): the module graph is read from
//!   `crate::` paths, a directory module's files counting as their parent, with comments and string
//!   literals blanked and `#[cfg(test)]` code included (a test's import couples the modules too);
//! - the pipeline holds no decision state, and no test runs cargo.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's floors, bottom to top, as ARCHITECTURE.md lists them.
type Floors = &'static [(&'static str, &'static [&'static str])];

/// The edges' floors (the `confgate` crate, `src/`). The core's modules it re-exports are below them
/// all, which the compiler keeps: the core cannot name this crate.
const FLOORS: Floors = &[
    (
        "values and formats",
        &["snapshot", "annotations", "manifest"],
    ),
    ("settings and status", &["metrics", "state"]),
    ("the pure core", &["workloads"]),
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

/// The core's floors (the `confgate-core` crate, `crates/core/src/`).
const CORE_FLOORS: Floors = &[
    (
        "values and formats",
        &[
            "values",
            "failure",
            "snapshot",
            "annotations",
            "configmap",
            "extract",
            "listing",
            "rules",
            "backoff",
            "reload",
            "promote",
            "validate",
        ],
    ),
    ("settings", &["settings"]),
    (
        "the judgement",
        &["verdict", "variants", "rollout", "known_good"],
    ),
    ("the status", &["state"]),
    ("the decision", &["gate"]),
];

/// Crates that do I/O (system calls, an async runtime, sockets, HTTP, the Kubernetes API, file
/// watches, TLS): none may be among the core's dependencies. `nix` and `http` too, though the core
/// would use only values of theirs (a signal, an errno, a URI): it has its own (`values::Signal`,
/// `reload::OsError`, `values::Url`), and the edges make the OS's and the client's from them.
const IO_CRATES: &[&str] = &[
    "nix",
    "http",
    "tokio",
    "mio",
    "socket2",
    "hyper",
    "hyper-util",
    "hyper-rustls",
    "h2",
    "reqwest",
    "tower",
    "tower-service",
    "kube",
    "kube-client",
    "kube-core",
    "kube-runtime",
    "k8s-openapi",
    "inotify",
    "notify",
    "rustls",
    "tempfile",
    "tracing-subscriber",
];

/// What in `std` (or a time crate) reaches the world outside the process's memory: the core's code
/// names none. An instant is a value the core is handed (time passed in); reading the clock is not.
const STD_IO: &[&str] = &[
    "std::fs",
    "std::net::Tcp",
    "std::net::Udp",
    "std::process",
    "std::thread",
    "std::env",
    "std::os",
    "SystemTime",
    "Instant::now",
    ".elapsed()",
    "Timestamp::now",
];

/// Where an import was first seen: file and line.
type At = String;
/// Module -> imported module -> where.
type Graph = BTreeMap<String, BTreeMap<String, At>>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The edges' sources and the core's, each with its floors.
fn crates() -> [(PathBuf, Floors); 2] {
    [
        (root().join("src"), FLOORS),
        (root().join("crates/core/src"), CORE_FLOORS),
    ]
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

/// The top-level module a file belongs to; `None` for the crate root and the binary.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

/// The module graph of the crate whose sources are in `src`, and the modules its `lib.rs` declares.
fn graph(src: &Path) -> (Graph, BTreeSet<String>) {
    let modules = declared(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut g = Graph::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let Some(module) = module_of(rel) else {
            continue;
        };
        let shown = file.strip_prefix(root()).unwrap().display();
        assert!(
            modules.contains(&module),
            "{shown} belongs to no module lib.rs declares",
        );
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let imports = g.entry(module.clone()).or_default();
        for (target, line) in crate_paths(&code) {
            if target != module && modules.contains(&target) {
                imports
                    .entry(target)
                    .or_insert_with(|| format!("{shown}:{line}"));
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
    for (src, _) in crates() {
        let (g, _) = graph(&src);
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
}

#[test]
fn each_module_imports_only_its_floor_or_below() {
    let (edges, _) = graph(&root().join("src"));
    assert!(
        edges.get("app").is_some_and(|to| to.contains_key("cli")),
        "the scan found no import of cli by app; is it reading src/?\n{}",
        show(&edges)
    );
    let (core, _) = graph(&root().join("crates/core/src"));
    assert!(
        core.get("verdict")
            .is_some_and(|to| to.contains_key("settings")),
        "the scan found no import of settings by verdict; is it reading crates/core/src/?\n{}",
        show(&core)
    );
    for (src, floors) in crates() {
        let (g, modules) = graph(&src);
        let floor_of: BTreeMap<&str, usize> = floors
            .iter()
            .enumerate()
            .flat_map(|(n, (_, ms))| ms.iter().map(move |m| (*m, n)))
            .collect();
        let placed: BTreeSet<String> = floor_of.keys().map(|m| (*m).to_owned()).collect();
        assert_eq!(
            placed,
            modules,
            "every module {}/lib.rs declares is on exactly one floor (the floors here and \
             ARCHITECTURE.md)",
            src.display()
        );
        let mut upward = Vec::new();
        for (m, to) in &g {
            for (t, at) in to {
                let (from, into) = (floor_of[m.as_str()], floor_of[t.as_str()]);
                if into > from {
                    upward.push(format!(
                        "{m} ({}) imports {t} ({}) at {at}",
                        floors[from].0, floors[into].0
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
}

/// The names of the packages a `[dependencies]` table of `manifest` lists (its plain form only:
/// a target-specific or build dependency table is refused, so none slips past).
fn normal_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut table = String::new();
    for line in manifest.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').to_owned();
            assert!(
                table == "dependencies"
                    || !table.contains("dependencies")
                    || table == "dev-dependencies",
                "crates/core/Cargo.toml has a [{table}] table: the core's dependencies are its \
                 [dependencies], which this test reads",
            );
            continue;
        }
        if table == "dependencies"
            && let Some((name, _)) = line.split_once('=')
            && !line.starts_with('#')
        {
            names.insert(name.trim().to_owned());
        }
    }
    names
}

/// Each package in `lock` (Cargo.lock) with the names of the packages it depends on.
fn locked(lock: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let name = package
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_owned();
        let listed = package
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split_once(']').unwrap().0)
            .unwrap_or("");
        let names = listed
            .split(',')
            .map(|d| d.trim().trim_matches('"'))
            .filter(|d| !d.is_empty())
            // `"name version"` where two versions are locked.
            .map(|d| d.split(' ').next().unwrap().to_owned());
        deps.entry(name).or_default().extend(names);
    }
    deps
}

/// Every package `from` reaches in `deps`, `from` included.
fn closure<'a>(
    deps: &'a BTreeMap<String, BTreeSet<String>>,
    from: &[&'a str],
) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = from.to_vec();
    while let Some(p) = todo.pop() {
        if seen.insert(p) {
            todo.extend(deps.get(p).into_iter().flatten().map(String::as_str));
        }
    }
    seen
}

#[test]
fn the_core_crate_depends_on_no_io_crate() {
    let manifest = std::fs::read_to_string(root().join("crates/core/Cargo.toml")).unwrap();
    let direct = normal_dependencies(&manifest);
    assert!(
        direct.contains("semver"),
        "read no dependencies: {direct:?}"
    );
    let lock = locked(&std::fs::read_to_string(root().join("Cargo.lock")).unwrap());
    let direct: Vec<&str> = direct.iter().map(String::as_str).collect();
    let core = closure(&lock, &direct);
    let io: Vec<&&str> = IO_CRATES.iter().filter(|c| core.contains(**c)).collect();
    assert!(
        io.is_empty(),
        "the core crate (crates/core) depends on {io:?}, which do I/O: the core decides on what \
         the edges (the confgate crate) read and hand it; move the I/O there"
    );
    // The same walk from the edges finds what it must: the check can see an I/O crate.
    let edges = closure(&lock, &["confgate"]);
    assert!(
        ["tokio", "hyper", "kube", "inotify", "nix", "http"]
            .iter()
            .all(|c| edges.contains(c)),
        "the walk from confgate found {edges:?}"
    );
}

/// `code` without its `#[cfg(test)]` modules (`#[cfg(test)] mod tests { .. }`).
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_owned();
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = at + "#[cfg(test)]".len();
        let rest = out[after..].trim_start();
        let end = if rest.starts_with("mod ") && rest.split(';').next().unwrap().contains('{') {
            let open = after + out[after..].find('{').unwrap();
            let mut depth = 0;
            out[open..]
                .char_indices()
                .find_map(|(k, ch)| {
                    match ch {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    (depth == 0).then_some(open + k + 1)
                })
                .unwrap()
        } else {
            after
        };
        out.replace_range(at..end, "");
    }
    out
}

#[test]
fn the_core_reaches_nothing_outside_memory_through_std() {
    let src = root().join("crates/core/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root()).unwrap().display().to_string();
        // A module's tests may time what they run; a `tests.rs`, or a file under `tests/`, is one's
        // tests.
        if rel.ends_with("/tests.rs") || rel.contains("/tests/") {
            continue;
        }
        let code = without_test_modules(&code_of(&std::fs::read_to_string(&file).unwrap()));
        for needle in STD_IO {
            if code.contains(needle) {
                found.push(format!("{rel}: {needle}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the core names what reaches outside the process's memory: {found:?}; the edges read, \
         and the core is handed what they read (time included, as the gate's `Now`)"
    );
    let code = without_test_modules(
        "fn a() { std::fs::read(x) }\n#[cfg(test)]\nmod tests { fn b() { Instant::now() } }\n",
    );
    assert!(
        code.contains("std::fs") && !code.contains("Instant"),
        "{code}"
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
/// belongs in the core's `crates/core/src/gate/`.
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
    ("known_good", "the known-good edge's link"),
    (
        "writing",
        "whether the driver's watch sees a file of the watched dir open for writing",
    ),
    (
        "settling",
        "when a read put off until a plain dir's newest change (its files' ctime) is a quiet period old may be made",
    ),
    (
        "check",
        "the running checker's task and cancel handle, until it answers or CancelCheck",
    ),
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
    let text = std::fs::read_to_string(root().join("src/gate/pipeline/mod.rs")).unwrap();
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
        "Pipeline holds {new:?}: what the loop knows or decides lives in Gate (crates/core/src/gate/), \
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

/// The code map in ARCHITECTURE.md names every module once with its floor in brackets (`[3]`), under
/// a heading line per crate (`` `crates/core/src/`: `` and `` `src/`: ``): the floors this file holds.
#[test]
fn the_code_map_gives_each_module_its_floor() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    for (heading, floors) in [("`crates/core/src/`:", CORE_FLOORS), ("`src/`:", FLOORS)] {
        let listed = code_map(&map, heading);
        let want: BTreeMap<String, usize> = floors
            .iter()
            .enumerate()
            .flat_map(|(n, (_, ms))| ms.iter().map(move |m| ((*m).to_owned(), n + 1)))
            .collect();
        assert_eq!(
            listed, want,
            "ARCHITECTURE.md's code map under {heading} each module with its floor, as the floors here"
        );
    }
}

/// The modules a code-map section lists, each with the floor in its line's brackets; unindented
/// items only (nested items name a module's parts), and items with no bracket (`main.rs`) left out.
fn code_map(map: &str, heading: &str) -> BTreeMap<String, usize> {
    let mut lines = map.lines().skip_while(|l| l.trim() != heading).skip(1);
    let mut out = BTreeMap::new();
    let mut item = String::new();
    let flush = |item: &str, out: &mut BTreeMap<String, usize>| {
        let Some(open) = item.find(" [") else { return };
        let Some(close) = item[open..].find("]:") else {
            return;
        };
        let floor: usize = item[open + 2..open + close].parse().unwrap_or_else(|_| {
            panic!("ARCHITECTURE.md: a code-map item's floor is not a number: {item}")
        });
        for name in item[..open].split('`').skip(1).step_by(2) {
            let name = name.trim_end_matches('/').trim_end_matches(".rs");
            assert!(
                out.insert(name.to_owned(), floor).is_none(),
                "ARCHITECTURE.md lists {name} twice under {heading}"
            );
        }
    };
    for line in lines.by_ref() {
        if line.starts_with("- ") {
            flush(&item, &mut out);
            item = line.to_owned();
        } else if line.starts_with("  ") && !line.trim_start().starts_with("- ") && !item.is_empty()
        {
            item.push(' ');
            item.push_str(line.trim());
        } else if line.trim().is_empty() && !out.is_empty() || line.starts_with('`') {
            break;
        } else if line.trim_start().starts_with("- ") {
            // A nested item: the parts of the module above it.
            flush(&item, &mut out);
            item.clear();
        }
    }
    flush(&item, &mut out);
    out
}
