//! Command line: flags with their environment fallbacks (clap applies flag > env), one struct per command.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::settings::Raw;

#[derive(Debug, Parser)]
#[command(
    name = "confgate",
    version,
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
    Run(RunArgs),
    /// Exit 0 once an accepted config is in place (for classic init containers), 1 on timeout.
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
    Status(crate::api::status_cmd::StatusArgs),
    /// Add the confgate native sidecar to every workload whose pods carry confgate.io/accepts; prints YAML.
    Inject(InjectArgs),
}

/// The gate settings; each can be overridden live by a pod annotation.
#[derive(Debug, Clone, Args, Default)]
pub struct GateArgs {
    /// Semver range the component accepts, e.g. ">=2.4.0, <3.0.0" or ">=2.4.0 <3.0.0" [annotation
    /// confgate.io/accepts]
    #[arg(long, env = "CONFGATE_ACCEPTS", value_name = "REQ", action = clap::ArgAction::Append)]
    pub accepts: Vec<String>,
    /// Where the version is: file:KEY, json:KEY#/pointer, yaml:KEY#/pointer [annotation
    /// confgate.io/version-from] [default: file:version]
    #[arg(long, env = "CONFGATE_VERSION_FROM", value_name = "SPEC")]
    pub version_from: Option<String>,
    /// Keys that must be present, comma-separated [annotation confgate.io/require]
    #[arg(long, env = "CONFGATE_REQUIRE", value_name = "K1,K2")]
    pub require: Option<String>,
    /// none, http(s)://URL (POST) or signal:NAME:PROCESS [annotation confgate.io/reload] [default: none]
    #[arg(long, env = "CONFGATE_RELOAD", value_name = "SPEC")]
    pub reload: Option<String>,
    /// hold (stay ready, report stale) or unready [annotation confgate.io/on-incompatible] [default: hold]
    #[arg(long, env = "CONFGATE_ON_INCOMPATIBLE", value_name = "POLICY")]
    pub on_incompatible: Option<String>,
    /// enforce, or observe (promote everything, only report) [annotation confgate.io/mode] [default:
    /// enforce]
    #[arg(long, env = "CONFGATE_MODE", value_name = "MODE")]
    pub mode: Option<String>,
    /// A CEL expression over `data` and `binaryData` that must hold (repeatable; the env var holds one
    /// per line) [annotation confgate.io/rules]
    #[arg(long = "rule", env = "CONFGATE_RULES", value_name = "CEL")]
    pub rules: Vec<String>,
    /// A file of rules, one per line (`#` starts a comment line), after those of --rule
    #[arg(long, env = "CONFGATE_RULES_FILE", value_name = "FILE", value_parser = rules_file)]
    pub rules_file: Option<RulesFile>,
    /// Metrics confirming a reload: URL#SUCCESS or URL#SUCCESS,SUCCESS_TIME, or none [default: none]
    #[arg(long, env = "CONFGATE_CONFIRM", value_name = "URL#METRICS")]
    pub confirm: Option<String>,
    /// Variant keys and the name the chosen one is promoted as, e.g. "config.v*.yaml -> config.yaml"
    /// [annotation confgate.io/variants] [default: none]
    #[arg(long, env = "CONFGATE_VARIANTS", value_name = "PATTERN -> NAME")]
    pub variants: Option<String>,
}

/// A rules file's content, read when the command line is parsed so that an unreadable file is a usage
/// error (exit 64) like any bad flag.
#[derive(Debug, Clone)]
pub struct RulesFile(pub String);

/// `--rule`s and a rules file as one text in the rules-file format; `None` when there are none.
fn rules_text(rules: &[String], file: Option<&RulesFile>) -> Option<String> {
    (!rules.is_empty() || file.is_some()).then(|| {
        let mut text = rules.join("\n");
        if let Some(RulesFile(file)) = file {
            text.push('\n');
            text.push_str(file);
        }
        text
    })
}

