//! Edit to running, on a real node: from a write of a ConfigMap to the component running it, the figure
//! a user feels. One ConfigMap, three pods on the same kubelet, each change measured in all three from
//! the same write: confgate in API mode (it watches the ConfigMap through the API and promotes into an
//! emptyDir), confgate in volume mode (the shipped native sidecar: the kubelet's ConfigMap volume, then
//! promotion), and configmap-reload v0.14.0 in volume mode (the component reads the ConfigMap volume
//! itself and configmap-reload POSTs its `/reload`). Each pod runs the example component, and "running
//! it" is the component's own answer on `GET /config-version`, polled over loopback (every 2 ms for
//! the first 2 s of a change, every 20 ms after). The clock starts at the write (a merge patch from a
//! connected client, as in benches/fleet.rs), not at a kubectl process starting up.
//!
//! The kubelet runs at the test bed's settings (`syncFrequency: 1s`, `Watch`), then is restarted at its
//! own defaults (`syncFrequency: 1m`): a volume catches up with a ConfigMap only when the kubelet syncs
//! the pod, so a reloader in volume mode waits for that, where API mode does not.
//!
//! `cargo bench --features api --bench edit_to_running [-- --quick | --fast N --default N]`, as root
//! like the node suite, with the node's environment (docs/development.md: `KUBELET_BIN`, `CONTAINERD_BIN`, `RUNC_BIN`,
//! `CONFGATE_IMAGES`, `ETCD_BIN`, `KUBE_APISERVER_BIN`) and `CONFIGMAP_RELOAD_BIN`. Without
//! `KUBELET_BIN` it says it skipped and exits 0 (as benches/fleet.rs does without its servers); with it,
//! anything else missing fails naming it. `--quick` is the test bed's settings only, a few changes (CI).
//! Figures are printed, never asserted.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/cluster/node/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../tests/cluster/server.rs"]
#[allow(dead_code)]
mod server;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use harness::{KubeletSync, Node};
use serde_json::{Value, json};

/// The ConfigMap every pod follows; the name API mode's shipped Role allows.
const CM: &str = "webhook-config";
const RELOADER_IMAGE: &str = "localhost/confgate-bench/configmap-reload:v0.14.0";
/// Three pods starting on a loaded 2-core machine.
const START: Duration = Duration::from_secs(180);

impl server::Cluster {
    /// `kubectl` as the admin, with a discovery cache inside the cluster's dir.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig")
            .arg(&self.admin)
            .arg("--cache-dir")
            .arg(self.dir.join("kubectl-cache"));
        cmd
    }

    pub fn kubectl_with(&self, args: &[&str], stdin: &str) -> Output {
        let mut cmd = self.kubectl();
        cmd.args(args);
        common::output_with_stdin(cmd, stdin)
    }

    /// `kubectl ARGS`'s stdout; a panic with its stderr when it fails.
    pub fn kubectl_ok(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_with(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

struct Opts {
    /// Each kubelet setting run, with its number of changes.
    runs: Vec<(KubeletSync, usize)>,
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo bench --features api --bench edit_to_running -- [--quick] [--fast N] [--default N] (N = 0 skips that setting)"
    );
    std::process::exit(64)
}

fn opts() -> Opts {
    // 30 changes at 1 s sync take about two minutes; at the default sync a change waits for a pause
    // of up to 90 s and then takes up to 90 s to reach a volume, so 8 keep a full run within about
    // 20 minutes.
    let (mut fast, mut default) = (30, 8);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage())
        };
        match a.as_str() {
            "--bench" => {}
            "--quick" => (fast, default) = (5, 0),
            "--fast" => fast = val(),
            "--default" => default = val(),
            _ => usage(),
        }
    }
    let runs = [(KubeletSync::Fast, fast), (KubeletSync::Default, default)]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    Opts { runs }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arrangement {
    Api,
    Volume,
    Reloader,
}

const ARRANGEMENTS: [Arrangement; 3] =
    [Arrangement::Api, Arrangement::Volume, Arrangement::Reloader];

impl Arrangement {
    fn label(self) -> &'static str {
        match self {
            Arrangement::Api => "confgate, API mode",
            Arrangement::Volume => "confgate, volume mode",
            Arrangement::Reloader => "configmap-reload, volume mode",
        }
    }

    /// The pod's ConfigMap volume, whose `..data` the kubelet swaps (API mode has none).
    fn volume(self) -> Option<&'static str> {
        match self {
            Arrangement::Api => None,
            Arrangement::Volume => Some("incoming"),
            Arrangement::Reloader => Some("config"),
        }
    }

    fn pod(self) -> &'static str {
        match self {
            Arrangement::Api => "api",
            Arrangement::Volume => "volume",
            Arrangement::Reloader => "reloader",
        }
    }
}

