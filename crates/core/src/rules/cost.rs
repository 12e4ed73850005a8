//! What a content rule costs on one config, bounded before the rule runs. Pure.
//!
//! The `cel` crate counts nothing while it evaluates and cannot be interrupted, so a rule is estimated
//! first: a walk over its expression that carries, for every subexpression, an upper bound on the size
//! of its value (bytes of a string, elements of a list or map, and the same for what they hold) and on
//! the work of evaluating it. The sizes start from the config being judged (how many keys, the longest
//! key and value, the total), so the estimate is this rule's cost on this config, as the API server's
//! runtime cost is, not a worst case over every config. Every bound is an over-estimate: a branch not
//! taken, a loop left early, an error, all count as if they ran in full.
//!
//! Units follow the API server's runtime cost (cel-go): 1 per operation, a tenth per byte a string
//! function reads, a regular expression's text length times a quarter per byte it is matched against.
//! Besides, this evaluator copies a value whenever it hands one to a function or to a comprehension
//! variable, and each copy is charged by its size the same way (a tenth per byte, 1 per element).
//!
//! A few forms have no bound at all, whatever the config: a message literal (the evaluator does not
//! support them), `lists.range` or `format` driven by a computed value, an accumulator that grows
//! faster than one element per step. [`Rule::compile`](super::Rule::compile) refuses those.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kube_cel::cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
use kube_cel::cel::{IdedExpr, Value};

mod functions;
mod shape;

use functions::{QUALIFIED, function};
pub(crate) use shape::Unbounded;
use shape::{ELEMENT, Est, Input, Kind, Literal, Shape, Side, add, mul};

/// The two variables a rule reads, as bounds, and each value as it is.
#[derive(Debug, Clone)]
pub(crate) struct Inputs {
    data: Shape,
    binary: Shape,
    /// Each value by key (a key is under one of the two maps only): its size, and a string's text.
    values: HashMap<String, (u64, Option<Arc<String>>)>,
}

impl Inputs {
    /// The bounds of the maps a rule is evaluated over.
    pub(super) fn of(data: &HashMap<String, Value>, binary: &HashMap<String, Value>) -> Inputs {
        let mut sides = [Side::default(), Side::default()];
        let mut values = HashMap::new();
        for (i, map) in [data, binary].into_iter().enumerate() {
            for (k, v) in map {
                let (vl, text) = match v {
                    Value::String(t) => (t.len() as u64, Some(t.clone())),
                    Value::Bytes(b) => (b.len() as u64, None),
                    _ => (1, None),
                };
                sides[i].add(k.len() as u64, vl);
                values.insert(k.clone(), (vl, text));
            }
        }
        let [d, b] = sides;
        Inputs {
            data: d.shape(Input::Data, Shape::text(d.val)),
            binary: b.shape(Input::Binary, Shape::bytes(b.val)),
            values,
        }
    }

    /// The value of `key` in `input`, when it is there.
    fn value(&self, input: Input, key: &str) -> Option<Shape> {
        let (n, text) = self.values.get(key)?;
        Some(match input {
            Input::Data => Shape {
                exact: text.clone(),
                ..Shape::text(*n)
            },
            Input::Binary => Shape::bytes(*n),
        })
    }
}

/// What handing keys and values of these sizes to the evaluator costs: building its two maps and
/// their copies in its own representation.
pub(super) fn setup(sizes: impl Iterator<Item = (usize, usize)>) -> u64 {
    let mut side = Side::default();
    for (k, v) in sizes {
        side.add(k as u64, v as u64);
    }
    mul(3, side.weight)
}

/// The estimated cost of `expr` over `inputs`, or why it has none.
pub(crate) fn estimate(expr: &IdedExpr, inputs: &Inputs) -> Result<u64, Unbounded> {
    let mut walk = Walk {
        inputs,
        scope: Vec::new(),
    };
    walk.expr(expr).map(|e| e.cost)
}

struct Walk<'a> {
    inputs: &'a Inputs,
    /// Comprehension variables, innermost last.
    scope: Vec<(String, Shape)>,
}

