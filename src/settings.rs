//! Gate settings: what the component accepts and how confgate acts, resolved annotation > flag > env > default.
//!
//! One parser serves every source: flags and environment arrive merged by clap as [`Raw`] strings, pod
//! annotations as an [`Annotations`] map. A bad flag or environment value is fatal at start-up (exit 64);
//! a bad annotation is reported and the value in force before it stays (a crash loop would hide the message).

use std::fmt;
use std::str::FromStr;

use semver::VersionReq;

use crate::annotations::Annotations;
use crate::configmap::is_valid_key;

pub const ANN_ACCEPTS: &str = "confgate.io/accepts";
pub const ANN_VERSION_FROM: &str = "confgate.io/version-from";
pub const ANN_REQUIRE: &str = "confgate.io/require";
pub const ANN_RELOAD: &str = "confgate.io/reload";
pub const ANN_ON_INCOMPATIBLE: &str = "confgate.io/on-incompatible";
pub const ANN_MODE: &str = "confgate.io/mode";
pub const ANN_RULES: &str = "confgate.io/rules";
pub const ANN_CONFIRM: &str = "confgate.io/confirm";
pub const ANN_VARIANTS: &str = "confgate.io/variants";
/// Reserved for the API source; recognised so that it is not reported as unknown.
pub const ANN_SOURCE: &str = "confgate.io/source";
const ANN_PREFIX: &str = "confgate.io/";
const KNOWN_ANNOTATIONS: [&str; 10] = [
    ANN_ACCEPTS,
    ANN_VERSION_FROM,
    ANN_REQUIRE,
    ANN_RELOAD,
    ANN_ON_INCOMPATIBLE,
    ANN_MODE,
    ANN_RULES,
    ANN_VARIANTS,
    ANN_SOURCE,
    ANN_CONFIRM,
];

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

/// The semver range the component accepts, with the text it was written as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepts {
    pub req: VersionReq,
    pub text: String,
}

/// Where the schema version lives in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionFrom {
    /// The whole content of a key, trimmed.
    File { key: String },
    /// An RFC 6901 pointer into a key parsed as JSON.
    Json { key: String, pointer: String },
    /// An RFC 6901 pointer into a key parsed as YAML.
    Yaml { key: String, pointer: String },
}

/// Several versions of one config file side by side: keys matching `pattern` are the variants, and the
/// chosen one is promoted as `promoted`. Written `config.v*.yaml -> config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variants {
    /// The pattern before its one `*`.
    pub prefix: String,
    /// The pattern after its one `*`.
    pub suffix: String,
    /// The key the component reads.
    pub promoted: String,
}

impl Variants {
    /// Whether `key` is a variant: the prefix, at least one character without `/`, the suffix.
    pub fn matches(&self, key: &str) -> bool {
        key.len() > self.prefix.len() + self.suffix.len()
            && key.starts_with(&self.prefix)
            && key.ends_with(&self.suffix)
            && !key[self.prefix.len()..key.len() - self.suffix.len()].contains('/')
    }
}

impl FromStr for Variants {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (pattern, promoted) = s
            .split_once("->")
            .ok_or("missing \"->\" between the pattern and the promoted name")?;
        let (pattern, promoted) = (pattern.trim(), promoted.trim());
        let (prefix, suffix) = pattern
            .split_once('*')
            .ok_or_else(|| format!("the pattern {pattern:?} has no '*'"))?;
        if suffix.contains('*') {
            return Err(format!("the pattern {pattern:?} has more than one '*'"));
        }
        if !is_valid_key(&format!("{prefix}x{suffix}")) {
            return Err(format!(
                "the pattern {pattern:?} does not make valid ConfigMap keys"
            ));
        }
        if !is_valid_key(promoted) {
            return Err(format!("{promoted:?} is not a valid ConfigMap key"));
        }
        let v = Variants {
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
            promoted: promoted.to_owned(),
        };
        if v.matches(promoted) {
            return Err(format!(
                "the promoted name {promoted:?} matches the pattern {pattern:?}"
            ));
        }
        Ok(v)
    }
}

impl fmt::Display for Variants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}*{} -> {}", self.prefix, self.suffix, self.promoted)
    }
}

fn parse_variants(s: &str) -> Result<Option<Variants>, String> {
    match s.trim() {
        "" | "none" => Ok(None),
        v => v.parse().map(Some),
    }
}

