//! Variants: several versions of one config file side by side in one ConfigMap, and the choice of the
//! one a component runs. Pure: no I/O, no clock.
//!
//! With `config.v*.yaml -> config.yaml`, each key matching the pattern is a variant. Every variant is
//! judged as the set it would promote (the variant under `config.yaml` plus every key that is not a
//! variant), with the usual `version-from` and `require`; the highest accepted version wins. Two variants
//! with the same version (by semver precedence) and different content make the ConfigMap ambiguous.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use semver::Version;

use crate::listing;
use crate::rules::Budget;
use crate::settings::{Settings, Variants};
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
    /// The parsed version, when one was read.
    version: Option<Version>,
}

/// Chooses what to promote from `observed` under `settings`; without the variants setting, or with no
/// variant key in the ConfigMap, the read is judged as it is.
///
/// Each variant's set is judged through a `VariantSet`, a view of the ConfigMap: no set is copied or
/// hashed but the one chosen. Content rules run newest accepted version first and stop at the first
/// variant that passes them, all within one [`Budget`]: what a ConfigMap costs to judge does not grow
/// with the number of variants times the size of the keys they share.
pub fn choose(observed: Observed, settings: &Settings) -> Choice {
    let (Some(v), Observed::Config(snap)) = (&settings.variants, &observed) else {
        return plain(observed, settings);
    };
    let keys: Vec<&String> = snap.files().keys().filter(|k| v.matches(k)).collect();
    if keys.is_empty() {
        return plain(observed, settings);
    }
    if snap.files().contains_key(&v.promoted) {
        let key = listing::name(&v.promoted);
        return Choice {
            judgement: invalid(format!(
                "key {key} is both in the ConfigMap and the name variants are promoted as ({v}); {}",
                fix::promoted_name_taken(&key),
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
        .map(|k| {
            let judgement = verdict::judge_range(&set(k), settings);
            let version = judgement
                .version
                .as_deref()
                .and_then(|r| verdict::parse_lenient(r).ok());
            Judged {
                key: (*k).clone(),
                judgement,
                version,
            }
        })
        .collect();
    if let Some((a, b)) = ambiguous(snap, &judged) {
        return Choice {
            judgement: invalid(format!(
                "variants {} and {} have the same version {} and different content; give one a new version or remove it",
                listing::name(&a.key),
                listing::name(&b.key),
                a.version
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            )),
            observed,
            variant: None,
        };
    }
    // Ties (same version, same content) go to the first key, so the choice never flips.
    let newest_first = |a: &Judged, b: &Judged| by_version(b, a).then_with(|| a.key.cmp(&b.key));
    let mut candidates: Vec<usize> = (0..judged.len())
        .filter(|&i| {
            judged[i].judgement.verdict == Verdict::Accepted && judged[i].version.is_some()
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
        .filter(|j| j.version.is_some())
        .min_by(|a, b| newest_first(a, b));
    Choice {
        judgement: Judgement {
            verdict,
            version: None,
            reason: format!("no variant is accepted by {range}: {list}; {fix}"),
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
fn plain(observed: Observed, settings: &Settings) -> Choice {
    Choice {
        judgement: verdict::judge(&observed, settings),
        observed,
        variant: None,
    }
}

fn invalid(reason: String) -> Judgement {
    Judgement {
        verdict: Verdict::Invalid,
        version: None,
        reason,
    }
}

fn by_version(a: &Judged, b: &Judged) -> Ordering {
    match (&a.version, &b.version) {
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
        .filter(|&i| judged[i].version.is_some())
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
pub fn promoted_set(snap: &Snapshot, v: &Variants, key: &str) -> Snapshot {
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
mod tests {
    use super::*;
    use crate::settings::Raw;
    use proptest::prelude::*;

    fn raw(accepts: &str) -> Raw {
        Raw {
            accepts: Some(accepts.into()),
            version_from: Some("yaml:config.yaml#/version".into()),
            variants: Some("config.v*.yaml -> config.yaml".into()),
            ..Raw::default()
        }
    }

    fn settings(accepts: &str) -> Settings {
        Settings::from_raw(&raw(accepts)).unwrap()
    }

    fn cm(files: &[(&str, &str)]) -> Observed {
        Observed::Config(Snapshot::new(
            files
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        ))
    }

    fn both() -> Observed {
        cm(&[
            ("config.v2.yaml", "version: 2.1.0\nold: 1\n"),
            ("config.v3.yaml", "version: 3.0.0\nnew: 1\n"),
            ("shared.txt", "s"),
        ])
    }

    #[test]
    fn each_range_gets_its_variant_with_the_other_keys() {
        for (range, key, version) in [
            ("^2", "config.v2.yaml", "2.1.0"),
            ("^3", "config.v3.yaml", "3.0.0"),
            (">=2", "config.v3.yaml", "3.0.0"),
        ] {
            let c = choose(both(), &settings(range));
            assert_eq!(
                c.judgement.verdict,
                Verdict::Accepted,
                "{}",
                c.judgement.reason
            );
            assert_eq!(c.variant.as_deref(), Some(key));
            assert_eq!(c.judgement.version.as_deref(), Some(version));
            let Observed::Config(s) = &c.observed else {
                panic!()
            };
            assert_eq!(
                s.files().keys().collect::<Vec<_>>(),
                ["config.yaml", "shared.txt"]
            );
            let Observed::Config(raw) = both() else {
                panic!()
            };
            assert_eq!(s.files()["config.yaml"], raw.files()[key]);
            assert_eq!(
                s.hash(),
                promoted_set(&raw, settings(range).variants.as_ref().unwrap(), key).hash()
            );
        }
    }

    #[test]
    fn no_variant_accepted_gives_the_verdict_to_act_on() {
        let c = choose(both(), &settings("^4"));
        assert_eq!(c.judgement.verdict, Verdict::TooOld);
        assert_eq!(
            c.judgement.reason,
            "no variant is accepted by ^4: config.v2.yaml 2.1.0 too-old, config.v3.yaml 3.0.0 too-old; \
             add a variant with a version in ^4, or lower confgate.io/accepts if the component still reads \
             an older one"
        );
        assert_eq!(
            choose(both(), &settings("^1")).judgement.verdict,
            Verdict::TooNew
        );
        assert_eq!(
            choose(both(), &settings(">=2.5, <3")).judgement.verdict,
            Verdict::OutOfRange
        );
        let broken = cm(&[
            ("config.v2.yaml", "version: 2.1.0\n"),
            ("config.v3.yaml", "version: [\n"),
        ]);
        let c = choose(broken, &settings("^3"));
        assert_eq!(c.judgement.verdict, Verdict::Invalid);
        assert!(
            c.judgement
                .reason
                .contains("config.v3.yaml - invalid (key config.yaml is not valid YAML"),
            "{}",
            c.judgement.reason
        );
        // Observe mode would run the newest variant read.
        assert_eq!(c.variant.as_deref(), Some("config.v2.yaml"));
    }

    /// The overall reason ends with the fix for its verdict, as a single reason does.
    #[test]
    fn every_reason_without_a_chosen_variant_ends_with_its_fix() {
        let broken = cm(&[
            ("config.v2.yaml", "version: 2.1.0\n"),
            ("config.v3.yaml", "version: [\n"),
        ]);
        let taken = cm(&[("config.v2.yaml", "version: 2.1.0\n"), ("config.yaml", "x")]);
        let mut no_range = raw("^2");
        no_range.accepts = None;
        let no_range = Settings::from_raw(&no_range).unwrap();
        for (observed, settings, fix) in [
            (
                both(),
                settings("^1"),
                "; add a variant with a version in ^1, or raise confgate.io/accepts once the component \
                 reads a newer one",
            ),
            (
                both(),
                settings("^4"),
                "; add a variant with a version in ^4, or lower confgate.io/accepts if the component still \
                 reads an older one",
            ),
            (
                both(),
                settings(">=2.5, <3"),
                "; add a variant with a version in >=2.5, <3, or change confgate.io/accepts",
            ),
            (
                broken,
                settings("^3"),
                "; correct the invalid variant as its reason says, or add a variant with a version in ^3",
            ),
            (
                both(),
                no_range,
                "; set confgate.io/accepts to the range the component reads",
            ),
            (
                taken,
                settings("^2"),
                "; remove key config.yaml from the ConfigMap (each variant is promoted under that name), \
                 or change confgate.io/variants",
            ),
        ] {
            let c = choose(observed, &settings);
            assert!(c.judgement.reason.ends_with(fix), "{}", c.judgement.reason);
        }
    }

    #[test]
    fn same_version_different_content_is_ambiguous() {
        let c = choose(
            cm(&[
                ("config.v3.yaml", "version: 3.0.0\na: 1\n"),
                ("config.v3b.yaml", "version: 3.0.0+b\nb: 1\n"),
            ]),
            &settings("^3"),
        );
        assert_eq!(c.judgement.verdict, Verdict::Invalid);
        assert!(
            c.judgement.reason.starts_with(
                "variants config.v3.yaml and config.v3b.yaml have the same version 3.0.0"
            ),
            "{}",
            c.judgement.reason
        );
        let same = "version: 3.0.0\n";
        let c = choose(
            cm(&[("config.v3.yaml", same), ("config.vx.yaml", same)]),
            &settings("^3"),
        );
        assert_eq!(c.variant.as_deref(), Some("config.v3.yaml"));
    }

    #[test]
    fn promoted_name_beside_variants_is_invalid_and_no_variants_is_plain() {
        let c = choose(
            cm(&[
                ("config.v2.yaml", "version: 2.0.0\n"),
                ("config.yaml", "version: 2.0.0\n"),
            ]),
            &settings("^2"),
        );
        assert_eq!(c.judgement.verdict, Verdict::Invalid);
        assert!(c.judgement.reason.starts_with("key config.yaml is both"));
        let plain = cm(&[("config.yaml", "version: 2.0.0\n")]);
        let c = choose(plain.clone(), &settings("^2"));
        assert_eq!(
            (c.judgement.verdict, c.variant, c.observed),
            (Verdict::Accepted, None, plain)
        );
    }

    #[test]
    fn a_thousand_invalid_variants_give_a_short_reason() {
        let files: Vec<(String, String)> = (0..1000)
            .map(|i| {
                (
                    format!("config.v{i:04}.yaml"),
                    format!("version: 1.{i}.0\n"),
                )
            })
            .chain((0..1000).map(|i| (format!("other-{i:04}"), "o".to_owned())))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let s = Settings::from_raw(&Raw {
            require: Some("must-exist".into()),
            ..raw("^1")
        })
        .unwrap();
        let c = choose(cm(&refs), &s);
        assert_eq!(c.judgement.verdict, Verdict::Invalid);
        let r = &c.judgement.reason;
        assert!(
            r.starts_with("no variant is accepted by ^1: config.v0000.yaml - invalid (required key must-exist is absent (present: config.yaml, other-0000, other-0001, other-0002, other-0003 and 996 more); add it to the ConfigMap, or drop it from confgate.io/require), config.v0001.yaml"),
            "{r}"
        );
        assert!(
            r.ends_with(
                " and 995 more; correct the invalid variant as its reason says, or add a variant with a \
                 version in ^1"
            ),
            "{r}"
        );
        assert!(r.len() < 2048, "{} bytes", r.len());
    }

    /// Content rules run newest accepted variant first, and all variants of one ConfigMap share one
    /// budget: a rule that fails on each of many variants beside a large shared key stops being run
    /// once the budget is spent, and says so.
    #[cfg(feature = "policy")]
    #[test]
    fn variants_share_one_budget_for_content_rules() {
        let shared = "s".repeat(400_000);
        let files: Vec<(String, String)> = (0..200)
            .map(|i| {
                (
                    format!("config.v{i:03}.yaml"),
                    format!("version: 1.{i}.0\n"),
                )
            })
            .chain([("shared".to_owned(), shared)])
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let s = Settings::from_raw(&Raw {
            rules: Some("data.shared.startsWith('x')".into()),
            ..raw("^1")
        })
        .unwrap();
        let t = std::time::Instant::now();
        let c = choose(cm(&refs), &s);
        assert_eq!(c.judgement.verdict, Verdict::Invalid);
        let r = &c.judgement.reason;
        assert!(r.contains("config.v000.yaml 1.0.0 invalid (version 1.0.0 is in ^1, but rule 1 (`data.shared.startsWith('x')`) was not evaluated: it would take this ConfigMap's content rules over their budget"), "{r}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
        // The newest variant was judged on its content.
        let newest = judge_one(&refs, &s, "config.v199.yaml");
        assert!(newest.reason.ends_with("is false"), "{}", newest.reason);
    }

    /// The judgement of one variant's set alone.
    #[cfg(feature = "policy")]
    fn judge_one(files: &[(&str, &str)], s: &Settings, key: &str) -> Judgement {
        let Observed::Config(snap) = cm(files) else {
            panic!()
        };
        verdict::judge_snapshot(&promoted_set(&snap, s.variants.as_ref().unwrap(), key), s)
    }

    proptest! {
        /// The promoted set holds exactly one variant, under the promoted name, and it is the highest
        /// accepted one; with none accepted, nothing is accepted.
        #[test]
        fn promotes_exactly_the_highest_accepted_variant(
            versions in prop::collection::btree_map("[a-d]", (0u64..5, 0u64..3), 1..5),
            major in 0u64..5,
        ) {
            let files: Vec<(String, String)> = versions
                .iter()
                .map(|(label, (a, b))| (format!("config.v{label}.yaml"), format!("version: {a}.{b}.0\nlabel: {label}\n")))
                .chain([("other".to_owned(), "o".to_owned())])
                .collect();
            let obs = Observed::Config(Snapshot::new(
                files.iter().map(|(k, v)| (k.clone(), v.as_bytes().to_vec())).collect(),
            ));
            let s = settings(&format!("^{major}"));
            let c = choose(obs, &s);
            let req = &s.accepts.as_ref().unwrap().req;
            let best = versions
                .iter()
                .filter(|(_, (a, b))| req.matches(&Version::new(*a, *b, 0)))
                .map(|(l, (a, b))| (a, b, l))
                .max();
            let mut all: Vec<_> = versions.values().collect();
            all.sort();
            if all.windows(2).any(|w| w[0] == w[1]) {
                // Same version, different content (the label differs): ambiguous for every range.
                prop_assert_eq!(c.judgement.verdict, Verdict::Invalid);
                return Ok(());
            }
            match best {
                Some((_, _, label)) => {
                    prop_assert_eq!(c.judgement.verdict, Verdict::Accepted);
                    let Observed::Config(p) = &c.observed else { panic!() };
                    prop_assert_eq!(p.files().keys().filter(|k| s.variants.as_ref().unwrap().matches(k)).count(), 0);
                    prop_assert_eq!(p.files().len(), 2);
                    let want = format!("label: {label}\n");
                    prop_assert!(String::from_utf8_lossy(&p.files()["config.yaml"]).ends_with(&want));
                }
                None => prop_assert_ne!(c.judgement.verdict, Verdict::Accepted),
            }
        }
    }
}
