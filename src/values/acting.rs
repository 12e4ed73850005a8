//! The values of the settings that act on a verdict: the reload target, the metrics that confirm a
//! reload, what an incompatible config does to readiness, and the mode. Each parses from the text a
//! flag, environment variable or annotation gives and shows back as that text.

use std::fmt;
use std::str::FromStr;

/// The `confirm` setting, `URL#SUCCESS[,SUCCESS_TIME]`: where the component's metrics are and which
/// gauges say whether its last reload was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub url: String,
    /// 1: the last reload was applied; 0: it was rejected.
    pub success: String,
    /// Unix seconds of the last successful reload.
    pub success_time: Option<String>,
}

impl FromStr for Confirm {
    type Err = String;
    fn from_str(s: &str) -> Result<Confirm, String> {
        let s = s.trim();
        let (url, names) = s
            .split_once('#')
            .ok_or("no #METRIC after the URL".to_owned())?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err("the URL must start with http:// or https://".into());
        }
        let mut names = names.split(',').map(str::trim);
        let success = names.next().unwrap_or_default();
        let success_time = names.next();
        if names.next().is_some() {
            return Err("at most two metric names".into());
        }
        for n in std::iter::once(success).chain(success_time) {
            if !is_metric_name(n) {
                return Err(format!("{n:?} is not a metric name"));
            }
        }
        Ok(Confirm {
            url: url.to_owned(),
            success: success.to_owned(),
            success_time: success_time.map(str::to_owned),
        })
    }
}

impl fmt::Display for Confirm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.url, self.success)?;
        if let Some(t) = &self.success_time {
            write!(f, ",{t}")?;
        }
        Ok(())
    }
}

fn is_metric_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROM: &str = "http://127.0.0.1:9090/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds";

    #[test]
    fn parses_and_prints_the_setting() {
        let c: Confirm = PROM.parse().unwrap();
        assert_eq!(c.success, "prometheus_config_last_reload_successful");
        assert_eq!(c.to_string(), PROM);
        for bad in [
            "http://x/metrics",
            "ftp://x#a",
            "http://x#",
            "http://x#a,b,c",
            "http://x#9a",
        ] {
            assert!(bad.parse::<Confirm>().is_err(), "{bad}");
        }
    }
}
