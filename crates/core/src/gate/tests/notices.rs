//! The gate's notices (what becomes a pod Event): each sent at the event it happens at, once, and
//! none for a routine accepted change.

use super::events::{Clock, TARGET, hash, promote, refuse, started};
use super::*;
use crate::reload::{BootTicks, Error, Failure, Outcome};
use crate::state::{Notice, ReloadResult};

fn notices(actions: &[Action]) -> Vec<&Notice> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Notice(n) => Some(n),
            _ => None,
        })
        .collect()
}

/// A config held, then replaced by an accepted one before the loop published a status: the status
/// before and the one after both show a healthy config in force, so comparing them (as the pod
/// reporter did) tells nothing; the gate told both, the hold and its end, as they happened.
#[test]
fn a_hold_shorter_than_one_published_status_is_still_told() {
    let c = Clock::new();
    let mut g = started(&c, None);
    assert!(notices(&promote(&mut g, &cfg("2.0.0"), c.at(10), 1)).is_empty());
    let before = g.published(0);
    let a = promote(&mut g, &cfg("1.0.0"), c.at(20), 2);
    let held = notices(&a);
    assert!(
        matches!(held[..], [Notice::Held { candidate, active: Some(active), .. }]
            if candidate.version.as_deref() == Some("1.0.0")
                && candidate.verdict == Verdict::TooOld
                && active.version.as_deref() == Some("2.0.0")),
        "{held:?}"
    );
    let a = promote(&mut g, &cfg("2.1.0"), c.at(30), 3);
    let over = notices(&a);
    assert!(
        matches!(over[..], [Notice::Active(a)] if a.version.as_deref() == Some("2.1.0")),
        "the end of the hold: {over:?}"
    );
    // What the two statuses around it show: nothing held on either side.
    let after = g.published(0);
    assert!(before.candidate.is_none() && after.candidate.is_none());
    assert_eq!(
        after.active.map(|a| a.version),
        Some(Some("2.1.0".to_owned()))
    );
}

#[test]
fn a_healthy_change_is_no_notice_and_a_hold_is_told_once() {
    let c = Clock::new();
    let mut g = started(&c, None);
    for (i, v) in ["2.0.0", "2.0.1", "2.1.0"].into_iter().enumerate() {
        let a = promote(&mut g, &cfg(v), c.at(10 * i as u64 + 10), i as u64);
        assert!(notices(&a).is_empty(), "{v}: {a:?}");
    }
    let too_new = cfg("1.0.0");
    assert_eq!(notices(&promote(&mut g, &too_new, c.at(50), 9)).len(), 1);
    // Read again (a resync): the same hold, not told again.
    g.handle(Event::Resync, c.at(60));
    assert!(notices(&promote(&mut g, &too_new, c.at(61), 9)).is_empty());
}

/// The component refuses a config: one notice, naming the config it is rolled back to; the
/// rollback itself is no second one (the refused config is still held).
#[test]
fn a_refusal_is_told_once_with_the_config_rolled_back_to() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    promote(&mut g, &a, c.at(10), 1);
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(20));
    promote(&mut g, &b, c.at(30), 2);
    let mut actions = refuse(&mut g, hash(&b), &a, c.at(40));
    actions.extend(g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(3))))),
        c.at(41),
    ));
    let told = notices(&actions);
    assert!(
        matches!(told[..], [Notice::Held { candidate, applied: Some(applied), .. }]
            if candidate.verdict == Verdict::RejectedByComponent
                && candidate.version.as_deref() == Some("2.1.0")
                && applied.version.as_deref() == Some("2.0.0")),
        "{told:?}"
    );
}

#[test]
fn a_reload_failing_is_told_when_it_begins_to_fail() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.0.0");
    promote(&mut g, &a, c.at(10), 1);
    let failed = || {
        Event::Reload(Outcome::Failed(Failure::new(Error::Timeout(
            std::time::Duration::from_secs(1),
        ))))
    };
    let told = g.handle(failed(), c.at(20));
    assert!(
        matches!(notices(&told)[..], [Notice::ReloadFailed { target, error: Some(e) }]
            if target == TARGET && e == "attempt timed out after 1s"),
        "{told:?}"
    );
    assert_eq!(g.published(1).reload.last_result, ReloadResult::Failure);
    // Retried and failing again: the same failure, not told again; after a success, told anew.
    g.handle(Event::Reload(Outcome::Attempting), c.at(30));
    assert!(notices(&g.handle(failed(), c.at(31))).is_empty());
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(40));
    assert_eq!(notices(&g.handle(failed(), c.at(50))).len(), 1);
}

#[test]
fn a_settings_problem_is_told_once_and_a_spread_wait_is_no_notice() {
    let c = Clock::new();
    let mut g = started(&c, None);
    promote(&mut g, &cfg("2.0.0"), c.at(10), 1);
    let bad = || Event::Annotations(Ok(Some(ann("confgate.io/accepts", "two"))));
    let told = g.handle(bad(), c.at(20));
    assert!(
        matches!(notices(&told)[..], [Notice::SettingsProblem(p)] if p.contains("confgate.io/accepts")),
        "{told:?}"
    );
    assert!(notices(&g.handle(bad(), c.at(30))).is_empty(), "said once");

    // A change waiting for this pod's share of the reload spread: nothing refused, no notice.
    let bucket = (0..)
        .map(|i| crate::rollout::Bucket::of(&format!("pod-{i}")))
        .find(|b| b.fraction() > 0.3)
        .unwrap();
    let mut g =
        started(&c, Some(ann("confgate.io/reload-spread", "10s"))).with_bucket(Some(bucket));
    let first = cfg("2.0.0");
    promote(&mut g, &first, c.at(10), 1);
    g.handle(Event::Reload(Outcome::Reloaded(hash(&first))), c.at(15));
    let a = promote(&mut g, &cfg("2.1.0"), c.at(20), 2);
    assert!(
        g.published(0).spread.is_some(),
        "the change waits: {:?}",
        g.published(0)
    );
    assert!(notices(&a).is_empty(), "{a:?}");
}
