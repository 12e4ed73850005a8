//! `confgate check`: offline verdicts for ConfigMap directories and manifests, with the same hash the
//! running sidecar reports, for CI pipelines ("will the deployed component accept this ConfigMap?"). A
//! ConfigMap read by a workload in the same stream is judged with that workload's annotations, as its
//! sidecar would judge it (`workloads`).
//!
//! All paths are one stream: a ConfigMap an annotated workload reads is judged once per such
//! workload, with `Settings::with_annotations` over the flag settings. A ConfigMap mid-rollout is
//! taken apart as the sidecar takes it (`rollout::choose`), one line per track. The `Report`
//! carries warnings for `main` to print.

use std::path::Path;

use crate::rollout;
use crate::settings::Settings;
use crate::snapshot::{self, Observed};
use crate::variants;
use crate::verdict::{Judgement, Verdict};
use crate::workloads;

use crate::settings::{ApiVersion, SchemeVersion, Standing};
pub use crate::values::kube_release::Release;
use crate::values::kube_release::{self, NotServed};

mod error;
mod known_good;
mod manifest;

pub use error::Error;

use known_good::Record;
pub use known_good::{On, Start};
pub use manifest::manifests;
use manifest::{Input, configmaps, documents};

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// `namespace/name (place)` for a manifest, the path for a directory.
    pub what: String,
    /// The ConfigMap's name, for `--name`; `None` for a directory.
    pub name: Option<String>,
    pub judgement: Judgement,
    pub sha256: Option<String>,
    /// What a pod would start on, when the input holds the source's known-good record.
    pub start: Option<Start>,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<12} {:<12} {:<71} {}: {}",
            self.judgement.verdict.as_str(),
            self.judgement.version.as_deref().unwrap_or("-"),
            self.sha256.as_deref().unwrap_or("-"),
            self.what,
            self.judgement.reason
        )?;
        match &self.start {
            Some(s) => write!(f, "\n{s}"),
            None => Ok(()),
        }
    }
}

/// Keeps the lines of ConfigMaps named in `names` (all when it is empty) and every directory's line; a
/// name that matches no ConfigMap is an error, so a typo cannot pass a pipeline by checking nothing.
pub fn select(lines: Vec<Line>, names: &[String]) -> Result<Vec<Line>, Error> {
    if names.is_empty() {
        return Ok(lines);
    }
    for n in names {
        if !lines.iter().any(|l| l.name.as_ref() == Some(n)) {
            return Err(Error::NoSuchName { name: n.clone() });
        }
    }
    Ok(lines
        .into_iter()
        .filter(|l| l.name.as_ref().is_none_or(|m| names.contains(m)))
        .collect())
}

/// What `check` found: one line per judged input and settings, and what it should tell on standard
/// error without failing (subPath mounts, ConfigMaps a workload reads that are not in the input).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub lines: Vec<Line>,
    pub warnings: Vec<String>,
}

/// Checks every path; `-` reads a manifest from standard input.
pub fn check(paths: &[impl AsRef<Path>], settings: &Settings) -> Result<Report, Error> {
    check_ranges(paths, std::slice::from_ref(settings))
}

