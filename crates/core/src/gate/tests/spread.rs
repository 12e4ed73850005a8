//! The reload spread, time passed in: a change waits for this pod's share of the period, then is
//! promoted; the first promotion, a revert and a rollback never wait.

use std::time::Duration;

use super::events::{
    Clock, TARGET, adopted, has, hash, judged, promote, refuse, requests, started,
};
use super::*;
use crate::reload::{BootTicks, Kind, Outcome};
use crate::rollout::Bucket;
use crate::state::CheckKind;

const SPREAD_MS: u64 = 10_000;

/// A pod identity whose bucket is in the middle of the fleet, and its share of [`SPREAD_MS`].
fn middle() -> (Bucket, u64) {
    let b = (0..)
        .map(|i| Bucket::of(&format!("pod-{i}")))
        .find(|b| (0.3..0.7).contains(&b.fraction()))
        .unwrap();
    (b, (SPREAD_MS as f64 * b.fraction()) as u64)
}

/// A started promoting gate with a 10 s spread, this pod in the middle of the fleet, running 2.0.0
/// (promoted at once: its first config) and told the component applied it.
fn spreading(c: &Clock) -> (Gate, u64) {
    let (bucket, delay) = middle();
    let mut g = started(c, Some(ann("confgate.io/reload-spread", "10s"))).with_bucket(Some(bucket));
    let a = cfg("2.0.0");
    let first = promote(&mut g, &a, c.at(10), 100);
    assert!(
        has(&first, |x| matches!(x, Action::Switch { .. })),
        "{first:?}"
    );
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(20));
    (g, delay)
}

fn spread_note(actions: &[Action]) -> Option<(&str, jiff::Timestamp, Duration)> {
    actions.iter().find_map(|a| match a {
        Action::Log(LogLine::Spread {
            version,
            due,
            delay,
            ..
        }) => Some((version.as_str(), *due, *delay)),
        _ => None,
    })
}

#[test]
fn a_change_waits_for_the_pods_share_of_the_spread_then_is_promoted() {
    let c = Clock::new();
    let (mut g, delay) = spreading(&c);
    let b = cfg("2.1.0");
    let seen = g.handle(judged(&g, &b), c.at(100));
    assert!(
        !has(&seen, |x| matches!(x, Action::Switch { .. })),
        "{seen:?}"
    );
    assert!(requests(&seen).is_empty());
    // One line says when; the deadline is the gate's.
    assert_eq!(
        spread_note(&seen),
        Some((
            "2.1.0",
            c.at(100 + delay).wall,
            Duration::from_millis(delay)
        ))
    );
    assert_eq!(g.wake_at(), Some(c.at(100 + delay).at));
    // Meanwhile the pod serves 2.0.0 as before: ready, not stale, the wait in the status.
    let s = g.published(1);
    assert!(s.ready && !s.stale, "{s:?}");
    assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.0.0"));
    let spread = s.spread.as_ref().unwrap();
    assert_eq!(
        (spread.due_at, spread.delay_ms, spread.period_ms),
        (c.at(100 + delay).wall, delay, SPREAD_MS)
    );
    let newest = s
        .checks
        .iter()
        .find(|k| k.name == CheckKind::Newest)
        .unwrap();
    assert!(newest.ok, "{newest:?}");
    assert!(
        newest.message.starts_with("keeping 2.0.0 until "),
        "{newest:?}"
    );
    // The same content read again before the deadline (a resync) still waits, with no new line.
    let again = g.handle(judged(&g, &b), c.at(200));
    assert!(
        again
            .iter()
            .all(|x| matches!(x, Action::Count(Count::Candidate(_)))),
        "{again:?}"
    );
    assert!(g.handle(Event::Timer, c.at(99 + delay)).is_empty());
    // Due: the newest is read and judged whatever was judged before, then promoted and reloaded.
    assert!(matches!(
        g.handle(Event::Timer, c.at(100 + delay))[..],
        [Action::Judge { unless: None, .. }]
    ));
    assert_eq!(g.wake_at(), None, "asked for once");
    let promoted = promote(&mut g, &b, c.at(101 + delay), 200);
    let r = requests(&promoted);
    assert_eq!((r[0].kind, r[0].sha), (Kind::Reload, hash(&b)));
    let s = g.published(2);
    assert!(s.spread.is_none() && s.candidate.is_none(), "{s:?}");
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.1.0"));
}

