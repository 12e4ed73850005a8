//! confgate under a real kubelet: the shipped native-sidecar pod (its images built offline and
//! imported into containerd) run on a node of the suite's own, each kubelet-facing promise checked on
//! real pods: start gating by the startup probe, the kubelet's own ConfigMap swap promoted and reloaded,
//! holds and readiness as `kubectl` shows them, live annotations, the kubelet restarting confgate, a
//! Secret source, Pod Security and the projected token.
//!
//! Every test is `#[ignore]`d with what it needs: a run with `--ignored` where a binary is missing fails
//! saying which, so a missing node never passes as a tested one.

mod captured;
mod chart;
mod harness;
mod known_good;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use ::confgate::rollout::{Bucket, Percent};

use crate::common::get;
use harness::{Node, condition, condition_is, container, node, running};

/// A pod's start on a loaded 2-core machine: an image unpacked, a sandbox, a sidecar, probes.
const START: Duration = Duration::from_secs(90);
/// A ConfigMap change through the kubelet (`syncFrequency: 1s`, `Watch`), a promotion and a reload.
const CHANGE: Duration = Duration::from_secs(60);

fn config(version: &str) -> String {
    format!("schemaVersion: \"{version}\"\ngreeting: hello\n")
}

/// The shipped native-sidecar Deployment's pod template as a Pod named `name` on the node, with what a
/// node without a CNI or a Service needs: `hostNetwork` (so listeners get ports of their own, and the
/// reload URL and the component's address follow), the API server's address for the in-cluster client,
/// and faster probes. Everything else (images aside) is the shipped manifest as it is.
struct PodSpec {
    ns: String,
    name: String,
    configmap: String,
    /// The component's port and confgate's.
    component_port: u16,
    gate_port: u16,
    annotations: Vec<(String, String)>,
    /// More environment for confgate's container.
    env: Vec<(String, String)>,
    /// The Deployment whose pod template is run (the shipped native-sidecar one unless said).
    deployment: Option<Value>,
}

impl PodSpec {
    fn new(n: &Node, ns: &str, name: &str) -> PodSpec {
        PodSpec {
            ns: ns.into(),
            name: name.into(),
            configmap: format!("{name}-config"),
            component_port: n.port(),
            gate_port: n.port(),
            annotations: Vec::new(),
            env: Vec::new(),
            deployment: None,
        }
    }

    /// Only the file watch finds a change in the test's minutes: the safety re-read (30 s by default)
    /// would otherwise find a change whose event confgate missed, and the test would pass without it.
    fn watch_only(mut self) -> PodSpec {
        self.env
            .push(("CONFGATE_RESYNC_INTERVAL".into(), "1h".into()));
        self
    }

    /// More environment for confgate's container: a container-spec setting.
    fn env(mut self, k: &str, v: &str) -> PodSpec {
        self.env.push((k.into(), v.into()));
        self
    }

    fn annotate(mut self, k: &str, v: &str) -> PodSpec {
        self.annotations.push((k.into(), v.into()));
        self
    }

    fn object(&self, n: &Node) -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/native-sidecar/deployment.yaml"
        );
        let deployment: Value = match &self.deployment {
            Some(d) => d.clone(),
            None => serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap(),
        };
        let mut template = deployment["spec"]["template"].clone();
        let meta = &mut template["metadata"];
        meta["name"] = json!(self.name);
        meta["namespace"] = json!(self.ns);
        let annotations = meta["annotations"].as_object_mut().unwrap();
        annotations.insert(
            "confgate.io/reload".into(),
            json!(format!("http://127.0.0.1:{}/reload", self.component_port)),
        );
        for (k, v) in &self.annotations {
            annotations.insert(k.clone(), json!(v));
        }
        let spec = &mut template["spec"];
        spec["nodeName"] = json!(harness::NODE);
        spec["hostNetwork"] = json!(true);
        let api_port = n.cluster.server.rsplit(':').next().unwrap().to_owned();
        let gate = &mut spec["initContainers"][0];
        gate["image"] = json!(n.image("confgate"));
        gate.as_object_mut().unwrap().remove("ports");
        let env = gate["env"].as_array_mut().unwrap();
        env.push(
            json!({"name": "CONFGATE_LISTEN", "value": format!("127.0.0.1:{}", self.gate_port)}),
        );
        env.push(json!({"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}));
        env.push(json!({"name": "KUBERNETES_SERVICE_PORT", "value": api_port}));
        for (k, v) in &self.env {
            env.push(json!({"name": k, "value": v}));
        }
        gate["startupProbe"]["periodSeconds"] = json!(1);
        gate["readinessProbe"]["periodSeconds"] = json!(1);
        let component = &mut spec["containers"][0];
        component["image"] = json!(n.image("example-component"));
        component["args"] = json!([
            "/etc/component/config",
            format!("127.0.0.1:{}", self.component_port)
        ]);
        // Its httpGet probe would dial the node's own address; the test reads the component itself.
        let c = component.as_object_mut().unwrap();
        c.remove("ports");
        c.remove("readinessProbe");
        for v in spec["volumes"].as_array_mut().unwrap() {
            if v["name"] == "incoming" {
                v["configMap"]["name"] = json!(self.configmap);
            }
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]})
    }

    fn configmap(&self, version: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": self.configmap, "namespace": self.ns},
               "data": {"config.yaml": config(version)}})
    }

    /// The version the component runs, asked over loopback.
    fn component_version(&self) -> Option<String> {
        match get(self.component_port, "/config-version") {
            Some((200, body)) => Some(body.trim().to_owned()),
            _ => None,
        }
    }
}

/// A namespace with the shipped RBAC of the native-sidecar manifest.
fn namespace(n: &Node, ns: &str, labels: &[(&str, &str)]) {
    n.namespace(ns, labels);
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/native-sidecar/rbac.yaml"
    ))
    .unwrap();
    n.cluster.kubectl_ok(&["apply", "-n", ns, "-f", "-"], &rbac);
}

/// The ends of the pod's container logs as the kubelet wrote them, for a failing test's message.
fn pod_logs(p: &PodSpec) -> String {
    let root = node().dir.join("pod-logs");
    let prefix = format!("{}_{}_", p.ns, p.name);
    let status = node().cluster.kubectl_with(
        &[
            "get",
            "pod",
            "-n",
            &p.ns,
            &p.name,
            "-o",
            "jsonpath={.status}",
        ],
        "",
    );
    let mut out = format!("status: {}\n", String::from_utf8_lossy(&status.stdout));
    let kubelet = std::fs::read_to_string(node().dir.join("kubelet.log")).unwrap_or_default();
    let about: Vec<&str> = kubelet
        .lines()
        .filter(|l| l.contains(&format!("{}/{}", p.ns, p.name)))
        .collect();
    out += &format!(
        "kubelet on the pod:\n{}\n",
        about[about.len().saturating_sub(8)..].join("\n")
    );
    for pod in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if !pod.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for c in std::fs::read_dir(pod.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            for f in std::fs::read_dir(c.path()).into_iter().flatten().flatten() {
                out += &format!(
                    "== {}\n{}\n",
                    f.path().display(),
                    crate::server::log_tail(&f.path())
                );
            }
        }
    }
    out
}

