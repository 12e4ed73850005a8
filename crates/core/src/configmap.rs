//! A ConfigMap's keys as the kubelet would project them, turned into what the gate judges. One pure
//! function for every reader of ConfigMap objects (`confgate check` on manifests, the API source, the
//! fleet view), so all of them give the same snapshot and the same `sha256:` hash as the volume.

use std::collections::BTreeMap;

use crate::listing;
use crate::snapshot::{Broken, Cause, MAX_BYTES, MAX_KEYS, Missing, Observed, Snapshot};

/// ConfigMap key names as the API server validates them (`IsConfigMapKey`), also allowing `/` for
/// nested items (as `--require` and `--version-from` may name them).
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with("..")
                && part != "."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        })
}

/// Why a key cannot be one of a ConfigMap's files. Names the key as a reason shows it, escaped.
#[cfg_attr(not(feature = "api"), allow(unreachable_pub))]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "{section} key {key:?} is not a valid ConfigMap key ([-._a-zA-Z0-9]+, not starting with ..)"
    )]
    Invalid { section: String, key: String },
    #[error("key {0} is in both data and binaryData")]
    Both(String),
}

/// The keys of one ConfigMap, gathered from `data` and `binaryData` with the kubelet's rules.
// Public through `api::source::files`; without the API client, only the crate reaches it.
#[cfg_attr(not(feature = "api"), allow(unreachable_pub))]
#[derive(Debug, Default)]
pub struct Keys(BTreeMap<String, Vec<u8>>);

#[cfg_attr(not(feature = "api"), allow(unreachable_pub))]
impl Keys {
    /// Adds `key` from `section` (`data` or `binaryData`). A key is a file name once projected, so it
    /// is checked again here although the API server validates it.
    pub fn insert(&mut self, section: &str, key: &str, bytes: Vec<u8>) -> Result<(), KeyError> {
        if !is_valid_key(key) || key.contains('/') {
            return Err(KeyError::Invalid {
                section: section.to_owned(),
                key: listing::name(key),
            });
        }
        if self.0.insert(key.to_owned(), bytes).is_some() {
            return Err(KeyError::Both(listing::name(key)));
        }
        Ok(())
    }

    #[cfg(feature = "api")]
    pub fn into_map(self) -> BTreeMap<String, Vec<u8>> {
        self.0
    }
}

/// What a ConfigMap's keys (or why they could not be read) mean to the gate: no keys is `missing`,
/// over the size limit or [`MAX_KEYS`] is broken, anything else a snapshot. Why the keys could not
/// be read stays the error the source typed, inside the snapshot's `Observed`.
pub fn observe<E>(keys: Result<Keys, E>) -> Observed
where
    E: crate::snapshot::SourceError,
{
    match keys {
        Ok(k) if k.0.is_empty() => Observed::Missing(Missing::NoObjectKeys),
        Ok(k) if k.0.len() > MAX_KEYS => Observed::Broken(Broken::TooManyKeys),
        Ok(k) => {
            let snap = Snapshot::new(k.0);
            if snap.total_bytes() > MAX_BYTES {
                Observed::Broken(Broken::OverSize {
                    bytes: snap.total_bytes(),
                })
            } else {
                Observed::Config(snap)
            }
        }
        Err(why) => Observed::Broken(Broken::Source(Cause::new(why))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_kubelet() {
        let mut k = Keys::default();
        k.insert("data", "a.yaml", b"x".to_vec()).unwrap();
        assert!(
            k.insert("binaryData", "a.yaml", vec![0]).unwrap_err()
                == KeyError::Both("a.yaml".into())
        );
        for bad in ["..data", "a/b", "", "."] {
            assert!(k.insert("data", bad, vec![]).is_err(), "{bad:?}");
        }
        assert!(is_valid_key("nested/a.yaml"));
        assert!(matches!(
            observe(Ok::<_, KeyError>(Keys::default())),
            Observed::Missing(_)
        ));
        let mut many = Keys::default();
        for i in 0..=MAX_KEYS {
            many.insert("data", &format!("k{i}"), vec![]).unwrap();
        }
        assert!(
            matches!(observe(Ok::<_, KeyError>(many)), Observed::Broken(why) if why.to_string().contains("more than 8192 keys"))
        );
        assert!(matches!(observe(Ok::<_, KeyError>(k)), Observed::Config(_)));
    }
}
