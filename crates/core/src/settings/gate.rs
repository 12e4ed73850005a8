//! The gate settings, each declared once in the `gate_settings!` list: the macro makes `Settings`,
//! `Raw` and `SETTINGS` from it, and `Setting` is one entry of that table, which the parser, the
//! command line, the known annotations, the start-up log and the README's table read.
//!
//! A setting's entry: the typed field, default, parser, text form, flag, env var, annotation, help,
//! whether it is `judging` (then `check` takes it too), and how often its flag may be given
//! (`Repeat`).

use super::error::Problem;
use super::raw::RawValue;
use crate::values::{
    Accepts, Confirm, Mode, OnIncompatible, Reload, Validate, Variants, VersionFrom,
};
use crate::values::{
    duration_text, parse_accepts, parse_require, parse_spread, parse_trial, parse_variants,
};

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
    /// Parses a value into its field of [`Settings`]; read by the parser (`overlay`), beside this
    /// file.
    pub(super) set: fn(&mut Settings, &RawValue) -> Result<(), Problem>,
    /// Puts back the value in force over a bad annotation's; read by `with_annotations`.
    pub(super) keep: fn(&mut Settings, &Settings),
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
    pub fn default_text(&self) -> Option<String> {
        let text = self.show(&Settings::default());
        let mut parsed = Settings::default();
        let reads_back = (self.set)(&mut parsed, &RawValue::Text(text.clone())).is_ok()
            && parsed == Settings::default();
        (reads_back && !text.is_empty()).then_some(text)
    }

    /// Whether `ann` gives it a valid value, so that value is in force whatever it equals.
    pub fn annotated_by(&self, ann: &crate::annotations::Annotations) -> bool {
        ann.get(self.annotation).is_some_and(|v| {
            (self.set)(&mut Settings::default(), &RawValue::Text(v.clone())).is_ok()
        })
    }

    /// Whether `a` and `b` hold the same value of it: its text may not tell (a URL's credentials are
    /// not shown).
    pub fn same(&self, a: &Settings, b: &Settings) -> bool {
        (self.same)(a, b)
    }

    /// Its raw value, as clap gave it.
    pub fn given<'r>(&self, raw: &'r Raw) -> Option<&'r RawValue> {
        (self.raw_ref)(raw)
    }

    /// Its raw value, to fill in.
    pub fn given_mut<'r>(&self, raw: &'r mut Raw) -> &'r mut Option<RawValue> {
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

    /// How long the component must stay ready without restarting on a config it applied before that
    /// config is recorded as the known-good for its version line. Zero: nothing is recorded.
    trial: std::time::Duration = std::time::Duration::from_secs(300), {
        parse: parse_trial,
        show: |d| if d.is_zero() { "off".to_owned() } else { duration_text(*d) },
        title: "known-good trial",
        flag: "trial",
        value_name: "DUR",
        env: "CONFGATE_TRIAL",
        annotation: "confgate.io/trial",
        help: "After the component applied a config and stayed ready without restarting this long, record it as the known-good a starting pod falls back on (off: record nothing)",
        allowed: "off, or a duration up to 24h, as Go and Kubernetes write one, e.g. 90s, 5m, 1h; an annotation no shorter than the container spec's, and only off when the spec's is",
        default_means: "a config the component ran 5 minutes without a restart is recorded ([known-good](known-good.md))",
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
        help: "The component's own checker, run on the staged candidate before promotion, e.g. \"exec:/validators/promtool check config {dir}/prometheus.yml\" (a non-zero exit holds the config). Only the container spec names the program: the annotation may give this same value, or none",
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
