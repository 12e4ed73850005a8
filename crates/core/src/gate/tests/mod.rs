//! The verdict state's decisions, one call at a time; `events` drives the whole gate through
//! [`Gate::handle`].

mod checking;
mod events;
mod fallback;
mod notices;
mod rollback;
mod spread;
mod trial;

use super::decide::held_refusals;
use super::decision::{Decision, Tell};
use super::messages::{
    Action, Count, Event, Files, Found, LogLine, Now, ReloadRequest, RollbackFailure, Seen,
};
use super::state::{Gate, Modes, PROMOTE_RETRY, REJECTED_KEPT};
use crate::annotations::Annotations;
use crate::promote::RecordTarget;
use crate::reload::{Refusal, RefusedBy};
use crate::settings::{Raw, Reload, Settings};
use crate::snapshot::{ContentHash, Observed, Snapshot};
use crate::state::{CheckKind, Status};
use crate::variants::Choice;
use crate::verdict::Verdict;
use crate::{variants, verdict};
use std::collections::BTreeMap;

fn base(accepts: &str, extra: impl FnOnce(&mut Raw)) -> Settings {
    let mut raw = Raw {
        accepts: Some(accepts.into()),
        ..Raw::default()
    };
    extra(&mut raw);
    Settings::from_raw(&raw).unwrap()
}

/// A gate over a promoted dir with `accepts` from a flag and every other setting by default.
fn gate(accepts: &str) -> Gate {
    Gate::new(base(accepts, |_| {}), false)
}

/// [`gate`] with `version` already promoted.
fn running(accepts: &str, version: &str) -> Gate {
    let mut g = gate(accepts);
    step(&mut g, &cfg(version));
    g
}

fn ann(key: &str, value: &str) -> Annotations {
    Annotations::from([(key.to_owned(), value.to_owned())])
}

fn cfg(version: &str) -> Observed {
    Observed::Config(Snapshot::new(BTreeMap::from([(
        "version".to_owned(),
        version.as_bytes().to_vec(),
    )])))
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::UNIX_EPOCH
}

fn reload_view() -> crate::state::ReloadView {
    Status::default().reload
}

/// The gate's decision on `read`, judged under its settings as the pipeline judges it.
fn decide(g: &mut Gate, read: &Observed) -> (Choice, Decision) {
    let choice = variants::choose(read.clone(), g.settings());
    g.decide(choice)
}

fn adopt(g: &mut Gate, obs: &Observed) {
    let j = verdict::judge(obs, g.settings());
    g.adopt_on_disk(obs, &j, now());
}

fn adopt_applied(g: &mut Gate, obs: &Observed) {
    let j = verdict::judge(obs, g.settings());
    g.adopt_applied(obs, &j, now());
}

fn rejudge(g: &mut Gate, obs: &Observed) -> bool {
    let j = verdict::judge(obs, g.settings());
    g.rejudge_active(obs, &j)
}

fn step(g: &mut Gate, obs: &Observed) -> Decision {
    let (_, a) = decide(g, obs);
    if a != Decision::Keep {
        g.activated(now());
    }
    a
}

#[test]
fn hold_stays_ready_and_stale_unready_does_not() {
    for (policy, ready_when_held) in [("hold", true), ("unready", false)] {
        let mut g = Gate::new(
            base("^2", |r| r.on_incompatible = Some(policy.into())),
            false,
        );
        assert!(!g.status(reload_view()).ready);
        assert_eq!(
            step(&mut g, &cfg("2.1.0")),
            Decision::Promote {
                tell: Tell::StartupCheck
            }
        );
        let s = g.status(reload_view());
        assert!(
            s.ready && !s.stale && s.started && s.candidate.is_none(),
            "{s:?}"
        );
        assert_eq!(step(&mut g, &cfg("3.0.0")), Decision::Keep);
        let s = g.status(reload_view());
        assert_eq!(
            (s.ready, s.stale),
            (ready_when_held, true),
            "{policy}: {s:?}"
        );
        assert_eq!(s.candidate.as_ref().unwrap().verdict, Verdict::TooNew);
        assert!(s.reason.contains("holding 2.1.0"), "{}", s.reason);
        assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.1.0"));
        assert_eq!(
            step(
                &mut g,
                &Observed::Missing(crate::snapshot::Missing::NoObjectKeys)
            ),
            Decision::Keep
        );
        assert_eq!(g.status(reload_view()).ready, ready_when_held);
        assert_eq!(step(&mut g, &cfg("2.1.0")), Decision::Keep);
        let s = g.status(reload_view());
        assert!(s.ready && !s.stale, "{s:?}");
    }
}

