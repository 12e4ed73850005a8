//! Rules compiled and evaluated with the `cel` crate and kube-cel's Kubernetes libraries: each rule's
//! cost estimated on the config before it runs, and a failure named by its kind, never by the content.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use kube_cel::KubeCelExt as _;
use kube_cel::cel::{self, Program, Value};

use super::budget::{Budget, PER_RULE, RuleFailure, Why};
use super::cost;

/// A rule that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {index} ({text:?}) is not a valid CEL expression: {problem}")]
pub struct Invalid {
    /// 1-based position among the rules given.
    pub index: usize,
    pub text: String,
    pub problem: String,
}

/// One compiled rule with the text it was written as.
pub struct Rule {
    pub text: String,
    program: Program,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule").field("text", &self.text).finish()
    }
}

impl Rule {
    /// Compiles one rule; `index` (1-based) only names it in the error.
    pub(crate) fn compile(index: usize, text: &str) -> Result<Rule, Invalid> {
        let text = text.trim();
        let invalid = |problem: String| Invalid {
            index,
            text: text.to_owned(),
            problem,
        };
        if text.is_empty() {
            return Err(invalid("the rule is empty".into()));
        }
        let program = Program::compile(text).map_err(|e| invalid(parse_problem(&e.to_string())))?;
        // Whether a bound exists does not depend on the config: any one tells.
        let one = HashMap::from([("k".to_owned(), Value::String(Arc::new("v".into())))]);
        let inputs = cost::Inputs::of(&one, &HashMap::new());
        if let Err(cost::Unbounded(what)) = cost::estimate(program.expression(), &inputs) {
            return Err(invalid(format!(
                "its cost has no bound ({what}), so no budget could stop it"
            )));
        }
        Ok(Rule {
            text: text.to_owned(),
            program,
        })
    }
}

/// What is wrong with a rule, from the parser's errors (`ERROR: <input>:LINE:COLUMN: MESSAGE`, one per
/// line), in the operator's terms: where, and the first message that describes the text. The parser
/// also reports its own state (``Incomplete `IndexContext`!``), which says nothing to an operator; such
/// a message alone means the expression ended early.
fn parse_problem(errors: &str) -> String {
    let parsed: Vec<(&str, &str)> = errors
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("ERROR: <input>:")?;
            let mut parts = rest.splitn(3, ':');
            let (line, column, message) = (parts.next()?, parts.next()?, parts.next()?);
            let at = if line == "1" {
                column
            } else {
                rest.split(": ").next()?
            };
            Some((at, message.trim()))
        })
        .collect();
    let internal = |m: &str| m.starts_with("Incomplete `") || m.contains("Context`");
    let place = |at: &str| {
        if at.contains(':') {
            format!("line {}", at.replace(':', ", column "))
        } else {
            format!("column {at}")
        }
    };
    match parsed.iter().find(|(_, m)| !internal(m)) {
        Some((at, message)) => format!("at {}: {message}", place(at)),
        None => match parsed.first() {
            Some((at, _)) => format!(
                "incomplete expression from {} (an unclosed bracket, parenthesis or quote?)",
                place(at)
            ),
            None => "not an expression".to_owned(),
        },
    }
}

/// Compiles rules given one per `--rule` and, from a file, one per non-empty line not starting with `#`.
pub fn compile_all<'a>(texts: impl IntoIterator<Item = &'a str>) -> Result<Vec<Rule>, Invalid> {
    texts
        .into_iter()
        .enumerate()
        .map(|(i, t)| Rule::compile(i + 1, t))
        .collect()
}

/// Evaluates every rule against `data` and `binary_data`, within one judgement's budget; the first that
/// does not hold is returned.
pub fn evaluate(
    rules: &[Rule],
    data: &BTreeMap<String, String>,
    binary_data: &BTreeMap<String, Vec<u8>>,
) -> Result<(), RuleFailure> {
    let d = data
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(Arc::new(v.clone()))))
        .collect();
    let b = binary_data
        .iter()
        .map(|(k, v)| (k.clone(), Value::Bytes(Arc::new(v.clone()))))
        .collect();
    run(rules, (d, b), &mut Budget::per_judgement())
}

