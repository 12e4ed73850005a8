//! The container-level settings that are not gate settings (read once, at start), each declared once
//! in `CONTAINER_SETTINGS` (the command line, the error messages and the table in `docs/settings.md`
//! read it), and checked together before anything starts.
//!
//! `check_paths` judges what `app` found on disk (`Looked`: the real path, whether it is a
//! directory), so this floor does no I/O. `ANN_SOURCE` is the `source` setting's annotation, read
//! once at start.

use super::error::{Error, Invalid};

/// The API source's annotation (the `source` setting's, [`SOURCE`]), read at start; recognised so
/// that it is not reported as unknown.
pub const ANN_SOURCE: &str = "confgate.io/source";

/// One container setting as users name it. Its flag is a clap field in `cli` that takes the names
/// from here; read once, at start, so it has no annotation (but the source's, read at start).
#[derive(Debug)]
pub struct ContainerSetting {
    /// What the table calls it.
    pub title: &'static str,
    /// The long flag, without `--`; empty for a setting only the environment gives.
    pub flag: &'static str,
    /// The value as the table shows it (a flag of a few words lists them: `text|json`).
    pub value_name: &'static str,
    pub env: &'static str,
    /// The annotation read at start, or empty.
    pub annotation: &'static str,
    /// The default as one would give it, or empty when the default is the absence of a value.
    pub default: &'static str,
    /// What the default means, after it in the table, with its leading punctuation; empty when the
    /// default says enough.
    pub default_means: &'static str,
}

impl ContainerSetting {
    /// How an error names it: `--watch (CONFGATE_WATCH)`.
    pub fn named(&self) -> String {
        format!("--{} ({})", self.flag, self.env)
    }
}

pub const WATCH: ContainerSetting = ContainerSetting {
    title: "raw ConfigMap mount",
    flag: "watch",
    value_name: "DIR",
    env: "CONFGATE_WATCH",
    annotation: "",
    default: "/etc/confgate/incoming",
    default_means: "",
};
pub const PROMOTE_TO: ContainerSetting = ContainerSetting {
    title: "promoted dir",
    flag: "promote-to",
    value_name: "DIR",
    env: "CONFGATE_PROMOTE_TO",
    annotation: "",
    default: "",
    default_means: ": gate-only (readiness and reload, no copy)",
};
pub const ANNOTATIONS: ContainerSetting = ContainerSetting {
    title: "annotations file",
    flag: "annotations",
    value_name: "FILE",
    env: "CONFGATE_ANNOTATIONS",
    annotation: "",
    default: "/etc/podinfo/annotations",
    default_means: "",
};
pub const LISTEN: ContainerSetting = ContainerSetting {
    title: "listen address",
    flag: "listen",
    value_name: "ADDR",
    env: "CONFGATE_LISTEN",
    annotation: "",
    default: "[::]:9797",
    default_means: " (dual-stack; `0.0.0.0:9797` with a log line where the host has no IPv6)",
};
pub const RELOAD_CA: ContainerSetting = ContainerSetting {
    title: "CA for https reloads",
    flag: "reload-ca",
    value_name: "FILE",
    env: "CONFGATE_RELOAD_CA",
    annotation: "",
    default: "",
    default_means: ": system roots only",
};
pub const RESYNC_INTERVAL: ContainerSetting = ContainerSetting {
    title: "safety re-read",
    flag: "resync-interval",
    value_name: "DUR",
    env: "CONFGATE_RESYNC_INTERVAL",
    annotation: "",
    default: "30s",
    default_means: "",
};
pub const SHUTDOWN_GRACE: ContainerSetting = ContainerSetting {
    title: "shutdown grace",
    flag: "shutdown-grace",
    value_name: "DUR",
    env: "CONFGATE_SHUTDOWN_GRACE",
    annotation: "",
    default: "5s",
    default_means: "",
};
pub const SOURCE: ContainerSetting = ContainerSetting {
    title: "config source",
    flag: "source",
    value_name: "SOURCE",
    env: "CONFGATE_SOURCE",
    annotation: ANN_SOURCE,
    default: "volume",
    default_means: "; or `configmap:NAMESPACE/NAME` or `secret:NAMESPACE/NAME` ([API mode](api-mode.md))",
};
pub const POD_REPORT: ContainerSetting = ContainerSetting {
    title: "reporting to the pod",
    flag: "pod-report",
    value_name: "auto|off",
    env: "CONFGATE_POD_REPORT",
    annotation: "",
    default: "auto",
    default_means: ": Events and the pod conditions when `POD_NAME` and `POD_NAMESPACE` are set ([API mode](api-mode.md), either source)",
};
pub const CONTENT: ContainerSetting = ContainerSetting {
    title: "content kind",
    flag: "content",
    value_name: "config|secret",
    env: "CONFGATE_CONTENT",
    annotation: "",
    default: "config",
    default_means: "; `secret` for a mounted Secret volume (implied by a `secret:` source), see [Secrets](secrets.md)",
};
pub const LOG_FORMAT: ContainerSetting = ContainerSetting {
    title: "log format",
    flag: "log-format",
    value_name: "text|json",
    env: "CONFGATE_LOG_FORMAT",
    annotation: "",
    default: "text",
    default_means: "",
};
/// Read by `main` from the environment only, before the command line is parsed.
pub const LOG_FILTER: ContainerSetting = ContainerSetting {
    title: "log filter",
    flag: "",
    value_name: "",
    env: "CONFGATE_LOG",
    annotation: "",
    default: "info",
    default_means: " (tracing's `Targets` syntax: a level, then `module=level` pairs: `debug`, `info,confgate::reload=debug,kube=warn`)",
};