#[test]
fn not_ready_before_any_accepted_config_whatever_the_policy() {
    let mut g = gate("^2");
    step(&mut g, &cfg("3.0.0"));
    let s = g.status(reload_view());
    assert!(!s.ready && !s.started && !s.stale);
    assert!(
        s.reason
            .starts_with("no accepted config yet: newest config 3.0.0 is too-new"),
        "{}",
        s.reason
    );
}

#[test]
fn observe_promotes_everything_and_stays_ready() {
    let mut g = Gate::new(base("^2", |r| r.mode = Some("observe".into())), false);
    assert!(g.status(reload_view()).ready);
    assert_eq!(
        step(&mut g, &cfg("3.0.0")),
        Decision::Promote {
            tell: Tell::StartupCheck
        }
    );
    let s = g.status(reload_view());
    assert!(s.ready && s.started);
    assert_eq!(s.active.unwrap().verdict, Verdict::TooNew);
    assert_eq!(
        step(
            &mut g,
            &Observed::Missing(crate::snapshot::Missing::NoObjectKeys)
        ),
        Decision::Keep
    );
    assert!(g.status(reload_view()).ready);
}

#[test]
fn restart_with_same_content_neither_writes_nor_reloads() {
    let mut g = gate("^2");
    adopt(&mut g, &cfg("2.0.0"));
    assert!(g.status(reload_view()).started);
    assert_eq!(step(&mut g, &cfg("2.0.0")), Decision::Keep);
    assert_eq!(
        step(&mut g, &cfg("2.0.1")),
        Decision::Promote { tell: Tell::Reload }
    );
}

#[test]
fn on_disk_config_no_longer_accepted_is_not_active() {
    let mut g = gate("^3");
    adopt(&mut g, &cfg("2.0.0"));
    assert!(!g.status(reload_view()).started);
    assert_eq!(
        step(&mut g, &cfg("3.0.0")),
        Decision::Promote { tell: Tell::Reload }
    );
}

#[test]
fn gate_only_does_not_reload_the_first_config() {
    let mut g = Gate::new(base("^2", |_| {}), true);
    // Nor check it: gate-only, every restart sees a "first" config.
    assert_eq!(
        step(&mut g, &cfg("2.0.0")),
        Decision::Promote { tell: Tell::Silent }
    );
    assert_eq!(
        step(&mut g, &cfg("2.0.1")),
        Decision::Promote { tell: Tell::Reload }
    );
}

#[test]
fn widened_range_via_annotation_promotes_the_held_snapshot() {
    let mut g = running("^2", "2.0.0");
    assert_eq!(step(&mut g, &cfg("3.0.0")), Decision::Keep);
    assert!(g.set_annotations(Ok(ann("confgate.io/accepts", ">=2, <4"))));
    assert_eq!(
        step(&mut g, &cfg("3.0.0")),
        Decision::Promote { tell: Tell::Reload }
    );
}

#[test]
fn bad_annotation_is_named_keeps_settings_and_readiness() {
    let mut g = running("^2", "2.0.0");
    assert!(!g.set_annotations(Ok(ann("confgate.io/accepts", "two"))));
    let s = g.status(reload_view());
    assert!(s.ready, "the config in force is good: {}", s.reason);
    let settings = s
        .failing(CheckKind::Settings)
        .expect("the settings check fails");
    assert!(
        settings.message.contains("confgate.io/accepts \"two\""),
        "{}",
        settings.message
    );
    assert_eq!(s.accepts.as_deref(), Some("^2"));
    g.set_annotations(Err(crate::annotations::unreadable("line 3: bad")));
    let s = g.status(reload_view());
    assert!(s.ready);
    assert!(
        s.failing(CheckKind::Settings)
            .unwrap()
            .message
            .contains("line 3")
    );
    g.set_annotations(Ok(Annotations::new()));
    let s = g.status(reload_view());
    assert!(s.ready && s.failing(CheckKind::Settings).is_none());
}

