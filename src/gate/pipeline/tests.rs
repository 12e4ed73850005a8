//! The pipeline against real files and a real reload sink: small configs judged on the loop, the
//! reload request on the wire before the loop goes on.

use super::super::machine::is_small;
use super::*;
use crate::settings::Raw;
use std::collections::BTreeMap;
use std::time::Duration;

fn version(v: &str) -> snapshot::Snapshot {
    snapshot::Snapshot::new(BTreeMap::from([(
        "version".to_owned(),
        v.as_bytes().to_vec(),
    )]))
}

/// A volume in the kubelet's layout holding 1.0.0 (written by the same code that writes the promoted
/// dir), and a pipeline's config and settings over it: range `^1`, and `reload` when given.
fn fixture(
    tmp: &std::path::Path,
    reload: Option<&str>,
) -> (Promoter, std::path::PathBuf, Config, Settings) {
    let (watch, promoted) = (tmp.join("watch"), tmp.join("promoted"));
    let (volume, _) = Promoter::open(&watch).unwrap();
    volume.promote(&version("1.0.0")).unwrap();
    let cfg = Config {
        watch,
        promote_to: Some(promoted.clone()),
        annotations: tmp.join("podinfo/annotations"),
        resync: Duration::from_secs(30),
        bucket: None,
    };
    let base = Settings::from_raw(&Raw {
        accepts: Some("^1".into()),
        reload: reload.map(Into::into),
        ..Default::default()
    })
    .unwrap();
    (volume, promoted, cfg, base)
}

/// A pipeline on the volume whose reloads go nowhere.
async fn inert(cfg: Config, base: Settings) -> Pipeline {
    Pipeline::open(
        cfg,
        Feed::Volume,
        base,
        Shared::new(),
        reload::Handle::inert(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn the_reload_is_requested_before_the_old_dir_is_tidied() {
    let tmp = tempfile::tempdir().unwrap();
    let (volume, promoted, cfg, base) = fixture(tmp.path(), Some("http://127.0.0.1:9/reload"));
    let mut p = inert(cfg, base).await;
    p.process().await;
    // The first config's start-up check is never answered here, so its dir is kept as the
    // baseline beside the next one: the dir to watch is the second's.
    volume.promote(&version("1.0.1")).unwrap();
    p.process().await;
    let old = promoted.join(std::fs::read_link(promoted.join("..data")).unwrap());
    let requested = p.reloads.requested();

    volume.promote(&version("1.1.0")).unwrap();
    let mut seen = false;
    p.run(Event::Files(Files::CONFIG), |p| {
        seen = true;
        assert_eq!(p.reloads.requested(), requested + 1);
        // When the request goes out the new config is live, and nothing was tidied yet.
        assert_eq!(
            snapshot::read(&promoted),
            Observed::Config(version("1.1.0"))
        );
        assert!(old.is_dir(), "the old dir is removed after the request");
    })
    .await;
    assert!(
        seen,
        "a promotion that requests a reload yields to the worker"
    );
    assert!(!old.exists());
    assert_eq!(
        snapshot::read(&promoted),
        Observed::Config(version("1.1.0"))
    );
}
/// A loopback component that answers every request `200` and reports each one as it arrives;
/// `close`: each answer closes its connection, so every request needs a new one.
fn component(close: bool) -> (String, std::sync::mpsc::Receiver<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/reload", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let (Ok(mut conn), tx) = (conn, tx.clone()) else {
                return;
            };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    // Each request is a head without a body.
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        let _ = tx.send(());
                        if close {
                            let _ = conn.write_all(
                                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                            );
                            return;
                        }
                        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                    }
                }
            });
        }
    });
    (url, rx)
}

#[tokio::test]
async fn the_reload_post_is_on_the_wire_before_the_loop_goes_on() {
    on_the_wire(0, false).await;
}

/// As above, on a new connection (the component closed the last one, or its keep-alive ran out, as
/// between reloads minutes apart) to a target named by host name: the loop waits while the name is
/// resolved (on the blocking pool) and the connection made, however many turns of the runtime that
/// takes.
#[tokio::test]
async fn the_reload_post_on_a_new_connection_is_on_the_wire_before_the_loop_goes_on() {
    on_the_wire(0, true).await;
}

/// As above, with other tasks ready to run on the same thread (connections being served): however
/// many, the loop goes on only once the POST is written, not after a count of yields.
#[tokio::test]
async fn the_reload_post_is_on_the_wire_before_the_loop_goes_on_whatever_else_runs() {
    on_the_wire(16, false).await;
}

