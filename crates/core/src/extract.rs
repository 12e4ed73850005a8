//! Finds one value in a JSON or YAML document by RFC 6901 pointer without building a document tree.
//!
//! The document is streamed through serde: a seed descends only along the pointer and everything
//! else is skipped with [`IgnoredAny`], so memory is bounded by the document's size (the parsers'
//! own buffers), not by its shape. Both parsers keep their hostile-input guards: nesting depth,
//! alias replay limits and node budgets.
//!
//! Errors are built from a fixed description and a position only: the parsers' own messages echo
//! document text (numbers, tagged scalars, duplicate keys), and config content must never reach a
//! status, probe answer or log.
//!
//! serde-saphyr is the one YAML parser of the crate: manifests, kubeconfigs and the policy's output
//! go through it too.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What the pointer named. Containers and non-scalars carry no content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found {
    Str(String),
    /// A non-negative integer, in decimal.
    Whole(String),
    /// Any other number: negative or with a fraction.
    Number(String),
    Bool,
    Null,
    Sequence,
    Mapping,
}

/// Why no value could be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("not valid {format} ({what}{})", At(*.line, *.column))]
    Syntax {
        format: &'static str,
        what: &'static str,
        line: u64,
        column: u64,
    },
    #[error("nothing at {0}")]
    NotFound(String),
    #[error("{0} is not an RFC 6901 pointer (it must be empty or start with /)")]
    BadPointer(String),
}

struct At(u64, u64);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 > 0 {
            write!(f, " at line {}, column {}", self.0, self.1)?;
        }
        Ok(())
    }
}

/// Nesting deeper than this is refused; real configs are far shallower.
pub(crate) const MAX_DEPTH: usize = 64;

/// Reads the value at `pointer` in a JSON document.
pub(crate) fn json(text: &str, pointer: &str) -> Result<Found, Error> {
    let tokens = tokens(pointer)?;
    let mut de = serde_json::Deserializer::from_str(text);
    let found = Seek { tokens: &tokens }
        .deserialize(&mut de)
        .and_then(|f| de.end().map(|()| f))
        .map_err(json_error)?;
    found.ok_or_else(|| Error::NotFound(pointer.to_owned()))
}

/// Reads the value at `pointer` in a single YAML document. Merge keys (`<<`) are applied.
pub(crate) fn yaml(text: &str, pointer: &str) -> Result<Found, Error> {
    let tokens = tokens(pointer)?;
    let found = serde_saphyr::with_deserializer_from_str_with_options(
        text,
        yaml_options(text.len()),
        |de| Seek { tokens: &tokens }.deserialize(de),
    )
    .map_err(|e| yaml_error(&e))?;
    found.ok_or_else(|| Error::NotFound(pointer.to_owned()))
}

/// Parser options for untrusted YAML: no error snippets (they quote the document), duplicate keys
/// refused, merge keys applied, and budgets that scale with the input so that any document a
/// ConfigMap can hold is read while alias replay stays bounded.
pub fn yaml_options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    // Every node costs at least one byte of input, and at most two events (start and end).
    budget.max_nodes = budget.max_nodes.max(len.saturating_add(16));
    budget.max_events = budget
        .max_events
        .max(len.saturating_mul(2).saturating_add(32));
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options.merge_keys = serde_saphyr::MergeKeyPolicy::Merge;
    // YAML 1.2 core booleans only: `y`, `on` and `yes` stay strings, as they were before.
    options.strict_booleans = true;
    options
}

fn tokens(pointer: &str) -> Result<Vec<String>, Error> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let rest = pointer
        .strip_prefix('/')
        .ok_or_else(|| Error::BadPointer(pointer.to_owned()))?;
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn json_error(e: serde_json::Error) -> Error {
    use serde_json::error::Category;
    // serde_json's syntax messages are fixed texts, but a data error may quote a value; describe
    // by category and a short list of known causes only.
    let text = e.to_string();
    let what = match e.classify() {
        Category::Eof => "unexpected end of input",
        Category::Syntax if text.starts_with("recursion limit exceeded") => "nested too deeply",
        Category::Syntax if text.starts_with("trailing characters") => "more than one value",
        Category::Syntax if text.starts_with("number out of range") => "number out of range",
        Category::Syntax if text.starts_with("invalid escape") => "invalid escape",
        Category::Syntax if text.starts_with("control character") => {
            "control character in a string"
        }
        Category::Syntax => "syntax error",
        Category::Data | Category::Io => "unreadable value",
    };
    Error::Syntax {
        format: "JSON",
        what,
        line: e.line() as u64,
        column: e.column() as u64,
    }
}

