//! The fleet: N confgate sidecars in API mode against one ConfigMap on a real kube-apiserver (each
//! with its own Pending pod), and what they cost as N grows: propagation from a write of the
//! ConfigMap (a patch from a connected client) to every sidecar promoted, API requests per sidecar per idle minute, Events and status patches per change,
//! RSS per sidecar, the ConfigMap watches held, and the API server's own CPU and memory. Then the same
//! fleet in volume mode, the recommended deployment (kubelet-style volumes, each sidecar reporting on
//! its pod and reloading a loopback sink): propagation from the `..data` swap, writes and API-server
//! CPU per change, RSS (the kubelet holds the watch, so they list and watch nothing). Then the same changes
//! with a reload spread set through each pod's annotations: propagation, and the most sidecars that
//! promote within one second, beside the same without it. In API mode each pod's component is marked
//! ready and the sidecars run a short known-good trial (`--trial-secs`), so every change ends in the
//! known-good record: the bench counts the record's writes per change for the whole fleet.
//!
//! `ETCD_BIN=… KUBE_APISERVER_BIN=… cargo bench --bench fleet [-- --sizes 10,50,100 --idle-secs 60
//! --changes 3 --spread-secs 10 --trial-secs 2 --api-only]` (`--spread-secs 0`: no run with the
//! spread; `--trial-secs 0`: no trial; `--api-only`: no volume mode); without the two variables it says it skipped and exits 0. `CONFGATE_BIN` runs
//! another confgate binary as the sidecars (a release build while the bench itself is a debug one).
//! Prints a table and an ASCII chart, and writes JSON and an SVG chart to the target dir.

#[path = "support/chart.rs"]
mod chart;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/cluster/server.rs"]
#[allow(dead_code)]
mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::Gate;
use serde_json::json;

const CM: &str = "webhook-config";
const ACCEPTS: &str = ">=2.4.0, <3.0.0";
const VERSION_FROM: &str = "yaml:config.yaml#/schemaVersion";
/// Generous: up to 100 sidecars starting, listing and promoting on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(180);

struct Opts {
    sizes: Vec<usize>,
    idle: Duration,
    changes: usize,
    spread: Duration,
    /// The API-mode sidecars' known-good trial (`--trial`); zero: none.
    trial: Duration,
    api_only: bool,
    json: PathBuf,
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo bench --bench fleet -- [--sizes 10,50,100] [--idle-secs N] [--changes N] [--spread-secs N] [--trial-secs N] [--api-only] [--json PATH]"
    );
    std::process::exit(64)
}

fn opts() -> Opts {
    let target_dir = Path::new(common::BIN)
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    let mut o = Opts {
        sizes: vec![10, 50, 100],
        idle: Duration::from_secs(60),
        changes: 3,
        spread: Duration::from_secs(10),
        trial: Duration::from_secs(2),
        api_only: false,
        json: target_dir.join("confgate-fleet.json"),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_else(|| usage());
        match a.as_str() {
            "--bench" => {}
            "--sizes" => {
                o.sizes = val()
                    .split(',')
                    .map(|n| n.trim().parse().unwrap_or_else(|_| usage()))
                    .collect()
            }
            "--idle-secs" => {
                o.idle = Duration::from_secs(val().parse().unwrap_or_else(|_| usage()))
            }
            "--changes" => o.changes = val().parse().unwrap_or_else(|_| usage()),
            "--spread-secs" => {
                o.spread = Duration::from_secs(val().parse().unwrap_or_else(|_| usage()))
            }
            "--trial-secs" => {
                o.trial = Duration::from_secs(val().parse().unwrap_or_else(|_| usage()))
            }
            "--api-only" => o.api_only = true,
            "--json" => o.json = PathBuf::from(val()),
            _ => usage(),
        }
    }
    o
}

