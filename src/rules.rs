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

use std::collections::BTreeMap;
#[cfg(feature = "policy")]
use std::collections::HashMap;
use std::fmt;
#[cfg(feature = "policy")]
use std::sync::Arc;

#[cfg(feature = "policy")]
use kube_cel::KubeCelExt as _;
#[cfg(feature = "policy")]
use kube_cel::cel::{self, Program, Value};

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

impl RuleSet {
    /// Parses rules in the rules-file format ([`parse_file`]); no rule at all is an empty set.
    pub fn parse(text: &str) -> Result<RuleSet, String> {
        let texts = parse_file(text);
        #[cfg(feature = "policy")]
        {
            let compiled =
                compile_all(texts.iter().map(String::as_str)).map_err(|e| e.to_string())?;
            Ok(RuleSet {
                texts,
                compiled: compiled.into(),
            })
        }
        #[cfg(not(feature = "policy"))]
        if texts.is_empty() {
            Ok(RuleSet { texts })
        } else {
            Err("content rules need confgate built with the `policy` cargo feature, and this build \
                 has it off; use a default build or remove the rules"
                .into())
        }
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The rules as written, in order.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }

    /// The compiled rules, for the admission policy.
    #[cfg(feature = "policy")]
    pub fn compiled(&self) -> &[Rule] {
        &self.compiled
    }

    /// Evaluates the rules over a snapshot's keys, split into `data` and `binaryData` by [`split`].
    pub fn check(&self, files: &BTreeMap<String, Vec<u8>>) -> Result<(), RuleFailure> {
        #[cfg(feature = "policy")]
        if !self.compiled.is_empty() {
            let (data, binary) = split(files);
            return evaluate(&self.compiled, &data, &binary);
        }
        let _ = files;
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

#[cfg(feature = "policy")]
/// A rule that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {index} ({text:?}) is not a valid CEL expression: {problem}")]
pub struct Invalid {
    /// 1-based position among the rules given.
    pub index: usize,
    pub text: String,
    pub problem: String,
}

/// The first rule that did not hold. Names the rule, never the content it looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {index} (`{text}`) {why}")]
pub struct RuleFailure {
    pub index: usize,
    pub text: String,
    pub why: Why,
}

/// How a rule failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    False,
    /// The kind of evaluation error only (its text could quote content).
    Error(&'static str),
    NotBool,
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::False => f.write_str("is false"),
            Why::Error(kind) => write!(f, "could not be evaluated ({kind})"),
            Why::NotBool => f.write_str("did not evaluate to a boolean"),
        }
    }
}

#[cfg(feature = "policy")]
/// One compiled rule with the text it was written as.
pub struct Rule {
    pub text: String,
    program: Program,
}

#[cfg(feature = "policy")]
impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule").field("text", &self.text).finish()
    }
}

#[cfg(feature = "policy")]
impl Rule {
    /// Compiles one rule; `index` (1-based) only names it in the error.
    pub fn compile(index: usize, text: &str) -> Result<Rule, Invalid> {
        let text = text.trim();
        let invalid = |problem: String| Invalid {
            index,
            text: text.to_owned(),
            problem,
        };
        if text.is_empty() {
            return Err(invalid("the rule is empty".into()));
        }
        let program = Program::compile(text).map_err(|e| {
            invalid(
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("parse error")
                    .to_owned(),
            )
        })?;
        Ok(Rule {
            text: text.to_owned(),
            program,
        })
    }
}

#[cfg(feature = "policy")]
/// Compiles rules given one per `--rule` and, from a file, one per non-empty line not starting with `#`.
pub fn compile_all<'a>(texts: impl IntoIterator<Item = &'a str>) -> Result<Vec<Rule>, Invalid> {
    texts
        .into_iter()
        .enumerate()
        .map(|(i, t)| Rule::compile(i + 1, t))
        .collect()
}

