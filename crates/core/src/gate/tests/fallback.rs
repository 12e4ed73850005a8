//! Starting on the known-good: a pod with nothing accepted in its source promotes the newest config
//! of the record it accepts, reports it, and moves to the source's config once that is accepted.

use super::events::{Clock, has, hash, judged, promote, requests, started_with};
use super::*;
use crate::reload::BootTicks;
use crate::settings::OnIncompatible;

const RECORD: &str = "app.confgate-known-good";

/// A started gate accepting `>=2.0.0, <3.0.0`, with `extra` annotations.
fn gate2(c: &Clock, extra: &[(&str, &str)]) -> Gate {
    gate2_spec(c, extra, |_| {})
}

/// [`gate2`] with container-spec settings: the checker an annotation may pick is the spec's.
fn gate2_spec(
    c: &Clock,
    extra: &[(&str, &str)],
    spec: impl FnOnce(&mut crate::settings::Raw),
) -> Gate {
    let mut a = ann("confgate.io/accepts", ">=2.0.0, <3.0.0");
    for (k, v) in extra {
        a.insert((*k).to_owned(), (*v).to_owned());
    }
    started_with(c, Some(a), spec)
}

fn snap(obs: &Observed) -> Snapshot {
    match obs {
        Observed::Config(s) => s.clone(),
        _ => unreachable!(),
    }
}

fn asks(a: &[Action]) -> bool {
    has(a, |a| matches!(a, Action::ReadKnownGood))
}

/// The record read back with `configs`, judged as the pipeline would: returns every action up to
/// the switch, answered.
fn from_record(g: &mut Gate, c: &Clock, configs: &[&Observed], ms: u64) -> Vec<Action> {
    let read = g.handle(
        Event::KnownGoodRead(Ok((
            RECORD.into(),
            configs.iter().map(|o| snap(o)).collect(),
        ))),
        c.at(ms),
    );
    let Some(Action::JudgeKnownGood { settings, configs }) = read.last().cloned() else {
        return read;
    };
    let judged = configs
        .into_iter()
        .map(|s| {
            let j = verdict::judge(&Observed::Config(s.clone()), &settings);
            (s, j)
        })
        .collect();
    let mut a = g.handle(Event::KnownGoodJudged(judged), c.at(ms));
    if has(&a, |x| matches!(x, Action::Switch { .. })) {
        a.extend(g.handle(Event::Switched(Ok(Some(BootTicks(ms)))), c.at(ms)));
    }
    a
}

fn switched_to(a: &[Action]) -> Option<ContentHash> {
    a.iter().find_map(|a| match a {
        Action::Switch { snapshot, .. } => Some(snapshot.hash()),
        _ => None,
    })
}

#[test]
fn a_pod_whose_source_is_too_new_starts_on_the_newest_known_good_it_accepts() {
    let c = Clock::new();
    let mut g = gate2(&c, &[]);
    let a = g.handle(judged(&g, &cfg("3.0.0")), c.at(10));
    assert!(asks(&a), "nothing accepted, nothing in force: {a:?}");
    let (old, good, newer_line) = (cfg("2.4.1"), cfg("2.6.0"), cfg("3.1.0"));
    let a = from_record(&mut g, &c, &[&old, &good, &newer_line], 20);
    assert_eq!(switched_to(&a), Some(hash(&good)), "{a:?}");
    assert!(
        requests(&a).iter().any(|r| r.sha == hash(&good)),
        "the component is told, as of any first config: {a:?}"
    );
    let s = g.published(1);
    assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.6.0"));
    let k = s.known_good.as_ref().expect("reported as the known-good");
    assert_eq!(
        (k.version.as_deref(), k.record.as_str(), k.because),
        (Some("2.6.0"), RECORD, Verdict::TooNew)
    );
    assert!(s.ready, "hold: ready on the known-good: {}", s.reason);
    assert!(
        s.reason.starts_with("running the known-good 2.6.0 from app.confgate-known-good; the source's newest config 3.0.0 is too-new"),
        "{}",
        s.reason
    );
    // The source holds an accepted config: it replaces the known-good as any change does.
    let a = promote(&mut g, &cfg("2.7.0"), c.at(30), 30);
    assert!(has(&a, |x| matches!(x, Action::Switch { .. })), "{a:?}");
    let s = g.published(2);
    assert_eq!(s.active.as_ref().unwrap().version.as_deref(), Some("2.7.0"));
    assert_eq!(s.known_good, None);
    assert_eq!(s.reason, "ok");
}