/// The sidecars' binary: `CONFGATE_BIN`, else the one cargo built with this bench.
fn bin() -> String {
    std::env::var("CONFGATE_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| common::BIN.to_owned())
}

/// `confgate run ARGS` with the sidecars' binary, listening on a port of the kernel's choosing.
fn sidecar(args: &[&str], env: &[(&str, &str)], log: &Path) -> Gate {
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(args)
        .env_remove("KUBERNETES_SERVICE_HOST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut g = Gate::from_command(cmd, log);
    g.deadline = DEADLINE;
    g
}

/// `kubectl` as the admin.
fn kubectl(c: &server::Cluster, args: &[&str], stdin: &str) -> String {
    let mut cmd = Command::new(&c.kubectl);
    cmd.arg("--kubeconfig")
        .arg(&c.admin)
        .arg("--cache-dir")
        .arg(c.dir.join("kubectl-cache"))
        .args(args);
    let out = common::output_with_stdin(cmd, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn configmap(ns: &str, version: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": CM, "namespace": ns},
           "data": {"config.yaml": format!("schemaVersion: {version}\ngreeting: hello\n")}})
    .to_string()
}

/// The request counts of `apiserver_request_total`, summed per `VERB resource[/subresource]`.
type Counts = BTreeMap<String, f64>;

/// Each sample of the API server's `metric`, summed into `out` under the key `key` makes of its
/// labels (none: left out). `label(name)` is a label's value, empty when absent.
fn sum_metric(
    c: &server::Cluster,
    metric: &str,
    key: impl Fn(&dyn Fn(&str) -> String) -> Option<String>,
) -> Counts {
    let text = kubectl(c, &["get", "--raw", "/metrics"], "");
    let prefix = format!("{metric}{{");
    let mut out = Counts::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\""))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        if let Some(k) = key(&label) {
            *out.entry(k).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
        }
    }
    out
}

fn request_counts(c: &server::Cluster) -> Counts {
    sum_metric(c, "apiserver_request_total", |label| {
        let sub = label("subresource");
        // A request answered other than 2xx (429: the API server's priority and fairness turned it
        // away; the client tries again) is kept apart: it wrote nothing.
        let code = label("code");
        Some(format!(
            "{} {}{}{}",
            label("verb"),
            label("resource"),
            if sub.is_empty() {
                String::new()
            } else {
                format!("/{sub}")
            },
            if code.starts_with('2') || code.is_empty() {
                String::new()
            } else {
                format!(" ({code})")
            }
        ))
    })
}

fn delta(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

fn total(c: &Counts) -> f64 {
    c.values().sum()
}

/// Report requests the API server answered other than 2xx (nothing written; retried).
fn turned_away(d: &Counts) -> f64 {
    d.iter()
        .filter(|(k, _)| {
            (k.starts_with("PATCH pods/status (") || k.contains(" events (")) && !k.ends_with("(0)")
        })
        .map(|(_, v)| v)
        .sum()
}

/// The known-good record's writes (created, or patched at the resourceVersion read) in `d`, less
/// `own` writes of the source ConfigMap the bench made itself, and the writes refused for a
/// conflict (another pod wrote first; nothing written).
fn record_writes(d: &Counts, own: f64) -> (f64, f64) {
    let get = |k: &str| d.get(k).copied().unwrap_or(0.0);
    (
        get("POST configmaps") + get("PATCH configmaps") + get("PUT configmaps") - own,
        get("POST configmaps (409)") + get("PATCH configmaps (409)") + get("PUT configmaps (409)"),
    )
}

/// Objects written to etcd (`etcd_requests_total`, `create` and `update`), per resource: unlike the
/// request counts, a patch that changes nothing (the known-good trial's read of its pod, an empty
/// patch of its status) is not among them.
fn storage_writes(c: &server::Cluster) -> Counts {
    sum_metric(c, "etcd_requests_total", |label| {
        let op = label("operation");
        if op != "create" && op != "update" {
            return None;
        }
        // `resource` since Kubernetes 1.33; `type` (`/registry/pods`) before.
        let ty = Some(label("resource"))
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| label("type"));
        Some(ty.rsplit('/').next().unwrap_or(&ty).to_owned())
    })
}

