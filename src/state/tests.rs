//! The status as written, read back and worded.

use super::*;
use crate::snapshot::PrintedHash;
use crate::values::{Bucket, Percent, Verdict};
use std::time::Instant;

fn holding_status(stale: bool, newest: Option<&str>, verdict: Verdict) -> Status {
    Status {
        stale,
        active: Some(ActiveView {
            version: Some("2.4.1".into()),
            sha256: PrintedHash::Sha256([1; 32]),
            since: jiff::Timestamp::UNIX_EPOCH,
            verdict: Verdict::Accepted,
            variant: None,
        }),
        candidate: Some(CandidateView {
            version: newest.map(str::to_owned),
            sha256: None,
            verdict,
            reason: "why".into(),
            variant: None,
        }),
        ..Status::default()
    }
}

#[test]
fn status_body_is_the_status_in_its_order_then_the_source() {
    let now = Instant::now();
    let source = SourceView {
        kind: "configmap",
        namespace: "prod".into(),
        name: "app".into(),
        uid: Some("uid-1".into()),
        resource_version: None,
        recreated: false,
        previous_uid: None,
        watching: false,
        last_error: Some("list: forbidden".into()),
        failing_since: Some((now, "2026-01-02T03:04:05Z".parse().unwrap())),
        last_error_at: Some(now),
        stuck_after: Duration::from_secs(3600),
    };
    let plain = Status::default();
    let with_source = Status {
        source: Some(source),
        ..Status::default()
    };
    let text = serde_json::to_string(&StatusBody::of(&with_source)).unwrap();
    // One serialisation of the typed struct: its fields in their declared order, `source` last.
    let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
    assert!(
        at("ready") < at("reason") && at("reason") < at("accepts"),
        "{text}"
    );
    assert!(at("spread") < at("source"), "{text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["source"]["uid"], "uid-1");
    assert_eq!(body["source"]["watch"]["healthy"], false);
    assert_eq!(
        body["source"]["watch"]["failing_since"],
        "2026-01-02T03:04:05Z"
    );
    assert_eq!(body["source"]["watch"]["last_error"], "list: forbidden");
    // Without a source the body is the status alone.
    assert_eq!(
        serde_json::to_value(StatusBody::of(&plain)).unwrap(),
        serde_json::to_value(&plain).unwrap()
    );
}

#[test]
fn holding_names_what_runs_and_what_is_refused() {
    let s = holding_status(true, Some("3.0.0"), Verdict::TooNew);
    let h = Holding::of(&s).unwrap();
    assert_eq!(h.to_string(), "holding 2.4.1; 3.0.0 is too-new");
    assert_eq!(
        h.because("version 3.0.0 is newer than ^2 allows")
            .to_string(),
        "holding 2.4.1; 3.0.0 is too-new: version 3.0.0 is newer than ^2 allows"
    );
    let missing = holding_status(true, None, Verdict::Missing);
    assert_eq!(
        Holding::of(&missing).unwrap().to_string(),
        "holding 2.4.1; the newest config is missing"
    );
    // Observe mode runs the newest config: nothing is held back.
    let mut observe = holding_status(false, None, Verdict::TooNew);
    observe.candidate = None;
    assert_eq!(Holding::of(&observe), None);
}

#[test]
fn status_reads_back_as_it_was_written() {
    let mut s = holding_status(true, Some("3.0.0"), Verdict::TooNew);
    s.reload.last_success_sha256 = Some(PrintedHash::HmacSha256([2; 32]));
    s.applied = Some(AppliedView {
        version: None,
        sha256: PrintedHash::Sha256([3; 32]),
        since: "2026-11-29T22:00:00Z".parse().unwrap(),
    });
    s.rollout = Some(
        Rollout {
            percent: Percent::parse("25%").ok(),
            bucket: Bucket::from_hundredths(1234),
            assigned: Track::Candidate,
            keys: vec!["config.yaml".into()],
            held: None,
            candidate_own: None,
        }
        .view(),
    );
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains(r#""since":"2026-11-29T22:00:00Z""#), "{json}");
    // The percentage is held once, typed, and shown as the text it was read from.
    assert!(
        json.contains(r#""percent":"25%","bucket":"12.34%""#)
            && json.contains("bucket 12.34% is below 25%: on the candidate"),
        "{json}"
    );
    let back: Status = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
}
