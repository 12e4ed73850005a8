//! What a user sees on a real node, kept in docs/on-a-node.md: each test that shows something a person
//! would look at 3 a.m. (`kubectl get pod`, the Events `kubectl describe pod` lists, `confgate status`)
//! captures it here. The doc's block must equal the capture, made comparable by replacing what changes
//! from run to run (ages, counts, ports, IPs); `UPDATE_DOCS=1` rewrites the block instead.

use std::sync::Mutex;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/on-a-node.md");

/// Replaces what differs between runs: ages (`12s`, `3m2s`, `<invalid>`), repeat counts, ports, IPs.
pub fn normalise(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let words: Vec<String> = line
            .split(' ')
            .map(|w| {
                let age = !w.is_empty()
                    && w.chars().next().unwrap().is_ascii_digit()
                    && w.chars().all(|c| c.is_ascii_digit() || "smhd".contains(c))
                    && w.chars().any(|c| "smhd".contains(c));
                if age || w == "<invalid>" {
                    "AGE".to_owned()
                } else {
                    w.to_owned()
                }
            })
            .collect();
        let line = words.join(" ");
        // `(x3 over 10s)`: how often the kubelet has probed so far.
        let line = replace_runs(
            &line,
            "(x",
            |rest| rest.find(')').map(|j| j + 1),
            "(xN over AGE)",
        );
        let line = replace_runs(
            &line,
            "127.0.0.1:",
            |rest| Some(rest.chars().take_while(char::is_ascii_digit).count()),
            "127.0.0.1:PORT",
        );
        // A first Event has no count; a repeated one has, so the two read alike.
        let line = line.replace("AGE (xN over AGE)", "AGE");
        // Columns are aligned to their widest cell, which the ages change.
        let mut line = line;
        while line.contains("   ") {
            line = line.replace("   ", "  ");
        }
        out.push(line.trim_end().to_owned());
    }
    out.join("\n")
}

/// Each `marker` in `line` and what `len` says follows it, as `with`.
fn replace_runs(
    line: &str,
    marker: &str,
    len: impl Fn(&str) -> Option<usize>,
    with: &str,
) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find(marker) {
        out += &rest[..i];
        let after = &rest[i + marker.len()..];
        match len(after) {
            Some(n) => {
                out += with;
                rest = &after[n..];
            }
            None => {
                out += &rest[i..];
                rest = "";
            }
        }
    }
    out + rest
}

/// Checks (or, with `UPDATE_DOCS=1`, rewrites) the doc's block `name` against `text`.
pub fn capture(name: &str, text: &str) {
    static LOCK: Mutex<()> = Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let text = normalise(text);
    let doc = std::fs::read_to_string(DOC).unwrap();
    let open = format!("<!-- captured: {name} -->\n```console\n");
    let start = doc
        .find(&open)
        .unwrap_or_else(|| panic!("docs/on-a-node.md has no block {name:?}"))
        + open.len();
    let end = start + doc[start..].find("```\n").expect("the block's end");
    let shown = doc[start..end].trim_end();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let new = format!("{}{}\n{}", &doc[..start], text, &doc[end..]);
        std::fs::write(DOC, new).unwrap();
        return;
    }
    assert_eq!(
        shown, text,
        "docs/on-a-node.md's {name:?} is not what the node shows (UPDATE_DOCS=1 rewrites it)"
    );
}

/// The Events table of `kubectl describe pod`, without its header's alignment run to run.
pub fn events_of(describe: &str) -> String {
    let mut lines = describe.lines().skip_while(|l| !l.starts_with("Events:"));
    let mut out: Vec<&str> = Vec::new();
    lines.next();
    for l in lines {
        if l.trim_start().starts_with("----") || l.trim_start().starts_with("Type") {
            continue;
        }
        // Only what confgate causes: the probes' Events, and confgate's own.
        let words: Vec<&str> = l.split_whitespace().collect();
        if words.get(1) == Some(&"Unhealthy") || words.contains(&"confgate") {
            out.push(l.trim());
        }
    }
    // Their order is the order they first happened in, which a probe's period can swap.
    out.sort();
    out.dedup();
    out.join("\n")
}
