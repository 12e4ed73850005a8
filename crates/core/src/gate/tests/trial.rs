//! The known-good trial: a config the component applied is recorded only after the component stayed
//! ready without restarting for the trial period; a refused one never is. Events in, actions out,
//! the time passed in.

use std::time::Duration;

use super::events::{Clock, TARGET, has, hash, promote, refuse, started, started_with};
use super::*;
use crate::known_good::{ComponentFacts, ComponentRead, Recorded};
use crate::reload::{BootTicks, Outcome};

const TRIAL_MS: u64 = 300_000;

fn facts(ready: bool, restarts: u64) -> Event {
    Event::Component(ComponentRead::Facts(ComponentFacts { ready, restarts }))
}

fn reads(a: &[Action]) -> bool {
    has(a, |a| matches!(a, Action::ReadComponent))
}

/// The sha a [`Action::RecordKnownGood`] among `a` records.
fn records(a: &[Action]) -> Option<(ContentHash, String)> {
    a.iter().find_map(|a| match a {
        Action::RecordKnownGood { sha, version, .. } => Some((*sha, version.clone())),
        _ => None,
    })
}

/// `obs` promoted at `ms` and applied by the component 10 ms later: the trial's first read is
/// asked for and answered with `restarts`, ready or not.
fn applied(g: &mut Gate, c: &Clock, obs: &Observed, ms: u64, restarts: u64) {
    promote(g, obs, c.at(ms), ms);
    let a = g.handle(Event::Reload(Outcome::Reloaded(hash(obs))), c.at(ms + 10));
    assert!(reads(&a), "{a:?}");
    assert!(g.handle(facts(false, restarts), c.at(ms + 20)).is_empty());
}

#[test]
fn a_config_the_component_ran_ready_for_the_trial_is_recorded_once() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.4.1");
    applied(&mut g, &c, &a, 10, 3);
    // The period runs from the first read.
    assert_eq!(g.wake_at(), Some(c.at(30 + TRIAL_MS).at));
    assert!(!reads(&g.handle(Event::Timer, c.at(29 + TRIAL_MS))));
    let end = g.handle(Event::Timer, c.at(30 + TRIAL_MS));
    assert!(reads(&end), "{end:?}");
    assert_eq!(g.wake_at(), None, "no timer while the read is out");
    let rec = g.handle(facts(true, 3), c.at(40 + TRIAL_MS));
    assert_eq!(records(&rec), Some((hash(&a), "2.4.1".to_owned())));
    let done = g.handle(
        Event::Recorded(Recorded::Written {
            record: "app.confgate-known-good".into(),
            replaced: None,
        }),
        c.at(50 + TRIAL_MS),
    );
    assert!(has(&done, |l| matches!(
        l,
        Action::Log(LogLine::KnownGood { .. })
    )));
    assert_eq!(g.wake_at(), None);
    // The same config applied again (a reload after a restart of the component): not tried again.
    let again = g.handle(
        Event::Reload(Outcome::Reloaded(hash(&a))),
        c.at(60 + TRIAL_MS),
    );
    assert!(!reads(&again), "{again:?}");
}

#[test]
fn a_restart_or_unready_component_starts_the_period_again() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.4.1");
    applied(&mut g, &c, &a, 10, 0);
    g.handle(Event::Timer, c.at(30 + TRIAL_MS));
    let again = g.handle(facts(true, 1), c.at(40 + TRIAL_MS));
    assert_eq!(records(&again), None);
    assert!(has(&again, |l| matches!(
        l,
        Action::Log(LogLine::TrialAgain {
            restarted: true,
            ..
        })
    )));
    assert_eq!(g.wake_at(), Some(c.at(40 + 2 * TRIAL_MS).at));
    g.handle(Event::Timer, c.at(40 + 2 * TRIAL_MS));
    let unready = g.handle(facts(false, 1), c.at(50 + 2 * TRIAL_MS));
    assert_eq!(records(&unready), None, "not ready at the end: {unready:?}");
    g.handle(Event::Timer, c.at(50 + 3 * TRIAL_MS));
    let rec = g.handle(facts(true, 1), c.at(60 + 3 * TRIAL_MS));
    assert_eq!(records(&rec).map(|r| r.0), Some(hash(&a)));
}

#[test]
fn a_config_the_component_refused_is_never_recorded() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.4.1"), cfg("2.5.0"));
    applied(&mut g, &c, &a, 10, 0);
    // b is promoted over a during a's trial, and refused: rolled back to a.
    let p = promote(&mut g, &b, c.at(1000), 200);
    assert!(!reads(&p));
    let r = refuse(&mut g, hash(&b), &a, c.at(1010));
    assert!(records(&r).is_none() && !reads(&r), "{r:?}");
    assert!(has(&r, |x| matches!(x, Action::RollBack)), "{r:?}");
    g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(300))))),
        c.at(1020),
    );
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(1030));
    // a's trial went on: it is what is recorded, never b.
    g.handle(Event::Timer, c.at(30 + TRIAL_MS));
    let rec = g.handle(facts(true, 0), c.at(40 + TRIAL_MS));
    assert_eq!(records(&rec).map(|r| r.0), Some(hash(&a)));
}

