//! The import graph of `src/` has no cycle, file by file, and every module imports only modules on
//! its own floor or below (ARCHITECTURE.md, "No import cycle").
//!
//! Two graphs. The module graph, read from `crate::` paths, is between top-level modules (a
//! directory module's files count as their parent); the floors are checked on it. The file graph is
//! between the files of `src/`: each `crate::`, `super::` and `self::` path, and each path through a
//! child the file declares (`mod child;` then `child::X`, a `pub use` re-export included; the
//! declaration itself is not an import), goes to the deepest file it names, so a circle between a
//! `mod.rs` and its child is seen. Paths in comments and string literals are not imports;
//! `#[cfg(test)]` code is, since a test's import couples the files too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, bottom to top, as ARCHITECTURE.md lists them.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "values and formats",
        &["backoff", "snapshot", "annotations", "manifest"],
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

// The file graph: the same check file by file, so a circle between two files of one module (a
// `mod.rs` and its child) is seen too.

/// The files of `src/`, by their path under it (`/`-separated), with their text.
type Tree = BTreeMap<String, String>;

fn tree() -> Tree {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(&root).unwrap();
            let rel: Vec<&str> = rel.iter().map(|c| c.to_str().unwrap()).collect();
            (rel.join("/"), std::fs::read_to_string(&file).unwrap())
        })
        .collect()
}

/// The module a file is: `a/b.rs` and `a/b/mod.rs` are both `a::b`; `lib.rs` is the crate root.
fn module_path(rel: &str) -> Vec<String> {
    let mut path: Vec<String> = rel.split('/').map(str::to_owned).collect();
    let last = path.pop().unwrap();
    match last.as_str() {
        "mod.rs" => {}
        "lib.rs" if path.is_empty() => {}
        _ => path.push(last.strip_suffix(".rs").unwrap_or(&last).to_owned()),
    }
    path
}

/// The file a module's code starts in, if it has one of its own.
fn file_of(module: &[String], tree: &Tree) -> Option<String> {
    if module.is_empty() {
        return Some("lib.rs".to_owned());
    }
    let dir = module.join("/");
    [format!("{dir}.rs"), format!("{dir}/mod.rs")]
        .into_iter()
        .find(|f| tree.contains_key(f))
}

/// The deepest file along an absolute path (`a::b::c`: `a/b/c.rs`, else `a/b.rs`, else `a.rs`,
/// each or its `mod.rs`); the crate root when none is.
fn deepest(path: &[String], tree: &Tree) -> String {
    (0..=path.len())
        .rev()
        .find_map(|k| file_of(&path[..k], tree))
        .unwrap()
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

fn ident_at(s: &[u8], i: usize) -> Option<(&str, usize)> {
    let end = i + s[i.min(s.len())..]
        .iter()
        .take_while(|b| is_ident(**b))
        .count();
    (end > i).then(|| (std::str::from_utf8(&s[i..end]).unwrap(), end))
}

/// The paths of the use tree or path that starts at `i` (just past `ROOT::`, with `prefix` the
/// segments so far), each with the offset it starts at: `{a::b, c::{d, self}, e as f, g::*}` gives
/// `a::b`, `c::d`, `c`, `e` and `g`. Returns where the tree ends.
fn use_tree(s: &[u8], i: usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, usize)>) -> usize {
    let start = i;
    let mut path = prefix;
    let mut i = skip_ws(s, i);
    loop {
        match s.get(i) {
            Some(b'{') => {
                i += 1;
                loop {
                    i = skip_ws(s, i);
                    match s.get(i) {
                        None => return i,
                        Some(b'}') => return i + 1,
                        Some(b',') => i += 1,
                        _ => {
                            let member = ident_at(s, i);
                            let after = member.map_or(i, |(_, e)| skip_ws(s, e));
                            if member.is_some_and(|(m, _)| m == "self")
                                && !s[after..].starts_with(b"::")
                            {
                                out.push((path.clone(), i));
                                i = after;
                            } else {
                                let end = use_tree(s, i, path.clone(), out);
                                // Never stand still on what is not a path (`as name`, a stray token).
                                i = end.max(i + 1);
                            }
                            // Past `as name` to the next member.
                            while s.get(i).is_some_and(|b| !matches!(b, b',' | b'}' | b'{')) {
                                i += 1;
                            }
                        }
                    }
                }
            }
            Some(b'*') => {
                out.push((path, start));
                return i + 1;
            }
            _ => match ident_at(s, i) {
                Some((name, end)) => {
                    path.push(name.to_owned());
                    let next = skip_ws(s, end);
                    if s[next..].starts_with(b"::") {
                        i = skip_ws(s, next + 2);
                    } else {
                        out.push((path, start));
                        return end;
                    }
                }
                // `::<T>` or the end of the text.
                None => {
                    out.push((path, start));
                    return i;
                }
            },
        }
    }
}