/// How a component is told to reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    None,
    /// POST to this URL; any 2xx is success.
    Http(String),
    /// Send `signal` to every process named `process`.
    Signal {
        signal: nix::sys::signal::Signal,
        process: String,
    },
}

/// What a rejected or missing newer config does to readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnIncompatible {
    Hold,
    Unready,
}

/// Whether confgate enforces its verdicts or only reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Enforce,
    Observe,
}

/// The gate settings in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub accepts: Option<Accepts>,
    pub version_from: VersionFrom,
    pub require: Vec<String>,
    pub reload: Reload,
    pub on_incompatible: OnIncompatible,
    pub mode: Mode,
    /// Content rules (CEL) a config must satisfy to be accepted.
    pub rules: crate::rules::RuleSet,
    /// The component's metrics that confirm a reload; `None`: the reload's own answer decides.
    pub confirm: Option<crate::confirm::Confirm>,
    /// Variant keys and the name the chosen one is promoted as; `None` promotes the ConfigMap as it is.
    pub variants: Option<Variants>,
}

/// Flag or environment values before parsing (clap has already applied flag > env).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Raw {
    pub accepts: Option<String>,
    pub version_from: Option<String>,
    pub require: Option<String>,
    pub reload: Option<String>,
    pub on_incompatible: Option<String>,
    pub mode: Option<String>,
    /// Rules in the rules-file format: one CEL expression per line, `#` comment lines.
    pub rules: Option<String>,
    pub confirm: Option<String>,
    pub variants: Option<String>,
}

/// Settings resolved from annotations, with the problems found on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub settings: Settings,
    /// Bad or unknown annotations; each one makes confgate not ready.
    pub problems: Vec<String>,
}

// === parsing, shared by every source ===

const ALLOWED_ACCEPTS: &str = "a semver requirement such as \">=2.4.0, <3.0.0\" (or \">=2.4.0 <3.0.0\"), \"^2.4\", \"~2.4.1\" or \"2.*\"";
const ALLOWED_VERSION_FROM: &str =
    "file:KEY, json:KEY#/json/pointer or yaml:KEY#/json/pointer (KEY a ConfigMap key)";
const ALLOWED_RELOAD: &str =
    "none, http://..., https://... or signal:NAME:PROCESS (e.g. signal:HUP:prometheus)";
const ALLOWED_ON_INCOMPATIBLE: &str = "hold or unready";
const ALLOWED_MODE: &str = "enforce or observe";
const ALLOWED_RULES: &str = "one CEL expression over data and binaryData per line (lines starting with # are comments), each evaluating to true";
const ALLOWED_CONFIRM: &str = "none or URL#SUCCESS_METRIC[,SUCCESS_TIME_METRIC] (e.g. http://127.0.0.1:9090/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds)";
const ALLOWED_VARIANTS: &str = "none, or PATTERN -> NAME with one '*' in PATTERN and NAME not matching it (e.g. \"config.v*.yaml -> config.yaml\")";
const ALLOWED_REQUIRE: &str = "a comma-separated list of ConfigMap keys ([-._a-zA-Z0-9]+)";

fn parse_accepts(s: &str) -> Result<Accepts, String> {
    let text = s.trim();
    if text.is_empty() {
        return Err("the range is empty".into());
    }
    if text.contains("||") {
        return Err("alternatives (||) are not supported; write one range".into());
    }
    VersionReq::parse(&comma_separated(text))
        .map(|req| Accepts {
            req,
            text: text.to_owned(),
        })
        .map_err(|e| format!("not a semver range ({e})"))
}

/// The npm/Helm dialect separates comparators by spaces (`>=2.4.0 <3.0.0`, `>= 2.4.0`); the semver
/// crate wants commas. Text that already has commas is left for the crate to judge.
fn comma_separated(text: &str) -> String {
    if text.contains(',') {
        return text.to_owned();
    }
    let mut out: Vec<String> = Vec::new();
    let mut pending_op = String::new();
    for tok in text.split_whitespace() {
        if tok
            .chars()
            .all(|c| matches!(c, '<' | '>' | '=' | '^' | '~'))
        {
            pending_op.push_str(tok);
        } else {
            out.push(format!("{}{tok}", std::mem::take(&mut pending_op)));
        }
    }
    if !pending_op.is_empty() {
        out.push(pending_op);
    }
    out.join(", ")
}