#[test]
fn a_config_replaced_during_its_trial_is_not_recorded_and_the_new_one_is_tried() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.4.1"), cfg("2.5.0"));
    applied(&mut g, &c, &a, 10, 0);
    g.handle(Event::Timer, c.at(30 + TRIAL_MS));
    // Before the end read is answered, b is applied: the answer concerns a trial that is over.
    promote(&mut g, &b, c.at(31 + TRIAL_MS), 200);
    let rb = g.handle(
        Event::Reload(Outcome::Reloaded(hash(&b))),
        c.at(32 + TRIAL_MS),
    );
    assert!(reads(&rb), "b's trial begins: {rb:?}");
    let late = g.handle(facts(true, 0), c.at(33 + TRIAL_MS));
    assert_eq!(records(&late), None, "{late:?}");
    g.handle(Event::Timer, c.at(33 + 2 * TRIAL_MS));
    let rec = g.handle(facts(true, 0), c.at(34 + 2 * TRIAL_MS));
    assert_eq!(records(&rec), Some((hash(&b), "2.5.0".to_owned())));
}

#[test]
fn a_failed_write_is_tried_again_after_another_period_and_a_kept_one_is_not() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.4.1");
    applied(&mut g, &c, &a, 10, 0);
    g.handle(Event::Timer, c.at(30 + TRIAL_MS));
    g.handle(facts(true, 0), c.at(40 + TRIAL_MS));
    g.handle(
        Event::Recorded(Recorded::Failed("403".into())),
        c.at(50 + TRIAL_MS),
    );
    assert_eq!(g.wake_at(), Some(c.at(50 + 2 * TRIAL_MS).at));
    g.handle(Event::Timer, c.at(50 + 2 * TRIAL_MS));
    let rec = g.handle(facts(true, 0), c.at(60 + 2 * TRIAL_MS));
    assert!(records(&rec).is_some());
    g.handle(
        Event::Recorded(Recorded::Kept {
            record: "app.confgate-known-good".into(),
            recorded: "2.4.1".into(),
            newer: false,
        }),
        c.at(70 + 2 * TRIAL_MS),
    );
    assert_eq!(g.wake_at(), None);
}

#[test]
fn no_trial_when_off_unversioned_or_the_component_cannot_be_read() {
    let c = Clock::new();
    let mut off = started(&c, Some(ann("confgate.io/trial", "off")));
    promote(&mut off, &cfg("2.4.1"), c.at(10), 10);
    let a = off.handle(
        Event::Reload(Outcome::Reloaded(hash(&cfg("2.4.1")))),
        c.at(20),
    );
    assert!(!reads(&a), "{a:?}");

    let mut g = started(&c, None);
    let a = cfg("2.4.1");
    promote(&mut g, &a, c.at(10), 10);
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(20));
    let gone = g.handle(
        Event::Component(ComponentRead::Unavailable("no credentials".into())),
        c.at(30),
    );
    assert!(has(&gone, |l| matches!(
        l,
        Action::Log(LogLine::TrialUnavailable { .. })
    )));
    assert_eq!(g.wake_at(), None);
    let b = cfg("2.5.0");
    promote(&mut g, &b, c.at(40), 20);
    let rb = g.handle(Event::Reload(Outcome::Reloaded(hash(&b))), c.at(50));
    assert!(
        !reads(&rb),
        "the edge said it cannot read the component: {rb:?}"
    );
}

#[test]
fn a_short_trial_from_the_spec_is_the_period() {
    let c = Clock::new();
    let mut g = started_with(&c, None, |r| r.trial = Some("2s".into()));
    let a = cfg("2.4.1");
    applied(&mut g, &c, &a, 10, 0);
    assert_eq!(g.wake_at(), Some(c.at(30 + 2000).at));
    let _ = (TARGET, Duration::ZERO);
}

#[test]
fn a_config_observe_mode_let_through_is_never_recorded() {
    // Observe mode promotes what the range refuses; the component may run it well, but a pod that
    // enforces the range must never start on it, so no trial starts. An accepted one still does.
    let c = Clock::new();
    let mut g = started_with(&c, None, |r| {
        r.accepts = Some("^2".into());
        r.mode = Some("observe".into());
    });
    let too_new = cfg("3.0.0");
    promote(&mut g, &too_new, c.at(10), 10);
    let a = g.handle(Event::Reload(Outcome::Reloaded(hash(&too_new))), c.at(20));
    assert!(!reads(&a), "{a:?}");
    assert_eq!(g.wake_at(), None, "no trial is due: {a:?}");
    let ok = cfg("2.4.1");
    promote(&mut g, &ok, c.at(30), 30);
    let a = g.handle(Event::Reload(Outcome::Reloaded(hash(&ok))), c.at(40));
    assert!(reads(&a), "an accepted config is tried: {a:?}");
}

#[test]
fn with_no_reload_target_nothing_is_ever_recorded() {
    // Nothing tells the gate the component applied a config, so no trial starts (docs/known-good.md).
    let c = Clock::new();
    let mut g = started_with(&c, None, |r| r.reload = Some("none".into()));
    let a = cfg("2.4.1");
    let promoted = promote(&mut g, &a, c.at(10), 10);
    assert!(
        has(&promoted, |a| matches!(a, Action::Switch { .. })),
        "{promoted:?}"
    );
    assert!(!reads(&promoted), "{promoted:?}");
    assert_eq!(g.wake_at(), None, "no trial is due: {promoted:?}");
    let later = g.handle(Event::Timer, c.at(10 + 2 * TRIAL_MS));
    assert!(!reads(&later) && records(&later).is_none(), "{later:?}");
}
