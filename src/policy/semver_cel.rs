//! The sidecar's version reading (`verdict::parse_lenient`) and range matching (the `semver`
//! crate's `VersionReq::matches`) as one CEL expression, without Kubernetes' `semver` library.
//!
//! The library cannot reproduce the sidecar: its normalisation strips leading zeros (which the sidecar
//! rejects), refuses `2.4-rc.1` (which the sidecar reads as `2.4.0-rc.1`), keeps an upper-case `V`, and
//! it has no range function. So the version is checked against one regular expression (the exact set
//! `parse_lenient` accepts), split into numbers with string functions, and every comparator of the range
//! is compiled into comparisons of constants, mirroring the `semver` crate's `eval.rs` branch by branch.
//! The refusal messages place and display the version the same way (`classify`, [`display`]), so they
//! can say what the sidecar says.
//! Only the CEL base library, the Kubernetes regex library (`find`) and the strings extension
//! (`split`, `indexOf`, `substring`) are used: all are in the environment from Kubernetes 1.29.

use semver::{Comparator, Op, Prerelease, VersionReq};

/// Every character Rust's `str::trim` removes (Unicode `White_Space`), as RE2 and Rust regex both read it.
pub(crate) const WS: &str = r"[\x{09}-\x{0D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]";
/// A numeric identifier: no leading zero.
const NUM: &str = "(0|[1-9][0-9]*)";
/// A pre-release identifier: numeric without a leading zero, or alphanumeric with at least one non-digit.
const PRE_ID: &str = "(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)";
const BUILD_ID: &str = "[0-9A-Za-z-]+";

/// The longest version accepted, as in the verdict.
pub(crate) const MAX_VERSION_LEN: usize = 256;

/// The whole value of the version key, as `parse_lenient` accepts it after `trim`.
pub(crate) fn lenient_regex() -> String {
    format!(
        r"^{WS}*[vV]?{NUM}(\.{NUM}){{0,2}}(-{PRE_ID}(\.{PRE_ID})*)?(\+{BUILD_ID}(\.{BUILD_ID})*)?{WS}*$"
    )
}

/// The version as written (without surrounding white space), once the value matched [`lenient_regex`].
pub(crate) const TOKEN_REGEX: &str = "[0-9A-Za-z.+-]+";

/// A CEL string: the string expression `value` without the white space `str::trim` removes (empty when
/// it is all white space), as the sidecar reads a `file:` key before judging it.
pub fn trimmed(value: &str) -> String {
    let not_ws = format!("[^{}]", &WS[1..WS.len() - 1]);
    // `(?s)`: a line break inside the value belongs to it, as it does for `trim`.
    format!(
        "{value}.find({})",
        lit(&format!("(?s){not_ws}(.*{not_ws})?"))
    )
}

/// A CEL boolean over `n` (the version's one to three numbers as decimal strings, no leading zeros):
/// whether one is beyond 64 bits. The sidecar refuses such a version as unreadable; `uint()` would raise
/// an error, and an error would replace the policy's message with the evaluator's. Spelled out per index
/// rather than with `exists`, so a cost estimate does not take `n` to be as long as the whole value.
const OVERFLOW: &str = "((size(n[0]) > 20 || (size(n[0]) == 20 && n[0] > '18446744073709551615')) || \
     (size(n) > 1 && (size(n[1]) > 20 || (size(n[1]) == 20 && n[1] > '18446744073709551615'))) || \
     (size(n) > 2 && (size(n[2]) > 20 || (size(n[2]) == 20 && n[2] > '18446744073709551615'))))";

/// A CEL string: how the sidecar writes the version `t` (trimmed, matching `lenient_regex`, no number
/// beyond 64 bits) once parsed, `MAJOR.MINOR.PATCH[-PRE][+BUILD]`, as `semver::Version` displays it.
pub fn display(t: &str) -> String {
    format!(
        "[{t}].map(t, [t.split('+')[0]].map(h, [h.find('[0-9]+([.][0-9]+)*').split('.')].map(n, \
         n[0] + '.' + (size(n) > 1 ? n[1] : '0') + '.' + (size(n) > 2 ? n[2] : '0') + \
         (h.indexOf('-') >= 0 ? h.substring(h.indexOf('-')) : '') + \
         (t.indexOf('+') >= 0 ? t.substring(t.indexOf('+')) : ''))[0])[0])[0]"
    )
}

