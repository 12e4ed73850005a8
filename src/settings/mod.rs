//! Gate settings: what the component accepts and how confgate acts, resolved annotation > flag > env > default.
//!
//! One parser serves every source: flags and environment arrive merged by clap as [`Raw`] strings, pod
//! annotations as an [`Annotations`] map. A bad flag or environment value is fatal at start-up (exit 64);
//! a bad annotation is reported and the value in force before it stays (a crash loop would hide the message).
//!
//! Each setting is declared once, in the `gate_settings!` list below: its typed field, default, parser
//! and the names users give it. Everything else that lists settings (the command line, the known
//! annotations, the start-up log, the README's table) reads [`SETTINGS`]. The fields' types and their
//! parsers are pure values (`crate::values`, re-exported here); `describe` says the settings to people,
//! `container` checks the container-level paths.

use crate::annotations::Annotations;
pub use crate::values::{Accepts, Confirm, OnIncompatible, VersionFrom};
pub use crate::values::{ActingError, DurationError, JudgingError, UrlError};
pub use crate::values::{ApiVersion, ApiVersions, KubeVersion, Range, SchemeVersion, Standing};
pub use crate::values::{Mode, Reload, Url, Validate, Variants};
use crate::values::{
    duration_text, parse_accepts, parse_require, parse_spread, parse_variants, redact,
};

pub mod container;
mod describe;

#[cfg(test)]
pub(crate) use container::CONTAINER_SETTINGS;
pub use container::ContainerSetting;
pub use container::container_table;
pub(crate) use container::{Looked, check_paths};
pub use describe::Given;
pub use describe::{known_annotations, readme_table};

/// Read by the API source at start; recognised so that it is not reported as unknown.
pub(crate) const ANN_SOURCE: &str = "confgate.io/source";
const ANN_PREFIX: &str = "confgate.io/";

/// A setting's value that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {setting} {value:?}: {problem}; allowed: {allowed}")]
pub struct Invalid {
    /// Where the value came from, as the user wrote it: `--accepts (CONFGATE_ACCEPTS)` or an annotation key.
    pub setting: String,
    pub value: String,
    pub problem: String,
    pub allowed: &'static str,
}

/// Why a gate setting's value was refused: its parser's own error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error(transparent)]
    Judging(#[from] crate::values::JudgingError),
    #[error(transparent)]
    Acting(#[from] crate::values::ActingError),
    #[error(transparent)]
    Duration(#[from] crate::values::DurationError),
    #[error(transparent)]
    Rules(#[from] crate::rules::Error),
    /// Several values given to a setting that takes one.
    #[error("takes one value")]
    OneValue,
}

/// Every bad flag or environment value, reported together so one restart fixes them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct Error(pub Vec<Invalid>);

// === the gate settings, one declaration each ===

/// How often a setting's flag may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Once.
    Once,
    /// Once for `run` and `wait`; `check` judges by each value given in turn.
    PerRange,
    /// Any number of times, each value a line of one text; a file of such lines may follow them.
    Lines {
        /// The long flag naming the file, without `--`.
        file_flag: &'static str,
        file_env: &'static str,
        /// `--help`'s text for the file's flag.
        file_help: &'static str,
    },
}

/// A setting's value as given, before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawValue {
    /// One text: a flag given once, an environment variable, an annotation.
    Text(String),
    /// The items of a [`Repeat::Lines`] setting from the command line, in order: each value of its
    /// flag, then each line of its file (or of its environment variable), never joined into one text.
    Lines(Vec<String>),
}

impl From<&str> for RawValue {
    fn from(text: &str) -> RawValue {
        RawValue::Text(text.to_owned())
    }
}

impl From<String> for RawValue {
    fn from(text: String) -> RawValue {
        RawValue::Text(text)
    }
}

/// As a bad value is shown back: the text, or the items one per line.
impl std::fmt::Display for RawValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawValue::Text(text) => f.write_str(text),
            RawValue::Lines(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    f.write_str(item)?;
                }
                Ok(())
            }
        }
    }
}

