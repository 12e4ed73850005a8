//! The container-level settings that are not gate settings (read once, no annotation), checked
//! together before anything starts.

use super::{Error, Invalid};

/// The container-level settings that are not gate settings, checked before anything starts: a value
/// that cannot work is refused (exit 64) naming the setting, not discovered later.
pub fn check_paths(
    watch: &std::path::Path,
    promote_to: Option<&std::path::Path>,
    resync: std::time::Duration,
) -> Result<(), Error> {
    let mut errors = Vec::new();
    if resync < std::time::Duration::from_secs(1) {
        errors.push(Invalid {
            setting: "--resync-interval (CONFGATE_RESYNC_INTERVAL)".into(),
            value: format!("{resync:?}"),
            problem: "below 1s the safety re-read becomes a busy loop".into(),
            allowed: "a duration of at least 1s, e.g. 30s",
        });
    }
    if let Some(to) = promote_to {
        let setting = "--promote-to (CONFGATE_PROMOTE_TO)";
        let full = |p: &std::path::Path| {
            // The real path where it exists (a symlink could hide the overlap), else the lexical one.
            std::fs::canonicalize(p)
                .or_else(|_| std::path::absolute(p))
                .unwrap_or_else(|_| p.to_path_buf())
        };
        let (w, t) = (full(watch), full(to));
        let problem = if t == w {
            Some("is the watched directory (--watch)".to_owned())
        } else if t.starts_with(&w) {
            Some(
                "is inside the watched directory (--watch): promotions would be read as config"
                    .to_owned(),
            )
        } else if w.starts_with(&t) {
            Some("contains the watched directory (--watch): promotions would replace it".to_owned())
        } else if std::fs::metadata(to).is_ok_and(|m| !m.is_dir()) {
            Some("exists and is not a directory".to_owned())
        } else {
            None
        };
        if let Some(problem) = problem {
            errors.push(Invalid {
                setting: setting.into(),
                value: to.display().to_string(),
                problem,
                allowed: "a directory (created if absent) outside --watch, e.g. an emptyDir mount",
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error(errors))
    }
}
