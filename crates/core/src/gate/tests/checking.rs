//! The component's checker as the loop drives it: a candidate promoted only once it passes, held
//! with its words (never a Secret's), run again after a wait when it gives no answer, superseded by
//! a newer read, and going on while a refusal is rolled back or its failed rollback is owed.

use std::time::Duration;

use super::*;
use crate::reload::{BootTicks, Outcome};
use crate::validate::Checked;

use super::events::*;

/// A gate with a checker set: every promotion waits for its answer.
fn checking(c: &Clock, check: &str, secret: bool) -> Gate {
    let base = base(">=2", |r| {
        r.reload = Some(TARGET.into());
        r.validate = Some(check.into());
    });
    let mut g = Gate::new(base, false).with_secret_content(secret);
    g.handle(Event::Start(Ok(None)), c.at(0));
    adopted(
        &mut g,
        Observed::Missing(crate::snapshot::Missing::NoObjectKeys),
        c.at(0),
    );
    g
}

const CHECK: &str = "exec:/validators/promtool check config {dir}/prometheus.yml";

#[test]
fn a_candidate_is_promoted_only_once_the_components_checker_passes_it() {
    let c = Clock::new();
    let mut g = checking(&c, CHECK, false);
    let v2 = cfg("2.0.0");
    let a = g.handle(judged(&g, &v2), c.at(1));
    assert!(
        matches!(&a[..], [Action::Validate { snapshot, timeout, .. }] if snapshot.hash() == hash(&v2) && *timeout == Duration::from_secs(10)),
        "the checker first, nothing promoted, nothing counted: {a:?}"
    );
    let a = g.handle(
        Event::Validated {
            sha: hash(&v2),
            checked: Checked::Passed,
        },
        c.at(2),
    );
    assert!(has(&a, |a| matches!(a, Action::Switch { .. })), "{a:?}");
    assert!(has(&a, |a| matches!(
        a,
        Action::Log(LogLine::Validated { reason: None, .. })
    )));
    g.handle(Event::Switched(Ok(Some(BootTicks(1)))), c.at(2));
    assert_eq!(
        g.published(0).active.unwrap().version.as_deref(),
        Some("2.0.0")
    );

    // Refused: held with the checker's first lines and the fix; the active config stays.
    let v3 = cfg("2.1.0");
    let a = g.handle(judged(&g, &v3), c.at(3));
    assert!(matches!(&a[..], [Action::Validate { .. }]), "{a:?}");
    let a = g.handle(
        Event::Validated {
            sha: hash(&v3),
            checked: Checked::Failed {
                status: "exit status: 1".into(),
                lines: vec!["FAILED: parsing YAML file prometheus.yml".into()],
            },
        },
        c.at(4),
    );
    assert!(!has(&a, |a| matches!(a, Action::Switch { .. })), "{a:?}");
    assert!(has(&a, |a| matches!(
        a,
        Action::Count(Count::Candidate(Verdict::Invalid))
    )));
    let s = g.published(0);
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    let held = s.candidate.unwrap();
    assert_eq!(held.verdict, Verdict::Invalid);
    assert_eq!(
        held.reason,
        "version 2.1.0 is in >=2, but promtool refused it (exit status: 1): FAILED: parsing YAML file \
         prometheus.yml; correct the ConfigMap as the checker says, or change confgate.io/validate"
    );

    // The same content judged again (a settings change re-judges it) is not checked again.
    let a = g.handle(judged(&g, &v3), c.at(5));
    assert!(
        !has(&a, |a| matches!(
            a,
            Action::Validate { .. } | Action::Switch { .. }
        )),
        "{a:?}"
    );
}

#[test]
fn a_secrets_checker_output_is_not_shown() {
    let c = Clock::new();
    let mut g = checking(&c, CHECK, true);
    let v2 = cfg("2.0.0");
    g.handle(judged(&g, &v2), c.at(1));
    g.handle(
        Event::Validated {
            sha: hash(&v2),
            checked: Checked::Failed {
                status: "exit status: 1".into(),
                lines: vec!["password: hunter2 is not valid".into()],
            },
        },
        c.at(2),
    );
    let reason = g.published(0).candidate.unwrap().reason;
    assert!(!reason.contains("hunter2"), "{reason}");
    assert!(
        reason.contains("promtool refused it (exit status: 1; its output is not shown: the content is a Secret's)"),
        "{reason}"
    );
}

