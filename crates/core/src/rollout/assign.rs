//! [`choose`]: the set a pod promotes from a ConfigMap mid-rollout, judged by the existing machinery.

use std::collections::BTreeMap;

use super::status::{HeldCandidate, Rollout, Track};
use crate::settings::{Mode, Settings};
use crate::snapshot::{ContentHash, Observed, Snapshot};
use crate::variants::{self, Choice};
use crate::verdict::{Judgement, Verdict};

use super::plan::{KEY, Plan, SUFFIX};
use crate::values::{Bucket, Source};

/// A ConfigMap's two tracks: the stable set (no `.next` key, no `confgate.rollout`) and the
/// candidate's keys (`K` for each `K.next`), with their bytes and modes.
#[derive(Debug, Clone)]
pub struct Split {
    pub stable: Snapshot,
    next: BTreeMap<String, (Vec<u8>, u32)>,
}

impl Split {
    /// The hash of the candidate's own keys, each `K.next` under the name `K`: the candidate as the
    /// component refuses it, whatever stable keys change around it.
    pub fn candidate_own(&self) -> ContentHash {
        ContentHash::of(
            self.next
                .iter()
                .map(|(k, (b, _))| (k.as_str(), b.as_slice())),
        )
    }

    /// The candidate's set: the stable set with each `K.next` under the name `K`.
    pub fn candidate(&self) -> Snapshot {
        let mut files = self.stable.files().clone();
        let mut modes = self.stable.modes().clone();
        for (k, (bytes, mode)) in &self.next {
            files.insert(k.clone(), bytes.clone());
            modes.insert(k.clone(), *mode);
        }
        Snapshot::with_modes(files, modes)
    }
}

/// Takes a ConfigMap apart into its two tracks (the snapshot is moved, not copied).
pub fn split(snap: Snapshot) -> Split {
    let modes = snap.modes().clone();
    let mode = |k: &str| snap.mode(k);
    let next_modes: BTreeMap<String, u32> = snap
        .files()
        .keys()
        .filter_map(|k| Some((k.strip_suffix(SUFFIX)?.to_owned(), mode(k))))
        .collect();
    let mut stable = BTreeMap::new();
    let mut next = BTreeMap::new();
    for (k, bytes) in snap.into_files() {
        if k == KEY {
            continue;
        }
        match k.strip_suffix(SUFFIX) {
            Some(base) => {
                let m = next_modes[base];
                next.insert(base.to_owned(), (bytes, m));
            }
            None => {
                stable.insert(k, bytes);
            }
        }
    }
    Split {
        stable: Snapshot::with_modes(stable, modes),
        next,
    }
}

/// What this pod promotes from `observed` under `settings`, and the rollout as this pod sees it
/// (`None` for a ConfigMap with no rollout key and no `.next` key, which is judged as it always was).
///
/// `bucket` is this pod's place in the fleet (`None`: no identity known, so stable); `refused` the
/// contents the component refused. A pod on the candidate promotes the candidate's set when it is
/// accepted (or in observe mode) and not refused; otherwise the candidate is held on this pod and the
/// stable set is judged and promoted, as on every other pod. A rollout key that cannot be read makes
/// the ConfigMap invalid (the stable set is what would be promoted in observe mode: `.next` keys
/// never reach the promoted dir).
pub fn choose(
    observed: Observed,
    settings: &Settings,
    bucket: Option<Bucket>,
    refused: &[(ContentHash, String)],
) -> (Choice, Option<Rollout>) {
    choose_as(observed, settings, bucket, refused, Source::default())
}

