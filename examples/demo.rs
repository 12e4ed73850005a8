//! A local demo of confgate's main job, no cluster needed: a kubelet-style ConfigMap volume in a temp dir,
//! the real decision loop and HTTP server, and a walk through accepted, too-new, invalid, deleted and
//! accepted again, printing readiness and what the component would read at each step.
//!
//! Run: `cargo run --example demo` (add `-- --keep` to leave the sidecar serving afterwards).

use std::collections::BTreeMap;
use std::time::Duration;

use confgate::gate::{self, Config};
use confgate::promote::Promoter;
use confgate::settings::{Raw, Settings};
use confgate::snapshot::{self, Snapshot};
use confgate::state::{Shared, Status};

/// The embedded default: what the component accepts and where the version lives.
const ACCEPTS: &str = ">=2.4.0, <3.0.0";
const VERSION_FROM: &str = "yaml:config.yaml#/schemaVersion";

fn config(version: &str, replicas: u32) -> Snapshot {
    let yaml = format!("schemaVersion: \"{version}\"\nreplicas: {replicas}\n");
    Snapshot::new(BTreeMap::from([(
        "config.yaml".to_owned(),
        yaml.into_bytes(),
    )]))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keep = std::env::args().any(|a| a == "--keep");
    let tmp = tempfile::tempdir()?;
    let (incoming, active) = (tmp.path().join("incoming"), tmp.path().join("active"));
    // The kubelet's volume writer and confgate's promoter follow the same AtomicWriter steps, so the
    // promoter doubles as the "kubelet" that updates the raw ConfigMap volume here.
    let (kubelet, _) = Promoter::open(&incoming)?;
    let base = Settings::from_raw(&Raw {
        accepts: Some(ACCEPTS.into()),
        version_from: Some(VERSION_FROM.into()),
        ..Raw::default()
    })?;
    println!("confgate demo: the component accepts {ACCEPTS}; version from {VERSION_FROM}");
    println!(
        "raw ConfigMap volume: {}\npromoted dir:         {}\n",
        incoming.display(),
        active.display()
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let shared = Shared::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(confgate::server::serve(
            listener,
            shared.clone(),
            std::future::pending(),
        ));
        let reloads = confgate::reload::spawn(shared.clone());
        let cfg = Config {
            watch: incoming.clone(),
            promote_to: Some(active.clone()),
            annotations: tmp.path().join("podinfo/annotations"),
            resync: Duration::from_secs(30),
        };
        tokio::spawn(gate::run(
            cfg,
            base,
            shared.clone(),
            reloads,
            std::future::pending(),
        ));
        println!("probes, /status and /metrics on http://{addr}\n");

        let steps: [(&str, Option<Snapshot>); 5] = [
            ("ConfigMap created at 2.4.1", Some(config("2.4.1", 3))),
            (
                "upgrade pushes 3.0.0 before this component is upgraded",
                Some(config("3.0.0", 5)),
            ),
            (
                "another tool writes a broken config",
                Some(Snapshot::new(BTreeMap::from([(
                    "config.yaml".to_owned(),
                    b"schemaVersion: [oops".to_vec(),
                )]))),
            ),
            ("the ConfigMap is deleted", None),
            ("a compatible 2.5.0 arrives", Some(config("2.5.0", 4))),
        ];
        for (i, (what, snap)) in steps.into_iter().enumerate() {
            let before = shared.snapshot();
            let empty = Snapshot::new(BTreeMap::new());
            kubelet.promote(snap.as_ref().unwrap_or(&empty))?;
            let s = changed(&shared, &before).await;
            println!("{}. {what}", i + 1);
            let readiness = match (s.ready, s.stale) {
                (true, false) => "ready",
                (true, true) => "ready, stale (hold: the last accepted config stays in place)",
                (false, _) => "NOT ready",
            };
            println!("   readiness: {readiness}");
            if let Some(c) = &s.candidate {
                println!(
                    "   newest:    {} {} ({})",
                    c.verdict,
                    c.version.as_deref().unwrap_or("-"),
                    c.reason
                );
            }
            match &s.active {
                Some(a) => println!(
                    "   active:    {} {}",
                    a.version.as_deref().unwrap_or("-"),
                    &a.sha256[..19]
                ),
                None => println!("   active:    none"),
            }
            let runs = match snapshot::read(&active) {
                snapshot::Observed::Config(c) => {
                    String::from_utf8_lossy(&c.files["config.yaml"]).replace('\n', " ")
                }
                _ => "nothing yet".into(),
            };
            println!("   component reads: {runs}\n");
        }
        if keep {
            println!("serving on http://{addr} until Ctrl-C");
            let _ = tokio::signal::ctrl_c().await;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

/// Waits for the status to move on from `before` (a new verdict was published).
async fn changed(shared: &Shared, before: &Status) -> Status {
    let mut rx = shared.subscribe();
    let wait = rx.wait_for(|s| s.candidate != before.candidate || s.active != before.active);
    match tokio::time::timeout(Duration::from_secs(5), wait).await {
        Ok(Ok(s)) => s.clone(),
        _ => panic!("no verdict within 5 s"),
    }
}
