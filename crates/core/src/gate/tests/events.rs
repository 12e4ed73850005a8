//! The gate as the loop drives it: events in, actions out, time passed in. No files, no processes:
//! each test answers the actions that read or write as the pipeline would.

use std::time::Duration;

use std::time::Instant;

use super::*;
use crate::reload::{BootTicks, Kind, Outcome};
use crate::settings::Reload;
use crate::state::ReloadResult;

pub(super) const TARGET: &str = "http://127.0.0.1:9/reload";

/// The clock of one test: `ms` after its start.
pub(super) struct Clock(Instant);

impl Clock {
    pub(super) fn new() -> Clock {
        Clock(Instant::now())
    }

    pub(super) fn at(&self, ms: u64) -> Now {
        Now {
            at: self.0 + Duration::from_millis(ms),
            wall: jiff::Timestamp::UNIX_EPOCH + Duration::from_millis(ms),
        }
    }
}

/// A promoting gate with a reload target, started with `annotations` and an empty promoted dir.
pub(super) fn started(c: &Clock, annotations: Option<Annotations>) -> Gate {
    started_with(c, annotations, |_| {})
}

/// [`started`] with container-spec settings (flags) beside the reload target.
pub(super) fn started_with(
    c: &Clock,
    annotations: Option<Annotations>,
    spec: impl FnOnce(&mut crate::settings::Raw),
) -> Gate {
    let base = base(">=2", |r| {
        r.reload = Some(TARGET.into());
        spec(r);
    });
    let mut g = Gate::new(base, false).with_annotations_file("/podinfo/annotations".as_ref());
    let a = g.handle(Event::Start(Ok(annotations)), c.at(0));
    assert!(matches!(a.last(), Some(Action::Adopt { .. })), "{a:?}");
    let a = adopted(
        &mut g,
        Observed::Missing(crate::snapshot::Missing::NoObjectKeys),
        c.at(0),
    );
    assert!(a.is_empty(), "nothing found, nothing to do: {a:?}");
    g
}

/// The pipeline's answer to [`Action::Adopt`]: `on_disk` in the promoted dir, judged under the
/// settings in force, with nothing refused, applied or owed kept beside it.
pub(super) fn adopted(g: &mut Gate, on_disk: Observed, now: Now) -> Vec<Action> {
    let judgement = verdict::judge(&on_disk, g.settings());
    g.handle(
        Event::Adopted(Box::new(Found {
            on_disk,
            judgement,
            refused: Vec::new(),
            applied: None,
            owed: None,
            variants: (None, None),
        })),
        now,
    )
}

/// The newest config, as the pipeline answers [`Action::Judge`].
pub(super) fn judged(g: &Gate, obs: &Observed) -> Event {
    Event::Judged {
        seen: Seen::of(obs),
        choice: Some(Box::new(variants::choose(obs.clone(), g.settings()))),
        rollout: None,
        small: false,
    }
}

pub(super) fn requests(actions: &[Action]) -> Vec<&ReloadRequest> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reload(r) => Some(r),
            _ => None,
        })
        .collect()
}

pub(super) fn has(actions: &[Action], what: impl Fn(&Action) -> bool) -> bool {
    actions.iter().any(what)
}

/// Judges `obs` and, when the gate switches to it, answers that the switch was made at `ticks`;
/// returns every action of both steps.
pub(super) fn promote(g: &mut Gate, obs: &Observed, now: Now, ticks: u64) -> Vec<Action> {
    let mut a = g.handle(judged(g, obs), now);
    if has(&a, |a| matches!(a, Action::Switch { .. })) {
        a.extend(g.handle(Event::Switched(Ok(Some(BootTicks(ticks)))), now));
    }
    a
}

pub(super) fn hash(obs: &Observed) -> ContentHash {
    obs.hash().unwrap()
}

/// The rollback base read back from its kept dir, as the pipeline answers [`Action::JudgeBase`].
pub(super) fn base_judged(g: &Gate, obs: &Observed) -> Event {
    Event::BaseJudged(obs.clone(), verdict::judge(obs, g.settings()))
}

