//! The `..confgate_*` markers beside the promoted config: the reload owed, the link to the dir of
//! the config the component applied (and to the first config's, kept until then), and the record of
//! contents it refused. Each is replaced with one `rename`.
//!
//! These are functions of the promoted dir's path, below `Promoter`, which calls them: what a
//! marker's change does to the rest of the dir (the tidying after it, the switch back to the applied
//! config's dir) is the writer's.
//!
//! At start-up each is read back without following a link or blocking (regular files only,
//! bounded); a record confgate did not write is set aside as `NAME.bad` and ignored, never trusted,
//! never fatal.

use std::io;
use std::path::{Path, PathBuf};

use super::error::io_err;
use super::link::link_replacing;
use super::remove::remove_file;
use super::{Error, RecordTarget};
use crate::reload::{Refusal, RefusedBy};
use crate::snapshot::{self, ContentHash, DATA_LINK, Observed};
use crate::values::Reload;

/// The "reload owed" marker in the promoted dir; `..` keeps it out of every kubelet-layout reader.
pub(crate) const RELOAD_OWED: &str = "..confgate_reload_owed";
const RELOAD_OWED_TMP: &str = "..confgate_reload_owed_tmp";
/// A link to the timestamped dir of the last config the component applied, kept for a rollback.
pub(crate) const APPLIED: &str = "..confgate_applied";
const APPLIED_TMP: &str = "..confgate_applied_tmp";
/// A link to the dir of the first config promoted into an empty dir, kept beside later promotions
/// while nothing says yet whether the component started on it: the component's answer to a later
/// reload says it did, and this becomes [`APPLIED`].
pub(crate) const BASELINE: &str = "..confgate_baseline";
const BASELINE_TMP: &str = "..confgate_baseline_tmp";
/// The contents the component refused, newest last. Format 2: a `confgate-rejected 2` line, a
/// `target TARGET` line naming the reload target they were refused under (as shown, credentials
/// removed), then one `sha256:HEX KIND SAID` line each: `answer STATUS`, `metrics` or `recorded
/// HOLDS` (1 or 0), and the component's words. An earlier version's record has no first line, a
/// `sha256:HEX REASON` line each (its error's text), and, before the target line was added, no
/// target: it still reads, each reason kept as it was worded.
pub(crate) const REJECTED: &str = "..confgate_rejected";
pub(super) const REJECTED_TMP: &str = "..confgate_rejected_tmp";
/// Bound on what is read of [`REJECTED`]: the gate keeps a handful of lines; anything past this is not
/// a file this writer made.
pub(super) const REJECTED_READ_MAX: u64 = 16 << 10;
/// Bound on one reason kept in [`REJECTED`].
pub(super) const REJECTED_REASON_MAX: usize = 512;
/// The annotations' values last in force, in the downward-API annotations format: at a restart, a
/// bad annotation keeps the value recorded here rather than falling back to the flag's. Holds only
/// values an annotation gave, without credentials, each checked again when read.
pub(crate) const SETTINGS_IN_FORCE: &str = "..confgate_settings";
const SETTINGS_IN_FORCE_TMP: &str = "..confgate_settings_tmp";

/// The record of contents the component refused, as read at start-up.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Rejected {
    /// Each refused content with the component's refusal, oldest first.
    pub(crate) entries: Vec<(ContentHash, Refusal)>,
    /// Why part or all of the record was ignored (a damaged or unreadable file), if it was.
    pub(crate) ignored: Option<String>,
    /// The reload target the contents were refused under.
    pub(crate) target: RecordTarget,
}

/// The first line of a record of refusals in format 2.
const REJECTED_V2: &str = "confgate-rejected 2";

/// The hash of a promoted config whose reload is still owed in `dir` (recorded by
/// [`mark_reload_owed`] and not yet cleared), as found at start-up.
pub(super) fn reload_owed(dir: &Path) -> Option<ContentHash> {
    let path = dir.join(RELOAD_OWED);
    let text = match std::fs::read_link(&path) {
        Ok(target) => target.into_os_string().into_string().ok()?,
        // A regular file holding the hash: how earlier versions recorded it. Anything else (a
        // FIFO the component made) is no marker, and never waited on.
        Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => match read_record(&path, 256) {
            Ok(bytes) => String::from_utf8(bytes).ok()?,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "the reload-owed marker is not one confgate wrote; ignoring it");
                set_aside(&path);
                return None;
            }
        },
        Err(_) => return None,
    };
    parse_hash(text.trim())
}

/// Records durably that the component is owed a reload for `sha`: a link whose target is the
/// hash, as `..data` names its dir. A link has no data to write, and ext4 renames it over the last
/// marker without the flush it forces when a written file replaces another (`auto_da_alloc`).
pub(super) fn mark_reload_owed(dir: &Path, sha: ContentHash) -> Result<(), Error> {
    let tmp = dir.join(RELOAD_OWED_TMP);
    link_replacing(Path::new(&sha.plain().to_string()), &tmp)?;
    let path = dir.join(RELOAD_OWED);
    std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))
}

