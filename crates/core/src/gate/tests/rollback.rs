//! Refusals and rollbacks as the loop drives them: to the first config, without a base, failed and
//! tried again, with the modes put back, to a base the settings no longer accept, a rollout's
//! candidate refused; and a reload that keeps failing.

use std::time::Duration;

use super::*;
use crate::reload::{BootTicks, Outcome};

use super::events::*;

/// A component that comes up late: the first config's start-up check is still waiting when a
/// second config is promoted, and the component refuses that one. Its answer says it is up and ran
/// the first, whose dir was kept: that is the rollback base.
#[test]
fn a_refusal_answered_before_the_start_up_check_concluded_rolls_back_to_the_first_config() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    let first = promote(&mut g, &a, c.at(10), 100);
    assert!(has(&first, |x| matches!(
        x,
        Action::Switch {
            keep_baseline: false,
            ..
        }
    )));
    g.handle(
        Event::Reload(Outcome::Waiting("connection refused".into())),
        c.at(20),
    );
    let second = promote(&mut g, &b, c.at(30), 200);
    assert!(
        has(&second, |x| matches!(
            x,
            Action::Switch {
                keep_baseline: true,
                ..
            }
        )),
        "the first config's dir is kept: {second:?}"
    );
    let refused = refuse(&mut g, hash(&b), &a, c.at(40));
    let steps: Vec<_> = refused
        .iter()
        .filter(|x| matches!(x, Action::AdoptBaseline | Action::RollBack))
        .collect();
    assert!(
        matches!(steps[..], [Action::AdoptBaseline, Action::RollBack]),
        "{refused:?}"
    );
    let back = g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(300))))),
        c.at(50),
    );
    assert_eq!(requests(&back)[0].sha, hash(&a));
    let s = g.published(3);
    assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.0.0"));
    assert_eq!(
        s.applied.as_ref().unwrap().version.as_deref(),
        Some("2.0.0")
    );
    assert!(s.ready, "{s:?}");
    assert!(!s.reason.contains("holding 2.1.0"), "{}", s.reason);

    // A later promotion after the base is known keeps nothing more; one accepted by the component
    // drops the kept dir (its mark replaces it).
    let mut g = started(&c, None);
    promote(&mut g, &a, c.at(10), 100);
    promote(&mut g, &b, c.at(30), 200);
    let ok = g.handle(Event::Reload(Outcome::Reloaded(hash(&b))), c.at(40));
    assert!(!has(&ok, |x| matches!(x, Action::AdoptBaseline)), "{ok:?}");
    assert!(has(&ok, |x| matches!(x, Action::MarkApplied { .. })));
    let third = promote(&mut g, &cfg("2.2.0"), c.at(50), 300);
    assert!(has(&third, |x| matches!(
        x,
        Action::Switch {
            keep_baseline: false,
            ..
        }
    )));
}

/// The component refused the only config it was given: nothing to roll back to. The pod says so,
/// never "holding" the refused config, and stays ready under `hold`.
#[test]
fn a_refusal_without_a_base_says_so_and_never_holds_the_refused_config() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.0.0");
    promote(&mut g, &a, c.at(10), 100);
    refuse(&mut g, hash(&a), &a, c.at(20));
    let s = g.published(1);
    assert!(s.ready, "{s:?}");
    assert!(
        !s.reason.contains("holding 2.0.0")
            && s.reason
                .contains("no config the component applied to roll back to"),
        "{}",
        s.reason
    );
    assert_eq!(
        crate::state::Holding::of(&s).unwrap().to_string(),
        "no config the component applied to roll back to; 2.0.0 stays in place and is rejected-by-component"
    );
}

/// A rollback that fails (a full disk) is owed: tried again after [`PROMOTE_RETRY`], and at the
/// safety re-read, until the dir holds what the component accepted.
#[test]
fn a_failed_rollback_is_tried_again_until_it_succeeds() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    refused_over_applied(&mut g, &c, &a, &b);
    let full = || {
        Event::RolledBack(Err(RollbackFailure::Failed(failure(
            "No space left on device",
        ))))
    };
    g.handle(full(), c.at(50));
    assert_eq!(g.wake_at(), Some(c.at(50).at + PROMOTE_RETRY));
    assert!(!g.published(2).ready);
    // Due: judged again under the settings in force, then rolled back again; still full.
    let again = g.handle(Event::Timer, c.at(1050));
    assert!(
        has(&again, |x| matches!(x, Action::JudgeBase { .. })),
        "{again:?}"
    );
    assert!(matches!(
        g.handle(base_judged(&g, &a), c.at(1050))[..],
        [Action::RollBack]
    ));
    g.handle(full(), c.at(1050));
    // The safety re-read does not wait for the timer.
    let resync = g.handle(Event::Resync, c.at(1500));
    assert!(
        has(&resync, |x| matches!(x, Action::JudgeBase { .. })),
        "{resync:?}"
    );
    g.handle(base_judged(&g, &a), c.at(1500));
    let back = g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(300))))),
        c.at(1500),
    );
    assert_eq!(requests(&back)[0].sha, hash(&a));
    let s = g.published(3);
    assert!(s.ready, "{s:?}");
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    assert_eq!(g.wake_at(), None);
}