/// The component refuses `sha`; the rollback base (`base`, when the gate asks for it) is judged
/// as the pipeline would. Returns every action of both steps.
pub(super) fn refuse(g: &mut Gate, sha: ContentHash, base: &Observed, now: Now) -> Vec<Action> {
    let mut a = g.handle(
        Event::Reload(Outcome::Rejected {
            sha256: sha,
            refusal: refusal("500: bad rule"),
        }),
        now,
    );
    if has(&a, |a| matches!(a, Action::JudgeBase { .. })) {
        a.extend(g.handle(base_judged(g, base), now));
    }
    a
}

/// `applied` promoted and reloaded by the component, then `newer` promoted over it: the component's
/// answer about `newer` is still to come.
pub(super) fn promoted_over_applied(g: &mut Gate, c: &Clock, applied: &Observed, newer: &Observed) {
    promote(g, applied, c.at(10), 100);
    g.handle(Event::Reload(Outcome::Reloaded(hash(applied))), c.at(20));
    promote(g, newer, c.at(30), 200);
}

/// [`promoted_over_applied`], then the component refuses `newer` and `applied` is judged as the
/// rollback base. Returns the refusal's actions.
pub(super) fn refused_over_applied(
    g: &mut Gate,
    c: &Clock,
    applied: &Observed,
    newer: &Observed,
) -> Vec<Action> {
    promoted_over_applied(g, c, applied, newer);
    refuse(g, hash(newer), applied, c.at(40))
}

/// A promotion's or rollback's failure with `why` as the file system's answer.
pub(super) fn failure(why: &str) -> crate::promote::Failure {
    crate::promote::Failure::new(crate::promote::Error::Io {
        action: "write",
        path: "/promoted/..data_tmp".into(),
        source: std::io::Error::other(why.to_owned()),
    })
}

#[test]
fn a_momentary_annotations_absence_keeps_the_settings_until_the_grace_ends() {
    let c = Clock::new();
    let mut g = started(&c, Some(ann("confgate.io/accepts", "^2")));
    assert_eq!(g.settings().accepts_text(), Some("^2"));
    assert!(matches!(
        g.handle(Event::Files(Files::ALL), c.at(0))[..],
        [Action::ReadAnnotations]
    ));
    let a = g.handle(Event::Annotations(Ok(None)), c.at(0));
    // Kept, said once, and the config (asked for with the annotations) still looked at.
    assert!(has(&a, |a| matches!(
        a,
        Action::Log(LogLine::AnnotationsMissing { .. })
    )));
    assert!(matches!(a.last(), Some(Action::Judge { unless: None, .. })));
    assert_eq!(g.settings().accepts_text(), Some("^2"));
    assert_eq!(g.wake_at(), Some(c.at(2000).at));
    // Nothing is due before the end of the grace.
    assert!(g.handle(Event::Timer, c.at(1999)).is_empty());
    // At its end, the file is read again, and the config with it.
    assert!(matches!(
        g.handle(Event::Timer, c.at(2000))[..],
        [Action::ReadAnnotations]
    ));
    assert_eq!(g.wake_at(), None);
    let a = g.handle(Event::Annotations(Ok(None)), c.at(2000));
    assert_eq!(g.settings().accepts_text(), Some(">=2"), "the flag's range");
    assert!(has(&a, |a| matches!(
        a,
        Action::Log(LogLine::AnnotationsGone { changed: true })
    )));
    assert!(has(&a, |a| matches!(a, Action::RejudgeActive { .. })));
    assert!(matches!(a.last(), Some(Action::Judge { unless: None, .. })));
    let settings = g.published(0).checks.remove(0);
    assert!(
        settings.ok
            && settings
                .message
                .contains("absent (it existed) for over 2 s"),
        "{settings:?}"
    );
    assert_eq!(g.wake_at(), None);
}

#[test]
fn the_file_back_within_the_grace_cancels_it() {
    let c = Clock::new();
    let mut g = started(&c, Some(ann("confgate.io/accepts", "^2")));
    g.handle(Event::Annotations(Ok(None)), c.at(0));
    let a = g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/accepts", "^2")))),
        c.at(500),
    );
    assert!(has(&a, |a| matches!(
        a,
        Action::Log(LogLine::AnnotationsBack)
    )));
    // Same settings: nothing to judge again.
    assert!(!has(&a, |a| matches!(a, Action::Judge { .. })), "{a:?}");
    assert_eq!(g.wake_at(), None);
    assert!(g.handle(Event::Timer, c.at(2000)).is_empty());
    assert_eq!(g.settings().accepts_text(), Some("^2"));
}

