//! Whether a plain directory has settled: a writer that truncates a file and writes it in parts (`cat
//! new > file`, `cp`) can pause between them, and a read in that pause finds a shorter file that may
//! still be a valid config. The file watch says a file is open for writing, but its events can still
//! be queued, unread, when a read asked for by something else (a timer, a settings change) begins. A
//! file's change time (ctime) cannot be set back by any writer, so a file changed less than the quiet
//! period ago is not read yet, whatever asked for the read, and whatever the events say.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Entries looked at, at most: a plain dir is a handful of files, and this runs on the loop.
const ENTRIES: usize = 256;

/// How long until every entry of the plain dir `dir` has been unchanged for `quiet`, by change time;
/// `None` when it already has, or when it cannot be listed (the read then says why). For a plain dir
/// only: the caller knows a kubelet volume by its `..data`, whose swap is atomic. A change time in the
/// future (a clock set back) counts as settled, so a read is never put off for good.
pub(crate) fn settling(dir: &Path, quiet: Duration) -> Option<Duration> {
    let newest = std::fs::read_dir(dir)
        .ok()?
        .take(ENTRIES)
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter_map(|m| {
            let secs = u64::try_from(m.ctime()).ok()?;
            let nanos = u32::try_from(m.ctime_nsec()).ok()?;
            Some(UNIX_EPOCH + Duration::new(secs, nanos))
        })
        .max()?;
    let age = SystemTime::now().duration_since(newest).ok()?;
    quiet.checked_sub(age).filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_dir_settles_once_its_newest_change_is_older_than_the_quiet_period() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("config.yaml"), "a: 1\n").unwrap();
        let wait = settling(d.path(), Duration::from_secs(3600)).expect("just written");
        assert!(wait <= Duration::from_secs(3600), "{wait:?}");
        assert_eq!(settling(d.path(), Duration::ZERO), None);
        assert_eq!(
            settling(&d.path().join("absent"), Duration::from_secs(3600)),
            None
        );
    }
}