/// The applied config kept with modes other than the default (`defaultMode: 0600`): once rolled
/// back to, the same snapshot seen again is in place, not a second promotion.
#[test]
fn a_rollback_compares_the_modes_of_what_it_put_back() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let with_mode = |v: &str| {
        let files = BTreeMap::from([("version".to_owned(), v.as_bytes().to_vec())]);
        let modes = BTreeMap::from([("version".to_owned(), 0o600)]);
        Observed::Config(Snapshot::with_modes(files, modes))
    };
    let (a, b) = (with_mode("2.4.1"), with_mode("2.5.0"));
    refused_over_applied(&mut g, &c, &a, &b);
    g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(300))))),
        c.at(50),
    );
    let again = promote(&mut g, &a, c.at(60), 400);
    assert!(
        !has(&again, |x| matches!(x, Action::Switch { .. })) && requests(&again).is_empty(),
        "{again:?}"
    );
}

/// The range narrowed live: the config the component applied last is outside it, so a refused
/// newer config is not rolled back to it; the pod holds, not ready, and says why.
#[test]
fn a_rollback_base_outside_the_range_in_force_is_not_rolled_back_to() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.4.0");
    promote(&mut g, &a, c.at(10), 100);
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(20));
    g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/accepts", "^3")))),
        c.at(30),
    );
    let b = cfg("3.1.0");
    promote(&mut g, &b, c.at(40), 200);
    let refused = refuse(&mut g, hash(&b), &a, c.at(50));
    assert!(
        !has(&refused, |x| matches!(x, Action::RollBack)),
        "{refused:?}"
    );
    assert!(has(&refused, |x| matches!(
        x,
        Action::Log(LogLine::BaseNotAccepted { .. })
    )));
    let s = g.published(2);
    assert!(!s.ready, "{s:?}");
    assert!(
        s.reason
            .contains("not accepted under the settings in force")
            && s.reason.contains("2.4.0 is too-old"),
        "{}",
        s.reason
    );
}

/// The record of the applied config is gone (damaged, set aside): the rollback finds no base.
/// The pod says so truthfully ("previous config kept" would be false) and stays ready under `hold`.
#[test]
fn a_rollback_with_no_base_kept_on_disk_holds_and_says_so() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    refused_over_applied(&mut g, &c, &a, &b);
    let none = g.handle(
        Event::RolledBack(Err(RollbackFailure::NoBase(crate::promote::Failure::new(
            crate::promote::Error::NoApplied {
                path: "/promoted".into(),
            },
        )))),
        c.at(50),
    );
    assert!(has(&none, |x| matches!(
        x,
        Action::Log(LogLine::NoBase { .. })
    )));
    let s = g.published(2);
    assert!(s.ready, "{s:?}");
    assert!(s.applied.is_none(), "{s:?}");
    assert!(
        !s.reason.contains("previous config kept")
            && s.reason
                .contains("no config the component applied to roll back to"),
        "{}",
        s.reason
    );
    assert_eq!(g.wake_at(), None, "nothing to retry");
}

/// The gate, not the pipeline, decides to judge again after the component refused a rollout's
/// candidate (the same ConfigMap then gives this pod its stable set), keeps the rollout it was
/// told of and shows it in the status; a refusal with no rollout judges nothing again.
#[test]
fn a_refused_rollout_candidate_is_judged_again_by_the_gate_and_held() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let bucket = Some(crate::rollout::Bucket::of("pod-a"));
    let stable = cfg("2.0.0");
    // Without a rollout, a refusal is rolled back and nothing is judged again.
    let plain = cfg("2.0.1");
    let a = refused_over_applied(&mut g, &c, &stable, &plain);
    assert!(!has(&a, |x| matches!(x, Action::Judge { .. })), "{a:?}");

    let mid = Observed::Config(Snapshot::new(BTreeMap::from([
        ("version".to_owned(), b"2.0.0".to_vec()),
        ("version.next".to_owned(), b"2.1.0".to_vec()),
        ("confgate.rollout".to_owned(), b"100%".to_vec()),
    ])));
    let judge = |g: &Gate, refused: &[(ContentHash, crate::reload::Refusal)]| {
        let refused: Vec<_> = refused.iter().map(|(h, r)| (*h, r.to_string())).collect();
        let (choice, rollout) = crate::rollout::choose(mid.clone(), g.settings(), bucket, &refused);
        Event::Judged {
            seen: Seen::of(&mid),
            choice: Some(Box::new(choice)),
            rollout,
            small: true,
        }
    };
    let mut a = g.handle(judge(&g, &[]), c.at(50));
    assert!(
        has(
            &a,
            |x| matches!(x, Action::Log(LogLine::Rollout(r)) if r.track == crate::state::Track::Candidate)
        ),
        "{a:?}"
    );
    a.extend(g.handle(Event::Switched(Ok(Some(BootTicks(300)))), c.at(50)));
    let candidate = requests(&a)[0].sha;
    let s = g.published(0);
    assert_eq!(
        s.rollout.as_ref().map(|r| r.track),
        Some(crate::state::Track::Candidate)
    );

    let a = refuse(&mut g, candidate, &stable, c.at(60));
    let again = a.iter().rev().find_map(|x| match x {
        Action::Judge {
            unless, refused, ..
        } => Some((unless.clone(), refused.clone())),
        _ => None,
    });
    let (unless, refused) = again.expect("judged again after the candidate's refusal");
    assert_eq!(unless, None, "judged even though the ConfigMap is the same");
    assert!(refused.iter().any(|(h, _)| *h == candidate), "{refused:?}");
    // Judged again, the candidate is held on this pod: it runs stable and says why.
    let a = g.handle(judge(&g, &refused), c.at(70));
    assert!(
        has(
            &a,
            |x| matches!(x, Action::Log(LogLine::Rollout(r)) if r.held.is_some())
        ),
        "{a:?}"
    );
    let r = g.published(0).rollout.expect("the rollout in the status");
    assert_eq!(r.track, crate::state::Track::Stable);
    assert_eq!(
        r.held.map(|h| (h.verdict, h.reason)),
        Some((
            Verdict::RejectedByComponent,
            // What the component said is kept.
            "the component rejected it: 500: bad rule".to_owned()
        ))
    );
}

