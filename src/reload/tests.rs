//! The reload worker's pure parts and signalling by name.

use super::attempt::USER_HZ;
use super::signal::{is_restart, start_ticks, uncaught};
use super::*;

#[test]
fn jitter_stays_within_twenty_percent() {
    for _ in 0..1000 {
        let j = jitter(Duration::from_millis(1000)).as_millis();
        assert!((800..=1200).contains(&j), "{j}");
    }
}

#[test]
fn no_process_is_nothing_to_reload_and_says_why() {
    let r = signal_by_name(nix::sys::signal::Signal::SIGHUP, "no-such-proc-xyz", None).unwrap();
    assert!(
        matches!(&r, Sent::NoProcess(p) if p == "no-such-proc-xyz"),
        "{r:?}"
    );
}

#[test]
fn own_start_time_is_before_now() {
    let me = start_ticks(std::process::id() as i32).unwrap();
    let now = super::boot_ticks().unwrap();
    assert!(me <= now, "{me:?} {now:?}");
    assert!(now.0 - me.0 < 3600 * USER_HZ, "{me:?} {now:?}");
}

/// The clock is the one `/proc/uptime` shows (a monotonic clock would stop during a suspend, and
/// process start times would drift from it).
#[test]
fn now_is_on_the_clock_of_proc_uptime() {
    let uptime = || {
        let text = std::fs::read_to_string("/proc/uptime").unwrap();
        let secs: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
        (secs * USER_HZ as f64) as u64
    };
    let before = uptime();
    let now = super::boot_ticks().unwrap().0;
    let after = uptime();
    assert!(before <= now && now <= after + 1, "{before} {now} {after}");
}

#[test]
fn first_line_is_bounded_and_sanitised() {
    assert_eq!(
        first_line(b"\n  failed to reload\tconfig: x\nsecond"),
        "failed to reload config: x"
    );
    let long = first_line("é".repeat(300).as_bytes());
    assert!(
        long.len() <= REASON_MAX + '…'.len_utf8() && long.ends_with('…'),
        "{long}"
    );
    assert_eq!(first_line(&[0xff, b'a', 0x1b]), "\u{fffd}a ");
}

#[test]
fn only_answers_that_refuse_are_rejections() {
    let status = Error::Status {
        url: "http://u".parse().unwrap(),
        status: 500,
        first_line: "bad".into(),
    };
    assert!(status.is_rejection() && Error::Confirmed("0".into()).is_rejection());
    assert!(!Error::Timeout(ATTEMPT_TIMEOUT).is_rejection());
    let busy = Error::Status {
        url: "http://u".parse().unwrap(),
        status: 503,
        first_line: String::new(),
    };
    assert!(!busy.is_rejection());
    assert!(!Error::Unconfirmed("x".into()).is_rejection());
    assert!(!Error::NoProcess("p".into()).is_rejection());
}

#[test]
fn a_redirect_is_not_reached_never_a_refusal() {
    use hyper::StatusCode;
    let url = &"http://127.0.0.1:9/-/reload".parse().unwrap();
    for code in [301, 302, 303, 307, 308] {
        let status = StatusCode::from_u16(code).unwrap();
        let e = answered(url, status, b"<a href=\"https://login\">moved</a>").unwrap_err();
        assert!(!e.is_rejection(), "{code}: {e}");
        let text = e.to_string();
        assert!(
            text.contains(&code.to_string())
                && text.contains("redirect")
                && text.contains("not reached")
                && !text.contains("login"),
            "{text}"
        );
    }
    assert!(matches!(
        answered(url, StatusCode::OK, b""),
        Ok(Sent::Reloaded(1))
    ));
    let refused = answered(url, StatusCode::INTERNAL_SERVER_ERROR, b"bad rule\n").unwrap_err();
    assert!(refused.is_rejection(), "{refused}");
}

#[test]
fn default_actions() {
    use nix::sys::signal::Signal::*;
    assert_eq!(uncaught(SIGHUP), Uncaught::Ends);
    assert_eq!(uncaught(SIGUSR1), Uncaught::Ends);
    // A stop freezes the component as surely; an ignored signal reloads nothing.
    assert_eq!(uncaught(SIGSTOP), Uncaught::Stops);
    assert_eq!(uncaught(SIGTSTP), Uncaught::Stops);
    assert_eq!(uncaught(SIGWINCH), Uncaught::Nothing);
    assert_eq!(uncaught(SIGCHLD), Uncaught::Nothing);
    assert!(is_restart(SIGTERM) && !is_restart(SIGHUP));
}

