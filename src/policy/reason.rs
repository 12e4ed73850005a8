//! The policy's refusal of a version: the sidecar's reason for it, computed in CEL, ending with the
//! same fix.

use super::semver_cel::{self, lit};
use crate::settings::VersionFrom;
use crate::verdict::fix;

/// What the admission policy judges: a ConfigMap object, as the API server is asked to admit it.
pub(super) const ADMITTED: fix::Source = fix::Source::ApiConfigMap;

/// The semver range the policy compiles into CEL, with its text.
pub(super) struct SemverRange<'a> {
    pub(super) req: &'a semver::VersionReq,
    pub(super) text: &'a str,
}

/// A CEL string: the sidecar's reason for the version in `key` (see [`crate::verdict::judge_snapshot`]),
/// ending with the same fix, where CEL can compute it. Two differ: a key under `binaryData` (the policy
/// reads `data` only) and a value that looks like a version but does not parse (the `semver` crate's
/// explanation is left out).
///
/// `data` is a CEL map expression the key is read from: the stored data, or the candidate's.
pub(super) fn version_reason(
    key: &str,
    from: &VersionFrom,
    accepts: &SemverRange<'_>,
    data: &str,
) -> String {
    let k = lit(key);
    let text = accepts.text;
    let allowed = "allowed: MAJOR[.MINOR[.PATCH]][-PRE][+BUILD], optionally with a leading v";
    let write = fix::write_a_version(from, ADMITTED);
    let classified = format!(
        "[{v}].map(v, [{class}].map(w, w == 'accepted' ? 'version ' + v + {in_} : \
         w == 'too-new' ? 'version ' + v + {newer} : \
         w == 'too-old' ? 'version ' + v + {older} : \
         v.split('+')[0].contains('-') ? 'pre-release ' + v + {pre} : \
         'version ' + v + {outside})[0])[0]",
        v = semver_cel::display("t"),
        class = semver_cel::classify("t", accepts.req),
        in_ = lit(&format!(" is in {text}")),
        newer = with_version(
            &format!(
                " is newer than {text} allows; {}",
                fix::too_new(text, VERSION, ADMITTED)
            ),
            "v"
        ),
        older = with_version(
            &format!(
                " is older than {text} allows; {}",
                fix::too_old(text, VERSION, ADMITTED)
            ),
            "v"
        ),
        pre = lit(&format!(
            " is outside {text} (a range admits pre-releases only of a version it names with a pre-release); {}",
            fix::pre_release(text, ADMITTED)
        )),
        outside = lit(&format!(
            " is outside {text}; {}",
            fix::outside(text, ADMITTED)
        )),
    );
    format!(
        "!({k} in {data}) ? (has(object.binaryData) && {k} in object.binaryData ? {under_binary} : {absent}) : \
         [{trimmed}].map(t, t == '' ? {empty} : \
         size(bytes(t)) > {max} ? {at} + string(size(bytes(t))) + {long} : \
         !{readable} ? (t.matches('^[0-9A-Za-z.+-]{{1,64}}$') ? 'version \"' + t + {not_semver} : {at_value} + string(size(bytes(t))) + {chars}) : \
         {classified})[0]",
        under_binary = lit(&format!(
            "key {key} is under binaryData, where the admission policy cannot read a version; keep it under data"
        )),
        absent = lit(&format!(
            "key {key} (from {from}) is absent; {}",
            fix::version_key_absent(&crate::listing::name(key), ADMITTED)
        )),
        trimmed = semver_cel::trimmed(&format!("{data}[{k}]")),
        empty = lit(&format!(
            "key {key} is empty; expected a version such as 2.4.1; {write}"
        )),
        max = semver_cel::MAX_VERSION_LEN,
        at = lit(&format!("the version at {from} is ")),
        long = lit(&format!(
            " bytes long; a version is at most {} bytes; {write}",
            semver_cel::MAX_VERSION_LEN
        )),
        readable = semver_cel::readable("t"),
        not_semver = lit(&format!(
            "\" at {from}: not a semantic version; {allowed}; {write}"
        )),
        at_value = lit(&format!("the value at {from} is not a semantic version (")),
        chars = lit(&format!(
            " bytes, with characters a version does not have); {allowed}; {write}"
        )),
    )
}

/// The stored data as a CEL map, empty when there is none.
pub(super) const STORED_DATA: &str = "(has(object.data) ? object.data : {})";

/// Where a fix names the version, as [`with_version`] finds it.
const VERSION: &str = "\u{0}";

/// A CEL string: `text` with each [`VERSION`] in it replaced by the CEL string expression `v`.
fn with_version(text: &str, v: &str) -> String {
    text.split(VERSION)
        .map(lit)
        .collect::<Vec<_>>()
        .join(&format!(" + {v} + "))
}