/// A reload that keeps failing (it does not reach the component) is a check of its own, which does
/// not take readiness: the component still runs the config it had. The config check no longer calls
/// the promoted config active without saying the component has not taken it.
#[test]
fn a_failing_reload_is_a_check_and_the_promoted_config_is_not_called_taken() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    promoted_over_applied(&mut g, &c, &a, &b);
    let s = g.published(1);
    assert!(s.failing(CheckKind::Reload).is_none(), "{:?}", s.checks);
    for n in 1..=2u64 {
        g.handle(
            Event::Reload(Outcome::Failed(crate::reload::Failure::new(
                crate::reload::Error::Timeout(Duration::from_secs(1)),
            ))),
            c.at(30 + n),
        );
    }
    let s = g.published(3);
    assert!(s.ready, "{}", s.reason);
    let reload = s
        .failing(CheckKind::Reload)
        .expect("the reload check fails");
    assert!(
        reload.message.contains("the reload of 2.1.0 via ")
            && reload.message.contains("failed 2 times in a row")
            && reload.message.contains("timed out"),
        "{}",
        reload.message
    );
    let config = s
        .checks
        .iter()
        .find(|c| c.name == CheckKind::Config)
        .unwrap();
    assert!(
        config.ok
            && config.message.starts_with("promoted 2.1.0 (")
            && config.message.contains("not taken by the component")
            && config.message.contains("it runs 2.0.0 ("),
        "{}",
        config.message
    );
    assert_eq!(s.warnings().len(), 1, "{:?}", s.warnings());
    // Reached at last: no reload check, and the config is active again.
    g.handle(Event::Reload(Outcome::Reloaded(hash(&b))), c.at(40));
    let s = g.published(4);
    assert!(s.failing(CheckKind::Reload).is_none(), "{:?}", s.checks);
    let config = s
        .checks
        .iter()
        .find(|c| c.name == CheckKind::Config)
        .unwrap();
    assert!(
        config.message.starts_with("active 2.1.0 ("),
        "{}",
        config.message
    );
}

/// What says the component applied a config is kept with the fact, so the log says what is known:
/// a signal without a confirmation was only delivered (it was logged "applied by the component").
#[test]
fn an_unconfirmed_signal_is_kept_as_delivered_not_confirmed() {
    use super::super::messages::AppliedBy;
    let confirm = "http://127.0.0.1:1/metrics#app_reload_ok";
    for (annotations, want) in [
        (
            vec![("confgate.io/reload", "signal:HUP:comp")],
            AppliedBy::SignalSent,
        ),
        (vec![], AppliedBy::Answer),
        (
            vec![
                ("confgate.io/reload", "signal:HUP:comp"),
                ("confgate.io/confirm", confirm),
            ],
            AppliedBy::Metrics,
        ),
    ] {
        let c = Clock::new();
        let mut ann = Annotations::new();
        for (k, v) in annotations {
            ann.insert(k.to_owned(), v.to_owned());
        }
        let mut g = started(&c, Some(ann));
        let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
        promote(&mut g, &a, c.at(10), 100);
        g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(20));
        promote(&mut g, &b, c.at(30), 200);
        let done = g.handle(Event::Reload(Outcome::Reloaded(hash(&b))), c.at(40));
        let by = done.iter().find_map(|x| match x {
            Action::MarkApplied { by, .. } => Some(*by),
            _ => None,
        });
        assert_eq!(by, Some(want), "{done:?}");
    }
}
