//! What the conditions, the facts and each notice's Event say for a status.

use super::*;
use crate::state::{ActiveView, CandidateView};

/// An accepted config in force, version `v`.
fn active(v: &str) -> Option<ActiveView> {
    Some(ActiveView {
        version: Some(v.into()),
        sha256: hash(0xab),
        since: jiff::Timestamp::UNIX_EPOCH,
        verdict: Verdict::Accepted,
        variant: None,
    })
}

/// The newest config seen, version `v`, judged `verdict` for `reason`.
fn candidate(v: &str, verdict: Verdict, reason: &str) -> Option<CandidateView> {
    Some(CandidateView {
        version: Some(v.into()),
        sha256: Some(hash(0xcd)),
        verdict,
        reason: reason.into(),
        variant: None,
    })
}

fn hash(byte: u8) -> PrintedHash {
    PrintedHash::Sha256([byte; 32])
}

/// `confgate.io/config-current`.
fn condition(s: &Status) -> Option<Condition> {
    conditions(s).get(1).cloned()
}

fn compatible(s: &Status) -> (bool, String) {
    let c = conditions(s).swap_remove(0);
    assert_eq!(c.type_, CONDITION_TYPE);
    (c.status, c.reason)
}

/// Mid-rollout, a pod whose bucket assigns it the candidate runs stable when the candidate is held
/// on it: ready, compatible, and not current, with the held candidate's verdict as the reason, so
/// a health check reads the reason and never the message.
#[test]
fn a_candidate_held_on_its_pod_makes_config_current_false_with_its_verdict() {
    use crate::state::{RolloutHeld, RolloutView, Track};
    for verdict in [Verdict::TooNew, Verdict::RejectedByComponent] {
        let s = Status {
            ready: true,
            active: active("2.4.1"),
            rollout: Some(RolloutView {
                percent: crate::rollout::Percent::parse("25%").ok(),
                assigned: Track::Candidate,
                held: Some(RolloutHeld {
                    version: Some("3.0.0".into()),
                    sha256: Some(hash(7).to_string()),
                    verdict,
                    reason: "held".into(),
                }),
                bucket: crate::rollout::Bucket::from_hundredths(1200),
                track: Track::Stable,
                keys: "config.yaml".into(),
                reason: "held".into(),
            }),
            ..Status::default()
        };
        assert_eq!(compatible(&s), (true, "Accepted".into()));
        let c = condition(&s).unwrap();
        assert_eq!((c.status, c.reason.as_str()), (false, verdict.reason()));
        // Not held: current.
        let mut running = s.clone();
        running.rollout.as_mut().unwrap().held = None;
        let c = condition(&running).unwrap();
        assert_eq!((c.status, c.reason.as_str()), (true, "Accepted"));
    }
}

/// A bad annotation on a ready replica: a Warning Event once per problem, and the conditions'
/// message says it while `config-compatible` stays True (the values in force are kept).
#[test]
fn a_settings_problem_is_an_event_and_in_the_condition_message_without_taking_readiness() {
    use crate::state::{Check, CheckKind};
    let ok = Status {
        ready: true,
        active: active("2.1.0"),
        ..Status::default()
    };
    let mut bad = ok.clone();
    bad.checks.push(Check {
        name: CheckKind::Settings,
        ok: false,
        message: "invalid confgate.io/version-from \"yaml:config.yaml#v\"".into(),
    });
    let n = note(&Notice::SettingsProblem(
        bad.failing(CheckKind::Settings).unwrap().message.clone(),
    ));
    assert_eq!((n.warning, n.reason), (true, "SettingsProblem"));
    assert_eq!(
        n.note,
        "invalid confgate.io/version-from \"yaml:config.yaml#v\"; the values in force before it are kept"
    );
    assert_eq!(compatible(&bad), (true, "Accepted".into()));
    let c = condition(&bad).unwrap();
    assert!(c.status, "{c:?}");
    assert!(
        c.message.contains(
            "settings problem (the values in force are kept): invalid confgate.io/version-from"
        ),
        "{}",
        c.message
    );
    assert!(!condition(&ok).unwrap().message.contains("settings"));
}

