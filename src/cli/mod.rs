//! Command line: flags with their environment fallbacks (clap applies flag > env), one struct per command.
//!
//! The gate settings' flags are not written here: [`JudgeArgs`] and [`ActArgs`] make them from the
//! declarations in [`crate::settings`], so a new setting reaches every command that takes its kind. Each
//! command's help lists only the settings it reads (`For`), tagged with their annotation only where the
//! command reads annotations.
//!
//! This file holds the commands and their own flags; `gate.rs` makes the gate settings' flags;
//! `suggest.rs` keeps clap's suggestion for an unknown flag only when it is near.
//!
//! Invoked as `kubectl-confgate` (the file name in `argv[0]`), the help says `kubectl confgate` and
//! hides the sidecar's own commands. `completions` prints clap_complete's scripts; `version` and
//! `long_version` are `--version` (the commit from `build.rs`, the features from `cfg!`). A command
//! the build lacks (`policy` without its feature) is a hidden `Unbuilt` command, refused naming the
//! build that has it.
//!
//! Values stay raw (`settings::Raw`, each a `RawValue`: a text, or the items of a repeatable
//! setting such as `--rule`, never joined into one text), so one parser serves flags, env and
//! annotations. Every command's flags are here (`StatusArgs` too): clap types go no further than
//! `cli`, `app` and `main`, which hand the commands typed values (`status_cmd::Query`,
//! `policy::Output`).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand, ValueEnum};

use crate::settings::container::{
    ANNOTATIONS, CONTENT, LISTEN, LOG_FORMAT, POD_REPORT, PROMOTE_TO, RELOAD_CA, RESYNC_INTERVAL,
    SHUTDOWN_GRACE, SOURCE, WATCH,
};

mod gate;
mod suggest;

pub use gate::ActArgs;
pub(crate) use gate::{CHECK, For, POLICY, WAIT};
pub use gate::{GateArgs, JudgeArgs};
pub use suggest::without_far_suggestions;

/// The log filter, for every command's help: it is read from the environment only.
const LOG_HELP: &str = "Environment:\n  CONFGATE_LOG  The log filter, in tracing's Targets syntax: \
                        a level (info, the default, or error, warn, debug, trace), then module=level \
                        pairs, e.g. info,confgate::reload=debug,kube=warn (a module not named logs at \
                        the first level; without one, not at all); a filter that does not parse is info";

/// The commit the binary was built from (`build.rs`), `unknown` when the build did not say.
pub const COMMIT: &str = match option_env!("CONFGATE_GIT_COMMIT") {
    Some(c) => c,
    None => "unknown",
};

/// The optional cargo features built in, in the order the help names them.
pub fn features() -> Vec<&'static str> {
    [
        ("api", cfg!(feature = "api")),
        ("tls", cfg!(feature = "tls")),
        ("policy", cfg!(feature = "policy")),
    ]
    .into_iter()
    .filter_map(|(f, on)| on.then_some(f))
    .collect()
}

fn features_text() -> String {
    let f = features();
    if f.is_empty() {
        "none".to_owned()
    } else {
        f.join(", ")
    }
}

/// `confgate -V`: the version, the commit it was built from and the cargo features built in, on one line.
pub fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        format!(
            "{} (commit {COMMIT}; features: {})",
            env!("CARGO_PKG_VERSION"),
            features_text()
        )
    })
}

/// `confgate --version`: the same, one fact a line, and where the features this build lacks are.
pub fn long_version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let mut v = format!(
            "{}\ncommit: {COMMIT}\nfeatures: {}",
            env!("CARGO_PKG_VERSION"),
            features_text()
        );
        if !cfg!(feature = "policy") {
            v.push_str(concat!(
                "\nnot built in: policy (CEL content rules and `confgate policy`): in the -policy \
                 image scripts/build-images.sh builds (localhost/confgate/confgate:",
                env!("CARGO_PKG_VERSION"),
                "-policy), or `cargo build --features policy`"
            ));
        }
        v
    })
}

/// The name the binary answers to as a kubectl plugin: `kubectl confgate ...` runs `kubectl-confgate`
/// found on PATH, with the arguments after `confgate`.
pub const KUBECTL_PLUGIN: &str = "kubectl-confgate";

/// The commands a workstation runs; the sidecar's own (`run`, `wait`, `probe`) are hidden from the
/// plugin's help.
const PLUGIN_COMMANDS: &[&str] = &["status", "check", "inject", "policy"];

