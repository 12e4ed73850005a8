//! The API server stops for 20 s and comes back (on its own cluster, so the other tests' server stays
//! up): sidecars in API mode keep running and keep their config, `/status` says the watch is not
//! healthy until it watches from a list made after the server came back, `confgate status` exits 69
//! while the server is away, and a compatible change applied 3 s after the return is promoted within
//! 10 s.

use std::time::{Duration, Instant};

use crate::api_mode;
use crate::common::{get, poll};
use crate::confgate;
use crate::server::private_cluster;
use crate::sidecar::Sidecar;

const SIDECARS: usize = 3;
const OUTAGE: Duration = Duration::from_secs(20);
const CHANGE_AFTER: Duration = Duration::from_secs(3);
const PROMOTED_WITHIN: Duration = Duration::from_secs(10);

fn healthy(s: &Sidecar) -> Option<bool> {
    s.gate.status()["source"]["watch"]["healthy"].as_bool()
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn sidecars_recover_when_the_api_server_restarts() {
    let c = private_cluster();
    let sidecars: Vec<Sidecar> = (0..SIDECARS)
        .map(|i| api_mode::start(&c, &format!("confgate-restart-{i}"), &[]))
        .collect();
    let mut before = Vec::new();
    for s in &sidecars {
        let status = s
            .gate
            .wait_status("2.4.1 active from a healthy watch", |st| {
                st["active"]["version"] == "2.4.1" && st["source"]["watch"]["healthy"] == true
            });
        before.push(status["source"]["resource_version"].clone());
    }

    c.stop_apiserver();
    let down = Instant::now();
    for s in &sidecars {
        poll(
            "the watch unhealthy once the server is gone",
            OUTAGE,
            || (healthy(s) == Some(false)).then_some(()),
        );
    }
    // `confgate status` cannot reach it: 69, not an internal error.
    let reader = sidecars[0].tmp.path().join("reader.kubeconfig");
    c.kubeconfig(&reader, &c.reader_token, &sidecars[0].ns);
    let out = confgate()
        .args(["status", "-n", &sidecars[0].ns])
        .env("KUBECONFIG", &reader)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(69),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Throughout the outage: running, ready on the config they had, not healthy.
    while down.elapsed() < OUTAGE {
        for s in &sidecars {
            assert_eq!(healthy(s), Some(false));
            let (code, body) = get(s.gate.port, "/readyz").expect("/readyz");
            assert_eq!(code, 200, "{body}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    c.start_apiserver();
    let back = Instant::now();
    while back.elapsed() < CHANGE_AFTER {
        for s in &sidecars {
            assert_eq!(s.gate.status()["active"]["version"], "2.4.1");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for s in &sidecars {
        api_mode::set_version(s, "2.5.0");
    }
    let changed = Instant::now();
    for (s, old_rv) in sidecars.iter().zip(&before) {
        let status = poll(
            "2.5.0 promoted after the restart",
            PROMOTED_WITHIN * 3,
            || {
                let st = s.gate.status();
                (st["active"]["version"] == "2.5.0").then_some(st)
            },
        );
        let took = changed.elapsed();
        assert!(
            took <= PROMOTED_WITHIN,
            "{}: promoted {took:?} after the change, {:?} after the server came back",
            s.ns,
            back.elapsed()
        );
        assert_eq!(status["source"]["watch"]["healthy"], true, "{status}");
        assert_ne!(&status["source"]["resource_version"], old_rv, "{status}");
    }
    for s in &sidecars {
        assert!(s.gate.log_text().contains("retrying with backoff"));
    }
}