impl FromStr for VersionFrom {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| "missing the file:, json: or yaml: prefix".to_owned())?;
        let check_key = |key: &str| {
            if is_valid_key(key) {
                Ok(key.to_owned())
            } else {
                Err(format!("{key:?} is not a valid ConfigMap key"))
            }
        };
        match kind {
            "file" => Ok(VersionFrom::File {
                key: check_key(rest)?,
            }),
            "json" | "yaml" => {
                let (key, pointer) = rest
                    .split_once('#')
                    .ok_or_else(|| format!("{kind}: needs KEY#/pointer"))?;
                if !(pointer.is_empty() || pointer.starts_with('/')) {
                    return Err(format!(
                        "pointer {pointer:?} must be empty or start with '/' (RFC 6901)"
                    ));
                }
                let key = check_key(key)?;
                let pointer = pointer.to_owned();
                Ok(if kind == "json" {
                    VersionFrom::Json { key, pointer }
                } else {
                    VersionFrom::Yaml { key, pointer }
                })
            }
            other => Err(format!("unknown source kind {other:?}")),
        }
    }
}

impl fmt::Display for VersionFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionFrom::File { key } => write!(f, "file:{key}"),
            VersionFrom::Json { key, pointer } => write!(f, "json:{key}#{pointer}"),
            VersionFrom::Yaml { key, pointer } => write!(f, "yaml:{key}#{pointer}"),
        }
    }
}

impl VersionFrom {
    /// The ConfigMap key the version is read from.
    pub fn key(&self) -> &str {
        match self {
            VersionFrom::File { key }
            | VersionFrom::Json { key, .. }
            | VersionFrom::Yaml { key, .. } => key,
        }
    }
}

/// The authority part of a URL after its scheme.
fn authority(rest: &str) -> &str {
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

/// A reload target as it may be shown: any `user:password@` replaced, so an error never repeats it.
pub fn redact(value: &str) -> String {
    for scheme in ["http://", "https://"] {
        if let Some(rest) = value.strip_prefix(scheme) {
            let auth = authority(rest);
            if let Some(at) = auth.rfind('@') {
                return format!("{scheme}<credentials removed>@{}", &rest[at + 1..]);
            }
        }
    }
    value.to_owned()
}

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

impl FromStr for Reload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "none" {
            return Ok(Reload::None);
        }
        if let Some(rest) = s
            .strip_prefix("http://")
            .or_else(|| s.strip_prefix("https://"))
        {
            if rest.is_empty() || rest.starts_with('/') {
                return Err("the URL has no host".into());
            }
            if authority(rest).contains('@') {
                // Never sent and shown in /status and logs: refused, and never repeated (see `redact`).
                return Err(
                    "the URL carries credentials (user:password@); confgate does not send them"
                        .into(),
                );
            }
            s.parse::<hyper::Uri>()
                .map_err(|e| format!("not a valid URL ({e})"))?;
            return Ok(Reload::Http(s.to_owned()));
        }
        if let Some(rest) = s.strip_prefix("signal:") {
            let (name, process) = rest.split_once(':').ok_or("signal: needs NAME:PROCESS")?;
            if process.is_empty() || process.contains('/') {
                return Err("the process name must be a non-empty base name".into());
            }
            let upper = name.to_ascii_uppercase();
            let full = if upper.starts_with("SIG") {
                upper
            } else {
                format!("SIG{upper}")
            };
            let signal = nix::sys::signal::Signal::from_str(&full)
                .map_err(|_| format!("{name:?} is not a signal name (e.g. HUP, TERM, USR1)"))?;
            return Ok(Reload::Signal {
                signal,
                process: process.to_owned(),
            });
        }
        Err("unknown reload target".into())
    }
}

impl fmt::Display for Reload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reload::None => f.write_str("none"),
            Reload::Http(url) => f.write_str(url),
            Reload::Signal { signal, process } => {
                let name = signal.as_str();
                write!(
                    f,
                    "signal:{}:{process}",
                    name.strip_prefix("SIG").unwrap_or(name)
                )
            }
        }
    }
}

impl FromStr for OnIncompatible {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hold" => Ok(OnIncompatible::Hold),
            "unready" => Ok(OnIncompatible::Unready),
            _ => Err("unknown policy".into()),
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

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "enforce" => Ok(Mode::Enforce),
            "observe" => Ok(Mode::Observe),
            _ => Err("unknown mode".into()),
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

fn parse_require(s: &str) -> Result<Vec<String>, String> {
    let mut keys = Vec::new();
    for key in s.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        if !is_valid_key(key) {
            return Err(format!("{key:?} is not a valid ConfigMap key"));
        }
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_owned());
        }
    }
    Ok(keys)
}