/// A YAML error as what and where, never the document's text (a snippet or a value it quotes).
pub fn yaml_error(e: &serde_saphyr::Error) -> Error {
    use serde_saphyr::Error as Y;
    let inner = match e {
        #[allow(deprecated)]
        Y::AliasError { error, .. } => error.as_ref(),
        other => other,
    };
    let what = match inner {
        Y::Eof { .. } => "unexpected end of input",
        Y::MultipleDocuments { .. } => "more than one document",
        Y::DuplicateMappingKey { .. } => "a mapping key is repeated",
        Y::MergeValueNotMapOrSeqOfMaps { .. } => {
            "a merge key (<<) names something other than a mapping"
        }
        Y::AliasReplayCounterOverflow { .. }
        | Y::AliasReplayLimitExceeded { .. }
        | Y::AliasExpansionLimitExceeded { .. }
        | Y::AliasReplayStackDepthExceeded { .. } => "aliases expand too far",
        Y::UnknownAnchor { .. } => "an alias names no anchor",
        Y::InvalidScalar { .. } | Y::NonFiniteFloat { .. } => {
            "a scalar does not parse as its type or tag"
        }
        Y::Budget { .. } => "nested too deeply or too large",
        Y::InvalidUtf8Input => "not UTF-8",
        Y::ExternalMessage { .. } => "syntax error",
        _ => "unreadable value",
    };
    let (line, column) = e
        .location()
        .or_else(|| inner.location())
        .map_or((0, 0), |l| (l.line(), l.column()));
    Error::Syntax {
        format: "YAML",
        what,
        line,
        column,
    }
}

/// Descends along `tokens`; `None` when the document has nothing there.
struct Seek<'p> {
    tokens: &'p [String],
}

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = Option<Found>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.tokens.is_empty() {
            d.deserialize_any(Leaf).map(Some)
        } else {
            d.deserialize_any(self)
        }
    }
}