/// A promotion owes a reload; a newer one replaces it (the worker coalesces); the outcome of the
/// older content neither clears the newer debt nor makes it applied.
#[test]
fn reload_owed_then_requested_then_confirmed_and_coalesced() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    let first = promote(&mut g, &a, c.at(10), 100);
    assert!(has(&first, |x| matches!(
        x,
        Action::Switch {
            owe_reload: true,
            ..
        }
    )));
    // Into an empty dir: a start-up check, promoted at the wall time after the switch.
    let r = requests(&first);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].kind,
        Kind::Startup {
            promoted: c.at(10).wall
        }
    );
    assert_eq!(r[0].target, Reload::Http(TARGET.parse().unwrap()));
    // The request first, then the yield, then the bookkeeping and the tidying.
    let order: Vec<_> = first
        .iter()
        .filter_map(|x| match x {
            Action::Reload(_) => Some("reload"),
            Action::Yield => Some("yield"),
            Action::FinishSwitch { .. } => Some("finish"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["reload", "yield", "finish"]);

    let second = promote(&mut g, &b, c.at(20), 200);
    let r = requests(&second);
    assert_eq!(
        (r[0].kind, r[0].sha, r[0].promoted_at),
        (Kind::Reload, hash(&b), Some(BootTicks(200)))
    );
    assert_eq!(g.reloads.owed().map(|o| o.sha), Some(hash(&b)));

    // The check of the first config answers late: its marker goes, the newer debt stays, and the
    // first config's kept dir is the rollback base (the component runs it), not what is promoted.
    let late = g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(30));
    assert!(
        matches!(
            late[..],
            [Action::AdoptBaseline, Action::Log(LogLine::BaselineApplied { .. }), Action::ClearReloadOwed { sha, refused: false }] if sha == hash(&a)
        ),
        "{late:?}"
    );
    assert_eq!(g.reloads.owed().map(|o| o.sha), Some(hash(&b)));
    let s = g.published(2);
    assert_eq!(s.applied.unwrap().version.as_deref(), Some("2.0.0"));
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.1.0"));

    g.handle(Event::Reload(Outcome::Attempting), c.at(40));
    assert_eq!(g.published(2).reload.last_result, ReloadResult::Pending);
    let done = g.handle(Event::Reload(Outcome::Reloaded(hash(&b))), c.at(50));
    assert!(has(
        &done,
        |x| matches!(x, Action::MarkApplied { sha, .. } if *sha == hash(&b))
    ));
    assert_eq!(g.reloads.owed(), None);
    let s = g.published(2);
    assert_eq!(s.reload.last_result, ReloadResult::Success);
    assert_eq!(s.reload.requested, 2);
    assert_eq!(s.applied.unwrap().version.as_deref(), Some("2.1.0"));
}

#[test]
fn refused_content_is_recorded_rolled_back_and_its_base_owed_again() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    promoted_over_applied(&mut g, &c, &a, &b);
    let refused = g.handle(
        Event::Reload(Outcome::Rejected {
            sha256: hash(&b),
            refusal: refusal("500: bad rule"),
        }),
        c.at(40),
    );
    // Recorded before the rollback, its debt dropped (here and on disk), then rolled back.
    let steps: Vec<_> = refused
        .iter()
        .filter(|x| !matches!(x, Action::Log(_) | Action::Count(_) | Action::Notice(_)))
        .cloned()
        .collect();
    assert!(
        matches!(&steps[..], [
            Action::RecordRejected(record),
            Action::ClearReloadOwed { sha, refused: true },
            Action::JudgeBase { .. },
        ] if record[..] == [(hash(&b), refusal("500: bad rule"))] && *sha == hash(&b)),
        "{steps:?}"
    );
    assert_eq!(g.reloads.owed(), None);
    // The base passes under the settings in force: rolled back to.
    assert!(matches!(
        g.handle(base_judged(&g, &a), c.at(45))[..],
        [Action::RollBack]
    ));
    let back = g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(300))))),
        c.at(50),
    );
    assert!(has(
        &back,
        |x| matches!(x, Action::MarkReloadOwed(sha) if *sha == hash(&a))
    ));
    let r = requests(&back);
    assert_eq!(
        (r[0].kind, r[0].sha, r[0].promoted_at),
        (Kind::Reload, hash(&a), Some(BootTicks(300)))
    );
    let s = g.published(3);
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    assert_eq!(s.reload.last_result, ReloadResult::Rejected);
    // The refused bytes are not offered again.
    let again = promote(&mut g, &b, c.at(60), 400);
    assert!(
        !has(&again, |x| matches!(x, Action::Switch { .. })),
        "{again:?}"
    );
    // The base's reload done: nothing owed.
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(70));
    assert_eq!(g.reloads.owed(), None);
}

