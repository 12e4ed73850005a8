//! Bounded pieces of reasons: a list of names cut to a few with "and N more", a name cut at a character
//! boundary, its control characters escaped. Every reason that lists keys, variants or problems lists
//! them through here, so a reason's length does not grow with what the ConfigMap holds, and a name (a
//! file in a git checkout may hold a newline) cannot start a line of its own in line-based output.
//! Pure.
//!
//! A list shows the first five names, each with its control characters escaped (`one_line`) and cut
//! at 253 bytes on a character boundary, then "and N more"; the volume read's reasons and every
//! line of the text endpoints go through `one_line` too. `nearest` is the one rule of "did you
//! mean", for flags (`cli::suggest`) and annotations (`settings`) alike.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Names a list shows before it says how many more there are.
pub const MAX_NAMES: usize = 5;
/// The longest name shown whole, in bytes (a ConfigMap key is at most 253); longer ones are cut.
pub const MAX_NAME: usize = 253;

/// `a, b, c` or `a, b, c, d, e and 995 more`: the first [`MAX_NAMES`] of `names`, each cut by [`name`],
/// then how many were left out. `total` is the list's full length when the iterator is lazy about it
/// (`None`: count the iterator).
pub fn names<I>(names: I, total: Option<usize>) -> String
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    listed(names, total, |out, n| out.push_str(&name(n.as_ref())))
}

/// [`names`] for entries that are not plain names: `show` writes one entry, which must itself be
/// bounded (a name and a bounded reason).
pub fn listed<I, F>(items: I, total: Option<usize>, mut show: F) -> String
where
    I: IntoIterator,
    F: FnMut(&mut String, I::Item),
{
    let mut out = String::new();
    let mut seen = 0usize;
    let mut items = items.into_iter();
    for item in items.by_ref().take(MAX_NAMES) {
        if seen > 0 {
            out.push_str(", ");
        }
        show(&mut out, item);
        seen += 1;
    }
    let total = total.unwrap_or_else(|| seen + items.count());
    if total > seen {
        let _ = write!(out, " and {} more", total - seen);
    }
    out
}

/// `name` made [`one_line`], whole up to [`MAX_NAME`] bytes, else cut at a character boundary with
/// `…` and its length.
pub fn name(name: &str) -> String {
    cut(&one_line(name), MAX_NAME)
}

/// Whether `c` would break a line, or hide or reorder what follows, where text is shown as lines.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// `text` with every control character (newline, carriage return, escape, ...) and Unicode line or
/// paragraph separator written as its Rust escape (`\n`, `\u{1b}`), so it is one line whatever it
/// holds. Borrowed when there is nothing to escape.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` whole up to `max` bytes, else its first characters within `max` bytes, `…` and its length.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The name of `known` nearest `typed`, when it is near enough to be what was meant: at most a third of
/// the typed name's edits away, and at least two (a transposed pair), as `acept` is from `accepts` and
/// `relaod` from `reload`. The one rule for "did you mean" on flags and annotations alike.
pub fn nearest<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let room = (typed.chars().count() / 3).max(2);
    known
        .into_iter()
        .map(|k| (edits(typed, k), k))
        .filter(|(d, _)| *d <= room)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The Levenshtein distance between two names.
pub fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(prev + usize::from(ca != *cb));
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A name with a newline (a git tree may hold one) cannot forge a line of its own.
    #[test]
    fn a_name_with_a_newline_or_other_control_character_is_escaped() {
        assert_eq!(name("app.yaml"), "app.yaml");
        assert_eq!(name("x\n[+]config ok: forged"), "x\\n[+]config ok: forged");
        assert_eq!(
            name("a\rb\u{1b}[2Jc\u{2028}d"),
            "a\\rb\\u{1b}[2Jc\\u{2028}d"
        );
        assert_eq!(names(["a\nb", "c"], None), "a\\nb, c");
        assert!(matches!(one_line("plain: ünï"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_lists_are_whole_and_long_ones_counted() {
        assert_eq!(names(Vec::<String>::new(), None), "");
        assert_eq!(names(["a"], None), "a");
        assert_eq!(names(["a", "b", "c", "d", "e"], None), "a, b, c, d, e");
        assert_eq!(
            names(["a", "b", "c", "d", "e", "f"], None),
            "a, b, c, d, e and 1 more"
        );
        let many: Vec<String> = (0..1000).map(|i| format!("k{i}")).collect();
        assert_eq!(names(&many, None), "k0, k1, k2, k3, k4 and 995 more");
        assert_eq!(names(&many[..6], Some(7)), "k0, k1, k2, k3, k4 and 2 more");
    }

    #[test]
    fn a_long_name_is_cut_at_a_character_boundary() {
        assert_eq!(name("config.yaml"), "config.yaml");
        let long = "é".repeat(200);
        let shown = name(&long);
        assert!(shown.ends_with("… (400 bytes)"), "{shown}");
        assert!(shown.len() < MAX_NAME + 20, "{}", shown.len());
    }

    proptest! {
        /// Whatever the names, the listing is bounded and each name, escaped, is kept whole up to the
        /// cut.
        #[test]
        fn a_listing_is_bounded(list in prop::collection::vec("\\PC{0,400}", 0..50)) {
            let shown = names(&list, None);
            prop_assert!(shown.len() <= MAX_NAMES * (MAX_NAME + 32) + 32, "{}", shown.len());
            for n in list.iter().take(MAX_NAMES) {
                let c = name(n);
                prop_assert!(one_line(n).starts_with(c.split('…').next().unwrap()));
                prop_assert!(!c.contains('\n'));
            }
        }
    }
}
