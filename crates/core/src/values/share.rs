//! [`Percent`] and [`Bucket`]: a share of the fleet and a pod's place in it, both in hundredths of a
//! percent, shown (and in `/status`, serialised) as text such as `25%` or `12.34%`. Values, so the
//! status (`state`) holds them typed and the rollout (`rollout`) and the metrics read the same one.

use std::fmt;

use sha2::{Digest, Sha256};

/// The key holding a rollout's percentage.
pub const ROLLOUT_KEY: &str = "confgate.rollout";
/// The suffix of a candidate key: `K.next` is the candidate of `K`.
pub const NEXT_SUFFIX: &str = ".next";

/// The resolution of percentages and buckets: hundredths of a percent.
const SCALE: u32 = 10_000;

/// A share of the fleet, from 0% to 100%, in hundredths of a percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Percent(u16);

impl Percent {
    pub const ZERO: Percent = Percent(0);
    pub const ALL: Percent = Percent(SCALE as u16);

    /// The share in hundredths of a percent; `None` above 100%.
    pub fn from_hundredths(h: u32) -> Option<Percent> {
        (h <= SCALE).then_some(Percent(h as u16))
    }

    /// The share as a fraction, 0.0 to 1.0.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / f64::from(SCALE)
    }

    /// The share in hundredths of a percent.
    pub fn hundredths(self) -> u32 {
        u32::from(self.0)
    }

    /// Reads `25%`, `2.5%`, `0.25%` (at most two decimals), with surrounding white space. The error
    /// never repeats the text (it is content of the ConfigMap).
    pub fn parse(text: &str) -> Result<Percent, &'static str> {
        let t = text.trim();
        let n = t
            .strip_suffix('%')
            .ok_or("it does not end in %")?
            .trim_end();
        let (whole, frac) = n.split_once('.').unwrap_or((n, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || !digits(whole)
            || !digits(frac)
            || (n.contains('.') && frac.is_empty())
        {
            return Err("it is not a number followed by %");
        }
        if frac.len() > 2 {
            return Err("it has more than two decimals");
        }
        let whole: u32 =
            whole
                .trim_start_matches('0')
                .parse()
                .or_else(|e: std::num::ParseIntError| match e.kind() {
                    std::num::IntErrorKind::Empty => Ok(0),
                    _ => Err("it is over 100%"),
                })?;
        let frac: u32 = format!("{frac:0<2}").parse().unwrap_or(0);
        whole
            .checked_mul(100)
            .and_then(|w| w.checked_add(frac))
            .and_then(Percent::from_hundredths)
            .ok_or("it is over 100%")
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 100, self.0 % 100);
        match frac {
            0 => write!(f, "{whole}%"),
            _ if frac % 10 == 0 => write!(f, "{whole}.{}%", frac / 10),
            _ => write!(f, "{whole}.{frac:02}%"),
        }
    }
}

/// A pod's place in the fleet: a share in `[0, 100%)` hashed from its identity. The same identity
/// always gives the same bucket (a restart keeps the pod's UID), and identities spread uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bucket(u16);

impl Bucket {
    /// The bucket of a pod identity (its UID, or its name).
    pub fn of(identity: &str) -> Bucket {
        let digest = Sha256::digest(identity.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        // 2^64 is not a multiple of SCALE; the bias is below 1e-15 per bucket.
        Bucket((u64::from_be_bytes(first) % u64::from(SCALE)) as u16)
    }

    /// Whether a pod in this bucket is on the candidate at `p`: raising `p` only adds buckets.
    pub fn on_candidate(self, p: Percent) -> bool {
        self.0 < p.0
    }

    /// The bucket as a share of the fleet, 0.0 up to (not including) 1.0: how far into a spread
    /// period this pod acts.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / f64::from(SCALE)
    }
}

impl Bucket {
    /// The bucket in hundredths of a percent; `None` at 100% or above.
    pub fn from_hundredths(h: u32) -> Option<Bucket> {
        (h < SCALE).then_some(Bucket(h as u16))
    }

    /// The bucket shown as `text` (as its `Display` writes it).
    fn parse(text: &str) -> Option<Bucket> {
        Bucket::from_hundredths(Percent::parse(text).ok()?.hundredths())
    }
}

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Percent(self.0), f)
    }
}

/// Both are serialised as the text they show, and read back from it.
macro_rules! as_text {
    ($t:ty, $parse:expr, $expected:literal) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $parse(&text).ok_or_else(|| {
                    serde::de::Error::invalid_value(serde::de::Unexpected::Str(&text), &$expected)
                })
            }
        }
    };
}