/// Parses the command line. Invoked as [`KUBECTL_PLUGIN`] (argv\[0\]'s file name), the help and usage
/// say `kubectl confgate` and list the workstation's commands only.
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut cmd = Cli::command();
    if args.first().is_some_and(|a| is_plugin_name(a)) {
        cmd = as_kubectl_plugin(cmd);
    }
    let mut matches = cmd.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
}

/// argv\[0\] names the plugin: its file name is `kubectl-confgate` (kubectl runs it by full path).
fn is_plugin_name(argv0: &std::ffi::OsStr) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .is_some_and(|n| n == KUBECTL_PLUGIN)
}

/// The command as `kubectl confgate` shows it.
fn as_kubectl_plugin(cmd: clap::Command) -> clap::Command {
    let hidden: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .filter(|n| !PLUGIN_COMMANDS.contains(&n.as_str()))
        .collect();
    hidden
        .iter()
        .fold(cmd, |cmd, name| cmd.mut_subcommand(name, |s| s.hide(true)))
        .name("kubectl confgate")
        .bin_name("kubectl confgate")
        .display_name("kubectl confgate")
}

/// The completion script for a shell, for the binary's own command line.
pub fn completions(shell: Shell) -> String {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    match shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "confgate", &mut out)
        }
        Shell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "confgate", &mut out)
        }
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "confgate", &mut out)
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Debug, Parser)]
#[command(
    name = "confgate",
    version = version(),
    long_version = long_version(),
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
    /// Print a shell completion script: source <(confgate completions bash)
    Completions(CompletionsArgs),
    /// A command this build lacks: refused, naming the build that has it.
    #[cfg(not(feature = "policy"))]
    #[command(hide = true, disable_help_flag = true)]
    Policy(Unbuilt),
    #[cfg(not(feature = "api"))]
    #[command(hide = true, disable_help_flag = true)]
    Status(Unbuilt),
}

/// The arguments of a command this build lacks, taken whatever they are, so the refusal names the
/// feature rather than a flag.
#[derive(Debug, Clone, Args)]
pub struct Unbuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<OsString>,
}

