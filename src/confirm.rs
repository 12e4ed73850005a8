//! Confirmation of a reload through the component's own metrics: the `confirm` setting names a
//! Prometheus-format endpoint and the gauges that say whether the last reload was applied.
//!
//! Syntax: `URL#SUCCESS[,SUCCESS_TIME]`, e.g.
//! `http://127.0.0.1:9090/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds`.
//! `SUCCESS` is 1 when the component's last reload succeeded and 0 when it failed; `SUCCESS_TIME`
//! (optional, recommended) is the Unix time of its last successful reload. `none` turns confirmation off.
//!
//! The endpoint is read line by line as it streams (never held whole), so a large exposition costs a
//! line's buffer, not its size.
//!
//! A success time is compared at the resolution the metric has (whole seconds or finer). A 4xx/5xx
//! reload answer, or a metric saying the reload failed, is `reload::Outcome::Rejected` with the
//! component's first line, never retried; anything that did not reach the component (a 3xx
//! included: redirects are not followed) is `Failed`, and retried.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};

use crate::values::{Confirm, Url};

/// How long confgate waits after a reload for the metrics to say applied or rejected.
pub(crate) const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// With only the `SUCCESS` gauge and a value that did not change, how long before the value is taken.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);
/// How often the endpoint is read while waiting.
pub(crate) const POLL: Duration = Duration::from_millis(200);
/// Bound on one read of the endpoint.
const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Bound on what is read of one exposition, and on one line of it.
const MAX_BYTES: usize = 16 << 20;
const MAX_LINE: usize = 64 << 10;

/// Why the endpoint could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("GET {url}: {what}")]
    Read { url: Url, what: String },
    #[error("GET {url} answered {status}")]
    Status { url: Url, status: u16 },
    #[error("{url} exposes no {metric}")]
    Absent { url: Url, metric: String },
}

/// The gauges as read once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reading {
    pub success: f64,
    pub success_time: Option<f64>,
}

/// What the metrics say about a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Said {
    Applied,
    /// Rejected, and how the metrics said so.
    Rejected(String),
    /// The metrics never answered, or never moved: the reload may not have reached the component.
    Unconfirmed(String),
}

/// Reads the gauges once.
pub(crate) async fn read(client: &crate::http::Client, c: &Confirm) -> Result<Reading, Error> {
    let rd = |what: String| Error::Read {
        url: c.url.clone(),
        what,
    };
    let fetch = async {
        let req = crate::http::request(hyper::Method::GET, &c.url)
            .body(Empty::<Bytes>::new())
            .map_err(|e| rd(e.to_string()))?;
        let resp = client.send(req).await.map_err(|e| rd(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(Error::Status {
                url: c.url.clone(),
                status: resp.status().as_u16(),
            });
        }
        let mut scan = Scan::new(c);
        let mut body = resp.into_body();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| rd(e.to_string()))?;
            if let Ok(data) = frame.into_data()
                && !scan.feed(&data)
            {
                break;
            }
        }
        scan.finish();
        Ok(scan)
    };
    let scan = tokio::time::timeout(READ_TIMEOUT, fetch)
        .await
        .map_err(|_| rd(format!("no answer within {READ_TIMEOUT:?}")))??;
    let success = scan.success.ok_or_else(|| Error::Absent {
        url: c.url.clone(),
        metric: c.success.clone(),
    })?;
    if let (Some(name), None) = (&c.success_time, scan.success_time) {
        return Err(Error::Absent {
            url: c.url.clone(),
            metric: name.clone(),
        });
    }
    Ok(Reading {
        success,
        success_time: scan.success_time,
    })
}

