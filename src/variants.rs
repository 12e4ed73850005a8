//! Variants: several versions of one config file side by side in one ConfigMap, and the choice of the
//! one a component runs. Pure: no I/O, no clock.
//!
//! With `config.v*.yaml -> config.yaml`, each key matching the pattern is a variant. Every variant is
//! judged as the set it would promote (the variant under `config.yaml` plus every key that is not a
//! variant), with the usual `version-from` and `require`; the highest accepted version wins. Two variants
//! with the same version (by semver precedence) and different content make the ConfigMap ambiguous.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use semver::Version;

use crate::settings::{Settings, Variants};
use crate::snapshot::{Observed, Snapshot};
use crate::verdict::{self, Judgement, Verdict};

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
pub fn choose(observed: &Observed, settings: &Settings) -> Choice {
    let (Some(v), Observed::Config(snap)) = (&settings.variants, observed) else {
        return plain(observed, settings);
    };
    let keys: Vec<&String> = snap.files().keys().filter(|k| v.matches(k)).collect();
    if keys.is_empty() {
        return plain(observed, settings);
    }
    if snap.files().contains_key(&v.promoted) {
        return Choice {
            judgement: invalid(format!(
                "key {} is both in the ConfigMap and the name variants are promoted as ({v})",
                v.promoted
            )),
            observed: observed.clone(),
            variant: None,
        };
    }
    let judged: Vec<Judged> = keys
        .iter()
        .map(|k| {
            let set = promoted_set(snap, v, k);
            let judgement = verdict::judge_snapshot(&set, settings);
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
                a.key,
                b.key,
                a.version
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            )),
            observed: observed.clone(),
            variant: None,
        };
    }
    let newest = |accepted_only: bool| {
        judged
            .iter()
            .filter(|j| !accepted_only || j.judgement.verdict == Verdict::Accepted)
            .filter(|j| j.version.is_some())
            // Ties (same version, same content) go to the first key, so the choice never flips.
            .max_by(|a, b| by_version(a, b).then_with(|| b.key.cmp(&a.key)))
    };
    if let Some(chosen) = newest(true) {
        return Choice {
            judgement: Judgement {
                reason: format!(
                    "variant {} (of {}): {}",
                    chosen.key,
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
    let list: Vec<String> = judged
        .iter()
        .map(|j| {
            let version = j.judgement.version.as_deref().unwrap_or("-");
            match j.judgement.verdict {
                Verdict::Invalid => format!("{} {version} invalid ({})", j.key, j.judgement.reason),
                other => format!("{} {version} {other}", j.key),
            }
        })
        .collect();
    let range = settings
        .accepts_text()
        .map_or_else(|| "no accepted range configured".to_owned(), str::to_owned);
    let fallback = newest(false);
    Choice {
        judgement: Judgement {
            verdict,
            version: None,
            reason: format!("no variant is accepted by {range}: {}", list.join(", ")),
        },
        observed: match fallback {
            Some(f) => Observed::Config(promoted_set(snap, v, &f.key)),
            None => observed.clone(),
        },
        variant: fallback.map(|f| f.key.clone()),
    }
}

fn plain(observed: &Observed, settings: &Settings) -> Choice {
    Choice {
        judgement: verdict::judge(observed, settings),
        observed: observed.clone(),
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

/// The first two variants with the same version and different content.
fn ambiguous<'a>(snap: &Snapshot, judged: &'a [Judged]) -> Option<(&'a Judged, &'a Judged)> {
    for (i, a) in judged.iter().enumerate() {
        for b in &judged[i + 1..] {
            if a.version.is_some()
                && by_version(a, b) == Ordering::Equal
                && (snap.files().get(&a.key) != snap.files().get(&b.key)
                    || snap.mode(&a.key) != snap.mode(&b.key))
            {
                return Some((a, b));
            }
        }
    }
    None
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

    fn settings(accepts: &str) -> Settings {
        Settings::from_raw(&Raw {
            accepts: Some(accepts.into()),
            version_from: Some("yaml:config.yaml#/version".into()),
            variants: Some("config.v*.yaml -> config.yaml".into()),
            ..Raw::default()
        })
        .unwrap()
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
            let c = choose(&both(), &settings(range));
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
        let c = choose(&both(), &settings("^4"));
        assert_eq!(c.judgement.verdict, Verdict::TooOld);
        assert_eq!(
            c.judgement.reason,
            "no variant is accepted by ^4: config.v2.yaml 2.1.0 too-old, config.v3.yaml 3.0.0 too-old"
        );
        assert_eq!(
            choose(&both(), &settings("^1")).judgement.verdict,
            Verdict::TooNew
        );
        assert_eq!(
            choose(&both(), &settings(">=2.5, <3")).judgement.verdict,
            Verdict::OutOfRange
        );
        let broken = cm(&[
            ("config.v2.yaml", "version: 2.1.0\n"),
            ("config.v3.yaml", "version: [\n"),
        ]);
        let c = choose(&broken, &settings("^3"));
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

    #[test]
    fn same_version_different_content_is_ambiguous() {
        let c = choose(
            &cm(&[
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
            &cm(&[("config.v3.yaml", same), ("config.vx.yaml", same)]),
            &settings("^3"),
        );
        assert_eq!(c.variant.as_deref(), Some("config.v3.yaml"));
    }

    #[test]
    fn promoted_name_beside_variants_is_invalid_and_no_variants_is_plain() {
        let c = choose(
            &cm(&[
                ("config.v2.yaml", "version: 2.0.0\n"),
                ("config.yaml", "version: 2.0.0\n"),
            ]),
            &settings("^2"),
        );
        assert_eq!(c.judgement.verdict, Verdict::Invalid);
        assert!(c.judgement.reason.starts_with("key config.yaml is both"));
        let plain = cm(&[("config.yaml", "version: 2.0.0\n")]);
        let c = choose(&plain, &settings("^2"));
        assert_eq!(
            (c.judgement.verdict, c.variant, c.observed),
            (Verdict::Accepted, None, plain)
        );
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
            let c = choose(&obs, &s);
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