/// Which setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Accepts,
    VersionFrom,
    Require,
    Reload,
    OnIncompatible,
    Mode,
    Rules,
    Confirm,
    Variants,
}

/// One setting: how to name it to a user and what it allows.
struct Field {
    key: Key,
    flag: &'static str,
    env: &'static str,
    annotation: &'static str,
    allowed: &'static str,
}

const FIELDS: [Field; 9] = [
    Field {
        key: Key::Accepts,
        flag: "--accepts",
        env: "CONFGATE_ACCEPTS",
        annotation: ANN_ACCEPTS,
        allowed: ALLOWED_ACCEPTS,
    },
    Field {
        key: Key::VersionFrom,
        flag: "--version-from",
        env: "CONFGATE_VERSION_FROM",
        annotation: ANN_VERSION_FROM,
        allowed: ALLOWED_VERSION_FROM,
    },
    Field {
        key: Key::Require,
        flag: "--require",
        env: "CONFGATE_REQUIRE",
        annotation: ANN_REQUIRE,
        allowed: ALLOWED_REQUIRE,
    },
    Field {
        key: Key::Reload,
        flag: "--reload",
        env: "CONFGATE_RELOAD",
        annotation: ANN_RELOAD,
        allowed: ALLOWED_RELOAD,
    },
    Field {
        key: Key::OnIncompatible,
        flag: "--on-incompatible",
        env: "CONFGATE_ON_INCOMPATIBLE",
        annotation: ANN_ON_INCOMPATIBLE,
        allowed: ALLOWED_ON_INCOMPATIBLE,
    },
    Field {
        key: Key::Mode,
        flag: "--mode",
        env: "CONFGATE_MODE",
        annotation: ANN_MODE,
        allowed: ALLOWED_MODE,
    },
    Field {
        key: Key::Rules,
        flag: "--rule",
        env: "CONFGATE_RULES",
        annotation: ANN_RULES,
        allowed: ALLOWED_RULES,
    },
    Field {
        key: Key::Confirm,
        flag: "--confirm",
        env: "CONFGATE_CONFIRM",
        annotation: ANN_CONFIRM,
        allowed: ALLOWED_CONFIRM,
    },
    Field {
        key: Key::Variants,
        flag: "--variants",
        env: "CONFGATE_VARIANTS",
        annotation: ANN_VARIANTS,
        allowed: ALLOWED_VARIANTS,
    },
];

impl Default for Settings {
    fn default() -> Self {
        Settings {
            accepts: None,
            version_from: VersionFrom::File {
                key: "version".into(),
            },
            require: Vec::new(),
            reload: Reload::None,
            on_incompatible: OnIncompatible::Hold,
            mode: Mode::Enforce,
            rules: crate::rules::RuleSet::default(),
            confirm: None,
            variants: None,
        }
    }
}

impl Raw {
    fn get(&self, key: Key) -> Option<&String> {
        match key {
            Key::Accepts => self.accepts.as_ref(),
            Key::VersionFrom => self.version_from.as_ref(),
            Key::Require => self.require.as_ref(),
            Key::Reload => self.reload.as_ref(),
            Key::OnIncompatible => self.on_incompatible.as_ref(),
            Key::Mode => self.mode.as_ref(),
            Key::Rules => self.rules.as_ref(),
            Key::Confirm => self.confirm.as_ref(),
            Key::Variants => self.variants.as_ref(),
        }
    }
}

/// Applies every setting `get` has a value for onto `base`, collecting all errors with their setting.
fn overlay(
    base: &Settings,
    get: impl Fn(&Field) -> Option<(String, String)>,
) -> (Settings, Vec<(Key, Invalid)>) {
    let mut s = base.clone();
    let mut errors = Vec::new();
    for f in &FIELDS {
        let Some((setting, value)) = get(f) else {
            continue;
        };
        if let Err(problem) = s.set(f.key, &value) {
            errors.push((
                f.key,
                Invalid {
                    setting,
                    value: if f.key == Key::Reload {
                        redact(&value)
                    } else {
                        value
                    },
                    problem,
                    allowed: f.allowed,
                },
            ));
        }
    }
    (s, errors)
}

