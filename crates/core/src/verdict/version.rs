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

/// Why no version string could be read where `version-from` says. Names keys and pointers, never
/// content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unreadable {
    /// `key` as a reason names it, `present` the keys there are.
    #[error("key {key} (from {from}) is absent (present: {present})")]
    Absent {
        key: String,
        from: VersionFrom,
        present: String,
    },
    #[error("key {key} is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { key: String, offset: usize },
    #[error("key {0} is empty; expected a version such as 2.4.1")]
    Empty(String),
    #[error("{from}: nothing at {pointer} in key {key}")]
    Nothing {
        from: VersionFrom,
        pointer: String,
        key: String,
    },
    #[error("key {key} is {why}")]
    Document {
        key: String,
        why: crate::extract::Error,
    },
    #[error("{from}: {why}")]
    NotScalar { from: VersionFrom, why: NotScalar },
}

/// What the pointer found when it is not a string or whole number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotScalar {
    // The number is the version itself; it is shown as read so the hint makes sense.
    // Not echoed: a long number read as a float is not the text as written.
    #[error(
        "the version is a number with a fraction, an exponent, a sign or over 64 bits, not a string or whole number; {FLOAT_HINT}"
    )]
    Number,
    #[error("the version is {0}, not a string or whole number")]
    Kind(&'static str),
}

/// Reads the version string from the snapshot as `from` says, as written (not yet parsed).
pub(crate) fn extract_version(keys: &dyn Keys, from: &VersionFrom) -> Result<String, Unreadable> {
    let key = from.key();
    let bytes = keys.get(key).ok_or_else(|| Unreadable::Absent {
        key: listing::name(key),
        from: from.clone(),
        present: present(keys),
    })?;
    let text = std::str::from_utf8(bytes).map_err(|e| Unreadable::NotUtf8 {
        key: key.to_owned(),
        offset: e.valid_up_to(),
    })?;
    let (found, pointer) = match from {
        VersionFrom::File { .. } => {
            let v = text.trim();
            return if v.is_empty() {
                Err(Unreadable::Empty(key.to_owned()))
            } else {
                Ok(v.to_owned())
            };
        }
        VersionFrom::Json { pointer, .. } => (crate::extract::json(text, pointer), pointer),
        // `Each` is read key by key (`VersionFrom::for_key`); `*` names no key, so it is found
        // absent above and never reaches here.
        VersionFrom::Yaml { pointer, .. } | VersionFrom::Each { pointer, .. } => {
            (crate::extract::yaml(text, pointer), pointer)
        }
    };
    let found = found.map_err(|why| match why {
        crate::extract::Error::NotFound(_) => Unreadable::Nothing {
            from: from.clone(),
            pointer: pointer.clone(),
            key: key.to_owned(),
        },
        why => Unreadable::Document {
            key: key.to_owned(),
            why,
        },
    })?;
    scalar(found).map_err(|why| Unreadable::NotScalar {
        from: from.clone(),
        why,
    })
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

fn scalar(found: Found) -> Result<String, NotScalar> {
    let kind = match found {
        Found::Str(s) => return Ok(s.trim().to_owned()),
        Found::Whole(n) => return Ok(n),
        Found::Number(_) => return Err(NotScalar::Number),
        Found::Null => "null",
        Found::Bool => "a boolean",
        Found::Sequence => "a sequence",
        Found::Mapping => "a mapping",
    };
    Err(NotScalar::Kind(kind))
}
