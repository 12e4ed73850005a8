//! Why a read found no config (`Missing`) or something that cannot be one (`Broken`), each cause with
//! its typed data: paths, key names, sizes, the I/O error. Never content: a key is named, not read out.
//!
//! `Display` is the one wording, shown by the judgement, status and logs. Names the volume holds
//! (paths, keys) are written through `listing::one_line`: a plain or git-sync dir may hold a newline.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::limits::{MAX_BYTES, MAX_KEYS};
use crate::listing::one_line;

/// Nested item paths deeper than this are not a ConfigMap.
pub const MAX_DEPTH: usize = 16;
/// How often a read is retried when the kubelet swapped `..data` underneath it.
pub const SWAP_RETRIES: usize = 8;

/// No config: no directory, an empty volume, or a deleted ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    #[error(
        "the watched directory {} does not exist (is the ConfigMap volume mounted?)",
        shown(dir)
    )]
    NoDir { dir: PathBuf },
    /// Nothing to read in `dir`; `volume`: it is a kubelet volume (it has `..data`), else a plain
    /// directory (a hostPath, a git checkout), which no ConfigMap fills.
    #[error("{}", no_keys(dir, *volume))]
    NoKeys { dir: PathBuf, volume: bool },
    #[error("the ConfigMap has no keys")]
    NoObjectKeys,
    /// The watched object is not there; `kind` as messages name it (`ConfigMap`, `Secret`), `object`
    /// its `NAMESPACE/NAME`.
    #[error("{kind} {object} does not exist")]
    NoObject { kind: &'static str, object: String },
    #[error("{kind} {object} was deleted")]
    Deleted { kind: &'static str, object: String },
    /// No config the component applied is kept in the promoted dir.
    #[error("no applied config is kept")]
    NoApplied,
}

/// Something is there but cannot be a ConfigMap; each names the path or key and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    #[error(
        "{}/..data points to {}, not to a timestamped directory beside it",
        shown(dir),
        shown(target)
    )]
    DataNotTimestamped { dir: PathBuf, target: PathBuf },
    /// `..data` names `name`, and nothing is there (`link`: a link to nothing is).
    #[error(
        "{}/..data points nowhere: {} {}",
        shown(dir),
        one_line(name),
        if *link { "is a link to nothing" } else { "does not exist" }
    )]
    DataDangling {
        dir: PathBuf,
        name: String,
        link: bool,
    },
    #[error(
        "{}/..data points to {}, which is not a directory",
        shown(dir),
        one_line(name)
    )]
    DataNotADir { dir: PathBuf, name: String },
    #[error(
        "{}/..data resolves to {}, outside the watched directory",
        shown(dir),
        shown(real)
    )]
    DataOutside { dir: PathBuf, real: PathBuf },
    #[error("cannot read {}/..data: {error}", shown(dir))]
    DataUnreadable { dir: PathBuf, error: IoError },
    #[error("cannot read {}: {error}", shown(path))]
    Unreadable { path: PathBuf, error: IoError },
    #[error("{} holds a file name that is not UTF-8", shown(dir))]
    NotUtf8 { dir: PathBuf },
    #[error("key {} is nested deeper than {MAX_DEPTH} levels", one_line(key))]
    TooDeep { key: String },
    #[error(
        "key {} is not a regular file (a FIFO, socket or device cannot be a ConfigMap key)",
        one_line(key)
    )]
    NotRegular { key: String },
    #[error(
        "key {} is a symlink to a missing target ({})",
        one_line(key),
        shown(target)
    )]
    LinkToNothing { key: String, target: PathBuf },
    #[error(
        "key {} is a symlink to {}, outside the watched directory",
        one_line(key),
        shown(real)
    )]
    LinkOutside { key: String, real: PathBuf },
    /// The read passed [`MAX_BYTES`] at `key` (and read no further).
    #[error(
        "the config is over the ConfigMap size limit of {MAX_BYTES} bytes (the limit was passed at key {})",
        one_line(key)
    )]
    OverSizeAt { key: String },
    /// A whole config of `bytes`, over [`MAX_BYTES`].
    #[error("the config is {bytes} bytes, over the ConfigMap size limit of {MAX_BYTES} bytes")]
    OverSize { bytes: u64 },
    #[error("the config has more than {MAX_KEYS} keys; at most {MAX_KEYS} are judged")]
    TooManyKeys,
    #[error(
        "volume changing too fast: {} changed under each of {SWAP_RETRIES} reads",
        shown(dir)
    )]
    ChangingTooFast { dir: PathBuf },
    /// Why a source's keys could not be read (a ConfigMap object's, a manifest's, the source
    /// annotation's), as that source typed it.
    #[error(transparent)]
    Source(Cause),
}

