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

/// The most states a regular expression compiles to: the `regex` crate's default size limit (10 MiB of
/// program) at 16 bytes a state. A pattern computed from the config is assumed to reach it.
const REGEX_MAX: u64 = 10 * 1024 * 1024 / 16;

/// The functions of the environment whose names have a namespace.
const QUALIFIED: &[&str] = &[
    "optional.none",
    "optional.of",
    "optional.ofNonZeroValue",
    "base64.encode",
    "base64.decode",
    "ip.isCanonical",
    "jsonpatch.escapeKey",
    "lists.range",
    "math.abs",
    "math.bitAnd",
    "math.bitNot",
    "math.bitOr",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.bitXor",
    "math.ceil",
    "math.floor",
    "math.greatest",
    "math.isFinite",
    "math.isInf",
    "math.isNaN",
    "math.least",
    "math.round",
    "math.sign",
    "math.sqrt",
    "math.trunc",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "strings.quote",
    "format.named",
    "format.dns1123Label",
    "format.dns1123Subdomain",
    "format.dns1035Label",
    "format.qualifiedName",
    "format.dns1123LabelPrefix",
    "format.dns1123SubdomainPrefix",
    "format.dns1035LabelPrefix",
    "format.labelValue",
    "format.uri",
    "format.uuid",
    "format.byte",
    "format.date",
    "format.datetime",
];

/// A rule whose cost no config size bounds, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unbounded(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Scalar,
    Text,
    Bytes,
    List,
    Map,
    /// Not known here: bounded in size like any other, but by no more than its container.
    Any,
}

/// One of the two variables a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Data,
    Binary,
}

/// An upper bound on a value.
#[derive(Debug, Clone)]
struct Shape {
    kind: Kind,
    /// Bytes of a string, elements of a list or map; 1 for a scalar.
    len: u64,
    /// What copying or reading all of it costs.
    weight: u64,
    /// The sum of its elements' (a map's values') `len`; a string's own length: with `len` of the
    /// largest element, how many elements can be that large, which bounds a loop over them.
    total: u64,
    /// A list's elements, a map's keys.
    item: Option<Rc<Shape>>,
    /// A map's values.
    value: Option<Rc<Shape>>,
    /// This is one of the input maps.
    input: Option<Input>,
    /// This is a key of an input map, whose value is no larger than the shape given.
    key_of: Option<(Input, Rc<Shape>)>,
    /// This is exactly this input value (what a literal key gives), so a split of it by a literal
    /// separator is counted, not bounded.
    exact: Option<Arc<String>>,
}

fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// A tenth per byte, rounded up: the API server's string traversal factor.
fn bytes_cost(n: u64) -> u64 {
    n.div_ceil(10)
}

/// What an element of a list or map costs besides its own contents: the evaluator allocates and
/// converts each one where cel-go moves a pointer.
const ELEMENT: u64 = 2;

impl Shape {
    fn scalar() -> Shape {
        Shape {
            kind: Kind::Scalar,
            len: 1,
            weight: 1,
            total: 1,
            item: None,
            value: None,
            input: None,
            key_of: None,
            exact: None,
        }
    }

    fn text(n: u64) -> Shape {
        Shape {
            kind: Kind::Text,
            len: n,
            weight: bytes_cost(n).max(1),
            total: n,
            ..Shape::scalar()
        }
    }

    fn bytes(n: u64) -> Shape {
        Shape {
            kind: Kind::Bytes,
            ..Shape::text(n)
        }
    }

    /// A string or bytes, as `like` is, of `n` bytes.
    fn text_like(like: Kind, n: u64) -> Shape {
        if like == Kind::Bytes {
            Shape::bytes(n)
        } else {
            Shape::text(n)
        }
    }