/// Only an answer about the config refuses it: a wrong path, method, credentials or an endpoint that is
/// off (Prometheus without `--web.enable-lifecycle` answers 403) is a misconfigured target, retried.
#[test]
fn an_answer_that_says_the_target_is_wrong_is_not_a_refusal() {
    use hyper::StatusCode;
    let url = &"http://127.0.0.1:9090/-/relaod".parse().unwrap();
    for (code, body) in [
        (404, &b"404 page not found\n"[..]),
        (405, b"Method Not Allowed\n"),
        (401, b"Unauthorized\n"),
        (403, b"Lifecycle API is not enabled.\n"),
        (410, b""),
        (501, b"not implemented\n"),
        (400, b""),
    ] {
        let e = answered(url, StatusCode::from_u16(code).unwrap(), body).unwrap_err();
        assert!(!e.is_rejection(), "{code}: {e}");
        assert!(matches!(e, Error::Misconfigured { .. }), "{code}: {e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("answered {code}")) && text.contains("misconfigured"),
            "{text}"
        );
        assert!(e.refusal().is_none(), "{text}");
    }
    // Busy, or a 500 with no words: not reached, retried, not misconfigured either.
    for (code, body) in [(503, &b"busy"[..]), (500, b""), (502, b"")] {
        let e = answered(url, StatusCode::from_u16(code).unwrap(), body).unwrap_err();
        assert!(
            !e.is_rejection() && matches!(e, Error::Status { .. }),
            "{code}: {e}"
        );
    }
    // The component's words about the config refuse it.
    for code in [400, 422, 500] {
        let e = answered(
            url,
            StatusCode::from_u16(code).unwrap(),
            b"failed to reload config: bad rule\n",
        )
        .unwrap_err();
        assert!(e.is_rejection(), "{code}: {e}");
        // Kept typed, and worded as the error was.
        let refusal = e.refusal().unwrap();
        assert!(refusal.holds(), "{e}");
        assert_eq!(refusal.to_string(), e.to_string());
    }
}

/// A target nothing listens on fails every attempt at once; the worker waits `BACKOFF_BASE`, then
/// twice as long each time up to `BACKOFF_MAX`, each wait within its ±20 % of jitter. On paused
/// time: the gaps are the worker's waits, whatever the machine's speed.
#[tokio::test(start_paused = true)]
async fn failed_reloads_wait_twice_as_long_each_time_up_to_the_most() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut h = spawn(Shared::new());
    let target: Reload = format!("http://127.0.0.1:{port}/reload").parse().unwrap();
    h.request(&target, ContentHash::of([("k", b"v".as_slice())]), None);
    let mut attempts = Vec::new();
    while attempts.len() < 10 {
        match h.outcome().await.unwrap() {
            Outcome::Attempting => attempts.push(tokio::time::Instant::now()),
            Outcome::Failed(_) => {}
            o => panic!("only failures are expected: {o:?}"),
        }
    }
    let mut nominal = BACKOFF_BASE;
    for (n, w) in attempts.windows(2).enumerate() {
        let gap = w[1] - w[0];
        assert!(
            gap >= nominal.mul_f64(0.8) && gap <= nominal.mul_f64(1.2) + Duration::from_millis(1),
            "wait {n}: {gap:?}, not within 20 % of {nominal:?}"
        );
        nominal = (nominal * 2).min(BACKOFF_MAX);
    }
    assert_eq!(nominal, BACKOFF_MAX, "the waits reached the most");
}

/// The settings' signals are the OS's: each name the core reads is sent as the signal of that name,
/// and each signal the OS has is one the core reads (`signal:NAME:PROCESS` accepts what it did when
/// nix's parser read the name).
#[test]
fn the_cores_signals_are_the_os_signals() {
    use crate::values::Signal;
    for signal in Signal::ALL {
        assert_eq!(signal::to_nix(signal).as_str(), signal.as_str());
        // A setting's `Debug` (a test's message) reads as it did.
        assert_eq!(
            format!("{signal:?}"),
            format!("{:?}", signal::to_nix(signal))
        );
    }
    let os: Vec<_> = nix::sys::signal::Signal::iterator().collect();
    assert_eq!(os.len(), Signal::ALL.len());
    for os in os {
        let core: Signal = os.as_str().parse().unwrap();
        assert_eq!(signal::to_nix(core), os);
    }
}

/// A `kill(2)` error reads as nix's did, and two are the same by their code.
#[test]
fn a_kill_error_reads_as_nix_wrote_it() {
    use nix::errno::Errno;
    for code in 0..=200 {
        let errno = Errno::from_raw(code);
        let kept = signal::os_error(errno);
        assert_eq!(kept.to_string(), errno.to_string());
        assert_eq!(kept.code(), errno as i32);
    }
    let e = Error::Kill {
        signal: "SIGHUP",
        pid: 7,
        process: "prometheus".into(),
        errno: signal::os_error(Errno::EPERM),
    };
    assert_eq!(
        e.to_string(),
        "cannot send SIGHUP to pid 7 (prometheus): EPERM: Operation not permitted; confgate must run as the same user as the process"
    );
    assert_eq!(
        signal::os_error(Errno::EPERM),
        OsError::new(Errno::EPERM as i32, "")
    );
}

/// An attempt's bound and the loop's wait for a request to be on its way keep their limits with
/// the timer set after a few turns: a wait that never ends is ended at the limit from its start,
/// and one another task ends within those turns is over without it.
#[tokio::test(start_paused = true)]
async fn a_bound_set_after_some_turns_still_ends_a_wait_at_its_limit() {
    let started = tokio::time::Instant::now();
    let r = timeout_after_turns(Duration::from_secs(10), 3, std::future::pending::<()>()).await;
    assert!(r.is_err(), "a wait that never ends is bounded");
    assert_eq!(started.elapsed(), Duration::from_secs(10));
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move { tx.send(7).unwrap() });
    let r = timeout_after_turns(Duration::from_secs(10), 1, rx).await;
    assert_eq!(r.unwrap().unwrap(), 7);
    assert_eq!(started.elapsed(), Duration::from_secs(10), "no time passed");
}