/// One gate setting as users name it, and how its text becomes a typed value in [`Settings`].
///
/// [`SETTINGS`] lists them; the parser, the command line, the known annotations, the start-up log and
/// the README's table all read that list, so a setting is declared once, in `gate_settings!` below.
#[derive(Debug)]
pub struct Setting {
    /// What the README's table calls it.
    pub title: &'static str,
    /// The long flag, without `--`; also the setting's name in logs.
    pub flag: &'static str,
    pub value_name: &'static str,
    pub env: &'static str,
    pub annotation: &'static str,
    /// `--help`'s text; the annotation and the default are added to it.
    pub help: &'static str,
    /// Said after a bad value.
    pub allowed: &'static str,
    /// What the default means, after it in the README's table; empty when it says enough.
    pub default_means: &'static str,
    pub repeat: Repeat,
    /// Whether it takes part in the verdict, so that `check` takes it too.
    pub judging: bool,
    /// Whether a bad value may carry credentials, so it is repeated only through `values::redact`.
    pub redact: bool,
    set: fn(&mut Settings, &RawValue) -> Result<(), Problem>,
    keep: fn(&mut Settings, &Settings),
    same: fn(&Settings, &Settings) -> bool,
    show: fn(&Settings) -> String,
    raw_mut: fn(&mut Raw) -> &mut Option<RawValue>,
    raw_ref: fn(&Raw) -> Option<&RawValue>,
}

impl Setting {
    /// Its value in `s`, as text for logs and the start-up line.
    pub fn show(&self, s: &Settings) -> String {
        (self.show)(s)
    }

    /// Its default as a value one could give, for `--help` and the README; `None` when the default is
    /// the absence of a value (no range, no rules), which no text gives.
    pub(crate) fn default_text(&self) -> Option<String> {
        let text = self.show(&Settings::default());
        let mut parsed = Settings::default();
        let reads_back = (self.set)(&mut parsed, &RawValue::Text(text.clone())).is_ok()
            && parsed == Settings::default();
        (reads_back && !text.is_empty()).then_some(text)
    }

    /// Whether `ann` gives it a valid value, so that value is in force whatever it equals.
    pub(crate) fn annotated_by(&self, ann: &crate::annotations::Annotations) -> bool {
        ann.get(self.annotation).is_some_and(|v| {
            (self.set)(&mut Settings::default(), &RawValue::Text(v.clone())).is_ok()
        })
    }

    /// Whether `a` and `b` hold the same value of it: its text may not tell (a URL's credentials are
    /// not shown).
    pub(crate) fn same(&self, a: &Settings, b: &Settings) -> bool {
        (self.same)(a, b)
    }

    /// Its raw value, as clap gave it.
    pub fn given<'r>(&self, raw: &'r Raw) -> Option<&'r RawValue> {
        (self.raw_ref)(raw)
    }

    /// Its raw value, to fill in.
    pub(crate) fn given_mut<'r>(&self, raw: &'r mut Raw) -> &'r mut Option<RawValue> {
        (self.raw_mut)(raw)
    }
}

/// `text` through a setting's parser, its error made a [`Problem`].
fn parse_text<T, E>(text: &str, parse: impl Fn(&str) -> Result<T, E>) -> Result<T, Problem>
where
    Problem: From<E>,
{
    parse(text).map_err(Problem::from)
}

/// The items of a [`Repeat::Lines`] setting through its parser, its error made a [`Problem`].
fn parse_lines<T, E>(
    items: &[String],
    parse: impl Fn(&[String]) -> Result<T, E>,
) -> Result<T, Problem>
where
    Problem: From<E>,
{
    parse(items).map_err(Problem::from)
}

/// Makes, from one entry per setting (its `Settings` field with type and default, `parse` from text,
/// `parse_lines` from the items of a [`Repeat::Lines`] setting, `show` back to text, and the
/// [`Setting`] fields that name it), the [`Settings`] and [`Raw`] structs, `Settings::default` and
/// [`SETTINGS`].
macro_rules! gate_settings {
    (@lines) => {
        |_| Err(Problem::OneValue)
    };
    (@lines $lines:expr) => {
        $lines
    };
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $default:expr, {
            parse: $parse:expr,
            $(parse_lines: $lines:expr,)?
            show: $show:expr,
            $($name:ident: $value:expr,)*
        }
    )*) => {
        /// The gate settings in force.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Settings {
            $($(#[doc = $doc])* pub $field: $ty,)*
        }

        impl Default for Settings {
            fn default() -> Self {
                Settings { $($field: $default,)* }
            }
        }

        /// Flag or environment values before parsing (clap has already applied flag > env).
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Raw {
            $(pub $field: Option<RawValue>,)*
        }

        /// Every gate setting, in the order of the README's table and the start-up log.
        pub static SETTINGS: &[Setting] = &[$(
            Setting {
                $($name: $value,)*
                set: |s, v| {
                    s.$field = match v {
                        RawValue::Text(text) => parse_text(text, $parse)?,
                        RawValue::Lines(items) => parse_lines(items, gate_settings!(@lines $($lines)?))?,
                    };
                    Ok(())
                },
                keep: |s, from| s.$field.clone_from(&from.$field),
                same: |a, b| a.$field == b.$field,
                show: |s| {
                    let show: fn(&$ty) -> String = $show;
                    show(&s.$field)
                },
                raw_mut: |r| &mut r.$field,
                raw_ref: |r| r.$field.as_ref(),
            },
        )*];
    };
}

