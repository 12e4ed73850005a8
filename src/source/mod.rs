//! Change detection on the kubelet volumes: the config dir and the annotations file's dir, each watched
//! non-recursively with inotify, read on the decision loop itself. Every symlink met resolving the config
//! path (git-sync's `current`, the path's last component or any dir along it) has its dir watched too,
//! for that one name: a link moved over it points the path elsewhere without an event in the old
//! target.
//!
//! Events only say "look again"; what changed is decided by re-reading and hashing. A `..data` event
//! means a kubelet swap: read at once. Another name in the config dir means a plain directory is being
//! edited: read after a quiet period. Opens and reads are not subscribed to (the kubelet's no-op syncs
//! open every file), so an idle volume wakes nothing. Watches are re-established when a watched dir
//! disappears and returns (a new inode, or the same number with the watch dropped).
//!
//! The inotify descriptor sits in tokio's reactor: a `..data` rename wakes the loop straight from
//! epoll, with no watcher thread between the kernel and the decision.
//!
//! A watch is added again for a new inode, or when the kernel dropped it (`IN_IGNORED`: ext4 gives
//! a new dir the old one's inode number); after a lost queue every watch is checked. A descriptor
//! that fails is not read again: the failure is the watch problem, and the periodic re-read takes
//! over.
//!
//! Why `inotify` in tokio's reactor rather than the `notify` crate: one owner of the watch state
//! (the loop; `notify` keeps its own table on a thread of its own and re-adds watches by its own
//! rules, which would race with ours after `IN_IGNORED` or a lost queue), the exact masks the
//! kubelet's writes need (`IN_MOVED_TO` of `..data`, no `IN_OPEN` or `IN_ACCESS` of its syncs), and
//! no thread: an idle sidecar wakes for nothing. The cost: `Source::ensure_watches` stats each
//! watched dir on every turn of the loop, on the loop's thread. A stat that stalls (a hung mount)
//! holds only the loop, so `/livez` fails, as it should while nothing can react; the server has a
//! thread of its own (`server::spawn`), so `/readyz` and `/status` go on answering. On the blocking
//! pool it was measured to cost idle wake-ups (0 to 11) and threads (4 to 6).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_core::Stream;
use inotify::{EventMask, EventOwned, EventStream, Inotify, WatchDescriptor, WatchMask, Watches};

use crate::snapshot::{DATA_LINK, is_editor_leftover};

mod links;
#[cfg(test)]
mod tests;

use links::links_along;

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
    Start(#[source] std::io::Error),
}

/// What creates, removes, renames or writes a name in a watched dir, or moves or removes the dir.
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    path: PathBuf,
    dev_ino: Option<(u64, u64)>,
    wd: Option<WatchDescriptor>,
}

/// The watch on the config dir and the annotations dir.
#[derive(Debug)]
pub(crate) struct Source {
    /// Room for 16 events with the longest name (inotify never splits one across reads).
    events: EventStream<Box<[u8]>>,
    watches: Watches,
    config: Watched,
    /// The annotations dir and the file's name in it.
    annotations: Option<(Watched, OsString)>,
    /// Each symlink met resolving the config path: the dir holding it and its name there.
    links: Vec<(Watched, OsString)>,
    /// Changes read but not yet taken.
    pending: Changes,
    last_plain: Instant,
    /// The config dir's files written since their last close after writing (`IN_MODIFY` seen, no
    /// `IN_CLOSE_WRITE` yet), with when the first write was seen: still open for writing, so a read
    /// may find them half-written.
    writing: BTreeMap<OsString, Instant>,
    errors: u64,
    /// Why the inotify descriptor stopped giving events, once it has: it is not read again (a
    /// descriptor that fails once would fail every turn and spin the loop), and changes are then found
    /// by the periodic re-read alone.
    failed: Option<String>,
    /// The last error adding a watch, for `/status`.
    pub watch_error: Option<String>,
}