/// Waits until the component answers with `version`; the time it took.
fn wait_version(p: &PodSpec, version: &str, deadline: Duration) -> Duration {
    // The waits below are for a pod's start or a change: the pod must exist first.
    let start = Instant::now();
    let end = start + deadline;
    loop {
        if p.component_version().as_deref() == Some(version) {
            return start.elapsed();
        }
        assert!(
            Instant::now() < end,
            "the component never ran {version}; it runs {:?}; the pod's logs:\n{}",
            p.component_version(),
            pod_logs(p)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `kubectl get pod -o wide` with the node's own address named, not shown.
fn wide(n: &Node, p: &PodSpec, pod: &Value) -> String {
    let out = n.kubectl(&["get", "pod", "-n", &p.ns, &p.name, "-o", "wide"]);
    match pod["status"]["hostIP"].as_str() {
        Some(ip) => out.replace(ip, "NODE-IP"),
        None => out,
    }
}

fn describe(n: &Node, p: &PodSpec) -> String {
    n.kubectl(&["describe", "pod", "-n", &p.ns, &p.name])
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_too_new_config_keeps_the_component_from_starting_until_an_accepted_one_arrives() {
    let n = node();
    let ns = "node-start";
    namespace(n, ns, &[]);
    let p = PodSpec::new(n, ns, "start");
    n.apply(&p.configmap("3.0.0"));
    n.apply(&p.object(n));
    let pod = n.wait_pod(ns, &p.name, "confgate running", START, |pod| {
        running(pod, "confgate")
    });
    assert!(
        !running(&pod, "component"),
        "the component started on a too-new config"
    );
    let reason = harness_wait_text(n, &p, "Startup probe failed: no accepted config yet");
    assert!(reason.contains("3.0.0 is too-new"), "{reason}");
    let pod = n.pod(ns, &p.name);
    assert!(container(&pod, "component").is_some_and(|c| c["state"]["waiting"].is_object()));
    captured::capture("blocked start: kubectl get pod -o wide", &wide(n, &p, &pod));
    captured::capture(
        "blocked start: kubectl describe pod (Events)",
        &captured::events_of(&describe(n, &p)),
    );

    n.apply(&p.configmap("2.4.1"));
    let took = wait_version(&p, "2.4.1", CHANGE);
    eprintln!("node: an accepted config reached the blocked component in {took:?}");
    n.wait_pod(ns, &p.name, "the component running", START, |pod| {
        running(pod, "component")
    });
}

/// Waits until `kubectl describe pod` shows `needle`; that line.
fn harness_wait_text(n: &Node, p: &PodSpec, needle: &str) -> String {
    let end = Instant::now() + START;
    loop {
        let text = describe(n, p);
        if let Some(line) = text.lines().find(|l| l.contains(needle)) {
            return line.trim().to_owned();
        }
        assert!(
            Instant::now() < end,
            "kubectl describe pod never showed {needle:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn the_kubelets_own_configmap_swap_is_promoted_and_reloaded_and_a_too_new_one_held() {
    let n = node();
    let ns = "node-update";
    namespace(n, ns, &[]);
    let p = PodSpec::new(n, ns, "update").watch_only();
    n.apply(&p.configmap("2.4.1"));
    n.apply(&p.object(n));
    wait_version(&p, "2.4.1", START);

    n.apply(&p.configmap("2.5.0"));
    let took = wait_version(&p, "2.5.0", CHANGE);
    eprintln!("node: kubectl apply of a ConfigMap to the component's reload: {took:?}");

    n.apply(&p.configmap("3.0.0"));
    let pod = n.wait_pod(ns, &p.name, "config-current False", CHANGE, |pod| {
        condition_is(pod, "confgate.io/config-current", "False")
    });
    let current = condition(&pod, "confgate.io/config-current").unwrap();
    assert_eq!(current["reason"], "TooNew", "{current}");
    assert_eq!(p.component_version().as_deref(), Some("2.5.0"));
    // `hold` (the default): still Ready on the config in force.
    assert!(condition_is(&pod, "Ready", "True"), "{}", pod["status"]);
    let out = n.kubectl(&["get", "pod", "-n", ns, &p.name]);
    assert!(out.contains("2/2"), "{out}");
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn under_unready_a_held_update_takes_the_pod_out_of_ready_and_an_annotation_edit_follows_live() {
    let n = node();
    let ns = "node-unready";
    namespace(n, ns, &[]);
    let p = PodSpec::new(n, ns, "unready")
        .annotate("confgate.io/on-incompatible", "unready")
        .watch_only();
    n.apply(&p.configmap("2.4.1"));
    n.apply(&p.object(n));
    wait_version(&p, "2.4.1", START);
    n.wait_pod(ns, &p.name, "Ready", START, |pod| {
        condition_is(pod, "Ready", "True")
    });

    n.apply(&p.configmap("3.0.0"));
    n.wait_pod(ns, &p.name, "not Ready", CHANGE, |pod| {
        condition_is(pod, "Ready", "False")
    });
    let out = n.kubectl(&["get", "pod", "-n", ns, &p.name]);
    assert!(out.contains("1/2"), "{out}");
    let pod = n.pod(ns, &p.name);
    captured::capture(
        "hold under unready: kubectl get pod -o wide",
        &wide(n, &p, &pod),
    );
    let text = describe(n, &p);
    let conditions: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Conditions:"))
        .take_while(|l| !l.starts_with("Volumes:"))
        .collect();
    captured::capture(
        "hold under unready: kubectl describe pod (Conditions)",
        &conditions.join("\n"),
    );
    assert_eq!(p.component_version().as_deref(), Some("2.4.1"));

    // The component is upgraded in place: its accepted range is raised with `kubectl annotate`.
    n.kubectl(&[
        "annotate",
        "pod",
        "-n",
        ns,
        &p.name,
        "--overwrite",
        "confgate.io/accepts=>=2.4.0, <4.0.0",
    ]);
    let took = wait_version(&p, "3.0.0", CHANGE);
    eprintln!("node: kubectl annotate to the component's reload: {took:?}");
    n.wait_pod(ns, &p.name, "Ready again", CHANGE, |pod| {
        condition_is(pod, "Ready", "True")
    });
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_restarted_confgate_container_keeps_its_records_and_does_not_reload_again() {
    let n = node();
    let ns = "node-restart";
    namespace(n, ns, &[]);
    let p = PodSpec::new(n, ns, "restart");
    n.apply(&p.configmap("2.4.1"));
    n.apply(&p.object(n));
    wait_version(&p, "2.4.1", START);
    // Settled: the start-up check confirmed what the component runs, so nothing is owed.
    crate::common::poll("2.4.1 applied", CHANGE, || {
        let s = crate::common::status(p.gate_port)?;
        (s["applied"]["version"] == "2.4.1").then_some(())
    });
    let before = reloads(&p);

    // The kubelet restarts the sidecar after its process is killed (restartPolicy: Always).
    let pid = gate_pid(&p);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    n.wait_pod(ns, &p.name, "confgate restarted", START, |pod| {
        container(pod, "confgate").is_some_and(|c| c["restartCount"].as_i64() >= Some(1))
            && running(pod, "confgate")
            && condition_is(pod, "Ready", "True")
    });
    assert_eq!(p.component_version().as_deref(), Some("2.4.1"));
    assert_eq!(
        reloads(&p),
        before,
        "a restarted confgate reloaded the component again"
    );
    let pod = n.pod(ns, &p.name);
    assert!(
        running(&pod, "component") && container(&pod, "component").unwrap()["restartCount"] == 0,
        "{}",
        pod["status"]
    );
}

/// The pid of the confgate process serving this pod's port (host PID namespace view).
fn gate_pid(p: &PodSpec) -> i32 {
    let port = p.gate_port;
    crate::common::wait_for("the confgate process", Duration::from_secs(10), || {
        std::fs::read_dir("/proc")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .find(|pid| {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                let needle = format!("CONFGATE_LISTEN=127.0.0.1:{port}");
                environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes())
                    && std::fs::read_link(format!("/proc/{pid}/exe"))
                        .is_ok_and(|e| e.ends_with("confgate"))
            })
    })
}

/// How many reloads the component has taken, from its own metrics.
fn reloads(p: &PodSpec) -> Option<String> {
    let (_, body) = get(p.component_port, "/metrics")?;
    body.lines()
        .find(|l| l.starts_with("component_config_last_reload_success_timestamp_seconds"))
        .map(str::to_owned)
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn the_shipped_pod_runs_under_restricted_pod_security_as_a_non_root_read_only_container() {
    let n = node();
    let ns = "node-restricted";
    // hostNetwork is refused by `restricted` and `baseline`: the level is enforced for everything else
    // and the host network exempted by labelling the namespace `privileged` for enforcement only while
    // `restricted` is audited and warned. So the pod's own security context is what is checked here.
    namespace(
        n,
        ns,
        &[
            ("pod-security.kubernetes.io/warn", "restricted"),
            ("pod-security.kubernetes.io/audit", "restricted"),
        ],
    );
    let p = PodSpec::new(n, ns, "restricted");
    n.apply(&p.configmap("2.4.1"));
    let out = n
        .cluster
        .kubectl_with(&["apply", "-f", "-"], &p.object(n).to_string());
    assert!(out.status.success(), "{out:?}");
    let warnings = String::from_utf8_lossy(&out.stderr);
    // The one violation allowed is the node's own adaptation (hostNetwork); the shipped
    // securityContext must pass `restricted` as it is.
    let violations: Vec<&str> = warnings
        .lines()
        .filter_map(|l| l.split_once("would violate PodSecurity").map(|(_, v)| v))
        .collect();
    assert!(
        !violations.is_empty(),
        "no Pod Security warning was given at all: {warnings}"
    );
    for v in violations {
        let (_, what) = v.split_once("\": ").unwrap_or(("", v));
        assert_eq!(
            what.trim(),
            "host namespaces (hostNetwork=true)",
            "{warnings}"
        );
    }
    wait_version(&p, "2.4.1", START);
    let pid = gate_pid(&p);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l[name.len()..].trim().to_owned())
            .unwrap()
    };
    assert!(field("Uid:").starts_with("65532"), "{status}");
    assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    assert_eq!(
        field("Seccomp:"),
        "2",
        "seccomp RuntimeDefault is a filter: {status}"
    );
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mounts")).unwrap();
    let root = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("/"))
        .unwrap();
    assert!(
        root.split_whitespace()
            .nth(3)
            .is_some_and(|o| o.split(',').any(|f| f == "ro")),
        "the root file system is writable: {root}"
    );
}

/// A Prometheus config set: `version`, `prometheus.yml` reading `rules.yml`, and the rules.
fn prometheus_configmap(ns: &str, name: &str, version: &str, rules: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": name, "namespace": ns},
    "data": {
        "version": version,
        "prometheus.yml": "global:\n  scrape_interval: 1m\nrule_files:\n  - /etc/prometheus/rules.yml\n",
        "rules.yml": rules,
    }})
}

const GOOD_RULES: &str = "groups:\n  - name: confgate-node\n    rules:\n      - record: node_test:up\n        expr: vector(1)\n";
/// Parses as YAML (confgate reads only `version`), refused by Prometheus's rule parser.
const BROKEN_RULES: &str = "groups:\n  - name: confgate-node\n    rules:\n      - record: node_test:up\n        expr: sum(\n";

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_config_real_prometheus_refuses_is_rolled_back_and_prometheus_reloaded_on_the_last_good_one() {
    let n = node();
    let ns = "node-prometheus";
    namespace(n, ns, &[]);
    let (prom_port, gate_port) = (n.port(), n.port());
    n.apply(&prometheus_configmap(
        ns,
        "prometheus-config",
        "2.0.0",
        GOOD_RULES,
    ));
    let gate_image = n.image("confgate");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "prometheus", "namespace": ns, "annotations": {
        "confgate.io/accepts": ">=2.0.0, <3.0.0",
        "confgate.io/reload": format!("http://127.0.0.1:{prom_port}/-/reload"),
    }},
    "spec": {
        "nodeName": harness::NODE, "hostNetwork": true, "automountServiceAccountToken": false,
        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532},
        "initContainers": [{
            "name": "confgate", "image": gate_image, "restartPolicy": "Always",
            "args": ["run", "--watch", "/etc/confgate/incoming", "--promote-to", "/etc/prometheus",
                     "--annotations", "/etc/podinfo/annotations"],
            "env": [{"name": "CONFGATE_LISTEN", "value": format!("127.0.0.1:{gate_port}")}],
            "startupProbe": {"exec": {"command": ["/confgate", "probe", "startup"]},
                             "periodSeconds": 1, "failureThreshold": 300},
            "volumeMounts": [
                {"name": "incoming", "mountPath": "/etc/confgate/incoming", "readOnly": true},
                {"name": "active", "mountPath": "/etc/prometheus"},
                {"name": "podinfo", "mountPath": "/etc/podinfo", "readOnly": true}],
        }],
        "containers": [{
            "name": "prometheus", "image": n.image("prometheus"),
            "args": ["--config.file=/etc/prometheus/prometheus.yml",
                     format!("--web.listen-address=127.0.0.1:{prom_port}"),
                     "--web.enable-lifecycle", "--storage.tsdb.path=/data"],
            "volumeMounts": [
                {"name": "active", "mountPath": "/etc/prometheus", "readOnly": true},
                {"name": "data", "mountPath": "/data"}],
        }],
        "volumes": [
            {"name": "incoming", "configMap": {"name": "prometheus-config"}},
            {"name": "active", "emptyDir": {}},
            {"name": "data", "emptyDir": {}},
            {"name": "podinfo", "downwardAPI": {"items": [
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}},
        ],
    }});
    n.apply(&pod);
    let reload_ok = || {
        let (_, body) = get(prom_port, "/metrics")?;
        body.lines()
            .find(|l| l.starts_with("prometheus_config_last_reload_successful "))
            .map(|l| l.ends_with(" 1"))
    };
    crate::common::poll("Prometheus up on 2.0.0", START, || {
        reload_ok()?.then_some(())
    });
    crate::common::poll("2.0.0 applied", CHANGE, || {
        let s = crate::common::status(gate_port)?;
        (s["applied"]["version"] == "2.0.0").then_some(())
    });

    n.apply(&prometheus_configmap(
        ns,
        "prometheus-config",
        "2.1.0",
        BROKEN_RULES,
    ));
    let s = crate::common::poll("2.1.0 refused and rolled back", CHANGE, || {
        let s = crate::common::status(gate_port)?;
        (s["candidate"]["version"] == "2.1.0" && s["active"]["version"] == "2.0.0").then_some(s)
    });
    assert_eq!(s["applied"]["version"], "2.0.0", "{s}");
    // Prometheus's own view: its last reload (the rollback's) succeeded, on the good rules.
    crate::common::poll("Prometheus reloaded on the good rules", CHANGE, || {
        reload_ok()?.then_some(())
    });
    let (_, rules) = get(prom_port, "/api/v1/rules").unwrap();
    assert!(rules.contains("node_test:up"), "{rules}");
    let pod = n.pod(ns, "prometheus");
    assert!(
        container(&pod, "prometheus").is_some_and(|c| c["restartCount"] == 0),
        "{}",
        pod["status"]
    );
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_secret_volume_is_gated_as_a_configmap_is() {
    let n = node();
    let ns = "node-secret";
    namespace(n, ns, &[]);
    let p = PodSpec::new(n, ns, "secret");
    let secret = |version: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": p.configmap, "namespace": ns},
               "stringData": {"config.yaml": config(version)}})
    };
    n.apply(&secret("2.4.1"));
    let mut pod = p.object(n);
    for v in pod["spec"]["volumes"].as_array_mut().unwrap() {
        if v["name"] == "incoming" {
            *v = json!({"name": "incoming", "secret": {"secretName": p.configmap}});
        }
    }
    let env = pod["spec"]["initContainers"][0]["env"]
        .as_array_mut()
        .unwrap();
    env.push(json!({"name": "CONFGATE_CONTENT", "value": "secret"}));
    n.apply(&pod);
    wait_version(&p, "2.4.1", START);
    n.apply(&secret("3.0.0"));
    let pod = n.wait_pod(ns, &p.name, "config-current False", CHANGE, |pod| {
        condition_is(pod, "confgate.io/config-current", "False")
    });
    assert_eq!(p.component_version().as_deref(), Some("2.4.1"));
    let shown = serde_json::to_string(&pod).unwrap();
    assert!(
        !shown.contains("hello"),
        "the Secret's content reached the pod's status"
    );
    // A Secret's hashes are sealed wherever they are shown (docs/secrets.md): the pod's conditions and
    // annotations and /status carry `hmac-sha256:`, never the plain `sha256:` anyone could test
    // guesses against (the images' digests in the container statuses are `sha256:` of their own).
    let s = crate::common::status(p.gate_port).unwrap();
    let shown = format!(
        "{}{}{s}",
        pod["status"]["conditions"], pod["metadata"]["annotations"]
    );
    assert!(shown.contains("hmac-sha256:"), "no sealed hash: {shown}");
    assert!(
        !shown.replace("hmac-sha256:", "").contains("sha256:"),
        "a Secret's plain hash is shown: {shown}"
    );
    n.apply(&secret("2.6.0"));
    wait_version(&p, "2.6.0", CHANGE);
}

