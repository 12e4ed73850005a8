//! The values of the settings that act on a verdict: the reload target, the metrics that confirm a
//! reload, what an incompatible config does to readiness, and the mode. Each parses from the text a
//! flag, environment variable or annotation gives and shows back as that text.
//!
//! `Confirm` is the `confirm` setting (`URL#SUCCESS[,SUCCESS_TIME]`), `Validate` the `validate`
//! setting (`exec:PROGRAM ARGS...`, with `{dir}` for the staged candidate). The URLs they name are
//! `url::Url`, which cannot print its credentials.

use std::fmt;
use std::str::FromStr;

use super::signal::Signal;
use super::url::{Url, UrlError};

/// Why a text is not the value of an acting setting (reload, confirm, on-incompatible, mode,
/// validate). A URL's own error is passed through as it is: it never repeats the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActingError {
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("signal: needs NAME:PROCESS")]
    SignalForm,
    #[error("the process name must be a non-empty base name")]
    ProcessName,
    #[error("{0:?} is not a signal name (e.g. HUP, TERM, USR1)")]
    SignalName(String),
    #[error("unknown reload target")]
    ReloadTarget,
    #[error("no #METRIC after the URL")]
    NoMetric,
    #[error("at most two metric names")]
    TooManyMetrics,
    /// Part of a URL's credentials, never repeated.
    #[error("a metric name holds '@'; write a '#' in the URL as %23")]
    MetricAt,
    #[error("{0:?} is not a metric name")]
    MetricName(String),
    #[error("unknown policy")]
    Policy,
    #[error("unknown mode")]
    Mode,
    #[error("missing the exec: prefix (exec:PROGRAM ARGS...)")]
    ExecPrefix,
    #[error("exec: names no program")]
    NoProgram,
    #[error("the program {0:?} is not an absolute path (nothing is looked up in PATH)")]
    RelativeProgram(String),
    #[error("the program {0:?} cannot be in {DIR_PLACEHOLDER}")]
    ProgramInDir(String),
    #[error(
        "no argument names {DIR_PLACEHOLDER}, the staged candidate's dir: the checker would not check it"
    )]
    NoDirArgument,
}

/// How a component is told to reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    None,
    /// POST to this URL; any 2xx is success.
    Http(Url),
    /// Send `signal` to every process named `process`.
    Signal {
        signal: Signal,
        process: String,
    },
}

impl Reload {
    /// Whether `other` is the same target as shown (an URL's credentials are not compared: a
    /// record of the target, read back, holds none).
    pub fn same_target(&self, other: &Reload) -> bool {
        match (self, other) {
            (Reload::Http(a), Reload::Http(b)) => a.same_as_shown(b),
            _ => self == other,
        }
    }
}

impl FromStr for Reload {
    type Err = ActingError;
    fn from_str(s: &str) -> Result<Self, ActingError> {
        if s == "none" {
            return Ok(Reload::None);
        }
        if s.starts_with("http://") || s.starts_with("https://") {
            // Its credentials, if any, are sent as Basic and shown nowhere (see `Url`).
            return Ok(Reload::Http(s.parse()?));
        }
        if let Some(rest) = s.strip_prefix("signal:") {
            let (name, process) = rest.split_once(':').ok_or(ActingError::SignalForm)?;
            if process.is_empty() || process.contains('/') {
                return Err(ActingError::ProcessName);
            }
            let signal = name
                .parse()
                .map_err(|_| ActingError::SignalName(name.to_owned()))?;
            return Ok(Reload::Signal {
                signal,
                process: process.to_owned(),
            });
        }
        Err(ActingError::ReloadTarget)
    }
}

impl fmt::Display for Reload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reload::None => f.write_str("none"),
            Reload::Http(url) => url.fmt(f),
            Reload::Signal { signal, process } => {
                write!(f, "signal:{}:{process}", signal.short())
            }
        }
    }
}

/// The `confirm` setting, `URL#SUCCESS[,SUCCESS_TIME]`: where the component's metrics are and which
/// gauges say whether its last reload was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub url: Url,
    /// 1: the last reload was applied; 0: it was rejected.
    pub success: String,
    /// Unix seconds of the last successful reload.
    pub success_time: Option<String>,
}

impl FromStr for Confirm {
    type Err = ActingError;
    fn from_str(s: &str) -> Result<Confirm, ActingError> {
        let s = s.trim();
        // Metric names hold no `#`: the last one ends the URL.
        let (url, names) = s.rsplit_once('#').ok_or(ActingError::NoMetric)?;
        let url: Url = url.parse()?;
        let mut names = names.split(',').map(str::trim);
        let success = names.next().unwrap_or_default();
        let success_time = names.next();
        if names.next().is_some() {
            return Err(ActingError::TooManyMetrics);
        }
        for n in std::iter::once(success).chain(success_time) {
            if n.contains('@') {
                return Err(ActingError::MetricAt);
            }
            if !is_metric_name(n) {
                return Err(ActingError::MetricName(n.to_owned()));
            }
        }
        Ok(Confirm {
            url,
            success: success.to_owned(),
            success_time: success_time.map(str::to_owned),
        })
    }
}

