//! What content rules may cost and how a rule fails: the `Budget` one judgement's rules share, the
//! bound on one rule (`PER_RULE`) and the `RuleFailure` with its `Why`. The rule set (`mod.rs`) and
//! the evaluator (`eval.rs`) both use them, so they live below both.

use std::fmt;

use crate::listing;

/// The most one rule may cost on one config: the API server's per-expression limit (`PerCallLimit`),
/// about a tenth of a second of its evaluator. Same units as its runtime cost: 1 per operation, a
/// tenth per byte a string function reads.
pub(crate) const PER_RULE: u64 = 1_000_000;

/// What the content rules may still cost in one judgement of a ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    left: u64,
}

impl Budget {
    /// For all rules over one ConfigMap, every variant of it included: the API server's budget for
    /// one object (`RuntimeCELCostBudget`).
    pub(crate) const PER_JUDGEMENT: u64 = 10_000_000;

    pub(crate) fn per_judgement() -> Budget {
        Budget {
            left: Budget::PER_JUDGEMENT,
        }
    }

    /// Takes `cost` when that much is left.
    #[cfg_attr(not(feature = "policy"), allow(dead_code))]
    pub(super) fn take(&mut self, cost: u64) -> bool {
        let ok = cost <= self.left;
        if ok {
            self.left -= cost;
        }
        ok
    }
}

/// The first rule that did not hold. Names the rule, never the content it looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {index} (`{}`) {why}", listing::cut(text, MAX_RULE_SHOWN))]
pub struct RuleFailure {
    pub index: usize,
    pub text: String,
    pub why: Why,
}

/// The longest rule text a reason shows whole, in bytes.
const MAX_RULE_SHOWN: usize = 160;

/// How a rule failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    False,
    /// The kind of evaluation error only (its text could quote content).
    Error(&'static str),
    NotBool,
    /// Its estimated cost on this config is over `PER_RULE`; it was not run.
    OverBudget {
        cost: u64,
    },
    /// Not run: this judgement's rules would cost more than `Budget::PER_JUDGEMENT` with it.
    OverJudgement {
        cost: u64,
    },
    /// Its cost has no bound (refused when the rule is compiled; kept for a rule made otherwise).
    Unbounded(&'static str),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::False => f.write_str("is false"),
            Why::Error(kind) => write!(f, "could not be evaluated ({kind})"),
            Why::NotBool => f.write_str("did not evaluate to a boolean"),
            Why::OverBudget { cost } => write!(
                f,
                "is over the cost budget on this config (estimated cost {cost}, at most {PER_RULE}); not evaluated"
            ),
            Why::OverJudgement { cost } => write!(
                f,
                "was not evaluated: it would take this ConfigMap's content rules over their budget of {} (estimated cost {cost})",
                Budget::PER_JUDGEMENT
            ),
            Why::Unbounded(what) => write!(f, "has no cost bound ({what}); not evaluated"),
        }
    }
}
