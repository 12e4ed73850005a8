//! Command line: flags with their environment fallbacks (clap applies flag > env), one struct per command.
//!
//! The gate settings' flags are not written here: [`JudgeArgs`] and [`ActArgs`] make them from the
//! declarations in [`crate::settings`], so a new setting reaches every command that takes its kind. Each
//! command's help lists only the settings it reads ([`For`]), tagged with their annotation only where the
//! command reads annotations.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::settings::{Given, Raw, Repeat, SETTINGS, Setting};

/// The log filter, for every command's help: it is read from the environment only.
const LOG_HELP: &str = "Environment:\n  CONFGATE_LOG  The log filter, in tracing's env-filter syntax: \
                        info (the default), debug, or per module, e.g. confgate=debug,kube=warn";

#[derive(Debug, Parser)]
#[command(
    name = "confgate",
    version,
    after_help = LOG_HELP,
    about = "Lets a component run only a ConfigMap version it accepts",
    long_about = "Watches a mounted ConfigMap, checks its schema version against the semver range the \
                  component accepts, promotes accepted configs atomically into the component's dir and \
                  signals a reload, and otherwise holds the last accepted config and reports why."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the sidecar: watch, decide, promote, reload, serve probes.
    #[command(after_help = LOG_HELP)]
    Run(RunArgs),
    /// Exit 0 once an accepted config is in place (for classic init containers), 1 on timeout.
    #[command(after_help = LOG_HELP)]
    Wait(WaitArgs),
    /// Offline verdict for ConfigMap directories or manifests (YAML or JSON); exit 0 only if all are accepted.
    Check(CheckArgs),
    /// Print a ValidatingAdmissionPolicy and binding that refuse, at write time, what the sidecar would hold back.
    #[cfg(feature = "policy")]
    Policy(PolicyArgs),
    /// Exec-probe client: print the reason line of /readyz, /livez or /startupz; exit 0 or 1.
    Probe(ProbeArgs),
    /// Fleet view from the pods' confgate.io/config-compatible conditions; exit 0 when all pods match.
    #[cfg(feature = "api")]
    Status(StatusArgs),
    /// Add the confgate native sidecar to every workload whose pods carry confgate.io/accepts; prints YAML.
    Inject(InjectArgs),
}

/// Which command a set of setting flags is for: what it reads decides which flags it has and what their
/// help says. A `u8` because const generic parameters cannot be enums on the supported Rust.
pub type For = u8;
/// `run`: every gate setting, also read from the pod's annotations.
pub const RUN: For = 0;
/// `wait`: what decides a verdict, and `mode` (observe promotes anything); it sends no reload, so no
/// `reload` or `confirm`, and `on-incompatible` changes readiness, which it does not serve.
pub const WAIT: For = 1;
/// `check`: what decides a verdict, several ranges, no annotations.
pub const CHECK: For = 2;
/// `policy`: what decides a verdict, and `mode` (observe warns instead of denying); no annotations.
pub const POLICY: For = 3;

/// Whether the command also reads its settings from the pod's annotations (so its help names them).
const fn annotated(cmd: For) -> bool {
    matches!(cmd, RUN | WAIT)
}

/// Whether the command takes the setting.
fn takes(cmd: For, s: &Setting) -> bool {
    s.judging || cmd == RUN || (matches!(cmd, WAIT | POLICY) && s.flag == MODE_FLAG)
}

/// The one acting setting `wait` and `policy` read.
const MODE_FLAG: &str = "mode";

/// A setting's help for the command: `policy` compiles a version source into CEL, which has no JSON or
/// YAML parser, so it takes `file:` sources only, and its `mode` chooses the policy's action.
fn help_for(cmd: For, s: &Setting) -> String {
    match (cmd, s.flag) {
        (POLICY, "version-from") => {
            "Where the version is: file:KEY, a key holding only the version (the API server's CEL cannot \
             read a JSON or YAML document)"
                .to_owned()
        }
        (POLICY, MODE_FLAG) => "enforce (deny), or observe (warn and audit only)".to_owned(),
        _ => s.help.to_owned(),
    }
}

