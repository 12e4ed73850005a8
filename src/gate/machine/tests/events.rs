//! The gate as the loop drives it: events in, actions out, time passed in. No files, no processes:
//! each test answers the actions that read or write as the pipeline would.

use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::reload::{BootTicks, Kind, Outcome};
use crate::settings::Reload;
use crate::state::ReloadResult;
use crate::validate::Checked;

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
    let empty = Observed::Missing(crate::snapshot::Missing::NoObjectKeys);
    let j = verdict::judge(&empty, g.settings());
    let a = g.handle(
        Event::Adopted(Box::new(Found {
            on_disk: empty,
            judgement: j,
            refused: Vec::new(),
            applied: None,
            owed: None,
            variants: (None, None),
        })),
        c.at(0),
    );
    assert!(a.is_empty(), "nothing found, nothing to do: {a:?}");
    g
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
fn promoted_over_applied(g: &mut Gate, c: &Clock, applied: &Observed, newer: &Observed) {
    promote(g, applied, c.at(10), 100);
    g.handle(Event::Reload(Outcome::Reloaded(hash(applied))), c.at(20));
    promote(g, newer, c.at(30), 200);
}

/// [`promoted_over_applied`], then the component refuses `newer` and `applied` is judged as the
/// rollback base. Returns the refusal's actions.
fn refused_over_applied(
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

/// A gate with a checker set: every promotion waits for its answer.
fn checking(c: &Clock, check: &str, secret: bool) -> Gate {
    let base = base(">=2", |r| {
        r.reload = Some(TARGET.into());
        r.validate = Some(check.into());
    });
    let mut g = Gate::new(base, false).with_secret_content(secret);
    g.handle(Event::Start(Ok(None)), c.at(0));
    let empty = Observed::Missing(crate::snapshot::Missing::NoObjectKeys);
    let j = verdict::judge(&empty, g.settings());
    g.handle(
        Event::Adopted(Box::new(Found {
            on_disk: empty,
            judgement: j,
            refused: Vec::new(),
            applied: None,
            owed: None,
            variants: (None, None),
        })),
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

/// One phase at a time: a refusal that comes while a newer candidate waits for the checker is rolled
/// back first; the check goes on (shown all along), and its pass promotes the candidate.
#[test]
fn a_refusal_during_a_check_rolls_back_first_and_the_check_goes_on() {
    let c = Clock::new();
    let mut g = checking(&c, CHECK, false);
    let (a, b, d) = (cfg("2.0.0"), cfg("2.1.0"), cfg("2.2.0"));
    for (obs, at) in [(&a, 1), (&b, 3)] {
        g.handle(judged(&g, obs), c.at(at));
        g.handle(
            Event::Validated {
                sha: hash(obs),
                checked: Checked::Passed,
            },
            c.at(at),
        );
        g.handle(Event::Switched(Ok(Some(BootTicks(at)))), c.at(at));
        if obs == &a {
            g.handle(Event::Reload(Outcome::Reloaded(hash(&a))), c.at(2));
        }
    }
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