/// Waits until at least `least` pods were stored since `before` (each pod's conditions and facts
/// written, a patch turned away and tried again included), and returns how many were.
fn pods_stored(c: &server::Cluster, before: &Counts, least: usize) -> f64 {
    let until = std::time::Instant::now() + DEADLINE;
    loop {
        let stored = delta(&storage_writes(c), before)
            .get("pods")
            .copied()
            .unwrap_or(0.0);
        if stored >= least as f64 || std::time::Instant::now() > until {
            return stored;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Waits until the known-good record `CM.confgate-known-good` holds `version` and the pods have
/// read it once their trials passed (`GET configmaps`, less the bench's own reads, at least `least`
/// since `before` and none more in the last second).
fn recorded(
    c: &server::Cluster,
    rt: &tokio::runtime::Runtime,
    configmaps: &kube::Api<k8s_openapi::api::core::v1::ConfigMap>,
    before: &Counts,
    version: &str,
    least: usize,
) {
    let name = format!("{CM}.confgate-known-good");
    let until = std::time::Instant::now() + DEADLINE;
    let mut own = 0.0;
    loop {
        own += 1.0;
        let held = rt
            .block_on(configmaps.get_opt(&name))
            .ok()
            .flatten()
            .and_then(|cm| cm.data)
            .is_some_and(|d| {
                d.values()
                    .any(|e| e.contains(&format!("\"version\":\"{version}\"")))
            });
        if held {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the known-good record never held {version}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut last = -1.0;
    loop {
        let d = delta(&request_counts(c), before);
        // A read of a record not there yet is answered 404: counted too.
        let reads = d
            .iter()
            .filter(|(k, _)| *k == "GET configmaps" || k.starts_with("GET configmaps ("))
            .map(|(_, v)| v)
            .sum::<f64>()
            - own;
        if (reads >= least as f64 && reads == last) || std::time::Instant::now() > until {
            return;
        }
        last = reads;
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The writes a sidecar's reports make: Events created or folded, and pods/status patches.
fn writes(d: &Counts) -> (f64, f64) {
    (
        d.get("POST events").copied().unwrap_or(0.0)
            + d.get("PATCH events").copied().unwrap_or(0.0),
        d.get("PATCH pods/status").copied().unwrap_or(0.0),
    )
}

/// Waits until the reports of a change have reached the API server: at least `least` writes since
/// `before`, and no more in the last second. Returns the requests since `before`.
fn reported(c: &server::Cluster, before: &Counts, least: f64) -> Counts {
    let mut last = -1.0;
    let until = std::time::Instant::now() + DEADLINE;
    loop {
        let d = delta(&request_counts(c), before);
        let (events, patches) = writes(&d);
        let now = events + patches;
        if (now >= least && now == last) || std::time::Instant::now() > until {
            return d;
        }
        last = now;
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The watches the API server holds open on ConfigMaps (`apiserver_longrunning_requests`).
fn configmap_watches(c: &server::Cluster) -> f64 {
    total(&sum_metric(c, "apiserver_longrunning_requests", |label| {
        (label("resource") == "configmaps" && label("verb") == "WATCH").then(String::new)
    }))
}

/// The pid of the process whose command line holds all of `needles`.
fn find_pid(needles: &[&str]) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (needles.iter().all(|n| cmd.contains(n)) && !cmd.contains("setpriv")).then_some(pid)
    })
}

/// The value at quantile `q` (nearest rank) of a sample, in milliseconds.
fn quantile(xs: &mut [f64], q: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let i = ((xs.len() as f64 * q).ceil() as usize).clamp(1, xs.len()) - 1;
    xs[i]
}

/// One fleet size's figures.
#[derive(Debug, Default, Clone)]
struct Row {
    n: usize,
    p50_ms: f64,
    p99_ms: f64,
    idle_per_sidecar_min: f64,
    events_per_change: f64,
    patches_per_change: f64,
    /// Report requests turned away (429 and the like) per change: retried, nothing written.
    turned_away_per_change: f64,
    /// ConfigMap watches the API server holds for the fleet.
    watches: f64,
    /// The known-good record's writes per change, for the whole fleet (none without a trial).
    record_writes_per_change: Option<f64>,
    /// Record writes refused for a conflict per change.
    record_conflicts_per_change: f64,
    /// Pods stored per change (etcd `update`): the status patches that wrote something.
    pod_writes_per_change: f64,
    rss_kib: f64,
    apiserver_idle_cpu_ms_min: f64,
    apiserver_change_cpu_ms: f64,
    apiserver_rss_kib: u64,
    etcd_rss_kib: u64,
    /// Volume mode with reporting (the recommended deployment), a reload target each.
    volume: Volume,
    idle_by_request: Counts,
    /// The most sidecars that promoted one change within one second, without the spread.
    burst: usize,
    /// The same changes with the spread on (none when not measured).
    spread: Option<Spread>,
}

/// The same fleet in volume mode, each sidecar reporting on its pod, with a reload target.
#[derive(Debug, Default, Clone)]
struct Volume {
    p50_ms: f64,
    p99_ms: f64,
    events_per_change: f64,
    patches_per_change: f64,
    /// Report requests turned away (429 and the like) per change: retried, nothing written.
    turned_away_per_change: f64,
    apiserver_change_cpu_ms: f64,
    rss_kib: f64,
}

/// Changes made with the reload spread on.
#[derive(Debug, Default, Clone)]
struct Spread {
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    burst: usize,
}

/// The most of `times` (ms after a change) that fall within one second of each other.
fn burst(times: &[f64]) -> usize {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    (0..t.len())
        .map(|i| t[i..].iter().take_while(|x| **x < t[i] + 1000.0).count())
        .max()
        .unwrap_or(0)
}

/// Patches the ConfigMap to `version` from a connected client (the clock starts at the write, not at
/// a kubectl process starting up) and returns, per sidecar, how long after the write it promoted it.
fn change(
    rt: &tokio::runtime::Runtime,
    configmaps: &kube::Api<k8s_openapi::api::core::v1::ConfigMap>,
    gates: &[Gate],
    version: &str,
) -> Vec<f64> {
    let patch =
        json!({"data": {"config.yaml": format!("schemaVersion: {version}\ngreeting: hello\n")}});
    let t0 = jiff::Timestamp::now();
    rt.block_on(configmaps.patch(
        CM,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    ))
    .expect("patch the ConfigMap");
    gates
        .iter()
        .map(|g| {
            let s = g.wait_active(version);
            let since: jiff::Timestamp = s["active"]["since"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("active.since");
            since.duration_since(t0).as_secs_f64() * 1e3
        })
        .collect()
}

fn fleet(c: &server::Cluster, n: usize, o: &Opts, apiserver: u32, etcd: Option<u32>) -> Row {
    let ns = format!("fleet-{n}");
    let rbac = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/rbac/sidecar.yaml"),
    )
    .expect("manifests/rbac/sidecar.yaml")
    .replace("webhook-system", &ns);
    kubectl(c, &["create", "namespace", &ns], "");
    kubectl(c, &["apply", "-f", "-"], &rbac);
    kubectl(c, &["apply", "-f", "-"], &configmap(&ns, "2.4.0"));
    let pods: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": format!("web-{i}"), "namespace": ns},
                   "spec": {"serviceAccountName": "confgate",
                            "readinessGates": [{"conditionType": "confgate.io/config-compatible"}],
                            "containers": [{"name": "webhook", "image": "example/webhook:1"}]}})
        })
        .collect();
    kubectl(
        c,
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "List", "items": pods}).to_string(),
    );
    let rt = server::runtime();
    let admin = rt.block_on(server::client(&c.admin));
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(admin.clone(), &ns);
    if !o.trial.is_zero() {
        // No kubelet runs: the component's container is reported ready as a kubelet would, so
        // each trial passes and every change ends in the known-good record.
        let pod_api: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(admin.clone(), &ns);
        let ready = json!({"status": {"phase": "Running", "containerStatuses": [{
            "name": "webhook", "ready": true, "restartCount": 0, "image": "example/webhook:1",
            "imageID": "", "state": {"running": {"startedAt": "2026-12-04T00:00:00Z"}}}]}});
        for i in 0..n {
            rt.block_on(pod_api.patch_status(
                &format!("web-{i}"),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&ready),
            ))
            .expect("mark the component ready");
        }
    }
    let trial = format!("{}s", o.trial.as_secs());
    // A trial begins when the component has applied the config: with a reload target, at its
    // answer (a loopback sink here).
    let sink = common::Sink::start(false);
    let url = sink.url();
    let token = kubectl(
        c,
        &["create", "token", "confgate", "-n", &ns, "--duration=2h"],
        "",
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tmp.path().join("kubeconfig");
    server::write_kubeconfig(&kubeconfig, &c.server, &c.ca, token.trim(), &ns);

    // What the API server does without this fleet, over the same window, is subtracted.
    eprintln!("N={n}: baseline, {:?} without the fleet...", o.idle);
    let (b0, bcpu0) = (request_counts(c), common::cpu_ticks(apiserver));
    std::thread::sleep(o.idle);
    let (b1, bcpu1) = (request_counts(c), common::cpu_ticks(apiserver));
    let baseline = delta(&b1, &b0);

    eprintln!("N={n}: starting {n} sidecars in API mode...");
    let gates: Vec<Gate> = (0..n)
        .map(|i| {
            let dir = tmp.path().join(format!("s{i}"));
            std::fs::create_dir_all(&dir).expect("sidecar dir");
            let path = |p: &str| dir.join(p).to_string_lossy().into_owned();
            let source = format!("configmap:{ns}/{CM}");
            // The annotations dir exists (and is watched) from the start; the file comes with the spread.
            std::fs::create_dir_all(dir.join("podinfo")).expect("podinfo dir");
            let (promoted, watch, ann) = (
                path("promoted"),
                path("no-volume"),
                path("podinfo/annotations"),
            );
            let args = [
                "--accepts",
                ACCEPTS,
                "--version-from",
                VERSION_FROM,
                "--source",
                &source,
                "--promote-to",
                &promoted,
                "--watch",
                &watch,
                "--annotations",
                &ann,
                "--trial",
                &trial,
                "--reload",
                &url,
            ];
            let pod = format!("web-{i}");
            let kc = kubeconfig.to_string_lossy();
            let env = [
                ("KUBECONFIG", &*kc),
                ("POD_NAME", &pod),
                ("POD_NAMESPACE", &ns),
            ];
            sidecar(&args, &env, &dir.join("confgate.log"))
        })
        .collect();
    for g in &gates {
        g.wait_active("2.4.0");
    }
    // Let start-up reporting (the first conditions, and the first config's record) finish before
    // counting idle requests.
    reported(c, &b1, n as f64);
    if !o.trial.is_zero() {
        // Each pod read the record at start, and again when its trial passed.
        recorded(c, &rt, &configmaps, &b1, "2.4.0", 2 * n);
    }
    let watches = configmap_watches(c);

    eprintln!("N={n}: idle for {:?}...", o.idle);
    let (i0, cpu0) = (request_counts(c), common::cpu_ticks(apiserver));
    std::thread::sleep(o.idle);
    let (i1, cpu1) = (request_counts(c), common::cpu_ticks(apiserver));
    let idle = delta(&delta(&i1, &i0), &baseline);
    let minutes = o.idle.as_secs_f64() / 60.0;
    // The /metrics reads themselves are counted in both windows and cancel out.
    let idle_ticks = (cpu1 - cpu0).saturating_sub(bcpu1 - bcpu0);

    eprintln!("N={n}: {} changes...", o.changes);
    let t_changes = std::time::Instant::now();
    let (mut record, mut conflicts, mut pod_writes) = (0.0, 0.0, 0.0);
    let mut times = Vec::new();
    let mut most = 0;
    let (mut events, mut patches, mut change_ticks, mut away) = (0.0, 0.0, 0, 0.0);
    for k in 0..o.changes {
        let version = format!("2.4.{}", k + 1);
        let (before, cpu_before) = (request_counts(c), common::cpu_ticks(apiserver));
        let stored = storage_writes(c);
        let t = change(&rt, &configmaps, &gates, &version);
        most = most.max(burst(&t));
        times.extend(t);
        // Reporting follows the promotion: wait until it has reached the API server, and the
        // trial has ended in the record.
        let mut d = reported(c, &before, n as f64);
        // Every pod's report stored, the ones turned away and tried again included.
        pod_writes += pods_stored(c, &stored, n);
        if !o.trial.is_zero() {
            recorded(c, &rt, &configmaps, &before, &version, n);
            d = delta(&request_counts(c), &before);
            let (w, x) = record_writes(&d, 1.0);
            record += w;
            conflicts += x;
        }
        if o.trial.is_zero() {
            d = delta(&request_counts(c), &before);
        }
        let (e, p) = writes(&d);
        events += e;
        patches += p;
        away += turned_away(&d);
        change_ticks += common::cpu_ticks(apiserver) - cpu_before;
    }
    eprintln!("N={n}: changes done in {:?}", t_changes.elapsed());
    let changes = o.changes.max(1) as f64;
    let rss: Vec<u64> = gates
        .iter()
        .map(|g| common::status_kb(g.pid(), "VmRSS"))
        .collect();
    let row = Row {
        n,
        p50_ms: quantile(&mut times, 0.5),
        p99_ms: quantile(&mut times, 0.99),
        idle_per_sidecar_min: total(&idle) / n as f64 / minutes,
        events_per_change: events / changes,
        patches_per_change: patches / changes,
        turned_away_per_change: away / changes,
        watches,
        record_writes_per_change: (!o.trial.is_zero()).then(|| record / o.changes.max(1) as f64),
        record_conflicts_per_change: conflicts / o.changes.max(1) as f64,
        pod_writes_per_change: pod_writes / o.changes.max(1) as f64,
        rss_kib: rss.iter().sum::<u64>() as f64 / n as f64,
        apiserver_idle_cpu_ms_min: idle_ticks as f64 * 10.0 / minutes,
        apiserver_change_cpu_ms: change_ticks as f64 * 10.0 / changes,
        apiserver_rss_kib: common::status_kb(apiserver, "VmRSS"),
        etcd_rss_kib: etcd.map_or(0, |p| common::status_kb(p, "VmRSS")),
        volume: Volume::default(),
        idle_by_request: idle,
        burst: most,
        spread: None,
    };
    let spread = (!o.spread.is_zero()).then(|| {
        let text = format!("{}s", o.spread.as_secs());
        eprintln!(
            "N={n}: {} changes with a {text} reload spread...",
            o.changes
        );
        for (i, g) in gates.iter().enumerate() {
            common::write_annotations(
                &tmp.path().join(format!("s{i}/podinfo")),
                &[("confgate.io/reload-spread", &text)],
            );
            common::wait_for("the spread in force", DEADLINE, || {
                g.log_text()
                    .contains("annotation=confgate.io/reload-spread")
                    .then_some(())
            });
        }
        let (mut times, mut most) = (Vec::new(), 0);
        for k in 0..o.changes {
            let t = change(&rt, &configmaps, &gates, &format!("2.5.{k}"));
            most = most.max(burst(&t));
            times.extend(t);
        }
        Spread {
            p50_ms: quantile(&mut times, 0.5),
            p99_ms: quantile(&mut times, 0.99),
            max_ms: times.iter().copied().fold(0.0, f64::max),
            burst: most,
        }
    });
    // No controller manager runs, so a deleted namespace would stay Terminating: it is left as it is.
    drop(gates);
    let volume = if o.api_only {
        Volume::default()
    } else {
        volume_fleet(c, n, o, &ns, &kubeconfig, tmp.path(), apiserver)
    };
    Row {
        volume,
        spread,
        ..row
    }
}