#[test]
fn a_newer_change_during_the_wait_keeps_the_first_deadline() {
    let c = Clock::new();
    let (mut g, delay) = spreading(&c);
    let first = g.handle(judged(&g, &cfg("2.1.0")), c.at(100));
    let newer = g.handle(judged(&g, &cfg("2.2.0")), c.at(100 + delay / 2));
    let (_, due, _) = spread_note(&first).unwrap();
    assert_eq!(
        spread_note(&newer),
        Some(("2.2.0", due, Duration::from_millis(delay)))
    );
    assert_eq!(g.wake_at(), Some(c.at(100 + delay).at));
    g.handle(Event::Timer, c.at(100 + delay));
    let c2 = cfg("2.2.0");
    let promoted = promote(&mut g, &c2, c.at(100 + delay), 200);
    assert_eq!(requests(&promoted)[0].sha, hash(&c2));
}

#[test]
fn a_revert_or_a_rejected_change_during_the_wait_ends_it() {
    let c = Clock::new();
    let (mut g, _) = spreading(&c);
    g.handle(judged(&g, &cfg("2.1.0")), c.at(100));
    assert!(g.wake_at().is_some());
    // Back to what runs: nothing to promote, nothing waits.
    let back = promote(&mut g, &cfg("2.0.0"), c.at(200), 200);
    assert!(
        !has(&back, |x| matches!(x, Action::Switch { .. })) && spread_note(&back).is_none(),
        "{back:?}"
    );
    assert_eq!(g.wake_at(), None);
    assert!(g.published(1).spread.is_none());
    // A change not accepted is held as ever, not waited for.
    g.handle(judged(&g, &cfg("2.1.0")), c.at(300));
    g.handle(judged(&g, &cfg("1.0.0")), c.at(400));
    assert_eq!(g.wake_at(), None);
    let s = g.published(1);
    assert!(s.spread.is_none() && s.stale, "{s:?}");
}

#[test]
fn the_first_promotion_and_a_pod_without_an_accepted_config_never_wait() {
    let c = Clock::new();
    // The last bucket of the fleet, an hour's spread: anything but at once would show.
    let last = (0..)
        .map(|i| Bucket::of(&format!("pod-{i}")))
        .find(|b| b.fraction() > 0.9)
        .unwrap();
    let mut g = started(&c, Some(ann("confgate.io/reload-spread", "1h"))).with_bucket(Some(last));
    let first = promote(&mut g, &cfg("2.0.0"), c.at(10), 100);
    assert!(
        has(&first, |x| matches!(x, Action::Switch { .. })),
        "{first:?}"
    );
    assert_eq!(g.wake_at(), None);

    // A restart whose promoted dir holds a config the settings no longer accept: no accepted config
    // in force, so the change is promoted at once (as a reload: the component read the old one).
    let mut g =
        Gate::new(base("^3", |r| r.reload = Some(TARGET.into())), false).with_bucket(Some(last));
    g.handle(
        Event::Start(Ok(Some(ann("confgate.io/reload-spread", "1h")))),
        c.at(0),
    );
    adopted(&mut g, cfg("2.0.0"), c.at(0));
    let now = promote(&mut g, &cfg("3.0.0"), c.at(10), 100);
    assert_eq!(requests(&now)[0].kind, Kind::Reload);
}

