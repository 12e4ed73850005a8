//! Pure value types that modules on every floor share: what a gate setting holds, parsed from the
//! text a flag, environment variable or annotation gives and shown back as text (`judging`: range,
//! version-from, required keys, variants; `acting`: reload target, confirmation, on-incompatible,
//! mode), a share of the fleet and a pod's place in it (`share`), durations, and the verdict on a
//! snapshot (`verdict`). No I/O, no clock; the one module imported is `configmap`, for the key-name
//! rule.

mod acting;
mod api_version;
mod judging;
pub mod kube_release;
mod share;
mod signal;
mod source;
mod url;
mod verdict;

pub use acting::{ActingError, Confirm, OnIncompatible};
pub use acting::{Mode, Reload, Validate};
pub use api_version::{ApiVersion, ApiVersions, KubeVersion, Standing};
pub use judging::Variants;
pub use judging::{Accepts, JudgingError, Range, SchemeVersion, VersionFrom};
pub(crate) use judging::{parse_accepts, parse_require, parse_variants};
pub use share::NEXT_SUFFIX;
pub use share::{Bucket, Percent, ROLLOUT_KEY};
pub use signal::{NotASignal, Signal};
pub use source::Source;
pub use url::redact;
pub use url::{Credentials, Url, UrlError, UrlFault};
pub use verdict::{NotAVerdict, Verdict};

/// Why a text is not a duration a setting takes. Each names the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} is not a duration (e.g. 500ms, 30s, 1m30s, 1.5m)")]
    Syntax(String),
    #[error("{0:?} is not from 100ms to 5m")]
    ValidateTimeout(String),
    #[error("{0:?} is longer than 1h")]
    Spread(String),
    #[error("{0:?} is longer than 24h")]
    Trial(String),
}

/// Parses a duration as Go's `time.ParseDuration` (and so Kubernetes' `metav1.Duration`) reads one:
/// a sequence of decimal numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `ms`,
/// `s`, `m`, `h`), such as `300ms`, `1.5m`, `1m30s` or `2h45m`; `0` alone; and, as confgate always
/// has, a bare number of seconds (`30`). No sign: no setting takes a negative duration.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, DurationError> {
    let s = s.trim();
    let bad = || DurationError::Syntax(s.to_owned());
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = s.parse().map_err(|_| bad())?;
        return Ok(std::time::Duration::from_secs(secs));
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut nanos: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, after) = rest.split_at(num_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let per: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
        if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(bad());
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad())?
        };
        let mut part = whole.checked_mul(per).ok_or_else(bad)?;
        // The fraction, digit by digit, as Go does (the digits past a nanosecond do not count).
        let mut scale = per;
        for d in frac.bytes() {
            scale /= 10;
            part += u128::from(d - b'0') * scale;
        }
        nanos = nanos.checked_add(part).ok_or_else(bad)?;
        rest = next;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad())?;
    Ok(std::time::Duration::new(
        secs,
        (nanos % 1_000_000_000) as u32,
    ))
}

/// The longest reload spread: longer would leave a change unapplied on part of the fleet for more
/// than an hour, which no in-place edit needs (a rollout does that with the pods' own pace).
pub(crate) const MAX_SPREAD: std::time::Duration = std::time::Duration::from_secs(3600);

/// The longest a `validate` checker may run: longer holds every change back for minutes.
pub(crate) const MAX_VALIDATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Parses the checker's time bound: from 100ms to [`MAX_VALIDATE_TIMEOUT`].
pub(crate) fn parse_validate_timeout(s: &str) -> Result<std::time::Duration, DurationError> {
    let d = parse_duration(s)?;
    if d < std::time::Duration::from_millis(100) || d > MAX_VALIDATE_TIMEOUT {
        return Err(DurationError::ValidateTimeout(s.to_owned()));
    }
    Ok(d)
}

/// Parses the reload spread: a duration from `0` (off) to [`MAX_SPREAD`].
pub(crate) fn parse_spread(s: &str) -> Result<std::time::Duration, DurationError> {
    let d = parse_duration(s)?;
    if d > MAX_SPREAD {
        return Err(DurationError::Spread(s.trim().to_owned()));
    }
    Ok(d)
}

/// The longest trial period: a config that ran a day without a restart has proven what a trial can.
pub(crate) const MAX_TRIAL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Parses the known-good trial period: `off` (or `0`: nothing is recorded) or a duration up to
/// [`MAX_TRIAL`].
pub(crate) fn parse_trial(s: &str) -> Result<std::time::Duration, DurationError> {
    if s.trim() == "off" {
        return Ok(std::time::Duration::ZERO);
    }
    let d = parse_duration(s)?;
    if d > MAX_TRIAL {
        return Err(DurationError::Trial(s.trim().to_owned()));
    }
    Ok(d)
}

/// A duration as [`parse_duration`] reads it back: the largest unit that shows it whole.
pub fn duration_text(d: std::time::Duration) -> String {
    let ns = d.as_nanos();
    if !ns.is_multiple_of(1_000_000) {
        return match ns {
            _ if ns.is_multiple_of(1000) => format!("{}us", ns / 1000),
            _ => format!("{ns}ns"),
        };
    }
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

    /// Go's `time.ParseDuration` syntax, as Kubernetes users write a `metav1.Duration`, besides the
    /// forms confgate always read.
    #[test]
    fn durations_in_go_syntax() {
        let ms = |s: &str| parse_duration(s).map(|d| d.as_millis());
        for (text, want) in [
            ("1m30s", 90_000),
            ("1.5m", 90_000),
            ("300ms", 300),
            ("2h", 7_200_000),
            ("2h45m", 9_900_000),
            (".5s", 500),
            ("1.s", 1000),
            ("0", 0),
            ("0s", 0),
            ("1h0m0s", 3_600_000),
            (" 90s ", 90_000),
        ] {
            assert_eq!(ms(text), Ok(want), "{text}");
        }
        assert_eq!(parse_duration("1500us").unwrap().as_micros(), 1500);
        assert_eq!(parse_duration("1µs").unwrap().as_nanos(), 1000);
        assert_eq!(parse_duration("7ns").unwrap().as_nanos(), 7);
        for bad in [
            "-1s", "+1s", "1x", "s", ".s", "1..5s", "1m30", "1 m", "1.5.5m",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // Shown back as read.
        for d in ["1500us", "7ns", "90s", "1500ms"] {
            assert_eq!(duration_text(parse_duration(d).unwrap()), d);
        }
        // A spread in Go syntax is a good spread, and still within an hour.
        assert_eq!(
            parse_spread("1m30s").map(duration_text),
            Ok("90s".to_owned())
        );
        assert!(parse_spread("1h0m1s").is_err());
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
            parse_spread("61m").map_err(|e| e.to_string()),
            Err("\"61m\" is longer than 1h".to_owned())
        );
        assert!(parse_spread("-1s").is_err());
    }
}