/// A path as a reason shows it: one line.
/// [`Missing::NoKeys`] in the words of its kind of source.
fn no_keys(dir: &Path, volume: bool) -> String {
    if volume {
        format!(
            "{} holds no keys (the ConfigMap is absent, empty or was deleted)",
            shown(dir)
        )
    } else {
        format!(
            "{} holds no files (a plain directory: put the config files there, or point --watch at the directory that holds them)",
            shown(dir)
        )
    }
}

fn shown(path: &Path) -> String {
    one_line(&path.to_string_lossy()).into_owned()
}

/// An I/O error of a read, kept typed (its [`io::ErrorKind`] and the OS's code) and shared, so a
/// [`Broken`] stays `Clone`; two are the same when their kind and OS code are (the same `errno`
/// says the same; its words are made from it).
#[derive(Debug, Clone)]
pub struct IoError(Arc<io::Error>);

impl IoError {
    pub fn kind(&self) -> io::ErrorKind {
        self.0.kind()
    }
}

impl From<io::Error> for IoError {
    fn from(e: io::Error) -> IoError {
        IoError(Arc::new(e))
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for IoError {}

impl PartialEq for IoError {
    fn eq(&self, other: &IoError) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.kind() == other.kind() && self.0.raw_os_error() == other.0.raw_os_error())
    }
}

impl Eq for IoError {}

/// A source's own error, kept as it was typed and shared; two are the same when they are of the same
/// type and equal as values of it (never by their words).
#[derive(Debug, Clone)]
pub struct Cause(Arc<dyn SourceError>);

/// An error a source may keep in a [`Cause`]: comparable as a value of its own type.
pub trait SourceError: std::error::Error + Send + Sync + 'static {
    /// Whether `other` is an error of the same type, equal to this one.
    fn same(&self, other: &dyn SourceError) -> bool;
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<E: std::error::Error + PartialEq + Send + Sync + 'static> SourceError for E {
    fn same(&self, other: &dyn SourceError) -> bool {
        other.as_any().downcast_ref::<E>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Cause {
    pub fn new(e: impl SourceError) -> Cause {
        Cause(Arc::new(e))
    }

    /// The error as its source typed it.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Cause) -> bool {
        self.0.same(&*other.0)
    }
}

impl Eq for Cause {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_texts_are_the_documented_ones() {
        assert_eq!(
            Missing::NoDir {
                dir: "/etc/cfg".into()
            }
            .to_string(),
            "the watched directory /etc/cfg does not exist (is the ConfigMap volume mounted?)"
        );
        assert_eq!(
            Broken::DataDangling {
                dir: "/etc/cfg".into(),
                name: "..2026".into(),
                link: true
            }
            .to_string(),
            "/etc/cfg/..data points nowhere: ..2026 is a link to nothing"
        );
        assert_eq!(
            Broken::OverSize { bytes: 2_000_000 }.to_string(),
            "the config is 2000000 bytes, over the ConfigMap size limit of 1048576 bytes"
        );
        assert_eq!(
            Broken::Unreadable {
                path: "/etc/cfg/k".into(),
                error: io::Error::from_raw_os_error(13).into()
            }
            .to_string(),
            "cannot read /etc/cfg/k: Permission denied (os error 13)"
        );
    }

    #[test]
    fn a_name_with_a_newline_is_shown_on_one_line() {
        assert_eq!(
            Broken::NotRegular { key: "a\nb".into() }.to_string(),
            "key a\\nb is not a regular file (a FIFO, socket or device cannot be a ConfigMap key)"
        );
        assert_eq!(
            Missing::NoKeys {
                dir: "/x\ny".into(),
                volume: true,
            }
            .to_string(),
            "/x\\ny holds no keys (the ConfigMap is absent, empty or was deleted)"
        );
        // A plain directory (a hostPath) is not worded as a ConfigMap.
        let plain = Missing::NoKeys {
            dir: "/etc/kubernetes/scheduler".into(),
            volume: false,
        }
        .to_string();
        assert!(
            plain.starts_with("/etc/kubernetes/scheduler holds no files (a plain directory")
                && !plain.contains("ConfigMap"),
            "{plain}"
        );
    }

    #[test]
    fn causes_are_the_same_when_they_are_equal_values() {
        let e = |code| Broken::Unreadable {
            path: "/k".into(),
            error: io::Error::from_raw_os_error(code).into(),
        };
        assert_eq!(e(13), e(13));
        assert_ne!(e(13), e(5));
        #[derive(Debug, PartialEq, thiserror::Error)]
        enum Own {
            #[error("bad key {0}")]
            BadKey(String),
        }
        #[derive(Debug, PartialEq, thiserror::Error)]
        #[error("bad key a")]
        struct Other;
        let c = |k: &str| Broken::Source(Cause::new(Own::BadKey(k.into())));
        assert_eq!(c("a"), c("a"));
        assert_ne!(c("a"), c("b"));
        // The same words from another type are another cause.
        assert_eq!(
            c("a").to_string(),
            Broken::Source(Cause::new(Other)).to_string()
        );
        assert_ne!(c("a"), Broken::Source(Cause::new(Other)));
    }
}