#[test]
fn under_unready_the_known_good_runs_and_the_pod_says_why_it_is_not_ready() {
    let c = Clock::new();
    let mut g = gate2(&c, &[("confgate.io/on-incompatible", "unready")]);
    assert_eq!(g.settings().on_incompatible, OnIncompatible::Unready);
    g.handle(judged(&g, &cfg("3.0.0")), c.at(10));
    let a = from_record(&mut g, &c, &[&cfg("2.4.1")], 20);
    assert!(switched_to(&a).is_some(), "{a:?}");
    let s = g.published(1);
    assert!(!s.ready);
    assert!(
        s.reason.contains("running the known-good 2.4.1"),
        "{}",
        s.reason
    );
}

#[test]
fn a_missing_source_starts_on_the_known_good_too() {
    let c = Clock::new();
    let mut g = gate2(&c, &[]);
    let gone = Observed::Missing(crate::snapshot::Missing::NoObjectKeys);
    assert!(asks(&g.handle(judged(&g, &gone), c.at(10))));
    let a = from_record(&mut g, &c, &[&cfg("2.4.1")], 20);
    assert!(switched_to(&a).is_some(), "{a:?}");
    assert_eq!(g.published(1).known_good.unwrap().because, Verdict::Missing);
}

#[test]
fn nothing_accepted_or_only_refused_content_in_the_record_promotes_nothing() {
    let c = Clock::new();
    let mut g = gate2(&c, &[]);
    g.handle(judged(&g, &cfg("3.0.0")), c.at(10));
    let a = from_record(&mut g, &c, &[&cfg("1.9.0"), &cfg("3.2.0")], 20);
    assert_eq!(switched_to(&a), None, "{a:?}");
    assert!(has(&a, |x| matches!(
        x,
        Action::Log(LogLine::NoKnownGood { .. })
    )));
    assert!(g.published(1).active.is_none());
    // Not asked again for every read under the same settings.
    assert!(!asks(&g.handle(judged(&g, &cfg("3.0.1")), c.at(30))));

    let mut g = gate2(&c, &[]);
    let refused = cfg("2.4.1");
    g.adopt_rejected(vec![(hash(&refused), refusal("500: bad rule"))]);
    g.handle(judged(&g, &cfg("3.0.0")), c.at(10));
    let a = from_record(&mut g, &c, &[&refused], 20);
    assert_eq!(
        switched_to(&a),
        None,
        "refused content is never offered again: {a:?}"
    );
}

#[test]
fn an_accepted_source_or_a_config_in_force_asks_for_no_record() {
    let c = Clock::new();
    let mut g = gate2(&c, &[]);
    assert!(!asks(&promote(&mut g, &cfg("2.4.1"), c.at(10), 10)));
    assert!(!asks(&g.handle(judged(&g, &cfg("3.0.0")), c.at(20))));
}

