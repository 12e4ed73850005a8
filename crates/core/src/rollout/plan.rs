//! [`Plan`]: what a ConfigMap says about its rollout, read from its keys.

use crate::listing;
use crate::settings::Variants;
use crate::snapshot::Snapshot;

use crate::values::Percent;

/// The suffix of a candidate key: `K.next` is the candidate of `K`.
pub use crate::values::NEXT_SUFFIX as SUFFIX;
/// The key holding the rollout's percentage.
pub use crate::values::ROLLOUT_KEY as KEY;

/// A ConfigMap's rollout: the share of pods on the candidate and the keys the candidate changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The percentage in `confgate.rollout`; `None` when that key is absent (an aborted or finished
    /// rollout whose `.next` keys are still there: every pod is on stable).
    pub percent: Option<Percent>,
    /// The names the candidate gives new content (`K` for each `K.next`), in key order.
    pub keys: Vec<String>,
}

impl Plan {
    /// The rollout `snap` describes: `Ok(None)` when it has neither `confgate.rollout` nor a `.next`
    /// key (a ConfigMap as it always was), `Err` naming the key and what is allowed when it cannot be
    /// followed. `variants`, when set, is refused as the name of a candidate: a candidate of the
    /// promoted name would stand beside the variants; the candidate of a variant is that variant's
    /// key with `.next`.
    pub fn read(snap: &Snapshot, variants: Option<&Variants>) -> Result<Option<Plan>, String> {
        let files = snap.files();
        let keys: Vec<String> = files
            .keys()
            .filter_map(|k| k.strip_suffix(SUFFIX).map(str::to_owned))
            .collect();
        let rollout = files.get(KEY);
        if rollout.is_none() && keys.is_empty() {
            return Ok(None);
        }
        let percent = match rollout {
            None => None,
            Some(bytes) => {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    format!("key {KEY} is not a percentage (it is not UTF-8); allowed: 0% to 100%, e.g. 5%, 25% or 2.5%")
                })?;
                Some(Percent::parse(text).map_err(|why| {
                    format!("key {KEY} is not a percentage ({why}); allowed: 0% to 100%, e.g. 5%, 25% or 2.5%")
                })?)
            }
        };
        if let Some(bad) = keys
            .iter()
            .find(|k| k.is_empty() || k.ends_with(SUFFIX) || *k == KEY)
        {
            return Err(format!(
                "key {} cannot be a candidate: {}; a candidate key is the name of a key with {SUFFIX} once",
                listing::name(&format!("{bad}{SUFFIX}")),
                if bad.is_empty() {
                    "it names no key".to_owned()
                } else {
                    format!("{} is itself reserved", listing::name(bad))
                }
            ));
        }
        if let Some(v) = variants
            && keys.contains(&v.promoted)
        {
            return Err(format!(
                "key {} is a candidate for the name variants are promoted as ({v}); give the candidate of a variant instead, e.g. {}",
                listing::name(&format!("{}{SUFFIX}", v.promoted)),
                listing::name(&format!("{}2{}{SUFFIX}", v.prefix, v.suffix)),
            ));
        }
        Ok(Some(Plan { percent, keys }))
    }

    /// Whether any pod at all is on the candidate.
    pub fn live(&self) -> bool {
        !self.keys.is_empty() && self.percent.is_some_and(|p| p > Percent::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn snap(keys: &[(&str, &str)]) -> Snapshot {
        Snapshot::new(
            keys.iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn reads_the_percentage_and_the_candidate_keys() {
        assert_eq!(Plan::read(&snap(&[("config.yaml", "a")]), None), Ok(None));
        let p = Plan::read(
            &snap(&[
                ("a.yaml", "1"),
                ("a.yaml.next", "2"),
                ("b.txt.next", "new key"),
                (KEY, "25%\n"),
            ]),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.percent.unwrap().to_string(), "25%");
        assert_eq!(p.keys, ["a.yaml", "b.txt"]);
        assert!(p.live());
        // Aborted: the .next keys stay, the percentage is gone.
        let p = Plan::read(&snap(&[("a.yaml", "1"), ("a.yaml.next", "2")]), None)
            .unwrap()
            .unwrap();
        assert_eq!((p.percent, p.live()), (None, false));
        let p = Plan::read(&snap(&[("a.yaml", "1"), (KEY, "0%")]), None)
            .unwrap()
            .unwrap();
        assert!(!p.live());
    }

    #[test]
    fn a_bad_plan_says_what_is_wrong_without_its_content() {
        let e = Plan::read(&snap(&[(KEY, "twenty-five secret %")]), None).unwrap_err();
        assert_eq!(
            e,
            "key confgate.rollout is not a percentage (it is not a number followed by %); allowed: 0% to 100%, e.g. 5%, 25% or 2.5%"
        );
        assert!(!e.contains("secret"));
        let e = Plan::read(&snap(&[("a.next.next", "x")]), None).unwrap_err();
        assert!(
            e.starts_with("key a.next.next cannot be a candidate: a.next is itself reserved"),
            "{e}"
        );
        let e = Plan::read(&snap(&[(".next", "x")]), None).unwrap_err();
        assert!(e.contains("it names no key"), "{e}");
        let v: Variants = "config.v*.yaml -> config.yaml".parse().unwrap();
        let e = Plan::read(&snap(&[("config.yaml.next", "x")]), Some(&v)).unwrap_err();
        assert_eq!(
            e,
            "key config.yaml.next is a candidate for the name variants are promoted as (config.v*.yaml -> config.yaml); give the candidate of a variant instead, e.g. config.v2.yaml.next"
        );
        assert!(Plan::read(&snap(&[("config.v3.yaml.next", "x")]), Some(&v)).is_ok());
    }
}