fn sync_label(s: KubeletSync) -> &'static str {
    match s {
        KubeletSync::Fast => "test bed (syncFrequency: 1s, Watch)",
        KubeletSync::Default => "kubelet defaults (syncFrequency: 1m, Watch)",
    }
}

fn config(version: &str) -> String {
    format!("schemaVersion: \"{version}\"\ngreeting: hello\n")
}

/// A shipped Deployment's pod template as a Pod on the node, with what a node without a CNI or a
/// Service needs (as tests/cluster/node does): `hostNetwork`, ports of its own, the API server's
/// address for the in-cluster client, and the probes' period at 1 s. Everything else is as shipped.
fn confgate_pod(n: &Node, deployment: &Value, ns: &str, name: &str, component_port: u16) -> Value {
    let mut template = deployment["spec"]["template"].clone();
    let meta = &mut template["metadata"];
    meta["name"] = json!(name);
    meta["namespace"] = json!(ns);
    meta["annotations"]["confgate.io/reload"] =
        json!(format!("http://127.0.0.1:{component_port}/reload"));
    let spec = &mut template["spec"];
    spec["nodeName"] = json!(harness::NODE);
    spec["hostNetwork"] = json!(true);
    let api_port = n.cluster.server.rsplit(':').next().unwrap().to_owned();
    let gate = &mut spec["initContainers"][0];
    gate["image"] = json!(n.image("confgate"));
    gate.as_object_mut().unwrap().remove("ports");
    let env = gate["env"].as_array_mut().unwrap();
    env.push(json!({"name": "CONFGATE_LISTEN", "value": format!("127.0.0.1:{}", n.port())}));
    env.push(json!({"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}));
    env.push(json!({"name": "KUBERNETES_SERVICE_PORT", "value": api_port}));
    gate["startupProbe"]["periodSeconds"] = json!(1);
    gate["readinessProbe"]["periodSeconds"] = json!(1);
    let component = &mut spec["containers"][0];
    component["image"] = json!(n.image("example-component"));
    component["args"] = json!([
        "/etc/component/config",
        format!("127.0.0.1:{component_port}")
    ]);
    // Its httpGet probe would dial the node's own address; the bench reads the component itself.
    let c = component.as_object_mut().unwrap();
    c.remove("ports");
    c.remove("readinessProbe");
    for v in spec["volumes"].as_array_mut().unwrap() {
        if v["name"] == "incoming" {
            v["configMap"]["name"] = json!(CM);
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]})
}

/// The component reading the ConfigMap volume itself, and configmap-reload beside it POSTing its
/// `/reload` when the kubelet swaps `..data`: how configmap-reload is deployed.
fn reloader_pod(n: &Node, ns: &str, component_port: u16) -> Value {
    let mount = json!([{"name": "config", "mountPath": "/etc/component/config", "readOnly": true}]);
    let restricted = json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]}});
    json!({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": Arrangement::Reloader.pod(), "namespace": ns},
    "spec": {
        "nodeName": harness::NODE, "hostNetwork": true, "automountServiceAccountToken": false,
        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                            "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {"name": "component", "image": n.image("example-component"),
             "args": ["/etc/component/config", format!("127.0.0.1:{component_port}")],
             "securityContext": restricted, "volumeMounts": mount},
            {"name": "configmap-reload", "image": RELOADER_IMAGE,
             "args": ["--volume-dir=/etc/component/config",
                      format!("--webhook-url=http://127.0.0.1:{component_port}/reload"),
                      format!("--web.listen-address=127.0.0.1:{}", n.port())],
             "securityContext": restricted, "volumeMounts": mount},
        ],
        "volumes": [{"name": "config", "configMap": {"name": CM}}],
    }})
}

/// A pod of the run: its arrangement, its component's port, and for a volume the host path of the
/// `..data` link the kubelet swaps.
struct Pod {
    arrangement: Arrangement,
    port: u16,
    data: Option<PathBuf>,
}