macro_rules! scalar_is_not_a_container {
    ($($f:ident: $t:ty),*) => {
        $(fn $f<E: de::Error>(self, _: $t) -> Result<Self::Value, E> { Ok(None) })*
    };
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = Option<Found>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    scalar_is_not_a_container!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_i128: i128,
        visit_u128: u128, visit_f64: f64, visit_str: &str, visit_bytes: &[u8]);

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (token, rest) = self
            .tokens
            .split_first()
            .expect("non-empty: checked by the seed");
        let mut found = None;
        while let Some(hit) = map.next_key_seed(KeyIs(token))? {
            if hit {
                // Last one wins, as in a tree (JSON allows repeats; YAML refuses them earlier).
                found = map.next_value_seed(Seek { tokens: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let (token, rest) = self
            .tokens
            .split_first()
            .expect("non-empty: checked by the seed");
        // RFC 6901: an index is digits without a leading zero (no sign, no `-` past the end).
        let canonical = token.bytes().all(|b| b.is_ascii_digit())
            && (token.len() == 1 || !token.starts_with('0'));
        let index = canonical.then(|| token.parse::<usize>().ok()).flatten();
        let mut found = None;
        let mut i = 0usize;
        loop {
            let step = if Some(i) == index {
                seq.next_element_seed(Seek { tokens: rest })?
                    .map(|f| found = f)
            } else {
                seq.next_element::<IgnoredAny>()?.map(|_| ())
            };
            if step.is_none() {
                return Ok(found);
            }
            i += 1;
        }
    }
}

/// Whether a mapping key is the pointer's token; keys that are not strings never are.
struct KeyIs<'t>(&'t str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// Reads the value the pointer names: scalars as found, containers skipped.
struct Leaf;

impl<'de> Visitor<'de> for Leaf {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Found, E> {
        Ok(Found::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Found, E> {
        Ok(Found::Str(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Found, E> {
        Ok(Found::Bool)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Found, E> {
        Ok(Found::Whole(v.to_string()))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Found, E> {
        Ok(Found::Whole(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Found, E> {
        self.visit_i128(i128::from(v))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Found, E> {
        Ok(if v >= 0 {
            Found::Whole(v.to_string())
        } else {
            Found::Number(v.to_string())
        })
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Found, E> {
        Ok(Found::Number(v.to_string()))
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Found, E> {
        Ok(Found::Sequence)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Found, E> {
        Ok(Found::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Found, E> {
        Ok(Found::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::Sequence)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Found::Mapping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn y(text: &str, pointer: &str) -> Result<Found, Error> {
        yaml(text, pointer)
    }

    #[test]
    fn merge_keys_are_applied() {
        let doc =
            "base: &base\n  schema:\n    version: 2.4.1\n  x: 1\ncomponent:\n  <<: *base\n  x: 2\n";
        assert_eq!(
            y(doc, "/component/schema/version"),
            Ok(Found::Str("2.4.1".into()))
        );
        // An explicit key wins over the merged one, as in the components' YAML libraries.
        assert_eq!(y(doc, "/component/x"), Ok(Found::Whole("2".into())));
        let list = "a: &a {version: 1.0.0}\nb: &b {other: 1}\nc:\n  <<: [*b, *a]\n";
        assert_eq!(y(list, "/c/version"), Ok(Found::Str("1.0.0".into())));
    }

    #[test]
    fn pointers_walk_mappings_and_sequences_only() {
        let doc = "a:\n  - x\n  - {v: 3}\nn: 7\n";
        assert_eq!(y(doc, "/a/1/v"), Ok(Found::Whole("3".into())));
        assert_eq!(y(doc, "/a/01/v"), Err(Error::NotFound("/a/01/v".into())));
        assert_eq!(y(doc, "/a/+1/v"), Err(Error::NotFound("/a/+1/v".into())));
        assert_eq!(y(doc, "/n/0"), Err(Error::NotFound("/n/0".into())));
        assert_eq!(y(doc, ""), Ok(Found::Mapping));
        assert_eq!(y(doc, "/a"), Ok(Found::Sequence));
        assert_eq!(
            json(r#"{"a":[1,{"v":"2.0"}],"a":[{"v":"9"}]}"#, "/a/0/v"),
            Ok(Found::Str("9".into())),
            "a repeated JSON key: the last one wins"
        );
        assert_eq!(
            json("[1] [2]", "/0").unwrap_err().to_string(),
            "not valid JSON (more than one value at line 1, column 5)"
        );
    }

    #[test]
    fn content_is_never_in_yaml_errors() {
        let secret = "hunter2hunter2hunter2";
        let cases = [
            (
                format!("a: !!int {secret}\nversion: 1.0.0\n"),
                "a scalar does not parse",
            ),
            (
                format!("{secret}: 1\n{secret}: 2\nversion: 1.0.0\n"),
                "a mapping key is repeated",
            ),
            (format!("version: 1.0.0\nb: \"{secret}\n"), "syntax error"),
            (format!("version: [{secret}\n"), "syntax error"),
            (
                format!("version: 1\n---\nx: {secret}\n"),
                "more than one document",
            ),
        ];
        for (doc, what) in cases {
            let e = y(&doc, "/version").unwrap_err().to_string();
            assert!(e.contains(what), "{e:?} lacks {what:?} for {doc:?}");
            assert!(e.contains(" at line "), "{e:?} has no position");
            assert!(!e.contains("hunter2"), "{e:?} quotes content");
        }
        // A 20-39 digit number elsewhere in the document is skipped, not reported.
        let big = format!("n: {}\nversion: 1.0.0\n", "7".repeat(39));
        assert_eq!(y(&big, "/version"), Ok(Found::Str("1.0.0".into())));
    }

    #[test]
    fn hostile_shapes_are_refused_or_read() {
        // Refused before the recursion can exhaust a 2 MiB thread stack (this test's), even unoptimised.
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(matches!(y(&deep, "/0"), Err(Error::Syntax { .. })));
        let inside = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH - 2),
            "]".repeat(MAX_DEPTH - 2)
        );
        assert_eq!(y(&inside, "/0"), Ok(Found::Sequence));
        // JSON skips what the pointer does not name without recursion, so depth costs no stack there;
        // along the pointer serde_json's own limit of 128 applies.
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(json(&deep, "/0"), Ok(Found::Sequence));
        let along = format!("/{}", vec!["0"; 200].join("/"));
        assert!(matches!(
            json(&deep, &along),
            Err(Error::Syntax {
                what: "nested too deeply",
                ..
            })
        ));
        // Wide and flat is fine, whatever its size: a ConfigMap can hold 1 MiB of it.
        let flat = format!("[{}[1,2]]", "[1,2],".repeat(200_000));
        assert_eq!(y(&flat, "/200000/1"), Ok(Found::Whole("2".into())));
        assert_eq!(json(&flat, "/200000/1"), Ok(Found::Whole("2".into())));
    }
}