impl Walk<'_> {
    fn expr(&mut self, e: &IdedExpr) -> Result<Est, Unbounded> {
        match &e.expr {
            Expr::Literal(l) => Ok(literal(l)),
            Expr::Ident(name) => Ok(Est::of(1, self.lookup(name))),
            Expr::Select(sel) => {
                let operand = self.expr(&sel.operand)?;
                let shape = if sel.test {
                    Shape::scalar()
                } else {
                    self.member(&operand.shape, Some(&sel.field), None)
                };
                let cost = add(operand.cost, Shape::text(sel.field.len() as u64).weight);
                Ok(Est::of(cost, shape))
            }
            Expr::List(list) => {
                let mut cost = 10u64;
                let mut item: Option<Shape> = None;
                for el in &list.elements {
                    let el = self.expr(el)?;
                    // Each element is copied into the new list.
                    cost = add(cost, add(el.cost, el.shape.weight));
                    item = Some(match item {
                        Some(i) => i.join(&el.shape),
                        None => el.shape,
                    });
                }
                let n = list.elements.len() as u64;
                let shape = match item {
                    Some(i) => Shape::list(n, i),
                    None => Shape::list(0, Shape::text(0)),
                };
                Ok(Est::of(cost, shape))
            }
            Expr::Map(map) => {
                let mut cost = 30u64;
                let (mut keys, mut values): (Option<Shape>, Option<Shape>) = (None, None);
                let mut weight = 1u64;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return Err(Unbounded("a message field, which rules cannot use"));
                    };
                    let (k, v) = (self.expr(&entry.key)?, self.expr(&entry.value)?);
                    cost = add(
                        cost,
                        add(add(k.cost, v.cost), add(k.shape.weight, v.shape.weight)),
                    );
                    weight = add(weight, add(ELEMENT, add(k.shape.weight, v.shape.weight)));
                    keys = Some(keys.map_or(k.shape.clone(), |s| s.join(&k.shape)));
                    values = Some(values.map_or(v.shape.clone(), |s| s.join(&v.shape)));
                }
                let (n, values) = (map.entries.len() as u64, values);
                let shape = Shape {
                    kind: Kind::Map,
                    len: n,
                    weight,
                    total: mul(n, values.as_ref().map_or(0, |v| v.len)),
                    item: keys.map(Rc::new),
                    value: values.map(Rc::new),
                    ..Shape::scalar()
                };
                Ok(Est::of(cost, shape))
            }
            Expr::Struct(_) => Err(Unbounded("a message literal, which rules cannot use")),
            Expr::Unspecified => Err(Unbounded("an empty expression")),
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Call(call) => {
                // `math.greatest(…)`: a function under a namespace, not a method of a variable.
                if let Some(Expr::Ident(ns)) = call.target.as_deref().map(|t| &t.expr) {
                    let name = format!("{ns}.{}", call.func_name);
                    if QUALIFIED.contains(&name.as_str()) {
                        let mut args = Vec::with_capacity(call.args.len());
                        for a in &call.args {
                            args.push(self.expr(a)?);
                        }
                        return self.call(&name, None, args);
                    }
                }
                let target = match &call.target {
                    Some(t) => Some(self.expr(t)?),
                    None => None,
                };
                let mut args = Vec::with_capacity(call.args.len());
                for a in &call.args {
                    args.push(self.expr(a)?);
                }
                self.call(&call.func_name, target, args)
            }
        }
    }

    fn lookup(&self, name: &str) -> Shape {
        if let Some((_, s)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return s.clone();
        }
        match name {
            "data" => self.inputs.data.clone(),
            "binaryData" => self.inputs.binary.clone(),
            // Anything else is an undeclared reference: an error, at once.
            _ => Shape::scalar(),
        }
    }

    /// An element of `container` at `field` (a literal key or field name) or at an index of `index`'s
    /// shape: a key of an input map gives that key's own size, a key taken from the same map in a loop
    /// gives its value's bound; anything else the bound of every value.
    fn member(&self, container: &Shape, field: Option<&str>, index: Option<&Shape>) -> Shape {
        if let Some(input) = container.input {
            if let Some(f) = field {
                return self.inputs.value(input, f).unwrap_or_else(Shape::scalar);
            }
            if let Some((of, v)) = index.and_then(|i| i.key_of.as_ref())
                && *of == input
            {
                return (**v).clone();
            }
        }
        match container.kind {
            Kind::List | Kind::Map => container.value_of(),
            _ => container.elem().join(&container.value_of()),
        }
    }

    /// A comprehension: its range, then its steps, each at most the cost of a step over the largest
    /// element. Over strings (a split, an input map's values) the sizes of all elements add up to the
    /// range's `total`, and a step costs a polynomial in its element's size with no negative term, so
    /// convex: the steps together cost at most as many largest-element steps as `total` allows, plus
    /// a step over an empty element for every element.
    fn comprehension(
        &mut self,
        c: &kube_cel::cel::common::ast::ComprehensionExpr,
    ) -> Result<Est, Unbounded> {
        let range = self.expr(&c.iter_range)?;
        let r = &range.shape;
        let n = match r.kind {
            Kind::Scalar | Kind::Text | Kind::Bytes => 0,
            _ => r.len,
        };
        let init = self.expr(&c.accu_init)?;
        // The element at a given size of what makes it large: the element itself, or for a key of an
        // input map, its value.
        let (largest, at): (u64, Box<dyn Fn(u64) -> Shape>) = match (r.input, r.value.as_deref()) {
            (Some(input), Some(v)) if c.iter_var2.is_none() => {
                let (key, kind) = (r.elem(), v.kind);
                (
                    v.len,
                    Box::new(move |len| Shape {
                        key_of: Some((input, Rc::new(Shape::text_like(kind, len)))),
                        ..key.clone()
                    }),
                )
            }
            _ => {
                let e = r.elem();
                if matches!(e.kind, Kind::Text | Kind::Bytes) {
                    (e.len, Box::new(move |len| Shape::text_like(e.kind, len)))
                } else {
                    (e.len, Box::new(move |_| e.clone()))
                }
            }
        };
        let depth = self.scope.len();
        let bind = |walk: &mut Walk, elem: Shape, accu: Shape| {
            walk.scope.truncate(depth);
            walk.scope.push((c.iter_var.clone(), elem));
            if let Some(v2) = &c.iter_var2 {
                walk.scope.push((v2.clone(), r.value_of()));
            }
            walk.scope.push((c.accu_var.clone(), accu));
        };
        // One step from the initial value says how much the accumulator grows per element.
        bind(self, at(largest), init.shape.clone());
        let first = self.expr(&c.loop_step)?;
        let grows_len = first.shape.len.saturating_sub(init.shape.len);
        let grows_weight = first.shape.weight.saturating_sub(init.shape.weight);
        let accu = Shape {
            len: add(init.shape.len, mul(n, grows_len)),
            weight: add(init.shape.weight, mul(n, grows_weight)),
            total: add(init.shape.total, mul(n, first.shape.total)),
            ..init.shape.join(&first.shape)
        };
        // Each step copies the element into its variable and the accumulator into its own.
        let step_at = |walk: &mut Walk, len: u64| -> Result<(u64, Shape), Unbounded> {
            let elem = at(len);
            let copies = add(elem.weight, accu.weight);
            bind(walk, elem, accu.clone());
            let step = walk.expr(&c.loop_step)?;
            let cond = walk.expr(&c.loop_cond)?;
            Ok((add(add(cond.cost, step.cost), copies), step.shape))
        };
        let (most, step) = step_at(self, largest)?;
        if step.len > add(accu.len, grows_len) || step.weight > add(accu.weight, grows_weight) {
            self.scope.truncate(depth);
            return Err(Unbounded(
                "an accumulator that grows faster than one step per element",
            ));
        }
        let (least, _) = step_at(self, 0)?;
        let large = n.min(add(r.total / largest.max(1), 1));
        let steps = mul(n, most).min(add(mul(large, most), mul(n, least)));
        bind(self, at(largest), accu.clone());
        let result = self.expr(&c.result)?;
        self.scope.truncate(depth);
        let cost = add(add(range.cost, init.cost), add(steps, result.cost));
        Ok(Est::of(cost, result.shape))
    }

    fn call(&self, name: &str, target: Option<Est>, args: Vec<Est>) -> Result<Est, Unbounded> {
        let operands: Vec<&Est> = target.iter().chain(args.iter()).collect();
        let evaluated = operands.iter().fold(0u64, |c, e| add(c, e.cost));
        let arg = |i: usize| {
            args.get(i)
                .map_or_else(Shape::scalar, |e: &Est| e.shape.clone())
        };
        // Operators run on the evaluator's own values: no copies.
        let op = |work: u64, shape: Shape| Ok(Est::of(add(add(evaluated, 1), work), shape));
        match name {
            operators::CONDITIONAL => {
                let (c, a, b) = (args[0].cost, args[1].cost, args[2].cost);
                return Ok(Est::of(add(add(c, a.max(b)), 1), arg(1).join(&arg(2))));
            }
            operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::LOGICAL_NOT
            | operators::NOT_STRICTLY_FALSE
            | operators::NEGATE
            | operators::SUBSTRACT
            | operators::MULTIPLY
            | operators::DIVIDE
            | operators::MODULO => return op(0, Shape::scalar()),
            operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS => {
                return op(arg(0).weight.min(arg(1).weight), Shape::scalar());
            }
            operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT => {
                let field = match args.get(1).and_then(|a| a.literal.as_ref()) {
                    Some(Literal::Str(f)) => Some(f.as_str()),
                    _ => None,
                };
                let shape = self.member(&arg(0), field, Some(&arg(1)));
                return op(arg(1).weight, shape);
            }
            operators::ADD => {
                return op(add(arg(0).weight, arg(1).weight), arg(0).concat(&arg(1)));
            }
            operators::IN => {
                let (x, within) = (arg(0), arg(1));
                let work = if within.kind == Kind::Map {
                    x.weight
                } else {
                    add(within.weight, mul(within.len, x.weight))
                };
                return op(work, Shape::scalar());
            }
            _ => {}
        }
        // A function gets copies of its operands and its result is copied back.
        let copied = operands.iter().fold(0u64, |c, e| add(c, e.shape.weight));
        let (work, shape) = function(name, &operands)?;
        let cost = add(add(evaluated, copied), add(work, shape.weight));
        Ok(Est::of(cost, shape))
    }
}

fn literal(l: &LiteralValue) -> Est {
    match l {
        LiteralValue::String(s) => Est {
            cost: 1,
            shape: Shape::text(s.inner().len() as u64),
            literal: Some(Literal::Str(s.inner().to_owned())),
        },
        LiteralValue::Bytes(b) => Est::of(1, Shape::bytes(b.inner().len() as u64)),
        LiteralValue::Int(i) => Est {
            cost: 1,
            shape: Shape::scalar(),
            literal: Some(Literal::Int(*i.inner())),
        },
        _ => Est::of(1, Shape::scalar()),
    }
}