#[test]
fn no_spread_or_no_identity_promotes_at_once() {
    let c = Clock::new();
    let (bucket, _) = middle();
    for (spread, bucket) in [("0s", Some(bucket)), ("10s", None)] {
        let mut g = started(&c, Some(ann("confgate.io/reload-spread", spread))).with_bucket(bucket);
        promote(&mut g, &cfg("2.0.0"), c.at(10), 100);
        let b = cfg("2.1.0");
        let a = promote(&mut g, &b, c.at(20), 200);
        assert_eq!(requests(&a)[0].sha, hash(&b), "{spread} {bucket:?}");
    }
}

/// A spread annotation set to "0" is an annotation in force that equals the flag's value: logged as
/// overriding it, not as gone.
#[test]
fn a_spread_annotation_of_zero_is_in_force_not_gone() {
    let c = Clock::new();
    let (mut g, _) = spreading(&c);
    let a = g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/reload-spread", "0")))),
        c.at(200),
    );
    assert!(
        !has(&a, |x| matches!(
            x,
            Action::Log(LogLine::AnnotationGone { .. })
        )),
        "{a:?}"
    );
    assert!(
        has(&a, |x| matches!(
            x,
            Action::Log(LogLine::AnnotationOverrides {
                annotation: "confgate.io/reload-spread",
                ..
            })
        )),
        "{a:?}"
    );
    // Removed, it is gone.
    let a = g.handle(Event::Annotations(Ok(Some(ann("other", "x")))), c.at(300));
    assert!(
        !has(&a, |x| matches!(
            x,
            Action::Log(LogLine::AnnotationOverrides { .. })
        )),
        "{a:?}"
    );
}

#[test]
fn the_spread_turned_off_during_the_wait_promotes_at_once() {
    let c = Clock::new();
    let (mut g, _) = spreading(&c);
    g.handle(judged(&g, &cfg("2.1.0")), c.at(100));
    let changed = g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/reload-spread", "0s")))),
        c.at(200),
    );
    assert!(
        matches!(changed.last(), Some(Action::Judge { unless: None, .. })),
        "{changed:?}"
    );
    let b = cfg("2.1.0");
    let a = promote(&mut g, &b, c.at(201), 200);
    assert_eq!(requests(&a)[0].sha, hash(&b));
    assert_eq!(g.wake_at(), None);
}

#[test]
fn a_rollback_after_a_refusal_never_waits() {
    let c = Clock::new();
    let (mut g, delay) = spreading(&c);
    let b = cfg("2.1.0");
    g.handle(judged(&g, &b), c.at(100));
    g.handle(Event::Timer, c.at(100 + delay));
    promote(&mut g, &b, c.at(100 + delay), 200);
    let refused = refuse(&mut g, hash(&b), &cfg("2.0.0"), c.at(200 + delay));
    assert!(
        has(&refused, |x| matches!(x, Action::RollBack)),
        "{refused:?}"
    );
    let back = g.handle(
        Event::RolledBack(Ok((cfg("2.0.0"), Some(BootTicks(300))))),
        c.at(200 + delay),
    );
    assert_eq!(requests(&back)[0].sha, hash(&cfg("2.0.0")));
    assert_eq!(g.wake_at(), None);
}

/// A resync at `now`, with the annotations file read back unchanged.
fn resync(g: &mut Gate, now: Now) -> Vec<Action> {
    let mut a = g.handle(Event::Resync, now);
    assert!(has(&a, |x| matches!(x, Action::ReadAnnotations)), "{a:?}");
    a.extend(g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/reload-spread", "10s")))),
        now,
    ));
    a
}

