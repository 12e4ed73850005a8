//! Prometheus metrics: counters kept here, gauges derived from a [`View`] of the status at scrape time,
//! one place for names.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::snapshot::PrintedHash;
use crate::values::{Percent, Verdict};

/// What the gauges show, taken from the published status at scrape time (`From<&Status>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct View<'a> {
    pub ready: bool,
    pub stale: bool,
    pub started: bool,
    /// A `confgate.io/` annotation is bad or unknown.
    pub settings_problem: bool,
    /// The active config's version (empty when unversioned) and content hash.
    pub active: Option<(&'a str, &'a PrintedHash)>,
    /// The applied config's version and content hash.
    pub applied: Option<(&'a str, &'a PrintedHash)>,
    /// Whether the last finished reload was applied; `None` before any, and while one is in flight.
    pub last_reload_successful: Option<bool>,
    /// The active variant's key, with the variants setting.
    pub variant: Option<&'a str>,
    /// With a rollout in the ConfigMap: this pod's track and the percentage (`None`: no
    /// `confgate.rollout` key, 0%).
    pub rollout: Option<(&'a str, Option<Percent>)>,
    /// The active config is the known-good from the record: the source holds nothing accepted.
    pub known_good: bool,
}

/// Upper bounds of the reload-duration histogram, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// Which watch an error came from: `confgate_watch_errors_total`'s `source` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchSource {
    /// The file watch on the volume and the annotations.
    Files,
    /// The API source's lists and watches.
    Api,
}

#[derive(Debug, Default)]
pub struct Metrics {
    candidates: [AtomicU64; 7],
    promotions: AtomicU64,
    promotion_failures: AtomicU64,
    repairs: AtomicU64,
    reload_success: AtomicU64,
    reload_failure: AtomicU64,
    watch_errors_files: AtomicU64,
    watch_errors_api: AtomicU64,
    /// Unix seconds of the last promotion, as f64 bits.
    last_promotion: AtomicU64,
    histogram: Mutex<Histogram>,
}

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// The counter of a verdict. A match, not a search of [`Verdict::ALL`]: a verdict missing from that
/// list must not fall back to another's counter (it once fell back to `accepted`); a new variant
/// fails to compile here until it has its own.
fn idx(v: Verdict) -> usize {
    match v {
        Verdict::Accepted => 0,
        Verdict::TooNew => 1,
        Verdict::TooOld => 2,
        Verdict::OutOfRange => 3,
        Verdict::Invalid => 4,
        Verdict::Missing => 5,
        Verdict::RejectedByComponent => 6,
    }
}