#[test]
fn a_refusal_with_nothing_applied_rolls_nothing_back_and_a_failed_rollback_is_reported() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.0.0");
    promote(&mut g, &a, c.at(10), 100);
    let refused = g.handle(
        Event::Reload(Outcome::Rejected {
            sha256: hash(&a),
            refusal: refusal("no"),
        }),
        c.at(20),
    );
    assert!(!has(&refused, |x| matches!(x, Action::RollBack)));
    assert!(has(&refused, |x| matches!(
        x,
        Action::Log(LogLine::NoBase { .. })
    )));

    let mut g = started(&c, None);
    let b = cfg("2.1.0");
    refused_over_applied(&mut g, &c, &a, &b);
    let failed = g.handle(
        Event::RolledBack(Err(RollbackFailure::Failed(failure("disk full")))),
        c.at(50),
    );
    assert!(requests(&failed).is_empty());
    let s = g.published(2);
    assert!(
        !s.ready && s.reason.contains("rollback failed") && s.reason.contains("disk full"),
        "{s:?}"
    );
}

#[test]
fn a_restart_requests_the_reload_owed_unless_the_content_was_refused() {
    let c = Clock::new();
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    let restart = |refused: Vec<(ContentHash, crate::reload::Refusal)>,
                   applied: Option<&Observed>| {
        let base = base(">=2", |r| r.reload = Some(TARGET.into()));
        let mut g = Gate::new(base, false);
        g.handle(Event::Start(Ok(None)), c.at(0));
        let j = verdict::judge(&b, g.settings());
        let applied = applied.map(|o| (o.clone(), verdict::judge(o, g.settings()), None));
        let a = g.handle(
            Event::Adopted(Box::new(Found {
                on_disk: b.clone(),
                judgement: j,
                refused,
                applied,
                owed: Some(hash(&b)),
                variants: (None, None),
            })),
            c.at(0),
        );
        (g, a)
    };
    // Owed: requested again, for every matching process (when the promotion was is unknown).
    let (g, actions) = restart(Vec::new(), None);
    let r = requests(&actions);
    assert_eq!(
        (r[0].kind, r[0].sha, r[0].promoted_at),
        (Kind::Reload, hash(&b), None)
    );
    assert_eq!(
        g.published(1).active.unwrap().version.as_deref(),
        Some("2.1.0")
    );
    // Refused after the marker was written: not sent, the marker cleared.
    let (_, actions) = restart(vec![(hash(&b), refusal("no"))], None);
    assert!(requests(&actions).is_empty(), "{actions:?}");
    assert!(has(&actions, |x| matches!(
        x,
        Action::ClearReloadOwed { refused: true, .. }
    )));
    // Refused and in place, with an applied config: the rollback is finished now.
    let (mut g, actions) = restart(vec![(hash(&b), refusal("no"))], Some(&a));
    assert!(
        matches!(actions.last(), Some(Action::JudgeBase { .. })),
        "{actions:?}"
    );
    assert!(matches!(
        g.handle(base_judged(&g, &a), c.at(1))[..],
        [Action::RollBack]
    ));
    let back = g.handle(
        Event::RolledBack(Ok((a.clone(), Some(BootTicks(5))))),
        c.at(1),
    );
    assert_eq!(requests(&back)[0].sha, hash(&a));
}

