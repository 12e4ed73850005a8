//! The `confgate` binary: parses the command line, sets up logging, runs a command, maps the result to an exit code.
//!
//! Logs are JSON, or text whose fields are logfmt (`Logfmt` quotes a value holding a space). `run`,
//! `wait`, `probe` and `status` run through `app`; `check`, `policy` and `inject` are called
//! directly, clap's values turned into their typed parameters first. The exit code comes from the
//! error's class: `app::Error::is_usage` (a bad setting, a port in use, no kubeconfig) is 64,
//! `is_nothing_selected` (`status` found no pod) 66, `is_unavailable` (`status` could not read the
//! fleet) 69, anything else 70. A failure is printed once, here.

use std::process::ExitCode;

use confgate::app::{self, Outcome};
use confgate::cli::{Command, LogFormat};
use confgate::settings::Settings;
use confgate::{check, settings};

/// Exit codes, as documented: success, not accepted/ready, bad usage or setting, nothing selected
/// (`status`), the API server unavailable (`status`), internal error.
const EXIT_OK: u8 = 0;
const EXIT_NO: u8 = 1;
const EXIT_USAGE: u8 = 64;
const EXIT_NOINPUT: u8 = 66;
const EXIT_UNAVAILABLE: u8 = 69;
const EXIT_INTERNAL: u8 = 70;

fn main() -> ExitCode {
    let cli = match confgate::cli::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let e = confgate::cli::without_far_suggestions(e);
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let (format, logs) = match &cli.command {
        Command::Run(a) => (a.paths.log_format, true),
        Command::Wait(a) => (a.paths.log_format, true),
        _ => (LogFormat::Text, false),
    };
    // A probe logs nothing: it prints one line, and starts every few seconds in every pod.
    if !matches!(cli.command, Command::Probe(_)) {
        init_tracing(format);
    }
    let ranges = match &cli.command {
        Command::Run(a) => a.gate.judge.ranges.len(),
        Command::Wait(a) => a.gate.judge.ranges.len(),
        #[cfg(feature = "policy")]
        Command::Policy(a) => a.gate.judge.ranges.len(),
        _ => 0,
    };
    if ranges > 1 {
        eprintln!("confgate: --accepts is given {ranges} times; only check takes several ranges");
        return ExitCode::from(EXIT_USAGE);
    }
    let result = match cli.command {
        Command::Run(args) => app::run(args),
        Command::Wait(args) => app::wait(args),
        Command::Probe(args) => app::probe(args),
        #[cfg(feature = "api")]
        Command::Status(args) => app::status(args),
        Command::Check(args) => return run_check(&args),
        #[cfg(feature = "policy")]
        Command::Policy(args) => return run_policy(&args),
        Command::Inject(args) => return run_inject(&args),
        Command::Completions(args) => {
            print!("{}", confgate::cli::completions(args.shell));
            return ExitCode::from(EXIT_OK);
        }
        #[cfg(not(feature = "policy"))]
        Command::Policy(_) => return unbuilt("policy"),
        #[cfg(not(feature = "api"))]
        Command::Status(_) => return unbuilt("status"),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::from(EXIT_OK),
        Ok(Outcome::No(reason)) => {
            println!("{reason}");
            ExitCode::from(EXIT_NO)
        }
        Err(app::Error::Settings(e)) => usage(&e),
        Err(e) => {
            // Once: as a log line where the command logs (so a JSON pipeline parses it), else plainly.
            if logs {
                tracing::error!(error = %e, "confgate failed");
            } else {
                eprintln!("confgate: {e}");
            }
            ExitCode::from(if e.is_usage() {
                EXIT_USAGE
            } else if e.is_nothing_selected() {
                EXIT_NOINPUT
            } else if e.is_unavailable() {
                EXIT_UNAVAILABLE
            } else {
                EXIT_INTERNAL
            })
        }
    }
}

/// A command this build lacks: a usage error that names the build which has it.
#[cfg(any(not(feature = "policy"), not(feature = "api")))]
fn unbuilt(command: &str) -> ExitCode {
    eprintln!("confgate: {}", confgate::cli::unbuilt(command));
    ExitCode::from(EXIT_USAGE)
}

fn usage(e: &settings::Error) -> ExitCode {
    eprintln!("confgate: {e}");
    ExitCode::from(EXIT_USAGE)
}

