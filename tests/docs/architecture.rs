//! ARCHITECTURE.md stays a map a newcomer can hold, and its invariants name tests that exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Past this the map has turned into an account of each file, which belongs in the files' `//!` docs.
const MAX_BYTES: usize = 12 * 1024;

#[test]
fn the_map_is_short() {
    let len = std::fs::read_to_string(root().join("ARCHITECTURE.md"))
        .unwrap()
        .len();
    assert!(
        len <= MAX_BYTES,
        "ARCHITECTURE.md is {len} bytes, over {MAX_BYTES}: move detail into the modules' //! docs"
    );
}

/// Every function name defined in the Rust sources below `dir`.
fn functions(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            functions(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            for rest in text.split("fn ").skip(1) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
}

/// The invariants' guards: each backticked name in the "Invariants" section that reads as a test
/// (snake case with three or more words, a path's last part) is a function of the tree.
#[test]
fn each_invariant_names_tests_that_exist() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = map
        .split("## Invariants")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("ARCHITECTURE.md has an Invariants section");
    let mut defined = BTreeSet::new();
    for dir in ["src", "crates", "tests"] {
        functions(&root().join(dir), &mut defined);
    }
    let named: Vec<&str> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|code| code.rsplit("::").next().unwrap_or(code))
        .filter(|n| {
            n.split('_').count() >= 3
                && n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    assert!(
        named.len() >= 15,
        "the scan found too few test names: {named:?}"
    );
    let missing: Vec<&&str> = named.iter().filter(|n| !defined.contains(**n)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's invariants name tests that do not exist: {missing:?}"
    );
}