#[test]
fn the_readiness_condition_is_readyz_and_the_held_config_shows_in_the_other() {
    let held = Status {
        ready: true,
        active: active("2.5.0"),
        candidate: candidate("3.0.0", Verdict::TooNew, "too new"),
        ..Status::default()
    };
    // `hold`: ready, compatible; not current.
    assert_eq!(compatible(&held), (true, "Accepted".into()));
    let c = condition(&held).unwrap();
    assert_eq!(
        (c.type_, c.status, c.reason.as_str()),
        (CURRENT_TYPE, false, "TooNew")
    );
    // `unready`: the same facts, not ready.
    let unready = Status {
        ready: false,
        ..held.clone()
    };
    assert_eq!(compatible(&unready), (false, "TooNew".into()));
    // Observe mode running a too-new config: ready, so compatible; not current.
    let mut observe = held.clone();
    observe.candidate = None;
    observe.active.as_mut().unwrap().verdict = Verdict::TooNew;
    assert_eq!(compatible(&observe), (true, "Observed".into()));
    assert_eq!(condition(&observe).unwrap().reason, "TooNew");
    // Not ready for another reason (its settings), with the newest config accepted.
    let mut settings = held;
    settings.candidate = None;
    settings.ready = false;
    assert_eq!(compatible(&settings), (false, "NotReady".into()));
    assert!(condition(&settings).unwrap().status);
}

#[test]
fn no_condition_before_anything_was_read_and_observe_mode_is_false() {
    assert_eq!(condition(&Status::default()), None);
    let observed = Status {
        active: Some(ActiveView {
            version: Some("3.0.0".into()),
            sha256: hash(0xab),
            since: jiff::Timestamp::UNIX_EPOCH,
            verdict: Verdict::TooNew,
            variant: None,
        }),
        ..Status::default()
    };
    let c = condition(&observed).unwrap();
    assert_eq!((c.status, c.reason.as_str()), (false, "TooNew"));
    assert_eq!(
        c.message,
        "version 3.0.0 sha256:abababababababababababababababababababababababababababababababab"
    );
    let first_missing = Status {
        candidate: Some(CandidateView {
            version: None,
            sha256: None,
            verdict: Verdict::Missing,
            reason: "ConfigMap ns/cm does not exist".into(),
            variant: None,
        }),
        ..Status::default()
    };
    let c = condition(&first_missing).unwrap();
    assert_eq!((c.status, c.reason.as_str()), (false, "Missing"));
    assert_eq!(
        c.message,
        "no accepted config; newest config is missing: ConfigMap ns/cm does not exist"
    );
}

#[test]
fn the_condition_names_the_variant_in_use() {
    let s = Status {
        active: Some(ActiveView {
            version: Some("2.5.0".into()),
            sha256: hash(0xab),
            since: jiff::Timestamp::UNIX_EPOCH,
            verdict: Verdict::Accepted,
            variant: Some("config.v2.yaml".into()),
        }),
        ..Status::default()
    };
    let c = condition(&s).unwrap();
    assert_eq!(
        (c.status, c.message.as_str()),
        (
            true,
            "version 2.5.0 sha256:abababababababababababababababababababababababababababababababab from config.v2.yaml"
        )
    );
    let m = facts(&s).unwrap();
    assert_eq!(m.active.unwrap().variant.as_deref(), Some("config.v2.yaml"));
}

/// A config accepted on a pod with `applied` as the component's and a reload target.
fn reloading(active_v: &str, applied_v: Option<&str>) -> Status {
    let mut s = Status {
        ready: true,
        active: active(active_v),
        ..Status::default()
    };
    if let Some(a) = s.active.as_mut() {
        a.sha256 = hash(active_v.bytes().map(|b| b as u32).sum::<u32>() as u8);
    }
    s.applied = applied_v.map(|v| crate::state::AppliedView {
        version: Some(v.into()),
        sha256: hash(v.bytes().map(|b| b as u32).sum::<u32>() as u8),
        since: jiff::Timestamp::UNIX_EPOCH,
    });
    s.reload.target = "http://127.0.0.1:8080/-/reload".into();
    s
}