/// A time-out or a checker not there yet (an init container still copying it) says nothing of the
/// content: the config is held meanwhile, with advice that fits (never "correct the ConfigMap" for a
/// time-out), and checked again after a wait that doubles; an exit status is the answer kept.
#[test]
fn a_checker_that_cannot_run_or_runs_too_long_is_tried_again_with_backoff() {
    for (checked, says, fix) in [
        (
            Checked::TimedOut(Duration::from_secs(10)),
            "promtool did not finish within 10s (killed); it is run again in 1s",
            "raise confgate.io/validate-timeout",
        ),
        (
            Checked::NotRun("/validators/promtool: No such file or directory".into()),
            "the checker could not be run: /validators/promtool: No such file or directory; it is run again in 1s",
            "put the checker",
        ),
    ] {
        let c = Clock::new();
        let mut g = checking(&c, CHECK, false);
        let v2 = cfg("2.0.0");
        g.handle(judged(&g, &v2), c.at(1));
        let a = g.handle(
            Event::Validated {
                sha: hash(&v2),
                checked: checked.clone(),
            },
            c.at(2),
        );
        assert!(!has(&a, |a| matches!(a, Action::Switch { .. })), "{a:?}");
        assert!(
            has(&a, |a| matches!(
                a,
                Action::Log(LogLine::CheckNotAnswered { .. })
            )),
            "{a:?}"
        );
        let s = g.published(0);
        assert!(s.active.is_none());
        let reason = s.candidate.unwrap().reason;
        assert!(reason.contains(says), "{reason}");
        assert!(reason.contains(fix), "{reason}");
        assert!(!reason.contains("correct the ConfigMap"), "{reason}");
        // The same content read again before the wait is over is not checked again.
        let a = g.handle(judged(&g, &v2), c.at(2));
        assert!(!has(&a, |a| matches!(a, Action::Validate { .. })), "{a:?}");
        // At the deadline it is read and checked again.
        assert_eq!(g.wake_at(), Some(c.at(1002).at));
        let a = g.handle(Event::Timer, c.at(1002));
        assert!(has(&a, |a| matches!(a, Action::Judge { .. })), "{a:?}");
        let a = g.handle(judged(&g, &v2), c.at(1002));
        assert!(
            matches!(&a[..], [Action::Validate { snapshot, .. }] if snapshot.hash() == hash(&v2)),
            "{a:?}"
        );
        // A second failure waits twice as long.
        g.handle(
            Event::Validated {
                sha: hash(&v2),
                checked,
            },
            c.at(1003),
        );
        assert_eq!(g.wake_at(), Some(c.at(3003).at));
        g.handle(Event::Timer, c.at(3003));
        g.handle(judged(&g, &v2), c.at(3003));
        let a = g.handle(
            Event::Validated {
                sha: hash(&v2),
                checked: Checked::Passed,
            },
            c.at(3004),
        );
        assert!(has(&a, |a| matches!(a, Action::Switch { .. })), "{a:?}");
        assert_eq!(g.wake_at(), None, "no retry once it answered");
    }
}

/// A slow check of a config a newer snapshot superseded is ended, and the newer one checked at once;
/// the status shows the check under way.
#[test]
fn a_check_superseded_by_a_newer_snapshot_is_cancelled_and_shown_while_it_runs() {
    let c = Clock::new();
    let mut g = checking(&c, CHECK, false);
    let v2 = cfg("2.0.0");
    g.handle(judged(&g, &v2), c.at(1));
    let s = g.published(0);
    let checking = s.checking.expect("the check under way is shown");
    assert_eq!(checking.version.as_deref(), Some("2.0.0"));
    assert_eq!(checking.checker, "promtool");
    assert!(
        s.checks
            .iter()
            .any(|k| k.name == crate::state::CheckKind::Validate
                && k.ok
                && k.message.starts_with("checking 2.0.0 with promtool since ")),
        "{:?}",
        s.checks
    );
    // The same content read again goes on with the check under way.
    let a = g.handle(judged(&g, &v2), c.at(2));
    assert!(a.is_empty(), "{a:?}");
    let v3 = cfg("2.1.0");
    let a = g.handle(judged(&g, &v3), c.at(3));
    let cancel = a.iter().position(|a| matches!(a, Action::CancelCheck));
    let check = a.iter().position(
        |a| matches!(a, Action::Validate { snapshot, .. } if snapshot.hash() == hash(&v3)),
    );
    assert!(
        matches!((cancel, check), (Some(x), Some(y)) if x < y),
        "the old check ended before the new one starts: {a:?}"
    );
    assert_eq!(
        g.published(0).checking.unwrap().version.as_deref(),
        Some("2.1.0")
    );
    // A late answer on the superseded content changes nothing.
    let a = g.handle(
        Event::Validated {
            sha: hash(&v2),
            checked: Checked::Passed,
        },
        c.at(4),
    );
    assert!(!has(&a, |a| matches!(a, Action::Switch { .. })), "{a:?}");
    let a = g.handle(
        Event::Validated {
            sha: hash(&v3),
            checked: Checked::Passed,
        },
        c.at(5),
    );
    assert!(has(&a, |a| matches!(a, Action::Switch { .. })), "{a:?}");
    g.handle(Event::Switched(Ok(Some(BootTicks(1)))), c.at(5));
    let s = g.published(0);
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.1.0"));
    assert!(s.checking.is_none());
}