/// `n` sidecars in volume mode (kubelet-style volumes), each reporting on its pod `web-I` as the
/// sidecar ServiceAccount and reloading a loopback sink: propagation from each volume's `..data`
/// swap to its promotion, the writes and API-server CPU per change, and RSS after the changes.
fn volume_fleet(
    c: &server::Cluster,
    n: usize,
    o: &Opts,
    ns: &str,
    kubeconfig: &Path,
    tmp: &Path,
    apiserver: u32,
) -> Volume {
    eprintln!("N={n}: {n} sidecars in volume mode, reporting...");
    let sink = common::Sink::start(false);
    let url = sink.url();
    let start = request_counts(c);
    let body = |v: &str| format!("schemaVersion: {v}\n");
    let vols: Vec<(common::Volume, Gate)> = (0..n)
        .map(|i| {
            let dir = tmp.join(format!("v{i}"));
            let vol = common::Volume::new(dir.join("incoming"));
            vol.write(&[("config.yaml", body("2.4.0").as_bytes())])
                .expect("volume");
            let path = |p: &str| dir.join(p).to_string_lossy().into_owned();
            let (watch, promoted, ann) = (
                vol.dir.to_string_lossy().into_owned(),
                path("promoted"),
                path("podinfo/annotations"),
            );
            let args = [
                "--watch",
                &watch,
                "--promote-to",
                &promoted,
                "--annotations",
                &ann,
                "--accepts",
                ACCEPTS,
                "--version-from",
                VERSION_FROM,
                "--reload",
                &url,
            ];
            let pod = format!("web-{i}");
            let kc = kubeconfig.to_string_lossy();
            let env = [
                ("KUBECONFIG", &*kc),
                ("POD_NAME", &pod),
                ("POD_NAMESPACE", ns),
            ];
            let g = sidecar(&args, &env, &dir.join("confgate.log"));
            (vol, g)
        })
        .collect();
    for (_, g) in &vols {
        g.wait_active("2.4.0");
    }
    reported(c, &start, n as f64);
    let (mut times, mut events, mut patches, mut ticks, mut away) = (Vec::new(), 0.0, 0.0, 0, 0.0);
    for k in 0..o.changes {
        let version = format!("2.6.{k}");
        let (before, cpu_before) = (request_counts(c), common::cpu_ticks(apiserver));
        let written: Vec<jiff::Timestamp> = vols
            .iter()
            .map(|(vol, _)| {
                let t = jiff::Timestamp::now();
                vol.write(&[("config.yaml", body(&version).as_bytes())])
                    .expect("volume");
                t
            })
            .collect();
        for ((_, g), t0) in vols.iter().zip(&written) {
            let s = g.wait_active(&version);
            let since: jiff::Timestamp = s["active"]["since"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("active.since");
            times.push(since.duration_since(*t0).as_secs_f64() * 1e3);
        }
        let d = reported(c, &before, n as f64);
        let (e, p) = writes(&d);
        events += e;
        patches += p;
        away += turned_away(&d);
        ticks += common::cpu_ticks(apiserver) - cpu_before;
    }
    let changes = o.changes.max(1) as f64;
    Volume {
        p50_ms: quantile(&mut times, 0.5),
        p99_ms: quantile(&mut times, 0.99),
        events_per_change: events / changes,
        patches_per_change: patches / changes,
        turned_away_per_change: away / changes,
        apiserver_change_cpu_ms: ticks as f64 * 10.0 / changes,
        rss_kib: vols
            .iter()
            .map(|(_, g)| common::status_kb(g.pid(), "VmRSS"))
            .sum::<u64>() as f64
            / n as f64,
    }
}

fn main() {
    let o = opts();
    if ["ETCD_BIN", "KUBE_APISERVER_BIN"]
        .iter()
        .any(|v| std::env::var_os(v).is_none_or(|p| p.is_empty()))
    {
        println!("fleet bench not run: set ETCD_BIN and KUBE_APISERVER_BIN");
        return;
    }
    let c = server::cluster();
    let dir = c.dir.to_string_lossy().into_owned();
    let apiserver = find_pid(&["kube-apiserver", &dir]).expect("the kube-apiserver process");
    let etcd = find_pid(&["etcd", "etcd-data"]);
    let rss0 = common::status_kb(apiserver, "VmRSS");
    let mut rows = Vec::new();
    for &n in &o.sizes {
        rows.push(fleet(c, n, &o, apiserver, etcd));
    }

    println!(
        "\nconfgate fleet bench: kube-apiserver {}, {} change(s) per size, {} s idle windows; \
         kube-apiserver RSS before any fleet {rss0} KiB",
        c.version,
        o.changes,
        o.idle.as_secs()
    );
    println!(
        "\nAPI mode (one watch each, a reload target each, a {} s known-good trial):",
        o.trial.as_secs()
    );
    println!(
        "{:>4} | {:>9} | {:>9} | {:>10} | {:>7} | {:>11} | {:>8} | {:>9} | {:>9} | {:>9} | {:>9} | {:>10} | {:>10} | {:>11} | {:>10} | {:>9}",
        "N",
        "p50 ms",
        "p99 ms",
        "req/sc/min",
        "watches",
        "writes/pod",
        "away/ch",
        "events/ch",
        "patch/ch",
        "pods st/ch",
        "record/ch",
        "409/ch",
        "RSS/sc",
        "api CPU/min",
        "api CPU/ch",
        "api RSS"
    );
    for r in &rows {
        println!(
            "{:>4} | {:>9.0} | {:>9.0} | {:>10.2} | {:>7.0} | {:>11.2} | {:>8.1} | {:>9.1} | {:>9.1} | {:>10.1} | {:>9} | {:>6.1} | {:>6.1} MiB | {:>8.0} ms | {:>7.0} ms | {:>5.0} MiB",
            r.n,
            r.p50_ms,
            r.p99_ms,
            r.idle_per_sidecar_min,
            r.watches,
            (r.events_per_change + r.pod_writes_per_change) / r.n as f64,
            r.turned_away_per_change,
            r.events_per_change,
            r.patches_per_change,
            r.pod_writes_per_change,
            r.record_writes_per_change
                .map_or("-".to_owned(), |w| format!("{w:.1}")),
            r.record_conflicts_per_change,
            r.rss_kib / 1024.0,
            r.apiserver_idle_cpu_ms_min,
            r.apiserver_change_cpu_ms,
            r.apiserver_rss_kib as f64 / 1024.0
        );
    }
    if !o.api_only {
        println!(
            "\nvolume mode, reporting on its pod, a reload target each (the recommended deployment):"
        );
        println!(
            "{:>4} | {:>9} | {:>9} | {:>11} | {:>8} | {:>9} | {:>9} | {:>10} | {:>10}",
            "N",
            "p50 ms",
            "p99 ms",
            "writes/pod",
            "away/ch",
            "events/ch",
            "patch/ch",
            "api CPU/ch",
            "RSS/sc"
        );
        for r in &rows {
            let v = &r.volume;
            println!(
                "{:>4} | {:>9.1} | {:>9.1} | {:>11.2} | {:>8.1} | {:>9.1} | {:>9.1} | {:>7.0} ms | {:>6.1} MiB",
                r.n,
                v.p50_ms,
                v.p99_ms,
                (v.events_per_change + v.patches_per_change) / r.n as f64,
                v.turned_away_per_change,
                v.events_per_change,
                v.patches_per_change,
                v.apiserver_change_cpu_ms,
                v.rss_kib / 1024.0
            );
        }
    }
    println!(
        "\nreload spread {} s (through each pod's annotations), {} change(s) per size:",
        o.spread.as_secs(),
        o.changes
    );
    println!(
        "{:>4} | {:>6} | {:>9} | {:>9} | {:>9} | {:>14}",
        "N", "spread", "p50 ms", "p99 ms", "max ms", "most in 1 s"
    );
    for r in &rows {
        println!(
            "{:>4} | {:>6} | {:>9.0} | {:>9.0} | {:>9} | {:>14}",
            r.n, "off", r.p50_ms, r.p99_ms, "", r.burst
        );
        if let Some(s) = &r.spread {
            println!(
                "{:>4} | {:>5}s | {:>9.0} | {:>9.0} | {:>9.0} | {:>14}",
                r.n,
                o.spread.as_secs(),
                s.p50_ms,
                s.p99_ms,
                s.max_ms,
                s.burst
            );
        }
    }
    let series = [
        (
            "p99 propagation, ms",
            rows.iter().map(|r| (r.n, r.p99_ms)).collect::<Vec<_>>(),
        ),
        (
            "kube-apiserver CPU per change, ms",
            rows.iter()
                .map(|r| (r.n, r.apiserver_change_cpu_ms))
                .collect(),
        ),
    ];
    for (title, points) in &series {
        println!("\n{}", chart::ascii(title, points, 40));
    }
    let svg = o.json.with_extension("svg");
    std::fs::write(&svg, chart::svg(&series)).expect("write the SVG chart");

    let json_rows: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({"n": r.n, "propagation_p50_ms": r.p50_ms, "propagation_p99_ms": r.p99_ms,
                   "idle_requests_per_sidecar_per_min": r.idle_per_sidecar_min,
                   "idle_requests_by_kind": r.idle_by_request,
                   "events_per_change": r.events_per_change,
                   "status_patches_per_change": r.patches_per_change,
                   "rss_kib_per_sidecar": r.rss_kib,
                   "apiserver_idle_cpu_ms_per_min": r.apiserver_idle_cpu_ms_min,
                   "apiserver_cpu_ms_per_change": r.apiserver_change_cpu_ms,
                   "apiserver_rss_kib": r.apiserver_rss_kib, "etcd_rss_kib": r.etcd_rss_kib,
                   "configmap_watches": r.watches,
                   "writes_per_pod_per_change": (r.events_per_change + r.pod_writes_per_change) / r.n as f64,
                   "pods_stored_per_change": r.pod_writes_per_change,
                   "known_good_record_writes_per_change": r.record_writes_per_change,
                   "known_good_record_conflicts_per_change": r.record_conflicts_per_change,
                   "report_requests_turned_away_per_change": r.turned_away_per_change,
                   "volume_mode": json!({
                       "propagation_p50_ms": r.volume.p50_ms, "propagation_p99_ms": r.volume.p99_ms,
                       "events_per_change": r.volume.events_per_change,
                       "status_patches_per_change": r.volume.patches_per_change,
                       "writes_per_pod_per_change": (r.volume.events_per_change + r.volume.patches_per_change) / r.n as f64,
                       "apiserver_cpu_ms_per_change": r.volume.apiserver_change_cpu_ms,
                       "report_requests_turned_away_per_change": r.volume.turned_away_per_change,
                       "rss_kib_per_sidecar": r.volume.rss_kib}),
                   "most_promotions_in_one_second": r.burst,
                   "spread": r.spread.as_ref().map(|s| json!({
                       "propagation_p50_ms": s.p50_ms, "propagation_p99_ms": s.p99_ms,
                       "propagation_max_ms": s.max_ms, "most_promotions_in_one_second": s.burst}))})
        })
        .collect();
    let report = json!({"apiserver": c.version, "idle_secs": o.idle.as_secs(),
                        "changes": o.changes, "apiserver_rss_kib_before": rss0,
                        "spread_secs": o.spread.as_secs(), "trial_secs": o.trial.as_secs(), "rows": json_rows});
    std::fs::write(
        &o.json,
        serde_json::to_string_pretty(&report).expect("json"),
    )
    .expect("write JSON");
    println!("\nJSON: {}\nSVG: {}", o.json.display(), svg.display());
}