#[test]
fn rejected_content_is_rolled_back_held_and_not_offered_again() {
    for (policy, ready_when_held) in [("hold", true), ("unready", false)] {
        let mut g = Gate::new(
            base("^2", |r| r.on_incompatible = Some(policy.into())),
            false,
        );
        let good = cfg("2.0.0");
        step(&mut g, &good);
        assert!(g.reloaded(good.hash().unwrap(), now()));
        let bad = cfg("2.1.0");
        assert_eq!(step(&mut g, &bad), Decision::Promote { tell: Tell::Reload });
        let base = g.rejected_by_component(bad.hash().unwrap(), &refusal("500: bad rule"));
        assert_eq!(base, good.hash());
        g.rolled_back(Modes::new());
        let s = g.status(reload_view());
        assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.0.0"));
        assert_eq!(
            s.applied.as_ref().unwrap().version.as_deref(),
            Some("2.0.0")
        );
        let d = s.desired.as_ref().unwrap();
        assert_eq!(
            (d.version.as_deref(), d.verdict),
            (Some("2.1.0"), Verdict::RejectedByComponent)
        );
        assert_eq!(
            (s.ready, s.stale),
            (ready_when_held, true),
            "{policy}: {s:?}"
        );
        assert!(s.reason.contains("500: bad rule"), "{}", s.reason);
        // The same bytes again (a resync, a settings change) are not promoted.
        g.set_annotations(Ok(Annotations::new()));
        let (j, a) = decide(&mut g, &bad);
        assert_eq!(
            (j.judgement.verdict, a),
            (Verdict::RejectedByComponent, Decision::Keep)
        );
        // Different content is judged afresh.
        assert_eq!(
            step(&mut g, &cfg("2.1.1")),
            Decision::Promote { tell: Tell::Reload }
        );
    }
}

#[test]
fn the_first_config_is_checked_at_start_up_and_is_then_the_rollback_base() {
    let mut g = gate("^2");
    adopt(
        &mut g,
        &Observed::Missing(crate::snapshot::Missing::NoObjectKeys),
    );
    let (a, b) = (cfg("2.0.0"), cfg("2.1.0"));
    assert_eq!(
        step(&mut g, &a),
        Decision::Promote {
            tell: Tell::StartupCheck
        }
    );
    // The check found the component runs it: kept as the base.
    assert!(g.reloaded(a.hash().unwrap(), now()));
    assert_eq!(step(&mut g, &b), Decision::Promote { tell: Tell::Reload });
    assert_eq!(
        g.rejected_by_component(b.hash().unwrap(), &refusal("500: bad rule")),
        a.hash()
    );
    g.rolled_back(Modes::new());
    let s = g.status(reload_view());
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
    assert_eq!(s.applied.unwrap().version.as_deref(), Some("2.0.0"));
}

/// What a run learnt (applied, refused), read back by the next one, gives the same decisions.
#[test]
fn a_restart_knows_what_was_applied_and_what_was_refused() {
    let (a, b) = (cfg("2.1.0"), cfg("2.2.0"));
    let mut first = running("^2", "2.1.0");
    first.reloaded(a.hash().unwrap(), now());
    step(&mut first, &b);
    assert_eq!(
        first.rejected_by_component(b.hash().unwrap(), &refusal("500: bad rule")),
        a.hash()
    );
    first.rolled_back(Modes::new());
    let record = first.rejected_record().to_vec();
    assert_eq!(record, [(b.hash().unwrap(), refusal("500: bad rule"))]);

    let mut g = gate("^2");
    adopt(&mut g, &a);
    g.adopt_rejected(record);
    adopt_applied(&mut g, &a);
    assert_eq!(g.refused_in_place(), None);
    assert!(g.is_rejected(b.hash().unwrap()));
    let s = g.status(reload_view());
    assert_eq!(s.applied.unwrap().version.as_deref(), Some("2.1.0"));
    // The refused content is not offered again, and says why.
    let (j, action) = decide(&mut g, &b);
    assert_eq!(
        (j.judgement.verdict, action),
        (Verdict::RejectedByComponent, Decision::Keep)
    );
    assert!(j.judgement.reason.contains("500: bad rule"));
    // Other content is promoted and reloaded as usual.
    assert_eq!(
        step(&mut g, &cfg("2.2.1")),
        Decision::Promote { tell: Tell::Reload }
    );
}