/// `applied` passes the checker and is promoted and reloaded at 1 to 2 ms, then `newer` passes and
/// is promoted at 3 ms, its reload not yet answered.
fn checked_in(g: &mut Gate, c: &Clock, applied: &Observed, newer: &Observed) {
    for (obs, at) in [(applied, 1), (newer, 3)] {
        g.handle(judged(g, obs), c.at(at));
        g.handle(
            Event::Validated {
                sha: hash(obs),
                checked: Checked::Passed,
            },
            c.at(at),
        );
        g.handle(Event::Switched(Ok(Some(BootTicks(at)))), c.at(at));
        if obs == applied {
            g.handle(Event::Reload(Outcome::Reloaded(hash(applied))), c.at(2));
        }
    }
}

/// One phase at a time: a refusal that comes while a newer candidate waits for the checker is
/// rolled back first; the check goes on (shown all along), and its pass promotes the candidate.
#[test]
fn a_refusal_during_a_check_rolls_back_first_and_the_check_goes_on() {
    let c = Clock::new();
    let mut g = checking(&c, CHECK, false);
    let (a, b, d) = (cfg("2.0.0"), cfg("2.1.0"), cfg("2.2.0"));
    checked_in(&mut g, &c, &a, &b);
    let started = g.handle(judged(&g, &d), c.at(5));
    assert!(
        matches!(&started[..], [Action::Validate { .. }]),
        "{started:?}"
    );
    // 2.1.0 refused while 2.2.0 is under check: rolled back to 2.0.0 at once.
    let refused = refuse(&mut g, hash(&b), &a, c.at(6));
    assert!(
        has(&refused, |x| matches!(x, Action::RollBack)),
        "{refused:?}"
    );
    assert!(
        g.published(0).checking.is_some(),
        "the check goes on meanwhile"
    );
    g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(6))))),
        c.at(6),
    );
    let s = g.published(0);
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    assert_eq!(
        s.checking.map(|k| k.version),
        Some(Some("2.2.0".to_owned()))
    );
    let passed = g.handle(
        Event::Validated {
            sha: hash(&d),
            checked: Checked::Passed,
        },
        c.at(7),
    );
    assert!(
        has(&passed, |x| matches!(x, Action::Switch { .. })),
        "{passed:?}"
    );
}

/// A rollback that fails while a candidate waits for the checker is owed beside the check: its
/// retry rolls back again with the check going on, and the promotion the check's pass makes
/// replaces the refused content, which ends what was owed (nothing rolls back any more, and the
/// status no longer says the rollback failed).
#[test]
fn a_rollback_owed_during_a_check_goes_on_beside_it_until_the_checked_candidate_replaces_it() {
    let c = Clock::new();
    let mut g = checking(&c, CHECK, false);
    let (a, b, d) = (cfg("2.0.0"), cfg("2.1.0"), cfg("2.2.0"));
    checked_in(&mut g, &c, &a, &b);
    g.handle(judged(&g, &d), c.at(5));
    refuse(&mut g, hash(&b), &a, c.at(6));
    let full = || {
        Event::RolledBack(Err(RollbackFailure::Failed(failure(
            "No space left on device",
        ))))
    };
    g.handle(full(), c.at(6));
    let s = g.published(0);
    assert!(s.failing(CheckKind::Promote).is_some(), "{:?}", s.checks);
    assert!(
        s.checking.is_some(),
        "the check goes on beside the owed rollback"
    );
    assert_eq!(g.wake_at(), Some(c.at(6).at + PROMOTE_RETRY));
    // Due: rolled back again, the check still under way; and it fails again.
    let again = g.handle(Event::Timer, c.at(1006));
    assert!(
        has(&again, |x| matches!(x, Action::JudgeBase { .. })),
        "{again:?}"
    );
    assert!(matches!(
        g.handle(base_judged(&g, &a), c.at(1006))[..],
        [Action::RollBack]
    ));
    assert!(g.published(0).checking.is_some());
    g.handle(full(), c.at(1006));
    assert_eq!(g.wake_at(), Some(c.at(1006).at + PROMOTE_RETRY));
    // The check passes: its candidate replaces the refused content, and nothing is owed.
    let passed = g.handle(
        Event::Validated {
            sha: hash(&d),
            checked: Checked::Passed,
        },
        c.at(1100),
    );
    assert!(
        has(&passed, |x| matches!(x, Action::Switch { .. })),
        "{passed:?}"
    );
    g.handle(Event::Switched(Ok(Some(BootTicks(1100)))), c.at(1100));
    let s = g.published(0);
    assert!(s.failing(CheckKind::Promote).is_none(), "{:?}", s.checks);
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.2.0"));
    // Neither the retry's deadline nor the safety re-read rolls back any more.
    for (event, at) in [(Event::Timer, 2006), (Event::Resync, 2100)] {
        let later = g.handle(event, c.at(at));
        assert!(
            !has(&later, |x| matches!(x, Action::JudgeBase { .. })),
            "{later:?}"
        );
    }
}
