//! Gate settings: what the component accepts and how confgate acts, resolved annotation > flag > env > default.
//!
//! One parser serves every source: flags and environment arrive merged by clap as [`Raw`] strings, pod
//! annotations as an [`Annotations`] map. A bad flag or environment value is fatal at start-up (exit 64);
//! a bad annotation is reported and the value in force before it stays (a crash loop would hide the message).
//!
//! Each setting is declared once, in the `gate_settings!` list below: its typed field, default, parser
//! and the names users give it. Everything else that lists settings (the command line, the known
//! annotations, the start-up log, the README's table) reads [`SETTINGS`].

use crate::annotations::Annotations;
pub use crate::values::{Accepts, Confirm, Mode, OnIncompatible, Reload, Variants, VersionFrom};
use crate::values::{parse_accepts, parse_require, parse_variants, redact};

mod container;

pub use container::check_paths;

/// Read by the API source at start; recognised so that it is not reported as unknown.
pub const ANN_SOURCE: &str = "confgate.io/source";
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
    /// Whether a bad value may carry credentials, so it is repeated only through [`redact`].
    pub redact: bool,
    set: fn(&mut Settings, &str) -> Result<(), String>,
    keep: fn(&mut Settings, &Settings),
    show: fn(&Settings) -> String,
    raw_mut: fn(&mut Raw) -> &mut Option<String>,
    raw_ref: fn(&Raw) -> Option<&String>,
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
        let reads_back = (self.set)(&mut parsed, &text).is_ok() && parsed == Settings::default();
        (reads_back && !text.is_empty()).then_some(text)
    }

    /// Its raw value, as clap gave it.
    pub fn given<'r>(&self, raw: &'r Raw) -> Option<&'r String> {
        (self.raw_ref)(raw)
    }

    /// Its raw value, to fill in.
    pub fn given_mut<'r>(&self, raw: &'r mut Raw) -> &'r mut Option<String> {
        (self.raw_mut)(raw)
    }
}