#[test]
fn a_resync_at_the_deadline_promotes_the_waiting_change() {
    let c = Clock::new();
    let (mut g, delay) = spreading(&c);
    let b = cfg("2.1.0");
    g.handle(judged(&g, &b), c.at(100));
    // Before the deadline, a resync reads what was judged: skipped, still waiting.
    let early = resync(&mut g, c.at(200));
    assert!(
        has(&early, |x| matches!(
            x,
            Action::Judge {
                unless: Some(_),
                ..
            }
        )),
        "{early:?}"
    );
    assert_eq!(g.wake_at(), Some(c.at(100 + delay).at));
    // At it (the driver gives a resync when both are due, or while the dir is not watched): judged
    // whatever it is, and no deadline left behind to wake on.
    let due = resync(&mut g, c.at(100 + delay));
    assert!(
        has(&due, |x| matches!(x, Action::Judge { unless: None, .. })),
        "{due:?}"
    );
    assert_eq!(g.wake_at(), None);
    let a = promote(&mut g, &b, c.at(101 + delay), 200);
    assert_eq!(requests(&a)[0].sha, hash(&b));
}

/// The promotion made at the end of this pod's share fails (a full disk): it keeps its place,
/// retried after [`PROMOTE_RETRY`], not after another share of the spread.
#[test]
fn a_promotion_that_fails_at_its_due_time_is_retried_without_waiting_again() {
    let c = Clock::new();
    let (mut g, delay) = spreading(&c);
    let b = cfg("2.1.0");
    g.handle(judged(&g, &b), c.at(100));
    g.handle(Event::Timer, c.at(100 + delay));
    let due = g.handle(judged(&g, &b), c.at(100 + delay));
    assert!(has(&due, |x| matches!(x, Action::Switch { .. })), "{due:?}");
    g.handle(
        Event::Switched(Err(super::events::failure("No space left on device"))),
        c.at(100 + delay),
    );
    assert_eq!(g.wake_at(), Some(c.at(100 + delay).at + PROMOTE_RETRY));
    let retry = 100 + delay + PROMOTE_RETRY.as_millis() as u64;
    assert!(matches!(
        g.handle(Event::Timer, c.at(retry))[..],
        [Action::Judge { unless: None, .. }]
    ));
    let again = g.handle(judged(&g, &b), c.at(retry));
    assert!(
        has(&again, |x| matches!(x, Action::Switch { .. })) && spread_note(&again).is_none(),
        "promoted at once, no new wait: {again:?}"
    );
    again
        .iter()
        .for_each(|x| assert!(!matches!(x, Action::Log(LogLine::Spread { .. })), "{x:?}"));
    let ok = g.handle(Event::Switched(Ok(Some(BootTicks(300)))), c.at(retry));
    assert_eq!(requests(&ok)[0].sha, hash(&b));
    // The next change waits for its own share again.
    let next = g.handle(judged(&g, &cfg("2.2.0")), c.at(retry + 10));
    assert!(spread_note(&next).is_some(), "{next:?}");
}

/// The spread lowered during the wait (10 s to 2 s): the deadline follows the share in force at
/// once, counted from when the change was seen, and `/status` never shows a delay longer than the
/// period.
#[test]
fn a_spread_lowered_during_the_wait_moves_the_deadline_at_once() {
    let c = Clock::new();
    let (mut g, delay) = spreading(&c);
    g.handle(judged(&g, &cfg("2.1.0")), c.at(100));
    assert_eq!(g.wake_at(), Some(c.at(100 + delay).at));
    let lowered = g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/reload-spread", "2s")))),
        c.at(200),
    );
    let short = delay / 5;
    assert_eq!(g.wake_at(), Some(c.at(100 + short).at), "{lowered:?}");
    let s = g.published(1);
    let spread = s.spread.as_ref().expect("still waiting");
    assert_eq!(
        (spread.due_at, spread.delay_ms, spread.period_ms),
        (c.at(100 + short).wall, short, 2_000)
    );
    assert!(spread.delay_ms <= spread.period_ms);
    assert!(matches!(
        g.handle(Event::Timer, c.at(100 + short))[..],
        [Action::Judge { unless: None, .. }]
    ));
}
