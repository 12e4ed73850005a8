//! What keeps the gate from its course, as values: a settings problem ([`SettingsProblem`]), and why
//! a refused content stays in place ([`Stuck`], [`BaseRefused`]). The state holds these, decisions
//! compare them, and their words (`Display`, here) are made only where they are shown: the status's
//! checks, a log line, an Event.

use crate::verdict::Verdict;

/// A problem with the settings the annotations give: the file could not be read, or a value in it
/// cannot be used (worded below).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingsProblem {
    Annotation(crate::settings::AnnotationProblem),
    Unreadable(crate::annotations::ReadFailure),
}

/// Why the refused content stays in place, not rolled back (worded below).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stuck {
    /// The config the component applied last does not pass under the settings in force.
    BaseNotAccepted(BaseRefused),
    /// The rollback left other content in place.
    LeftOther,
    /// The rollback could not be made (a full disk); it is tried again.
    Failed(crate::promote::Failure),
}

/// Why the config the component applied last is not rolled back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseRefused {
    /// It was judged again under the settings in force, and does not pass.
    Judged {
        version: Option<String>,
        verdict: Verdict,
        reason: String,
    },
    /// Its kept dir holds other content than was applied.
    OtherContent,
}

/// The words of why a refused content stays in place, as the status shows them.
impl std::fmt::Display for Stuck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stuck::BaseNotAccepted(why) => write!(
                f,
                "the refused config stays in place, not rolled back: the config the component applied last is not accepted under the settings in force: {why}"
            ),
            Stuck::LeftOther => f.write_str(
                "the refused config is not rolled back: the rollback left other content in place",
            ),
            Stuck::Failed(error) => write!(
                f,
                "rollback failed, the refused config stays in place (retrying): {error}"
            ),
        }
    }
}

/// The words of why the rollback base is not rolled back to, as the status and the log show them.
impl std::fmt::Display for BaseRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BaseRefused::Judged {
                version,
                verdict,
                reason,
            } => write!(
                f,
                "{} is {verdict}: {reason}",
                version.as_deref().unwrap_or("it")
            ),
            BaseRefused::OtherContent => f.write_str("its kept dir holds other content"),
        }
    }
}

/// The words of a settings problem, as the `settings` check, the log and an Event show them.
impl std::fmt::Display for SettingsProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingsProblem::Annotation(p) => p.fmt(f),
            SettingsProblem::Unreadable(e) => e.fmt(f),
        }
    }
}

/// The words of the settings problems, as the `settings` check and the notice of them show them: the
/// first few, each bounded, then how many more, so that thousands of unknown annotations (the API
/// server bounds their bytes, not their count) keep the check short.
pub(super) fn shown(problems: &[SettingsProblem]) -> String {
    let mut out = problems
        .iter()
        .take(crate::listing::MAX_NAMES)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if problems.len() > crate::listing::MAX_NAMES {
        out.push_str(&format!(
            "; and {} more",
            problems.len() - crate::listing::MAX_NAMES
        ));
    }
    out
}