/// The rules in a rules file: one per non-empty line, `#` starts a comment line.
pub fn parse_file(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[cfg(feature = "policy")]
/// Evaluates every rule against `data` and `binary_data`; the first that does not hold is returned.
pub fn evaluate(
    rules: &[Rule],
    data: &BTreeMap<String, String>,
    binary_data: &BTreeMap<String, Vec<u8>>,
) -> Result<(), RuleFailure> {
    if rules.is_empty() {
        return Ok(());
    }
    let mut ctx = cel::Context::default().with_all();
    let d: HashMap<String, Value> = data
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(Arc::new(v.clone()))))
        .collect();
    let b: HashMap<String, Value> = binary_data
        .iter()
        .map(|(k, v)| (k.clone(), Value::Bytes(Arc::new(v.clone()))))
        .collect();
    ctx.add_variable_from_value("data", d);
    ctx.add_variable_from_value("binaryData", b);
    for (i, rule) in rules.iter().enumerate() {
        let why = match rule.program.execute(&ctx) {
            Ok(Value::Bool(true)) => continue,
            Ok(Value::Bool(false)) => Why::False,
            Ok(_) => Why::NotBool,
            Err(e) => Why::Error(error_kind(&e)),
        };
        return Err(RuleFailure {
            index: i + 1,
            text: rule.text.clone(),
            why,
        });
    }
    Ok(())
}

#[cfg(feature = "policy")]
fn error_kind(e: &cel::ExecutionError) -> &'static str {
    use cel::ExecutionError as E;
    match e {
        E::NoSuchKey(_) => "no such key",
        E::UndeclaredReference(_) => "undeclared reference",
        E::UnsupportedBinaryOperator(..) | E::NoSuchOverload => "no such overload",
        _ => "evaluation error",
    }
}

#[cfg(all(test, feature = "policy"))]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn rules_hold_fail_and_error_with_their_index() {
        let rules = compile_all([
            "'mapRoles' in data",
            "data.mapRoles.contains('rolearn: arn:aws:iam::1:role/node')",
            "data.mapRoles.matches('username: system:node:')",
        ])
        .unwrap();
        let ok = data(&[(
            "mapRoles",
            "- rolearn: arn:aws:iam::1:role/node\n  username: system:node:{{EC2PrivateDNSName}}\n",
        )]);
        assert_eq!(evaluate(&rules, &ok, &BTreeMap::new()), Ok(()));
        let gone = data(&[("mapRoles", "- rolearn: arn:aws:iam::1:role/other\n")]);
        let err = evaluate(&rules, &gone, &BTreeMap::new()).unwrap_err();
        assert_eq!((err.index, err.why.clone()), (2, Why::False));
        assert!(!err.to_string().contains("role/other"), "{err}");
        let err = evaluate(&rules, &data(&[]), &BTreeMap::new()).unwrap_err();
        assert_eq!(err.index, 1);
        let err = evaluate(&rules[1..], &data(&[("x", "y")]), &BTreeMap::new()).unwrap_err();
        assert_eq!((err.index, err.why), (1, Why::Error("no such key")));
    }

    #[test]
    fn binary_data_is_bytes_and_non_booleans_fail() {
        let rules = compile_all(["size(binaryData['blob']) == 3", "data.size()"]).unwrap();
        let bin: BTreeMap<String, Vec<u8>> = [("blob".to_owned(), vec![0xff, 0, 1])].into();
        let err = evaluate(&rules, &data(&[]), &bin).unwrap_err();
        assert_eq!((err.index, err.why), (2, Why::NotBool));
    }

    #[test]
    fn bad_rules_are_named() {
        let err = compile_all(["true", "data.("]).unwrap_err();
        assert_eq!(err.index, 2);
        assert!(err.to_string().starts_with("rule 2 (\"data.(\")"), "{err}");
        assert!(Rule::compile(1, "  ").is_err());
        assert_eq!(
            parse_file("# guard\n\n'a' in data\n  size(data) > 0  \n"),
            ["'a' in data", "size(data) > 0"]
        );
    }
}