impl fmt::Display for Confirm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.url, self.success)?;
        if let Some(t) = &self.success_time {
            write!(f, ",{t}")?;
        }
        Ok(())
    }
}

fn is_metric_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// What a rejected or missing newer config does to readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnIncompatible {
    Hold,
    Unready,
}

impl FromStr for OnIncompatible {
    type Err = ActingError;
    fn from_str(s: &str) -> Result<Self, ActingError> {
        match s {
            "hold" => Ok(OnIncompatible::Hold),
            "unready" => Ok(OnIncompatible::Unready),
            _ => Err(ActingError::Policy),
        }
    }
}

impl OnIncompatible {
    pub fn as_str(self) -> &'static str {
        match self {
            OnIncompatible::Hold => "hold",
            OnIncompatible::Unready => "unready",
        }
    }
}

/// Whether confgate enforces its verdicts or only reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Enforce,
    Observe,
}

impl FromStr for Mode {
    type Err = ActingError;
    fn from_str(s: &str) -> Result<Self, ActingError> {
        match s {
            "enforce" => Ok(Mode::Enforce),
            "observe" => Ok(Mode::Observe),
            _ => Err(ActingError::Mode),
        }
    }
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }
}

/// The placeholder of a `validate` command that names the staged candidate's dir.
const DIR_PLACEHOLDER: &str = "{dir}";

/// The component's own checker, run on the staged candidate before it is promoted: `exec:PROGRAM
/// ARGS...`, split at spaces (no shell, no quoting), `{dir}` in any argument standing for the staged
/// candidate's dir.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Validate {
    /// Nothing is run.
    #[default]
    None,
    Exec {
        /// The program, an absolute path.
        program: String,
        /// Its arguments as written, `{dir}` not yet replaced.
        args: Vec<String>,
    },
}

impl Validate {
    /// The arguments with `{dir}` replaced by `dir`.
    pub fn args_for(&self, dir: &str) -> Vec<String> {
        match self {
            Validate::None => Vec::new(),
            Validate::Exec { args, .. } => args
                .iter()
                .map(|a| a.replace(DIR_PLACEHOLDER, dir))
                .collect(),
        }
    }

    /// The program's file name, as a reason names the checker.
    pub fn name(&self) -> &str {
        match self {
            Validate::None => "",
            Validate::Exec { program, .. } => program.rsplit('/').next().unwrap_or(program),
        }
    }
}

impl FromStr for Validate {
    type Err = ActingError;
    fn from_str(s: &str) -> Result<Self, ActingError> {
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(Validate::None);
        }
        let rest = s.strip_prefix("exec:").ok_or(ActingError::ExecPrefix)?;
        let mut words = rest.split_whitespace().map(str::to_owned);
        let program = words.next().ok_or(ActingError::NoProgram)?;
        if !program.starts_with('/') {
            return Err(ActingError::RelativeProgram(program));
        }
        if program.contains(DIR_PLACEHOLDER) {
            return Err(ActingError::ProgramInDir(program));
        }
        let args: Vec<String> = words.collect();
        if !args.iter().any(|a| a.contains(DIR_PLACEHOLDER)) {
            return Err(ActingError::NoDirArgument);
        }
        Ok(Validate::Exec { program, args })
    }
}

impl fmt::Display for Validate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Validate::None => f.write_str("none"),
            Validate::Exec { program, args } => {
                write!(f, "exec:{program}")?;
                for a in args {
                    write!(f, " {a}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROM: &str = "http://127.0.0.1:9090/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds";

    #[test]
    fn parses_and_prints_the_setting() {
        let c: Confirm = PROM.parse().unwrap();
        assert_eq!(c.success, "prometheus_config_last_reload_successful");
        assert_eq!(c.to_string(), PROM);
        for bad in [
            "http://x/metrics",
            "ftp://x#a",
            "http://x#",
            "http://x#a,b,c",
            "http://x#9a",
        ] {
            assert!(bad.parse::<Confirm>().is_err(), "{bad}");
        }
    }

    #[test]
    fn validate_syntax() {
        let v: Validate = "exec:/validators/promtool check config {dir}/prometheus.yml"
            .parse()
            .unwrap();
        assert_eq!(v.name(), "promtool");
        assert_eq!(
            v.args_for("/p/..c"),
            ["check", "config", "/p/..c/prometheus.yml"]
        );
        assert_eq!(
            v.to_string(),
            "exec:/validators/promtool check config {dir}/prometheus.yml"
        );
        assert_eq!("none".parse::<Validate>().unwrap(), Validate::None);
        for (bad, why) in [
            ("/bin/true {dir}", "exec: prefix"),
            ("exec:", "names no program"),
            ("exec:promtool check config {dir}/p.yml", "absolute path"),
            ("exec:/bin/true", "no argument names {dir}"),
        ] {
            let e = bad.parse::<Validate>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