as_text!(
    Percent,
    |t: &str| Percent::parse(t).ok(),
    "a percentage such as 25%"
);
as_text!(Bucket, Bucket::parse, "a bucket such as 12.34%");

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn percentages_read_and_show_back() {
        for (text, shown) in [
            ("25%", "25%"),
            (" 5% \n", "5%"),
            ("0%", "0%"),
            ("100%", "100%"),
            ("2.5%", "2.5%"),
            ("0.25%", "0.25%"),
            ("007%", "7%"),
            ("12.50%", "12.5%"),
        ] {
            assert_eq!(Percent::parse(text).unwrap().to_string(), shown, "{text:?}");
        }
        for (text, why) in [
            ("25", "it does not end in %"),
            ("", "it does not end in %"),
            ("%", "it is not a number followed by %"),
            ("-5%", "it is not a number followed by %"),
            ("5.%", "it is not a number followed by %"),
            ("1e2%", "it is not a number followed by %"),
            ("100.01%", "it is over 100%"),
            ("101%", "it is over 100%"),
            ("99999999999999999999%", "it is over 100%"),
            ("2.555%", "it has more than two decimals"),
        ] {
            assert_eq!(Percent::parse(text), Err(why), "{text:?}");
        }
        assert_eq!(Percent::parse("100%"), Ok(Percent::ALL));
        assert_eq!(Percent::parse("0.00%"), Ok(Percent::ZERO));
    }

    #[test]
    fn nought_is_nobody_and_all_is_everybody() {
        for id in ["a", "b", "0b5d9a3c-6a51-4c0e-9f56-0d4c1e7a2b11", ""] {
            let b = Bucket::of(id);
            assert!(!b.on_candidate(Percent::ZERO));
            assert!(b.on_candidate(Percent::ALL));
        }
    }

    /// A fixed value: the bucket must not change between releases, or a fleet mid-rollout would
    /// reshuffle on an upgrade of confgate.
    #[test]
    fn the_bucket_function_is_fixed() {
        let b = Bucket::of("0b5d9a3c-6a51-4c0e-9f56-0d4c1e7a2b11");
        let d = Sha256::digest(b"0b5d9a3c-6a51-4c0e-9f56-0d4c1e7a2b11");
        let want = u64::from_be_bytes(d[..8].try_into().unwrap()) % 10_000;
        assert_eq!(u64::from(b.0), want);
        assert_eq!(Bucket::of("pod-a"), Bucket::of("pod-a"));
    }

    /// Over many pod UIDs the buckets are uniform: the share below each percentage is that
    /// percentage, within five standard deviations of a binomial count.
    #[test]
    fn buckets_are_uniform_over_uids() {
        let n = 20_000u32;
        let buckets: Vec<Bucket> = (0..n)
            .map(|i| {
                let d = Sha256::digest(i.to_be_bytes());
                Bucket::of(&format!(
                    "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                    u32::from_be_bytes(d[0..4].try_into().unwrap()),
                    u16::from_be_bytes(d[4..6].try_into().unwrap()),
                    u16::from_be_bytes(d[6..8].try_into().unwrap()) & 0xfff,
                    u16::from_be_bytes(d[8..10].try_into().unwrap()) & 0xfff,
                    u64::from_be_bytes(d[10..18].try_into().unwrap()) & 0xffff_ffff_ffff,
                ))
            })
            .collect();
        for pct in [1u32, 5, 10, 25, 50, 75, 90, 99] {
            let p = Percent::from_hundredths(pct * 100).unwrap();
            let on = buckets.iter().filter(|b| b.on_candidate(p)).count() as f64;
            let f = p.fraction();
            let (mean, sd) = (f64::from(n) * f, (f64::from(n) * f * (1.0 - f)).sqrt());
            assert!((on - mean).abs() <= 5.0 * sd, "{pct}%: {on} of {n}");
        }
        // Every tenth of the range holds its share too.
        for decile in 0..10u16 {
            let c = buckets.iter().filter(|b| b.0 / 1000 == decile).count() as f64;
            assert!(
                (c - 2000.0).abs() <= 5.0 * (2000.0f64 * 0.9).sqrt(),
                "decile {decile}: {c}"
            );
        }
    }

    proptest! {
        /// A restart reads the same identity: same bucket. Raising the percentage never takes a pod
        /// off the candidate.
        #[test]
        fn raising_the_percentage_never_removes_a_pod(
            id in "[a-z0-9-]{1,63}",
            a in 0u32..=10_000,
            b in 0u32..=10_000,
        ) {
            let (lo, hi) = (a.min(b), a.max(b));
            let (lo, hi) = (Percent::from_hundredths(lo).unwrap(), Percent::from_hundredths(hi).unwrap());
            let bucket = Bucket::of(&id);
            prop_assert_eq!(bucket, Bucket::of(&id.clone()));
            if bucket.on_candidate(lo) {
                prop_assert!(bucket.on_candidate(hi));
            }
            prop_assert!(bucket.fraction() < 1.0);
        }

        #[test]
        fn a_shown_percentage_reads_back(h in 0u32..=10_000) {
            let p = Percent::from_hundredths(h).unwrap();
            prop_assert_eq!(Percent::parse(&p.to_string()), Ok(p));
        }
    }
}