/// A CEL string for a version `t` (trimmed, matching [`lenient_regex`], no number beyond 64 bits):
/// `accepted`, `too-new`, `too-old` or `out-of-range`, as [`crate::verdict::classify`] places it.
pub(crate) fn classify(t: &str, req: &VersionReq) -> String {
    // As `classify`: each comparator is tried on the version's core (no pre-release); a failed lower
    // bound says too old, a failed upper bound too new, and any other operator by the side of its floor.
    let (mut low, mut high) = (Vec::new(), Vec::new());
    for cmp in &req.comparators {
        let fails = format!("!({})", matches_impl(cmp));
        match cmp.op {
            Op::Greater | Op::GreaterEq => low.push(fails),
            Op::Less | Op::LessEq => high.push(fails),
            _ => {
                let (a, b, p) = (cmp.major, cmp.minor.unwrap_or(0), cmp.patch.unwrap_or(0));
                let below = format!(
                    "(c[0] != {a}u ? c[0] < {a}u : (c[1] != {b}u ? c[1] < {b}u : c[2] < {p}u))"
                );
                low.push(format!("({fails} && {below})"));
                high.push(format!("({fails} && !{below})"));
            }
        }
    }
    let any = |v: Vec<String>| {
        if v.is_empty() {
            "false".to_owned()
        } else {
            v.join(" || ")
        }
    };
    format!(
        "[{t}].map(t, [t.split('+')[0]].map(h, [h.find('[0-9]+([.][0-9]+)*').split('.')].map(n, \
         [[uint(n[0]), size(n) > 1 ? uint(n[1]) : 0u, size(n) > 2 ? uint(n[2]) : 0u]].map(c, \
         [h.indexOf('-') >= 0 ? h.substring(h.indexOf('-') + 1).split('.') : []].all(r, {all}) ? 'accepted' : \
         [[[[]].all(r, {low}), [[]].all(r, {high})]].map(s, \
         s[0] && !s[1] ? 'too-old' : (s[1] && !s[0] ? 'too-new' : 'out-of-range'))[0])[0])[0])[0])[0]",
        all = matches_req(req),
        low = any(low),
        high = any(high),
    )
}

/// A CEL boolean over the trimmed value `t`: whether the sidecar reads it as a version.
pub(crate) fn readable(t: &str) -> String {
    format!(
        "[{t}].all(t, t.matches({re}) && [t.split('+')[0].find('[0-9]+([.][0-9]+)*').split('.')].all(n, !({OVERFLOW})))",
        re = lit(&lenient_regex())
    )
}

/// A CEL string literal for `s`.
pub(crate) fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A CEL boolean: whether the string expression `value` (the raw content of the version key) is a
/// version the sidecar reads and `req` admits. Errors (a number beyond 64 bits) fail closed, as the
/// sidecar's `Invalid` does.
pub fn accepts(value: &str, req: &VersionReq) -> String {
    // `[x].all(name, body)` binds a name over one value: CEL in Kubernetes 1.30 has no `cel.bind`
    // guaranteed, and VAP variables would not be seen by client-side evaluators.
    format!(
        "[{value}].all(s, s.matches({re}) && [s.find({tok})].all(t, size(t) <= {MAX_VERSION_LEN} && \
         [t.split('+')[0]].all(h, [h.find('[0-9]+([.][0-9]+)*').split('.')].all(n, !({OVERFLOW}) && \
         [[uint(n[0]), size(n) > 1 ? uint(n[1]) : 0u, size(n) > 2 ? uint(n[2]) : 0u]].all(c, \
         [h.indexOf('-') >= 0 ? h.substring(h.indexOf('-') + 1).split('.') : []].all(r, {body}))))))",
        re = lit(&lenient_regex()),
        tok = lit(TOKEN_REGEX),
        body = matches_req(req),
    )
}

/// `VersionReq::matches` over `c` (major, minor, patch as uints) and `r` (pre-release identifiers).
pub(crate) fn matches_req(req: &VersionReq) -> String {
    let all: Vec<String> = req.comparators.iter().map(matches_impl).collect();
    let compatible: Vec<String> = req
        .comparators
        .iter()
        .filter(|c| !c.pre.is_empty())
        .filter_map(|c| Some((c.major, c.minor?, c.patch?)))
        .map(|(a, b, p)| format!("(c[0] == {a}u && c[1] == {b}u && c[2] == {p}u)"))
        .collect();
    let mut pre_rule = String::from("size(r) == 0");
    for c in compatible {
        pre_rule.push_str(" || ");
        pre_rule.push_str(&c);
    }
    if all.is_empty() {
        format!("({pre_rule})")
    } else {
        format!("{} && ({pre_rule})", all.join(" && "))
    }
}

fn matches_impl(cmp: &Comparator) -> String {
    match cmp.op {
        Op::Exact | Op::Wildcard => exact(cmp),
        Op::Greater => greater(cmp),
        Op::GreaterEq => format!("({} || {})", exact(cmp), greater(cmp)),
        Op::Less => less(cmp),
        Op::LessEq => format!("({} || {})", exact(cmp), less(cmp)),
        Op::Tilde => tilde(cmp),
        Op::Caret => caret(cmp),
        _ => "false".into(),
    }
}

fn exact(cmp: &Comparator) -> String {
    let mut parts = vec![format!("c[0] == {}u", cmp.major)];
    if let Some(m) = cmp.minor {
        parts.push(format!("c[1] == {m}u"));
    }
    if let Some(p) = cmp.patch {
        parts.push(format!("c[2] == {p}u"));
    }
    parts.push(pre_eq(&cmp.pre));
    format!("({})", parts.join(" && "))
}

