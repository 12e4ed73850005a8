//! Bounds on values: the size of a string, list or map and of what it holds, and how they combine;
//! a subexpression's estimate (`Est`: its cost and bound) and `Unbounded`, which `cost.rs` and
//! `functions.rs` both build.

use std::rc::Rc;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
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
pub(super) enum Input {
    Data,
    Binary,
}

/// An upper bound on a value.
#[derive(Debug, Clone)]
pub(super) struct Shape {
    pub(super) kind: Kind,
    /// Bytes of a string, elements of a list or map; 1 for a scalar.
    pub(super) len: u64,
    /// What copying or reading all of it costs.
    pub(super) weight: u64,
    /// The sum of its elements' (a map's values') `len`; a string's own length: with `len` of the
    /// largest element, how many elements can be that large, which bounds a loop over them.
    pub(super) total: u64,
    /// A list's elements, a map's keys.
    pub(super) item: Option<Rc<Shape>>,
    /// A map's values.
    pub(super) value: Option<Rc<Shape>>,
    /// This is one of the input maps.
    pub(super) input: Option<Input>,
    /// This is a key of an input map, whose value is no larger than the shape given.
    pub(super) key_of: Option<(Input, Rc<Shape>)>,
    /// This is exactly this input value (what a literal key gives), so a split of it by a literal
    /// separator is counted, not bounded.
    pub(super) exact: Option<Arc<String>>,
}

pub(super) fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

pub(super) fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// A tenth per byte, rounded up: the API server's string traversal factor.
pub(super) fn bytes_cost(n: u64) -> u64 {
    n.div_ceil(10)
}

/// What an element of a list or map costs besides its own contents: the evaluator allocates and
/// converts each one where cel-go moves a pointer.
pub(super) const ELEMENT: u64 = 2;

impl Shape {
    pub(super) fn scalar() -> Shape {
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

    pub(super) fn text(n: u64) -> Shape {
        Shape {
            kind: Kind::Text,
            len: n,
            weight: bytes_cost(n).max(1),
            total: n,
            ..Shape::scalar()
        }
    }

    pub(super) fn bytes(n: u64) -> Shape {
        Shape {
            kind: Kind::Bytes,
            ..Shape::text(n)
        }
    }

    /// A string or bytes, as `like` is, of `n` bytes.
    pub(super) fn text_like(like: Kind, n: u64) -> Shape {
        if like == Kind::Bytes {
            Shape::bytes(n)
        } else {
            Shape::text(n)
        }
    }

    /// `n` elements of at most `item` each.
    pub(super) fn list(n: u64, item: Shape) -> Shape {
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
    pub(super) fn any(len: u64) -> Shape {
        Shape {
            kind: Kind::Any,
            len,
            weight: add(1, len),
            total: len,
            ..Shape::scalar()
        }
    }

    /// An element of a list (a key of a map): what the shape says, or else no more than the whole.
    pub(super) fn elem(&self) -> Shape {
        match &self.item {
            Some(i) => (**i).clone(),
            None => self.inside(),
        }
    }

    /// A value of a map.
    pub(super) fn value_of(&self) -> Shape {
        match (&self.value, &self.item) {
            (Some(v), _) => (**v).clone(),
            // A list's elements are what indexing it gives.
            (None, Some(i)) if self.kind == Kind::List => (**i).clone(),
            _ => self.inside(),
        }
    }

    pub(super) fn inside(&self) -> Shape {
        Shape {
            kind: Kind::Any,
            len: self.len,
            weight: self.weight,
            total: self.total,
            ..Shape::scalar()
        }
    }

    /// The least shape bounding both.
    pub(super) fn join(&self, other: &Shape) -> Shape {
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
    pub(super) fn concat(&self, other: &Shape) -> Shape {
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

pub(super) fn join_opt(a: &Option<Rc<Shape>>, b: &Option<Rc<Shape>>) -> Option<Rc<Shape>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Rc::new(a.join(b))),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (None, None) => None,
    }
}

#[derive(Default)]
pub(super) struct Side {
    pub(super) n: u64,
    pub(super) key: u64,
    pub(super) val: u64,
    pub(super) total: u64,
    pub(super) weight: u64,
}

impl Side {
    pub(super) fn add(&mut self, key: u64, val: u64) {
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

    pub(super) fn shape(&self, input: Input, value: Shape) -> Shape {
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

/// A rule whose cost no config size bounds, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unbounded(pub &'static str);

/// A subexpression's cost and the bound on its value; a literal's value when it is one.
pub(super) struct Est {
    pub(super) cost: u64,
    pub(super) shape: Shape,
    pub(super) literal: Option<Literal>,
}

#[derive(Clone)]
pub(super) enum Literal {
    Str(String),
    Int(i64),
}

impl Est {
    pub(super) fn of(cost: u64, shape: Shape) -> Est {
        Est {
            cost,
            shape,
            literal: None,
        }
    }
}