fn run_check(args: &confgate::cli::CheckArgs) -> ExitCode {
    let mut ranges = Vec::new();
    for raw in args.gate.raw_per_range() {
        match Settings::from_raw(&raw) {
            Ok(s) => ranges.push(s),
            Err(e) => return usage(&e),
        }
    }
    let report = check::check_ranges(&args.paths, &ranges).and_then(|r| {
        let mut lines = check::select(r.lines, &args.names)?;
        if let Some(release) = args.kubernetes_version {
            lines = check::for_release(lines, release);
        }
        Ok((lines, r.warnings))
    });
    match report {
        Ok((lines, warnings)) => {
            for w in &warnings {
                eprintln!("confgate: warning: {w}");
            }
            for l in &lines {
                println!("{l}");
            }
            ExitCode::from(if check::all_accepted(&lines) {
                EXIT_OK
            } else {
                EXIT_NO
            })
        }
        Err(e) => {
            eprintln!("confgate: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

#[cfg(feature = "policy")]
fn run_policy(args: &confgate::cli::PolicyArgs) -> ExitCode {
    let output = match args.output {
        confgate::cli::PolicyOutput::Yaml => confgate::policy::Output::Yaml,
        confgate::cli::PolicyOutput::Json => confgate::policy::Output::Json,
    };
    match confgate::policy::print(
        &args.gate.raw(),
        &args.namespace,
        &args.name,
        &args.service_accounts,
        &args.kubernetes_version,
        output,
    ) {
        Ok(text) => {
            print!("{text}");
            ExitCode::from(EXIT_OK)
        }
        Err(e) => {
            eprintln!("confgate: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn run_inject(args: &confgate::cli::InjectArgs) -> ExitCode {
    let opts = confgate::inject::Options {
        image: args.image.clone(),
        volume: args.volume.clone(),
        pod_report: args.pod_report == confgate::cli::PodReport::Auto,
        ..Default::default()
    };
    if args.policy {
        return match confgate::inject::check_policy_image(&opts).and_then(|()| {
            confgate::inject::render(&confgate::inject::admission_policy(
                &opts,
                &args.own_namespace,
            ))
        }) {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::from(EXIT_OK)
            }
            Err(e) => {
                eprintln!("confgate: {e}");
                ExitCode::from(EXIT_USAGE)
            }
        };
    }
    match confgate::inject::run(&args.paths, &opts) {
        Ok((yaml, summary)) => {
            print!("{yaml}");
            for o in &summary.outcomes {
                let what = if o.injected { "injected" } else { "skipped" };
                eprintln!("{} {what}: {}", o.workload, o.why);
            }
            for a in &summary.added {
                eprintln!("added {a}");
            }
            ExitCode::from(EXIT_OK)
        }
        Err(e) => {
            eprintln!("confgate: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn init_tracing(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // `CONFGATE_LOG`: a level, or `target=level` directives (`info,confgate::reload=debug`); anything
    // else is `info`. A target list rather than tracing's `EnvFilter`, which links a regular-expression
    // engine for filters a sidecar's logs do not need.
    let filter = std::env::var(confgate::settings::container::LOG_FILTER.env)
        .ok()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO)
        });
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .finish()
            .with(filter)
            .init(),
        LogFormat::Text => builder
            .with_ansi(false)
            .fmt_fields(Logfmt)
            .finish()
            .with(filter)
            .init(),
    }
}

/// Text log fields as logfmt (`key=value`, a value quoted when it holds a space, `"`, `=` or a control
/// character), so Loki's `logfmt` parser reads a reason with spaces as one value.
struct Logfmt;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for Logfmt {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: tracing_subscriber::fmt::format::Writer<'w>,
        fields: R,
    ) -> std::fmt::Result {
        let mut v = LogfmtVisitor { out: String::new() };
        fields.record(&mut v);
        writer.write_str(&v.out)
    }
}

struct LogfmtVisitor {
    out: String,
}

impl LogfmtVisitor {
    fn push(&mut self, name: &str, value: &str) {
        if !self.out.is_empty() {
            self.out.push(' ');
        }
        if name == "message" {
            // The message reads as the line's prose; quoted too, so a parser keeps it whole.
            self.out.push_str("msg=");
        } else {
            self.out.push_str(name);
            self.out.push('=');
        }
        let plain = !value.is_empty()
            && !value
                .chars()
                .any(|c| c == ' ' || c == '"' || c == '=' || c == '\\' || c.is_control());
        if plain {
            self.out.push_str(value);
        } else {
            self.out.push('"');
            for c in value.chars() {
                match c {
                    '"' => self.out.push_str("\\\""),
                    '\\' => self.out.push_str("\\\\"),
                    '\n' => self.out.push_str("\\n"),
                    c if c.is_control() => self.out.push_str(&c.escape_default().to_string()),
                    c => self.out.push(c),
                }
            }
            self.out.push('"');
        }
    }
}

impl tracing_subscriber::field::Visit for LogfmtVisitor {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.push(field.name(), value);
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.push(field.name(), &format!("{value:?}"));
    }
}