/// A promotion with a reload, `busy` tasks that only yield running beside the loop.
async fn on_the_wire(busy: usize, close: bool) {
    // On a task of its own, as `run` starts the loop.
    tokio::spawn(async move {
        let tmp = tempfile::tempdir().unwrap();
        let (url, arrived) = component(close);
        // A new connection each time is also made to a name, not an address.
        let url = if close {
            url.replace("127.0.0.1", "localhost")
        } else {
            url
        };
        // Shared with the callback below, across the task's awaits.
        let arrived = std::sync::Mutex::new(arrived);
        let (volume, _, cfg, base) = fixture(tmp.path(), Some(&url));
        let mut p = with_reload_worker(cfg, base).await;
        // The first promotion's start-up check opens the connection the next reload reuses.
        p.process().await;
        loop {
            match p.input().await {
                Some(e @ Event::Reload(reload::Outcome::Reloaded(_))) => {
                    p.handle(e).await;
                    break;
                }
                Some(e) => p.handle(e).await,
                None => {}
            }
        }
        arrived
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(30))
            .expect("the start-up check reached the component");
        // The client puts the connection back in its pool on a task of its own.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }

        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for _ in 0..busy {
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    tokio::task::yield_now().await;
                }
            });
        }
        volume.promote(&version("1.1.0")).unwrap();
        let mut seen = false;
        p.run(Event::Files(Files::CONFIG), |_| {
            seen = true;
            // This thread is the runtime's only one: had the request not been written yet, it
            // could not be written while this waits.
            arrived
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(30))
                .expect("the reload POST was written before the loop went on");
        })
        .await;
        assert!(seen, "the promotion yielded to the worker");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    })
    .await
    .unwrap();
}
#[test]
fn a_small_config_after_a_small_one_is_read_and_judged_on_the_loop() {
    // One blocking thread, held busy below: what needs the blocking pool cannot finish.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    rt.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let (volume, promoted, cfg, base) = fixture(tmp.path(), None);
        let mut p = inert(cfg, base).await;
        // Nothing was read yet: the first read is off the loop.
        p.process().await;
        assert_eq!(
            snapshot::read(&promoted),
            Observed::Config(version("1.0.0"))
        );

        let (release, held) = std::sync::mpsc::channel::<()>();
        let busy = tokio::task::spawn_blocking(move || held.recv());
        volume.promote(&version("1.1.0")).unwrap();
        tokio::time::timeout(Duration::from_secs(30), p.process())
            .await
            .expect("read, judged and promoted without the blocking pool");
        assert_eq!(
            snapshot::read(&promoted),
            Observed::Config(version("1.1.0"))
        );
        release.send(()).unwrap();
        busy.await.unwrap().unwrap();
    });
}

#[tokio::test]
async fn the_status_is_built_again_only_after_the_gate_was_handed_something() {
    let tmp = tempfile::tempdir().unwrap();
    let (volume, _, cfg, base) = fixture(tmp.path(), None);
    let mut p = inert(cfg, base).await;
    p.process().await;
    p.publish();
    let built = p.built;
    // What a liveness ping leaves: nothing handed to the gate, nothing to rebuild.
    p.publish();
    p.publish();
    assert_eq!(p.built, built);
    volume.promote(&version("1.1.0")).unwrap();
    p.process().await;
    p.publish();
    assert_eq!(p.built, built + 1);
    assert_eq!(
        p.shared
            .snapshot()
            .active
            .and_then(|a| a.version)
            .as_deref(),
        Some("1.1.0")
    );
}

#[test]
fn small_is_at_most_64_keys_and_64_kib() {
    let keys = |n: usize, each: usize| {
        Observed::Config(snapshot::Snapshot::new(
            (0..n)
                .map(|i| (format!("k{i}"), vec![b'x'; each]))
                .collect(),
        ))
    };
    assert!(is_small(&keys(64, 1024)));
    assert!(!is_small(&keys(65, 1)), "too many keys");
    assert!(!is_small(&keys(2, 32 * 1024 + 1)), "too many bytes");
    assert!(is_small(&Observed::Missing(
        crate::snapshot::Missing::NoObjectKeys
    )));
}

/// What the loop and the reload worker log: a test's own subscriber, on the one thread both run on.
#[derive(Clone, Default)]
struct Logged(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logged {
    /// The index of the first line containing `what`.
    fn at(&self, what: &str) -> usize {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no line says {what:?}:\n{text}"))
    }
}

/// Handles events until the worker reports `wanted` outcome.
async fn until_outcome(p: &mut Pipeline, wanted: fn(&reload::Outcome) -> bool) {
    loop {
        match p.input().await {
            Some(Event::Reload(o)) if wanted(&o) => return p.handle(Event::Reload(o)).await,
            Some(e) => p.handle(e).await,
            None => {}
        }
    }
}

/// The line that says a reload (or start-up check) was requested comes before the worker's line
/// that says how it went, also when the attempt ends before anything is written (nothing listens
/// on the target's port): the loop writes it once the request is on its way, which the end of the
/// attempt tells it, and the worker, on the same thread, writes its own after.
#[tokio::test]
async fn a_reload_is_logged_as_requested_before_the_worker_logs_how_it_went() {
    let logged = Logged::default();
    let writer = logged.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .finish(),
    );
    // With one dispatcher registered, tracing asks only the registering thread's about a callsite
    // first hit, and caches that answer for every thread: a callsite another test's thread (no
    // subscriber) hits first would stay off here. A second keeps it asking every dispatcher, and
    // the rebuild redoes what was cached before this test's subscriber existed.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    tracing::callsite::rebuild_interest_cache();
    let tmp = tempfile::tempdir().unwrap();
    let (volume, _, cfg, base) = fixture(tmp.path(), Some("http://127.0.0.1:9/reload"));
    let mut p = with_reload_worker(cfg, base).await;
    p.process().await;
    until_outcome(&mut p, |o| matches!(o, reload::Outcome::Waiting(_))).await;
    assert!(logged.at("start-up check requested") < logged.at("the component is not reached yet"));
    volume.promote(&version("1.0.1")).unwrap();
    p.process().await;
    until_outcome(&mut p, |o| matches!(o, reload::Outcome::Failed(_))).await;
    assert!(logged.at("reload requested") < logged.at("reload failed"));
}

/// A pipeline over a volume with a real reload worker and HTTP client (not the tests' stand-in).
async fn with_reload_worker(cfg: Config, base: Settings) -> Pipeline {
    let shared = Shared::new();
    let worker = reload::spawn_with(shared.clone(), crate::http::Client::new(None).unwrap());
    Pipeline::open(cfg, Feed::Volume, base, shared, worker)
        .await
        .unwrap()
}