/// Waits (bounded by [`CONFIRM_TIMEOUT`]) until the metrics say whether the reload sent at `sent_at`
/// (Unix seconds) was applied. `before` is what they said just before it was sent.
///
/// Applied: `SUCCESS` is 1 and `SUCCESS_TIME` is at or past `sent_at`, at the resolution the metric
/// has (`succeeded_since`). Rejected: `SUCCESS` went from 1 to 0, or is still 0 when the bound passes
/// with no success since the reload. Without `SUCCESS_TIME`, a change of `SUCCESS` decides at once and
/// an unchanged value is taken after [`SETTLE`].
pub(crate) async fn wait(
    client: &crate::http::Client,
    c: &Confirm,
    before: Option<Reading>,
    sent_at: f64,
) -> Said {
    let start = tokio::time::Instant::now();
    let mut last: Option<Reading> = None;
    let mut last_err = None;
    loop {
        match read(client, c).await {
            Ok(r) => {
                if let Some(said) = judge(c, before, r, sent_at, start.elapsed()) {
                    return said;
                }
                last = Some(r);
            }
            Err(e) => last_err = Some(e.to_string()),
        }
        if start.elapsed() >= CONFIRM_TIMEOUT {
            return match last {
                Some(r) if r.success == 0.0 => Said::Rejected(format!(
                    "{} is 0 and no successful reload since this one ({}s)",
                    c.success,
                    CONFIRM_TIMEOUT.as_secs()
                )),
                Some(_) => Said::Unconfirmed(format!(
                    "{} did not move past the reload within {}s",
                    c.success_time.as_deref().unwrap_or(&c.success),
                    CONFIRM_TIMEOUT.as_secs()
                )),
                None => Said::Unconfirmed(last_err.unwrap_or_default()),
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

/// For a start the component was not told about (every process of a signal target started after the
/// promotion, so each read it at start-up): waits, bounded by [`CONFIRM_TIMEOUT`], until the metrics say
/// its last load succeeded. A component still starting says 0 until its first load, so 0 is never a
/// rejection here: it is unconfirmed, and looked at again later.
pub(crate) async fn started(client: &crate::http::Client, c: &Confirm) -> Said {
    let start = tokio::time::Instant::now();
    loop {
        let why = match read(client, c).await {
            Ok(r) if r.success == 1.0 => return Said::Applied,
            Ok(_) => format!("{} is not 1 yet", c.success),
            Err(e) => e.to_string(),
        };
        if start.elapsed() >= CONFIRM_TIMEOUT {
            return Said::Unconfirmed(why);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether a reading shows a successful load at or after `since` (Unix seconds), without a reload
/// having been sent: the component loaded the config promoted at `since` when it started. Needs
/// `SUCCESS_TIME`. A whole-second time counts only from the second after the one `since` falls in: a
/// load in that same second may have come before the promotion.
pub(crate) fn loaded_since(r: Reading, since: f64) -> bool {
    r.success == 1.0
        && r.success_time.is_some_and(|t| {
            if t.fract() == 0.0 {
                t > since.floor()
            } else {
                t >= since
            }
        })
}

/// One reading's verdict, `None` while it cannot tell yet.
fn judge(
    c: &Confirm,
    before: Option<Reading>,
    now: Reading,
    sent_at: f64,
    waited: Duration,
) -> Option<Said> {
    let was_ok = before.is_some_and(|b| b.success == 1.0);
    let rejected = || Said::Rejected(format!("{} is 0 after the reload", c.success));
    match now.success_time {
        Some(t) => {
            if now.success == 1.0
                && succeeded_since(t, before.and_then(|b| b.success_time), sent_at)
            {
                Some(Said::Applied)
            } else if now.success == 0.0 && was_ok {
                Some(rejected())
            } else {
                None
            }
        }
        None => {
            let changed = before.is_some_and(|b| b.success != now.success);
            if changed || before.is_none() || waited >= SETTLE {
                Some(if now.success == 1.0 {
                    Said::Applied
                } else {
                    rejected()
                })
            } else {
                None
            }
        }
    }
}

/// Whether a success at `t` (Unix seconds, as the metric reports it) is the reload sent at `sent_at`,
/// compared at the resolution the metric has. A metric with fractions of a second must be at or past
/// `sent_at`. One in whole seconds (VictoriaMetrics reports an integer) says 12 for a reload at 12.7 s,
/// which is never at or past a send at 12.3 s: a later second counts, and the second of the send
/// counts when the time moved since just before the send (`before`). A second success within that same
/// second cannot be told apart: it stays unconfirmed, and the retry lands in a later second.
fn succeeded_since(t: f64, before: Option<f64>, sent_at: f64) -> bool {
    if t >= sent_at {
        return true;
    }
    t.fract() == 0.0 && t == sent_at.floor() && before.is_some_and(|b| t > b)
}

/// A streaming scan of the text exposition for the two names.
struct Scan<'a> {
    c: &'a Confirm,
    line: Vec<u8>,
    skipping: bool,
    seen: usize,
    success: Option<f64>,
    success_time: Option<f64>,
}

impl<'a> Scan<'a> {
    fn new(c: &'a Confirm) -> Scan<'a> {
        Scan {
            c,
            line: Vec::new(),
            skipping: false,
            seen: 0,
            success: None,
            success_time: None,
        }
    }

    /// Takes the next bytes; `false` once enough is known or read.
    fn feed(&mut self, data: &[u8]) -> bool {
        self.seen += data.len();
        for &b in data {
            if b == b'\n' {
                if !self.skipping {
                    let line = std::mem::take(&mut self.line);
                    self.take_line(&line);
                    self.line = line;
                }
                self.line.clear();
                self.skipping = false;
            } else if !self.skipping {
                if self.line.len() >= MAX_LINE {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.push(b);
                }
            }
        }
        let done = self.success.is_some()
            && (self.c.success_time.is_none() || self.success_time.is_some());
        !done && self.seen < MAX_BYTES
    }

    fn finish(&mut self) {
        if !self.skipping && !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.take_line(&line);
        }
    }

    fn take_line(&mut self, line: &[u8]) {
        let Ok(line) = std::str::from_utf8(line) else {
            return;
        };
        if self.success.is_none()
            && let Some(v) = sample(line, &self.c.success)
        {
            self.success = Some(v);
        }
        if let Some(name) = &self.c.success_time
            && self.success_time.is_none()
            && let Some(v) = sample(line, name)
        {
            self.success_time = Some(v);
        }
    }
}

/// The value of `line` when it is a sample of `name` (the first one counts, labels or not).
fn sample(line: &str, name: &str) -> Option<f64> {
    let rest = line.strip_prefix(name)?;
    let rest = if let Some(labelled) = rest.strip_prefix('{') {
        &labelled[labelled.rfind('}')? + 1..]
    } else if rest.starts_with([' ', '\t']) {
        rest
    } else {
        return None;
    };
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROM: &str = "http://127.0.0.1:9090/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds";

    #[test]
    fn scans_samples_across_chunks_and_ignores_lookalikes() {
        let c: Confirm = PROM.parse().unwrap();
        let text = "# HELP prometheus_config_last_reload_successful x\n\
            prometheus_config_last_reload_successful_total 7\n\
            prometheus_config_last_reload_successful 0\n\
            prometheus_config_last_reload_success_timestamp_seconds{a=\"}\"} 1.7e+09\n";
        for chunk in [1, 3, 17, text.len()] {
            let mut s = Scan::new(&c);
            for part in text.as_bytes().chunks(chunk) {
                s.feed(part);
            }
            s.finish();
            assert_eq!((s.success, s.success_time), (Some(0.0), Some(1.7e9)));
        }
    }

    #[test]
    fn judges_by_success_time_and_by_change() {
        let c: Confirm = PROM.parse().unwrap();
        let r = |success, t| Reading {
            success,
            success_time: Some(t),
        };
        let zero = Duration::ZERO;
        assert_eq!(
            judge(&c, Some(r(1.0, 5.0)), r(1.0, 11.0), 10.0, zero),
            Some(Said::Applied)
        );
        assert_eq!(judge(&c, Some(r(1.0, 5.0)), r(1.0, 5.0), 10.0, zero), None);
        assert!(matches!(
            judge(&c, Some(r(1.0, 5.0)), r(0.0, 5.0), 10.0, zero),
            Some(Said::Rejected(_))
        ));
        // Still 0 from an earlier failure: not yet known.
        assert_eq!(judge(&c, Some(r(0.0, 5.0)), r(0.0, 5.0), 10.0, zero), None);
        // Whole seconds, as VictoriaMetrics reports them: a reload sent at 10.4 s and applied at
        // 10.6 s reads 10. It counts when the time moved since just before the send; when an earlier
        // success in that same second already read 10, it cannot be told apart.
        assert_eq!(
            judge(&c, Some(r(1.0, 5.0)), r(1.0, 10.0), 10.4, zero),
            Some(Said::Applied)
        );
        assert_eq!(
            judge(&c, Some(r(1.0, 10.0)), r(1.0, 10.0), 10.4, zero),
            None
        );
        assert_eq!(judge(&c, None, r(1.0, 10.0), 10.4, zero), None);
        assert_eq!(
            judge(&c, Some(r(1.0, 10.0)), r(1.0, 11.0), 10.4, zero),
            Some(Said::Applied)
        );
        // Fractions of a second are compared as they are: an earlier success is not this one.
        assert_eq!(judge(&c, Some(r(1.0, 5.0)), r(1.0, 10.2), 10.4, zero), None);
        assert_eq!(judge(&c, Some(r(1.0, 5.0)), r(1.0, 9.0), 10.4, zero), None);
        // At start-up, without a reload: a load after the promotion, never one in its second.
        let ok = |t| loaded_since(r(1.0, t), 10.4);
        assert!(ok(10.5) && ok(11.0) && !ok(10.0) && !ok(10.3));
        assert!(!loaded_since(r(0.0, 11.0), 10.4));
        assert!(!loaded_since(
            Reading {
                success: 1.0,
                success_time: None
            },
            10.4
        ));
        let g = Confirm {
            success_time: None,
            ..c
        };
        let r = |success| Reading {
            success,
            success_time: None,
        };
        assert_eq!(judge(&g, Some(r(1.0)), r(1.0), 0.0, zero), None);
        assert_eq!(
            judge(&g, Some(r(1.0)), r(1.0), 0.0, SETTLE),
            Some(Said::Applied)
        );
        assert!(matches!(
            judge(&g, Some(r(1.0)), r(0.0), 0.0, zero),
            Some(Said::Rejected(_))
        ));
    }
}
