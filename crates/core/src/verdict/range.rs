//! Versions against a range: the lenient version parser and the classification of a version the
//! range does not admit (`too-new`, `too-old`, `out-of-range`). Pure.

use semver::{Comparator, Op, Version, VersionReq};

use crate::values::Verdict;

/// A text that is not a semantic version, even read leniently.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a semantic version ({0}); allowed: MAJOR[.MINOR[.PATCH]][-PRE][+BUILD], optionally with a leading v"
)]
pub(crate) struct NotSemver(String);

/// Parses a version leniently: a leading `v`, `2.4` (= 2.4.0) and `3` (= 3.0.0) are accepted.
pub(crate) fn parse_lenient(raw: &str) -> Result<Version, NotSemver> {
    let s = raw.trim();
    let s = s
        .strip_prefix('v')
        .or_else(|| s.strip_prefix('V'))
        .unwrap_or(s);
    let core_end = s.find(['-', '+']).unwrap_or(s.len());
    let (core, rest) = s.split_at(core_end);
    let parts = core.split('.').count();
    let padded = match parts {
        1 => format!("{core}.0.0{rest}"),
        2 => format!("{core}.0{rest}"),
        _ => s.to_owned(),
    };
    // The semver crate's reason, which names the fault.
    Version::parse(&padded).map_err(|e| NotSemver(e.to_string()))
}

/// Places a version against a range: accepted, or which side of it the version falls on.
pub(crate) fn classify(v: &Version, req: &VersionReq) -> Verdict {
    if req.matches(v) {
        return Verdict::Accepted;
    }
    let core = Version::new(v.major, v.minor, v.patch);
    let (mut low, mut high) = (false, false);
    for c in &req.comparators {
        if c.matches(&core) {
            continue;
        }
        match c.op {
            Op::Greater | Op::GreaterEq => low = true,
            Op::Less | Op::LessEq => high = true,
            _ => {
                if core < floor(c) {
                    low = true;
                } else {
                    high = true;
                }
            }
        }
    }
    match (low, high) {
        (true, false) => Verdict::TooOld,
        (false, true) => Verdict::TooNew,
        _ => Verdict::OutOfRange,
    }
}

fn floor(c: &Comparator) -> Version {
    Version {
        major: c.major,
        minor: c.minor.unwrap_or(0),
        patch: c.patch.unwrap_or(0),
        pre: c.pre.clone(),
        build: semver::BuildMetadata::EMPTY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lenient_versions_as_documented() {
        assert_eq!(parse_lenient("v2.4").unwrap(), Version::new(2, 4, 0));
        assert_eq!(parse_lenient("3").unwrap().to_string(), "3.0.0");
        assert!(parse_lenient("2.4.x").is_err());
    }

    #[test]
    fn each_side_of_a_range_as_documented() {
        let range = VersionReq::parse(">=2.4.0, <3.0.0").unwrap();
        assert_eq!(classify(&"3.1.0".parse().unwrap(), &range), Verdict::TooNew);
        assert_eq!(classify(&"2.3.9".parse().unwrap(), &range), Verdict::TooOld);
        assert_eq!(
            classify(&"2.5.0-rc.1".parse().unwrap(), &range),
            Verdict::OutOfRange
        );
    }

    fn arb_version() -> impl Strategy<Value = Version> {
        (
            0u64..5,
            0u64..5,
            0u64..5,
            prop::option::of("(alpha|beta|rc)(\\.[0-9])?"),
        )
            .prop_map(|(a, b, c, pre)| {
                let mut v = Version::new(a, b, c);
                if let Some(p) = pre {
                    v.pre = semver::Prerelease::new(&p).unwrap();
                }
                v
            })
    }

    fn arb_req() -> impl Strategy<Value = VersionReq> {
        let cmp = (
            prop::sample::select(vec!["=", ">", ">=", "<", "<=", "~", "^", ""]),
            0u64..5,
            prop::option::of(0u64..5),
            prop::option::of(0u64..5),
        )
            .prop_map(|(op, a, b, c)| match (b, c) {
                (Some(b), Some(c)) => format!("{op}{a}.{b}.{c}"),
                (Some(b), None) => format!("{op}{a}.{b}"),
                _ => format!("{op}{a}"),
            });
        prop::collection::vec(cmp, 1..3).prop_map(|cs| VersionReq::parse(&cs.join(", ")).unwrap())
    }

    proptest! {
        /// Accepted exactly when the semver crate says the range matches; otherwise a rejection.
        #[test]
        fn classify_agrees_with_semver(v in arb_version(), req in arb_req()) {
            let verdict = classify(&v, &req);
            prop_assert_eq!(verdict == Verdict::Accepted, req.matches(&v));
        }

        /// A release above every version the range admits is too-new, one below is too-old.
        #[test]
        fn direction_is_right_for_single_bounded_ranges(a in 0u64..5, b in 0u64..5, c in 0u64..5) {
            let req = VersionReq::parse(&format!(">={a}.{b}.{c}, <{}.0.0", a + 1)).unwrap();
            prop_assert_eq!(classify(&Version::new(a + 1, 0, 0), &req), Verdict::TooNew);
            if a + b + c > 0 {
                let below = if c > 0 { Version::new(a, b, c - 1) } else if b > 0 { Version::new(a, b - 1, 9) } else { Version::new(a - 1, 9, 9) };
                prop_assert_eq!(classify(&below, &req), Verdict::TooOld);
            }
        }

        #[test]
        fn lenient_parse_accepts_short_forms(a in 0u64..1000, b in 0u64..1000) {
            prop_assert_eq!(parse_lenient(&format!("v{a}.{b}")).unwrap(), Version::new(a, b, 0));
            prop_assert_eq!(parse_lenient(&format!("{a}")).unwrap(), Version::new(a, 0, 0));
        }
    }
}
