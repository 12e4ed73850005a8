//! A rollout in CEL: the `confgate.rollout` percentage read as [`crate::rollout::Percent::parse`]
//! reads it (refused with the same reason when it cannot be followed) and shown as it displays, and
//! the candidate's version key (`K.next` in place of `K`), so the policy judges the candidate's
//! version as the pods on the candidate and `check` judge it.

use super::semver_cel::{WS, lit, trimmed};
use crate::rollout::{KEY, SUFFIX};

/// `KEY` as a CEL string.
fn key() -> String {
    lit(KEY)
}

/// A CEL boolean: whether `object.data` holds the rollout key.
pub fn present() -> String {
    format!("(has(object.data) && {} in object.data)", key())
}

/// A CEL int over the trimmed percentage `p`, once it is a number followed by `%` with at most two
/// decimals: its hundredths, or 10001 for anything over 100% (so `int()` never overflows).
fn hundredths(p: &str) -> String {
    format!(
        "[{p}.find('^[0-9]+')].map(w, [w.find('[1-9][0-9]*')].map(s, [{p}.find('[.][0-9]+')].map(f, \
         size(s) > 3 ? 10001 : (s == '' ? 0 : int(s)) * 100 + \
         (size(f) == 0 ? 0 : (size(f) == 2 ? int(f.substring(1)) * 10 : int(f.substring(1)))))[0])[0])[0]"
    )
}

/// A CEL boolean: the rollout key is not under `binaryData`, where the sidecar reads it (a volume
/// cannot tell the two apart) and the API server holds bytes this policy does not read.
pub(crate) fn not_binary() -> String {
    format!(
        "!(has(object.binaryData) && {} in object.binaryData)",
        key()
    )
}

/// A CEL string: why the rollout key under `binaryData` is refused.
pub(crate) fn binary_reason() -> String {
    lit(&format!(
        "key {KEY} is under binaryData, where the admission policy cannot read a percentage; keep it under data"
    ))
}

/// A CEL boolean over key `k`: a `.next` key that names no key, a reserved one (`K.next.next`) or
/// the rollout key (`confgate.rollout.next`), which [`crate::rollout::Plan::read`] refuses.
fn reserved(k: &str) -> String {
    let s = lit(SUFFIX);
    format!(
        "({k} == {s} || ({k}.endsWith({s}) && ({k}.substring(0, size({k}) - size({s})).endsWith({s}) || \
         {k} == {key} + {s})))",
        key = key(),
    )
}

/// The keys of `data` and `binaryData`, one list (the sidecar reads both as one set of keys).
const ALL_KEYS: &str = "((has(object.data) ? object.data.map(k, k) : []) + \
    (has(object.binaryData) ? object.binaryData.map(k, k) : []))";

/// A CEL boolean: no `.next` key is one [`crate::rollout::Plan::read`] refuses as a candidate.
pub(crate) fn no_reserved_candidate() -> String {
    format!("!{ALL_KEYS}.exists(k, {})", reserved("k"))
}

/// A CEL string: why a `.next` key cannot be a candidate, as [`crate::rollout::Plan::read`] says it.
pub(crate) fn reserved_reason() -> String {
    let s = lit(SUFFIX);
    format!(
        "{ALL_KEYS}.filter(k, {r}).map(k, 'key ' + k + ' cannot be a candidate: ' + \
         (k == {s} ? 'it names no key' : k.substring(0, size(k) - size({s})) + ' is itself reserved') + \
         {tail})[0]",
        r = reserved("k"),
        tail = lit(&format!(
            "; a candidate key is the name of a key with {SUFFIX} once"
        )),
    )
}

/// A CEL boolean: the candidate of version key `key` is not under `binaryData` while some pod is on
/// the candidate (the pods read it there, the policy cannot).
pub(crate) fn candidate_not_binary(key: &str) -> String {
    format!(
        "!{live} || !(has(object.binaryData) && {next} in object.binaryData)",
        live = live(),
        next = lit(&format!("{key}{SUFFIX}")),
    )
}

/// A CEL string: why a candidate version under `binaryData` is refused.
pub(crate) fn candidate_binary_reason(key: &str) -> String {
    format!(
        "{held} + {percent} + {rest}",
        held = lit("would be held on the candidate pods ("),
        percent = display(),
        rest = lit(&format!(
            "), which keep stable: key {key}{SUFFIX} is under binaryData, where the admission policy cannot read a version; keep it under data"
        )),
    )
}

/// A CEL boolean: the rollout key, when present, is a percentage from 0% to 100%.
pub fn valid() -> String {
    format!(
        "!{present} || [{t}].all(p, p.matches({re}) && {h} <= 10000)",
        present = present(),
        t = trimmed(&format!("object.data[{}]", key())),
        re = lit(&format!("^[0-9]+([.][0-9]{{1,2}})?{WS}*%$")),
        h = hundredths("p"),
    )
}

/// A CEL string: why the rollout key is not a percentage, as [`crate::rollout::Plan::read`] says it.
pub(crate) fn invalid_reason() -> String {
    format!(
        "[{t}].map(p, {prefix} + (!p.endsWith('%') ? 'it does not end in %' : \
         !p.matches({number}) ? 'it is not a number followed by %' : \
         !p.matches({decimals}) ? 'it has more than two decimals' : 'it is over 100%') + {allowed})[0]",
        t = trimmed(&format!("object.data[{}]", key())),
        prefix = lit(&format!("key {KEY} is not a percentage (")),
        number = lit(&format!("^[0-9]+([.][0-9]+)?{WS}*%$")),
        decimals = lit(&format!("^[0-9]+([.][0-9]{{1,2}})?{WS}*%$")),
        allowed = lit("); allowed: 0% to 100%, e.g. 5%, 25% or 2.5%"),
    )
}

/// A CEL boolean: some pod is on the candidate (a valid percentage above 0% and a `.next` key).
pub fn live() -> String {
    format!(
        "({present} && [{t}].all(p, {h} > 0) && (object.data.exists(k, k.endsWith({s})) || \
         (has(object.binaryData) && object.binaryData.exists(k, k.endsWith({s})))))",
        present = present(),
        t = trimmed(&format!("object.data[{}]", key())),
        h = hundredths("p"),
        s = lit(SUFFIX),
    )
}

/// A CEL string: the percentage (valid), as [`crate::rollout::Percent`] displays it.
pub fn display() -> String {
    format!(
        "[{t}].map(p, [{h}].map(h, string(h / 100) + (h % 100 == 0 ? '' : (h % 10 == 0 ? '.' + \
         string(h % 100 / 10) : '.' + (h % 100 < 10 ? '0' : '') + string(h % 100))) + '%')[0])[0]",
        t = trimmed(&format!("object.data[{}]", key())),
        h = hundredths("p"),
    )
}

/// A CEL map expression: the data the candidate's version is read from, `key` holding `key.next`
/// when there is one (the candidate's set), else the stable data.
pub(crate) fn candidate_data(key: &str) -> String {
    let (k, next) = (lit(key), lit(&format!("{key}{SUFFIX}")));
    format!(
        "(has(object.data) && {next} in object.data ? {{{k}: object.data[{next}]}} : \
         (has(object.data) ? object.data : {{}}))"
    )
}
