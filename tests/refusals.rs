//! What the component refused, through the real binary and a loopback reload target: an answer that
//! did not come from the component (a redirect) is never taken for a refusal.

mod common;

use common::*;
use std::sync::atomic::Ordering;

fn promoted_version(d: &Dirs) -> Option<String> {
    read_promoted(&d.promoted()).and_then(|m| m.get("version").cloned())
}

/// A redirect (an auth proxy, http to https) is not the component's answer: the reload is not reached,
/// retried and reported as such, and the promoted config is never rolled back for it.
#[test]
fn a_redirect_is_not_reached_retried_and_never_rolled_back() {
    let d = Dirs::new();
    let sink = Sink::watching(d.promoted());
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--reload", &sink.url()]);
    g.wait_status("2.0.0 applied", |s| s["applied"]["version"] == "2.0.0");
    sink.code.store(302, Ordering::Relaxed);
    let before = sink.count();
    write_version(&d.watch(), "2.1.0");
    let s = g.wait_status("the redirect reported", |s| {
        s["reload"]["last_result"] == "failure"
    });
    let error = s["reload"]["last_error"].as_str().unwrap();
    assert!(
        error.contains("302") && error.contains("redirect") && error.contains("not reached"),
        "{error}"
    );
    wait_for("the reload retried", DEADLINE, || {
        (sink.count() >= before + 2).then_some(())
    });
    let s = g.status();
    assert!(s["candidate"].is_null(), "{s}");
    assert_eq!(s["active"]["version"], "2.1.0");
    assert_eq!(s["applied"]["version"], "2.0.0");
    assert_eq!(promoted_version(&d).as_deref(), Some("2.1.0"));
    assert!(!d.promoted().join("..confgate_rejected").exists());
    sink.code.store(200, Ordering::Relaxed);
    g.wait_status("2.1.0 applied once the target answers", |s| {
        s["applied"]["version"] == "2.1.0" && s["reload"]["last_result"] == "success"
    });
}