/// Clears the owed reload once the component was told about `sha`. An owed reload for another
/// (newer) config stays; `false` then.
pub(super) fn clear_reload_owed(dir: &Path, sha: ContentHash) -> Result<bool, Error> {
    match reload_owed(dir) {
        Some(owed) if owed != sha => Ok(false),
        _ => remove_file(&dir.join(RELOAD_OWED)).map(|()| true),
    }
}

/// The contents the component refused, as recorded by [`record_rejected`]. A damaged
/// record is read as far as it makes sense: lines that are not a record are skipped and said so in
/// [`Rejected::ignored`], never an error.
pub(super) fn rejected(dir: &Path) -> Rejected {
    let path = dir.join(REJECTED);
    let bytes = match read_record(&path, REJECTED_READ_MAX + 1) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Rejected::default(),
        Err(e) => {
            // Not a record this writer made (a FIFO, a link, a dir): set aside so the next
            // refusal can be recorded, never trusted, never waited on.
            let aside = set_aside(&path);
            return Rejected {
                ignored: Some(format!("cannot read {}: {e}{aside}", path.display())),
                ..Rejected::default()
            };
        }
    };
    let mut r = parse_rejected(&bytes[..bytes.len().min(REJECTED_READ_MAX as usize)]);
    if bytes.len() as u64 > REJECTED_READ_MAX {
        r.ignored = Some(format!(
            "{} is over {REJECTED_READ_MAX} bytes; read up to there",
            path.display()
        ));
    } else if let Some(why) = r.ignored.take() {
        r.ignored = Some(format!("{}: {why}", path.display()));
    }
    r
}

/// Replaces the record of refused contents with `entries` (oldest first), refused under the
/// reload target `target`, with one `rename`, in format 2.
pub(super) fn record_rejected(
    dir: &Path,
    target: &Reload,
    entries: &[(ContentHash, Refusal)],
) -> Result<(), Error> {
    let mut text = format!(
        "{REJECTED_V2}\n{TARGET_LINE}{}\n",
        reason_line(&target.to_string())
    );
    for (h, refusal) in entries {
        let kind = match &refusal.by {
            RefusedBy::Answer { status, .. } => format!("answer {status}"),
            RefusedBy::Metrics => "metrics".to_owned(),
            RefusedBy::Recorded { holds } => format!("recorded {}", u8::from(*holds)),
        };
        // The plain form: a sealed one (a Secret's) is keyed per process and would not be
        // recognised after a restart; this file sits beside the content itself anyway.
        text.push_str(&format!(
            "{} {kind} {}\n",
            h.plain(),
            reason_line(&refusal.said)
        ));
    }
    let tmp = dir.join(REJECTED_TMP);
    std::fs::write(&tmp, text).map_err(io_err("write", &tmp))?;
    let path = dir.join(REJECTED);
    std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))
}

/// The annotations' values last in force, as recorded by [`record_settings`]; `Err` says why the
/// record was not used (not a regular file, over the bound, not in the annotations format), and it is
/// then set aside: never trusted, never waited on, never fatal. An absent record is an empty one.
pub(super) fn settings_in_force(dir: &Path) -> Result<crate::annotations::Annotations, String> {
    let path = dir.join(SETTINGS_IN_FORCE);
    let max = crate::annotations::MAX_BYTES;
    let bytes = match read_record(&path, max + 1) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => {
            return Err(format!(
                "cannot read {}: {e}{}",
                path.display(),
                set_aside(&path)
            ));
        }
    };
    if bytes.len() as u64 > max {
        return Err(format!(
            "{} is over {max} bytes{}",
            path.display(),
            set_aside(&path)
        ));
    }
    crate::annotations::parse_bytes(&bytes).map_err(|e| {
        format!(
            "{} is not a record confgate wrote: {e}{}",
            path.display(),
            set_aside(&path)
        )
    })
}

/// Replaces the record of the annotations' values in force with `values`, with one `rename`.
pub(super) fn record_settings(
    dir: &Path,
    values: &crate::annotations::Annotations,
) -> Result<(), Error> {
    let tmp = dir.join(SETTINGS_IN_FORCE_TMP);
    // A leftover in the way (a FIFO, a dir the component made) is replaced, never written through.
    remove_file(&tmp)?;
    std::fs::write(&tmp, crate::annotations::format(values)).map_err(io_err("write", &tmp))?;
    let path = dir.join(SETTINGS_IN_FORCE);
    set_aside_damaged_dir(&path)?;
    std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))
}

