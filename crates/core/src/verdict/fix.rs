//! The fix each reason ends with, one function per kind of problem, so that every reader that words a
//! reason (the sidecar, `check`, the admission policy's CEL, variants) ends it with the same words.
//! Pure. A version or range is passed in as text: the policy passes a placeholder it splices a CEL
//! expression into. The kind of source ([`Source`]) decides what a fix tells to change: the
//! ConfigMap, the Secret, or the config file on the node.

use crate::settings::VersionFrom;
pub use crate::values::Source;

/// The annotations a fix names (`tests` checks each is a setting's).
pub(crate) const ANN_ACCEPTS: &str = "confgate.io/accepts";
pub(crate) const ANN_REQUIRE: &str = "confgate.io/require";
pub(crate) const ANN_VERSION_FROM: &str = "confgate.io/version-from";
pub(crate) const ANN_VARIANTS: &str = "confgate.io/variants";

/// `missing` required keys are absent.
pub fn required(missing: usize, src: Source) -> String {
    let them = if missing == 1 { "it" } else { "them" };
    format!(
        "add {them} to {}, or drop {them} from {ANN_REQUIRE}",
        src.holder()
    )
}

/// The key the version is read from is absent (`key` as a reason shows it).
pub fn version_key_absent(key: &str, src: Source) -> String {
    format!(
        "add {} {key} to {}, or point {ANN_VERSION_FROM} at the {} that holds the version",
        src.key_word(),
        src.holder(),
        src.key_word()
    )
}

/// A version that cannot be read where `from` says.
pub fn write_a_version(from: &VersionFrom, src: Source) -> String {
    format!(
        "write a version such as 2.4.1 at {from} in {}",
        src.object()
    )
}

/// An API version such as `example` cannot be read where `from` says.
pub(crate) fn write_an_api_version(from: &VersionFrom, example: &str, src: Source) -> String {
    format!(
        "write an API version such as {example} at {from} in {}",
        src.object()
    )
}

/// A config carries the API version `version` while `accepts` holds a semver range.
pub(crate) fn api_scheme(version: &str) -> String {
    format!(
        "set {ANN_ACCEPTS} to the API versions the component serves (e.g. {version}), or point {ANN_VERSION_FROM} at a semantic version"
    )
}

/// The API version `version` is newer than every version of its group in `list`.
pub(crate) fn api_too_new(list: &str, version: &str, src: Source) -> String {
    format!(
        "roll {} back to an API version in {list}, or add {version} to {ANN_ACCEPTS} once the component serves it",
        src.object()
    )
}

/// The API version `version` is older than every version of its group in `list`.
pub(crate) fn api_too_old(list: &str, version: &str, src: Source) -> String {
    format!(
        "update {} to an API version in {list}, or add {version} to {ANN_ACCEPTS} if the component still serves it",
        src.object()
    )
}

/// The API version `version` is of a group `list` does not name, or between its versions.
pub(crate) fn api_not_served(list: &str, version: &str, src: Source) -> String {
    format!(
        "set {} to an API version in {list}, or add {version} to {ANN_ACCEPTS} if the component serves it",
        src.object()
    )
}

/// Some files of a config read by `version-from` `yaml:*#...` hold a version outside `range`.
pub(crate) fn each_not_served(range: &str) -> String {
    format!(
        "set each named file to a version in {range}, or add its version to {ANN_ACCEPTS} once the component serves it"
    )
}

/// `version` is newer than `range` allows.
pub fn too_new(range: &str, version: &str, src: Source) -> String {
    format!(
        "roll {} back to a version in {range}, or raise {ANN_ACCEPTS} once the component reads {version}",
        src.object()
    )
}

/// `version` is older than `range` allows.
pub fn too_old(range: &str, version: &str, src: Source) -> String {
    format!(
        "update {} to a version in {range}, or lower {ANN_ACCEPTS} if the component still reads {version}",
        src.object()
    )
}

/// A pre-release `range` does not name.
pub fn pre_release(range: &str, src: Source) -> String {
    format!(
        "set {} to a version in {range}, or name the pre-release in {ANN_ACCEPTS}",
        src.object()
    )
}

/// A version outside `range` on neither side.
pub fn outside(range: &str, src: Source) -> String {
    format!(
        "set {} to a version in {range}, or change {ANN_ACCEPTS}",
        src.object()
    )
}

/// No variant is accepted, `verdict` being what `variants` makes of that; `range` is `None` when none is
/// configured.
pub(crate) fn no_variant(verdict: crate::values::Verdict, range: Option<&str>) -> String {
    use crate::values::Verdict;
    let Some(range) = range else {
        return format!("set {ANN_ACCEPTS} to the range the component reads");
    };
    match verdict {
        Verdict::TooNew => format!(
            "add a variant with a version in {range}, or raise {ANN_ACCEPTS} once the component reads a newer one"
        ),
        Verdict::TooOld => format!(
            "add a variant with a version in {range}, or lower {ANN_ACCEPTS} if the component still reads an older one"
        ),
        Verdict::Invalid => format!(
            "correct the invalid variant as its reason says, or add a variant with a version in {range}"
        ),
        _ => format!("add a variant with a version in {range}, or change {ANN_ACCEPTS}"),
    }
}

/// A key holds the name variants are promoted as.
pub(crate) fn promoted_name_taken(key: &str, src: Source) -> String {
    format!(
        "remove {} {key} from {} (each variant is promoted under that name), or change {ANN_VARIANTS}",
        src.key_word(),
        src.holder()
    )
}

/// The annotation of the component's own checker.
pub const ANN_VALIDATE: &str = "confgate.io/validate";

/// The component's checker refused a config.
pub fn checker_refused(src: Source) -> String {
    format!(
        "correct {} as the checker says, or change {ANN_VALIDATE}",
        src.object()
    )
}

/// The component's checker ran past its time bound: nothing says the content is wrong.
pub fn checker_timed_out() -> String {
    format!(
        "it is tried again with a growing wait; if it keeps running past the bound, raise {ANN_VALIDATE}-timeout (up to 5m) or give confgate's container more CPU"
    )
}

/// The component's checker could not be started.
pub fn checker_missing() -> String {
    format!(
        "put the checker where {ANN_VALIDATE} says in confgate's container (an init container copying it from the component's image into a shared emptyDir), or change {ANN_VALIDATE}"
    )
}
