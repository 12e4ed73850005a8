//! What the component runs, with the real Prometheus (Debian's `prometheus`): a config whose version is
//! fine but whose rule file Prometheus refuses is rejected, rolled back and not offered again, through
//! `/-/reload` (its 500 answer) and through SIGHUP (its own reload metrics); a fixed config is applied;
//! a Prometheus that is down is retried, never rolled back; a restart after a rollback starts cleanly.
//! The config Prometheus started on is the rollback base of its very first update (its answer to the
//! first contact, or its metrics at start-up), and a restart of confgate keeps both what Prometheus
//! applied and what it refused.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long Prometheus may take to start and load a config: its TSDB start-up took over 30 s on a
/// 2-core machine with a load of 5. Only a failing run waits this long.
const PROM_DEADLINE: Duration = Duration::from_secs(90);

/// A ConfigMap with a schema version, a Prometheus config loading `rules.yml`, and a rule file whose
/// recording rule is named after the version (`broken`: an expression Prometheus cannot parse).
fn configmap(dir: &Path, version: &str, broken: bool) {
    let yml = "global:\n  scrape_interval: 15s\nrule_files:\n  - rules.yml\nscrape_configs: []\n";
    let expr = if broken { "sum(" } else { "vector(1)" };
    let rules = format!(
        "groups:\n  - name: g\n    rules:\n      - record: rules_version_{}\n        expr: \"{expr}\"\n",
        version.replace('.', "_")
    );
    kubelet_write(
        dir,
        &[
            ("version", version.as_bytes()),
            ("prometheus.yml", yml.as_bytes()),
            ("rules.yml", rules.as_bytes()),
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

/// Prometheus on `port`, reading the promoted dir, started through `exe` (a link with its own name, so
/// a signal by process name reaches only this test's Prometheus).
fn prometheus(exe: &Path, d: &Dirs, port: u16, lifecycle: bool) -> Prometheus {
    let mut cmd = Command::new(exe);
    cmd.arg(format!(
        "--config.file={}",
        d.promoted().join("prometheus.yml").display()
    ))
    .arg(format!("--web.listen-address=127.0.0.1:{port}"))
    .arg(format!(
        "--storage.tsdb.path={}",
        d.root.path().join("tsdb").display()
    ))
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(prometheus_log(d)).unwrap());
    if lifecycle {
        cmd.arg("--web.enable-lifecycle");
    }
    Prometheus(
        cmd.spawn().expect(
            "prometheus (Debian package prometheus) must be installed: .ci/setup installs it",
        ),
    )
}

/// Where Prometheus logs, so that a Prometheus that exits early says why.
fn prometheus_log(d: &Dirs) -> PathBuf {
    d.root.path().join("prometheus.log")
}

fn named_prometheus(d: &Dirs, name: &str) -> PathBuf {
    let exe = d.root.path().join(name);
    let real = which("prometheus");
    std::os::unix::fs::symlink(real, &exe).unwrap();
    exe
}

fn which(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} must be installed: .ci/setup installs it"))
}

/// Starts Prometheus on port 0, reads back the port it bound, and points the gate at it the way a pod's
/// annotations would: `annotation` set to `value(port)`, applied live. Returns once the gate logs it.
fn start_and_point(
    g: &Gate,
    exe: &Path,
    d: &Dirs,
    lifecycle: bool,
    annotation: &str,
    value: impl Fn(u16) -> String,
) -> (Prometheus, u16) {
    let (prom, port) = start(exe, d, lifecycle);
    point(g, d, annotation, &value(port));
    (prom, port)
}

/// Starts Prometheus on port 0 and reads back the port it bound.
fn start(exe: &Path, d: &Dirs, lifecycle: bool) -> (Prometheus, u16) {
    let mut prom = prometheus(exe, d, 0, lifecycle);
    let port = wait_for("prometheus to listen", PROM_DEADLINE, || {
        if let Some(exit) = prom.0.try_wait().unwrap() {
            let log = std::fs::read_to_string(prometheus_log(d)).unwrap_or_default();
            panic!("prometheus exited ({exit}) before it listened:\n{log}");
        }
        listening_port(prom.0.id())
    });
    (prom, port)
}

/// Points the gate at Prometheus with `annotation` set to `value`, applied live; returns once the
/// gate logs it in force.
fn point(g: &Gate, d: &Dirs, annotation: &str, value: &str) {
    write_annotations(&d.podinfo(), &[(annotation, value)]);
    wait_for("the annotation in force", PROM_DEADLINE, || {
        g.log_text()
            .lines()
            .any(|l| l.contains("annotation overrides flag") && l.contains(value))
            .then_some(())
    });
}

/// The versions of the recording rules Prometheus serves now.
fn serving_rules(port: u16) -> Option<Vec<String>> {
    let (code, body) = get(port, "/api/v1/rules")?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let mut out = Vec::new();
    for g in v["data"]["groups"].as_array()? {
        for r in g["rules"].as_array()? {
            out.push(
                r["name"]
                    .as_str()?
                    .trim_start_matches("rules_version_")
                    .to_owned(),
            );
        }
    }
    Some(out)
}

fn wait_serving(port: u16, version: &str) {
    let want = vec![version.replace('.', "_")];
    wait_for(
        &format!("prometheus to serve the rules of {version}"),
        PROM_DEADLINE,
        || serving_rules(port).filter(|r| *r == want),
    );
}

fn wait_applied(g: &Gate, version: &str) -> serde_json::Value {
    g.wait_status(&format!("{version} applied"), |s| {
        s["applied"]["version"] == version
            && s["active"]["version"] == version
            && s["reload"]["last_result"] == "success"
    })
}

fn promoted_rules(d: &Dirs) -> String {
    read_promoted(&d.promoted()).unwrap()["rules.yml"].clone()
}

fn metrics(g: &Gate) -> String {
    get(g.port, "/metrics").unwrap().1
}

#[test]
fn rejected_by_prometheus_reload_endpoint_is_rolled_back_and_not_retried() {
    let d = Dirs::new();
    configmap(&d.watch(), "2.0.0", false);
    // The flag's target is nowhere; the annotation names Prometheus once it has bound its port.
    let mut g = Gate::start(
        &d,
        &["--accepts", "^2", "--reload", "http://127.0.0.1:9/-/reload"],
    );
    g.deadline = PROM_DEADLINE;
    g.wait_active("2.0.0");
    let exe = named_prometheus(&d, "prom-http");
    let reload_url = |port: u16| format!("http://127.0.0.1:{port}/-/reload");
    let point = |g: &Gate| start_and_point(g, &exe, &d, true, "confgate.io/reload", reload_url);
    let (prom, port) = point(&g);
    wait_serving(port, "2.0.0");
    // The first promotion into an empty dir sends no reload: Prometheus read it when it started. The
    // next one is reloaded and confirmed applied.
    configmap(&d.watch(), "2.0.5", false);
    wait_applied(&g, "2.0.5");
    wait_serving(port, "2.0.5");

    // A valid version with a rule file Prometheus refuses.
    configmap(&d.watch(), "2.1.0", true);
    let s = g.wait_status("2.1.0 rejected and rolled back", |s| {
        s["desired"]["verdict"] == "rejected-by-component"
            && s["candidate"]["verdict"] == "rejected-by-component"
            && s["active"]["version"] == "2.0.5"
            && s["applied"]["version"] == "2.0.5"
            && s["reload"]["last_result"] == "success"
    });
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the component rejected it: POST ")
            && reason.contains("500")
            && reason.contains("failed to reload config"),
        "{reason}"
    );
    assert_eq!(s["desired"]["version"], "2.1.0");
    assert_eq!(
        (s["ready"].as_bool(), s["stale"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(serving_rules(port).unwrap(), ["2_0_5"]);
    assert!(promoted_rules(&d).contains("rules_version_2_0_5"));
    let (_, verbose) = get(g.port, "/readyz?verbose").unwrap();
    assert!(
        verbose.contains("rejected-by-component") && verbose.contains("failed to reload config"),
        "{verbose}"
    );
    let m = metrics(&g);
    assert!(
        m.contains("confgate_applied_config_info{version=\"2.0.5\""),
        "{m}"
    );
    assert!(
        m.contains("confgate_candidates_total{verdict=\"rejected-by-component\"} 1"),
        "{m}"
    );
    assert!(m.contains("confgate_last_reload_successful 1"), "{m}");

    // The same bytes again are not offered to Prometheus: nothing is promoted (under
    // the same reload target: a refusal is held under the target it was made under).
    let promotions = |m: &str| {
        m.lines()
            .find(|l| l.starts_with("confgate_promotions_total "))
            .map(str::to_owned)
    };
    configmap(&d.watch(), "2.0.1", false);
    wait_applied(&g, "2.0.1");
    let before = promotions(&metrics(&g));
    configmap(&d.watch(), "2.1.0", true);
    g.wait_candidate(Some("2.1.0"), "rejected-by-component");
    assert!(promoted_rules(&d).contains("rules_version_2_0_1"));
    assert_eq!(before, promotions(&metrics(&g)));

    // Prometheus restarted now starts cleanly on the rolled-back files. It comes back at the same
    // address, as a restarted container does: the reload target is unchanged, so the refusal stays
    // in force (a changed target would no longer hold it against 2.1.0, which would be promoted
    // again, possibly while Prometheus starts).
    drop(prom);
    let prom = prometheus(&exe, &d, port, true);
    wait_for("prometheus to listen again", PROM_DEADLINE, || {
        (listening_port(prom.0.id()) == Some(port)).then_some(())
    });
    wait_serving(port, "2.0.1");
    assert!(promoted_rules(&d).contains("rules_version_2_0_1"));

    // A fixed config is applied and reported.
    configmap(&d.watch(), "2.1.1", false);
    let s = wait_applied(&g, "2.1.1");
    assert!(
        s["candidate"].is_null() && s["desired"]["verdict"] == "accepted",
        "{s}"
    );
    wait_serving(port, "2.1.1");
    let m = metrics(&g);
    assert!(
        m.contains("confgate_applied_config_info{version=\"2.1.1\""),
        "{m}"
    );

    // Prometheus down: the reload is not reached, retried, never rolled back.
    drop(prom);
    configmap(&d.watch(), "2.2.0", false);
    let s = g.wait_status("2.2.0 promoted, reload failing", |s| {
        s["active"]["version"] == "2.2.0" && s["reload"]["last_result"] == "failure"
    });
    assert_eq!(s["applied"]["version"], "2.1.1");
    assert!(s["candidate"].is_null(), "{s}");
    assert!(promoted_rules(&d).contains("rules_version_2_2_0"));
    wait_for("confgate_last_reload_successful 0", PROM_DEADLINE, || {
        metrics(&g)
            .contains("confgate_last_reload_successful 0")
            .then_some(())
    });
    // Back on a new port: the owed reload is retried to the target now in force.
    let (_prom, port) = point(&g);
    wait_serving(port, "2.2.0");
    wait_applied(&g, "2.2.0");
}

#[test]
fn rejected_after_sighup_is_confirmed_by_prometheus_metrics_and_rolled_back() {
    let d = Dirs::new();
    configmap(&d.watch(), "2.0.0", false);
    let confirm = |port: u16| {
        format!(
            "http://127.0.0.1:{port}/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds"
        )
    };
    let mut g = Gate::start(
        &d,
        &[
            "--accepts",
            "^2",
            "--on-incompatible",
            "unready",
            "--reload",
            "signal:HUP:prom-hup",
            "--confirm",
            &confirm(9),
        ],
    );
    g.deadline = PROM_DEADLINE;
    // The first promotion into an empty dir owes no reload (the process reads it when it starts),
    // only a start-up check, which waits for the process.
    g.wait_status("first config in place", |s| {
        s["active"]["version"] == "2.0.0" && s["reload"]["last_result"] == "pending"
    });
    let exe = named_prometheus(&d, "prom-hup");
    let (_prom, port) = start_and_point(&g, &exe, &d, false, "confgate.io/confirm", confirm);
    wait_serving(port, "2.0.0");

    configmap(&d.watch(), "2.0.1", false);
    wait_applied(&g, "2.0.1");
    wait_serving(port, "2.0.1");

    configmap(&d.watch(), "2.1.0", true);
    let s = g.wait_status("2.1.0 rejected and rolled back", |s| {
        s["candidate"]["verdict"] == "rejected-by-component"
            && s["active"]["version"] == "2.0.1"
            && s["applied"]["version"] == "2.0.1"
            && s["reload"]["last_result"] == "success"
    });
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("prometheus_config_last_reload_successful is 0"),
        "{reason}"
    );
    assert_eq!(s["ready"], false, "on-incompatible unready: {s}");
    assert_eq!(get(g.port, "/readyz").unwrap().0, 503);
    assert_eq!(serving_rules(port).unwrap(), ["2_0_1"]);
    assert!(promoted_rules(&d).contains("rules_version_2_0_1"));
    // Prometheus itself says its last reload (the rollback) succeeded.
    let (_, pm) = get(port, "/metrics").unwrap();
    assert!(
        pm.contains("prometheus_config_last_reload_successful 1"),
        "{pm}"
    );

    configmap(&d.watch(), "2.1.1", false);
    let s = wait_applied(&g, "2.1.1");
    assert_eq!(s["ready"], true, "{s}");
    wait_serving(port, "2.1.1");
}

/// The normal life of a pod: Prometheus starts on the first config confgate promoted and runs it; the
/// first update is refused. Prometheus' 2xx to the first contact made the first config the rollback
/// base, so the update is rolled back to it. confgate then restarts and offers Prometheus nothing:
/// it reads back what was applied and what was refused.
#[test]
fn the_first_update_refused_by_prometheus_rolls_back_to_the_config_it_started_on() {
    let d = Dirs::new();
    configmap(&d.watch(), "2.0.0", false);
    let args = ["--accepts", "^2", "--reload", "http://127.0.0.1:9/-/reload"];
    let mut g = Gate::start(&d, &args);
    g.deadline = PROM_DEADLINE;
    g.wait_active("2.0.0");
    // Prometheus starts on the promoted dir, as a native sidecar's component does.
    let exe = named_prometheus(&d, "prom-first");
    let reload_url = |port: u16| format!("http://127.0.0.1:{port}/-/reload");
    let (prom, port) = start_and_point(&g, &exe, &d, true, "confgate.io/reload", reload_url);
    wait_serving(port, "2.0.0");
    wait_applied(&g, "2.0.0");

    configmap(&d.watch(), "2.1.0", true);
    let s = g.wait_status("2.1.0 rejected and rolled back to 2.0.0", |s| {
        s["candidate"]["verdict"] == "rejected-by-component"
            && s["active"]["version"] == "2.0.0"
            && s["applied"]["version"] == "2.0.0"
            && s["reload"]["last_result"] == "success"
    });
    assert_eq!(s["desired"]["version"], "2.1.0");
    assert!(promoted_rules(&d).contains("rules_version_2_0_0"));
    assert_eq!(serving_rules(port).unwrap(), ["2_0_0"]);
    assert!(!g.log_text().contains("no applied config to roll back to"));
    let owed = d.promoted().join("..confgate_reload_owed");
    assert!(
        owed.symlink_metadata().is_err(),
        "the rollback's reload is done: nothing owed"
    );

    // confgate restarts (an OOM kill, a node drain): it knows what Prometheus applied and refused.
    g.kill();
    let mut g = Gate::start(&d, &args);
    g.deadline = PROM_DEADLINE;
    let s = g.wait_status("2.1.0 judged after the restart", |s| {
        s["candidate"]["verdict"] == "rejected-by-component"
    });
    assert_eq!(s["candidate"]["version"], "2.1.0");
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(reason.contains("failed to reload config"), "{reason}");
    assert_eq!(s["applied"]["version"], "2.0.0", "{s}");
    assert_eq!(s["active"]["version"], "2.0.0", "{s}");
    assert_eq!(
        s["reload"]["requested"], 0,
        "nothing offered to Prometheus: {s}"
    );
    assert!(promoted_rules(&d).contains("rules_version_2_0_0"));
    assert!(!owed.exists());
    // And Prometheus, restarted too, starts cleanly on what is promoted. Its new port is a new
    // reload target, under which the refusal made under the old one is not held: 2.1.0 is offered
    // to it, refused again and rolled back, and 2.0.0 is what it serves.
    drop(prom);
    // Serving before it is pointed at: Prometheus listens before it reads its config, and the
    // refused config offered to the new target must not be what it starts on.
    let (_prom, port) = start(&exe, &d, true);
    wait_serving(port, "2.0.0");
    point(&g, &d, "confgate.io/reload", &reload_url(port));
    g.wait_status("2.1.0 refused again under the new target", |s| {
        s["candidate"]["verdict"] == "rejected-by-component"
            && s["reload"]["requested"].as_u64() >= Some(1)
            && s["active"]["version"] == "2.0.0"
            && s["reload"]["last_result"] == "success"
    });
    assert_eq!(serving_rules(port).unwrap(), ["2_0_0"]);
    assert!(promoted_rules(&d).contains("rules_version_2_0_0"));
}

/// Waits until the boot-time clock, on which process start times are counted in 10 ms ticks, is two
/// ticks past where it is now.
fn boot_clock_moves_on() {
    let ticks = || {
        let text = std::fs::read_to_string("/proc/uptime").unwrap();
        let up: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
        (up * 100.0) as u64
    };
    let start = ticks();
    wait_for("the boot-time clock to move on", PROM_DEADLINE, || {
        (ticks() >= start + 2).then_some(())
    });
}

/// With `--confirm`, Prometheus' own metrics say it loaded the first config when it started (it was
/// started after the promotion, so it is not signalled): that config is the rollback base of the
/// first update, which its metrics then say it refused.
#[test]
fn prometheus_metrics_confirm_the_config_it_started_on_and_its_first_update_is_rolled_back() {
    let d = Dirs::new();
    configmap(&d.watch(), "2.0.0", false);
    let confirm = |port: u16| {
        format!(
            "http://127.0.0.1:{port}/metrics#prometheus_config_last_reload_successful,prometheus_config_last_reload_success_timestamp_seconds"
        )
    };
    let mut g = Gate::start(
        &d,
        &[
            "--accepts",
            "^2",
            "--reload",
            "signal:HUP:prom-start-hup",
            "--confirm",
            &confirm(9),
        ],
    );
    g.deadline = PROM_DEADLINE;
    g.wait_active("2.0.0");
    // A process started in the promotion's 10 ms tick is signalled (it may have read the config
    // before); this one must start in a later tick to be one that read 2.0.0 itself.
    boot_clock_moves_on();
    let exe = named_prometheus(&d, "prom-start-hup");
    let (_prom, port) = start_and_point(&g, &exe, &d, false, "confgate.io/confirm", confirm);
    wait_serving(port, "2.0.0");
    let s = g.wait_status("2.0.0 confirmed at start-up", |s| {
        s["applied"]["version"] == "2.0.0"
    });
    // Confirmed without a signal: Prometheus read it when it started.
    assert_eq!(s["reload"]["last_result"], "nothing-to-reload", "{s}");

    configmap(&d.watch(), "2.1.0", true);
    let s = g.wait_status("2.1.0 rejected and rolled back to 2.0.0", |s| {
        s["candidate"]["verdict"] == "rejected-by-component"
            && s["active"]["version"] == "2.0.0"
            && s["applied"]["version"] == "2.0.0"
            && s["reload"]["last_result"] == "success"
    });
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("prometheus_config_last_reload_successful is 0"),
        "{reason}"
    );
    assert!(promoted_rules(&d).contains("rules_version_2_0_0"));
    assert_eq!(serving_rules(port).unwrap(), ["2_0_0"]);
}