/// Makes, from one entry per setting (its `Settings` field with type and default, `parse` from text,
/// `show` back to text, and the [`Setting`] fields that name it), the [`Settings`] and [`Raw`] structs,
/// `Settings::default` and [`SETTINGS`].
macro_rules! gate_settings {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $default:expr, {
            parse: $parse:expr,
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
            $(pub $field: Option<String>,)*
        }

        /// Every gate setting, in the order of the README's table and the start-up log.
        pub static SETTINGS: &[Setting] = &[$(
            Setting {
                $($name: $value,)*
                set: |s, v| {
                    let parse: fn(&str) -> Result<$ty, String> = $parse;
                    s.$field = parse(v)?;
                    Ok(())
                },
                keep: |s, from| s.$field.clone_from(&from.$field),
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
    /// The semver range the component accepts; `None`: nothing is, so confgate is never ready.
    accepts: Option<Accepts> = None, {
        parse: |v| parse_accepts(v).map(Some),
        show: |a| a.as_ref().map_or("none", |a| a.text.as_str()).to_owned(),
        title: "accepted range",
        flag: "accepts",
        value_name: "REQ",
        env: "CONFGATE_ACCEPTS",
        annotation: "confgate.io/accepts",
        help: "Semver range the component accepts, e.g. \">=2.4.0, <3.0.0\" or \">=2.4.0 <3.0.0\"",
        allowed: "a semver requirement such as \">=2.4.0, <3.0.0\" (or \">=2.4.0 <3.0.0\"), \"^2.4\", \"~2.4.1\" or \"2.*\"",
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
        default_means: "the reload's own answer decides ([applied and rolled back](#applied-rejected-and-rolled-back))",
        repeat: Repeat::Once,
        judging: false,
        redact: false,
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
        default_means: "the ConfigMap is promoted as it is ([variants](#several-schema-versions-in-one-configmap))",
        repeat: Repeat::Once,
        judging: true,
        redact: false,
    }
}

/// The `confgate.io/` annotations confgate reads: one per gate setting, and the API source's.
pub fn known_annotations() -> impl Iterator<Item = &'static str> {
    SETTINGS
        .iter()
        .map(|s| s.annotation)
        .chain(std::iter::once(ANN_SOURCE))
}

/// The README's table of gate settings, made from [`SETTINGS`]; `tests/readme.rs` keeps the README's
/// copy equal to it.
pub fn readme_table() -> String {
    let mut out =
        String::from("| setting | flag | env | annotation | default |\n|---|---|---|---|---|\n");
    for s in SETTINGS {
        let value = if s.value_name.contains(' ') {
            format!("\"{}\"", s.value_name)
        } else {
            s.value_name.to_owned()
        };
        let flag = match s.repeat {
            Repeat::Lines {
                file_flag,
                file_env,
                ..
            } => format!(
                "`--{} {value}` (repeatable), `--{file_flag} FILE` (`{file_env}`)",
                s.flag
            ),
            Repeat::Once | Repeat::PerRange => format!("`--{} {value}`", s.flag),
        };
        let default = s
            .default_text()
            .map_or_else(|| "none".to_owned(), |d| format!("`{d}`"));
        let default = if s.default_means.is_empty() {
            default
        } else {
            format!("{default}: {}", s.default_means)
        };
        out.push_str(&format!(
            "| {} | {flag} | `{}` | `{}` | {default} |\n",
            s.title, s.env, s.annotation
        ));
    }
    out
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
    get: impl Fn(&Setting) -> Option<(String, String)>,
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
                        redact(&value)
                    } else {
                        value
                    },
                    problem,
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
                .map(|v| (setting.annotation.to_owned(), v.clone()))
        });
        for (setting, _) in &errors {
            (setting.keep)(&mut s, in_force);
        }
        let mut problems: Vec<String> = errors.iter().map(|(_, e)| e.to_string()).collect();
        for key in ann.keys() {
            if key.starts_with(ANN_PREFIX) && !known_annotations().any(|k| k == key) {
                problems.push(format!(
                    "unknown annotation {key}; known: {}",
                    known_annotations().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Resolved {
            settings: s,
            problems,
        }
    }

    /// Each gate setting as (name, annotation, value as text), in [`SETTINGS`]' order.
    pub fn describe(&self) -> Vec<(&'static str, &'static str, String)> {
        SETTINGS
            .iter()
            .map(|s| (s.flag, s.annotation, s.show(self)))
            .collect()
    }

    /// Where each gate setting in force came from, in [`Settings::describe`]'s order: the annotation
    /// (when present and valid), the environment variable (when it holds the value), the flag, or the
    /// default. `env` reads an environment variable; passed in so this stays free of I/O.
    pub fn origins(
        raw: &Raw,
        ann: &Annotations,
        env: impl Fn(&str) -> Option<String>,
    ) -> Vec<String> {
        SETTINGS
            .iter()
            .map(|s| {
                if ann
                    .get(s.annotation)
                    .is_some_and(|v| (s.set)(&mut Settings::default(), v).is_ok())
                {
                    return format!("annotation {}", s.annotation);
                }
                match s.given(raw) {
                    Some(v) if env(s.env).as_ref() == Some(v) => format!("env {}", s.env),
                    Some(_) => format!("flag --{}", s.flag),
                    None => "default".to_owned(),
                }
            })
            .collect()
    }

    /// The range as written, for status and logs.
    pub fn accepts_text(&self) -> Option<&str> {
        self.accepts.as_ref().map(|a| a.text.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> Annotations {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_match_the_contract() {
        let s = Settings::from_raw(&Raw::default()).unwrap();
        assert_eq!(s.accepts, None);
        assert_eq!(s.version_from.to_string(), "file:version");
        assert_eq!(s.reload, Reload::None);
        assert_eq!(s.on_incompatible, OnIncompatible::Hold);
        assert_eq!(s.mode, Mode::Enforce);
        assert!(s.require.is_empty());
    }

    #[test]
    fn every_bad_flag_is_named_with_value_and_allowed() {
        let raw = Raw {
            accepts: Some(">=x".into()),
            version_from: Some("toml:a".into()),
            reload: Some("signal:NOPE:prom".into()),
            on_incompatible: Some("drop".into()),
            mode: Some("strict".into()),
            require: Some("ok,../bad".into()),
            rules: None,
            confirm: Some("http://x/metrics".into()),
            variants: Some("config.*.yaml".into()),
        };
        let err = Settings::from_raw(&raw).unwrap_err();
        assert_eq!(err.0.len(), 8, "{err}");
        let text = err.to_string();
        for needle in [
            "--variants (CONFGATE_VARIANTS) \"config.*.yaml\"",
            "--accepts (CONFGATE_ACCEPTS) \">=x\"",
            "--version-from (CONFGATE_VERSION_FROM) \"toml:a\"",
            "--reload (CONFGATE_RELOAD) \"signal:NOPE:prom\"",
            "--on-incompatible (CONFGATE_ON_INCOMPATIBLE) \"drop\"",
            "--mode (CONFGATE_MODE) \"strict\"",
            "--confirm (CONFGATE_CONFIRM) \"http://x/metrics\"",
            "--require (CONFGATE_REQUIRE)",
            "allowed: hold or unready",
            "allowed: enforce or observe",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in {text}");
        }
    }

    #[test]
    fn values_parse_as_documented() {
        let raw = Raw {
            accepts: Some(">=2.4.0, <3.0.0".into()),
            version_from: Some("yaml:config.yaml#/schema/version".into()),
            require: Some("a.yaml, b.json,a.yaml".into()),
            reload: Some("signal:HUP:prometheus".into()),
            on_incompatible: Some("unready".into()),
            mode: Some("observe".into()),
            rules: None,
            confirm: Some("http://127.0.0.1:9090/metrics#up".into()),
            variants: Some(" config.v*.yaml->config.yaml ".into()),
        };
        let s = Settings::from_raw(&raw).unwrap();
        assert_eq!(
            s.confirm.as_ref().map(|c| c.to_string()).as_deref(),
            Some("http://127.0.0.1:9090/metrics#up")
        );
        assert_eq!(
            s.variants.as_ref().map(ToString::to_string).as_deref(),
            Some("config.v*.yaml -> config.yaml")
        );
        assert_eq!(s.accepts_text(), Some(">=2.4.0, <3.0.0"));
        assert_eq!(
            s.version_from,
            VersionFrom::Yaml {
                key: "config.yaml".into(),
                pointer: "/schema/version".into()
            }
        );
        assert_eq!(s.require, vec!["a.yaml", "b.json"]);
        assert_eq!(s.reload.to_string(), "signal:HUP:prometheus");
        assert_eq!(s.on_incompatible, OnIncompatible::Unready);
        assert_eq!(s.mode, Mode::Observe);
        for url in ["http://127.0.0.1:9090/-/reload", "https://app.local/reload"] {
            assert_eq!(url.parse::<Reload>().unwrap().to_string(), url);
        }
        for bad in [
            "http://",
            "ftp://x",
            "signal:HUP",
            "signal:HUP:",
            "signal:HUP:a/b",
        ] {
            assert!(bad.parse::<Reload>().is_err(), "{bad}");
        }
    }

    #[test]
    fn annotation_beats_flag_and_removal_falls_back() {
        let base = Settings::from_raw(&Raw {
            accepts: Some("^1".into()),
            ..Raw::default()
        })
        .unwrap();
        let r = Settings::with_annotations(&base, &base, &ann(&[("confgate.io/accepts", "^2")]));
        assert!(r.problems.is_empty());
        assert_eq!(r.settings.accepts_text(), Some("^2"));
        let r2 = Settings::with_annotations(&base, &r.settings, &ann(&[]));
        assert_eq!(r2.settings.accepts_text(), Some("^1"));
    }

    #[test]
    fn bad_annotation_keeps_the_value_in_force_and_is_named() {
        let base = Settings::default();
        let good = Settings::with_annotations(
            &base,
            &base,
            &ann(&[
                ("confgate.io/accepts", "^2"),
                ("confgate.io/mode", "enforce"),
            ]),
        )
        .settings;
        let r = Settings::with_annotations(
            &base,
            &good,
            &ann(&[
                ("confgate.io/accepts", "two please"),
                ("confgate.io/mode", "observe"),
            ]),
        );
        assert_eq!(r.settings.accepts_text(), Some("^2"));
        assert_eq!(r.settings.mode, Mode::Observe);
        assert_eq!(r.problems.len(), 1);
        assert!(
            r.problems[0].starts_with("invalid confgate.io/accepts \"two please\""),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn unknown_confgate_annotation_is_a_problem_others_are_ignored() {
        let base = Settings::default();
        let r = Settings::with_annotations(
            &base,
            &base,
            &ann(&[("confgate.io/accept", "^2"), ("example.com/x", "y")]),
        );
        assert_eq!(r.problems.len(), 1);
        assert!(r.problems[0].contains("unknown annotation confgate.io/accept"));
    }

    /// Names users type are unique, and defaults that are values are shown as such.
    #[test]
    fn declarations_are_consistent() {
        for name in [
            |s: &Setting| s.flag,
            |s: &Setting| s.env,
            |s: &Setting| s.annotation,
        ] {
            let mut seen: Vec<&str> = SETTINGS.iter().map(name).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), SETTINGS.len());
        }
        assert!(known_annotations().all(|a| a.starts_with(ANN_PREFIX)));
        let per_range = SETTINGS.iter().filter(|s| s.repeat == Repeat::PerRange);
        assert!(
            per_range.count() <= 1,
            "check judges by one setting's values"
        );
        let default = |flag: &str| {
            let s = SETTINGS.iter().find(|s| s.flag == flag).unwrap();
            s.default_text()
        };
        assert_eq!(default("version-from").as_deref(), Some("file:version"));
        assert_eq!(default("confirm").as_deref(), Some("none"));
        assert_eq!(default("accepts"), None, "no range is not a range");
        assert_eq!(default("rule"), None, "no rules is not a rule");
        assert_eq!(default("require"), None);
    }

    #[test]
    fn origins_name_annotation_env_flag_or_default() {
        let raw = Raw {
            accepts: Some("^1".into()),
            mode: Some("observe".into()),
            reload: Some("none".into()),
            ..Raw::default()
        };
        let a = ann(&[
            ("confgate.io/mode", "enforce"),
            ("confgate.io/reload", "nonsense"),
        ]);
        let env = |k: &str| (k == "CONFGATE_ACCEPTS").then(|| "^1".to_owned());
        let o = Settings::origins(&raw, &a, env);
        let names: Vec<_> = Settings::default()
            .describe()
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        let by = |n: &str| o[names.iter().position(|x| *x == n).unwrap()].as_str();
        assert_eq!(by("accepts"), "env CONFGATE_ACCEPTS");
        assert_eq!(by("mode"), "annotation confgate.io/mode");
        assert_eq!(
            by("reload"),
            "flag --reload",
            "a bad annotation does not count"
        );
        assert_eq!(by("version-from"), "default");
    }
}

/// Rules as a gate setting, through the settings parser every source uses.
#[cfg(test)]
mod rules_tests {
    use super::{Raw, Settings};

    fn from_raw(rules: &str) -> Result<Settings, crate::settings::Error> {
        Settings::from_raw(&Raw {
            rules: Some(rules.to_owned()),
            ..Raw::default()
        })
    }

    #[cfg(feature = "policy")]
    #[test]
    fn a_bad_rules_annotation_keeps_the_rules_in_force() {
        let base = from_raw("# guard\n'a' in data\n").unwrap();
        assert_eq!(base.rules.texts(), ["'a' in data"]);
        let ann = [("confgate.io/rules".to_owned(), "true\ndata.(".to_owned())].into();
        let r = Settings::with_annotations(&base, &base, &ann);
        assert_eq!(r.settings.rules, base.rules);
        assert!(
            r.problems.len() == 1 && r.problems[0].contains("rule 2 (\"data.(\")"),
            "{:?}",
            r.problems
        );
        let err = from_raw("data.(").unwrap_err().to_string();
        assert!(err.starts_with("invalid --rule (CONFGATE_RULES)"), "{err}");
    }

    #[cfg(not(feature = "policy"))]
    #[test]
    fn without_the_engine_a_rule_is_refused() {
        let err = from_raw("true").unwrap_err().to_string();
        assert!(err.contains("`policy` cargo feature"), "{err}");
        assert!(from_raw("# nothing but a comment\n").is_ok());
        let ann = [("confgate.io/rules".to_owned(), "true".to_owned())].into();
        let r = Settings::with_annotations(&Settings::default(), &Settings::default(), &ann);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    }
}
