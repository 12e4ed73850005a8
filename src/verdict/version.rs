//! The version string of a config, read where `version-from` says (a whole key, or a JSON or YAML
//! pointer into one), as written: parsing it is `range`'s.

use crate::extract::Found;
use crate::listing;
use crate::settings::VersionFrom;
use crate::snapshot::Keys;

/// The keys present, as a reason lists them: a few names and how many more.
pub(super) fn present(keys: &dyn Keys) -> String {
    listing::names(keys.each().map(|(k, _)| k), Some(keys.count()))
}

/// Reads the version string from the snapshot as `from` says, as written (not yet parsed).
pub(crate) fn extract_version(keys: &dyn Keys, from: &VersionFrom) -> Result<String, String> {
    let key = from.key();
    let bytes = keys.get(key).ok_or_else(|| {
        format!(
            "key {} (from {from}) is absent (present: {})",
            listing::name(key),
            present(keys)
        )
    })?;
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "key {key} is not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    match from {
        VersionFrom::File { .. } => {
            let v = text.trim();
            if v.is_empty() {
                Err(format!(
                    "key {key} is empty; expected a version such as 2.4.1"
                ))
            } else {
                Ok(v.to_owned())
            }
        }
        VersionFrom::Json { pointer, .. } => {
            let found = crate::extract::json(text, pointer).map_err(|e| match e {
                crate::extract::Error::NotFound(_) => {
                    format!("{from}: nothing at {pointer} in key {key}")
                }
                e => format!("key {key} is {e}"),
            })?;
            scalar(found).map_err(|what| format!("{from}: {what}"))
        }
        VersionFrom::Yaml { pointer, .. } => {
            let found = crate::extract::yaml(text, pointer).map_err(|e| match e {
                crate::extract::Error::NotFound(_) => {
                    format!("{from}: nothing at {pointer} in key {key}")
                }
                e => format!("key {key} is {e}"),
            })?;
            scalar(found).map_err(|what| format!("{from}: {what}"))
        }
    }
}

/// Whether `raw` is made only of what a version is written with, so it may be echoed when invalid.
pub(super) fn looks_like_a_version(raw: &str) -> bool {
    raw.len() <= 64
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
}

/// The longest version string reported as read; semver puts no bound, real versions are far shorter.
pub(super) const MAX_VERSION_LEN: usize = 256;

const FLOAT_HINT: &str = "quote it (\"2.10\") so that 2.10 is not read as 2.1";

fn scalar(found: Found) -> Result<String, String> {
    let kind = match found {
        Found::Str(s) => return Ok(s.trim().to_owned()),
        Found::Whole(n) => return Ok(n),
        // The number is the version itself; it is shown as read so the hint makes sense.
        // Not echoed: a long number read as a float is not the text as written.
        Found::Number(_) => {
            return Err(format!(
                "the version is a number with a fraction, an exponent, a sign or over 64 bits, not a string or whole number; {FLOAT_HINT}"
            ));
        }
        Found::Null => "null",
        Found::Bool => "a boolean",
        Found::Sequence => "a sequence",
        Found::Mapping => "a mapping",
    };
    Err(format!(
        "the version is {kind}, not a string or whole number"
    ))
}