fn rules_file(path: &str) -> Result<RulesFile, String> {
    std::fs::read_to_string(path)
        .map(RulesFile)
        .map_err(|e| format!("cannot read the rules file: {e}"))
}

impl GateArgs {
    /// The raw settings with the last `--accepts`; commands other than `check` refuse several.
    pub fn raw(&self) -> Raw {
        Raw {
            accepts: self.accepts.last().cloned(),
            version_from: self.version_from.clone(),
            require: self.require.clone(),
            reload: self.reload.clone(),
            on_incompatible: self.on_incompatible.clone(),
            mode: self.mode.clone(),
            rules: rules_text(&self.rules, self.rules_file.as_ref()),
            confirm: self.confirm.clone(),
            variants: self.variants.clone(),
        }
    }

    /// The raw settings once per `--accepts` (`check`'s per-range report); one entry without a range.
    pub fn raw_per_range(&self) -> Vec<Raw> {
        if self.accepts.len() <= 1 {
            return vec![self.raw()];
        }
        self.accepts
            .iter()
            .map(|a| Raw {
                accepts: Some(a.clone()),
                ..self.raw()
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
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
}

#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    #[command(flatten)]
    pub paths: PathArgs,
    #[command(flatten)]
    pub gate: GateArgs,
    /// Give up after this long (exit 1 with the reason)
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = duration)]
    pub timeout: std::time::Duration,
}

/// The settings `check` judges by: the range, where the version is, the required keys.
#[derive(Debug, Clone, Args, Default)]
pub struct CheckGateArgs {
    /// Semver range the component accepts, e.g. ">=2.4.0, <3.0.0" or ">=2.4.0 <3.0.0"; repeat it to
    /// see, per range, which variant would run
    #[arg(long, env = "CONFGATE_ACCEPTS", value_name = "REQ", action = clap::ArgAction::Append)]
    pub accepts: Vec<String>,
    /// Where the version is: file:KEY, json:KEY#/pointer, yaml:KEY#/pointer [default: file:version]
    #[arg(long, env = "CONFGATE_VERSION_FROM", value_name = "SPEC")]
    pub version_from: Option<String>,
    /// Keys that must be present, comma-separated
    #[arg(long, env = "CONFGATE_REQUIRE", value_name = "K1,K2")]
    pub require: Option<String>,
    /// A CEL expression over `data` and `binaryData` that must hold (repeatable)
    #[arg(long = "rule", env = "CONFGATE_RULES", value_name = "CEL")]
    pub rules: Vec<String>,
    /// A file of rules, one per line (`#` starts a comment line), after those of --rule
    #[arg(long, env = "CONFGATE_RULES_FILE", value_name = "FILE", value_parser = rules_file)]
    pub rules_file: Option<RulesFile>,
    /// Variant keys and the name the chosen one is promoted as, e.g. "config.v*.yaml -> config.yaml"
    #[arg(long, env = "CONFGATE_VARIANTS", value_name = "PATTERN -> NAME")]
    pub variants: Option<String>,
}

impl CheckGateArgs {
    /// The raw settings once per `--accepts` (the per-range report); one entry without a range.
    pub fn raw_per_range(&self) -> Vec<Raw> {
        let base = Raw {
            accepts: self.accepts.first().cloned(),
            version_from: self.version_from.clone(),
            require: self.require.clone(),
            rules: rules_text(&self.rules, self.rules_file.as_ref()),
            variants: self.variants.clone(),
            ..Raw::default()
        };
        if self.accepts.len() <= 1 {
            return vec![base];
        }
        self.accepts
            .iter()
            .map(|a| Raw {
                accepts: Some(a.clone()),
                ..base.clone()
            })
            .collect()
    }
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub gate: CheckGateArgs,
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
    pub gate: GateArgs,
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

fn duration(s: &str) -> Result<std::time::Duration, String> {
    crate::settings::parse_duration(s)
}
