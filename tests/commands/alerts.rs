//! The Prometheus alert rules of `docs/endpoints.md` stay valid and name metrics confgate exports: `promtool check
//! rules` accepts them, and a real Prometheus, loading them and scraping a real confgate that holds a
//! too-new config while its reload target refuses every connection, has both alerts pending (their
//! `for` is minutes; pending is the state a test can wait for, and an expression over a metric that
//! does not exist never gets there).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const MARK: &str = "<!-- alert rules: checked by tests/commands/alerts.rs -->";

/// The YAML block after [`MARK`], in the README or the page of `docs/` the section lives on.
pub(crate) fn rules() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<PathBuf> = vec![root.join("README.md")];
    if let Ok(docs) = std::fs::read_dir(root.join("docs")) {
        pages.extend(
            docs.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "md")),
        );
    }
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap_or_default();
        let Some(at) = text.find(MARK) else { continue };
        let rest = &text[at + MARK.len()..];
        let start = rest.find("```yaml\n").expect("a yaml block after the mark") + 8;
        let len = rest[start..].find("```").expect("the block ends");
        return rest[start..start + len].to_owned();
    }
    panic!("no page holds the alert rules marked {MARK}");
}

fn write_rules(dir: &Path) -> PathBuf {
    let path = dir.join("confgate-rules.yml");
    std::fs::write(&path, rules()).unwrap();
    path
}

#[test]
fn promtool_accepts_the_alert_rules() {
    let promtool = tool("promtool");
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(promtool)
        .args(["check", "rules"])
        .arg(write_rules(tmp.path()))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SUCCESS: 2 rules found"), "{text}");
}

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The names of the alerts pending or firing, each with its `pod` label.
fn alerts(port: u16) -> BTreeSet<(String, String)> {
    let Some((200, body)) = get(port, "/api/v1/query?query=ALERTS") else {
        return BTreeSet::new();
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let m = &r["metric"];
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (s("alertname"), s("pod"))
        })
        .collect()
}

#[test]
fn a_held_config_and_a_failing_reload_make_the_alerts_pending() {
    let prometheus = tool("prometheus");
    let d = Dirs::new();
    write_version(&d.watch(), "2.4.1");
    // A reload target that refuses every connection: a loopback port bound, then closed.
    let refusing = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}/reload", l.local_addr().unwrap().port())
    };
    let g = Gate::start(&d, &["--accepts", "^2.4", "--reload", &refusing]);
    g.wait_active("2.4.1");

    let rules = write_rules(d.root.path());
    let config = d.root.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: confgate\n    static_configs:\n      - targets: [\"127.0.0.1:{}\"]\n        \
             labels:\n          namespace: prod\n          pod: web-0\n",
            rules.display(),
            g.port
        ),
    )
    .unwrap();
    let prom = Prometheus(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg("--web.listen-address=127.0.0.1:0")
            .arg(format!(
                "--storage.tsdb.path={}",
                d.root.path().join("tsdb").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let port = wait_for("prometheus to listen", DEADLINE, || {
        listening_port(prom.0.id())
    });
    wait_for(
        "prometheus to scrape confgate",
        Duration::from_secs(60),
        || {
            get(port, "/api/v1/query?query=confgate_ready")
                .filter(|(code, body)| *code == 200 && body.contains("web-0"))
        },
    );
    // Now that Prometheus sees the counters from the start, the reloads of 2.5.0 fail (the first
    // retries come within seconds), and 3.0.0 is held.
    write_version(&d.watch(), "2.5.0");
    g.wait_active("2.5.0");
    write_version(&d.watch(), "3.0.0");
    g.wait_candidate(Some("3.0.0"), "too-new");
    let want: BTreeSet<(String, String)> = ["ConfgateConfigHeld", "ConfgateReloadFailing"]
        .into_iter()
        .map(|a| (a.to_owned(), "web-0".to_owned()))
        .collect();
    wait_for(
        "both alerts pending in prometheus",
        Duration::from_secs(90),
        || {
            let now = alerts(port);
            want.is_subset(&now).then_some(now)
        },
    );
    let s = g.status();
    assert_eq!(
        s["ready"], true,
        "a held config and a failing reload keep the replica ready: {s}"
    );
}