/// Checks every path under each of `ranges` (settings from flags and environment, differing in their
/// range), one line per input and range, so a CI job sees which variant each deployed range would run
/// and which range none serves.
///
/// All paths are one stream: a ConfigMap read by a workload with `confgate.io/` annotations (see
/// `workloads`) is judged once per such workload, with the settings its sidecar would have (its
/// annotations over `ranges`), instead of with `ranges` alone.
pub fn check_ranges(paths: &[impl AsRef<Path>], ranges: &[Settings]) -> Result<Report, Error> {
    let Some(first) = ranges.first() else {
        return Err(Error::NoRange);
    };
    let mut inputs = Vec::new();
    let mut records: Vec<Record> = Vec::new();
    let mut found_workloads = Vec::new();
    for p in paths {
        let p = p.as_ref();
        // `-` is standard input, as for every Unix tool, even where a directory is named `-` (`./-`
        // reads that one).
        let stdin = p == Path::new("-");
        if !stdin && p.is_dir() {
            let what = p.display().to_string();
            // A directory that cannot be listed is unreadable input, as a file that cannot be read
            // is (exit 64), not a config judged invalid (exit 1).
            if let Err(source) = std::fs::read_dir(p) {
                return Err(Error::Read { path: what, source });
            }
            inputs.push(Input {
                place: what.clone(),
                id: what.clone(),
                what,
                object: None,
                observed: snapshot::read(p),
            });
            continue;
        }
        let name = p.display().to_string();
        let text = if stdin {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(p)
        }
        .map_err(|source| Error::Read {
            path: name.clone(),
            source,
        })?;
        let docs = documents(&name, &text)?;
        let found = configmaps(&name, &docs);
        let ws = workloads::collect(&docs);
        if found.inputs.is_empty() && found.records.is_empty() && ws.is_empty() {
            return Err(Error::NoConfigMap { path: name });
        }
        inputs.extend(found.inputs);
        records.extend(found.records);
        found_workloads.extend(ws);
    }
    let mut report = Report::default();
    // Each workload's settings under each range, once: an annotated range makes the flag ranges equal.
    let mut settings_of: Vec<Vec<Settings>> = Vec::new();
    for w in &found_workloads {
        let mut all: Vec<Settings> = Vec::new();
        for r in ranges {
            // A manifest's annotation is its author's, who writes the container spec too (`inject`
            // puts its checker there): judged as the sidecar it makes would judge it.
            let mut r = r.clone();
            if let Some(Ok(v)) = w
                .annotations
                .get(crate::verdict::fix::ANN_VALIDATE)
                .map(|v| v.parse())
            {
                r.validate = v;
            }
            let resolved = Settings::with_annotations(&r, &r, &w.annotations);
            if !resolved.problems.is_empty() {
                return Err(Error::Annotations {
                    workload: w.id.clone(),
                    problems: resolved.problems.join("; "),
                });
            }
            if !all.contains(&resolved.settings) {
                all.push(resolved.settings);
            }
        }
        settings_of.push(all);
        report.warnings.extend(w.warnings.iter().cloned());
    }
    let mut unjudged = Vec::new();
    // A directory has no name to match a record by: it takes the input's one record, if only one.
    let record_of = |input: &Input| match &input.object {
        Some((ns, name)) => records
            .iter()
            .find(|r| !r.secret && &r.namespace == ns && &r.source == name),
        None => match records.as_slice() {
            [only] => Some(only),
            _ => None,
        },
    };
    for r in &records {
        if !inputs
            .iter()
            .any(|i| record_of(i).is_some_and(|m| std::ptr::eq(m, r)))
        {
            report.warnings.push(if r.secret {
                format!(
                    "{}: a Secret, the known-good record of Secret {}, which check does not read (a \
                     pod gated on a ConfigMap reads the ConfigMap of that name; a directory takes the \
                     record only when the input holds one); not used",
                    r.what, r.source
                )
            } else {
                format!(
                    "{}: a known-good record of ConfigMap {}, which is not in the input (a directory \
                     takes the record only when the input holds one); not used",
                    r.what, r.source
                )
            });
        }
    }
    for input in &inputs {
        let record = record_of(input);
        let readers: Vec<usize> = match &input.object {
            Some((ns, name)) => found_workloads
                .iter()
                .enumerate()
                .filter(|(_, w)| w.mounts.iter().any(|m| m.is(ns.as_deref(), name)))
                .map(|(i, _)| i)
                .collect(),
            None => Vec::new(),
        };
        if readers.is_empty() {
            if first.accepts.is_none() {
                unjudged.push(input.what.clone());
                continue;
            }
            for settings in ranges {
                let what = match settings.accepts_text() {
                    Some(range) if ranges.len() > 1 => format!("{} [{range}]", input.what),
                    _ => input.what.clone(),
                };
                report.lines.extend(lines(what, input, settings, record));
            }
            continue;
        }
        let id = &input.id;
        for i in readers {
            let all = &settings_of[i];
            for settings in all {
                let mut what = format!("{id} (for {}; {})", found_workloads[i].id, input.place);
                if all.len() > 1 || settings.variants.is_some() {
                    let range = settings.accepts_text().unwrap_or("no range");
                    what = format!("{what} [{range}]");
                }
                report.lines.extend(lines(what, input, settings, record));
            }
        }
    }
    let mut missing = Vec::new();
    for w in &found_workloads {
        for m in &w.mounts {
            let present = inputs.iter().any(|i| {
                i.object
                    .as_ref()
                    .is_some_and(|(ns, name)| m.is(ns.as_deref(), name))
            });
            if !present {
                missing.push(format!("{} for {}", m.id(), w.id));
                let via = match &m.volume {
                    Some(v) => format!("volume {v}"),
                    None => "its --source".to_owned(),
                };
                report.warnings.push(format!(
                    "{}: reads ConfigMap {} ({via}), which is not in the input; not judged (it may be \
                     managed elsewhere: add its manifest to check it)",
                    w.id,
                    m.id()
                ));
            }
        }
    }
    if report.lines.is_empty() {
        return Err(if unjudged.is_empty() {
            Error::NothingToJudge {
                missing: if missing.is_empty() {
                    "none".to_owned()
                } else {
                    missing.join(", ")
                },
            }
        } else {
            Error::NoRange
        });
    }
    for what in unjudged {
        report.warnings.push(format!(
            "{what}: not judged: no workload with confgate.io/ annotations reads it and no range was given \
             (--accepts or CONFGATE_ACCEPTS)"
        ));
    }
    Ok(report)
}