impl Settings {
    fn set(&mut self, key: Key, v: &str) -> Result<(), String> {
        match key {
            Key::Accepts => self.accepts = Some(parse_accepts(v)?),
            Key::VersionFrom => self.version_from = v.parse()?,
            Key::Require => self.require = parse_require(v)?,
            Key::Reload => self.reload = v.parse()?,
            Key::OnIncompatible => self.on_incompatible = v.parse()?,
            Key::Mode => self.mode = v.parse()?,
            Key::Rules => self.rules = crate::rules::RuleSet::parse(v)?,
            Key::Confirm => {
                self.confirm = match v.trim() {
                    "none" | "" => None,
                    c => Some(c.parse()?),
                }
            }
            Key::Variants => self.variants = parse_variants(v)?,
        }
        Ok(())
    }

    fn copy_from(&mut self, key: Key, other: &Settings) {
        match key {
            Key::Accepts => self.accepts.clone_from(&other.accepts),
            Key::VersionFrom => self.version_from.clone_from(&other.version_from),
            Key::Require => self.require.clone_from(&other.require),
            Key::Reload => self.reload.clone_from(&other.reload),
            Key::OnIncompatible => self.on_incompatible = other.on_incompatible,
            Key::Mode => self.mode = other.mode,
            Key::Rules => self.rules.clone_from(&other.rules),
            Key::Confirm => self.confirm.clone_from(&other.confirm),
            Key::Variants => self.variants.clone_from(&other.variants),
        }
    }

