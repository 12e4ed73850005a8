//! What the real binary logs, read as a log pipeline reads it: JSON lines with unique keys and no Rust
//! debug syntax, text lines in logfmt, and the lines an on-call engineer needs (settings in force and
//! where each came from, settings problems appearing and clearing, annotation overrides, gate-only mode).

mod common;

use std::fmt;
use std::process::Command;

use common::{DEADLINE, Dirs, Gate, Sink, wait_for, write_annotations, write_version};

/// A JSON object's keys in order, duplicates kept (serde_json's `Value` would keep only the last).
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    m.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(k);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(V)
    }
}

/// Every line of a JSON log, parsed; panics on a line that is not an object or repeats a key.
fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|l| {
            let Keys(keys) = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let mut sorted = keys.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), keys.len(), "a key repeats: {l}");
            assert!(!l.contains("Some("), "Rust debug syntax: {l}");
            serde_json::from_str(l).unwrap()
        })
        .collect()
}

fn with_message<'a>(lines: &'a [serde_json::Value], msg: &str) -> Vec<&'a serde_json::Value> {
    lines.iter().filter(|l| l["message"] == msg).collect()
}

#[test]
fn json_logs_have_unique_keys_and_say_where_settings_come_from() {
    let d = Dirs::new();
    let sink = Sink::start(false);
    write_version(&d.watch(), "2.4.1");
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", ">=2.4.0 <3.0.0")]);
    let mut cmd = Command::new(common::BIN);
    cmd.args(["run", "--log-format", "json", "--accepts", "^1", "--reload"])
        .arg(sink.url())
        .arg("--watch")
        .arg(d.watch())
        .arg("--promote-to")
        .arg(d.promoted())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"))
        .args(["--on-incompatible", "hold"])
        .env("CONFGATE_ON_INCOMPATIBLE", "hold")
        .env("CONFGATE_MODE", "enforce")
        .env_remove("CONFGATE_ACCEPTS");
    let g = Gate::from_command(cmd, &d.log());
    g.wait_active("2.4.1");
    // The first promotion into an empty promoted dir sends no reload; a second one does.
    write_version(&d.watch(), "2.4.2");
    g.wait_active("2.4.2");
    wait_for("the reload", DEADLINE, || (sink.count() > 0).then_some(()));
    // A typo'd annotation appears, then is fixed.
    write_annotations(
        &d.podinfo(),
        &[
            ("confgate.io/accepts", ">=2.4.0 <3.0.0"),
            ("confgate.io/acepts", "^3"),
        ],
    );
    wait_for("the problem logged", DEADLINE, || {
        g.log_text().contains("settings problem").then_some(())
    });
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", ">=2.4.0 <3.0.0")]);
    wait_for("the problem cleared", DEADLINE, || {
        g.log_text()
            .contains("settings problem cleared")
            .then_some(())
    });
    let lines = json_lines(&g.log_text());

    let setting = |name: &str| {
        let l = lines
            .iter()
            .find(|l| l["message"] == "setting in force" && l["setting"] == name)
            .unwrap_or_else(|| panic!("no start-up line for {name}"));
        (l["value"].as_str().unwrap(), l["from"].as_str().unwrap())
    };
    assert_eq!(
        setting("accepts"),
        (">=2.4.0 <3.0.0", "annotation confgate.io/accepts")
    );
    assert_eq!(setting("mode"), ("enforce", "env CONFGATE_MODE"));
    assert_eq!(setting("reload").1, "flag --reload");
    // The flag wins over its environment variable, and is named even when both hold the same value.
    assert_eq!(
        setting("on-incompatible"),
        ("hold", "flag --on-incompatible")
    );
    assert_eq!(setting("version-from"), ("file:version", "default"));

    let overrides = with_message(&lines, "annotation overrides flag");
    assert!(
        overrides
            .iter()
            .any(|l| l["setting"] == "accepts" && l["overrides"] == "^1"),
        "{overrides:?}"
    );
    let appeared = with_message(&lines, "settings problem");
    assert_eq!(appeared.len(), 1, "{appeared:?}");
    assert!(
        appeared[0]["problem"]
            .as_str()
            .unwrap()
            .contains("unknown annotation confgate.io/acepts")
    );
    assert_eq!(with_message(&lines, "settings problem cleared").len(), 1);

    let reloaded = with_message(&lines, "reloaded");
    assert_eq!(reloaded[0]["reload_target"], sink.url().as_str());
    assert_eq!(reloaded[0]["target"], "confgate::reload", "the module");
    assert_eq!(
        with_message(&lines, "confgate started")[0]["promote_to"],
        d.promoted().display().to_string().as_str()
    );
    assert!(
        lines
            .iter()
            .all(|l| !l["message"].as_str().unwrap_or("").starts_with("gate-only"))
    );
}