#[test]
fn a_restart_that_finds_refused_content_in_place_rolls_back_to_the_applied_config() {
    let (a, b) = (cfg("2.1.0"), cfg("2.2.0"));
    let mut g = gate("^2");
    adopt(&mut g, &b);
    g.adopt_rejected(vec![(b.hash().unwrap(), refusal("no"))]);
    adopt_applied(&mut g, &a);
    assert_eq!(
        g.refused_in_place(),
        Some((b.hash().unwrap(), a.hash().unwrap(), refusal("no")))
    );
    g.rolled_back(Modes::new());
    assert_eq!(g.refused_in_place(), None);
    assert_eq!(
        g.status(reload_view()).active.unwrap().version.as_deref(),
        Some("2.1.0")
    );
    // Without an applied config the refused content stays, reported.
    let mut g = gate("^2");
    adopt(&mut g, &b);
    g.adopt_rejected(vec![(b.hash().unwrap(), refusal("no"))]);
    assert_eq!(g.refused_in_place(), None);
    // An applied config the component refused later is no base.
    let mut g = gate("^2");
    adopt(&mut g, &b);
    g.adopt_rejected(vec![(a.hash().unwrap(), refusal("no"))]);
    adopt_applied(&mut g, &a);
    assert!(g.status(reload_view()).applied.is_none());
}

#[test]
fn the_refusals_remembered_are_bounded_newest_kept() {
    let mut g = gate("^2");
    let many: Vec<_> = (0..20)
        .map(|i| {
            (
                cfg(&format!("2.0.{i}")).hash().unwrap(),
                refusal(&format!("no {i}")),
            )
        })
        .collect();
    g.adopt_rejected(many[..12].to_vec());
    for (h, why) in &many[12..] {
        g.rejected_by_component(*h, why);
    }
    assert_eq!(g.rejected_record(), &many[20 - REJECTED_KEPT..]);
    // Refused again, it moves to the newest place rather than being kept twice.
    g.rejected_by_component(many[15].0, &refusal("again"));
    let record = g.rejected_record();
    assert_eq!(record.len(), REJECTED_KEPT);
    assert_eq!(record.last().unwrap(), &(many[15].0, refusal("again")));
}

#[test]
fn rejection_without_an_applied_config_has_nothing_to_roll_back_to() {
    let mut g = gate("^2");
    let first = cfg("2.0.0");
    step(&mut g, &first);
    assert_eq!(
        g.rejected_by_component(first.hash().unwrap(), &refusal("no")),
        None
    );
    assert!(g.status(reload_view()).applied.is_none());
}

#[test]
fn no_reload_for_the_first_promotion_into_an_empty_dir() {
    let mut g = gate("^2");
    adopt(
        &mut g,
        &Observed::Missing(crate::snapshot::Missing::NoObjectKeys),
    );
    assert_eq!(
        step(&mut g, &cfg("2.0.0")),
        Decision::Promote {
            tell: Tell::StartupCheck
        }
    );
    assert_eq!(
        step(&mut g, &cfg("2.0.1")),
        Decision::Promote { tell: Tell::Reload }
    );
    // Something was in the promoted dir, even rejected: the component read it, so it reloads.
    let mut g = gate("^3");
    adopt(&mut g, &cfg("2.0.0"));
    assert_eq!(
        step(&mut g, &cfg("3.0.0")),
        Decision::Promote { tell: Tell::Reload }
    );
}

#[test]
fn a_mode_change_alone_is_promoted() {
    let mut g = gate("^2");
    let files = BTreeMap::from([("version".to_owned(), b"2.0.0".to_vec())]);
    let plain = Observed::Config(Snapshot::new(files.clone()));
    let exec = Observed::Config(Snapshot::with_modes(
        files,
        BTreeMap::from([("version".to_owned(), 0o755)]),
    ));
    assert_eq!(plain.hash(), exec.hash(), "the content hash ignores modes");
    step(&mut g, &plain);
    assert_eq!(
        step(&mut g, &exec),
        Decision::Promote { tell: Tell::Reload }
    );
    assert_eq!(step(&mut g, &exec), Decision::Keep);
}