impl Metrics {
    pub fn candidate(&self, v: Verdict) {
        self.candidates[idx(v)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn candidates(&self, v: Verdict) -> u64 {
        self.candidates[idx(v)].load(Ordering::Relaxed)
    }

    pub fn promoted(&self, unix_seconds: f64) {
        self.promotions.fetch_add(1, Ordering::Relaxed);
        self.last_promotion
            .store(unix_seconds.to_bits(), Ordering::Relaxed);
    }

    pub(crate) fn repaired(&self) {
        self.repairs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn promotion_failed(&self) {
        self.promotion_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn watch_error(&self, source: WatchSource) {
        match source {
            WatchSource::Files => &self.watch_errors_files,
            WatchSource::Api => &self.watch_errors_api,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub fn reload(&self, ok: bool, seconds: f64) {
        if ok {
            &self.reload_success
        } else {
            &self.reload_failure
        }
        .fetch_add(1, Ordering::Relaxed);
        let mut h = self.histogram.lock().unwrap_or_else(|p| p.into_inner());
        for (i, le) in BUCKETS.iter().enumerate() {
            if seconds <= *le {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// Renders the text exposition format.
    pub fn render<'a>(&self, view: impl Into<View<'a>>) -> String {
        let s: View<'a> = view.into();
        let mut out = String::with_capacity(2048);
        let b = |x: bool| u8::from(x);
        gauge(
            &mut out,
            "confgate_ready",
            "1 when confgate reports ready.",
            b(s.ready),
        );
        gauge(
            &mut out,
            "confgate_stale",
            "1 when the active config is not the newest snapshot.",
            b(s.stale),
        );
        gauge(
            &mut out,
            "confgate_known_good",
            "1 while the active config is the known-good from the record, because the source holds no accepted config.",
            b(s.known_good),
        );
        gauge(
            &mut out,
            "confgate_started",
            "1 once a first accepted config has been in place.",
            b(s.started),
        );
        gauge(
            &mut out,
            "confgate_settings_problems",
            "1 while a confgate.io/ annotation is bad or unknown.",
            b(s.settings_problem),
        );
        head(
            &mut out,
            "confgate_active_config_info",
            "The active config: version, content hash of what the component reads, and the variant key when variants are set.",
            "gauge",
        );
        if let Some((version, sha256)) = s.active {
            let variant = s
                .variant
                .map(|v| format!(",variant=\"{}\"", escape(v)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "confgate_active_config_info{{version=\"{}\",sha256=\"{sha256}\"{variant}}} 1",
                escape(version),
            );
        }
        if let Some((track, percent)) = s.rollout {
            let percent = percent.unwrap_or(Percent::ZERO);
            head(
                &mut out,
                "confgate_rollout_info",
                "With a rollout in the ConfigMap: the track this pod runs (stable or candidate) and the rollout's percentage.",
                "gauge",
            );
            let _ = writeln!(
                out,
                "confgate_rollout_info{{track=\"{track}\",percent=\"{percent}\"}} 1",
            );
            gauge(
                &mut out,
                "confgate_rollout_candidate_ratio",
                "With a rollout in the ConfigMap: the share of pods it puts on the candidate, 0 to 1.",
                percent.fraction(),
            );
        }
        head(
            &mut out,
            "confgate_applied_config_info",
            "The config the component confirmed it runs: version and content hash.",
            "gauge",
        );
        if let Some((version, sha256)) = s.applied {
            let _ = writeln!(
                out,
                "confgate_applied_config_info{{version=\"{}\",sha256=\"{sha256}\"}} 1",
                escape(version),
            );
        }
        if let Some(ok) = s.last_reload_successful {
            gauge(
                &mut out,
                "confgate_last_reload_successful",
                "1 when the component applied the last reload, 0 when it rejected it or was not reached.",
                b(ok),
            );
        }
        head(
            &mut out,
            "confgate_candidates_total",
            "Snapshots judged, by verdict.",
            "counter",
        );
        for v in Verdict::ALL {
            let _ = writeln!(
                out,
                "confgate_candidates_total{{verdict=\"{v}\"}} {}",
                self.candidates(v)
            );
        }
        counter(
            &mut out,
            "confgate_promotions_total",
            "Configs promoted.",
            &self.promotions,
        );
        counter(
            &mut out,
            "confgate_promotion_failures_total",
            "Promotions that failed; the previous config stayed whole.",
            &self.promotion_failures,
        );
        counter(
            &mut out,
            "confgate_promoted_dir_repairs_total",
            "Times the promoted dir was found changed behind confgate's back and promoted again.",
            &self.repairs,
        );
        head(
            &mut out,
            "confgate_watch_errors_total",
            "Watch errors, by source: files (the file watch's errors and overflows) or api (failed lists and watches of the API source).",
            "counter",
        );
        for (source, n) in [
            ("files", &self.watch_errors_files),
            ("api", &self.watch_errors_api),
        ] {
            let _ = writeln!(
                out,
                "confgate_watch_errors_total{{source=\"{source}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        head(
            &mut out,
            "confgate_reloads_total",
            "Reload attempts, by result.",
            "counter",
        );
        let _ = writeln!(
            out,
            "confgate_reloads_total{{result=\"success\"}} {}",
            self.reload_success.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "confgate_reloads_total{{result=\"failure\"}} {}",
            self.reload_failure.load(Ordering::Relaxed)
        );
        head(
            &mut out,
            "confgate_reload_duration_seconds",
            "Duration of reload attempts.",
            "histogram",
        );
        {
            let h = self.histogram.lock().unwrap_or_else(|p| p.into_inner());
            for (le, c) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    out,
                    "confgate_reload_duration_seconds_bucket{{le=\"{le}\"}} {c}"
                );
            }
            let _ = writeln!(
                out,
                "confgate_reload_duration_seconds_bucket{{le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(out, "confgate_reload_duration_seconds_sum {}", h.sum);
            let _ = writeln!(out, "confgate_reload_duration_seconds_count {}", h.count);
        }
        head(
            &mut out,
            "confgate_last_promotion_timestamp_seconds",
            "Unix time of the last promotion (0 before any).",
            "gauge",
        );
        let _ = writeln!(
            out,
            "confgate_last_promotion_timestamp_seconds {}",
            f64::from_bits(self.last_promotion.load(Ordering::Relaxed))
        );
        head(
            &mut out,
            "confgate_build_info",
            "The running confgate build.",
            "gauge",
        );
        let _ = writeln!(
            out,
            "confgate_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        out
    }
}

fn head(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, v: impl std::fmt::Display) {
    head(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {v}");
}

fn counter(out: &mut String, name: &str, help: &str, v: &AtomicU64) {
    head(out, name, help, "counter");
    let _ = writeln!(out, "{name} {}", v.load(Ordering::Relaxed));
}

/// Label values escape backslash, quote and newline.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.reload(true, 0.002);
        m.reload(false, 2.0);
        let text = m.render(View::default());
        assert!(text.contains("confgate_reload_duration_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("confgate_reload_duration_seconds_bucket{le=\"5\"} 2"));
        assert!(text.contains("confgate_reload_duration_seconds_count 2"));
        assert!(text.contains("confgate_reloads_total{result=\"failure\"} 1"));
    }

    #[test]
    fn each_verdict_counts_under_its_own_label_only() {
        for (n, v) in Verdict::ALL.into_iter().enumerate() {
            let m = Metrics::default();
            for _ in 0..=n {
                m.candidate(v);
            }
            let text = m.render(View::default());
            for other in Verdict::ALL {
                let want = if other == v { n + 1 } else { 0 };
                let line = format!("confgate_candidates_total{{verdict=\"{other}\"}} {want}\n");
                assert!(text.contains(&line), "{v}: {line}{text}");
            }
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