gate_settings! {
    /// The semver range, or the Kubernetes API versions, the component accepts; `None`: nothing is,
    /// so confgate is never ready.
    accepts: Option<Accepts> = None, {
        parse: |v| parse_accepts(v).map(Some),
        show: |a| a.as_ref().map_or("none", |a| a.text()).to_owned(),
        title: "accepted range",
        flag: "accepts",
        value_name: "REQ",
        env: "CONFGATE_ACCEPTS",
        annotation: "confgate.io/accepts",
        help: "Semver range the component accepts, e.g. \">=2.4.0, <3.0.0\", or the Kubernetes API versions it serves, e.g. \"kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3\"",
        allowed: "a semver requirement such as \">=2.4.0, <3.0.0\" (or \">=2.4.0 <3.0.0\"), \"^2.4\", \"~2.4.1\" or \"2.*\"; or a list of Kubernetes GROUP/VERSIONs such as \"kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3\" (not both)",
        default_means: "not ready",
        repeat: Repeat::PerRange,
        judging: true,
        redact: false,
    }

    /// Where the schema version lives in the config.
    version_from: VersionFrom = VersionFrom::File { key: "version".into() }, {
        parse: |v| v.parse(),
        show: |v| v.to_string(),
        title: "where the version is",
        flag: "version-from",
        value_name: "SPEC",
        env: "CONFGATE_VERSION_FROM",
        annotation: "confgate.io/version-from",
        help: "Where the version is: file:KEY, json:KEY#/pointer, yaml:KEY#/pointer",
        allowed: "file:KEY, json:KEY#/json/pointer or yaml:KEY#/json/pointer (KEY a ConfigMap key)",
        default_means: "",
        repeat: Repeat::Once,
        judging: true,
        redact: false,
    }

    /// Keys that must be present, each once, in the order given.
    require: Vec<String> = Vec::new(), {
        parse: parse_require,
        show: |keys| keys.join(","),
        title: "required keys",
        flag: "require",
        value_name: "K1,K2",
        env: "CONFGATE_REQUIRE",
        annotation: "confgate.io/require",
        help: "Keys that must be present, comma-separated",
        allowed: "a comma-separated list of ConfigMap keys ([-._a-zA-Z0-9]+)",
        default_means: "",
        repeat: Repeat::Once,
        judging: true,
        redact: false,
    }

    /// How the component is told to reload.
    reload: Reload = Reload::None, {
        parse: |v| v.parse(),
        show: |r| r.to_string(),
        title: "reload target",
        flag: "reload",
        value_name: "SPEC",
        env: "CONFGATE_RELOAD",
        annotation: "confgate.io/reload",
        help: "none, http(s)://URL (POST) or signal:NAME:PROCESS",
        allowed: "none, http://..., https://... or signal:NAME:PROCESS (e.g. signal:HUP:prometheus)",
        default_means: "",
        repeat: Repeat::Once,
        judging: false,
        redact: true,
    }

    /// What a rejected or missing newer config does to readiness.
    on_incompatible: OnIncompatible = OnIncompatible::Hold, {
        parse: |v| v.parse(),
        show: |p| p.as_str().to_owned(),
        title: "on incompatible",
        flag: "on-incompatible",
        value_name: "POLICY",
        env: "CONFGATE_ON_INCOMPATIBLE",
        annotation: "confgate.io/on-incompatible",
        help: "hold (stay ready, report stale) or unready",
        allowed: "hold or unready",
        default_means: "",
        repeat: Repeat::Once,
        judging: false,
        redact: false,
    }

    /// Whether verdicts are enforced or only reported.
    mode: Mode = Mode::Enforce, {
        parse: |v| v.parse(),
        show: |m| m.as_str().to_owned(),
        title: "mode",
        flag: "mode",
        value_name: "MODE",
        env: "CONFGATE_MODE",
        annotation: "confgate.io/mode",
        help: "enforce, or observe (promote everything, only report)",
        allowed: "enforce or observe",
        default_means: "",
        repeat: Repeat::Once,
        judging: false,
        redact: false,
    }

    /// Content rules (CEL) a config must satisfy to be accepted.
    rules: crate::rules::RuleSet = crate::rules::RuleSet::default(), {
        parse: crate::rules::RuleSet::parse,
        parse_lines: crate::rules::RuleSet::from_rules,
        show: |r| if r.texts().is_empty() { "none".to_owned() } else { r.texts().join(" ; ") },
        title: "content rules",
        flag: "rule",
        value_name: "CEL",
        env: "CONFGATE_RULES",
        annotation: "confgate.io/rules",
        help: "A CEL expression over `data` and `binaryData` that must hold (repeatable; the env var holds one per line)",
        allowed: "one CEL expression over data and binaryData per line (lines starting with # are comments), each evaluating to true",
        default_means: "",
        repeat: Repeat::Lines {
            file_flag: "rules-file",
            file_env: "CONFGATE_RULES_FILE",
            file_help: "A file of rules, one per line (`#` starts a comment line), after those of --rule",
        },
        judging: true,
        redact: false,
    }

    /// The component's metrics that confirm a reload; `None`: the reload's own answer decides.
    confirm: Option<Confirm> = None, {
        parse: |v| match v.trim() {
            "none" | "" => Ok(None),
            c => c.parse().map(Some),
        },
        show: |c| c.as_ref().map_or_else(|| "none".to_owned(), ToString::to_string),
        title: "reload confirmation",
        flag: "confirm",
        value_name: "URL#METRICS",
        env: "CONFGATE_CONFIRM",
        annotation: "confgate.io/confirm",
        help: "Metrics confirming a reload: URL#SUCCESS or URL#SUCCESS,SUCCESS_TIME, or none",
        allowed: "none or URL#SUCCESS_METRIC[,SUCCESS_TIME_METRIC] (e.g. http://127.0.0.1:9090/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds)",
        default_means: "the reload's own answer decides ([applied and rolled back](reload.md#applied-rejected-and-rolled-back))",
        repeat: Repeat::Once,
        judging: false,
        redact: true,
    }

    /// Variant keys and the name the chosen one is promoted as; `None` promotes the ConfigMap as it is.
    variants: Option<Variants> = None, {
        parse: parse_variants,
        show: |v| v.as_ref().map_or_else(|| "none".to_owned(), ToString::to_string),
        title: "variants",
        flag: "variants",
        value_name: "PATTERN -> NAME",
        env: "CONFGATE_VARIANTS",
        annotation: "confgate.io/variants",
        help: "Variant keys and the name the chosen one is promoted as, e.g. \"config.v*.yaml -> config.yaml\"",
        allowed: "none, or PATTERN -> NAME with one '*' in PATTERN and NAME not matching it (e.g. \"config.v*.yaml -> config.yaml\")",
        default_means: "the ConfigMap is promoted as it is ([variants](variants.md))",
        repeat: Repeat::Once,
        judging: true,
        redact: false,
    }

    /// The period a change is spread over across the fleet: each pod promotes (and reloads) a changed
    /// config after its bucket's share of it. Zero: at once.
    reload_spread: std::time::Duration = std::time::Duration::ZERO, {
        parse: parse_spread,
        show: |d| duration_text(*d),
        title: "reload spread",
        flag: "reload-spread",
        value_name: "DUR",
        env: "CONFGATE_RELOAD_SPREAD",
        annotation: "confgate.io/reload-spread",
        help: "Spread a config change over this period across the fleet: each pod promotes and reloads it after its bucket's share (0: at once)",
        allowed: "a duration from 0 (off) to 1h, as Go and Kubernetes write one, e.g. 500ms, 30s, 1m30s, 1.5m",
        default_means: "every pod promotes a change at once ([reload spread](rollout.md#reload-spread))",
        repeat: Repeat::Once,
        judging: false,
        redact: false,
    }

    /// The component's own checker, run on the staged candidate before it is promoted.
    validate: Validate = Validate::None, {
        parse: |v| v.parse(),
        show: |v| v.to_string(),
        title: "validator",
        flag: "validate",
        value_name: "exec:CMD",
        env: "CONFGATE_VALIDATE",
        annotation: "confgate.io/validate",
        help: "The component's own checker, run on the staged candidate before promotion, e.g. \"exec:/validators/promtool check config {dir}/prometheus.yml\" (a non-zero exit holds the config)",
        allowed: "none, or exec:PROGRAM ARGS... with PROGRAM an absolute path and {dir} (the staged candidate's dir) in an argument; split at spaces, no shell",
        default_means: "no checker runs ([validating with the component's own checker](validate.md))",
        repeat: Repeat::Once,
        judging: false,
        redact: false,
    }

    /// How long the checker may run before the candidate is held as not validated.
    validate_timeout: std::time::Duration = std::time::Duration::from_secs(10), {
        parse: crate::values::parse_validate_timeout,
        show: |d| duration_text(*d),
        title: "validator time bound",
        flag: "validate-timeout",
        value_name: "DUR",
        env: "CONFGATE_VALIDATE_TIMEOUT",
        annotation: "confgate.io/validate-timeout",
        help: "How long the validate checker may run; past it, it is killed and the config held",
        allowed: "a duration from 100ms to 5m, e.g. 10s",
        default_means: "",
        repeat: Repeat::Once,
        judging: false,
        redact: false,
    }
}