/// The gate settings command `CMD` takes: those that decide a verdict and those that act on it, each
/// flag made from its declaration in [`crate::settings`].
#[derive(Debug, Clone, Default, Args)]
pub struct GateArgs<const CMD: For = RUN> {
    #[command(flatten)]
    pub judge: JudgeArgs<CMD>,
    #[command(flatten)]
    pub act: ActArgs<CMD>,
}

impl<const CMD: For> GateArgs<CMD> {
    /// The raw settings with the last `--accepts`; commands other than `check` refuse several.
    pub fn raw(&self) -> Raw {
        let mut raw = self.judge.raw();
        for s in SETTINGS.iter().filter(|s| !s.judging) {
            *s.given_mut(&mut raw) = s.given(&self.act.raw).cloned();
        }
        raw
    }

    /// Where the command line found `setting`'s value: its flag or its environment variable.
    pub fn given(&self, setting: &Setting) -> Option<Given> {
        self.judge
            .from
            .iter()
            .chain(&self.act.from)
            .find(|(flag, _)| *flag == setting.flag)
            .map(|(_, g)| *g)
    }
}

/// The gate settings that decide a verdict, which every command that judges takes.
#[derive(Debug, Clone, Default)]
pub struct JudgeArgs<const CMD: For = RUN> {
    /// Each `--accepts` given, in order; only `check` takes several.
    pub ranges: Vec<String>,
    /// With the last of `ranges`.
    raw: Raw,
    /// Where clap found each setting given (by flag name).
    from: Vec<(&'static str, Given)>,
}

impl<const CMD: For> JudgeArgs<CMD> {
    /// The raw settings with the last `--accepts`.
    pub fn raw(&self) -> Raw {
        self.raw.clone()
    }

