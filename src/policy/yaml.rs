//! A small ordered document tree and its YAML and JSON forms, for the objects `confgate policy` prints.
//!
//! The tree keeps the order of keys as Kubernetes documents them; serde writes it, as YAML with
//! serde-saphyr and as JSON with serde_json.

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

    /// The same tree as a JSON value.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("string-keyed maps, lists and strings serialize")
    }

    /// Block-style YAML, two-space indents, list items at their key's indent (as kubectl prints).
    /// Strings that YAML 1.1 reads as something else (`on`, `1.30`) are quoted; unprintable and
    /// line-breaking characters are escaped ([`needs_escape`]).
    pub(crate) fn to_yaml(&self) -> String {
        // Only a map key that is not a string, or nesting past the writer's depth limit, can fail;
        // the objects `policy` builds have neither.
        serde_saphyr::to_string(self).expect("string-keyed maps, lists and strings serialize")
    }
}

/// Strings longer than this are written as literal blocks when YAML can keep them exactly.
const LITERAL_FROM: usize = 73;

impl serde::Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Node::Map(m) => {
                let mut out = s.serialize_map(Some(m.len()))?;
                for (k, v) in m {
                    out.serialize_entry(k, v)?;
                }
                out.end()
            }
            Node::Seq(items) => {
                let mut out = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    out.serialize_element(v)?;
                }
                out.end()
            }
            // A long CEL expression reads best with no escaping at all; the YAML writer falls back
            // to a quoted scalar for text a literal block cannot hold. JSON sees a plain string.
            Node::Str(v) if v.len() >= LITERAL_FROM => serde_saphyr::LitStr(v).serialize(s),
            Node::Str(v) => s.serialize_str(v),
            Node::Bool(b) => s.serialize_bool(*b),
        }
    }
}

/// Characters written escaped in a double-quoted scalar (`\N`, `\x7F`, `\uFEFF`) and in the JSON
/// output (`\uXXXX`): those a reader could turn into something else. YAML 1.1 reads NEL (U+0085),
/// U+2028 and U+2029 as line breaks and folds them into a space; control characters, DEL, the C1 range
/// and U+FFFE/U+FFFF are not printable, which a reader may refuse; a byte-order mark inside a document
/// may be dropped. Escaped, every YAML (1.1 or 1.2) and JSON reader reads the same string, so the API
/// server evaluates the rule the sidecar evaluates.
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
            "rule: \"a\\Nb\\Lc\\Pd\\x01e\\x7Ff\\x9Fg\\uFEFFh\\uFFFEi\\tj\\\"k\\\\l\u{e9}\"\n"
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
