//! End to end with a real component: Debian's Prometheus reads its config from confgate's promoted dir
//! and is hot-reloaded by confgate through `/-/reload`.

use crate::common;

use common::*;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A ConfigMap with a schema version and a Prometheus config whose external label carries the version,
/// so `/api/v1/status/config` shows which one Prometheus runs.
fn configmap(dir: &std::path::Path, version: &str) {
    let yml = format!(
        "global:\n  scrape_interval: 15s\n  external_labels:\n    config_version: \"{version}\"\nscrape_configs: []\n"
    );
    kubelet_write(
        dir,
        &[
            ("version", version.as_bytes()),
            ("prometheus.yml", yml.as_bytes()),
        ],
    );
}

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn running_version(port: u16) -> Option<String> {
    let (code, body) = get(port, "/api/v1/status/config")?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let yaml = v["data"]["yaml"].as_str()?;
    let line = yaml.lines().find(|l| l.contains("config_version"))?;
    Some(line.split(':').nth(1)?.trim().trim_matches('"').to_owned())
}

#[test]
fn prometheus_only_ever_runs_an_accepted_config() {
    let d = Dirs::new();
    configmap(&d.watch(), "2.0.0");
    // No reload target yet: the first promotion needs none (the component reads it when it starts), and
    // Prometheus's port is known only once it has bound port 0. The target then arrives as the pod's
    // annotation, applied live as a kubelet update of the downward-API file would be.
    let g = Gate::start(&d, &["--accepts", "^2", "--require", "prometheus.yml"]);
    // As a native sidecar would: the component starts once a compatible config is promoted.
    g.wait_active("2.0.0");
    assert_eq!(get(g.port, "/startupz").unwrap().0, 200);
    let prom = Prometheus(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                d.promoted().join("prometheus.yml").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .arg(format!(
                "--storage.tsdb.path={}",
                d.root.path().join("tsdb").display()
            ))
            .arg("--web.enable-lifecycle")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "prometheus (Debian package prometheus) must be installed: .ci/run installs it",
            ),
    );
    let prom_port = wait_for("prometheus to listen", DEADLINE, || {
        listening_port(prom.0.id())
    });
    let target = format!("http://127.0.0.1:{prom_port}/-/reload");
    write_annotations(&d.podinfo(), &[("confgate.io/reload", &target)]);
    g.wait_status("the reload target from the annotation", |s| {
        s["reload"]["target"] == target.as_str()
    });
    let deadline = Duration::from_secs(30);
    wait_for("prometheus to run 2.0.0", deadline, || {
        running_version(prom_port).filter(|v| v == "2.0.0")
    });

    // A compatible update is promoted and hot-loaded.
    configmap(&d.watch(), "2.1.0");
    g.wait_active("2.1.0");
    wait_for("prometheus to run 2.1.0", deadline, || {
        running_version(prom_port).filter(|v| v == "2.1.0")
    });
    g.wait_status("reload success", |s| {
        s["reload"]["last_result"] == "success"
            && s["reload"]["last_success_sha256"] == s["active"]["sha256"]
    });

    // A too-new one never reaches Prometheus.
    configmap(&d.watch(), "3.0.0");
    g.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(running_version(prom_port).as_deref(), Some("2.1.0"));
    assert!(read_promoted(&d.promoted()).unwrap()["prometheus.yml"].contains("\"2.1.0\""));

    // A later compatible one is applied again.
    configmap(&d.watch(), "2.2.0");
    g.wait_active("2.2.0");
    wait_for("prometheus to run 2.2.0", deadline, || {
        running_version(prom_port).filter(|v| v == "2.2.0")
    });
    let s = g.wait_status("reload of 2.2.0", |s| {
        s["reload"]["last_success_sha256"] == s["active"]["sha256"]
    });
    assert_eq!(s["ready"], true);
}