#[test]
fn narrowed_settings_drop_the_active_config_as_a_restart_would() {
    let narrow = || ann("confgate.io/accepts", "^3");
    let mut g = running("^2", "2.0.0");
    assert!(g.set_annotations(Ok(narrow())));
    assert!(!rejudge(&mut g, &cfg("2.0.1")), "other content is ignored");
    assert!(rejudge(&mut g, &cfg("2.0.0")));
    assert_eq!(step(&mut g, &cfg("2.0.0")), Decision::Keep);
    let live = g.status(reload_view());
    let mut restarted = gate("^2");
    restarted.set_annotations(Ok(narrow()));
    adopt(&mut restarted, &cfg("2.0.0"));
    step(&mut restarted, &cfg("2.0.0"));
    let again = restarted.status(reload_view());
    assert!(!live.ready && live.active.is_none(), "{live:?}");
    assert_eq!((live.ready, &live.reason), (again.ready, &again.reason));
    // Observe to enforce: what observe let through stops being active.
    let mut g = Gate::new(base("^2", |r| r.mode = Some("observe".into())), false);
    step(&mut g, &cfg("3.0.0"));
    assert!(g.set_annotations(Ok(ann("confgate.io/mode", "enforce"))));
    assert!(rejudge(&mut g, &cfg("3.0.0")));
    assert!(!g.status(reload_view()).ready);
    // Widened back: the same content is active again, without a write.
    assert!(g.set_annotations(Ok(Annotations::new())));
    assert_eq!(step(&mut g, &cfg("3.0.0")), Decision::Activate);
}

#[test]
fn failed_promotion_is_reported_and_not_active() {
    let mut g = running("^2", "2.0.0");
    let (_, a) = decide(&mut g, &cfg("2.1.0"));
    assert_eq!(a, Decision::Promote { tell: Tell::Reload });
    g.promotion_failed(crate::promote::Failure::new(crate::promote::Error::Io {
        action: "write",
        path: "/promoted/..data_tmp".into(),
        source: std::io::Error::other("disk full"),
    }));
    let s = g.status(reload_view());
    assert!(!s.ready && s.reason.contains("disk full"), "{s:?}");
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.0.0"));
}

/// A refusal is held only under the reload target it was made under: a changed target forgets it
/// (live, and at a restart through the record's target line), and of an earlier version's record,
/// which names no target, an answer that said the target was wrong (404, 403) is no refusal.
#[test]
fn refusals_are_held_only_under_the_target_they_were_made_under() {
    let target = |u: &str| u.parse::<Reload>().unwrap();
    let (a, b) = (cfg("2.1.0").hash().unwrap(), cfg("2.2.0").hash().unwrap());
    let answer = |status, said: &str| Refusal {
        by: RefusedBy::Answer {
            target: "http://x/r".into(),
            status,
        },
        said: said.into(),
    };
    let refused = vec![(a, answer(500, "bad rule"))];
    let x = target("http://x/r");
    let named = |t: &str| RecordTarget::Named(target(t));
    assert_eq!(
        held_refusals(&named("http://x/r"), refused.clone(), &x),
        refused
    );
    assert!(held_refusals(&named("http://x/r"), refused.clone(), &target("http://y/r")).is_empty());
    assert!(held_refusals(&RecordTarget::Unreadable, refused.clone(), &x).is_empty());
    // Credentials are shown nowhere, and a record holds the target as shown: compared as shown.
    let with = target("http://u:p@x/r");
    assert_eq!(
        held_refusals(&named(&with.to_string()), refused.clone(), &with),
        refused
    );
    assert!(held_refusals(&named("http://x/r"), refused.clone(), &with).is_empty());
    // An earlier version's record names no target: an answer that said the target was wrong is
    // not held.
    let legacy = vec![
        (a, answer(404, "404 page not found")),
        (b, answer(500, "bad rule")),
    ];
    assert_eq!(
        held_refusals(&RecordTarget::Unnamed, legacy.clone(), &x),
        legacy[1..]
    );

    // The settings in force, set as a restart finds them in the record.
    let under = |target: &Reload| {
        let mut s = base("^2", |_| {});
        s.reload = target.clone();
        s
    };
    let mut g = gate("^2").with_last_in_force(under(&x), Annotations::default());
    g.rejected_by_component(a, &answer(500, "bad rule"));
    assert_eq!(g.forget_refusals_of(&x), 0, "the same target keeps it");
    assert!(g.is_rejected(a));
    let mut g = g.with_last_in_force(under(&target("http://y/r")), Annotations::default());
    assert_eq!(g.forget_refusals_of(&x), 1);
    assert!(!g.is_rejected(a) && g.rejected_record().is_empty());
}

/// A refusal of the component, worded as `said` (as an earlier version's record keeps it).
pub(super) fn refusal(said: &str) -> Refusal {
    Refusal {
        by: RefusedBy::Recorded { holds: true },
        said: said.into(),
    }
}