/// Settings resolved from annotations, with the problems found on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub settings: Settings,
    /// Bad or unknown annotations; each one makes confgate not ready.
    pub problems: Vec<String>,
}

// === parsing, shared by every source ===

/// Applies every setting `get` has a value for onto `base`, collecting all errors with their setting.
fn overlay(
    base: &Settings,
    get: impl Fn(&Setting) -> Option<(String, RawValue)>,
) -> (Settings, Vec<(&'static Setting, Invalid)>) {
    let mut s = base.clone();
    let mut errors = Vec::new();
    for setting in SETTINGS {
        let Some((from, value)) = get(setting) else {
            continue;
        };
        if let Err(problem) = (setting.set)(&mut s, &value) {
            errors.push((
                setting,
                Invalid {
                    setting: from,
                    value: if setting.redact {
                        redact(&value.to_string())
                    } else {
                        value.to_string()
                    },
                    problem: problem.to_string(),
                    allowed: setting.allowed,
                },
            ));
        }
    }
    (s, errors)
}

impl Settings {
    /// Settings from flags and environment over the defaults; every bad value is reported.
    pub fn from_raw(raw: &Raw) -> Result<Settings, Error> {
        let (s, errors) = overlay(&Settings::default(), |setting| {
            setting
                .given(raw)
                .map(|v| (format!("--{} ({})", setting.flag, setting.env), v.clone()))
        });
        if errors.is_empty() {
            Ok(s)
        } else {
            Err(Error(errors.into_iter().map(|(_, e)| e).collect()))
        }
    }

    /// Applies pod annotations over `base` (flags, env, defaults). A bad annotation keeps the value that
    /// `in_force` had for that setting, so a typo never loosens what was being enforced.
    pub fn with_annotations(base: &Settings, in_force: &Settings, ann: &Annotations) -> Resolved {
        let (mut s, errors) = overlay(base, |setting| {
            ann.get(setting.annotation)
                .map(|v| (setting.annotation.to_owned(), RawValue::Text(v.clone())))
        });
        for (setting, _) in &errors {
            (setting.keep)(&mut s, in_force);
        }
        let mut problems: Vec<String> = errors.iter().map(|(_, e)| e.to_string()).collect();
        for key in ann.keys() {
            if key.starts_with(ANN_PREFIX) && !known_annotations().any(|k| k == key) {
                // As a mistyped flag gets clap's suggestion, under the same rule of nearness.
                // Compared after the prefix, which every one shares.
                let short = |k: &'static str| k.strip_prefix(ANN_PREFIX).unwrap_or(k);
                let near = crate::listing::nearest(
                    key.strip_prefix(ANN_PREFIX).unwrap_or(key),
                    known_annotations().map(short),
                )
                .map(|k| format!(" did you mean {ANN_PREFIX}{k}?"))
                .unwrap_or_default();
                problems.push(format!(
                    "unknown annotation {key};{near} known: {}",
                    known_annotations().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Resolved {
            settings: s,
            problems,
        }
    }

    /// The range as written, for status and logs.
    pub(crate) fn accepts_text(&self) -> Option<&str> {
        self.accepts.as_ref().map(|a| a.text())
    }
}

#[cfg(test)]
mod tests;