/// [`choose`] for a source of kind `src`: each reason's fix says what to change in it.
pub fn choose_as(
    observed: Observed,
    settings: &Settings,
    bucket: Option<Bucket>,
    refused: &[(ContentHash, String)],
    src: Source,
) -> (Choice, Option<Rollout>) {
    let plan = match &observed {
        Observed::Config(snap) => Plan::read(snap, settings.variants.as_ref()),
        _ => Ok(None),
    };
    let plan = match plan {
        Ok(Some(p)) => p,
        Ok(None) => return (variants::choose_as(observed, settings, src), None),
        Err(why) => {
            let Observed::Config(snap) = observed else {
                unreachable!("only a config has a plan")
            };
            let stable = split(snap).stable;
            let choice = Choice {
                judgement: Judgement::invalid(why),
                observed: Observed::Config(stable),
                variant: None,
            };
            return (choice, None);
        }
    };
    let Observed::Config(snap) = observed else {
        unreachable!("only a config has a plan")
    };
    let parts = split(snap);
    let assigned = match (plan.percent, bucket) {
        (Some(p), Some(b)) if !plan.keys.is_empty() && b.on_candidate(p) => Track::Candidate,
        _ => Track::Stable,
    };
    let mut rollout = Rollout {
        percent: plan.percent,
        bucket,
        assigned,
        keys: plan.keys,
        held: None,
        candidate_own: None,
    };
    if assigned == Track::Candidate {
        let own = parts.candidate_own();
        rollout.candidate_own = Some(own);
        let c = variants::choose_as(Observed::Config(parts.candidate()), settings, src);
        // Refused as a whole set, or for its own keys beside other stable ones.
        let set = c.observed.hash();
        let rejected = refused
            .iter()
            .rev()
            .find(|(h, _)| *h == own || Some(*h) == set)
            .map(|(_, why)| why.clone());
        let passes = c.judgement.verdict == Verdict::Accepted || settings.mode == Mode::Observe;
        if passes && rejected.is_none() {
            return (c, Some(rollout));
        }
        rollout.held = Some(HeldCandidate {
            hash: c.observed.hash(),
            version: c.judgement.version,
            verdict: if rejected.is_some() {
                Verdict::RejectedByComponent
            } else {
                c.judgement.verdict
            },
            reason: match rejected {
                Some(why) => format!("the component rejected it: {why}"),
                None => c.judgement.reason,
            },
        });
    }
    (
        variants::choose_as(Observed::Config(parts.stable), settings, src),
        Some(rollout),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Raw;
    use crate::values::Percent;
    use proptest::prelude::*;

    fn settings(accepts: &str) -> Settings {
        Settings::from_raw(&Raw {
            accepts: Some(accepts.into()),
            version_from: Some("yaml:config.yaml#/version".into()),
            ..Raw::default()
        })
        .unwrap()
    }

    fn cm(keys: &[(&str, &str)]) -> Observed {
        Observed::Config(Snapshot::new(
            keys.iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        ))
    }

    fn mid(percent: &str, next: &str) -> Observed {
        cm(&[
            ("config.yaml", "version: 2.4.1\n"),
            ("config.yaml.next", next),
            ("rules.txt", "old rules"),
            ("rules.txt.next", "new rules"),
            ("other", "o"),
            (KEY, percent),
        ])
    }

    /// A bucket on the candidate at any share above 0, and one on it only at 100%.
    fn low() -> Option<Bucket> {
        Bucket::from_hundredths(0)
    }
    fn high() -> Option<Bucket> {
        Bucket::from_hundredths(9_999)
    }

    fn keys(c: &Choice) -> Vec<String> {
        let Observed::Config(s) = &c.observed else {
            panic!("{c:?}")
        };
        s.files().keys().cloned().collect()
    }

    fn get(c: &Choice, k: &str) -> String {
        let Observed::Config(s) = &c.observed else {
            panic!()
        };
        String::from_utf8(s.files()[k].clone()).unwrap()
    }

    #[test]
    fn the_candidate_moves_every_next_key_together_and_nothing_reserved_is_promoted() {
        let s = settings("^2");
        let (c, v) = choose(mid("25%", "version: 2.5.0\n"), &s, low(), &[]);
        let v = v.unwrap().view();
        assert_eq!((v.assigned, v.track), (Track::Candidate, Track::Candidate));
        assert_eq!(c.judgement.verdict, Verdict::Accepted);
        assert_eq!(c.judgement.version.as_deref(), Some("2.5.0"));
        assert_eq!(keys(&c), ["config.yaml", "other", "rules.txt"]);
        assert_eq!(get(&c, "rules.txt"), "new rules");
        assert_eq!(v.percent.map(|p| p.to_string()).as_deref(), Some("25%"));
        assert_eq!(v.keys, "config.yaml, rules.txt");
        assert_eq!(v.reason, "bucket 0% is below 25%: on the candidate");

        let (c, v) = choose(mid("25%", "version: 2.5.0\n"), &s, high(), &[]);
        let v = v.unwrap().view();
        assert_eq!((v.assigned, v.track), (Track::Stable, Track::Stable));
        assert_eq!(c.judgement.version.as_deref(), Some("2.4.1"));
        assert_eq!(keys(&c), ["config.yaml", "other", "rules.txt"]);
        assert_eq!(get(&c, "rules.txt"), "old rules");
        assert_eq!(v.reason, "bucket 99.99% is not below 25%: on stable");
    }

    #[test]
    fn nought_and_all_and_aborted() {
        let s = settings("^2");
        for (pct, bucket, want) in [
            ("0%", low(), "2.4.1"),
            ("100%", high(), "2.5.0"),
            ("100%", None, "2.4.1"),
        ] {
            let (c, _) = choose(mid(pct, "version: 2.5.0\n"), &s, bucket, &[]);
            assert_eq!(
                c.judgement.version.as_deref(),
                Some(want),
                "{pct} {bucket:?}"
            );
        }
        // Aborted by removing the rollout key: the .next keys stay, nobody runs them.
        let aborted = cm(&[
            ("config.yaml", "version: 2.4.1\n"),
            ("config.yaml.next", "version: 2.5.0\n"),
        ]);
        let (c, v) = choose(aborted, &s, low(), &[]);
        assert_eq!(keys(&c), ["config.yaml"]);
        assert_eq!(c.judgement.version.as_deref(), Some("2.4.1"));
        assert_eq!(
            v.unwrap().view().reason,
            "no confgate.rollout key: every pod on stable"
        );
        // No rollout at all: the read is judged (and promoted) as it is, not copied.
        let plain = cm(&[("config.yaml", "version: 2.4.1\n")]);
        let (c, v) = choose(plain.clone(), &s, low(), &[]);
        assert_eq!((c.observed, v), (plain, None));
    }

    #[test]
    fn a_candidate_outside_the_range_or_refused_is_held_on_that_pod() {
        let s = settings("^2");
        let (c, v) = choose(mid("50%", "version: 3.0.0\n"), &s, low(), &[]);
        let v = v.unwrap().view();
        assert_eq!((v.assigned, v.track), (Track::Candidate, Track::Stable));
        assert_eq!(c.judgement.verdict, Verdict::Accepted);
        assert_eq!(c.judgement.version.as_deref(), Some("2.4.1"));
        let held = v.held.unwrap();
        assert_eq!(
            (held.verdict, held.version.as_deref()),
            (Verdict::TooNew, Some("3.0.0"))
        );
        assert_eq!(
            v.reason,
            "bucket 0% is below 50%, but the candidate 3.0.0 is too-new: held, on stable"
        );

        let Observed::Config(snap) = mid("50%", "version: 2.5.0\n") else {
            panic!()
        };
        let refused = split(snap).candidate().hash();
        let said = "HTTP 500: rule file broken.yml: bad expression".to_owned();
        let (c, v) = choose(
            mid("50%", "version: 2.5.0\n"),
            &s,
            low(),
            &[(refused, said)],
        );
        let v = v.unwrap().view();
        assert_eq!(v.track, Track::Stable);
        assert_eq!(c.judgement.version.as_deref(), Some("2.4.1"));
        let held = v.held.unwrap();
        assert_eq!(held.verdict, Verdict::RejectedByComponent);
        // What the component said stays in the reason.
        assert_eq!(
            held.reason,
            "the component rejected it: HTTP 500: rule file broken.yml: bad expression"
        );

        // Observe mode holds nothing back.
        let observe = Settings::from_raw(&Raw {
            mode: Some("observe".into()),
            ..Raw {
                accepts: Some("^2".into()),
                version_from: Some("yaml:config.yaml#/version".into()),
                ..Raw::default()
            }
        })
        .unwrap();
        let (c, v) = choose(mid("50%", "version: 3.0.0\n"), &observe, low(), &[]);
        assert_eq!(
            (c.judgement.verdict, v.unwrap().track()),
            (Verdict::TooNew, Track::Candidate)
        );
    }

    #[test]
    fn a_bad_rollout_key_is_invalid_and_promotes_no_reserved_key() {
        let (c, v) = choose(mid("lots", "version: 2.5.0\n"), &settings("^2"), low(), &[]);
        assert_eq!((c.judgement.verdict, v), (Verdict::Invalid, None));
        assert!(
            c.judgement
                .reason
                .starts_with("key confgate.rollout is not a percentage")
        );
        assert_eq!(keys(&c), ["config.yaml", "other", "rules.txt"]);
    }

    #[test]
    fn composes_with_variants_the_candidate_of_a_variant() {
        let s = Settings::from_raw(&Raw {
            accepts: Some("^3".into()),
            version_from: Some("yaml:config.yaml#/version".into()),
            variants: Some("config.v*.yaml -> config.yaml".into()),
            ..Raw::default()
        })
        .unwrap();
        let obs = cm(&[
            ("config.v2.yaml", "version: 2.9.0\n"),
            ("config.v3.yaml", "version: 3.0.0\n"),
            ("config.v3.yaml.next", "version: 3.1.0\n"),
            (KEY, "10%"),
        ]);
        let (c, _) = choose(obs.clone(), &s, low(), &[]);
        assert_eq!(c.judgement.version.as_deref(), Some("3.1.0"));
        assert_eq!(c.variant.as_deref(), Some("config.v3.yaml"));
        assert_eq!(keys(&c), ["config.yaml"]);
        let (c, _) = choose(obs, &s, high(), &[]);
        assert_eq!(c.judgement.version.as_deref(), Some("3.0.0"));
    }

    proptest! {
        /// Whatever the keys, the percentage and the bucket: no `.next` key and no rollout key is in
        /// what is promoted, and the track follows the bucket unless the candidate is held.
        #[test]
        fn no_reserved_key_is_ever_promoted(
            names in prop::collection::btree_set("[a-c]{1,2}(\\.next)?", 0..6),
            pct in prop::option::of(0u32..=10_000),
            bucket in 0u16..10_000,
        ) {
            let mut files: BTreeMap<String, Vec<u8>> = names
                .iter()
                .map(|k| (k.clone(), b"version: 2.0.0\n".to_vec()))
                .collect();
            if let Some(p) = pct {
                files.insert(KEY.to_owned(), Percent::from_hundredths(p).unwrap().to_string().into_bytes());
            }
            let s = Settings::from_raw(&Raw {
                accepts: Some("^2".into()),
                mode: Some("observe".into()),
                ..Raw::default()
            })
            .unwrap();
            let (c, v) = choose(Observed::Config(Snapshot::new(files)), &s, Bucket::from_hundredths(u32::from(bucket)), &[]);
            if let Observed::Config(p) = &c.observed {
                prop_assert!(p.files().keys().all(|k| !k.ends_with(SUFFIX) && k != KEY), "{:?}", p.files().keys());
            }
            if let Some(v) = v {
                let on = pct.is_some_and(|p| u32::from(bucket) < p) && names.iter().any(|n| n.ends_with(SUFFIX));
                prop_assert_eq!(v.assigned == Track::Candidate, on);
            }
        }
    }
}
