//! A small ordered document tree and its YAML and JSON forms, for the objects `confgate policy` prints.
//!
//! Kept apart from the YAML parser used for reading: writing a fixed shape of maps, lists and strings
//! needs no general serializer, and the order of keys stays as Kubernetes documents them.

/// A YAML/JSON node whose maps keep their insertion order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
    Str(String),
    Bool(bool),
}

impl Node {
    pub fn map<const N: usize>(entries: [(&str, Node); N]) -> Node {
        Node::Map(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }

    pub fn str(s: impl Into<String>) -> Node {
        Node::Str(s.into())
    }

    pub(crate) fn strs<'a>(items: impl IntoIterator<Item = &'a str>) -> Node {
        Node::Seq(items.into_iter().map(Node::str).collect())
    }

    /// The same tree as JSON (map keys then sorted, which JSON readers ignore).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Node::Map(m) => {
                serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Node::Seq(s) => serde_json::Value::Array(s.iter().map(Node::to_json).collect()),
            Node::Str(s) => serde_json::Value::String(s.clone()),
            Node::Bool(b) => serde_json::Value::Bool(*b),
        }
    }

    /// Block-style YAML, two-space indents, list items at their key's indent (as kubectl prints).
    pub(crate) fn to_yaml(&self) -> String {
        let mut out = String::new();
        match self {
            Node::Map(m) if !m.is_empty() => write_map(&mut out, m, 0, None),
            Node::Seq(s) if !s.is_empty() => write_seq(&mut out, s, 0),
            other => {
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
        out
    }
}

fn pad(n: usize) -> String {
    " ".repeat(n)
}

/// Writes a map at `indent`; `first` is the prefix of its first line (a list item's `- `).
fn write_map(out: &mut String, m: &[(String, Node)], indent: usize, first: Option<&str>) {
    for (i, (k, v)) in m.iter().enumerate() {
        match (i, first) {
            (0, Some(prefix)) => out.push_str(prefix),
            _ => out.push_str(&pad(indent)),
        }
        out.push_str(&scalar(k));
        out.push(':');
        match v {
            Node::Map(inner) if !inner.is_empty() => {
                out.push('\n');
                write_map(out, inner, indent + 2, None);
            }
            Node::Seq(items) if !items.is_empty() => {
                out.push('\n');
                write_seq(out, items, indent);
            }
            Node::Str(s) if block_worthy(s) => {
                out.push_str(" |-\n");
                for line in s.lines() {
                    out.push_str(&pad(indent + 2));
                    out.push_str(line);
                    out.push('\n');
                }
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn write_seq(out: &mut String, items: &[Node], indent: usize) {
    for item in items {
        match item {
            Node::Map(m) if !m.is_empty() => {
                write_map(out, m, indent + 2, Some(&format!("{}- ", pad(indent))));
            }
            Node::Seq(s) if !s.is_empty() => {
                out.push_str(&pad(indent));
                out.push_str("-\n");
                write_seq(out, s, indent + 2);
            }
            other => {
                out.push_str(&pad(indent));
                out.push_str("- ");
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn inline(n: &Node) -> String {
    match n {
        Node::Map(_) => "{}".into(),
        Node::Seq(_) => "[]".into(),
        Node::Str(s) => scalar(s),
        Node::Bool(b) => b.to_string(),
    }
}

/// Long expressions read best as literal blocks: no escaping at all. Only for text a literal block
/// keeps exactly: printable ASCII lines without leading or trailing blanks.
fn block_worthy(s: &str) -> bool {
    s.len() > 72
        && !s.ends_with('\n')
        && s.lines().all(|l| {
            !l.is_empty()
                && !l.starts_with(' ')
                && !l.ends_with(' ')
                && l.bytes().all(|b| (0x20..0x7f).contains(&b))
        })
}

/// A plain scalar when YAML 1.1 and 1.2 both read it back as this same string, else a double-quoted
/// one ([`quoted`]).
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
        && s.as_bytes()[0].is_ascii_alphabetic()
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null"
        );
    if plain { s.to_owned() } else { quoted(s) }
}

/// Characters written as `\uXXXX` in a double-quoted scalar (and in the JSON output): those a reader
/// could turn into something else. YAML 1.1 reads NEL (U+0085), U+2028 and U+2029 as line breaks and
/// folds them into a space; control characters, DEL, the C1 range and U+FFFE/U+FFFF are not printable,
/// which a reader may refuse; a byte-order mark inside a document may be dropped. Escaped, every YAML
/// (1.1 or 1.2) and JSON reader reads the same string, so the API server evaluates the rule the
/// sidecar evaluates.
pub fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{feff}'
            | '\u{fffe}'
            | '\u{ffff}'
    )
}

/// A double-quoted scalar, valid YAML 1.1, YAML 1.2 and JSON, holding only printable characters.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// JSON text from `serde_json` with every [`needs_escape`] character it leaves raw (those from DEL up;
/// it escapes the controls below) written as `\uXXXX`. Those can only stand inside strings (JSON's own
/// syntax is ASCII), where the escape means the same character.
pub(crate) fn escape_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c >= '\u{7f}' && needs_escape(c) {
            out.push_str(&format!("\\u{:04X}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_shapes_and_quoting() {
        let long = "a".repeat(40) + " && " + &"b".repeat(40);
        let n = Node::map([
            ("apiVersion", Node::str("admissionregistration.k8s.io/v1")),
            (
                "spec",
                Node::map([
                    ("ops", Node::strs(["CREATE", "DELETE"])),
                    ("empty", Node::strs([""])),
                    (
                        "rules",
                        Node::Seq(vec![Node::map([
                            ("expression", Node::str(long.clone())),
                            ("message", Node::str("it's \"x\": 1.30")),
                        ])]),
                    ),
                    ("on", Node::Bool(true)),
                    ("none", Node::Seq(vec![])),
                ]),
            ),
        ]);
        let want = format!(
            "apiVersion: admissionregistration.k8s.io/v1\nspec:\n  ops:\n  - CREATE\n  - DELETE\n  empty:\n  - \"\"\n  rules:\n  - expression: |-\n      {long}\n    message: \"it's \\\"x\\\": 1.30\"\n  \"on\": true\n  none: []\n"
        );
        assert_eq!(n.to_yaml(), want);
        assert_eq!(n.to_json()["spec"]["ops"][1], "DELETE");
    }

    #[test]
    fn unusual_characters_are_escaped_and_read_back() {
        let tricky =
            "a\u{85}b\u{2028}c\u{2029}d\u{1}e\u{7f}f\u{9f}g\u{feff}h\u{fffe}i\tj\"k\\l\u{e9}";
        let yaml = Node::map([("rule", Node::str(tricky))]).to_yaml();
        assert_eq!(
            yaml,
            "rule: \"a\\u0085b\\u2028c\\u2029d\\u0001e\\u007Ff\\u009Fg\\uFEFFh\\uFFFEi\\tj\\\"k\\\\l\u{e9}\"\n"
        );
        let back: std::collections::BTreeMap<String, String> =
            serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back["rule"], tricky);
        let json = escape_json(&serde_json::to_string_pretty(&[tricky]).unwrap());
        assert!(
            json.chars().all(|c| !needs_escape(c) || c == '\n'),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<[String; 1]>(&json).unwrap(),
            [tricky]
        );
    }
}
