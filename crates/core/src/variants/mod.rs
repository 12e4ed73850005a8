//! Variants: several versions of one config file side by side in one ConfigMap, and the choice of the
//! one a component runs. Pure: no I/O, no clock.
//!
//! With `config.v*.yaml -> config.yaml`, each key matching the pattern is a variant. Every variant is
//! judged as the set it would promote (the variant under `config.yaml` plus every key that is not a
//! variant), with the usual `version-from` and `require`; the highest accepted version wins (semver
//! precedence, or Kubernetes' order of API versions: GA over beta over alpha). Two variants with the
//! same version and different content make the ConfigMap ambiguous.
//!
//! Each set is a `VariantSet`, a view of the ConfigMap: nothing is copied or hashed per variant,
//! only the chosen set is built and hashed. Content rules run newest accepted version first,
//! stopping at the first variant that passes. The pipeline, `check` and (through the loop) API mode
//! all call `choose`; the set it returns is what is promoted and hashed, and the active variant is
//! read back from the promoted dir after a restart (`Promoter::variants`), even after it left the
//! ConfigMap.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::listing;
use crate::rules::Budget;
use crate::settings::{SchemeVersion, Settings, Variants};
use crate::snapshot::{Keys, Observed, Snapshot};
use crate::verdict::{self, Judgement, Verdict, fix};

/// What a component runs from one read of the ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The verdict on what would be promoted; when no variant is accepted, why, variant by variant.
    pub judgement: Judgement,
    /// What is promoted when the verdict allows it: the chosen variant's set; with no variant accepted,
    /// the set of the newest variant (what observe mode runs); without variants, the read itself.
    pub observed: Observed,
    /// The key of the variant in `observed`.
    pub variant: Option<String>,
}

/// One variant, judged as the set it would promote.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Judged {
    key: String,
    judgement: Judgement,
}

impl Judged {
    /// The parsed version, when one was read, under the scheme of the range in force.
    fn version(&self) -> Option<&SchemeVersion> {
        self.judgement.parsed.as_ref()
    }
}

/// Chooses what to promote from `observed` under `settings`; without the variants setting, or with no
/// variant key in the ConfigMap, the read is judged as it is.
///
/// Each variant's set is judged through a `VariantSet`, a view of the ConfigMap: no set is copied or
/// hashed but the one chosen. Content rules run newest accepted version first and stop at the first
/// variant that passes them, all within one [`Budget`]: what a ConfigMap costs to judge does not grow
/// with the number of variants times the size of the keys they share.
pub fn choose(observed: Observed, settings: &Settings) -> Choice {
    choose_as(observed, settings, fix::Source::default())
}

/// [`choose`] for a source of kind `src`: each reason's fix says what to change in it.
pub fn choose_as(observed: Observed, settings: &Settings, src: fix::Source) -> Choice {
    let (Some(v), Observed::Config(snap)) = (&settings.variants, &observed) else {
        return plain(observed, settings, src);
    };
    let keys: Vec<&String> = snap.files().keys().filter(|k| v.matches(k)).collect();
    if keys.is_empty() {
        return plain(observed, settings, src);
    }
    if snap.files().contains_key(&v.promoted) {
        let key = listing::name(&v.promoted);
        return Choice {
            judgement: invalid(format!(
                "{} {key} is both in {} and the name variants are promoted as ({v}); {}",
                src.key_word(),
                src.holder(),
                fix::promoted_name_taken(&key, src),
            )),
            observed,
            variant: None,
        };
    }
    let shared: Vec<&str> = snap
        .files()
        .keys()
        .filter(|k| !v.matches(k))
        .map(String::as_str)
        .collect();
    let set = |key: &str| VariantSet {
        snap,
        variants: v,
        variant: snap.files().get(key).map_or(&[][..], Vec::as_slice),
        shared: &shared,
    };
    let mut judged: Vec<Judged> = keys
        .iter()
        .map(|k| Judged {
            key: (*k).clone(),
            judgement: verdict::judge_range(&set(k), settings, src),
        })
        .collect();
    if let Some((a, b)) = ambiguous(snap, &judged) {
        return Choice {
            judgement: invalid(format!(
                "variants {} and {} have the same version {} and different content; give one a new version or remove it",
                listing::name(&a.key),
                listing::name(&b.key),
                a.version().map(ToString::to_string).unwrap_or_default()
            )),
            observed,
            variant: None,
        };
    }
    // Ties (same version, same content) go to the first key, so the choice never flips.
    let newest_first = |a: &Judged, b: &Judged| by_version(b, a).then_with(|| a.key.cmp(&b.key));
    let mut candidates: Vec<usize> = (0..judged.len())
        .filter(|&i| {
            judged[i].judgement.verdict == Verdict::Accepted && judged[i].version().is_some()
        })
        .collect();
    candidates.sort_by(|&a, &b| newest_first(&judged[a], &judged[b]));
    let mut budget = Budget::per_judgement();
    let mut chosen = None;
    for i in candidates {
        let j = judged[i].judgement.clone();
        judged[i].judgement = verdict::judge_rules(&set(&judged[i].key), settings, j, &mut budget);
        if judged[i].judgement.verdict == Verdict::Accepted {
            chosen = Some(&judged[i]);
            break;
        }
    }
    if let Some(chosen) = chosen {
        return Choice {
            judgement: Judgement {
                reason: format!(
                    "variant {} (of {}): {}",
                    listing::name(&chosen.key),
                    judged.len(),
                    chosen.judgement.reason
                ),
                ..chosen.judgement.clone()
            },
            observed: Observed::Config(promoted_set(snap, v, &chosen.key)),
            variant: Some(chosen.key.clone()),
        };
    }
    let verdict = none_accepted(&judged);
    let list = listing::listed(&judged, None, |out, j| {
        let version = j.judgement.version.as_deref().unwrap_or("-");
        let key = listing::name(&j.key);
        let _ = match j.judgement.verdict {
            Verdict::Invalid => write!(out, "{key} {version} invalid ({})", j.judgement.reason),
            other => write!(out, "{key} {version} {other}"),
        };
    });
    let range = settings
        .accepts_text()
        .map_or_else(|| "no accepted range configured".to_owned(), str::to_owned);
    let fix = fix::no_variant(verdict, settings.accepts_text());
    // What observe mode runs: the newest variant read, accepted or not.
    let fallback = judged
        .iter()
        .filter(|j| j.version().is_some())
        .min_by(|a, b| newest_first(a, b));
    Choice {
        judgement: Judgement {
            verdict,
            ..Judgement::invalid(format!("no variant is accepted by {range}: {list}; {fix}"))
        },
        observed: match fallback {
            Some(f) => Observed::Config(promoted_set(snap, v, &f.key)),
            None => observed,
        },
        variant: fallback.map(|f| f.key.clone()),
    }
}