    /// Settings from flags and environment over the defaults; every bad value is reported.
    pub fn from_raw(raw: &Raw) -> Result<Settings, Error> {
        let (s, errors) = overlay(&Settings::default(), |f| {
            raw.get(f.key)
                .map(|v| (format!("{} ({})", f.flag, f.env), v.clone()))
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
        let (mut s, errors) = overlay(base, |f| {
            ann.get(f.annotation)
                .map(|v| (f.annotation.to_owned(), v.clone()))
        });
        for (key, _) in &errors {
            s.copy_from(*key, in_force);
        }
        let mut problems: Vec<String> = errors.iter().map(|(_, e)| e.to_string()).collect();
        for key in ann.keys() {
            if key.starts_with(ANN_PREFIX) && !KNOWN_ANNOTATIONS.contains(&key.as_str()) {
                problems.push(format!(
                    "unknown annotation {key}; known: {}",
                    KNOWN_ANNOTATIONS.join(", ")
                ));
            }
        }
        Resolved {
            settings: s,
            problems,
        }
    }

    /// Each gate setting as (name, annotation, value as text), in the order of the settings table.
    pub fn describe(&self) -> Vec<(&'static str, &'static str, String)> {
        FIELDS
            .iter()
            .map(|f| (&f.flag[2..], f.annotation, self.text(f.key)))
            .collect()
    }

    fn text(&self, key: Key) -> String {
        match key {
            Key::Accepts => self.accepts_text().unwrap_or("none").to_owned(),
            Key::VersionFrom => self.version_from.to_string(),
            Key::Require => self.require.join(","),
            Key::Reload => self.reload.to_string(),
            Key::OnIncompatible => self.on_incompatible.as_str().to_owned(),
            Key::Mode => self.mode.as_str().to_owned(),
            Key::Rules if self.rules.texts().is_empty() => "none".to_owned(),
            Key::Rules => self.rules.texts().join(" ; "),
            Key::Confirm => self
                .confirm
                .as_ref()
                .map_or_else(|| "none".to_owned(), ToString::to_string),
            Key::Variants => self
                .variants
                .as_ref()
                .map_or_else(|| "none".to_owned(), ToString::to_string),
        }
    }

    /// Where each gate setting in force came from, in [`Settings::describe`]'s order: the annotation
    /// (when present and valid), the environment variable (when it holds the value), the flag, or the
    /// default. `env` reads an environment variable; passed in so this stays free of I/O.
    pub fn origins(
        raw: &Raw,
        ann: &Annotations,
        env: impl Fn(&str) -> Option<String>,
    ) -> Vec<String> {
        FIELDS
            .iter()
            .map(|f| {
                if ann
                    .get(f.annotation)
                    .is_some_and(|v| Settings::default().set(f.key, v).is_ok())
                {
                    return format!("annotation {}", f.annotation);
                }
                match raw.get(f.key) {
                    Some(v) if env(f.env).as_ref() == Some(v) => format!("env {}", f.env),
                    Some(_) => format!("flag {}", f.flag),
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

/// Parses a duration such as `500ms`, `30s`, `5m` or `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 30s, 5m)"))?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    }
    .ok_or_else(|| format!("{s:?} is not a duration (e.g. 500ms, 30s, 5m)"))?;
    Ok(std::time::Duration::from_millis(ms))
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
        let r = Settings::with_annotations(&base, &base, &ann(&[(ANN_ACCEPTS, "^2")]));
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
            &ann(&[(ANN_ACCEPTS, "^2"), (ANN_MODE, "enforce")]),
        )
        .settings;
        let r = Settings::with_annotations(
            &base,
            &good,
            &ann(&[(ANN_ACCEPTS, "two please"), (ANN_MODE, "observe")]),
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

    /// The README's settings table and the command line say what [`FIELDS`] declares, so neither can
    /// drift from the parser: each gate setting's row names its flag, env var and annotation.
    #[test]
    fn readme_table_and_cli_match_the_declarations() {
        let readme = include_str!("../README.md");
        let cmd = <crate::cli::Cli as clap::CommandFactory>::command();
        let run = cmd.find_subcommand("run").expect("run");
        for f in &FIELDS {
            let row = readme
                .lines()
                .find(|l| l.starts_with('|') && l.contains(&format!("`{} ", f.flag)))
                .unwrap_or_else(|| panic!("no README row for {}", f.flag));
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            assert!(cells[3] == format!("`{}`", f.env), "{row}");
            assert!(
                cells[4].starts_with(&format!("`{}`", f.annotation)),
                "{row}"
            );
            let arg = run
                .get_arguments()
                .find(|a| a.get_long() == f.flag.strip_prefix("--"))
                .unwrap_or_else(|| panic!("no flag {}", f.flag));
            assert_eq!(
                arg.get_env().and_then(|e| e.to_str()),
                Some(f.env),
                "{}",
                f.flag
            );
        }
        assert_eq!(
            KNOWN_ANNOTATIONS.len(),
            FIELDS.len() + 1,
            "every annotation but confgate.io/source is a gate setting"
        );
    }

    #[test]
    fn variants_syntax() {
        let v: Variants = "config.v*.yaml -> config.yaml".parse().unwrap();
        assert!(v.matches("config.v2.yaml") && v.matches("config.v10-beta.yaml"));
        for not in [
            "config.v.yaml",
            "config.yaml",
            "config.v2.yml",
            "x/config.v2.yaml",
        ] {
            assert!(!v.matches(not), "{not}");
        }
        assert!(!v.matches("config.va/b.yaml"));
        for (bad, why) in [
            ("config.v*.yaml", "missing \"->\""),
            ("config.v2.yaml -> config.yaml", "has no '*'"),
            ("c*.v*.yaml -> config.yaml", "more than one '*'"),
            ("config.*.yaml -> config.v.yaml", "matches the pattern"),
            ("config.*.yaml -> ../x", "not a valid ConfigMap key"),
            (
                "a b*.yaml -> config.yaml",
                "does not make valid ConfigMap keys",
            ),
        ] {
            let e = bad.parse::<Variants>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(parse_variants("none").unwrap(), None);
        assert_eq!(parse_variants("").unwrap(), None);
    }

    #[test]
    fn npm_dialect_ranges_read_as_the_comma_form() {
        for (npm, cargo) in [
            (">=2.4.0 <3.0.0", ">=2.4.0, <3.0.0"),
            (">= 2.4.0  < 3.0.0", ">=2.4.0, <3.0.0"),
            ("^2.4", "^2.4"),
            ("2.4.x", "2.4.*"),
        ] {
            let a = parse_accepts(npm).unwrap_or_else(|e| panic!("{npm}: {e}"));
            assert_eq!(a.req, VersionReq::parse(cargo).unwrap(), "{npm}");
            assert_eq!(a.text, npm.trim(), "the text stays as written");
        }
        assert!(parse_accepts(">=1 || <0.5").unwrap_err().contains("||"));
        assert!(parse_accepts(">=2.4.0 <").is_err());
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

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
        assert_eq!(parse_duration("30s").unwrap().as_secs(), 30);
        assert_eq!(parse_duration("2m").unwrap().as_secs(), 120);
        assert_eq!(parse_duration("5").unwrap().as_secs(), 5);
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("").is_err());
    }
}