#[test]
fn a_corrected_reload_target_resends_the_owed_request() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.0.0");
    promote(&mut g, &a, c.at(10), 100);
    g.handle(
        Event::Reload(Outcome::Failed(crate::reload::Failure::new(
            crate::reload::Error::Timeout(std::time::Duration::from_secs(1)),
        ))),
        c.at(20),
    );
    let fixed = "http://127.0.0.1:10/reload";
    let changed = g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/reload", fixed)))),
        c.at(30),
    );
    let r = requests(&changed);
    assert_eq!(r.len(), 1, "{changed:?}");
    assert_eq!(
        (&r[0].target, r[0].sha, r[0].promoted_at),
        (
            &Reload::Http(fixed.parse().unwrap()),
            hash(&a),
            Some(BootTicks(100))
        )
    );
    // Once done, a change of target sends nothing.
    g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(40));
    let changed = g.handle(Event::Annotations(Ok(Some(Annotations::new()))), c.at(50));
    assert!(requests(&changed).is_empty(), "{changed:?}");
}

#[test]
fn a_failed_switch_is_retried_after_a_second() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.0.0");
    g.handle(judged(&g, &a), c.at(10));
    let failed = g.handle(Event::Switched(Err(failure("disk full"))), c.at(10));
    assert!(requests(&failed).is_empty());
    assert!(has(&failed, |x| matches!(
        x,
        Action::Count(Count::PromotionFailed)
    )));
    assert!(!g.published(0).ready);
    assert_eq!(g.wake_at(), Some(c.at(10).at + PROMOTE_RETRY));
    assert!(g.handle(Event::Timer, c.at(1009)).is_empty());
    // Due: the same content is judged again (what was judged is forgotten).
    assert!(matches!(
        g.handle(Event::Timer, c.at(1010))[..],
        [Action::Judge { unless: None, .. }]
    ));
    assert_eq!(g.wake_at(), None);
}

#[test]
fn identical_input_is_not_judged_again_until_the_settings_change() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let a = cfg("2.0.0");
    promote(&mut g, &a, c.at(10), 100);
    let Action::Judge { unless, .. } = &g.handle(Event::Files(Files::CONFIG), c.at(20))[0] else {
        panic!("judge")
    };
    assert_eq!(unless, &Some(Seen::of(&a)));
    let changed = g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/accepts", "^2")))),
        c.at(30),
    );
    assert!(
        matches!(changed.last(), Some(Action::Judge { unless: None, .. })),
        "new settings: judged whatever it is: {changed:?}"
    );
    g.handle(judged(&g, &a), c.at(31));
    let Action::Judge { unless, .. } = &g.handle(Event::Files(Files::CONFIG), c.at(40))[0] else {
        panic!("judge")
    };
    assert_eq!(unless, &Some(Seen::of(&a)));
}

#[test]
fn the_resync_tidies_then_looks_at_everything_and_drops_a_due_retry() {
    let c = Clock::new();
    let mut g = started(&c, Some(ann("confgate.io/accepts", "^2")));
    let a = cfg("2.0.0");
    g.handle(judged(&g, &a), c.at(10));
    g.handle(Event::Switched(Err(failure("disk full"))), c.at(10));
    let resync = g.handle(Event::Resync, c.at(1010));
    assert!(
        matches!(resync[..], [Action::Tidy, Action::ReadAnnotations]),
        "{resync:?}"
    );
    assert_eq!(
        g.wake_at(),
        None,
        "the resync re-reads what the retry would"
    );
    let same = g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/accepts", "^2")))),
        c.at(1010),
    );
    assert!(matches!(same[..], [Action::Judge { .. }]), "{same:?}");
}

#[test]
fn the_watch_is_logged_when_its_state_changes_and_its_errors_counted() {
    let c = Clock::new();
    let mut g = started(&c, None);
    let watch = |errors, problem: Option<&str>| Event::Watch {
        errors,
        problem: problem.map(str::to_owned),
    };
    assert!(g.handle(watch(0, None), c.at(0)).is_empty());
    let lost = g.handle(watch(2, Some("/config is absent")), c.at(1));
    assert!(
        matches!(&lost[..], [
            Action::Count(Count::WatchErrors(2)),
            Action::Log(LogLine::Watch(Some(why))),
        ] if why == "/config is absent"),
        "{lost:?}"
    );
    assert!(
        g.handle(watch(0, Some("/config is absent")), c.at(2))
            .is_empty()
    );
    assert_eq!(
        g.published(0).watch_error.as_deref(),
        Some("/config is absent")
    );
    assert!(matches!(
        g.handle(watch(0, None), c.at(3))[..],
        [Action::Log(LogLine::Watch(None))]
    ));
}