#[test]
fn start_up_says_so_in_gate_only_mode() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let mut cmd = Command::new(common::BIN);
    cmd.args(["run", "--log-format", "json", "--accepts", "^1", "--watch"])
        .arg(d.watch())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"))
        .env_remove("CONFGATE_PROMOTE_TO");
    let g = Gate::from_command(cmd, &d.log());
    wait_for("the gate-only line", DEADLINE, || {
        let lines = json_lines(&g.log_text());
        lines
            .iter()
            .find(|l| {
                l["level"] == "WARN"
                    && l["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("gate-only mode: no --promote-to"))
            })
            .map(|_| ())
    });
    let lines = json_lines(&g.log_text());
    assert_eq!(
        with_message(&lines, "confgate started")[0]["promote_to"],
        "none"
    );
}

/// A logfmt line as Loki's parser reads it: `key=value` or `key="quoted \" value"`, separated by spaces.
fn logfmt(fields: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = fields.trim_start();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .unwrap_or_else(|| panic!("no `=` in {rest:?}"));
        assert!(
            !key.contains(' ') && !key.is_empty(),
            "bad key {key:?} in {fields}"
        );
        let (value, after) = if let Some(q) = after.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.char_indices();
            let end = loop {
                match chars.next() {
                    Some((_, '\\')) => v.push(chars.next().expect("escape").1),
                    Some((i, '"')) => break i + 1,
                    Some((_, c)) => v.push(c),
                    None => panic!("unterminated quote in {fields}"),
                }
            };
            (v, &q[end..])
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            assert!(!after[..end].contains('"'), "stray quote in {fields}");
            (after[..end].to_owned(), &after[end..])
        };
        out.push((key.to_owned(), value));
        rest = after.trim_start();
    }
    out
}

#[test]
fn text_logs_parse_as_logfmt() {
    let d = Dirs::new();
    write_version(&d.watch(), "3.0.0");
    let g = Gate::start(&d, &["--accepts", ">=2.4.0, <3.0.0"]);
    g.wait_candidate(Some("3.0.0"), "too-new");
    let text = g.log_text();
    let mut judged = None;
    for line in text.lines() {
        // `TIMESTAMP LEVEL module::path: fields`
        let fields = line
            .split_once(": ")
            .unwrap_or_else(|| panic!("no target in {line}"))
            .1;
        let kv = logfmt(fields);
        assert!(!line.contains("Some("), "Rust debug syntax: {line}");
        if kv.iter().any(|(k, v)| k == "msg" && v == "judged") {
            judged = Some(kv);
        }
    }
    let judged = judged.expect("a judged line");
    let reason = &judged.iter().find(|(k, _)| k == "reason").unwrap().1;
    assert_eq!(
        reason,
        "version 3.0.0 is newer than >=2.4.0, <3.0.0 allows; roll the ConfigMap back to a version in \
         >=2.4.0, <3.0.0, or raise confgate.io/accepts once the component reads 3.0.0",
        "the whole reason is one value"
    );
}