/// Every container setting, in the order of the table in `docs/settings.md`.
pub static CONTAINER_SETTINGS: &[&ContainerSetting] = &[
    &WATCH,
    &PROMOTE_TO,
    &ANNOTATIONS,
    &LISTEN,
    &RELOAD_CA,
    &RESYNC_INTERVAL,
    &SHUTDOWN_GRACE,
    &SOURCE,
    &POD_REPORT,
    &CONTENT,
    &LOG_FORMAT,
    &LOG_FILTER,
];

/// The table of container settings in `docs/settings.md`, made from `CONTAINER_SETTINGS`;
/// `tests/docs/readme.rs` keeps the copy there equal to it.
pub fn container_table() -> String {
    let mut out =
        String::from("| setting | flag | env | annotation | default |\n|---|---|---|---|---|\n");
    for s in CONTAINER_SETTINGS {
        let flag = if s.flag.is_empty() {
            "-".to_owned()
        } else {
            format!("`--{} {}`", s.flag, s.value_name.replace('|', "\\|"))
        };
        let annotation = if s.annotation.is_empty() {
            "-".to_owned()
        } else {
            format!("`{}` (read at start)", s.annotation)
        };
        let default = if s.default.is_empty() {
            "none".to_owned()
        } else {
            format!("`{}`", s.default)
        };
        out.push_str(&format!(
            "| {} | {flag} | `{}` | {annotation} | {default}{} |\n",
            s.title, s.env, s.default_means
        ));
    }
    out
}

/// A directory setting as the file system showed it, looked at by the caller (`app`), so the settings
/// floor does no I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looked<'a> {
    /// The path as given.
    pub given: &'a std::path::Path,
    /// Its real path where it exists (a symlink could hide an overlap), else the lexical one.
    pub full: std::path::PathBuf,
    /// It exists and is not a directory.
    pub not_a_dir: bool,
}

/// The container-level settings that are not gate settings, checked before anything starts: a value
/// that cannot work is refused (exit 64) naming the setting, not discovered later.
pub fn check_paths(
    watch: &Looked<'_>,
    promote_to: Option<&Looked<'_>>,
    resync: std::time::Duration,
) -> Result<(), Error> {
    let mut errors = Vec::new();
    if resync < std::time::Duration::from_secs(1) {
        errors.push(Invalid {
            setting: RESYNC_INTERVAL.named(),
            value: format!("{resync:?}"),
            problem: "below 1s the safety re-read becomes a busy loop".into(),
            allowed: "a duration of at least 1s, e.g. 30s",
        });
    }
    if let Some(to) = promote_to {
        let setting = PROMOTE_TO.named();
        let (w, t) = (&watch.full, &to.full);
        let problem = if t == w {
            Some(format!("is the watched directory (--{})", WATCH.flag))
        } else if t.starts_with(w) {
            Some(format!(
                "is inside the watched directory (--{}): promotions would be read as config",
                WATCH.flag
            ))
        } else if w.starts_with(t) {
            Some(format!(
                "contains the watched directory (--{}): promotions would replace it",
                WATCH.flag
            ))
        } else if to.not_a_dir {
            Some("exists and is not a directory".to_owned())
        } else {
            None
        };
        if let Some(problem) = problem {
            errors.push(Invalid {
                setting,
                value: to.given.display().to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn looked(p: &str, not_a_dir: bool) -> Looked<'_> {
        Looked {
            given: Path::new(p),
            full: Path::new(p).to_path_buf(),
            not_a_dir,
        }
    }

    /// The check reads nothing: what the paths are is told, so none of these needs to exist.
    #[test]
    fn paths_are_judged_from_what_was_looked_at() {
        let watch = looked("/nowhere/config", false);
        let s = Duration::from_secs(30);
        let problem = |to: Looked<'_>, resync| {
            check_paths(&watch, Some(&to), resync)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(problem(looked("/nowhere/promoted", false), s), None);
        for (to, not_a_dir, why) in [
            ("/nowhere/config", false, "is the watched directory"),
            (
                "/nowhere/config/p",
                false,
                "is inside the watched directory",
            ),
            ("/nowhere", false, "contains the watched directory"),
            ("/nowhere/file", true, "exists and is not a directory"),
        ] {
            let e = problem(looked(to, not_a_dir), s).unwrap_or_default();
            assert!(e.contains(why) && e.contains(to), "{to}: {e}");
        }
        let e = problem(
            looked("/nowhere/promoted", false),
            Duration::from_millis(10),
        );
        assert!(e.is_some_and(|e| e.contains("busy loop")));
    }
}
