//! Pure value types that modules on every floor share: what a gate setting holds, parsed from the
//! text a flag, environment variable or annotation gives and shown back as text (`judging`: range,
//! version-from, required keys, variants; `acting`: reload target, confirmation, on-incompatible,
//! mode), durations, and the verdict on a snapshot (`verdict`). No I/O, no clock; the one module
//! imported is `configmap`, for the key-name rule.

mod acting;
mod judging;
mod verdict;

pub use acting::{Confirm, Mode, OnIncompatible, Reload, redact};
pub use judging::{Accepts, Variants, VersionFrom, parse_accepts, parse_require, parse_variants};
pub use verdict::Verdict;

/// Parses a duration such as `500ms`, `30s`, `5m` or `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 30s, 5m)"))?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    }
    .ok_or_else(|| format!("{s:?} is not a duration (e.g. 500ms, 30s, 5m)"))?;
    Ok(std::time::Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
        assert_eq!(parse_duration("30s").unwrap().as_secs(), 30);
        assert_eq!(parse_duration("2m").unwrap().as_secs(), 120);
        assert_eq!(parse_duration("5").unwrap().as_secs(), 5);
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("").is_err());
    }
}