    /// `n` elements of at most `item` each.
    fn list(n: u64, item: Shape) -> Shape {
        Shape {
            kind: Kind::List,
            len: n,
            weight: add(1, mul(n, add(ELEMENT, item.weight))),
            total: mul(n, item.len),
            item: Some(Rc::new(item)),
            ..Shape::scalar()
        }
    }

    /// Something of unknown kind no bigger than `len` bytes or elements.
    fn any(len: u64) -> Shape {
        Shape {
            kind: Kind::Any,
            len,
            weight: add(1, len),
            total: len,
            ..Shape::scalar()
        }
    }

    /// An element of a list (a key of a map): what the shape says, or else no more than the whole.
    fn elem(&self) -> Shape {
        match &self.item {
            Some(i) => (**i).clone(),
            None => self.inside(),
        }
    }

    /// A value of a map.
    fn value_of(&self) -> Shape {
        match (&self.value, &self.item) {
            (Some(v), _) => (**v).clone(),
            // A list's elements are what indexing it gives.
            (None, Some(i)) if self.kind == Kind::List => (**i).clone(),
            _ => self.inside(),
        }
    }

    fn inside(&self) -> Shape {
        Shape {
            kind: Kind::Any,
            len: self.len,
            weight: self.weight,
            total: self.total,
            ..Shape::scalar()
        }
    }

    /// The least shape bounding both.
    fn join(&self, other: &Shape) -> Shape {
        Shape {
            kind: if self.kind == other.kind {
                self.kind
            } else {
                Kind::Any
            },
            len: self.len.max(other.len),
            weight: self.weight.max(other.weight),
            total: self.total.max(other.total),
            item: join_opt(&self.item, &other.item),
            value: join_opt(&self.value, &other.value),
            input: self.input.filter(|i| other.input == Some(*i)),
            key_of: None,
            exact: None,
        }
    }

    /// `a + b`: numbers stay numbers, strings and lists are concatenated.
    fn concat(&self, other: &Shape) -> Shape {
        if self.kind == Kind::Scalar && other.kind == Kind::Scalar {
            return Shape::scalar();
        }
        Shape {
            len: add(self.len, other.len),
            weight: add(self.weight, other.weight),
            total: add(self.total, other.total),
            ..self.join(other)
        }
    }
}

fn join_opt(a: &Option<Rc<Shape>>, b: &Option<Rc<Shape>>) -> Option<Rc<Shape>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Rc::new(a.join(b))),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (None, None) => None,
    }
}

/// The two variables a rule reads, as bounds, and each value as it is.
#[derive(Debug, Clone)]
pub struct Inputs {
    data: Shape,
    binary: Shape,
    /// Each value by key (a key is under one of the two maps only): its size, and a string's text.
    values: HashMap<String, (u64, Option<Arc<String>>)>,
}