pub(super) type Maps = (HashMap<String, Value>, HashMap<String, Value>);

/// Runs `rules` in order over `data` and `binaryData`, each only once its estimated cost on them fits
/// [`PER_RULE`] and what is left of `budget`.
pub(super) fn run(
    rules: &[Rule],
    (data, binary): Maps,
    budget: &mut Budget,
) -> Result<(), RuleFailure> {
    let inputs = cost::Inputs::of(&data, &binary);
    let mut maps = Some((data, binary));
    let mut ctx: Option<cel::Context> = None;
    for (i, rule) in rules.iter().enumerate() {
        let fail = |why| RuleFailure {
            index: i + 1,
            text: rule.text.clone(),
            why,
        };
        let cost = match cost::estimate(rule.program.expression(), &inputs) {
            Ok(c) if c > PER_RULE => return Err(fail(Why::OverBudget { cost: c })),
            Ok(c) => c,
            Err(cost::Unbounded(what)) => return Err(fail(Why::Unbounded(what))),
        };
        if !budget.take(cost) {
            return Err(fail(Why::OverJudgement { cost }));
        }
        let ctx = ctx.get_or_insert_with(|| {
            let (d, b) = maps.take().unwrap_or_default();
            let mut ctx = cel::Context::default().with_all();
            ctx.add_variable_from_value("data", d);
            ctx.add_variable_from_value("binaryData", b);
            ctx
        });
        let why = match rule.program.execute(ctx) {
            Ok(Value::Bool(true)) => continue,
            Ok(Value::Bool(false)) => Why::False,
            Ok(_) => Why::NotBool,
            Err(e) => Why::Error(error_kind(&e)),
        };
        return Err(fail(why));
    }
    Ok(())
}

fn error_kind(e: &cel::ExecutionError) -> &'static str {
    use cel::ExecutionError as E;
    match e {
        E::NoSuchKey(_) => "no such key",
        E::UndeclaredReference(_) => "undeclared reference",
        E::UnsupportedBinaryOperator(..) | E::NoSuchOverload => "no such overload",
        _ => "evaluation error",
    }
}

#[cfg(test)]
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

    /// The parser's own state never reaches an operator: an unclosed bracket is said as such, and a
    /// syntax error keeps its position and the parser's description of the text.
    #[test]
    fn parse_errors_are_said_without_parser_internals() {
        for rule in ["data['x", "data[", "size(data"] {
            let err = Rule::compile(1, rule).unwrap_err().to_string();
            assert!(!err.contains("Context"), "{err}");
            assert!(!err.contains("<input>") && !err.contains("ERROR:"), "{err}");
            assert!(err.contains("column"), "{err}");
        }
        let err = Rule::compile(1, "data['x").unwrap_err().to_string();
        assert!(err.contains("at column 6: Syntax error"), "{err}");
        // When the parser says nothing but its own state, the expression ended early.
        let only_internal = parse_problem("ERROR: <input>:1:1: Incomplete `IndexContext`!");
        assert!(only_internal.contains("unclosed"), "{only_internal}");
        assert!(!only_internal.contains("Context"), "{only_internal}");
        let err = Rule::compile(1, "data.(").unwrap_err().to_string();
        assert!(err.contains("at column 6: "), "{err}");
        assert_eq!(
            parse_problem("ERROR: <input>:2:3: oops"),
            "at line 2, column 3: oops"
        );
    }

    #[test]
    fn bad_rules_are_named() {
        let err = compile_all(["true", "data.("]).unwrap_err();
        assert_eq!(err.index, 2);
        assert!(err.to_string().starts_with("rule 2 (\"data.(\")"), "{err}");
        assert!(Rule::compile(1, "  ").is_err());
    }
}