fn dev_ino(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn unwatched(path: PathBuf) -> Watched {
    Watched {
        path,
        dev_ino: None,
        wd: None,
    }
}

impl Source {
    /// Watches `config_dir`, and the directory holding `annotations_file` when given. Must be called
    /// inside the tokio runtime, whose reactor then polls the inotify descriptor.
    pub(crate) fn new(config_dir: &Path, annotations_file: Option<&Path>) -> Result<Source, Error> {
        let events = Inotify::init()
            .and_then(|i| i.into_event_stream(vec![0u8; 16 * (16 + 256)].into_boxed_slice()))
            .map_err(Error::Start)?;
        let annotations = annotations_file.map(|f| {
            let dir = f.parent().unwrap_or(Path::new(".")).to_path_buf();
            let name = f.file_name().map(OsStr::to_os_string).unwrap_or_default();
            (unwatched(dir), name)
        });
        let mut s = Source {
            watches: events.watches(),
            events,
            config: unwatched(config_dir.to_path_buf()),
            annotations,
            links: Vec::new(),
            pending: Changes::default(),
            last_plain: Instant::now(),
            writing: BTreeMap::new(),
            errors: 0,
            failed: None,
            watch_error: None,
        };
        s.ensure_watches();
        Ok(s)
    }

    /// Re-adds watches on dirs that appeared or were replaced. Returns true when the config dir is watched.
    pub(crate) fn ensure_watches(&mut self) -> bool {
        // One stat per watched dir and turn: the config dir's also tells whether to follow links.
        let config_now = dev_ino(&self.config.path);
        if config_now != self.config.dev_ino {
            self.follow_links();
        }
        let mut error = None;
        let mut refreshed = false;
        let others = self.annotations.iter_mut().chain(self.links.iter_mut());
        let dirs = std::iter::once((&mut self.config, config_now)).chain(others.map(|(w, _)| {
            let now = dev_ino(&w.path);
            (w, now)
        }));
        for (w, now) in dirs {
            if now == w.dev_ino {
                continue;
            }
            // A removed dir's watch is already gone (IN_IGNORED); removing it again fails, harmlessly.
            if let Some(wd) = w.wd.take() {
                let _ = self.watches.remove(wd);
            }
            w.dev_ino = None;
            if now.is_some() {
                match self.watches.add(&w.path, mask()) {
                    Ok(wd) => {
                        w.wd = Some(wd);
                        w.dev_ino = now;
                        refreshed = true;
                    }
                    Err(e) => error = Some(format!("cannot watch {}: {e}", w.path.display())),
                }
            }
        }
        if refreshed {
            // Whatever happened while unwatched must be looked at.
            self.pending |= Changes::ALL;
        }
        self.watch_error = self.failed.clone().or(error);
        self.config.dev_ino.is_some()
    }

    /// Watches the dir of every symlink met resolving the config path, for that link's name, and stops
    /// watching those no longer met; looked at whenever the path may resolve to another dir.
    fn follow_links(&mut self) {
        let now = links_along(&self.config.path);
        let (kept, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.links)
            .into_iter()
            .partition(|(w, name)| now.iter().any(|(d, n)| d == &w.path && n == name));
        self.links = kept;
        for (dir, name) in now {
            if !self.links.iter().any(|(w, n)| w.path == dir && n == &name) {
                self.links.push((unwatched(dir), name));
            }
        }
        // A dir watched for another reason too shares the watch (inotify gives one per inode): kept.
        for wd in gone.into_iter().filter_map(|(w, _)| w.wd) {
            let shared = std::iter::once(&self.config)
                .chain(self.annotations.iter().map(|(w, _)| w))
                .chain(self.links.iter().map(|(w, _)| w))
                .any(|w| w.wd.as_ref() == Some(&wd));
            if !shared {
                let _ = self.watches.remove(wd);
            }
        }
    }

    /// Waits for changes and takes them. Cancel-safe: what was read is kept until taken.
    pub(crate) async fn changed(&mut self) -> Changes {
        std::future::poll_fn(|cx| self.poll_changed(cx)).await
    }

    /// Reads every event already queued, so that a burst is one change, then takes what they ask for.
    fn poll_changed(&mut self, cx: &mut Context<'_>) -> Poll<Changes> {
        while self.failed.is_none() {
            match Pin::new(&mut self.events).poll_next(cx) {
                Poll::Ready(Some(Ok(ev))) => {
                    let c = classify(&ev, &self.config, self.annotations.as_ref(), &self.links);
                    self.track_writes(&ev);
                    if ev.mask.contains(EventMask::Q_OVERFLOW) {
                        self.errors += 1;
                        // What was lost may be a watch's `IN_IGNORED`: check every watch again.
                        self.forget(|_| true);
                    }
                    if c.contains(Changes::PLAIN) {
                        self.last_plain = Instant::now();
                    }
                    if ev.mask.contains(EventMask::IGNORED) {
                        self.forget(|wd| wd == &ev.wd);
                    }
                    self.pending |= c;
                }
                // A failed read is counted and answered by looking at everything, once.
                Poll::Ready(end) => {
                    let why = match end {
                        Some(Err(e)) => e.to_string(),
                        _ => "end of events".to_owned(),
                    };
                    self.failed = Some(format!(
                        "the file watch failed ({why}); changes are found by the periodic re-read only"
                    ));
                    self.errors += 1;
                    self.pending |= Changes::ALL;
                }
                Poll::Pending => break,
            }
        }
        if self.pending.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(std::mem::take(&mut self.pending))
        }
    }

    /// The kernel dropped a watch (its dir was removed), or may have: the next
    /// [`Source::ensure_watches`] adds the watches `which` picks again even when the dir there now has
    /// the old inode number, as ext4 hands it out again.
    fn forget(&mut self, which: impl Fn(&WatchDescriptor) -> bool) {
        let dirs = std::iter::once(&mut self.config)
            .chain(self.annotations.as_mut().map(|(w, _)| w))
            .chain(self.links.iter_mut().map(|(w, _)| w));
        for w in dirs.filter(|w| w.wd.as_ref().is_some_and(&which)) {
            w.dev_ino = None;
        }
    }

    /// Keeps [`Source::writing`] up to date from one event.
    fn track_writes(&mut self, ev: &EventOwned) {
        if ev
            .mask
            .intersects(EventMask::Q_OVERFLOW | EventMask::IGNORED)
        {
            // What was lost may be a close: better read a file being written (its size and times
            // are still checked across the read) than wait for ever for a close already made.
            self.writing.clear();
            return;
        }
        if self.config.wd.as_ref() != Some(&ev.wd) {
            return;
        }
        let Some(name) = ev.name.as_deref() else {
            return;
        };
        if plain_name(name).is_none() {
            return;
        }
        if ev.mask.contains(EventMask::MODIFY) {
            self.writing
                .entry(name.to_os_string())
                .or_insert_with(Instant::now);
        }
        // Closed after writing, removed, or replaced by a rename (a writer still holding the old
        // file writes to no name any more).
        if ev.mask.intersects(
            EventMask::CLOSE_WRITE
                | EventMask::DELETE
                | EventMask::MOVED_FROM
                | EventMask::MOVED_TO,
        ) {
            self.writing.remove(name);
        }
    }

    /// The config dir's file open for writing the longest, and for how long; `None` when every file
    /// written was closed since.
    pub(crate) fn writing(&self) -> Option<(String, Duration)> {
        self.writing
            .iter()
            .min_by_key(|(_, t)| **t)
            .map(|(n, t)| (n.to_string_lossy().into_owned(), t.elapsed()))
    }

    /// Time since the last event on a plain (non-`..data`) name in the config dir.
    pub(crate) fn since_plain_event(&self) -> Duration {
        self.last_plain.elapsed()
    }

    /// Watch errors and overflows since the last call.
    pub(crate) fn take_errors(&mut self) -> u64 {
        std::mem::take(&mut self.errors)
    }
}