/// The lines as an upgrade to `release` would find them (`check --kubernetes-version`): an accepted
/// config whose group/version the table knows (`kube_release`) and `release` no longer (or not yet)
/// serves is flagged, `too-old` when the release removed it, `too-new` when only a later release serves
/// it, naming the component, the release and the version to move to. Every other line is as judged.
pub fn for_release(lines: Vec<Line>, release: Release) -> Vec<Line> {
    lines
        .into_iter()
        .map(|mut l| {
            if l.judgement.verdict != Verdict::Accepted {
                return l;
            }
            // Each file's API version, named by its key when the config has several.
            let files: Vec<(Option<&str>, &ApiVersion)> = match &l.judgement.parsed {
                Some(SchemeVersion::Api(v)) => vec![(None, v)],
                Some(SchemeVersion::Each(each)) => each
                    .iter()
                    .filter_map(|(k, v)| match v {
                        SchemeVersion::Api(a) => Some((Some(k.as_str()), a)),
                        _ => None,
                    })
                    .collect(),
                _ => return l,
            };
            let stops: Vec<(Option<&str>, Verdict, String)> = files
                .into_iter()
                .filter_map(|(key, v)| {
                    let why = kube_release::upgrade_stops(v, release)?;
                    let (verdict, reason) = not_served(v, &why);
                    Some((key, verdict, reason))
                })
                .collect();
            let Some((_, verdict, _)) = stops.first() else {
                return l;
            };
            l.judgement.verdict = *verdict;
            l.judgement.reason = stops
                .iter()
                .map(|(key, _, reason)| match key {
                    Some(k) => format!("{}: {reason}", crate::listing::name(k)),
                    None => reason.clone(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            l
        })
        .collect()
}

/// The verdict and reason of a config at `v` that `why.release` does not serve.
fn not_served(v: &ApiVersion, why: &NotServed) -> (Verdict, String) {
    let release = why.release;
    let verdict = match (why.removed_in, why.added_in) {
        (Some(_), _) => Verdict::TooOld,
        (None, Some(_)) => Verdict::TooNew,
        (None, None) => match why.served.standing(v) {
            Standing::Newer => Verdict::TooNew,
            Standing::Older => Verdict::TooOld,
            _ => Verdict::OutOfRange,
        },
    };
    let when = match (why.removed_in, why.added_in) {
        (Some(r), _) => format!("removed in {r}"),
        (None, Some(a)) => format!("served from {a} on"),
        (None, None) => "no release serves it".to_owned(),
    };
    let group = why.of_group(&v.group);
    let to = match group.first() {
        Some(newest) => format!(
            "{release} serves {}; update the config to {newest} before upgrading to {release}",
            group.join(", ")
        ),
        None => format!("{release} serves no version of group {}", v.group),
    };
    (
        verdict,
        format!(
            "version {v}{} is accepted now, but {} {release} does not serve it ({when}): {to}",
            match kube_release::kinds(v).as_slice() {
                [] => String::new(),
                kinds => format!(" ({})", kinds.join(", ")),
            },
            why.component
        ),
    )
}

/// Whether every line is accepted.
pub fn all_accepted(lines: &[Line]) -> bool {
    lines
        .iter()
        .all(|l| l.judgement.verdict == Verdict::Accepted)
}

/// The lines of one input under one workload's (or the flags') settings: one, or, for a ConfigMap
/// mid-rollout, one per track. The hash is that of the set a pod promotes (with variants, the chosen
/// variant's): what the sidecar reports as active.
///
/// A ConfigMap with `confgate.rollout` or a `.next` key is taken apart as the sidecar takes it
/// ([`rollout::choose`], [`rollout::split`]): the stable set is judged as every pod off the candidate
/// judges it (a rollout key that cannot be read makes it invalid); while some pods are on the
/// candidate, the candidate's set is judged too, on a line of its own, and a candidate that would be
/// held on those pods is a line that is not accepted: the rollout cannot go on with it.
fn lines(what: String, input: &Input, settings: &Settings, record: Option<&Record>) -> Vec<Line> {
    let mut out = lines_judged(what, input, settings);
    // What a new pod runs follows from the set every pod off the candidate judges: the first line.
    if let (Some(record), Some(first)) = (record, out.first_mut()) {
        first.start = Some(known_good::start(
            first.what.clone(),
            first.sha256.clone(),
            &first.judgement,
            record,
            settings,
        ));
    }
    out
}

fn lines_judged(what: String, input: &Input, settings: &Settings) -> Vec<Line> {
    let name = input.object.as_ref().map(|(_, n)| n.clone());
    let line = |what: String, choice: variants::Choice| Line {
        what,
        name: name.clone(),
        sha256: choice.observed.hash().map(|h| h.to_string()),
        judgement: choice.judgement,
        start: None,
    };
    let plan = match &input.observed {
        Observed::Config(snap) => rollout::Plan::read(snap, settings.variants.as_ref()),
        _ => Ok(None),
    };
    let plan = match plan {
        Ok(None) => {
            return vec![line(
                what,
                variants::choose(input.observed.clone(), settings),
            )];
        }
        Ok(Some(plan)) => Some(plan),
        Err(_) => None,
    };
    let (stable, _) = rollout::choose(input.observed.clone(), settings, None, &[]);
    let mut out = vec![line(format!("{what} stable"), stable)];
    let (Some(plan), Observed::Config(snap)) = (plan, &input.observed) else {
        return out;
    };
    let Some(percent) = plan.percent.filter(|_| plan.live()) else {
        return out;
    };
    let mut candidate = variants::choose(
        Observed::Config(rollout::split(snap.clone()).candidate()),
        settings,
    );
    let j = &mut candidate.judgement;
    j.reason = if j.verdict == Verdict::Accepted {
        format!("promoted on the candidate pods ({percent}): {}", j.reason)
    } else if settings.mode == crate::settings::Mode::Observe {
        // Observe mode holds nothing back; the verdict still fails the check, as for a stable set.
        format!(
            "promoted on the candidate pods ({percent}) in observe mode, although {}",
            j.reason
        )
    } else {
        format!(
            "would be held on the candidate pods ({percent}), which keep stable: {}",
            j.reason
        )
    };
    out.push(line(format!("{what} candidate {percent}"), candidate));
    out
}
