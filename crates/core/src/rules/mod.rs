//! Content rules: CEL expressions over a ConfigMap's `data` (string values) and `binaryData` (bytes),
//! evaluated here with the `cel` crate and Kubernetes' CEL libraries (kube-cel), and emitted verbatim into
//! the admission policy, so a rule means the same in the sidecar, in `check` and in the API server.
//!
//! Pure: no I/O. A rule holds when it evaluates to `true`; `false`, an error (a missing key, a type
//! mismatch) or a non-boolean is a failure, as the API server treats a validation under
//! `failurePolicy: Fail`.
//!
//! [`RuleSet`] is the gate setting and exists in every build; without the `policy` feature it refuses
//! any rule, so a rule is never silently ignored.
//!
//! The gate sees keys, not the ConfigMap's two fields: the kubelet writes `data` and `binaryData` alike
//! as files. So wherever confgate judges (the sidecar on a volume or the API, `check` on a directory or a
//! manifest) a key is under `data` when its bytes are valid UTF-8 and under `binaryData` otherwise
//! ([`split`]); the API server's policy sees the object's own fields. The two agree whenever no
//! `binaryData` value is valid UTF-8, which is how `kubectl create configmap --from-file` chooses.
//!
//! What a rule may cost is bounded as the API server bounds it: before a rule runs, its cost on the
//! config being judged is estimated (`cost`), and a rule over `PER_RULE` is not run and fails; all the
//! rules of one judgement (every variant of a ConfigMap included) share `Budget::PER_JUDGEMENT`.
//!
//! This file is the rule set as a setting; `budget.rs` the budget and the failures; `eval.rs` compiles
//! and evaluates rules with CEL (the `policy` feature); `cost.rs` estimates what a rule will cost.

mod budget;
#[cfg(feature = "policy")]
mod cost;
#[cfg(feature = "policy")]
mod eval;

use std::collections::BTreeMap;
#[cfg(feature = "policy")]
use std::collections::HashMap;
use std::fmt;
#[cfg(feature = "policy")]
use std::sync::Arc;

#[cfg(feature = "policy")]
use kube_cel::cel::Value;

pub use budget::{Budget, RuleFailure, Why};
#[cfg(feature = "policy")]
pub use eval::{Invalid, Rule, compile_all, evaluate};

use crate::snapshot::Keys;

/// The content rules in force: the texts as given and, with the `policy` feature, compiled.
#[derive(Clone, Default)]
pub struct RuleSet {
    texts: Vec<String>,
    #[cfg(feature = "policy")]
    compiled: Arc<[Rule]>,
}

impl PartialEq for RuleSet {
    fn eq(&self, other: &RuleSet) -> bool {
        self.texts == other.texts
    }
}

impl Eq for RuleSet {}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.texts).finish()
    }
}

/// Why a set of rules cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A rule does not compile.
    #[cfg(feature = "policy")]
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Rules given to a build without the CEL engine.
    #[cfg(not(feature = "policy"))]
    #[error(
        "content rules need confgate built with the `policy` cargo feature, and this build has it off; use the -policy image (scripts/build-images.sh builds it: localhost/confgate/confgate:VERSION-policy), a build with --features policy, or remove the rules"
    )]
    Unbuilt,
}

impl RuleSet {
    /// Parses rules in the rules-file format ([`parse_file`]); no rule at all is an empty set.
    pub fn parse(text: &str) -> Result<RuleSet, Error> {
        RuleSet::from_rules(&parse_file(text))
    }

    /// The rules given one by one (each `--rule`, then each line of a rules file); no rule at all is
    /// an empty set.
    pub(crate) fn from_rules(rules: &[String]) -> Result<RuleSet, Error> {
        let texts = rules.to_vec();
        #[cfg(feature = "policy")]
        {
            let compiled = compile_all(texts.iter().map(String::as_str))?;
            Ok(RuleSet {
                texts,
                compiled: compiled.into(),
            })
        }
        #[cfg(not(feature = "policy"))]
        if texts.is_empty() {
            Ok(RuleSet { texts })
        } else {
            Err(Error::Unbuilt)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The rules as written, in order.
    pub(crate) fn texts(&self) -> &[String] {
        &self.texts
    }

    /// The compiled rules, for the admission policy.
    #[cfg(feature = "policy")]
    pub fn compiled(&self) -> &[Rule] {
        &self.compiled
    }

    /// Evaluates the rules over a config's keys, split into `data` and `binaryData` as [`split`] does;
    /// what they cost is taken from `budget`.
    pub fn check(&self, keys: &dyn Keys, budget: &mut Budget) -> Result<(), RuleFailure> {
        #[cfg(feature = "policy")]
        if !self.compiled.is_empty() {
            let setup = cost::setup(keys.each().map(|(k, v)| (k.len(), v.len())));
            if !budget.take(setup) {
                return Err(RuleFailure {
                    index: 1,
                    text: self.compiled[0].text.clone(),
                    why: Why::OverJudgement { cost: setup },
                });
            }
            let mut data = HashMap::new();
            let mut binary = HashMap::new();
            for (k, v) in keys.each() {
                match std::str::from_utf8(v) {
                    Ok(text) => data.insert(k.to_owned(), Value::String(Arc::new(text.into()))),
                    Err(_) => binary.insert(k.to_owned(), Value::Bytes(Arc::new(v.to_vec()))),
                };
            }
            return eval::run(&self.compiled, (data, binary), budget);
        }
        let _ = (keys, budget);
        Ok(())
    }
}

/// A snapshot's keys as rules see them: valid UTF-8 under `data`, anything else under `binaryData`.
pub fn split(
    files: &BTreeMap<String, Vec<u8>>,
) -> (BTreeMap<String, String>, BTreeMap<String, Vec<u8>>) {
    let mut data = BTreeMap::new();
    let mut binary = BTreeMap::new();
    for (k, v) in files {
        match std::str::from_utf8(v) {
            Ok(text) => {
                data.insert(k.clone(), text.to_owned());
            }
            Err(_) => {
                binary.insert(k.clone(), v.clone());
            }
        }
    }
    (data, binary)
}

pub fn parse_file(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rules_file_is_its_lines_without_comments_or_blanks() {
        assert_eq!(
            parse_file("# guard\n\n'a' in data\n  size(data) > 0  \n"),
            ["'a' in data", "size(data) > 0"]
        );
    }
}