/// A dir in place of a record file cannot be renamed over: it is removed with a warning.
fn set_aside_damaged_dir(path: &Path) -> Result<(), Error> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        tracing::warn!(path = %path.display(), "a record in the promoted dir is a directory confgate did not make; replacing it");
        std::fs::remove_dir_all(path).map_err(io_err("remove", path))?;
    }
    Ok(())
}

/// The config [`APPLIED`] names, read back at start-up, and since when (when the link was made).
pub(super) fn applied(dir: &Path) -> Option<(Observed, Option<jiff::Timestamp>)> {
    let Some(ts) = applied_dir(dir) else {
        let path = dir.join(APPLIED);
        if path.symlink_metadata().is_ok() {
            tracing::warn!(file = %path.display(), "the applied marker does not name one of the promoted dir's config dirs; not trusted, no rollback base");
        }
        return None;
    };
    let since = std::fs::symlink_metadata(dir.join(APPLIED))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| jiff::Timestamp::try_from(t).ok());
    Some((snapshot::read(&dir.join(ts)), since))
}

/// The timestamped dir [`APPLIED`] names, when it is one that exists.
///
/// Only a link to one of the promoted dir's own timestamped dirs counts: a link to `..data` (a
/// link itself) or to a marker is no applied config, whoever made it.
pub(super) fn applied_dir(dir: &Path) -> Option<String> {
    marker_dir(dir, APPLIED)
}

/// Records that the component applied what `..data` points at now: that dir is to be kept, for a
/// rollback, when later promotions replace it; the caller tidies away the dir kept before.
pub(super) fn mark_applied(dir: &Path) -> Result<(), Error> {
    let tmp = link_to_data_dir(dir, APPLIED_TMP)?;
    let path = dir.join(APPLIED);
    set_aside_damaged(&path)?;
    std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))?;
    // The first config's dir is no longer needed: what the component applied is known.
    remove_file(&dir.join(BASELINE))
}

/// A record at `path` that is not a link (the component shares this dir and can write into it:
/// a directory or a file there) is no record this writer made: it is removed with a warning, so
/// that the record can be written again, rather than failing every later one.
fn set_aside_damaged(path: &Path) -> Result<(), Error> {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if m.file_type().is_symlink() {
        return Ok(());
    }
    tracing::warn!(path = %path.display(), "a record in the promoted dir is not a link confgate made; replacing it");
    if m.is_dir() {
        std::fs::remove_dir_all(path).map_err(io_err("remove", path))
    } else {
        remove_file(path)
    }
}

/// Keeps the dir `..data` points at now (the first config, whose start-up check has not
/// concluded) beside the promotion about to replace it: [`BASELINE`] links it, and the tidying
/// keeps it.
pub(super) fn keep_baseline(dir: &Path) -> Result<(), Error> {
    let tmp = link_to_data_dir(dir, BASELINE_TMP)?;
    let path = dir.join(BASELINE);
    std::fs::rename(&tmp, &path).map_err(io_err("rename over", &path))
}

/// Links `tmp` (a name in `dir`) to the dir `..data` points at now, to be renamed over a record.
fn link_to_data_dir(dir: &Path, tmp: &str) -> Result<PathBuf, Error> {
    let data = dir.join(DATA_LINK);
    let ts = std::fs::read_link(&data).map_err(io_err("read", &data))?;
    let tmp = dir.join(tmp);
    link_replacing(&ts, &tmp)?;
    Ok(tmp)
}

/// The component ran the kept first config ([`BASELINE`]): it becomes [`APPLIED`], the rollback
/// base, with one `rename`; the caller tidies away the dir kept before.
pub(super) fn adopt_baseline(dir: &Path) -> Result<(), Error> {
    if baseline_dir(dir).is_none() {
        return Err(Error::NoApplied {
            path: dir.to_path_buf(),
        });
    }
    let path = dir.join(APPLIED);
    std::fs::rename(dir.join(BASELINE), &path).map_err(io_err("rename over", &path))
}

/// The timestamped dir [`BASELINE`] names, when it is one that exists.
pub(super) fn baseline_dir(dir: &Path) -> Option<String> {
    marker_dir(dir, BASELINE)
}

/// The timestamped dir the link `marker` in `dir` names, when it is one that exists.
fn marker_dir(dir: &Path, marker: &str) -> Option<String> {
    let t = std::fs::read_link(dir.join(marker)).ok()?;
    let name = t.to_str()?.to_owned();
    // Only a dir of confgate's own making: a link to `..data` or to another record is not one.
    let own_dir = name.starts_with("..")
        && !name.contains('/')
        && !name.starts_with("..confgate_")
        && std::fs::symlink_metadata(dir.join(&name)).is_ok_and(|m| m.is_dir());
    own_dir.then_some(name)
}

