//! No decision reads a formatted message (ARCHITECTURE.md, "Decisions on typed facts"): the Gate's
//! code (`crates/core/src/gate/`, tests aside) inspects no text at all, and the judgement (`verdict`,
//! `variants`, `rollout`, `known_good`) inspects no message, only the config's own content.
//!
//! What it catches, in code (comments and string literals are not code; `#[cfg(test)]` items and
//! `tests/` dirs are left out):
//! - in the Gate: any text inspection — `.starts_with(`, `.ends_with(`, `.strip_prefix(`,
//!   `.strip_suffix(`, `.split_once(`, `.rsplit_once(`, `.split(`, `.lines(`, `.find("`,
//!   `.contains("`, `.contains(&format!`, and comparing a `.to_string()` with anything
//!   (`.to_string() ==`, `!=`, or on the right of either). (`.parse` is not counted: the trial reads
//!   the config's version, content the judgement extracted, under the range's scheme);
//! - in the judgement: the same methods on a value named as a message (`reason`, `why`, `message`,
//!   `error`, `said`, `problem`, `note`), and comparing a `.to_string()`.
//!
//! What it cannot see: a decision made on words in another module and handed to the Gate as a
//! bool, or text compared through a helper with another name. Types do the rest: the Gate's state
//! holds refusals, checker answers, failures and settings problems as values, not words.

use std::path::{Path, PathBuf};

const TEXT_METHODS: &[&str] = &[
    ".starts_with(",
    ".ends_with(",
    ".strip_prefix(",
    ".strip_suffix(",
    ".split_once(",
    ".rsplit_once(",
    ".split(",
    ".lines(",
    ".find(\"",
    ".contains(\"",
    ".contains(&format!",
];

const MESSAGE_NAMES: &[&str] = &[
    "reason", "why", "message", "error", "said", "problem", "note",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// `text` with comments removed and string and char literals emptied (`""`, `' '`), so only code
/// is searched.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(hashes) = raw_string_at(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body
                + rest[body..]
                    .find(&close)
                    .map_or(rest.len() - body, |e| e + close.len());
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && char_literal_len(rest).is_some() {
            i += char_literal_len(rest).unwrap_or(1);
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The number of `#` of a raw string starting `rest` (`r"`, `r#"`, `br"`...).
fn raw_string_at(rest: &str) -> Option<usize> {
    let r = rest.strip_prefix('b').unwrap_or(rest).strip_prefix('r')?;
    let hashes = r.len() - r.trim_start_matches('#').len();
    r[hashes..].starts_with('"').then_some(hashes)
}

/// The length of a char literal starting `rest` (`'a'`, `'\n'`, `'\u{7f}'`), not a lifetime.
fn char_literal_len(rest: &str) -> Option<usize> {
    let body = &rest[1..];
    let len = if body.starts_with("\\u{") {
        body.find('}')? + 1
    } else if body.starts_with('\\') {
        2
    } else {
        body.chars().next()?.len_utf8()
    };
    (body[len..].starts_with('\'')).then_some(len + 2)
}

/// `code` without its `#[cfg(test)]` items (a test module, a test-only function or import).
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        // The item ends at its first `;` outside braces, or at the brace closing its body.
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Each line of `code` that reads text, by the rules above (`gate`: the Gate's, where any text
/// method counts).
fn readings(code: &str, gate: bool) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let compact: String = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let compares_words = [".to_string() ==", ".to_string() !="]
            .iter()
            .any(|p| compact.contains(p))
            || ["== ", "!= "].iter().any(|op| {
                compact.split(op).skip(1).any(|rhs| {
                    rhs.split(' ').next().is_some_and(|e| {
                        e.trim_end_matches([')', ';', ',']).ends_with(".to_string(")
                    })
                })
            });
        let reads = TEXT_METHODS.iter().any(|m| {
            compact.match_indices(m).any(|(i, _)| {
                gate || {
                    let before = compact[..i].trim_end_matches(['(', ')', '&', '*', '?']);
                    let name = before
                        .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or("");
                    MESSAGE_NAMES.contains(&name)
                }
            })
        });
        if compares_words || reads {
            found.push((n + 1, line.trim().to_owned()));
        }
    }
    found
}

#[test]
fn no_decision_reads_a_formatted_message() {
    let mut bad = Vec::new();
    // The judgement and the Gate live in the core crate.
    for (dir, gate) in [
        ("crates/core/src/gate", true),
        ("crates/core/src/verdict", false),
        ("crates/core/src/variants", false),
        ("crates/core/src/rollout", false),
        ("crates/core/src/known_good", false),
    ] {
        let mut files = Vec::new();
        rust_files(&root().join(dir), &mut files);
        assert!(!files.is_empty(), "no file under {dir}");
        for f in files {
            let code = without_tests(&code_of(&std::fs::read_to_string(&f).unwrap()));
            for (line, text) in readings(&code, gate) {
                let rel = f.strip_prefix(root()).unwrap().display();
                bad.push(format!("{rel}:{line}: {text}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "decisions read text; keep the fact typed and word it where it is shown:\n{}",
        bad.join("\n")
    );
}

/// The scan sees what the Gate used to do, and not what a comment or a string says.
#[test]
fn the_message_scan_catches_reading_words_and_only_in_code() {
    let gate = r#"
        // why.starts_with("the checker") in a comment
        let s = "x.starts_with(y)";
        let fix = if why.starts_with("the checker could not be run") { 1 } else { 2 };
        Some(t) if t != target.to_string() => Vec::new(),
        let (code, line) = answer.split_once(": ").unwrap_or((answer, ""));
        let c = '"';
        #[cfg(test)]
        mod tests { fn t() { assert!(reason.contains("bad")); } }
    "#;
    let found: Vec<usize> = readings(&without_tests(&code_of(gate)), true)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(found, [4, 5, 6], "{found:?}");
    // In the judgement, text methods on content are its job; on a message they are not.
    let judgement = r#"
        let v = version.strip_prefix('v').unwrap_or(version);
        if j.reason.contains("too old") { return; }
        if why.to_string() == "x" { return; }
    "#;
    let found: Vec<usize> = readings(&code_of(judgement), false)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(found, [3, 4], "{found:?}");
}
