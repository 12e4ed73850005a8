//! The gate settings' flags: made from the declarations in [`crate::settings`] for each command
//! ([`For`]), and read back as raw text with where clap found each value.
//!
//! `JudgeArgs` holds the settings that decide a verdict, `ActArgs` those that act on it, `GateArgs`
//! flattens both; `Args` is implemented by hand from `settings::SETTINGS`. Each is made for one
//! command (`RUN`, `WAIT`, `CHECK`, `POLICY`), which decides which flags it has and whether their
//! help names an annotation (only `run` and `wait` read annotations). `GateArgs::given` keeps where
//! clap's `ArgMatches::value_source` found each value (`settings::Given`: flag or env) for the
//! start-up log.

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches};

use crate::rules;
use crate::settings::{Given, Raw, RawValue, Repeat, SETTINGS, Setting};

/// Which command a set of setting flags is for: what it reads decides which flags it has and what their
/// help says. A `u8` because const generic parameters cannot be enums on the supported Rust.
pub(crate) type For = u8;
/// `run`: every gate setting, also read from the pod's annotations.
pub(crate) const RUN: For = 0;
/// `wait`: what decides a verdict, and `mode` (observe promotes anything); it sends no reload, so no
/// `reload` or `confirm`, and `on-incompatible` changes readiness, which it does not serve.
pub(crate) const WAIT: For = 1;
/// `check`: what decides a verdict, several ranges, no annotations.
pub(crate) const CHECK: For = 2;
/// `policy`: what decides a verdict, and `mode` (observe warns instead of denying); no annotations.
pub(crate) const POLICY: For = 3;

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
                *setting.given_mut(&mut raw) = Some(RawValue::Text(range.clone()));
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
            Repeat::Once => values.into_iter().last().map(RawValue::Text),
            Repeat::PerRange => {
                ranges.clone_from(&values);
                values.into_iter().last().map(RawValue::Text)
            }
            Repeat::Lines { file_flag, .. } => lines(
                values,
                m.value_source(s.flag) == Some(clap::parser::ValueSource::EnvVariable),
                m.get_one::<Vec<String>>(file_flag),
            ),
        };
    }
    (raw, ranges, from)
}

/// The items of a setting given one per flag (or, from its environment variable, one per line) and
/// a file of lines, in that order; `None` when there are none.
fn lines(values: Vec<String>, from_env: bool, file: Option<&Vec<String>>) -> Option<RawValue> {
    let mut items = if from_env {
        values.iter().flat_map(|v| rules::parse_file(v)).collect()
    } else {
        values
    };
    items.extend(file.into_iter().flatten().cloned());
    (!items.is_empty() || file.is_some()).then_some(RawValue::Lines(items))
}

/// Read when the command line is parsed, so that an unreadable file is a usage error (exit 64) like any
/// bad flag.
/// A file of lines (`--rules-file`) that could not be read; named by its flag's words, as clap
/// puts the path beside it.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the {}: {why}", .flag.replace('-', " "))]
pub(super) struct LinesFileError {
    flag: &'static str,
    why: std::io::Error,
}

fn read_lines_file(path: &str, flag: &'static str) -> Result<Vec<String>, LinesFileError> {
    std::fs::read_to_string(path)
        .map(|text| rules::parse_file(&text))
        .map_err(|why| LinesFileError { flag, why })
}