/// When each is sent is the gate's (`gate::machine::tests::notices`); here, what it says.
#[test]
fn the_end_of_a_hold_is_a_normal_event_and_observe_mode_a_warning() {
    let active = reloading("2.4.2", Some("2.4.1")).active.unwrap();
    let n = note(&Notice::Active(active.clone()));
    assert_eq!((n.reason, n.warning), ("Accepted", false));
    assert_eq!(n.note, format!("version 2.4.2 {} is active", active.sha256));
    let mut observed = reloading("3.0.0", Some("2.4.1"));
    if let Some(a) = observed.active.as_mut() {
        a.verdict = Verdict::TooNew;
    }
    let n = note(&Notice::Active(observed.active.unwrap()));
    assert_eq!((n.reason, n.warning), ("Observed", true));
    assert!(
        n.note.starts_with("observe mode: version 3.0.0"),
        "{}",
        n.note
    );
    let n = note(&Notice::ReloadFailed {
        target: "http://127.0.0.1:8080/-/reload".into(),
        error: Some("HTTP 500".into()),
    });
    assert_eq!((n.warning, n.reason), (true, "ReloadFailed"));
    assert_eq!(
        n.note,
        "reload via http://127.0.0.1:8080/-/reload failed: HTTP 500"
    );
}

#[test]
fn a_patch_waits_for_the_reload_only_when_no_condition_changes() {
    let sent = conditions(&reloading("2.4.1", Some("2.4.1")));
    // Promoted, the reload not answered: the facts change, no condition's status or reason.
    let promoted = reloading("2.4.2", Some("2.4.1"));
    assert!(may_wait(&sent, &conditions(&promoted), &promoted));
    // Answered: applied follows, nothing to wait for.
    let applied = reloading("2.4.2", Some("2.4.2"));
    assert!(!may_wait(&sent, &conditions(&applied), &applied));
    // The first report never waits: readiness comes first.
    assert!(!may_wait(&[], &conditions(&promoted), &promoted));
    // No reload target: nothing will move `applied`.
    let mut none = promoted.clone();
    none.reload.target = "none".into();
    assert!(!may_wait(&sent, &conditions(&none), &none));
    // A refusal, or a condition that changes, is written at once.
    let mut refused = promoted.clone();
    refused.reload.last_result = ReloadResult::Rejected;
    assert!(!may_wait(&sent, &conditions(&refused), &refused));
    let mut failing = promoted.clone();
    failing.reload.consecutive_failures = 1;
    assert!(!may_wait(&sent, &conditions(&failing), &failing));
    let mut held = promoted.clone();
    held.candidate = candidate("3.0.0", Verdict::TooNew, "too new");
    assert!(!may_wait(&sent, &conditions(&held), &held));
}