/// The shipped static pod (`manifests/static-pod/kube-scheduler.yaml`) with the node's paths and
/// images, written into the kubelet's `staticPodPath`; the staged dir, returned, is a plain hostPath
/// dir the test writes as an admin would.
fn static_scheduler(n: &Node, gate_port: u16) -> std::path::PathBuf {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/static-pod/kube-scheduler.yaml"
    ))
    .unwrap();
    let pod_doc = text.split("\n---\n").next().unwrap();
    let mut pod: Value = serde_saphyr::from_str(pod_doc).unwrap();
    let root = n.dir.join("static");
    let staged = root.join("staged");
    std::fs::create_dir_all(&staged).unwrap();
    // The promoted dir is a hostPath made once, owned by the pod's UID, as the manifest says.
    let promoted = root.join("promoted");
    std::fs::create_dir_all(&promoted).unwrap();
    std::os::unix::fs::chown(&promoted, Some(65532), Some(65532)).unwrap();
    // The scheduler runs as 65532 and reads its kubeconfig: readable by that UID, as the manifest says.
    let kubeconfig = root.join("scheduler.conf");
    std::fs::copy(&n.cluster.admin, &kubeconfig).unwrap();
    let ca = root.join("ca.crt");
    std::fs::copy(&n.cluster.ca, &ca).unwrap();
    let conf = std::fs::read_to_string(&kubeconfig).unwrap().replace(
        &n.cluster.ca.display().to_string(),
        "/etc/kubernetes/ca.crt",
    );
    std::fs::write(&kubeconfig, conf).unwrap();
    for p in [&kubeconfig, &ca] {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let spec = &mut pod["spec"];
    for v in spec["volumes"].as_array_mut().unwrap() {
        match v["name"].as_str().unwrap() {
            "staged" => v["hostPath"]["path"] = json!(staged),
            "config" => v["hostPath"]["path"] = json!(promoted),
            "kubeconfig" => v["hostPath"]["path"] = json!(kubeconfig),
            _ => {}
        }
    }
    spec["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "ca", "hostPath": {"path": ca, "type": "File"}}));
    let gate = &mut spec["initContainers"][0];
    gate["image"] = json!(n.image("confgate"));
    gate["startupProbe"]["periodSeconds"] = json!(1);
    gate["readinessProbe"]["periodSeconds"] = json!(1);
    for e in gate["env"].as_array_mut().unwrap() {
        if e["name"] == "CONFGATE_LISTEN" {
            e["value"] = json!(format!("127.0.0.1:{gate_port}"));
        }
    }
    let sched = &mut spec["containers"][0];
    sched["image"] = json!(n.image("kube-scheduler"));
    // The node's scheduler serves no port (several suites may share a machine); its liveness probe
    // would dial one.
    sched["command"]
        .as_array_mut()
        .unwrap()
        .push(json!("--secure-port=0"));
    sched.as_object_mut().unwrap().remove("livenessProbe");
    sched["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "ca", "mountPath": "/etc/kubernetes/ca.crt", "readOnly": true}));
    std::fs::write(
        n.dir.join("manifests/kube-scheduler.json"),
        serde_json::to_string_pretty(&pod).unwrap(),
    )
    .unwrap();
    staged
}

/// A KubeSchedulerConfiguration of `api_version` whose one profile is `scheduler`.
fn scheduler_config(api_version: &str, scheduler: &str) -> String {
    format!(
        "apiVersion: {api_version}\nkind: KubeSchedulerConfiguration\nclientConnection:\n  \
         kubeconfig: /etc/kubernetes/scheduler.conf\nleaderElection:\n  leaderElect: false\n\
         profiles:\n  - schedulerName: {scheduler}\n"
    )
}

/// Writes `text` as the staged `config.yaml` the way an admin's `install` does: a new file renamed
/// over the old one (a file edit, no `..data` swap).
fn stage(dir: &std::path::Path, text: &str) {
    let tmp = dir.join(".config.yaml.new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join("config.yaml")).unwrap();
}

/// A pod only the scheduler profile `scheduler` places, tolerating the node's taints.
fn unscheduled_pod(ns: &str, name: &str, scheduler: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
           "spec": {"schedulerName": scheduler, "automountServiceAccountToken": false,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": "localhost/never-started:1"}]}})
}

fn scheduled(n: &Node, ns: &str, name: &str) -> bool {
    n.pod(ns, name)["spec"]["nodeName"] == harness::NODE
}

#[test]
#[ignore = "needs KUBELET_BIN, KUBE_SCHEDULER_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_static_kube_scheduler_runs_only_a_config_api_version_it_serves() {
    let n = node();
    let ns = "node-scheduler";
    n.namespace(ns, &[]);
    let gate_port = n.port();
    let staged = static_scheduler(n, gate_port);
    // The upgrade that went wrong in 1.29: a config of the removed v1beta3 is there first.
    stage(
        &staged,
        &scheduler_config("kubescheduler.config.k8s.io/v1beta3", "sched-a"),
    );
    let mirror = format!("kube-scheduler-{}", harness::NODE);
    n.namespace("kube-system", &[]);
    n.wait_pod(
        "kube-system",
        &mirror,
        "confgate running in the static pod",
        START,
        |pod| running(pod, "confgate"),
    );
    let s = crate::common::poll("the v1beta3 config held", CHANGE, || {
        let s = crate::common::status(gate_port)?;
        (s["desired"]["verdict"] != "unknown" && s["desired"]["version"].is_string()).then_some(s)
    });
    assert_eq!(s["active"], Value::Null, "{s}");
    let pod = n.pod("kube-system", &mirror);
    assert!(
        !running(&pod, "kube-scheduler"),
        "kube-scheduler started on v1beta3"
    );

    stage(
        &staged,
        &scheduler_config("kubescheduler.config.k8s.io/v1", "sched-a"),
    );
    n.wait_pod(
        "kube-system",
        &mirror,
        "kube-scheduler running",
        START,
        |pod| running(pod, "kube-scheduler"),
    );
    n.apply(&unscheduled_pod(ns, "for-a", "sched-a"));
    crate::common::poll("the scheduler placing a pod of sched-a", START, || {
        scheduled(n, ns, "for-a").then_some(())
    });

    // A removed version staged again: held, and the scheduler keeps running on v1.
    stage(
        &staged,
        &scheduler_config("kubescheduler.config.k8s.io/v1beta3", "sched-b"),
    );
    crate::common::poll("v1beta3 held", CHANGE, || {
        let s = crate::common::status(gate_port)?;
        (s["candidate"]["version"] == "kubescheduler.config.k8s.io/v1beta3").then_some(())
    });
    n.apply(&unscheduled_pod(ns, "for-b", "sched-b"));

    // An accepted update reaches it: confgate promotes it and sends SIGTERM; the kubelet starts the
    // scheduler again, on the new profile.
    stage(
        &staged,
        &scheduler_config("kubescheduler.config.k8s.io/v1", "sched-c"),
    );
    n.apply(&unscheduled_pod(ns, "for-c", "sched-c"));
    crate::common::poll(
        "the restarted scheduler placing a pod of sched-c",
        START,
        || scheduled(n, ns, "for-c").then_some(()),
    );
    assert!(!scheduled(n, ns, "for-b"), "a held profile scheduled a pod");
    let pod = n.pod("kube-system", &mirror);
    assert!(
        container(&pod, "kube-scheduler").is_some_and(|c| c["restartCount"].as_i64() >= Some(1)),
        "{}",
        pod["status"]
    );
    std::fs::remove_file(n.dir.join("manifests/kube-scheduler.json")).unwrap();
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_pod_confgate_inject_rewrote_runs_as_injected() {
    let n = node();
    let ns = "node-inject";
    namespace(n, ns, &[]);
    let port = n.port();
    // A component's own pod, as its owners write it: the ConfigMap mounted where it reads its config.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "injected", "namespace": ns, "annotations": {
            "confgate.io/accepts": ">=2.4.0, <3.0.0",
            "confgate.io/version-from": "yaml:config.yaml#/schemaVersion",
            "confgate.io/reload": format!("http://127.0.0.1:{port}/reload"),
        }},
        "spec": {"nodeName": harness::NODE, "hostNetwork": true, "automountServiceAccountToken": false,
                 "containers": [{"name": "component", "image": n.image("example-component"),
                                 "args": ["/etc/component/config", format!("127.0.0.1:{port}")],
                                 "volumeMounts": [{"name": "config", "mountPath": "/etc/component/config"}]}],
                 "volumes": [{"name": "config", "configMap": {"name": "injected-config"}}]}});
    let out = crate::common::output_with_stdin(
        {
            let mut cmd = crate::confgate();
            cmd.args(["inject", "--image", n.image("confgate"), "-"]);
            cmd
        },
        &pod.to_string(),
    );
    assert!(out.status.success(), "{out:?}");
    let docs: Vec<Value> =
        serde_saphyr::from_multiple::<Value>(&String::from_utf8(out.stdout).unwrap())
            .unwrap()
            .into_iter()
            .filter(|d| !d.is_null())
            .collect();
    // What lets the sidecar report comes with the pod, before it: the own-pod policy and its binding,
    // the Role and its binding to the pod's own ServiceAccount (none added: the pod's identity stays).
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "Role",
            "RoleBinding",
            "Pod"
        ],
        "{docs:?}"
    );
    let items: Vec<Value> = docs
        .into_iter()
        .map(|mut d| {
            if d["kind"] == "ValidatingAdmissionPolicyBinding" {
                // The suite's other tests share this API server and report with tokens bound to no
                // pod (`kubectl create token`), which the policy refuses: bound here to this
                // namespace alone, so this pod reports under it and the others are left as they are.
                d["metadata"]["name"] = json!("confgate-own-pod-node-inject");
                d["spec"]["matchResources"]["namespaceSelector"] =
                    json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
            }
            if d["kind"] == "Pod" {
                // The node's one adaptation: the API server's address (no Service routes here).
                let api_port = n.cluster.server.rsplit(':').next().unwrap().to_owned();
                let gate = &mut d["spec"]["initContainers"][0];
                assert_eq!(gate["name"], "confgate", "{gate}");
                let env = gate["env"].as_array_mut().unwrap();
                env.push(json!({"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}));
                env.push(json!({"name": "KUBERNETES_SERVICE_PORT", "value": api_port}));
            }
            d
        })
        .collect();
    n.apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "injected-config", "namespace": ns},
                    "data": {"config.yaml": config("3.0.0")}}));
    n.apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}));
    let p = PodSpec {
        ns: ns.into(),
        name: "injected".into(),
        configmap: "injected-config".into(),
        component_port: port,
        gate_port: 0,
        annotations: Vec::new(),
        env: Vec::new(),
        deployment: None,
    };
    harness_wait_text(n, &p, "Startup probe failed: no accepted config yet");
    assert_eq!(p.component_version(), None);
    n.apply(&p.configmap("2.4.1"));
    wait_version(&p, "2.4.1", CHANGE);

    // It reports to its pod under what inject added: the condition, the Events `kubectl describe pod`
    // lists, and `confgate status` counting it as reporting, not "1 not reporting".
    n.wait_pod(ns, &p.name, "config-compatible True", CHANGE, |pod| {
        condition_is(pod, "confgate.io/config-compatible", "True")
    });
    harness_wait_text(n, &p, "Accepted");
    let text = crate::common::poll("confgate status seeing the pod report", CHANGE, || {
        let out = crate::confgate()
            .env("KUBECONFIG", &n.cluster.admin)
            .args(["status", "-n", ns, "--configmap", "injected-config"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        out.status.success().then_some(text)
    });
    assert!(!text.contains("not reporting"), "{text}");
    assert!(text.contains("injected"), "{text}");
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn api_mode_under_its_shipped_role_drives_the_readiness_gate_the_kubelet_honours() {
    let n = node();
    let ns = "node-api";
    n.namespace(ns, &[]);
    // `kubectl apply -k manifests/api-mode`, moved to this namespace as its kustomization says.
    let built = n
        .kubectl(&[
            "kustomize",
            concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/api-mode"),
        ])
        .replace("webhook-system", ns);
    let docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&built)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();
    let (deployments, rest): (Vec<Value>, Vec<Value>) =
        docs.into_iter().partition(|d| d["kind"] == "Deployment");
    let rest: Vec<Value> = rest
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .collect();
    n.apply(&json!({"apiVersion": "v1", "kind": "List", "items": rest}));
    let mut p = PodSpec::new(n, ns, "api");
    p.configmap = "webhook-config".into();
    p.deployment = Some(deployments[0].clone());
    n.apply(&p.configmap("2.4.1"));
    // confgate's readiness probe goes False with the gate, and while a container is not ready the
    // kubelet reports that (`ContainersNotReady`) and never looks at the gates: without the probe, the
    // readiness gate alone can hold the pod back, so this test sees the kubelet honour it.
    let mut pod = p.object(n);
    pod["spec"]["initContainers"][0]
        .as_object_mut()
        .unwrap()
        .remove("readinessProbe");
    n.apply(&pod);
    wait_version(&p, "2.4.1", START);
    n.wait_pod(
        ns,
        &p.name,
        "Ready through the readiness gate",
        START,
        |pod| {
            condition_is(pod, "confgate.io/config-compatible", "True")
                && condition_is(pod, "Ready", "True")
        },
    );

    n.kubectl(&[
        "annotate",
        "pod",
        "-n",
        ns,
        &p.name,
        "--overwrite",
        "confgate.io/on-incompatible=unready",
    ]);
    n.apply(&p.configmap("3.0.0"));
    let pod = n.wait_pod(
        ns,
        &p.name,
        "the gate False and the pod not Ready",
        CHANGE,
        |pod| {
            condition_is(pod, "confgate.io/config-compatible", "False")
                && condition_is(pod, "Ready", "False")
        },
    );
    // Every container, confgate's included, is ready: it is the readiness gate that holds the pod back.
    let statuses: Vec<&Value> = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|k| pod["status"][k].as_array().unwrap())
        .collect();
    assert!(
        statuses.len() == 2 && statuses.iter().all(|c| c["ready"] == true),
        "{}",
        pod["status"]
    );
    let ready = condition(&pod, "Ready").unwrap();
    assert_eq!(ready["reason"], "ReadinessGatesNotReady", "{ready}");
    assert_eq!(p.component_version().as_deref(), Some("2.4.1"));
    n.apply(&p.configmap("2.5.0"));
    wait_version(&p, "2.5.0", CHANGE);
    n.wait_pod(ns, &p.name, "Ready again", CHANGE, |pod| {
        condition_is(pod, "Ready", "True")
    });
}