/// What one event asks to look at again. An event on a watched dir itself (moved, removed) or a lost
/// queue asks for everything the dir holds.
fn classify(
    ev: &EventOwned,
    config: &Watched,
    ann: Option<&(Watched, OsString)>,
    links: &[(Watched, OsString)],
) -> Changes {
    if ev.mask.contains(EventMask::Q_OVERFLOW) {
        return Changes::ALL;
    }
    let mut out = Changes::default();
    let name = ev.name.as_deref();
    if config.wd.as_ref() == Some(&ev.wd) {
        out |= match name {
            None => Changes::CONFIG,
            Some(n) if n == DATA_LINK => Changes::CONFIG,
            Some(n) if plain_name(n).is_none() => Changes::default(),
            Some(_) => Changes::PLAIN,
        };
    }
    if let Some((w, file)) = ann
        && w.wd.as_ref() == Some(&ev.wd)
        && name.is_none_or(|n| n == DATA_LINK || n == file)
    {
        out |= Changes::ANNOTATIONS;
    }
    if links
        .iter()
        .any(|(w, n)| w.wd.as_ref() == Some(&ev.wd) && name.is_none_or(|name| name == n))
    {
        out |= Changes::CONFIG;
    }
    out
}

/// `name` when it may be a plain directory's key: not the writer's own (`..`), not an editor's
/// leftover (a swap file, a backup), whose writes are no edits of the config.
fn plain_name(name: &OsStr) -> Option<&OsStr> {
    let b = name.as_encoded_bytes();
    (!b.starts_with(b"..") && !is_editor_leftover(b)).then_some(name)
}