#[test]
fn rejection_by_the_component_is_an_event_and_the_condition_says_what_runs() {
    let running = ActiveView {
        version: Some("2.0.0".into()),
        sha256: hash(0xaa),
        since: jiff::Timestamp::UNIX_EPOCH,
        verdict: Verdict::Accepted,
        variant: None,
    };
    let prev = Status {
        active: Some(running.clone()),
        applied: Some(crate::state::AppliedView {
            version: Some("2.0.0".into()),
            sha256: hash(0xaa),
            since: jiff::Timestamp::UNIX_EPOCH,
        }),
        ..Status::default()
    };
    let next = Status {
        candidate: Some(CandidateView {
            version: Some("2.1.0".into()),
            sha256: Some(hash(0xbb)),
            verdict: Verdict::RejectedByComponent,
            reason: "the component rejected it: POST u answered 500: bad rule".into(),
            variant: None,
        }),
        ..prev.clone()
    };
    let n = [note(&Notice::Held {
        candidate: next.candidate.clone().unwrap(),
        active: next.active.clone(),
        applied: next.applied.clone(),
    })];
    assert_eq!(
        (n[0].reason, n[0].action, n[0].warning),
        ("RejectedByComponent", "Rollback", true)
    );
    assert!(
        n[0].note.contains("version 2.1.0 sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
            && n[0].note.contains("500: bad rule")
            && n[0]
                .note
                .ends_with("rolled back to version 2.0.0 sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        "{}",
        n[0].note
    );
    let c = condition(&next).unwrap();
    assert_eq!(
        (c.status, c.reason.as_str()),
        (false, "RejectedByComponent")
    );
    let m = facts(&next).unwrap();
    assert_eq!(m.applied.unwrap().version.as_deref(), Some("2.0.0"));
    assert_eq!(m.newest.unwrap().verdict, Verdict::RejectedByComponent);
}

#[test]
fn a_reload_that_keeps_failing_shows_in_config_current_not_in_readiness() {
    let mut s = Status {
        ready: true,
        active: active("2.5.0"),
        ..Status::default()
    };
    s.reload.target = "http://127.0.0.1:8080/reload".into();
    s.reload.last_error = Some("connection refused".into());
    s.reload.consecutive_failures = RELOAD_FAILING_AFTER - 1;
    assert!(
        condition(&s).unwrap().status,
        "one retry more is not yet failing"
    );
    s.reload.consecutive_failures = RELOAD_FAILING_AFTER;
    assert_eq!(compatible(&s), (true, "Accepted".into()));
    let c = condition(&s).unwrap();
    assert_eq!((c.status, c.reason.as_str()), (false, "ReloadFailing"));
    assert_eq!(
        c.message,
        format!(
            "version 2.5.0 {}; reload via http://127.0.0.1:8080/reload failing: connection refused",
            hash(0xab)
        )
    );
    let f = facts(&s).unwrap().reload_failing.unwrap();
    assert_eq!(f.error, "connection refused");
    // A held config says why the newest is not in force, before the reload does.
    s.candidate = candidate("3.0.0", Verdict::TooNew, "too new");
    assert_eq!(condition(&s).unwrap().reason, "TooNew");
    // Not ready for its settings while the reload fails: readiness does not blame the reload.
    s.candidate = None;
    s.ready = false;
    assert_eq!(compatible(&s), (false, "NotReady".into()));
}

#[test]
fn a_start_on_the_known_good_is_not_current_said_by_its_reason_and_one_event() {
    let mut s = Status {
        ready: true,
        active: active("2.4.1"),
        candidate: candidate("3.0.0", Verdict::TooNew, "too new"),
        known_good: Some(crate::state::KnownGoodView {
            version: Some("2.4.1".into()),
            sha256: hash(1),
            record: "app.confgate-known-good".into(),
            because: Verdict::TooNew,
            reason: "too new".into(),
        }),
        ..Status::default()
    };
    assert_eq!(compatible(&s), (true, "Accepted".into()));
    let c = condition(&s).unwrap();
    assert_eq!((c.status, c.reason.as_str()), (false, "KnownGood"));
    let kg = note(&Notice::KnownGood(s.known_good.clone().unwrap()));
    assert!(
        kg.warning
            && kg.reason == "KnownGood"
            && kg.note.contains("app.confgate-known-good")
            && kg.note.contains("too-new"),
        "{kg:?}"
    );
    // Unready (`unready`): readiness gives what is wrong with the source.
    s.ready = false;
    assert_eq!(compatible(&s), (false, "TooNew".into()));
    assert_eq!("KnownGood".parse::<Reason>(), Ok(Reason::KnownGood));
    assert_eq!(Reason::KnownGood.as_kebab(), "known-good");
}

#[test]
fn a_change_waiting_for_the_reload_spread_is_not_current_and_not_a_failure() {
    let mut s = Status {
        ready: true,
        active: active("2.4.1"),
        candidate: candidate("2.5.0", Verdict::Accepted, "2.5.0 is in ^2"),
        spread: Some(crate::state::SpreadView {
            due_at: jiff::Timestamp::UNIX_EPOCH,
            delay_ms: 1500,
            period_ms: 4000,
        }),
        ..Status::default()
    };
    assert_eq!(compatible(&s), (true, "Accepted".into()));
    let c = condition(&s).unwrap();
    assert_eq!((c.status, c.reason.as_str()), (false, "Spreading"));
    assert_eq!("Spreading".parse::<Reason>(), Ok(Reason::Spreading));
    // Not ready for its settings meanwhile: readiness does not blame the wait.
    s.ready = false;
    assert_eq!(compatible(&s), (false, "NotReady".into()));
    // The wait over without a promotion (it failed): not promoted, as ever.
    s.spread = None;
    assert_eq!(condition(&s).unwrap().reason, "NotPromoted");
}