    /// The raw settings once per `--accepts` (`check`'s per-range report); one entry without a range.
    pub fn raw_per_range(&self) -> Vec<Raw> {
        let Some(setting) = SETTINGS.iter().find(|s| s.repeat == Repeat::PerRange) else {
            return vec![self.raw()];
        };
        if self.ranges.len() <= 1 {
            return vec![self.raw()];
        }
        self.ranges
            .iter()
            .map(|range| {
                let mut raw = self.raw();
                *setting.given_mut(&mut raw) = Some(range.clone());
                raw
            })
            .collect()
    }
}

/// The gate settings that act on a verdict (reload, readiness, mode), those of them command `CMD` reads.
#[derive(Debug, Clone, Default)]
pub struct ActArgs<const CMD: For = RUN> {
    raw: Raw,
    from: Vec<(&'static str, Given)>,
}

impl<const CMD: For> Args for JudgeArgs<CMD> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        setting_args(cmd, true, CMD)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl<const CMD: For> FromArgMatches for JudgeArgs<CMD> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let (raw, ranges, from) = given(m, true, CMD);
        Ok(JudgeArgs { ranges, raw, from })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<const CMD: For> Args for ActArgs<CMD> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        setting_args(cmd, false, CMD)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl<const CMD: For> FromArgMatches for ActArgs<CMD> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let (raw, _, from) = given(m, false, CMD);
        Ok(ActArgs { raw, from })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// Adds a flag, with its environment variable, for each gate setting whose `judging` is `judging` and
/// which command `for_` takes. None has a clap default: an absent flag must stay absent, so that an
/// annotation, then the setting's own default, applies and the start-up log can say where a value came
/// from.
fn setting_args(mut cmd: clap::Command, judging: bool, for_: For) -> clap::Command {
    for s in SETTINGS
        .iter()
        .filter(|s| s.judging == judging && takes(for_, s))
    {
        let mut help = help_for(for_, s);
        if s.repeat == Repeat::PerRange && for_ == CHECK {
            help.push_str("; repeat it to see, per range, which variant would run");
        }
        if annotated(for_) {
            help.push_str(&format!(" [annotation {}]", s.annotation));
        }
        if let Some(default) = s.default_text() {
            help.push_str(&format!(" [default: {default}]"));
        }
        let action = match s.repeat {
            Repeat::Once => ArgAction::Set,
            Repeat::PerRange | Repeat::Lines { .. } => ArgAction::Append,
        };
        cmd = cmd.arg(
            Arg::new(s.flag)
                .long(s.flag)
                .env(s.env)
                .value_name(s.value_name)
                .help(help)
                .action(action)
                .value_parser(clap::value_parser!(String)),
        );
        if let Repeat::Lines {
            file_flag,
            file_env,
            file_help,
        } = s.repeat
        {
            cmd = cmd.arg(
                Arg::new(file_flag)
                    .long(file_flag)
                    .env(file_env)
                    .value_name("FILE")
                    .help(file_help)
                    .value_parser(move |path: &str| read_lines_file(path, file_flag)),
            );
        }
    }
    cmd
}

/// The raw values of the gate settings whose `judging` is `judging` (those command `for_` takes), every
/// value of the one repeated per range, and where clap found each given.
fn given(
    m: &ArgMatches,
    judging: bool,
    for_: For,
) -> (Raw, Vec<String>, Vec<(&'static str, Given)>) {
    let mut raw = Raw::default();
    let mut ranges = Vec::new();
    let mut from = Vec::new();
    for s in SETTINGS
        .iter()
        .filter(|s| s.judging == judging && takes(for_, s))
    {
        let file_flag = match s.repeat {
            Repeat::Lines { file_flag, .. } => Some(file_flag),
            Repeat::Once | Repeat::PerRange => None,
        };
        let sources = std::iter::once(s.flag)
            .chain(file_flag)
            .filter_map(|id| m.value_source(id));
        // A flag given on the command line names the setting's origin even when its file came from
        // the environment.
        let mut source = None;
        for v in sources {
            match v {
                clap::parser::ValueSource::CommandLine => source = Some(Given::Flag),
                clap::parser::ValueSource::EnvVariable => {
                    source = source.or(Some(Given::Env));
                }
                _ => {}
            }
        }
        if let Some(g) = source {
            from.push((s.flag, g));
        }
        let values: Vec<String> = m
            .get_many::<String>(s.flag)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        *s.given_mut(&mut raw) = match s.repeat {
            Repeat::Once => values.into_iter().last(),
            Repeat::PerRange => {
                ranges.clone_from(&values);
                values.into_iter().last()
            }
            Repeat::Lines { file_flag, .. } => {
                lines_text(&values, m.get_one::<String>(file_flag).map(String::as_str))
            }
        };
    }
    (raw, ranges, from)
}

/// Values given one per flag and a file of lines, as one text of lines; `None` when there are none.
fn lines_text(values: &[String], file: Option<&str>) -> Option<String> {
    (!values.is_empty() || file.is_some()).then(|| {
        let mut text = values.join("\n");
        if let Some(file) = file {
            text.push('\n');
            text.push_str(file);
        }
        text
    })
}

/// Read when the command line is parsed, so that an unreadable file is a usage error (exit 64) like any
/// bad flag.
fn read_lines_file(path: &str, flag: &str) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the {}: {e}", flag.replace('-', " ")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Whether `run` reports to its own pod (Events, the pod conditions) through the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PodReport {
    /// When POD_NAME and POD_NAMESPACE are set, with the mounted ServiceAccount token (or a kubeconfig).
    Auto,
    /// Never: no request to the API server about the pod.
    Off,
}

/// What the watched content is: a Secret's content is never published, not even its plain hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Content {
    Config,
    Secret,
}

/// Where the config comes from and goes to.
#[derive(Debug, Clone, Args)]
pub struct PathArgs {
    /// The raw ConfigMap mount
    #[arg(
        long,
        env = "CONFGATE_WATCH",
        value_name = "DIR",
        default_value = "/etc/confgate/incoming"
    )]
    pub watch: PathBuf,
    /// Where the config comes from: volume (the --watch mount) or configmap:NAMESPACE/NAME (the API;
    /// needs --promote-to) [annotation confgate.io/source] [default: volume]
    #[arg(long, env = "CONFGATE_SOURCE", value_name = "SOURCE")]
    pub source: Option<String>,
    /// What the source holds: config, or secret (a mounted Secret volume; hashes are printed keyed,
    /// as hmac-sha256:, never as the content's plain sha256); a secret: source implies secret
    #[arg(long, env = "CONFGATE_CONTENT", value_enum, default_value = "config")]
    pub content: Content,
    /// Where accepted configs are promoted; without it, gate-only mode (readiness and reload, no copy)
    #[arg(long, env = "CONFGATE_PROMOTE_TO", value_name = "DIR")]
    pub promote_to: Option<PathBuf>,
    /// Downward-API annotations file; an absent file means no annotations
    #[arg(
        long,
        env = "CONFGATE_ANNOTATIONS",
        value_name = "FILE",
        default_value = "/etc/podinfo/annotations"
    )]
    pub annotations: PathBuf,
    /// Safety re-read of the config and annotations, in case a file event was lost
    #[arg(long, env = "CONFGATE_RESYNC_INTERVAL", value_name = "DUR", default_value = "30s", value_parser = duration)]
    pub resync_interval: std::time::Duration,
    /// Log format
    #[arg(long, env = "CONFGATE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub paths: PathArgs,
    #[command(flatten)]
    pub gate: GateArgs,
    /// Address of the probe, status and metrics server; the default is dual-stack, and falls back to
    /// 0.0.0.0 on a host without IPv6
    #[arg(
        long,
        env = "CONFGATE_LISTEN",
        value_name = "ADDR",
        default_value = "[::]:9797"
    )]
    pub listen: SocketAddr,
    /// How long shutdown may take before in-flight work is abandoned
    #[arg(long, env = "CONFGATE_SHUTDOWN_GRACE", value_name = "DUR", default_value = "5s", value_parser = duration)]
    pub shutdown_grace: std::time::Duration,
    /// PEM file of CA certificates trusted for https:// reload targets, besides the system roots
    #[arg(long, env = "CONFGATE_RELOAD_CA", value_name = "FILE")]
    pub reload_ca: Option<std::path::PathBuf>,
    /// Report to the sidecar's own pod through the API server, in volume mode too: Events, the
    /// conditions confgate.io/config-compatible and config-current, and their facts (auto: when
    /// POD_NAME and POD_NAMESPACE are set; builds without the api feature never report)
    #[arg(long, env = "CONFGATE_POD_REPORT", value_enum, default_value = "auto")]
    pub pod_report: PodReport,
}