/// What rules may cost: estimated before they run, refused over the budget, and the estimate bounds
/// the time they take.
#[cfg(test)]
mod cost_tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// `lines` lines of 20 bytes under key `v`.
    fn lines(lines: usize) -> BTreeMap<String, String> {
        let text = (0..lines)
            .map(|i| format!("line {i:06} of text\n"))
            .collect();
        [("v".to_owned(), text)].into()
    }

    fn timed(rule: &str, data: &BTreeMap<String, String>) -> (Result<(), RuleFailure>, Duration) {
        let rules = compile_all([rule]).unwrap();
        let t = Instant::now();
        let r = evaluate(&rules, data, &BTreeMap::new());
        (r, t.elapsed())
    }

    #[test]
    fn a_quadratic_rule_over_a_20_kb_value_is_over_budget_and_not_run() {
        let data = lines(1000);
        assert_eq!(data["v"].len(), 20_000);
        // Each of 1000 lines searched for in the whole value, character by character.
        let rule = "data.v.split('\\n').all(l, data.v.indexOf(l) >= 0)";
        let (r, took) = timed(rule, &data);
        let err = r.unwrap_err();
        assert!(
            matches!(err.why, Why::OverBudget { cost } if cost > PER_RULE),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with("rule 1 (`data.v.split") && text.contains("over the cost budget"),
            "{text}"
        );
        assert!(took < Duration::from_secs(1), "{took:?}");
    }

    #[test]
    fn rules_within_the_budget_hold_on_a_1_mib_config() {
        let mut data = lines(40_000);
        data.insert("w".into(), "x".repeat(40_000));
        data.insert("small".into(), lines(10_000).remove("v").unwrap());
        for rule in [
            "data.v.contains('line 039999')",
            "size(data.v) > 1000 && data.w.startsWith('x')",
            "data.all(k, size(data[k]) < 2000000)",
            "data.v.matches('^line [0-9]+ of')",
            "data.small.split('\\n').all(l, l == '' || l.startsWith('line '))",
            "'v' in data && !('tls.crt' in binaryData)",
        ] {
            let (r, took) = timed(rule, &data);
            assert_eq!(r, Ok(()), "{rule}");
            eprintln!("{rule}: {took:?}");
        }
    }

    #[test]
    fn rules_with_no_cost_bound_are_refused_when_compiled() {
        for (rule, why) in [
            (
                "lists.range(size(data)).size() > 0",
                "lists.range with a computed length",
            ),
            (
                "data.f.format([1]) != ''",
                "format with a computed format string",
            ),
            ("Msg{a: 1} != null", "a message literal"),
        ] {
            let err = Rule::compile(3, rule).unwrap_err();
            assert_eq!(err.index, 3);
            assert!(err.problem.contains(why), "{rule}: {err}");
        }
        assert!(Rule::compile(1, "lists.range(3).size() == 3").is_ok());
        assert!(Rule::compile(1, "'%.2f'.format([1.5]) == '1.50'").is_ok());
    }

    /// Rules that a config makes as costly as the budget allows, and a little more: under it they
    /// finish in bounded time; over it they are not run.
    #[test]
    fn the_estimate_bounds_the_time_a_rule_takes() {
        for rule in [
            "data.v.split('\\n').all(l, data.v.contains(l))",
            "data.v.split('').size() > 0",
            "data.v.split('\\n').map(l, l + 'x').size() > 0",
            "data.all(k, data.all(j, data[k] != data[j] || k == j))",
        ] {
            let mut n = 1usize;
            let mut slowest = Duration::ZERO;
            loop {
                let data: BTreeMap<String, String> = (0..n)
                    .map(|i| (format!("k{i}"), format!("value {i}\n")))
                    .chain(lines(n))
                    .collect();
                let (r, took) = timed(rule, &data);
                if let Err(RuleFailure {
                    why: Why::OverBudget { .. },
                    ..
                }) = r
                {
                    assert!(took < Duration::from_secs(1), "{rule}: {took:?} to refuse");
                    break;
                }
                assert_eq!(r, Ok(()), "{rule} on {n}");
                slowest = slowest.max(took);
                n *= 2;
            }
            eprintln!("{rule}: up to {n} lines; slowest run within the budget {slowest:?}");
            // A debug build; release runs several times faster.
            assert!(slowest < Duration::from_secs(3), "{rule}: {slowest:?}");
        }
    }
}