fn parse_hash(text: &str) -> Option<ContentHash> {
    ContentHash::parse_plain(text).ok()
}

/// How the line naming the reload target of a record of refusals starts.
const TARGET_LINE: &str = "target ";

/// Reads a record of refused contents, in format 2 or an earlier version's (see [`REJECTED`]).
/// Lines that are not one are skipped and counted in the answer's `ignored`.
fn parse_rejected(bytes: &[u8]) -> Rejected {
    let text = String::from_utf8_lossy(bytes);
    let mut r = Rejected::default();
    let mut bad = 0;
    let mut v2 = false;
    let mut shown_target = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if line.trim() == REJECTED_V2 {
            v2 = true;
            continue;
        }
        if let Some(target) = line.strip_prefix(TARGET_LINE) {
            shown_target = target.trim().to_owned();
            r.target = shown_target
                .parse()
                .map_or(RecordTarget::Unreadable, RecordTarget::Named);
            continue;
        }
        let (hash, rest) = line.split_once(' ').unwrap_or((line, ""));
        let refusal = if v2 {
            refusal_v2(rest, &shown_target)
        } else {
            Some(refusal_v1(reason_line(rest)))
        };
        match (parse_hash(hash), refusal) {
            (Some(h), Some(refusal)) => {
                r.entries.retain(|(seen, _)| *seen != h);
                r.entries.push((h, refusal));
            }
            _ => bad += 1,
        }
    }
    if bad > 0 {
        r.ignored = Some(format!(
            "{bad} line(s) that are not a refused content's hash skipped"
        ));
    }
    r
}

/// A refusal of a format 2 record: `answer STATUS SAID`, `metrics SAID` or `recorded HOLDS SAID`
/// (`target`: the record's, as shown).
fn refusal_v2(rest: &str, target: &str) -> Option<Refusal> {
    let (kind, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let word = |rest: &str| {
        let (w, said) = rest.split_once(' ').unwrap_or((rest, ""));
        (w.to_owned(), reason_line(said))
    };
    Some(match kind {
        "answer" => {
            let (status, said) = word(rest);
            Refusal {
                by: RefusedBy::Answer {
                    target: target.to_owned(),
                    status: status.parse().ok()?,
                },
                said,
            }
        }
        "metrics" => Refusal {
            by: RefusedBy::Metrics,
            said: reason_line(rest),
        },
        "recorded" => {
            let (holds, said) = word(rest);
            Refusal {
                by: RefusedBy::Recorded {
                    holds: match holds.as_str() {
                        "1" => true,
                        "0" => false,
                        _ => return None,
                    },
                },
                said,
            }
        }
        _ => return None,
    })
}

/// A refusal of an earlier version's record: its reason is its error's text, kept as worded; it
/// holds unless it is an HTTP answer that [`crate::reload`] does not count as a refusal (a 404 or a
/// 403 said the target was wrong, not the config). The record's format is read here, once, so the
/// gate decides on the kind, never on the words.
fn refusal_v1(reason: String) -> Refusal {
    let answer = reason
        .strip_prefix("POST ")
        .and_then(|r| r.split_once(" answered "))
        .map(|(_, rest)| rest);
    let holds = match answer {
        None => true,
        Some(answer) => {
            let (code, line) = answer.split_once(": ").unwrap_or((answer, ""));
            code.parse().is_ok_and(|code| {
                Refusal {
                    by: RefusedBy::Answer {
                        target: String::new(),
                        status: code,
                    },
                    said: line.to_owned(),
                }
                .holds()
            })
        }
    };
    Refusal {
        by: RefusedBy::Recorded { holds },
        said: reason,
    }
}

/// A reason as one bounded line: control characters (a newline would start a record) become spaces.
fn reason_line(why: &str) -> String {
    let mut out = String::new();
    for c in why.trim().chars() {
        if out.len() + c.len_utf8() > REJECTED_REASON_MAX {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

/// Reads one of confgate's record files, at most `max` bytes: opened without following a link and
/// without blocking (the component shares the dir and may put a FIFO or a link in its place), and only
/// when it is a regular file.
fn read_record(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => io::Error::other("a link, not a record confgate wrote"),
            _ => e,
        })?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    f.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Moves a record that is not one confgate wrote out of the way (to `NAME.bad`, replacing an earlier
/// one), so the next record can be written; what that did, for the warning.
fn set_aside(path: &Path) -> String {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".bad");
    let aside = std::path::PathBuf::from(aside);
    if std::fs::symlink_metadata(&aside).is_ok_and(|m| m.is_dir()) {
        let _ = std::fs::remove_dir_all(&aside);
    }
    match std::fs::rename(path, &aside) {
        Ok(()) => format!("; set aside as {}", aside.display()),
        Err(e) => format!("; could not set it aside: {e}"),
    }
}
