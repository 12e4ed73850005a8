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
//! watched dir on every turn of the loop, on the loop's thread.

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

/// As many links as the kernel follows resolving one path (`MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Every symlink met resolving `path` as the kernel does, component by component (a link's target
/// resolved in its turn): the dir holding the link and its name there. Stops where a component does not
/// exist, and after [`MAX_LINKS`] links.
fn links_along(path: &Path) -> Vec<(PathBuf, OsString)> {
    /// Puts the components of `p` before those left, starting again at `/` for an absolute `p`.
    fn prepend(p: &Path, todo: &mut VecDeque<OsString>, at: &mut PathBuf) {
        let mut parts = Vec::new();
        for c in p.components() {
            match c {
                Component::RootDir => {
                    parts.clear();
                    *at = PathBuf::from("/");
                }
                Component::Prefix(_) | Component::CurDir => {}
                Component::ParentDir | Component::Normal(_) => {
                    parts.push(c.as_os_str().to_os_string());
                }
            }
        }
        for part in parts.into_iter().rev() {
            todo.push_front(part);
        }
    }
    let mut todo: VecDeque<OsString> = VecDeque::new();
    let mut at = PathBuf::new();
    prepend(path, &mut todo, &mut at);
    let mut out: Vec<(PathBuf, OsString)> = Vec::new();
    while let Some(part) = todo.pop_front() {
        if part == ".." {
            // `at` holds no link: its parent is found by dropping its last name.
            if at.as_os_str().is_empty() || at.ends_with("..") {
                at.push("..");
            } else {
                at.pop();
            }
            continue;
        }
        let next = at.join(&part);
        let Ok(meta) = std::fs::symlink_metadata(&next) else {
            break;
        };
        if !meta.is_symlink() {
            at = next;
            continue;
        }
        if out.len() == MAX_LINKS {
            break;
        }
        let dir = if at.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            at.clone()
        };
        let Ok(target) = std::fs::read_link(&next) else {
            break;
        };
        out.push((dir, part));
        prepend(&target, &mut todo, &mut at);
    }
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next change, or a failure after 5 s (a lost watch would otherwise hang the test).
    async fn next(s: &mut Source) -> Changes {
        tokio::time::timeout(Duration::from_secs(5), s.changed())
            .await
            .expect("no change within 5 s")
    }

    /// A new dir `v` watched alone, past the first full look. The temporary dir goes with the first
    /// value.
    async fn watching_v() -> (tempfile::TempDir, PathBuf, Source) {
        let root = tempfile::tempdir().unwrap();
        let v = root.path().join("v");
        std::fs::create_dir(&v).unwrap();
        let mut s = Source::new(&v, None).unwrap();
        assert_eq!(
            s.changed().await,
            Changes::ALL,
            "the first watch looks at everything"
        );
        (root, v, s)
    }

    /// A file written and not yet closed is open for writing until its close; an editor's leftover
    /// is neither tracked nor a plain edit.
    #[tokio::test]
    async fn a_file_is_open_for_writing_until_its_close_and_leftovers_are_no_edits() {
        use std::io::Write;
        let (_root, v, mut s) = watching_v().await;
        let mut f = std::fs::File::create(v.join("config.yaml")).unwrap();
        f.write_all(b"half").unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(5), async {
            while s.writing().is_none() {
                s.changed().await;
            }
        })
        .await;
        assert!(seen.is_ok(), "the write was not seen");
        assert_eq!(s.writing().unwrap().0, "config.yaml");
        drop(f);
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            while s.writing().is_some() {
                s.changed().await;
            }
        })
        .await;
        assert!(closed.is_ok(), "the close was not seen");
        // A leftover's write is neither an edit nor a file being written; the file after it is.
        let mut swap = std::fs::File::create(v.join(".config.yaml.swp")).unwrap();
        swap.write_all(b"swap").unwrap();
        std::fs::write(v.join("after"), "x").unwrap();
        assert!(next(&mut s).await.contains(Changes::PLAIN));
        assert_eq!(
            s.writing(),
            None,
            "the swap file, still open, is not tracked"
        );
        drop(swap);
    }

    /// A file written in `v` is seen as a plain edit within 5 s.
    async fn sees_a_write_in(s: &mut Source, v: &Path) {
        std::fs::write(v.join("app.yaml"), "x").unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(5), async {
            while !s.changed().await.contains(Changes::PLAIN) {}
        })
        .await;
        assert!(seen.is_ok(), "a write in the new dir was never seen");
    }

    /// How many events the kernel queues before it drops them.
    fn queue_max() -> usize {
        std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(16384)
    }

    /// The kubelet's swap, in the order it writes, on real dirs: only the `..data` rename is a change,
    /// and the annotations file's own swap is one of the annotations.
    #[tokio::test]
    async fn the_kubelet_sequence_wakes_for_the_data_rename_only() {
        let root = tempfile::tempdir().unwrap();
        let (v, pi) = (root.path().join("v"), root.path().join("pi"));
        std::fs::create_dir_all(&v).unwrap();
        std::fs::create_dir_all(&pi).unwrap();
        let mut s = Source::new(&v, Some(&pi.join("annotations"))).unwrap();
        assert_eq!(
            s.changed().await,
            Changes::ALL,
            "the first watch looks at everything"
        );

        let ts = v.join("..2026_11_29_22_37_35.1");
        std::fs::create_dir(&ts).unwrap();
        std::fs::write(ts.join("app.yaml"), "x").unwrap();
        std::os::unix::fs::symlink("..2026_11_29_22_37_35.1", v.join("..data_tmp")).unwrap();
        std::fs::rename(v.join("..data_tmp"), v.join("..data")).unwrap();
        assert_eq!(s.changed().await, Changes::CONFIG);

        std::fs::write(v.join("app.yaml"), "plain").unwrap();
        assert_eq!(s.changed().await, Changes::PLAIN);
        assert!(s.since_plain_event() < Duration::from_secs(60));

        std::fs::write(pi.join("other"), "x").unwrap();
        std::fs::write(pi.join("annotations"), "a=\"b\"").unwrap();
        assert_eq!(s.changed().await, Changes::ANNOTATIONS);

        // Reading is not a change: a no-op sync opens every file.
        std::fs::read(v.join("app.yaml")).unwrap();
        std::fs::write(pi.join("annotations"), "a=\"c\"").unwrap();
        assert_eq!(s.changed().await, Changes::ANNOTATIONS);
        assert_eq!(s.take_errors(), 0);
    }

    #[tokio::test]
    async fn a_removed_and_recreated_dir_is_watched_again() {
        let (_root, v, mut s) = watching_v().await;
        std::fs::remove_dir(&v).unwrap();
        assert!(s.changed().await.contains(Changes::CONFIG));
        assert!(!s.ensure_watches(), "a missing dir is not watched");
        std::fs::create_dir(&v).unwrap();
        assert!(s.ensure_watches());
        assert_eq!(s.changed().await, Changes::ALL);
        std::fs::write(v.join("app.yaml"), "x").unwrap();
        assert_eq!(s.changed().await, Changes::PLAIN);
    }

    /// ext4 hands a removed dir's inode number to the next dir made: a dir removed and made again
    /// before the loop looks has the (dev, inode) it had, but its watch went with the old one
    /// (`IN_IGNORED`), and must be added again.
    #[tokio::test]
    async fn a_dir_made_again_with_its_old_inode_number_is_watched_again() {
        let (_root, v, mut s) = watching_v().await;
        std::fs::remove_dir(&v).unwrap();
        std::fs::create_dir(&v).unwrap();
        // Stands in for the reuse where the file system does not reuse inode numbers.
        let reused = dev_ino(&v);
        if s.config.dev_ino.is_some() {
            s.config.dev_ino = reused;
        }
        assert!(s.changed().await.contains(Changes::CONFIG));
        assert!(s.ensure_watches());
        sees_a_write_in(&mut s, &v).await;
    }

    /// git-sync's layout: the config path is a link moved over by a new one, the old target kept. The
    /// path's parent is watched for the link's name, and the new target is watched once looked at.
    #[tokio::test]
    async fn a_config_path_link_moved_over_is_seen_and_its_new_target_watched() {
        let root = tempfile::tempdir().unwrap();
        let (a, b, cur) = (
            root.path().join("a"),
            root.path().join("b"),
            root.path().join("cur"),
        );
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let pi = root.path().join("pi");
        std::fs::create_dir(&pi).unwrap();
        std::os::unix::fs::symlink("a", &cur).unwrap();
        let mut s = Source::new(&cur, Some(&pi.join("annotations"))).unwrap();
        assert_eq!(next(&mut s).await, Changes::ALL);
        sees_a_write_in(&mut s, &cur).await;

        std::os::unix::fs::symlink("b", root.path().join("cur.tmp")).unwrap();
        std::fs::rename(root.path().join("cur.tmp"), &cur).unwrap();
        assert!(next(&mut s).await.contains(Changes::CONFIG), "the retarget");
        assert!(s.ensure_watches());
        assert_eq!(next(&mut s).await, Changes::ALL, "the new target, watched");
        // The old target is no longer the config: an edit there, then the annotations, is the
        // annotations alone (one queue, read in order).
        std::fs::write(a.join("app.yaml"), "old").unwrap();
        std::fs::write(pi.join("annotations"), "a=\"b\"").unwrap();
        assert_eq!(next(&mut s).await, Changes::ANNOTATIONS);
        sees_a_write_in(&mut s, &b).await;
        assert_eq!(s.take_errors(), 0);

        // Other names in the parent are not the config.
        std::fs::write(root.path().join("other"), "x").unwrap();
        std::fs::write(b.join("app.yaml"), "y").unwrap();
        assert_eq!(next(&mut s).await, Changes::PLAIN);

        // A plain dir moved over the link: the parent is no longer watched.
        std::fs::remove_file(&cur).unwrap();
        assert!(next(&mut s).await.contains(Changes::CONFIG));
        std::fs::create_dir(&cur).unwrap();
        assert!(s.ensure_watches());
        assert!(s.links.is_empty());
        assert_eq!(next(&mut s).await, Changes::ALL);
        sees_a_write_in(&mut s, &cur).await;
    }

    /// git-sync's layout with the config a dir inside the checkout (`--watch /git/current/config`):
    /// the link is a dir along the path, not its last component. Its dir is watched for its name, so a
    /// link moved over it is a change at once, and the new checkout's config dir is watched.
    #[tokio::test]
    async fn a_link_along_the_config_path_moved_over_is_seen_and_its_new_target_watched() {
        let root = tempfile::tempdir().unwrap();
        let git = root.path().join("git");
        let (a, b) = (git.join("wt-a/config"), git.join("wt-b/config"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let pi = root.path().join("pi");
        std::fs::create_dir(&pi).unwrap();
        std::os::unix::fs::symlink("wt-a", git.join("current")).unwrap();
        let config = git.join("current/config");
        let mut s = Source::new(&config, Some(&pi.join("annotations"))).unwrap();
        assert_eq!(next(&mut s).await, Changes::ALL);
        sees_a_write_in(&mut s, &config).await;

        std::os::unix::fs::symlink("wt-b", git.join("current.tmp")).unwrap();
        std::fs::rename(git.join("current.tmp"), git.join("current")).unwrap();
        assert!(next(&mut s).await.contains(Changes::CONFIG), "the retarget");
        assert!(s.ensure_watches());
        assert_eq!(next(&mut s).await, Changes::ALL, "the new target, watched");
        std::fs::write(a.join("app.yaml"), "old").unwrap();
        std::fs::write(pi.join("annotations"), "a=\"b\"").unwrap();
        assert_eq!(next(&mut s).await, Changes::ANNOTATIONS);
        sees_a_write_in(&mut s, &b).await;
        // Other names beside the link are not the config.
        std::fs::create_dir(git.join("wt-c")).unwrap();
        std::fs::write(b.join("app.yaml"), "y").unwrap();
        assert_eq!(next(&mut s).await, Changes::PLAIN);
        assert_eq!(s.take_errors(), 0);
    }

    /// Links are resolved as the kernel resolves them: a link's target, relative to the link's dir or
    /// absolute, may hold links itself, and `..` is taken after the link it follows.
    #[test]
    fn every_link_met_resolving_a_path_is_found() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("real/config")).unwrap();
        std::fs::create_dir_all(r.join("sub")).unwrap();
        std::os::unix::fs::symlink("../real", r.join("sub/hop")).unwrap();
        std::os::unix::fs::symlink("sub/hop", r.join("cur")).unwrap();
        std::os::unix::fs::symlink(r.join("cur/config"), r.join("last")).unwrap();
        let names = |v: Vec<(PathBuf, OsString)>| -> Vec<(PathBuf, String)> {
            v.into_iter()
                .map(|(d, n)| (d, n.to_string_lossy().into_owned()))
                .collect()
        };
        assert_eq!(
            names(links_along(&r.join("last"))),
            [
                (r.to_path_buf(), "last".to_owned()),
                (r.to_path_buf(), "cur".to_owned()),
                (r.join("sub"), "hop".to_owned()),
            ]
        );
        assert_eq!(names(links_along(&r.join("real/config"))), []);
        // Up from where a link led, not from the link.
        assert_eq!(
            names(links_along(&r.join("sub/hop/../sub"))),
            [(r.join("sub"), "hop".to_owned())]
        );
        // A loop ends after as many links as the kernel follows.
        std::os::unix::fs::symlink("loop", r.join("loop")).unwrap();
        assert_eq!(links_along(&r.join("loop/x")).len(), 1, "deduplicated");
    }

    /// A projected volume holding the config and the annotations file: one dir, one watch, and a swap
    /// is a change of both, also once the dir was made again.
    #[tokio::test]
    async fn the_annotations_file_in_the_config_dir_is_one_watch_for_both() {
        let root = tempfile::tempdir().unwrap();
        let v = root.path().join("v");
        std::fs::create_dir(&v).unwrap();
        let mut s = Source::new(&v, Some(&v.join("annotations"))).unwrap();
        assert_eq!(next(&mut s).await, Changes::ALL);
        for round in 0..2 {
            std::os::unix::fs::symlink("..ts", v.join("..data_tmp")).unwrap();
            std::fs::rename(v.join("..data_tmp"), v.join("..data")).unwrap();
            assert_eq!(
                next(&mut s).await,
                Changes::CONFIG | Changes::ANNOTATIONS,
                "round {round}"
            );
            std::fs::remove_file(v.join("..data")).unwrap();
            assert_eq!(next(&mut s).await, Changes::CONFIG | Changes::ANNOTATIONS);
            std::fs::remove_dir(&v).unwrap();
            std::fs::create_dir(&v).unwrap();
            if s.config.dev_ino.is_some() {
                s.config.dev_ino = dev_ino(&v);
                s.annotations.as_mut().unwrap().0.dev_ino = dev_ino(&v);
            }
            assert!(next(&mut s).await.contains(Changes::CONFIG));
            assert!(s.ensure_watches());
            assert_eq!(next(&mut s).await, Changes::ALL);
        }
    }

    /// A full queue drops the `IN_IGNORED` of a removed dir too: after an overflow every watch is
    /// checked again, so a dir made again with the old inode number is not left unwatched.
    #[tokio::test]
    async fn after_an_overflow_a_dir_made_again_is_watched_again() {
        use std::os::unix::fs::PermissionsExt;
        let (_root, v, mut s) = watching_v().await;
        let max = queue_max();
        // Two names taking turns, so the kernel cannot merge the events; the writer's own names.
        let (a, b) = (v.join("..a"), v.join("..b"));
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        for i in 0..max {
            let mode = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(if i % 2 == 0 { &a } else { &b }, mode).unwrap();
        }
        std::fs::remove_file(&a).unwrap();
        std::fs::remove_file(&b).unwrap();
        std::fs::remove_dir(&v).unwrap();
        std::fs::create_dir(&v).unwrap();
        // Stands in for the reuse where the file system does not reuse inode numbers.
        if s.config.dev_ino.is_some() {
            s.config.dev_ino = dev_ino(&v);
        }
        assert_eq!(s.changed().await, Changes::ALL);
        assert!(s.take_errors() >= 1, "the queue did not overflow");
        assert!(s.ensure_watches());
        sees_a_write_in(&mut s, &v).await;
    }

    /// Events the kernel could not queue are a look at everything, and are counted as an error.
    #[tokio::test]
    async fn a_lost_queue_is_a_full_look_and_counted() {
        let (_root, v, mut s) = watching_v().await;
        let max = queue_max();
        // Each file is one IN_CREATE and one IN_CLOSE_WRITE: more than the queue holds. The names are
        // the writer's own (`..`), so only the overflow can make this a change.
        for i in 0..max / 2 + 1 {
            std::fs::File::create(v.join(format!("..f{i}"))).unwrap();
        }
        let seen = tokio::time::timeout(Duration::from_secs(30), s.changed()).await;
        assert_eq!(seen.ok(), Some(Changes::ALL));
        assert!(s.take_errors() >= 1);
    }
}
