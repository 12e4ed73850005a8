//! Hostile configs judged within bounds: alias bombs, deep nesting, huge numbers, and no error that
//! quotes the document.

use super::tests::{settings, snap};
use super::*;
use crate::settings::Settings;
use proptest::prelude::*;

#[test]
fn yaml_alias_bomb_is_invalid_not_a_hang() {
    let mut doc = String::from("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n");
    for i in 1..12 {
        let prev = (b'a' + i - 1) as char;
        let cur = (b'a' + i) as char;
        doc.push_str(&format!("{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
    }
    doc.push_str("version: 1.0.0\n");
    let j = judge(
        &snap(&[("c.yaml", doc.as_bytes())]),
        &settings(Some("^1"), "yaml:c.yaml#/version", &[]),
    );
    assert_eq!(j.verdict, Verdict::Invalid, "{}", j.reason);
}

#[test]
fn deep_nesting_is_invalid() {
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let j = judge(
        &snap(&[("c.json", deep.as_bytes())]),
        &settings(Some("^1"), "json:c.json#/0", &[]),
    );
    assert_eq!(j.verdict, Verdict::Invalid);
    let j = judge(
        &snap(&[("c.yaml", deep.as_bytes())]),
        &settings(Some("^1"), "yaml:c.yaml#/0", &[]),
    );
    assert_eq!(j.verdict, Verdict::Invalid);
}

#[test]
fn huge_numbers_are_invalid() {
    let j = judge(
        &snap(&[("version", b"99999999999999999999999.0.0")]),
        &settings(Some("^1"), "file:version", &[]),
    );
    assert_eq!(j.verdict, Verdict::Invalid);
}

fn judged_reason(text: &str, from: &str) -> (String, Option<String>) {
    let settings = Settings {
        accepts: Some(crate::values::parse_accepts("^1").unwrap()),
        version_from: from.parse().unwrap(),
        ..Settings::default()
    };
    let files = [("c.yaml".to_owned(), text.as_bytes().to_vec())].into();
    let j = crate::verdict::judge(&Observed::Config(Snapshot::new(files)), &settings);
    (j.reason, j.version)
}

fn fragment() -> impl Strategy<Value = String> {
    let secret = "[a-z][a-z0-9]{11,24}";
    prop_oneof![
        secret.prop_map(|s| format!("k: {s}")),
        secret.prop_map(|s| format!("k: !!int {s}")),
        secret.prop_map(|s| format!("k: !!float {s}")),
        "[1-9][0-9]{19,38}".prop_map(|s| format!("k: {s}")),
        "[1-9][0-9]{19,38}".prop_map(|s| format!("version: {s}")),
        secret.prop_map(|s| format!("{s}: 1\n{s}: 2")),
        secret.prop_map(|s| format!("k: [{s}")),
        secret.prop_map(|s| format!("k: \"{s}")),
        secret.prop_map(|s| format!("k: *{s}")),
        secret.prop_map(|s| format!("k: {{{s}: ]")),
        secret.prop_map(|s| format!("- {s}")),
        secret.prop_map(String::from),
        secret.prop_map(|s| format!("---\n{s}: x")),
        secret.prop_map(|s| format!("version: {{a: {s}}}")),
        Just("version: 1.0.0".to_owned()),
        Just("  ".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// No error text holds a run of the input longer than 8 bytes that is not a key name, the
    /// pointer or the version read. Runs are taken from the scalars (letters and digits): YAML
    /// punctuation next to a key name (`version: `) is no content.
    #[test]
    fn no_error_quotes_the_document(parts in prop::collection::vec(fragment(), 1..6)) {
        let text = parts.join("\n");
        for from in ["yaml:c.yaml#/version", "json:c.yaml#/version", "file:c.yaml"] {
            let (reason, version) = judged_reason(&text, from);
            let allowed = [from, "version", "c.yaml", version.as_deref().unwrap_or("")];
            let bytes = text.as_bytes();
            for w in bytes.windows(9) {
                if !w.iter().all(u8::is_ascii_alphanumeric) {
                    continue;
                }
                let Ok(w) = std::str::from_utf8(w) else { continue };
                if reason.contains(w) && !allowed.iter().any(|a| a.contains(w)) {
                    prop_assert!(false, "{from}: {reason:?} quotes {w:?} of {text:?}");
                }
            }
        }
    }
}