/// A variant's promoted set seen through its ConfigMap: the variant under the promoted name and every
/// key that is not a variant, read in place.
struct VariantSet<'a> {
    snap: &'a Snapshot,
    variants: &'a Variants,
    /// The variant's bytes.
    variant: &'a [u8],
    /// The keys that are not variants, in byte order: the same for every variant's set.
    shared: &'a [&'a str],
}

impl Keys for VariantSet<'_> {
    fn get(&self, key: &str) -> Option<&[u8]> {
        if key == self.variants.promoted {
            Some(self.variant)
        } else if self.variants.matches(key) {
            None
        } else {
            Keys::get(self.snap, key)
        }
    }

    fn each(&self) -> Box<dyn Iterator<Item = (&str, &[u8])> + '_> {
        let (snap, promoted) = (self.snap, self.variants.promoted.as_str());
        let at = self.shared.partition_point(|k| *k < promoted);
        let (before, after) = self.shared.split_at(at);
        Box::new(
            before
                .iter()
                .map(move |k| (*k, Keys::get(snap, k).unwrap_or_default()))
                .chain(std::iter::once((promoted, self.variant)))
                .chain(
                    after
                        .iter()
                        .map(move |k| (*k, Keys::get(snap, k).unwrap_or_default())),
                ),
        )
    }

    fn count(&self) -> usize {
        self.shared.len() + 1
    }
}

/// The read judged as it is, and kept as what is promoted (not copied: it may be 1 MiB).
fn plain(observed: Observed, settings: &Settings, src: fix::Source) -> Choice {
    Choice {
        judgement: verdict::judge_as(&observed, settings, src),
        observed,
        variant: None,
    }
}

fn invalid(reason: String) -> Judgement {
    Judgement::invalid(reason)
}

fn by_version(a: &Judged, b: &Judged) -> Ordering {
    match (a.version(), b.version()) {
        (Some(x), Some(y)) => x.cmp_precedence(y),
        (x, y) => x.is_some().cmp(&y.is_some()),
    }
}

/// The first two variants with the same version and different content: in key order, the first
/// variant that another of its version differs from, and the first such other. Variants are grouped
/// by version, so each is compared with its group's first only.
fn ambiguous<'a>(snap: &Snapshot, judged: &'a [Judged]) -> Option<(&'a Judged, &'a Judged)> {
    let differ = |a: &Judged, b: &Judged| {
        snap.files().get(&a.key) != snap.files().get(&b.key)
            || snap.mode(&a.key) != snap.mode(&b.key)
    };
    let mut by: Vec<usize> = (0..judged.len())
        .filter(|&i| judged[i].version().is_some())
        .collect();
    by.sort_by(|&a, &b| by_version(&judged[a], &judged[b]).then(a.cmp(&b)));
    by.chunk_by(|&a, &b| by_version(&judged[a], &judged[b]) == Ordering::Equal)
        .filter_map(|group| {
            let first = group[0];
            let other = group[1..]
                .iter()
                .find(|&&o| differ(&judged[first], &judged[o]))?;
            Some((first, *other))
        })
        .min()
        .map(|(a, b)| (&judged[a], &judged[b]))
}

/// The verdict a user can act on when no variant is accepted: an invalid variant is likely the one
/// meant for this range; else all newer is too-new, all older too-old, anything else out-of-range.
fn none_accepted(judged: &[Judged]) -> Verdict {
    let all = |v: Verdict| judged.iter().all(|j| j.judgement.verdict == v);
    if judged
        .iter()
        .any(|j| j.judgement.verdict == Verdict::Invalid)
    {
        Verdict::Invalid
    } else if all(Verdict::TooNew) {
        Verdict::TooNew
    } else if all(Verdict::TooOld) {
        Verdict::TooOld
    } else {
        Verdict::OutOfRange
    }
}

/// The set a variant promotes: the variant under the promoted name, every key that is not a variant.
pub(crate) fn promoted_set(snap: &Snapshot, v: &Variants, key: &str) -> Snapshot {
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
    for (k, bytes) in snap.files() {
        let name = if k == key {
            v.promoted.clone()
        } else if v.matches(k) {
            continue;
        } else {
            k.clone()
        };
        modes.insert(name.clone(), snap.mode(k));
        files.insert(name, bytes.clone());
    }
    Snapshot::with_modes(files, modes)
}

#[cfg(test)]
mod tests;