impl Inputs {
    /// The bounds of the maps a rule is evaluated over.
    pub fn of(data: &HashMap<String, Value>, binary: &HashMap<String, Value>) -> Inputs {
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
pub fn setup(sizes: impl Iterator<Item = (usize, usize)>) -> u64 {
    let mut side = Side::default();
    for (k, v) in sizes {
        side.add(k as u64, v as u64);
    }
    mul(3, side.weight)
}

#[derive(Default)]
struct Side {
    n: u64,
    key: u64,
    val: u64,
    total: u64,
    weight: u64,
}

impl Side {
    fn add(&mut self, key: u64, val: u64) {
        self.n += 1;
        self.key = self.key.max(key);
        self.val = self.val.max(val);
        self.total = add(self.total, val);
        self.weight = add(
            self.weight,
            add(
                ELEMENT,
                add(Shape::text(key).weight, Shape::text(val).weight),
            ),
        );
    }

    fn shape(&self, input: Input, value: Shape) -> Shape {
        Shape {
            kind: Kind::Map,
            len: self.n,
            weight: add(1, self.weight),
            total: self.total,
            item: Some(Rc::new(Shape::text(self.key))),
            value: Some(Rc::new(value)),
            input: Some(input),
            ..Shape::scalar()
        }
    }
}

/// The estimated cost of `expr` over `inputs`, or why it has none.
pub fn estimate(expr: &IdedExpr, inputs: &Inputs) -> Result<u64, Unbounded> {
    let mut walk = Walk {
        inputs,
        scope: Vec::new(),
    };
    walk.expr(expr).map(|e| e.cost)
}

/// A subexpression's cost and the bound on its value; a literal's value when it is one.
struct Est {
    cost: u64,
    shape: Shape,
    literal: Option<Literal>,
}

#[derive(Clone)]
enum Literal {
    Str(String),
    Int(i64),
}

impl Est {
    fn of(cost: u64, shape: Shape) -> Est {
        Est {
            cost,
            shape,
            literal: None,
        }
    }
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

/// How many states `pattern` can compile to, times a quarter per byte of its text (the API server's
/// factor): a literal's own length, multiplied by each counted repetition in it; a computed one, the
/// `regex` crate's limit.
fn regex_factor(pattern: &Est) -> u64 {
    let Some(Literal::Str(p)) = &pattern.literal else {
        return REGEX_MAX;
    };
    let mut factor = (p.len() as u64).div_ceil(4).max(1);
    let mut rest = p.as_str();
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find('}') else { break };
        let counts = &rest[..close];
        let most = counts
            .split(',')
            .filter_map(|n| n.trim().parse::<u64>().ok())
            .max()
            .unwrap_or(1);
        factor = mul(factor, most.max(1));
        rest = &rest[close + 1..];
    }
    factor.min(REGEX_MAX)
}

/// Work and result bound of one function, from its operands: what it is called on (the target, or the
/// first argument of a global call) first.
fn function(name: &str, operands: &[&Est]) -> Result<(u64, Shape), Unbounded> {
    let subject = operands.first();
    let s = &subject.map_or_else(Shape::scalar, |e| e.shape.clone());
    let rest = operands.get(1..).unwrap_or_default();
    let nth = |i: usize| rest.get(i).map_or_else(Shape::scalar, |e| e.shape.clone());
    let scalar = Shape::scalar;
    let regex = |pattern: Option<&&Est>| {
        pattern
            .map_or(REGEX_MAX, |p| regex_factor(p))
            .saturating_mul(s.weight)
    };
    // The pieces of a string add up to no more than the string.
    let split = |n: u64| Shape {
        weight: add(s.weight, mul(add(n, 1), ELEMENT + 1)),
        total: n,
        ..Shape::list(add(n, 1), Shape::text(n))
    };
    Ok(match name {
        "size"
        | "hasValue"
        | "isSorted"
        | "sum"
        | "isURL"
        | "isIP"
        | "isIPv4"
        | "isIPv6"
        | "isCIDR"
        | "isCIDRv4"
        | "isCIDRv6"
        | "ip.isCanonical"
        | "isSemver"
        | "isQuantity"
        | "major"
        | "minor"
        | "patch"
        | "sign"
        | "isInteger"
        | "asInteger"
        | "asApproximateFloat"
        | "compareTo"
        | "isGreaterThan"
        | "isLessThan"
        | "family"
        | "prefixLength"
        | "containsIP"
        | "containsCIDR"
        | "isLoopback"
        | "isUnspecified"
        | "isGlobalUnicast"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "double"
        | "int"
        | "uint"
        | "duration"
        | "timestamp"
        | "getFullYear"
        | "getMonth"
        | "getDayOfYear"
        | "getDayOfMonth"
        | "getDate"
        | "getDayOfWeek"
        | "getHours"
        | "getMinutes"
        | "getSeconds"
        | "getMilliseconds"
        | "math.abs"
        | "math.bitAnd"
        | "math.bitNot"
        | "math.bitOr"
        | "math.bitShiftLeft"
        | "math.bitShiftRight"
        | "math.bitXor"
        | "math.ceil"
        | "math.floor"
        | "math.isFinite"
        | "math.isInf"
        | "math.isNaN"
        | "math.round"
        | "math.sign"
        | "math.sqrt"
        | "math.trunc"
        | "optional.none" => (s.weight, scalar()),
        "math.greatest" | "math.least" => (s.weight, scalar()),
        "contains" => {
            let x = nth(0);
            let work = match s.kind {
                Kind::Text => add(s.weight, x.weight),
                Kind::Map => x.weight,
                // A list is searched element by element, bytes window by window.
                _ => mul(s.len, x.weight),
            };
            (work, scalar())
        }
        "startsWith" | "endsWith" => (nth(0).weight, scalar()),
        "matches" => (regex(rest.first()), scalar()),
        "find" => (regex(rest.first()), Shape::text(s.len)),
        "findAll" => (mul(regex(rest.first()), 2), split(s.len)),
        "string" | "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => {
            (s.weight, Shape::text(add(s.len, 64)))
        }
        "bytes" => (s.weight, Shape::bytes(add(s.len, 64))),
        "optional.of" | "optional.ofNonZeroValue" | "value" | "first" | "last" => {
            let inner = if matches!(name, "first" | "last") {
                s.elem()
            } else {
                s.clone()
            };
            (1, inner)
        }
        "or" | "orValue" => (1, s.join(&nth(0))),
        "max" | "min" => {
            if rest.is_empty() && s.kind == Kind::List {
                (s.weight, s.elem())
            } else {
                let all = rest.iter().fold(s.clone(), |a, e| a.join(&e.shape));
                (all.weight, all)
            }
        }
        "charAt" => (s.weight, Shape::text(4)),
        "indexOf" | "lastIndexOf" => {
            // Naive search: every offset compared against the whole needle.
            let needle = nth(0);
            (add(s.weight, mul(s.len, needle.weight)), scalar())
        }
        "lowerAscii" | "upperAscii" | "trim" | "reverse" | "slice" | "substring" => {
            (s.weight, s.clone())
        }
        "strings.quote" => (s.weight, Shape::text(add(mul(s.len, 2), 2))),
        "jsonpatch.escapeKey" => (s.weight, Shape::text(mul(s.len, 2))),
        "replace" => {
            let (from, to) = (nth(0), nth(1));
            let out = Shape::text(match rest.first().map(|e| &e.literal) {
                Some(Some(Literal::Str(f))) if !f.is_empty() => {
                    add(s.len, mul(s.len / f.len() as u64, to.len))
                }
                // An empty pattern matches between every two bytes.
                _ => mul(add(s.len, 1), add(to.len, 1)),
            });
            (add(add(s.weight, from.weight), out.weight), out)
        }
        "split" => {
            // The standard library's searchers: linear in the string.
            let work = add(s.weight, nth(0).weight);
            let sep = match rest.first().map(|e| &e.literal) {
                Some(Some(Literal::Str(sep))) if !sep.is_empty() && rest.len() == 1 => Some(sep),
                _ => None,
            };
            match (&s.exact, sep) {
                // Split as it will be: how many pieces, and the longest.
                (Some(text), Some(sep)) => {
                    let (mut pieces, mut longest) = (0u64, 0u64);
                    for piece in text.split(sep.as_str()) {
                        pieces += 1;
                        longest = longest.max(piece.len() as u64);
                    }
                    let out = Shape {
                        weight: add(s.weight, mul(pieces, ELEMENT + 1)),
                        total: s.len,
                        ..Shape::list(pieces, Shape::text(longest))
                    };
                    (work, out)
                }
                _ => (work, split(s.len)),
            }
        }
        "join" => {
            let sep = nth(0);
            let bytes = add(mul(s.weight, 10), mul(s.len, sep.len));
            let out = Shape::text(bytes);
            (out.weight, out)
        }
        "format" => {
            let Some(Some(Literal::Str(f))) = subject.map(|e| &e.literal) else {
                return Err(Unbounded("format with a computed format string"));
            };
            // Each verb writes at most its precision plus a float's digits, or its argument as text.
            let verbs = f.matches('%').count() as u64;
            let precision = f
                .split("%.")
                .skip(1)
                .filter_map(|p| {
                    let digits = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
                    p[..digits].parse::<u64>().ok()
                })
                .max()
                .unwrap_or(6);
            let out = Shape::text(add(
                add(f.len() as u64, mul(verbs, add(precision, 330))),
                mul(nth(0).weight, 40),
            ));
            (out.weight, out)
        }
        "base64.encode" => (s.weight, Shape::text(add(mul(s.len.div_ceil(3), 4), 4))),
        "base64.decode" => (s.weight, Shape::bytes(s.len)),
        "url" | "ip" | "cidr" | "masked" | "quantity" | "semver" | "add" | "sub" => {
            let all = rest.iter().fold(s.len, |a, e| add(a, e.shape.len));
            (mul(s.weight, 4), Shape::any(add(all, 64)))
        }
        "getQuery" => {
            let text = Shape::text(s.len);
            let q = Shape {
                kind: Kind::Map,
                len: s.len,
                weight: mul(s.weight, 3),
                total: mul(s.len, s.len),
                item: Some(Rc::new(text.clone())),
                value: Some(Rc::new(Shape::list(s.len, text))),
                ..Shape::scalar()
            };
            (q.weight, q)
        }
        "distinct" => (mul(s.len, s.weight), s.clone()),
        "sort" => {
            let log = 64 - s.len.leading_zeros() as u64;
            (mul(s.weight, add(log, 1)), s.clone())
        }
        "flatten" => {
            let levels = match rest.first().map(|e| &e.literal) {
                None => 1,
                Some(Some(Literal::Int(d))) => (*d).clamp(0, 64) as u32,
                // Flattening stops where the nesting does; shapes nest only as deep as the rule.
                _ => 64,
            };
            let mut out = s.clone();
            for _ in 0..levels {
                if out.kind != Kind::List {
                    break;
                }
                let inner = out.elem();
                if inner.kind != Kind::List && inner.kind != Kind::Any {
                    break;
                }
                out = Shape {
                    kind: Kind::List,
                    len: mul(out.len, inner.len.max(1)),
                    weight: out.weight,
                    total: mul(mul(out.len, inner.len.max(1)), inner.elem().len),
                    item: Some(Rc::new(inner.elem())),
                    ..Shape::scalar()
                };
            }
            (out.weight, out)
        }
        "lists.range" => match subject.map(|e| &e.literal) {
            Some(Some(Literal::Int(n))) => {
                let out = Shape::list((*n).max(0) as u64, scalar());
                (out.weight, out)
            }
            _ => return Err(Unbounded("lists.range with a computed length")),
        },
        "sets.contains" | "sets.equivalent" | "sets.intersects" => {
            let other = nth(0);
            (
                mul(
                    mul(s.len.max(1), other.len.max(1)),
                    add(s.elem().weight, other.elem().weight),
                ),
                scalar(),
            )
        }
        "format.named"
        | "format.dns1123Label"
        | "format.dns1123Subdomain"
        | "format.dns1035Label"
        | "format.qualifiedName"
        | "format.dns1123LabelPrefix"
        | "format.dns1123SubdomainPrefix"
        | "format.dns1035LabelPrefix"
        | "format.labelValue"
        | "format.uri"
        | "format.uuid"
        | "format.byte"
        | "format.date"
        | "format.datetime" => (s.weight, Shape::any(64)),
        "validate" => {
            let x = nth(0);
            (
                mul(x.weight, 20),
                Shape::list(8, Shape::text(add(x.len, 256))),
            )
        }
        // Not a function of this environment: an error at once.
        _ => (0, scalar()),
    })
}
