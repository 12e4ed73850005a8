//! Pure value types that modules on every floor share: what a gate setting holds, parsed from the
//! text a flag, environment variable or annotation gives and shown back as text (`judging`: range,
//! version-from, required keys, variants; `acting`: reload target, confirmation, on-incompatible,
//! mode), durations, and the verdict on a snapshot (`verdict`). No I/O, no clock; the one module
//! imported is `configmap`, for the key-name rule.

mod acting;
mod api_version;
mod judging;
mod verdict;

pub(crate) use acting::redact;
pub use acting::{Confirm, OnIncompatible};
pub use acting::{Mode, Reload, Validate};
pub use api_version::{ApiVersion, ApiVersions, KubeVersion, Standing};
pub use judging::Variants;
pub use judging::{Accepts, Range, SchemeVersion, VersionFrom};
pub(crate) use judging::{parse_accepts, parse_require, parse_variants};
pub use verdict::Verdict;

/// Parses a duration such as `500ms`, `30s`, `5m` or `1h` (a bare number is seconds).
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
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

/// The longest reload spread: longer would leave a change unapplied on part of the fleet for more
/// than an hour, which no in-place edit needs (a rollout does that with the pods' own pace).
pub(crate) const MAX_SPREAD: std::time::Duration = std::time::Duration::from_secs(3600);

/// The longest a `validate` checker may run: longer holds every change back for minutes.
pub(crate) const MAX_VALIDATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Parses the checker's time bound: from 100ms to [`MAX_VALIDATE_TIMEOUT`].
pub(crate) fn parse_validate_timeout(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d < std::time::Duration::from_millis(100) || d > MAX_VALIDATE_TIMEOUT {
        return Err(format!("{s:?} is not from 100ms to 5m"));
    }
    Ok(d)
}

/// Parses the reload spread: a duration from `0` (off) to [`MAX_SPREAD`].
pub(crate) fn parse_spread(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d > MAX_SPREAD {
        return Err(format!("{:?} is longer than 1h", s.trim()));
    }
    Ok(d)
}

/// A duration as [`parse_duration`] reads it back: the largest unit that shows it whole.
pub(crate) fn duration_text(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0s".to_owned(),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
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

    #[test]
    fn spreads_read_back_and_stay_within_an_hour() {
        for (text, shown) in [
            ("0", "0s"),
            ("0s", "0s"),
            ("1500ms", "1500ms"),
            ("3000ms", "3s"),
            ("90s", "90s"),
            ("120s", "2m"),
            ("1h", "1h"),
            ("60m", "1h"),
        ] {
            let d = parse_spread(text).unwrap();
            assert_eq!(duration_text(d), shown, "{text}");
            assert_eq!(parse_spread(shown), Ok(d), "{shown}");
        }
        assert_eq!(
            parse_spread("61m"),
            Err("\"61m\" is longer than 1h".to_owned())
        );
        assert!(parse_spread("-1s").is_err());
    }
}