/// The three pods in `ns`, on the ConfigMap at `version`, each running it.
fn start_pods(n: &Node, ns: &str, version: &str) -> Vec<Pod> {
    n.namespace(ns, &[]);
    // `kubectl apply -k manifests/api-mode` moved to this namespace, and the native sidecar's Role.
    let built = n
        .kubectl(&[
            "kustomize",
            concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/api-mode"),
        ])
        .replace("webhook-system", ns);
    let docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&built)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null() && d["kind"] != "Namespace")
        .collect();
    let (deployments, rest): (Vec<Value>, Vec<Value>) =
        docs.into_iter().partition(|d| d["kind"] == "Deployment");
    n.apply(&json!({"apiVersion": "v1", "kind": "List", "items": rest}));
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/native-sidecar/rbac.yaml"
    ))
    .unwrap();
    n.cluster.kubectl_ok(&["apply", "-n", ns, "-f", "-"], &rbac);
    n.apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": CM, "namespace": ns},
                    "data": {"config.yaml": config(version)}}));
    let sidecar: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/native-sidecar/deployment.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut pods = Vec::new();
    for a in ARRANGEMENTS {
        let port = n.port();
        let pod = match a {
            Arrangement::Api => confgate_pod(n, &deployments[0], ns, a.pod(), port),
            Arrangement::Volume => confgate_pod(n, &sidecar, ns, a.pod(), port),
            Arrangement::Reloader => reloader_pod(n, ns, port),
        };
        n.apply(&pod);
        pods.push((a, port));
    }
    for (a, port) in &pods {
        let end = Instant::now() + START;
        while running(*port).as_deref() != Some(version) {
            if Instant::now() > end {
                let pod = n.pod(ns, a.pod());
                panic!(
                    "{} never ran {version} at its start; its pod's status: {}",
                    a.label(),
                    pod["status"]
                );
            }
            // Polling, not synchronising: the next look at a condition with a deadline.
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    pods.into_iter()
        .map(|(arrangement, port)| {
            let data = arrangement.volume().map(|v| {
                let uid = n.pod(ns, arrangement.pod())["metadata"]["uid"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                n.dir
                    .join("kubelet-root/pods")
                    .join(uid)
                    .join("volumes/kubernetes.io~configmap")
                    .join(v)
                    .join("..data")
            });
            Pod {
                arrangement,
                port,
                data,
            }
        })
        .collect()
}

/// The version the component at `port` runs, by its own word.
fn running(port: u16) -> Option<String> {
    match common::get(port, "/config-version") {
        Some((200, body)) => Some(body.trim().to_owned()),
        _ => None,
    }
}

/// From `t0` until the kubelet swapped the pod's `..data` (None for API mode), and until its
/// component runs `version`; None for the latter past `deadline`.
fn wait_running(
    pod: &Pod,
    version: &str,
    t0: Instant,
    deadline: Duration,
) -> (Option<Duration>, Option<Duration>) {
    let link = |p: &PathBuf| std::fs::read_link(p).ok();
    let before = pod.data.as_ref().map(link);
    let mut swapped = None;
    loop {
        if let (None, Some(p), Some(before)) = (swapped, &pod.data, &before)
            && link(p) != *before
        {
            swapped = Some(t0.elapsed());
        }
        if running(pod.port).as_deref() == Some(version) {
            // A swap seen after the component's reload was seen no later than the reload.
            let ran = t0.elapsed();
            return (pod.data.as_ref().map(|_| swapped.unwrap_or(ran)), Some(ran));
        }
        let waited = t0.elapsed();
        if waited > deadline {
            return (swapped, None);
        }
        // Fine while API mode's tens of milliseconds are in play; coarser over a kubelet's sync,
        // where 20 ms is noise and a 2 ms poll of three components would load the machine.
        let every = if waited < Duration::from_secs(2) {
            2
        } else {
            20
        };
        std::thread::sleep(Duration::from_millis(every));
    }
}

/// One arrangement's figures at one kubelet setting.
struct Row {
    sync: KubeletSync,
    label: &'static str,
    changes: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    /// When the kubelet swapped the volume's `..data`, for the arrangements that read one.
    swap_p50: Option<Duration>,
}

/// `q` of `sorted` by nearest rank.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn show(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.0} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// The machine, as the figures are quoted with.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} x {model}, Linux {}", kernel.trim())
}

fn main() {
    let o = opts();
    if std::env::var_os("KUBELET_BIN").is_none_or(|v| v.is_empty()) {
        eprintln!(
            "edit_to_running: skipped: KUBELET_BIN is not set (the node's environment is in docs/development.md)"
        );
        return;
    }
    let reloader = std::env::var_os("CONFIGMAP_RELOAD_BIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "CONFIGMAP_RELOAD_BIN does not name a configmap-reload binary (v0.14.0, which .ci/setup builds into .ci/venv/bin)"
            )
        });
    let n = harness::node();
    n.static_image(RELOADER_IMAGE, &reloader, "/usr/local/bin/configmap-reload")
        .unwrap_or_else(|e| panic!("the configmap-reload image: {e}"));
    let rt = server::runtime();
    let client = rt.block_on(server::client(&n.cluster.admin));
    println!("edit to running: {}", machine());
    println!(
        "confgate images: {}",
        std::env::var("CONFGATE_IMAGES").unwrap_or_default()
    );
    let mut table = Vec::new();
    for (round, &(sync, changes)) in o.runs.iter().enumerate() {
        n.restart_kubelet(sync)
            .unwrap_or_else(|e| panic!("restart the kubelet: {e}"));
        let ns = format!("edit-to-running-{round}");
        let pods = start_pods(n, &ns, "2.4.1");
        let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client.clone(), &ns);
        // A change reaches a volume at the pod's next sync: up to 1.5 s, or 90 s, after the write.
        let deadline = match sync {
            KubeletSync::Fast => Duration::from_secs(60),
            KubeletSync::Default => Duration::from_secs(240),
        };
        // The kubelet resyncs a pod `syncFrequency` after its last sync, plus up to half again.
        let period = match sync {
            KubeletSync::Fast => Duration::from_millis(1_500),
            KubeletSync::Default => Duration::from_secs(90),
        };
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); pods.len()];
        let mut swaps: Vec<Vec<Duration>> = vec![Vec::new(); pods.len()];
        println!(
            "\n{}: {changes} changes, each written once and timed in all three",
            sync_label(sync)
        );
        for i in 1..=changes {
            // A user's edit lands at any point of each pod's sync period. Written the moment the
            // previous change arrived, it would land just after the slowest pod's sync and find that
            // pod a whole period away every time: so a pause drawn over one period comes first.
            std::thread::sleep(Duration::from_millis(fastrand::u64(
                ..period.as_millis() as u64,
            )));
            let version = format!("2.5.{i}");
            let patch = json!({"data": {"config.yaml": config(&version)}});
            let t0 = Instant::now();
            rt.block_on(configmaps.patch(
                CM,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            ))
            .expect("patch the ConfigMap");
            let took: Vec<(Option<Duration>, Option<Duration>)> = std::thread::scope(|s| {
                let waits: Vec<_> = pods
                    .iter()
                    .map(|pod| {
                        let version = &version;
                        s.spawn(move || wait_running(pod, version, t0, deadline))
                    })
                    .collect();
                waits.into_iter().map(|w| w.join().unwrap()).collect()
            });
            let mut line = format!("  change {i:>2}:");
            for (k, (pod, (swap, ran))) in pods.iter().zip(&took).enumerate() {
                let a = pod.arrangement;
                let ran = ran.unwrap_or_else(|| {
                    panic!(
                        "{} did not run {version} within {deadline:?} of the write (the kubelet's swap: {swap:?}); kubelet log ends:\n{}",
                        a.label(),
                        server::log_tail(&n.dir.join("kubelet.log"))
                    )
                });
                times[k].push(ran);
                line += &format!("  {} {}", a.pod(), show(ran));
                if let Some(swap) = swap {
                    swaps[k].push(*swap);
                    line += &format!(" (swap {})", show(*swap));
                }
            }
            println!("{line}");
        }
        for ((pod, mut t), mut w) in pods.iter().zip(times).zip(swaps) {
            t.sort();
            w.sort();
            table.push(Row {
                sync,
                label: pod.arrangement.label(),
                changes: t.len(),
                p50: percentile(&t, 0.5),
                p99: percentile(&t, 0.99),
                max: t[t.len() - 1],
                swap_p50: (!w.is_empty()).then(|| percentile(&w, 0.5)),
            });
        }
        // The pods go, so the next setting's pods have the node to themselves.
        let out = n.cluster.kubectl_with(
            &["delete", "pods", "--all", "-n", &ns, "--timeout=120s"],
            "",
        );
        if !out.status.success() {
            eprintln!(
                "edit_to_running: the pods of {ns} were not deleted: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    println!(
        "\nfrom the ConfigMap's write to the component running it (its own GET /config-version):"
    );
    println!(
        "{:<46} {:<31} {:>7} {:>9} {:>9} {:>9} {:>16}",
        "kubelet", "arrangement", "changes", "p50", "p99", "max", "kubelet swap p50"
    );
    for r in table {
        println!(
            "{:<46} {:<31} {:>7} {:>9} {:>9} {:>9} {:>16}",
            sync_label(r.sync),
            r.label,
            r.changes,
            show(r.p50),
            show(r.p99),
            show(r.max),
            r.swap_p50.map_or_else(|| "-".into(), show)
        );
    }
}