#[test]
fn a_range_narrowed_live_moves_to_the_known_good_it_accepts_or_says_what_runs_outside_it() {
    let c = Clock::new();
    let mut g = gate2(&c, &[]);
    let old = cfg("2.4.1");
    promote(&mut g, &old, c.at(10), 10);
    // The range narrowed to 2.5 and up: 2.4.1 runs, no longer accepted.
    let narrowed = ann("confgate.io/accepts", ">=2.5.0, <3.0.0");
    g.handle(Event::Annotations(Ok(Some(narrowed))), c.at(20));
    let a = g.handle(
        Event::Rejudged(old.clone(), verdict::judge(&old, g.settings())),
        c.at(20),
    );
    assert!(
        has(&a, |x| matches!(
            x,
            Action::Log(LogLine::NoLongerActive { .. })
        )),
        "{a:?}"
    );
    let a = g.handle(judged(&g, &old), c.at(30));
    assert!(asks(&a), "asked again under the new range: {a:?}");
    let none = from_record(&mut g, &c, &[&old], 40);
    assert_eq!(switched_to(&none), None);
    let s = g.published(1);
    assert!(
        s.reason
            .starts_with("no accepted config yet: the promoted dir holds 2.4.1 (sha256:")
            && s.reason.contains("outside the range in force"),
        "{}",
        s.reason
    );
    // With a known-good the new range accepts, it moves to it.
    let mut g = gate2(&c, &[]);
    promote(&mut g, &old, c.at(10), 10);
    g.handle(
        Event::Annotations(Ok(Some(ann("confgate.io/accepts", ">=2.5.0, <3.0.0")))),
        c.at(20),
    );
    g.handle(
        Event::Rejudged(old.clone(), verdict::judge(&old, g.settings())),
        c.at(20),
    );
    g.handle(judged(&g, &old), c.at(30));
    let good = cfg("2.6.0");
    let a = from_record(&mut g, &c, &[&good], 40);
    assert_eq!(switched_to(&a), Some(hash(&good)), "{a:?}");
    assert!(
        requests(&a)
            .iter()
            .any(|r| r.sha == hash(&good) && r.kind == crate::reload::Kind::Reload),
        "the component ran another config: reloaded: {a:?}"
    );
    assert_eq!(
        g.published(2).known_good.unwrap().version.as_deref(),
        Some("2.6.0")
    );
}

#[test]
fn the_components_checker_passes_the_known_good_before_it_is_promoted() {
    use crate::validate::Checked;
    let c = Clock::new();
    let checker = [("confgate.io/validate", "exec:/bin/check {dir}")];
    for (checked, promoted) in [
        (Checked::Passed, true),
        (
            Checked::Failed {
                status: "exit status: 1".into(),
                lines: vec!["bad".into()],
            },
            false,
        ),
    ] {
        let mut g = gate2_spec(&c, &checker, |r| {
            r.validate = Some("exec:/bin/check {dir}".into());
        });
        g.handle(judged(&g, &cfg("3.0.0")), c.at(10));
        let good = cfg("2.4.1");
        let a = from_record(&mut g, &c, &[&good], 20);
        assert!(
            has(&a, |x| matches!(x, Action::Validate { .. })) && switched_to(&a).is_none(),
            "checked first: {a:?}"
        );
        let mut a = g.handle(
            Event::Validated {
                sha: hash(&good),
                checked,
            },
            c.at(30),
        );
        if has(&a, |x| matches!(x, Action::Switch { .. })) {
            a.extend(g.handle(Event::Switched(Ok(Some(BootTicks(30)))), c.at(30)));
        }
        assert_eq!(switched_to(&a).is_some(), promoted, "{a:?}");
        assert_eq!(g.published(1).known_good.is_some(), promoted);
    }
}

/// One check at a time: a candidate accepted while the known-good is under the component's checker
/// ends that check before its own starts (both would stage into the one candidate dir), and the
/// known-good's late answer promotes nothing.
#[test]
fn an_accepted_candidate_ends_the_known_goods_check_before_its_own() {
    use crate::validate::Checked;
    let c = Clock::new();
    let checker = [("confgate.io/validate", "exec:/bin/check {dir}")];
    let mut g = gate2_spec(&c, &checker, |r| {
        r.validate = Some("exec:/bin/check {dir}".into());
    });
    g.handle(judged(&g, &cfg("3.0.0")), c.at(10));
    let good = cfg("2.4.1");
    let a = from_record(&mut g, &c, &[&good], 20);
    assert!(has(&a, |x| matches!(x, Action::Validate { .. })), "{a:?}");

    let a = g.handle(judged(&g, &cfg("2.5.0")), c.at(30));
    let cancel = a.iter().position(|x| matches!(x, Action::CancelCheck));
    let validate = a.iter().position(|x| matches!(x, Action::Validate { .. }));
    assert!(
        matches!((cancel, validate), (Some(c), Some(v)) if c < v),
        "the known-good's check ends before the candidate's starts: {a:?}"
    );
    let late = g.handle(
        Event::Validated {
            sha: hash(&good),
            checked: Checked::Passed,
        },
        c.at(40),
    );
    assert!(switched_to(&late).is_none(), "{late:?}");
}
