//! The kubelet's downward-API annotations file: `key="value"` lines, values quoted by Go's `strconv.Quote`.
//!
//! Parsing is pure; [`read_file`] is the one read of the file. The kubelet writes keys sorted, one per line, with no trailing newline
//! (`pkg/fieldpath/fieldpath.go` `FormatMap`); neither JSON nor Rust escapes match Go's quoting, so
//! the unquoter below follows `strconv.Unquote` for double-quoted strings.

use std::collections::BTreeMap;
use std::path::Path;

/// Annotations by key, as the pod carries them.
pub type Annotations = BTreeMap<String, String>;

/// Why an annotations file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A line is not `key="value"`.
    #[error("annotations file line {line}: expected key=\"value\", found no '='")]
    NoEquals { line: usize },
    /// The value is not a Go double-quoted string.
    #[error("annotations file line {line} (key {key}): {what}")]
    BadQuote {
        line: usize,
        key: String,
        what: String,
    },
}

/// Reads and parses the annotations file; an absent file is no annotations. `Err` says why the file
/// could not be used, naming the file (and line), never a value.
pub fn read_file(path: &Path) -> Result<Annotations, String> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("annotations file {} is not UTF-8", path.display()))?;
            parse(&text).map_err(|e| format!("{}: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Annotations::new()),
        Err(e) => Err(format!(
            "cannot read annotations file {}: {e}",
            path.display()
        )),
    }
}

/// Parses the whole file. Blank lines are skipped so a hand-written file with a final newline also works.
pub fn parse(text: &str) -> Result<Annotations, Error> {
    let mut out = Annotations::new();
    for (idx, raw) in text.split('\n').enumerate() {
        let line = idx + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let (key, quoted) = raw.split_once('=').ok_or(Error::NoEquals { line })?;
        let value = unquote(quoted).map_err(|what| Error::BadQuote {
            line,
            key: key.to_owned(),
            what,
        })?;
        out.insert(key.to_owned(), value);
    }
    Ok(out)
}

/// Go `strconv.Unquote` for a double-quoted string whose result must be UTF-8.
pub fn unquote(s: &str) -> Result<String, String> {
    let inner = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|_| s.len() >= 2)
        .ok_or_else(|| "value is not enclosed in double quotes".to_owned())?;
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Err("unescaped '\"' inside the value".to_owned()),
            '\n' => return Err("raw newline inside the value".to_owned()),
            '\\' => unescape(&mut chars, &mut out)?,
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    String::from_utf8(out).map_err(|e| {
        format!(
            "value is not UTF-8 after unquoting (byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn unescape(chars: &mut std::str::Chars<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    let c = chars.next().ok_or("value ends with a lone backslash")?;
    let simple = match c {
        'a' => Some(0x07),
        'b' => Some(0x08),
        'f' => Some(0x0c),
        'n' => Some(b'\n'),
        'r' => Some(b'\r'),
        't' => Some(b'\t'),
        'v' => Some(0x0b),
        '\\' => Some(b'\\'),
        '"' => Some(b'"'),
        _ => None,
    };
    if let Some(b) = simple {
        out.push(b);
        return Ok(());
    }
    match c {
        'x' => out.push(hex(chars, 2)? as u8),
        'u' | 'U' => {
            let n = if c == 'u' { 4 } else { 8 };
            let code = hex(chars, n)?;
            let ch = char::from_u32(code)
                .ok_or_else(|| format!("\\{c}{code:0n$x} is not a Unicode scalar value"))?;
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        }
        '0'..='7' => {
            let mut v = c.to_digit(8).unwrap_or(0);
            for _ in 0..2 {
                let d = chars
                    .next()
                    .and_then(|d| d.to_digit(8))
                    .ok_or("octal escape needs three digits")?;
                v = v * 8 + d;
            }
            let b = u8::try_from(v).map_err(|_| format!("octal escape \\{v:o} is over 255"))?;
            out.push(b);
        }
        other => return Err(format!("unknown escape \\{other}")),
    }
    Ok(())
}

fn hex(chars: &mut std::str::Chars<'_>, n: usize) -> Result<u32, String> {
    let mut v = 0u32;
    for _ in 0..n {
        let d = chars
            .next()
            .and_then(|d| d.to_digit(16))
            .ok_or_else(|| format!("hex escape needs {n} hex digits"))?;
        v = v * 16 + d;
    }
    Ok(v)
}

/// Go `strconv.Quote`, for writing annotation files in tests and tools.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Formats annotations exactly as the kubelet does: sorted keys, no trailing newline.
pub fn format(annotations: &Annotations) -> String {
    annotations
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_kubelet_example() {
        let text = "gate.example.com/config-key=\"app.yaml\"\n\
                    gate.example.com/supported-range=\">=1.2.0, <2.0.0\"\n\
                    kubernetes.io/config.seen=\"2026-11-29T22:31:14.123456789Z\"\n\
                    notes=\"line1\\nsaid \\\"hi\\\"\\tcafé\"";
        let a = parse(text).unwrap();
        assert_eq!(a["gate.example.com/supported-range"], ">=1.2.0, <2.0.0");
        assert_eq!(a["notes"], "line1\nsaid \"hi\"\tcafé");
        assert_eq!(a.len(), 4);
    }

    #[test]
    fn empty_file_is_no_annotations() {
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn escapes_follow_go() {
        for (quoted, want) in [
            (r#""\x41\u00e9\U0001F600""#, "Aé😀"),
            (r#""\a\b\f\v\r""#, "\x07\x08\x0c\x0b\r"),
            (r#""\101""#, "A"),
            (r#""a=b""#, "a=b"),
        ] {
            assert_eq!(unquote(quoted).unwrap(), want, "{quoted}");
        }
    }

    #[test]
    fn bad_lines_name_the_line_and_the_problem() {
        assert_eq!(
            parse("a=\"1\"\nb").unwrap_err(),
            Error::NoEquals { line: 2 }
        );
        let e = parse("a=\"1\"\nb=2").unwrap_err().to_string();
        assert!(
            e.contains("line 2") && e.contains("key b") && e.contains("double quotes"),
            "{e}"
        );
        let e = parse("k=\"\\q\"").unwrap_err().to_string();
        assert!(e.contains("unknown escape \\q"), "{e}");
        let e = parse("k=\"\\xff\"").unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        let e = parse("k=\"abc").unwrap_err().to_string();
        assert!(e.contains("double quotes"), "{e}");
    }

    proptest! {
        #[test]
        fn quote_then_parse_round_trips(map in proptest::collection::btree_map("[a-z]{1,8}(\\.io/[a-z-]{1,8})?", "\\PC*|[\\x00-\\x7f]*", 0..6)) {
            let text = format(&map);
            prop_assert!(!text.ends_with('\n'));
            prop_assert_eq!(parse(&text).unwrap(), map);
        }

        #[test]
        fn never_panics_on_arbitrary_text(text in "\\PC{0,64}") {
            let _ = parse(&text);
        }
    }
}
