//! Change detection on the kubelet volumes: the config dir and the annotations file's dir, each watched
//! non-recursively with notify.
//!
//! Events only say "look again"; what changed is decided by re-reading and hashing. A `..data` event
//! means a kubelet swap: read at once. Another name in the config dir means a plain directory is being
//! edited: read after a quiet period. Access events (the kubelet's no-op syncs open every file) are
//! dropped in the notify thread, so an idle volume wakes nothing. Watches are re-established when a
//! watched dir disappears and returns (a new inode).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::Notify;

use crate::snapshot::DATA_LINK;

/// What to look at again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Changes(u8);

impl Changes {
    pub(crate) const CONFIG: Changes = Changes(1);
    pub(crate) const PLAIN: Changes = Changes(2);
    pub(crate) const ANNOTATIONS: Changes = Changes(4);
    pub(crate) const ALL: Changes = Changes(7);

    pub(crate) fn contains(self, other: Changes) -> bool {
        self.0 & other.0 == other.0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for Changes {
    type Output = Changes;
    fn bitor(self, rhs: Changes) -> Changes {
        Changes(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Changes {
    fn bitor_assign(&mut self, rhs: Changes) {
        self.0 |= rhs.0;
    }
}

/// Why the watch could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start the file watcher: {0}")]
    Start(#[source] notify::Error),
}

/// State shared with notify's thread: pending changes as bits, a wake-up, the time of the last plain event.
#[derive(Debug)]
struct Pending {
    bits: AtomicU8,
    wake: Notify,
    last_plain_ms: AtomicU64,
    errors: AtomicU64,
    epoch: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    path: PathBuf,
    dev_ino: Option<(u64, u64)>,
}

/// The watch on the config dir and the annotations dir.
pub(crate) struct Source {
    watcher: notify::RecommendedWatcher,
    pending: Arc<Pending>,
    config: Watched,
    annotations: Option<Watched>,
    /// The last error adding a watch, for `/status`.
    pub watch_error: Option<String>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("config", &self.config)
            .field("annotations", &self.annotations)
            .finish()
    }
}

fn dev_ino(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Source {
    /// Watches `config_dir`, and the directory holding `annotations_file` when given.
    pub(crate) fn new(config_dir: &Path, annotations_file: Option<&Path>) -> Result<Source, Error> {
        let pending = Arc::new(Pending {
            bits: AtomicU8::new(0),
            wake: Notify::new(),
            last_plain_ms: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let config_dir = config_dir.to_path_buf();
        let ann = annotations_file.map(|f| {
            let dir = f.parent().unwrap_or(Path::new(".")).to_path_buf();
            let name = f.file_name().map(|n| n.to_os_string()).unwrap_or_default();
            (dir, name)
        });
        let p = pending.clone();
        let cfg = config_dir.clone();
        let ann2 = ann.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let changes = match res {
                Ok(ev) => classify(&ev, &cfg, ann2.as_ref()),
                Err(_) => {
                    p.errors.fetch_add(1, Ordering::Relaxed);
                    Changes::ALL
                }
            };
            if changes.contains(Changes::PLAIN) {
                p.last_plain_ms
                    .store(p.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
            }
            if !changes.is_empty() {
                p.bits.fetch_or(changes.0, Ordering::AcqRel);
                p.wake.notify_one();
            }
        })
        .map_err(Error::Start)?;
        let mut s = Source {
            watcher,
            pending,
            config: Watched {
                path: config_dir,
                dev_ino: None,
            },
            annotations: ann.map(|(dir, _)| Watched {
                path: dir,
                dev_ino: None,
            }),
            watch_error: None,
        };
        s.ensure_watches();
        Ok(s)
    }

    /// Re-adds watches on dirs that appeared or were replaced. Returns true when the config dir is watched.
    pub(crate) fn ensure_watches(&mut self) -> bool {
        let mut error = None;
        let mut refreshed = false;
        for w in std::iter::once(&mut self.config).chain(self.annotations.as_mut()) {
            let now = dev_ino(&w.path);
            if now == w.dev_ino {
                continue;
            }
            if w.dev_ino.is_some() {
                let _ = self.watcher.unwatch(&w.path);
            }
            w.dev_ino = None;
            if now.is_some() {
                match self.watcher.watch(&w.path, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        w.dev_ino = now;
                        refreshed = true;
                    }
                    Err(e) => error = Some(format!("cannot watch {}: {e}", w.path.display())),
                }
            }
        }
        if refreshed {
            // Whatever happened while unwatched must be looked at.
            self.pending.bits.fetch_or(Changes::ALL.0, Ordering::AcqRel);
        }
        self.watch_error = error;
        self.config.dev_ino.is_some()
    }

    /// Waits for changes and takes them.
    pub(crate) async fn changed(&self) -> Changes {
        loop {
            let bits = self.pending.bits.swap(0, Ordering::AcqRel);
            if bits != 0 {
                return Changes(bits);
            }
            self.pending.wake.notified().await;
        }
    }

    /// Time since the last event on a plain (non-`..data`) name in the config dir.
    pub(crate) fn since_plain_event(&self) -> std::time::Duration {
        let now = self.pending.epoch.elapsed().as_millis() as u64;
        std::time::Duration::from_millis(
            now.saturating_sub(self.pending.last_plain_ms.load(Ordering::Relaxed)),
        )
    }

    /// Watch errors and overflows since the last call.
    pub(crate) fn take_errors(&self) -> u64 {
        self.pending.errors.swap(0, Ordering::Relaxed)
    }
}

fn classify(
    ev: &notify::Event,
    config_dir: &Path,
    ann: Option<&(PathBuf, std::ffi::OsString)>,
) -> Changes {
    if matches!(ev.kind, EventKind::Access(_)) {
        return Changes::default();
    }
    if ev.need_rescan() {
        return Changes::ALL;
    }
    let mut out = Changes::default();
    for path in &ev.paths {
        if path == config_dir {
            out |= Changes::CONFIG;
            continue;
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        if let Some((dir, file)) = ann
            && parent == dir
            && (name == DATA_LINK || name == file.as_os_str())
        {
            out |= Changes::ANNOTATIONS;
        }
        if parent == config_dir {
            if name == DATA_LINK {
                out |= Changes::CONFIG;
            } else if !name.to_string_lossy().starts_with("..") {
                out |= Changes::PLAIN;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, ModifyKind, RenameMode};

    fn ev(kind: EventKind, paths: &[&str]) -> notify::Event {
        let mut e = notify::Event::new(kind);
        for p in paths {
            e = e.add_path(PathBuf::from(p));
        }
        e
    }

    #[test]
    fn classification_follows_the_kubelet_event_sequence() {
        let cfg = Path::new("/v");
        let ann = (
            PathBuf::from("/pi"),
            std::ffi::OsString::from("annotations"),
        );
        let c = |e: notify::Event| classify(&e, cfg, Some(&ann));
        assert!(
            c(ev(
                EventKind::Create(CreateKind::Folder),
                &["/v/..2026_11_29_22_37_35.1"]
            ))
            .is_empty()
        );
        assert!(c(ev(EventKind::Create(CreateKind::File), &["/v/..data_tmp"])).is_empty());
        assert_eq!(
            c(ev(
                EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                &["/v/..data"]
            )),
            Changes::CONFIG
        );
        assert_eq!(
            c(ev(
                EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
                &["/v/..data_tmp", "/v/..data"]
            )),
            Changes::CONFIG
        );
        assert_eq!(
            c(ev(EventKind::Create(CreateKind::File), &["/v/app.yaml"])),
            Changes::PLAIN
        );
        assert!(c(ev(EventKind::Access(AccessKind::Any), &["/v/..data"])).is_empty());
        assert_eq!(c(ev(EventKind::Any, &["/pi/..data"])), Changes::ANNOTATIONS);
        assert_eq!(
            c(ev(EventKind::Any, &["/pi/annotations"])),
            Changes::ANNOTATIONS
        );
        assert!(c(ev(EventKind::Any, &["/pi/other"])).is_empty());
        assert_eq!(c(ev(EventKind::Any, &["/v"])), Changes::CONFIG);
    }
}