/// The rollout test's ConfigMap: `version` and `config.yaml` at 2.4.1 and, with `percent`, a candidate
/// 2.5.0 whose `config.yaml` the component refuses (it has no `schemaVersion`; confgate reads the
/// version from the `version` key, so it accepts it).
fn rollout_configmap(ns: &str, percent: Option<&str>) -> Value {
    let mut data = json!({"version": "2.4.1", "config.yaml": config("2.4.1")});
    if let Some(p) = percent {
        data["version.next"] = json!("2.5.0");
        data["config.yaml.next"] = json!("greeting: no schema version here\n");
        data["confgate.rollout"] = json!(p);
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "fleet-config", "namespace": ns}, "data": data})
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_rollout_across_six_pods_rolls_a_refused_candidate_back_on_the_canary_pods_only() {
    let n = node();
    let ns = "node-rollout";
    namespace(n, ns, &[]);
    n.apply(&rollout_configmap(ns, None));
    let pods: Vec<PodSpec> = (0..6)
        .map(|i| {
            let mut p = PodSpec::new(n, ns, &format!("fleet-{i}"))
                .annotate("confgate.io/version-from", "file:version");
            p.configmap = "fleet-config".into();
            n.apply(&p.object(n));
            p
        })
        .collect();
    for p in &pods {
        wait_version(p, "2.4.1", START);
        // The start-up check confirms what the component runs once it answers.
        crate::common::poll("2.4.1 applied", CHANGE, || {
            let s = crate::common::status(p.gate_port)?;
            (s["applied"]["version"] == "2.4.1").then_some(())
        });
    }
    let status = |args: &[&str]| {
        let mut cmd = crate::confgate();
        cmd.env("KUBECONFIG", &n.cluster.admin)
            .args([
                "status",
                "-n",
                ns,
                "-l",
                "app.kubernetes.io/name=component",
                "--configmap",
                "fleet-config",
            ])
            .args(args);
        cmd.output().unwrap()
    };
    crate::common::poll("every pod reporting 2.4.1", CHANGE, || {
        status(&[]).status.success().then_some(())
    });

    for percent in ["50%", "100%"] {
        let mut canaries = 0;
        // `kubectl patch`, as an operator advances a rollout.
        let patch = json!({"data": rollout_configmap(ns, Some(percent))["data"]}).to_string();
        n.kubectl(&[
            "patch",
            "configmap",
            "-n",
            ns,
            "fleet-config",
            "--type=merge",
            "-p",
            &patch,
        ]);
        // Each pod judges the rollout for itself: a canary promotes the candidate, the component
        // refuses it, and confgate rolls back to 2.4.1; a stable pod never promotes it.
        for p in &pods {
            let last = std::cell::RefCell::new(Value::Null);
            let what = format!(
                "{}'s part of the rollout at {percent} (last /status, on timeout: below)",
                p.name
            );
            let guard = LastStatus(&last);
            let s = crate::common::poll(&what, CHANGE, || {
                let s = crate::common::status(p.gate_port)?;
                *last.borrow_mut() = s.clone();
                let r = &s["rollout"];
                let settled = r["percent"].is_string()
                    && r["percent"] == percent
                    && (r["assigned"] == "stable"
                        || r["held"]["verdict"] == "rejected-by-component");
                settled.then_some(s)
            });
            std::mem::forget(guard);
            // Canaries only: the pod's track is the one its own UID's bucket gives it at this share,
            // so a rollout that put every pod (or none) on the candidate fails here.
            let uid = n.pod(ns, &p.name)["metadata"]["uid"]
                .as_str()
                .unwrap()
                .to_owned();
            let bucket = Bucket::of(&uid);
            let on_candidate = bucket.on_candidate(Percent::parse(percent).unwrap());
            assert_eq!(
                s["rollout"]["bucket"],
                bucket.to_string(),
                "{}: the bucket is not its UID's: {s}",
                p.name
            );
            assert_eq!(
                s["rollout"]["assigned"],
                if on_candidate { "candidate" } else { "stable" },
                "{}: bucket {bucket} at {percent}: {s}",
                p.name
            );
            // A canary held the candidate the component refused and runs stable again.
            assert_eq!(s["rollout"]["track"], "stable", "{}: {s}", p.name);
            canaries += usize::from(s["rollout"]["assigned"] == "candidate");
            assert_eq!(s["active"]["version"], "2.4.1", "{}: {s}", p.name);
            assert_eq!(s["applied"]["version"], "2.4.1", "{}: {s}", p.name);
            assert_eq!(
                p.component_version().as_deref(),
                Some("2.4.1"),
                "{}",
                p.name
            );
        }
        // The pods' conditions, which `confgate status` reads, follow each pod's /status by a patch.
        let text = crate::common::poll("confgate status seeing every pod's part", CHANGE, || {
            let out = status(&[]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let reported = text.lines().filter(|l| l.starts_with("fleet-")).count() == 6
                && (canaries == 0 || text.contains(&format!("{canaries} refused")));
            reported.then_some(text)
        });
        eprintln!("node: confgate status at {percent} ({canaries}/6 canaries):\n{text}");
        if percent == "100%" {
            assert_eq!(canaries, 6, "every pod is a canary at 100%");
            captured::capture(
                "rollout at 100% with a refused candidate: confgate status",
                &text,
            );
        }
        assert!(text.contains("rollout"), "{text}");
    }
    // At 100% every pod is a canary: `status --wait` stops at the first refusal, exit 1.
    let out = status(&["--wait", "--timeout", "60s"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

/// Prints the last `/status` seen when a wait panics (dropped during the unwind).
struct LastStatus<'a>(&'a std::cell::RefCell<Value>);

impl Drop for LastStatus<'_> {
    fn drop(&mut self) {
        eprintln!("last /status: {}", self.0.borrow());
    }
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn the_documented_deploying_and_watching_commands_run_as_written() {
    // docs/deploying.md step 3 and the README's "Seeing what it is doing", on the node: the images are
    // already imported with `ctr -n k8s.io images import` (the harness runs the documented command
    // against the node's own containerd socket).
    let n = node();
    let ns = "node-deploy";
    n.namespace(ns, &[]);
    n.kubectl(&[
        "apply",
        "-n",
        ns,
        "-k",
        concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/native-sidecar"),
    ]);
    // No controller-manager turns the Deployment into pods here: its pod template is run as a Pod, on
    // the ConfigMap the kustomization applied.
    let mut p = PodSpec::new(n, ns, "component-0");
    p.configmap = "component-config".into();
    n.apply(&p.object(n));
    let shipped: Value = serde_json::from_str(&n.kubectl(&[
        "get",
        "configmap",
        "-n",
        ns,
        "component-config",
        "-o",
        "json",
    ]))
    .unwrap();
    let version = shipped["data"]["config.yaml"]
        .as_str()
        .and_then(|c| c.lines().find(|l| l.starts_with("schemaVersion:")))
        .map(|l| {
            l["schemaVersion:".len()..]
                .trim()
                .trim_matches('"')
                .to_owned()
        })
        .unwrap();
    wait_version(&p, &version, START);

    let text = n.kubectl(&[
        "describe",
        "pod",
        "-n",
        ns,
        "-l",
        "app.kubernetes.io/name=component",
    ]);
    assert!(text.contains("confgate:"), "{text}");
    let status = crate::common::poll("confgate status: every pod reporting", CHANGE, || {
        let out = crate::confgate()
            .env("KUBECONFIG", &n.cluster.admin)
            .args(["status", "-n", ns, "-l", "app.kubernetes.io/name=component"])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(status.contains(&version), "{status}");
    let ready = n.kubectl(&[
        "exec",
        "-n",
        ns,
        &p.name,
        "-c",
        "confgate",
        "--",
        "/confgate",
        "probe",
        "ready",
    ]);
    assert_eq!(ready.trim(), "ok");
    let logs = n.kubectl(&["logs", "-n", ns, &p.name, "-c", "confgate"]);
    assert!(logs.contains("\"message\":\"promoted\""), "{logs}");
    assert!(
        !logs.contains("hello"),
        "the config's content is in the log"
    );

    // `kubectl port-forward POD 9797 &` and `curl -s localhost:9797/status`, with the pod's own port
    // (hostNetwork pods here each have one) and a local port kubectl picks.
    let mut forward = n.cluster.kubectl();
    forward
        .args(["port-forward", "-n", ns, &p.name])
        .arg(format!(":{}", p.gate_port))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = forward.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    // "Forwarding from 127.0.0.1:LOCAL -> REMOTE"
    let local: u16 = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("kubectl port-forward said {line:?}"));
    let s = crate::common::status(local);
    child.kill().unwrap();
    child.wait().unwrap();
    let s = s.expect("/status through kubectl port-forward");
    assert_eq!(s["active"]["version"], json!(version), "{s}");
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_projected_token_cannot_expire_sooner_than_ten_minutes_so_no_rotation_fits_a_test() {
    // The kubelet refreshes a projected token at 80% of its lifetime, and the API server refuses a
    // lifetime under 600 s both in a pod's spec and in a TokenRequest, whatever its flags
    // (`--service-account-max-token-expiration` only caps longer ones): the first rotation comes after
    // 480 s at the soonest. This test keeps docs/development.md's reason for testing no rotation true.
    let n = node();
    let ns = "node-token";
    namespace(n, ns, &[]);
    let p = PodSpec::new(n, ns, "token");
    let mut pod = p.object(n);
    for v in pod["spec"]["volumes"].as_array_mut().unwrap() {
        if v["name"] == "confgate-token" {
            v["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] = json!(599);
        }
    }
    let out = n
        .cluster
        .kubectl_with(&["create", "--dry-run=server", "-f", "-"], &pod.to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a 599 s token was accepted: {out:?}");
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
    let out = n.cluster.kubectl_with(
        &["create", "token", "-n", ns, "confgate", "--duration=599s"],
        "",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a 599 s TokenRequest was granted");
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
    // The floor itself is granted, so the shortest rotation is 0.8 x 600 s.
    n.kubectl(&["create", "token", "-n", ns, "confgate", "--duration=600s"]);
}

/// The test bed's own kube-apiserver as a static pod on its own port and etcd prefix, patched with the
/// shipped kubeadm patch (`manifests/static-pod/patches/kube-apiserver+strategic.yaml`, applied with
/// kubectl's strategic merge, as kubeadm applies it), its hostPaths pointed at the node's dirs; the
/// staged dir starts with the shipped examples (admission configuration and audit policy).
fn static_apiserver(
    n: &Node,
    gate_port: u16,
    port: u16,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let d = n.cluster.dir.display().to_string();
    let root = n.dir.join("static-apiserver");
    let (staged, promoted, audit) = (
        root.join("staged"),
        root.join("promoted"),
        root.join("audit"),
    );
    for dir in [&staged, &promoted, &audit] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::chown(&promoted, Some(65532), Some(65532)).unwrap();
    let examples = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/static-pod/kube-apiserver"
    );
    for f in ["admission.yaml", "audit-policy.yaml"] {
        stage_file(
            &staged,
            f,
            &std::fs::read_to_string(format!("{examples}/{f}")).unwrap(),
        );
    }
    let base = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kube-apiserver", "namespace": "kube-system",
                     "labels": {"component": "kube-apiserver", "tier": "control-plane"}},
        "spec": {"hostNetwork": true, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            // Root, as the upstream image runs it (this image writer's default user is 65532): the
            // test bed's keys are root's, as kubeadm's are.
            "containers": [{"name": "kube-apiserver", "image": n.image("kube-apiserver"),
                "securityContext": {"runAsUser": 0},
                "command": ["kube-apiserver",
                    format!("--etcd-servers=unix://{d}/etcd-client:0"),
                    "--etcd-prefix=/confgate-node-apiserver",
                    "--bind-address=127.0.0.1", format!("--secure-port={port}"),
                    format!("--tls-cert-file={d}/serving.crt"), format!("--tls-private-key-file={d}/serving.key"),
                    format!("--token-auth-file={d}/tokens.csv"), "--authorization-mode=RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    format!("--service-account-key-file={d}/sa.pub"),
                    format!("--service-account-signing-key-file={d}/sa.key"),
                    "--service-cluster-ip-range=10.96.0.0/24", "--endpoint-reconciler-type=none",
                    "--profiling=false",
                    "--admission-control-config-file=/etc/kubernetes/apiserver-config/admission.yaml",
                    "--audit-policy-file=/etc/kubernetes/apiserver-config/audit-policy.yaml",
                    format!("--audit-log-path={}/audit.log", audit.display())],
                "volumeMounts": [{"name": "testbed", "mountPath": d},
                                 {"name": "audit-log", "mountPath": audit}]}],
            "volumes": [{"name": "testbed", "hostPath": {"path": d, "type": "Directory"}},
                        {"name": "audit-log", "hostPath": {"path": audit, "type": "Directory"}}]}});
    let tmp = root.join("base.json");
    std::fs::write(&tmp, base.to_string()).unwrap();
    let out = std::process::Command::new(crate::common::tool("kubectl"))
        .args([
            "patch",
            "--local",
            "--type",
            "strategic",
            "-o",
            "json",
            "-f",
        ])
        .arg(&tmp)
        .arg("--patch-file")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/static-pod/patches/kube-apiserver+strategic.yaml"
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut pod: Value = serde_json::from_slice(&out.stdout).unwrap();
    let spec = &mut pod["spec"];
    for v in spec["volumes"].as_array_mut().unwrap() {
        match v["name"].as_str().unwrap() {
            "confgate-staged" => v["hostPath"]["path"] = json!(staged),
            "confgate-promoted" => v["hostPath"]["path"] = json!(promoted),
            _ => {}
        }
    }
    let gate = spec["initContainers"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == "confgate")
        .unwrap();
    gate["image"] = json!(n.image("confgate"));
    gate["startupProbe"]["periodSeconds"] = json!(1);
    gate["readinessProbe"]["periodSeconds"] = json!(1);
    for e in gate["env"].as_array_mut().unwrap() {
        if e["name"] == "CONFGATE_LISTEN" {
            e["value"] = json!(format!("127.0.0.1:{gate_port}"));
        }
    }
    std::fs::write(
        n.dir.join("manifests/kube-apiserver.json"),
        serde_json::to_string_pretty(&pod).unwrap(),
    )
    .unwrap();
    (staged, audit)
}

/// Writes `name` in a staged dir as an admin's `install` does: a new file renamed over the old one.
fn stage_file(dir: &std::path::Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.new"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// The last lines `container` of the static pod `mirror` logged, for a failure's message.
fn apiserver_logs(n: &Node, mirror: &str, container: &str) -> String {
    let out = n.cluster.kubectl_with(
        &[
            "logs",
            "-n",
            "kube-system",
            mirror,
            "-c",
            container,
            "--tail",
            "30",
        ],
        "",
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `GET /livez` of the static kube-apiserver on `port`, as the admin, with the test bed's CA.
fn apiserver_live(n: &Node, port: u16) -> bool {
    n.cluster
        .kubectl_with(
            &[
                "--server",
                &format!("https://127.0.0.1:{port}"),
                "get",
                "--raw",
                "/livez",
            ],
            "",
        )
        .status
        .success()
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_static_kube_apiserver_keeps_its_served_config_files_while_an_edited_one_is_held() {
    // It restarts the kubelet, which no test beside it must see.
    let n = harness::node_alone();
    n.namespace("kube-system", &[]);
    let (gate_port, port) = (n.port(), n.port());
    let (staged, audit) = static_apiserver(n, gate_port, port);
    let mirror = format!("kube-apiserver-{}", harness::NODE);
    n.wait_pod(
        "kube-system",
        &mirror,
        "kube-apiserver running in the static pod",
        START,
        |pod| running(pod, "kube-apiserver"),
    );
    let end = Instant::now() + START;
    while !apiserver_live(n, port) {
        assert!(
            Instant::now() < end,
            "the static kube-apiserver is not serving on {port}; its log ends:\n{}\nconfgate's:\n{}",
            apiserver_logs(n, &mirror, "kube-apiserver"),
            apiserver_logs(n, &mirror, "confgate"),
        );
        // Polling, not synchronising: the next look at a condition with a deadline.
        std::thread::sleep(Duration::from_millis(500));
    }
    let served = "apiserver.config.k8s.io/v1, audit.k8s.io/v1";
    let s = crate::common::status(gate_port).unwrap();
    assert_eq!(s["active"]["version"], served, "{s}");
    // It runs the promoted audit policy: requests are audited.
    crate::common::poll("audit events written", CHANGE, || {
        let log = std::fs::read_to_string(audit.join("audit.log")).ok()?;
        log.contains("\"apiVersion\":\"audit.k8s.io/v1\"")
            .then_some(())
    });

    // The audit policy edited to a removed version: held, named with its file; the apiserver keeps
    // running on the files it has, and the hold shows in the pod's readiness, as kubectl sees it.
    let policy = std::fs::read_to_string(staged.join("audit-policy.yaml")).unwrap();
    stage_file(
        &staged,
        "audit-policy.yaml",
        &policy.replace(
            "apiVersion: audit.k8s.io/v1\n",
            "apiVersion: audit.k8s.io/v1beta1\n",
        ),
    );
    let s = crate::common::poll("the v1beta1 audit policy held", CHANGE, || {
        let s = crate::common::status(gate_port)?;
        (s["candidate"]["verdict"] == "too-old").then_some(s)
    });
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("audit-policy.yaml has audit.k8s.io/v1beta1 (too-old)"),
        "{reason}"
    );
    assert_eq!(s["active"]["version"], served, "{s}");
    let pod = n.wait_pod(
        "kube-system",
        &mirror,
        "the pod unready while the policy is held",
        CHANGE,
        |p| harness::condition_is(p, "Ready", "False"),
    );
    let api = container(&pod, "kube-apiserver").unwrap();
    assert!(api["state"]["running"].is_object(), "{api}");
    assert_eq!(api["restartCount"], 0, "{api}");
    assert!(apiserver_live(n, port), "the apiserver keeps serving");

    // A restarted static pod (a new pod, as after a reboot or an upgrade) keeps its config: the promoted
    // dir is a hostPath, confgate adopts the files it promoted, and the apiserver starts on them while
    // the staged policy is still held.
    let manifest = n.dir.join("manifests/kube-apiserver.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::remove_file(&manifest).unwrap();
    crate::common::poll("the static kube-apiserver stopped", START, || {
        (!apiserver_live(n, port)).then_some(())
    });
    std::fs::write(&manifest, text).unwrap();
    crate::common::poll("the restarted kube-apiserver serving", START, || {
        apiserver_live(n, port).then_some(())
    });
    let s = crate::common::poll("the restarted gate holding", CHANGE, || {
        let s = crate::common::status(gate_port)?;
        (s["candidate"]["verdict"] == "too-old").then_some(s)
    });
    assert_eq!(s["active"]["version"], served, "{s}");
    // The mirror pod is made again by the kubelet: absent for a moment, not a failure.
    let pod = crate::common::poll(
        "the restarted pod unready while the policy is held",
        CHANGE,
        || {
            let out = n.cluster.kubectl_with(
                &["get", "pod", "-n", "kube-system", &mirror, "-o", "json"],
                "",
            );
            let p: Value = serde_json::from_slice(&out.stdout).ok()?;
            (harness::condition_is(&p, "Ready", "False") && running(&p, "kube-apiserver"))
                .then_some(p)
        },
    );

    // The node restarted: the kubelet down, every process of the pod killed, the kubelet up again.
    // Nothing of the old containers is left but the node's disk, and the apiserver starts again on
    // the promoted files while the staged policy is still held.
    let uid = pod["metadata"]["annotations"]["kubernetes.io/config.hash"]
        .as_str()
        .unwrap_or_else(|| panic!("the mirror pod names its static pod's hash: {pod}"))
        .to_owned();
    n.power_cycle(&uid)
        .unwrap_or_else(|e| panic!("power-cycle the static pod: {e}"));
    crate::common::poll(
        "the kube-apiserver serving after the restart",
        START,
        || apiserver_live(n, port).then_some(()),
    );
    let s = crate::common::poll("the gate holding after the restart", CHANGE, || {
        let s = crate::common::status(gate_port)?;
        (s["candidate"]["verdict"] == "too-old").then_some(s)
    });
    assert_eq!(s["active"]["version"], served, "{s}");
    std::fs::remove_file(&manifest).unwrap();
}