/// `ver > cmp` (`gt`) or `ver < cmp` (`!gt`), field by field as `matches_greater`/`matches_less`.
fn ordered(cmp: &Comparator, gt: bool) -> String {
    let op = if gt { ">" } else { "<" };
    let pre = if gt {
        pre_gt(&cmp.pre)
    } else {
        pre_lt(&cmp.pre)
    };
    let tail = match (cmp.minor, cmp.patch) {
        (None, _) => "false".to_owned(),
        (Some(m), None) => format!("(c[1] != {m}u ? c[1] {op} {m}u : false)"),
        (Some(m), Some(p)) => {
            format!("(c[1] != {m}u ? c[1] {op} {m}u : (c[2] != {p}u ? c[2] {op} {p}u : {pre}))")
        }
    };
    format!("(c[0] != {a}u ? c[0] {op} {a}u : {tail})", a = cmp.major)
}

fn greater(cmp: &Comparator) -> String {
    ordered(cmp, true)
}

fn less(cmp: &Comparator) -> String {
    ordered(cmp, false)
}

fn tilde(cmp: &Comparator) -> String {
    let mut parts = vec![format!("c[0] == {}u", cmp.major)];
    if let Some(m) = cmp.minor {
        parts.push(format!("c[1] == {m}u"));
    }
    let last = match cmp.patch {
        Some(p) => format!("(c[2] != {p}u ? c[2] > {p}u : {})", pre_ge(&cmp.pre)),
        None => pre_ge(&cmp.pre),
    };
    parts.push(last);
    format!("({})", parts.join(" && "))
}

fn caret(cmp: &Comparator) -> String {
    let a = cmp.major;
    let Some(m) = cmp.minor else {
        return format!("c[0] == {a}u");
    };
    let Some(p) = cmp.patch else {
        return if a > 0 {
            format!("(c[0] == {a}u && c[1] >= {m}u)")
        } else {
            format!("(c[0] == {a}u && c[1] == {m}u)")
        };
    };
    let pre = pre_ge(&cmp.pre);
    let rest = if a > 0 {
        format!("(c[1] != {m}u ? c[1] > {m}u : (c[2] != {p}u ? c[2] > {p}u : {pre}))")
    } else if m > 0 {
        format!("(c[1] != {m}u ? false : (c[2] != {p}u ? c[2] > {p}u : {pre}))")
    } else {
        format!("(c[1] != {m}u || c[2] != {p}u ? false : {pre})")
    };
    format!("(c[0] == {a}u && {rest})")
}

fn ids(pre: &Prerelease) -> Vec<&str> {
    pre.as_str().split('.').collect()
}

fn list(pre: &Prerelease) -> String {
    let items: Vec<String> = ids(pre).into_iter().map(lit).collect();
    format!("[{}]", items.join(", "))
}

fn pre_eq(pre: &Prerelease) -> String {
    if pre.is_empty() {
        "size(r) == 0".into()
    } else {
        format!("r == {}", list(pre))
    }
}

/// `r < pre` for a non-empty `r`: the first differing identifier decides, a proper prefix is lower.
fn lt_nonempty(pre: &Prerelease) -> String {
    let ids = ids(pre);
    let prefix = |i: usize| -> String {
        (0..i)
            .map(|j| format!("r[{j}] == {}", lit(ids[j])))
            .collect::<Vec<_>>()
            .join(" && ")
    };
    let mut alts = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let eq = prefix(i);
        if i > 0 {
            alts.push(format!("(size(r) == {i} && {eq})"));
        }
        let id_lt = if id.bytes().all(|b| b.is_ascii_digit()) {
            format!(
                "(r[{i}].matches('^[0-9]+$') && (size(r[{i}]) < {n} || (size(r[{i}]) == {n} && r[{i}] < {l})))",
                n = id.len(),
                l = lit(id)
            )
        } else {
            format!("(r[{i}].matches('^[0-9]+$') || r[{i}] < {})", lit(id))
        };
        if eq.is_empty() {
            alts.push(format!("(size(r) > {i} && {id_lt})"));
        } else {
            alts.push(format!("(size(r) > {i} && {eq} && {id_lt})"));
        }
    }
    format!("({})", alts.join(" || "))
}

fn pre_lt(pre: &Prerelease) -> String {
    if pre.is_empty() {
        "size(r) > 0".into()
    } else {
        format!("(size(r) > 0 && {})", lt_nonempty(pre))
    }
}

fn pre_gt(pre: &Prerelease) -> String {
    if pre.is_empty() {
        "false".into()
    } else {
        format!(
            "(size(r) == 0 || (r != {} && !{}))",
            list(pre),
            lt_nonempty(pre)
        )
    }
}

fn pre_ge(pre: &Prerelease) -> String {
    if pre.is_empty() {
        "size(r) == 0".into()
    } else {
        format!("(size(r) == 0 || !{})", lt_nonempty(pre))
    }
}