#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    #[command(flatten)]
    pub paths: PathArgs,
    #[command(flatten)]
    pub gate: GateArgs<WAIT>,
    /// Give up after this long (exit 1 with the reason)
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = duration)]
    pub timeout: std::time::Duration,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The settings that decide a verdict; `check` reads no annotations.
    #[command(flatten)]
    pub gate: JudgeArgs<CHECK>,
    /// Judge only the ConfigMaps with this name (repeatable); directories are always judged
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Directories (kubelet volume or plain) or manifests (ConfigMaps, and workloads whose confgate.io/
    /// annotations then judge the ConfigMaps they read); `-` reads a manifest from stdin
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    /// The same --accepts, --version-from (file:KEY only), --require, --rule and --rules-file;
    /// --mode observe gives [Warn, Audit]
    #[command(flatten)]
    pub gate: GateArgs<POLICY>,
    /// Namespace of the guarded ConfigMap
    #[arg(long, value_name = "NS")]
    pub namespace: String,
    /// Name of the guarded ConfigMap
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// The oldest API server the policy must work on (1.30 or newer)
    #[arg(long, value_name = "MAJOR.MINOR", default_value = "1.30")]
    pub kubernetes_version: String,
    /// Output format
    #[arg(long, value_enum, default_value = "yaml")]
    pub output: PolicyOutput,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyOutput {
    Yaml,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProbeKind {
    Ready,
    Live,
    Startup,
}

impl ProbeKind {
    pub fn path(self) -> &'static str {
        match self {
            ProbeKind::Ready => "/readyz",
            ProbeKind::Live => "/livez",
            ProbeKind::Startup => "/startupz",
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// Which endpoint
    #[arg(value_enum)]
    pub kind: ProbeKind,
    /// The sidecar's address, HOST:PORT (an http:// prefix is accepted) [default: 127.0.0.1 and the
    /// port of CONFGATE_LISTEN, as the sidecar in the same container was started with; else 9797]
    #[arg(long, env = "CONFGATE_PROBE_ADDR", value_name = "HOST:PORT")]
    pub addr: Option<String>,
    /// Give up after this long (keep it under the probe's timeoutSeconds, which defaults to 1 s)
    #[arg(long, value_name = "DUR", default_value = "900ms", value_parser = duration)]
    pub timeout: std::time::Duration,
}

/// `confgate status` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Namespace of the pods (and the ConfigMap) [default: the kubeconfig's namespace]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Label selector for the pods, e.g. app=webhook
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Compare each pod's active config with this ConfigMap's current content (mid-rollout: with the
    /// track each pod is assigned)
    #[arg(long, value_name = "NAME")]
    pub configmap: Option<String>,
    /// Wait until every selected pod has applied the config assigned to it (exit 0); exit 1 at the
    /// first refusal (a pod holds back its config or the component rejected it) or at the timeout
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = duration, requires = "wait")]
    pub timeout: std::time::Duration,
}

#[derive(Debug, Clone, Args)]
pub struct InjectArgs {
    /// Manifest files (YAML or JSON, several documents); `-` or none reads standard input
    #[arg(value_name = "FILE")]
    pub paths: Vec<PathBuf>,
    /// The sidecar's image
    #[arg(long, value_name = "IMAGE", default_value = concat!("ghcr.io/confgate/confgate:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// The ConfigMap volume to gate, when a pod has several
    #[arg(long, value_name = "NAME")]
    pub volume: Option<String>,
}

/// A usage error as clap made it, without a suggestion that is not near what was typed: clap suggests
/// the flag most similar by Jaro similarity over 0.7, which pairs unrelated names (`--frobnicate` with
/// `--on-incompatible`). A suggestion is kept when it is at most a third of the typed name's edits away
/// (at least two: a transposed pair), as `--acept` for `--accepts` or `--relaod` for `--reload` are.
pub fn without_far_suggestions(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let (Some(ContextValue::String(typed)), Some(ContextValue::String(suggested))) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::SuggestedArg),
    ) else {
        return e;
    };
    let typed = typed.split('=').next().unwrap_or(typed);
    let (a, b) = (
        typed.trim_start_matches('-'),
        suggested.trim_start_matches('-'),
    );
    if edits(a, b) > (a.chars().count() / 3).max(2) {
        e.remove(ContextKind::SuggestedArg);
        // The usage line clap made shows the suggested flag as if it were required.
        e.remove(ContextKind::Usage);
    }
    e
}

/// The Levenshtein distance between two names.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(prev + usize::from(ca != *cb));
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

fn duration(s: &str) -> Result<std::time::Duration, String> {
    crate::values::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_count_insertions_deletions_and_substitutions() {
        assert_eq!(edits("accepts", "accepts"), 0);
        assert_eq!(edits("acept", "accepts"), 2);
        assert_eq!(edits("relaod", "reload"), 2);
        assert_eq!(edits("", "mode"), 4);
        assert!(edits("frobnicate", "on-incompatible") > 5);
    }

    /// `run` takes every gate setting as its flag, with its environment variable.
    #[test]
    fn the_command_line_has_every_setting() {
        let cmd = <crate::cli::Cli as clap::CommandFactory>::command();
        let run = cmd.find_subcommand("run").expect("run");
        for s in SETTINGS {
            let arg = run
                .get_arguments()
                .find(|a| a.get_long() == Some(s.flag))
                .unwrap_or_else(|| panic!("no flag --{}", s.flag));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(s.env));
        }
    }
}
