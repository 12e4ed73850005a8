//! The work and result bound of each function of the environment (the `cel` crate's and kube-cel's).

use std::rc::Rc;

use super::shape::{ELEMENT, Est, Kind, Literal, Shape, Unbounded, add, mul};

/// The most states a regular expression compiles to: the `regex` crate's default size limit (10 MiB of
/// program) at 16 bytes a state. A pattern computed from the config is assumed to reach it.
const REGEX_MAX: u64 = 10 * 1024 * 1024 / 16;

/// The functions of the environment whose names have a namespace.
pub(super) const QUALIFIED: &[&str] = &[
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
pub(super) fn function(name: &str, operands: &[&Est]) -> Result<(u64, Shape), Unbounded> {
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