/// Why a command is missing from this build and which build has it.
pub fn unbuilt(command: &str) -> String {
    let (feature, image) = match command {
        "policy" => (
            "policy",
            concat!(
                "localhost/confgate/confgate:",
                env!("CARGO_PKG_VERSION"),
                "-policy"
            ),
        ),
        _ => (
            "api",
            concat!("localhost/confgate/confgate:", env!("CARGO_PKG_VERSION")),
        ),
    };
    format!(
        "`{command}` is not in this build (features: {}); it is in the image scripts/build-images.sh \
         builds ({image}), or a build with `cargo build --features {feature}`",
        features_text()
    )
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells `completions` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
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
    #[arg(long = WATCH.flag, env = WATCH.env, value_name = WATCH.value_name, default_value = WATCH.default)]
    pub watch: PathBuf,
    /// Where the config comes from: volume (the --watch mount) or configmap:NAMESPACE/NAME (the API;
    /// needs --promote-to) [annotation confgate.io/source] [default: volume]
    #[arg(long = SOURCE.flag, env = SOURCE.env, value_name = SOURCE.value_name)]
    pub source: Option<String>,
    /// What the source holds: config, or secret (a mounted Secret volume; hashes are printed keyed,
    /// as hmac-sha256:, never as the content's plain sha256); a secret: source implies secret
    #[arg(long = CONTENT.flag, env = CONTENT.env, value_enum, default_value = CONTENT.default)]
    pub content: Content,
    /// Where accepted configs are promoted; without it, gate-only mode (readiness and reload, no copy)
    #[arg(long = PROMOTE_TO.flag, env = PROMOTE_TO.env, value_name = PROMOTE_TO.value_name)]
    pub promote_to: Option<PathBuf>,
    /// Downward-API annotations file; an absent file means no annotations
    #[arg(long = ANNOTATIONS.flag, env = ANNOTATIONS.env, value_name = ANNOTATIONS.value_name, default_value = ANNOTATIONS.default)]
    pub annotations: PathBuf,
    /// Safety re-read of the config and annotations, in case a file event was lost
    #[arg(long = RESYNC_INTERVAL.flag, env = RESYNC_INTERVAL.env, value_name = RESYNC_INTERVAL.value_name, default_value = RESYNC_INTERVAL.default, value_parser = duration)]
    pub resync_interval: std::time::Duration,
    /// Log format
    #[arg(long = LOG_FORMAT.flag, env = LOG_FORMAT.env, value_enum, default_value = LOG_FORMAT.default)]
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
    #[arg(long = LISTEN.flag, env = LISTEN.env, value_name = LISTEN.value_name, default_value = LISTEN.default)]
    pub listen: SocketAddr,
    /// How long shutdown may take before in-flight work is abandoned
    #[arg(long = SHUTDOWN_GRACE.flag, env = SHUTDOWN_GRACE.env, value_name = SHUTDOWN_GRACE.value_name, default_value = SHUTDOWN_GRACE.default, value_parser = duration)]
    pub shutdown_grace: std::time::Duration,
    /// PEM file of CA certificates trusted for https:// reload targets, besides the system roots
    #[arg(long = RELOAD_CA.flag, env = RELOAD_CA.env, value_name = RELOAD_CA.value_name)]
    pub reload_ca: Option<std::path::PathBuf>,
    /// Report to the sidecar's own pod through the API server, in volume mode too: Events, the
    /// conditions confgate.io/config-compatible and config-current, and their facts (auto: when
    /// POD_NAME and POD_NAMESPACE are set; builds without the api feature never report)
    #[arg(long = POD_REPORT.flag, env = POD_REPORT.env, value_enum, default_value = POD_REPORT.default)]
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
    /// Also flag a config the component's Kubernetes release 1.N no longer serves (kube-apiserver,
    /// kube-scheduler, kube-proxy and kubelet configs, by their apiVersion), before upgrading to it
    #[arg(long, value_name = "1.N")]
    pub kubernetes_version: Option<crate::check::Release>,
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
    /// A ServiceAccount of the gated pods (repeatable): only its tokens bound to a pod may write the
    /// known-good record NAME.confgate-known-good [default: any ServiceAccount of --namespace]
    #[arg(long = "service-account", value_name = "[NS:]NAME")]
    pub service_accounts: Vec<String>,
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
    /// Wait until every selected pod has applied the config --configmap assigns it (exit 0); exit 1 at
    /// the first refusal (a pod holds back its config or the component rejected it) or at the timeout.
    /// Needs --configmap: without it nothing is compared (exit 64)
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
    #[arg(long, value_name = "IMAGE", default_value = concat!("localhost/confgate/confgate:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// The ConfigMap volume to gate, when a pod has several
    #[arg(long, value_name = "NAME")]
    pub volume: Option<String>,
    /// Whether the sidecar reports to its pod (Events, the conditions): auto adds POD_NAME,
    /// POD_NAMESPACE, POD_UID, a token for confgate alone, a Role bound to the pod's own
    /// ServiceAccount (never changed) and the policy keeping it to the pod's own object; off adds none
    /// of them
    #[arg(long, value_enum, default_value = "auto")]
    pub pod_report: PodReport,
    /// Print, instead of reading manifests, a MutatingAdmissionPolicy and its binding that add the same
    /// sidecar at admission to pods labelled confgate.io/inject: enabled (Kubernetes 1.36, or 1.32 with
    /// the API enabled), and the own-pod policy
    #[arg(long, conflicts_with_all = ["paths", "volume"])]
    pub policy: bool,
    /// With --policy: the namespace confgate's own parts run in, which the policy leaves alone, as it
    /// does kube-system
    #[arg(
        long,
        value_name = "NS",
        default_value = "confgate-system",
        requires = "policy"
    )]
    pub own_namespace: String,
}

fn duration(s: &str) -> Result<std::time::Duration, crate::values::DurationError> {
    crate::values::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use crate::settings::{CONTAINER_SETTINGS, SETTINGS};

    /// `run` takes every gate setting as its flag, with its environment variable.
    #[test]
    fn the_command_line_has_every_setting() {
        let cmd = <super::Cli as clap::CommandFactory>::command();
        let run = cmd.find_subcommand("run").expect("run");
        for s in SETTINGS {
            let arg = run
                .get_arguments()
                .find(|a| a.get_long() == Some(s.flag))
                .unwrap_or_else(|| panic!("no flag --{}", s.flag));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(s.env));
        }
    }

    /// `run` takes every container setting that has a flag, with the names and the default the table
    /// in `docs/settings.md` shows.
    #[test]
    fn run_has_every_container_setting_as_declared() {
        let cmd = <super::Cli as clap::CommandFactory>::command();
        let run = cmd.find_subcommand("run").expect("run");
        for s in CONTAINER_SETTINGS.iter().filter(|s| !s.flag.is_empty()) {
            let arg = run
                .get_arguments()
                .find(|a| a.get_long() == Some(s.flag))
                .unwrap_or_else(|| panic!("no flag --{}", s.flag));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(s.env));
            let defaults: Vec<_> = arg.get_default_values().iter().collect();
            if let [d] = defaults[..] {
                assert_eq!(d.to_str(), Some(s.default), "--{}", s.flag);
            }
        }
    }
}