/// The inline modules (`mod tests { .. }`) of `code`: where each opens and closes, and its name.
fn inline_modules(s: &[u8]) -> Vec<(usize, usize, String)> {
    let (mut depth, mut open, mut found) = (0usize, Vec::new(), Vec::new());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'{' => depth += 1,
            b'}' => {
                if open.last().is_some_and(|(d, _, _)| *d == depth) {
                    let (_, at, name) = open.pop().unwrap();
                    found.push((at, i, name));
                }
                depth = depth.saturating_sub(1);
            }
            b'm' if s[i..].starts_with(b"mod")
                && (i == 0 || !is_ident(s[i - 1]))
                && s.get(i + 3).is_some_and(u8::is_ascii_whitespace) =>
            {
                let at = skip_ws(s, i + 3);
                if let Some((name, end)) = ident_at(s, at) {
                    let brace = skip_ws(s, end);
                    if s.get(brace) == Some(&b'{') {
                        open.push((depth + 1, brace, name.to_owned()));
                        i = brace;
                        continue;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// Every file `rel` imports, with the 1-based line of the import: `crate::` paths, `super::` and
/// `self::` paths from the module the code stands in (an inline `mod tests`'s `super` is the file
/// itself), and paths through a child the file declares (`mod child;` then `child::X`). Declaring a
/// child is not importing it; the file itself is left out.
fn file_imports(rel: &str, text: &str, tree: &Tree) -> Vec<(String, usize)> {
    let code = code_of(text);
    let s = code.as_bytes();
    let module = module_path(rel);
    let inline = inline_modules(s);
    let children = declared(text);
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    for root in ["crate", "super", "self"]
        .into_iter()
        .chain(children.iter().map(String::as_str))
    {
        for (n, _) in code.match_indices(&format!("{root}::")) {
            // `mycrate::`, `x.child::<T>()`, `a::super::`, `$child::` are not roots.
            let right_before = code[..n].chars().next_back();
            let before = code[..n].trim_end();
            if right_before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                || (root != "crate" && (before.ends_with("::") || before.ends_with(['.', '$'])))
            {
                continue;
            }
            let mut paths = Vec::new();
            use_tree(s, n + root.len() + 2, vec![root.to_owned()], &mut paths);
            for (path, at) in paths {
                let mut here = module.clone();
                if matches!(root, "super" | "self") {
                    here.extend(
                        inline
                            .iter()
                            .filter(|(open, close, _)| *open < n && n < *close)
                            .map(|(_, _, name)| name.clone()),
                    );
                }
                let mut rest = &path[..];
                match root {
                    "crate" => {
                        here.clear();
                        rest = &rest[1..];
                    }
                    "super" | "self" => {
                        while let Some((first, tail)) = rest.split_first() {
                            match first.as_str() {
                                "self" => {}
                                "super" => {
                                    here.pop();
                                }
                                _ => break,
                            }
                            rest = tail;
                        }
                    }
                    _ => {}
                }
                here.extend(rest.iter().cloned());
                let target = deepest(&here, tree);
                if target != rel {
                    found.push((target, line(at.min(s.len()))));
                }
            }
        }
    }
    found
}

/// File -> imported file -> where (the first import by line), the files as `src/...`. `main.rs` is
/// the binary's own crate root and imports the library by its name, so it is not read.
fn file_graph(tree: &Tree) -> Graph {
    let mut g = Graph::new();
    for (rel, text) in tree {
        if rel == "main.rs" {
            continue;
        }
        let mut imports = file_imports(rel, text, tree);
        imports.sort_by_key(|(_, line)| *line);
        let to = g.entry(format!("src/{rel}")).or_default();
        for (target, line) in imports {
            to.entry(format!("src/{target}"))
                .or_insert_with(|| format!("src/{rel}:{line}"));
        }
    }
    g
}

/// The groups of files that reach each other (the strongly connected components of more than one
/// file), each with one circle through it: the files along it, the first repeated at the end.
fn circles(g: &Graph) -> Vec<(BTreeSet<String>, Vec<String>)> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(m) = stack.pop() {
            for next in g.get(&m).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut placed = BTreeSet::new();
    let mut found = Vec::new();
    for m in g.keys() {
        if placed.contains(m) || !reached[m].contains(m) {
            continue;
        }
        let group: BTreeSet<String> = reached[m]
            .iter()
            .filter(|o| reached.get(o).is_some_and(|r| r.contains(m)))
            .cloned()
            .collect();
        let within: Graph = group
            .iter()
            .map(|f| {
                let to = g[f]
                    .iter()
                    .filter(|(t, _)| group.contains(*t))
                    .map(|(t, at)| (t.clone(), at.clone()))
                    .collect();
                (f.clone(), to)
            })
            .collect();
        let circle = find_cycle(&within).expect("a group that reaches itself has a circle");
        placed.extend(group.iter().cloned());
        found.push((group, circle));
    }
    found
}

/// A circle as its steps, `from -> to (file:line)`.
fn steps(g: &Graph, circle: &[String]) -> String {
    circle
        .windows(2)
        .map(|w| format!("{} -> {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
        .collect::<Vec<_>>()
        .join("\n    ")
}

fn circles_text(g: &Graph) -> String {
    circles(g)
        .iter()
        .map(|(group, c)| {
            let files: Vec<&str> = group.iter().map(String::as_str).collect();
            format!(
                "  circle through {}:\n    {}\n",
                files.join(" "),
                steps(g, c)
            )
        })
        .collect()
}

#[test]
fn no_import_cycle_between_files() {
    let g = file_graph(&tree());
    for (from, to) in [
        // `super::` from a child, a plain child path, and a `crate::` path to a file two dirs deep.
        ("src/gate/machine/decide.rs", "src/gate/machine/state.rs"),
        ("src/app/mod.rs", "src/app/sidecar.rs"),
        ("src/app/ask.rs", "src/api/status_cmd/mod.rs"),
    ] {
        assert!(
            g.get(from).is_some_and(|t| t.contains_key(to)),
            "the scan found no import of {to} by {from}; is it reading src/?\n{}",
            show(&g)
        );
    }
    let found = circles_text(&g);
    assert!(
        found.is_empty(),
        "import cycle between files (move what both use down into a file of its own):\n{found}"
    );
}

/// `path -> text` as a tree.
fn tree_of(files: &[(&str, &str)]) -> Tree {
    files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

#[test]
fn the_file_scan_resolves_paths_to_files() {
    let t = tree_of(&[
        ("lib.rs", "pub mod a;\npub mod r;\npub const TOP: u8 = 0;\n"),
        (
            "a/mod.rs",
            "mod b;\nmod c;\nuse crate::r::{deep::{x::Y, z}, self as rr, s::*};\n\
             fn f() { b::g(); self::c::h(); crate::TOP; }\n",
        ),
        (
            "a/b.rs",
            "// super::c and \"super::c\" are not code\nuse super::super::r::deep;\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n    fn t() { super::super::c::h(); }\n}\n",
        ),
        ("a/c.rs", "pub(super) fn h() { mod_x::y(); }\n"),
        ("r.rs", "pub mod deep;\npub mod s {}\n"),
        ("r/deep.rs", "pub mod x;\n"),
        ("r/deep/x.rs", "pub struct Y;\n"),
    ]);
    let edges = |rel: &str| -> Vec<(String, usize)> {
        let mut e = file_imports(rel, &t[rel], &t);
        e.sort();
        e
    };
    let owned = |v: &[(&str, usize)]| -> Vec<(String, usize)> {
        v.iter().map(|(f, l)| ((*f).to_owned(), *l)).collect()
    };
    assert_eq!(
        edges("a/mod.rs"),
        owned(&[
            ("a/b.rs", 4),
            ("a/c.rs", 4),
            ("lib.rs", 4),
            ("r.rs", 3),
            ("r.rs", 3),
            ("r/deep.rs", 3),
            ("r/deep/x.rs", 3),
        ]),
        "deepest file of each path in a nested group; a child's path; `self::`; the root's item"
    );
    // `super::*` in the inline `mod tests` is the file itself; its `super::super` is `a`.
    assert_eq!(edges("a/b.rs"), owned(&[("a/c.rs", 6), ("r/deep.rs", 2)]));
    assert_eq!(edges("a/c.rs"), owned(&[]), "`pub(super)` is no path");
    assert_eq!(module_path("r/deep.rs"), ["r", "deep"]);
    assert_eq!(module_path("a/mod.rs"), ["a"]);
}

#[test]
fn the_file_scan_finds_a_circle_between_a_parent_and_its_child() {
    // The parent re-exports the child's item; the child uses the parent's type.
    let circle = tree_of(&[
        ("lib.rs", "pub mod a;\n"),
        (
            "a/mod.rs",
            "mod child;\n\npub use child::Thing;\npub struct Shared;\n",
        ),
        (
            "a/child.rs",
            "use super::Shared;\npub struct Thing(Shared);\n",
        ),
    ]);
    let g = file_graph(&circle);
    let found = circles_text(&g);
    assert!(
        found.contains("src/a/child.rs -> src/a/mod.rs (src/a/child.rs:1)")
            && found.contains("src/a/mod.rs -> src/a/child.rs (src/a/mod.rs:3)"),
        "{found}"
    );
    assert_eq!(circles(&g).len(), 1);

    // The shared type moved down into a file of its own: no circle, though a comment and a test
    // module still say `super::`.
    let clean = tree_of(&[
        ("lib.rs", "pub mod a;\n"),
        (
            "a/mod.rs",
            "mod child;\nmod shared;\npub use child::Thing;\npub use shared::Shared;\n",
        ),
        (
            "a/child.rs",
            "use super::shared::Shared; // not super::Thing\npub struct Thing(Shared);\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
        ("a/shared.rs", "pub struct Shared;\n"),
    ]);
    let g = file_graph(&clean);
    assert_eq!(circles_text(&g), "", "{}", show(&g));
    assert!(g["src/a/child.rs"].contains_key("src/a/shared.rs"));
    assert!(g["src/a/mod.rs"].contains_key("src/a/child.rs"));
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
