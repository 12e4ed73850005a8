//! The kubelet's downward-API annotations file: `key="value"` lines, values quoted by Go's `strconv.Quote`.
//!
//! Parsing is pure; the one read of the file is the edge's (`confgate::annotations::read_file`). The
//! kubelet writes keys sorted, one per line, with no trailing newline
//! (`pkg/fieldpath/fieldpath.go` `FormatMap`); neither JSON nor Rust escapes match Go's quoting, so
//! the unquoter below follows `strconv.Unquote` for double-quoted strings. A bad value outside
//! `confgate.io/` is skipped, not fatal to the file.

use std::collections::BTreeMap;

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
        what: Unquote,
    },
}

/// Why an annotations file could not be used. Names the file (and line), never a value.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read annotations file {}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("annotations file {} is not a regular file", .0.display())]
    NotAFile(std::path::PathBuf),
    #[error("annotations file {} is over {MAX_BYTES} bytes", .0.display())]
    TooBig(std::path::PathBuf),
    #[error("{}: {source}", path.display())]
    Parse {
        path: std::path::PathBuf,
        source: Error,
    },
}

/// Why a value is not a Go double-quoted string whose result is UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unquote {
    #[error("line is not UTF-8 text")]
    LineNotUtf8,
    #[error("value is not enclosed in double quotes")]
    NotQuoted,
    #[error("unescaped '\"' inside the value")]
    InnerQuote,
    #[error("raw newline inside the value")]
    Newline,
    #[error("value is not UTF-8 after unquoting (byte {0})")]
    NotUtf8(usize),
    #[error("value ends with a lone backslash")]
    LoneBackslash,
    #[error("\\{escape}{code:0width$x} is not a Unicode scalar value")]
    NotScalar {
        escape: char,
        code: u32,
        width: usize,
    },
    #[error("octal escape needs three digits")]
    OctalDigits,
    #[error("octal escape \\{0:o} is over 255")]
    OctalOver(u32),
    #[error("unknown escape \\{0}")]
    UnknownEscape(char),
    #[error("hex escape needs {0} hex digits")]
    HexDigits(usize),
}

/// The most the kubelet writes: the API server caps a pod's annotations at 256 KiB in total.
pub const MAX_BYTES: u64 = 256 * 1024;

/// A read's error, shared, as the decision loop's `Event::Annotations` carries it.
pub type ReadFailure = crate::failure::Failure<ReadError>;

/// Parses the whole file. Blank lines are skipped so a hand-written file with a final newline also works.
pub fn parse(text: &str) -> Result<Annotations, Error> {
    parse_bytes(text.as_bytes())
}

/// Whether a bad value under `key` makes the file unusable: only confgate's own settings do; another
/// annotation confgate does not read is skipped, so it cannot discard the settings beside it.
fn ours(key: &str) -> bool {
    key.starts_with("confgate.io/")
}

/// [`parse`] over bytes: a line that is not UTF-8 is judged like a bad value on that line.
pub fn parse_bytes(bytes: &[u8]) -> Result<Annotations, Error> {
    let mut out = Annotations::new();
    for (idx, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = idx + 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let eq = raw
            .iter()
            .position(|b| *b == b'=')
            .ok_or(Error::NoEquals { line })?;
        let key = String::from_utf8_lossy(&raw[..eq]).into_owned();
        let value = std::str::from_utf8(&raw[eq + 1..])
            .map_err(|_| Unquote::LineNotUtf8)
            .and_then(unquote);
        match value {
            Ok(v) => {
                out.insert(key, v);
            }
            Err(what) if ours(&key) => return Err(Error::BadQuote { line, key, what }),
            Err(_) => {}
        }
    }
    Ok(out)
}

/// Go `strconv.Unquote` for a double-quoted string whose result must be UTF-8.
pub(crate) fn unquote(s: &str) -> Result<String, Unquote> {
    let inner = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|_| s.len() >= 2)
        .ok_or(Unquote::NotQuoted)?;
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Err(Unquote::InnerQuote),
            '\n' => return Err(Unquote::Newline),
            '\\' => unescape(&mut chars, &mut out)?,
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    String::from_utf8(out).map_err(|e| Unquote::NotUtf8(e.utf8_error().valid_up_to()))
}

fn unescape(chars: &mut std::str::Chars<'_>, out: &mut Vec<u8>) -> Result<(), Unquote> {
    let c = chars.next().ok_or(Unquote::LoneBackslash)?;
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
            let ch = char::from_u32(code).ok_or(Unquote::NotScalar {
                escape: c,
                code,
                width: n,
            })?;
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        }
        '0'..='7' => {
            let mut v = c.to_digit(8).unwrap_or(0);
            for _ in 0..2 {
                let d = chars
                    .next()
                    .and_then(|d| d.to_digit(8))
                    .ok_or(Unquote::OctalDigits)?;
                v = v * 8 + d;
            }
            let b = u8::try_from(v).map_err(|_| Unquote::OctalOver(v))?;
            out.push(b);
        }
        other => return Err(Unquote::UnknownEscape(other)),
    }
    Ok(())
}

fn hex(chars: &mut std::str::Chars<'_>, n: usize) -> Result<u32, Unquote> {
    let mut v = 0u32;
    for _ in 0..n {
        let d = chars
            .next()
            .and_then(|d| d.to_digit(16))
            .ok_or(Unquote::HexDigits(n))?;
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

/// A read that failed with `why`, for tests of what the loop does with one.
#[cfg(test)]
pub(crate) fn unreadable(why: &str) -> ReadFailure {
    ReadFailure::new(ReadError::Io {
        path: "/etc/podinfo/annotations".into(),
        source: std::io::Error::other(why.to_owned()),
    })
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
        let e = parse("a=\"1\"\nconfgate.io/mode=2")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2")
                && e.contains("key confgate.io/mode")
                && e.contains("double quotes"),
            "{e}"
        );
        let e = parse("confgate.io/x=\"\\q\"").unwrap_err().to_string();
        assert!(e.contains("unknown escape \\q"), "{e}");
        let e = parse("confgate.io/x=\"\\xff\"").unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        let e = parse("confgate.io/x=\"abc").unwrap_err().to_string();
        assert!(e.contains("double quotes"), "{e}");
        // Each cause is its own variant, its message the one users have always read.
        for (quoted, why, said) in [
            (
                "\"\\ud800\"",
                Unquote::NotScalar {
                    escape: 'u',
                    code: 0xd800,
                    width: 4,
                },
                "\\ud800 is not a Unicode scalar value",
            ),
            (
                "\"\\777\"",
                Unquote::OctalOver(0o777),
                "octal escape \\777 is over 255",
            ),
            (
                "\"\\x1\"",
                Unquote::HexDigits(2),
                "hex escape needs 2 hex digits",
            ),
        ] {
            let e = unquote(quoted).unwrap_err();
            assert_eq!(e, why, "{quoted}");
            assert_eq!(e.to_string(), said, "{quoted}");
        }
    }

    #[test]
    fn a_bad_value_in_another_annotation_keeps_the_others() {
        let mut text = b"confgate.io/accepts=\"^2\"\nnotes=\"\\xff\"\nraw=\"".to_vec();
        text.extend_from_slice(&[0xff, 0xfe]);
        text.extend_from_slice(b"\"\nconfgate.io/mode=\"observe\"");
        let a = parse_bytes(&text).unwrap();
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(a["confgate.io/accepts"], "^2");
        assert_eq!(a["confgate.io/mode"], "observe");
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
