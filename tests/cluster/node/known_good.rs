//! The known-good on a real node: the shipped native-sidecar pod (volume mode, its shipped Role) with a
//! short trial (`CONFGATE_TRIAL=2s`) records the config its component ran; a pod created while the
//! ConfigMap holds only a too-new version then starts its component on that known-good and says why
//! (its conditions, an Event, `/status`); and with the ConfigMap deleted, a pod deleted and created
//! again starts on it too. A config the component (real Prometheus) refuses is never recorded.

use serde_json::Value;

use super::harness::{Node, condition, node, running};
use super::{CHANGE, PodSpec, START, captured, describe, namespace, wait_version};
use crate::common::{get, poll};

const RECORD: &str = "component-config.confgate-known-good";

/// The pod named `component` (so its ConfigMap is `component-config`, the one the shipped Role's
/// record rule names), with a 2 s trial (in confgate's container spec: an annotation may not shorten
/// it).
fn pod(n: &Node, ns: &str) -> PodSpec {
    PodSpec::new(n, ns, "component").env("CONFGATE_TRIAL", "2s")
}

/// The record's entry of line `v2`, as the admin reads it (its JSON: a version and base64 keys).
fn recorded(n: &Node, ns: &str) -> Option<String> {
    let out = n.cluster.kubectl_with(
        &[
            "get",
            "configmap",
            RECORD,
            "-n",
            ns,
            "-o",
            "jsonpath={.data.v2}",
        ],
        "",
    );
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap())
        .and_then(|v| confgate::known_good::Entry::from_json(&v).ok())
        .map(|e| e.version)
}

/// confgate's `/status` on the node.
fn status(p: &PodSpec) -> Option<Value> {
    match get(p.gate_port, "/status") {
        Some((200, body)) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}

fn delete_pod(n: &Node, p: &PodSpec) {
    n.kubectl(&[
        "delete",
        "pod",
        "-n",
        &p.ns,
        &p.name,
        "--grace-period=5",
        "--wait=true",
    ]);
}

/// A new pod on the node starts its component on the known-good 2.4.1, because the ConfigMap's newest
/// is `because`: the component runs it, `/status` and `config-current` say `KnownGood`, and the
/// `KnownGood` Event names the record. Returns the pod.
fn starts_on_the_known_good(n: &Node, p: &PodSpec, because: &str) -> Value {
    n.apply(&p.object(n));
    wait_version(p, "2.4.1", START);
    let s = poll("/status on the known-good", CHANGE, || {
        status(p).filter(|s| !s["known_good"].is_null())
    });
    assert_eq!(s["known_good"]["version"], "2.4.1", "{s}");
    assert_eq!(s["known_good"]["record"], RECORD, "{s}");
    assert_eq!(s["known_good"]["because"], because, "{s}");
    let pod = n.wait_pod(&p.ns, &p.name, "config-current KnownGood", CHANGE, |pod| {
        condition(pod, "confgate.io/config-current").is_some_and(|c| c["reason"] == "KnownGood")
            && running(pod, "component")
    });
    let current = condition(&pod, "confgate.io/config-current").unwrap();
    assert_eq!(current["status"], "False", "{current}");
    poll("the KnownGood Event", CHANGE, || {
        let d = describe(n, p);
        d.lines()
            .any(|l| l.contains("KnownGood") && l.contains(RECORD))
            .then_some(d)
    });
    pod
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_pod_created_while_its_configmap_is_too_new_or_gone_starts_on_the_known_good() {
    let n = node();
    let ns = "node-known-good";
    namespace(n, ns, &[]);
    let p = pod(n, ns);
    // A first pod runs 2.4.1 through its trial: recorded beside the ConfigMap.
    n.apply(&p.configmap("2.4.1"));
    n.apply(&p.object(n));
    wait_version(&p, "2.4.1", START);
    poll("2.4.1 recorded", CHANGE, || {
        (recorded(n, ns).as_deref() == Some("2.4.1")).then_some(())
    });

    // The ConfigMap now holds only 3.0.0, and the pod is replaced (a rollout, an eviction).
    delete_pod(n, &p);
    n.apply(&p.configmap("3.0.0"));
    starts_on_the_known_good(n, &p, "too-new");
    let d = describe(n, &p);
    captured::capture(
        "known-good start: kubectl describe pod (Events)",
        &captured::events_of(&d),
    );
    let conditions = n.kubectl(&[
        "get",
        "pod",
        "-n",
        ns,
        &p.name,
        "-o",
        "jsonpath={range .status.conditions[?(@.reason==\"KnownGood\")]}{.type}={.status} {.reason}: {.message}{\"\\n\"}{end}",
    ]);
    captured::capture(
        "known-good start: kubectl get pod -o jsonpath (the condition)",
        conditions.trim_end(),
    );

    let out = crate::confgate()
        .args(["status", "-n", ns, "-l", "app.kubernetes.io/name=component"])
        .env("KUBECONFIG", &n.cluster.admin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("component ") && l.contains("False/KnownGood")),
        "{text}"
    );
    captured::capture("known-good start: confgate status", text.trim_end());

    // The ConfigMap deleted out of band, then the pod deleted and created again.
    n.kubectl(&["delete", "configmap", "-n", ns, &p.configmap, "--wait=true"]);
    delete_pod(n, &p);
    starts_on_the_known_good(n, &p, "missing");
    assert_eq!(recorded(n, ns).as_deref(), Some("2.4.1"));

    // An accepted config in the ConfigMap again: the pod moves to it as to any change.
    n.apply(&p.configmap("2.5.0"));
    wait_version(&p, "2.5.0", CHANGE);
    poll("known_good cleared", CHANGE, || {
        status(&p).filter(|s| s["known_good"].is_null())
    });
    delete_pod(n, &p);
}

/// A config the component refuses is never recorded: real Prometheus, in the shipped pod in place
/// of the example component (a 2 s trial), runs 2.0.0 through its trial (recorded), refuses 2.1.0
/// (rolled back), then runs 2.2.0 (recorded over 2.0.0); no trial of 2.1.0 ever started.
#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_config_the_component_refuses_is_never_recorded() {
    use super::{BROKEN_RULES, GOOD_RULES, prometheus_configmap};
    let n = node();
    let ns = "node-known-good-refused";
    namespace(n, ns, &[]);
    let prom_port = n.port();
    let p = pod(n, ns)
        .annotate("confgate.io/accepts", ">=2.0.0, <3.0.0")
        .annotate("confgate.io/version-from", "file:version");
    let mut object = p.object(n);
    object["metadata"]["annotations"]["confgate.io/reload"] =
        serde_json::json!(format!("http://127.0.0.1:{prom_port}/-/reload"));
    let spec = &mut object["spec"];
    spec["containers"] = serde_json::json!([{
        "name": "prometheus", "image": n.image("prometheus"),
        "args": ["--config.file=/etc/prometheus/prometheus.yml",
                 format!("--web.listen-address=127.0.0.1:{prom_port}"),
                 "--web.enable-lifecycle", "--storage.tsdb.path=/data"],
        "volumeMounts": [
            {"name": "active", "mountPath": "/etc/prometheus", "readOnly": true},
            {"name": "data", "mountPath": "/data"}],
    }]);
    spec["volumes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "data", "emptyDir": {}}));
    let cm = |version: &str, rules: &str| prometheus_configmap(ns, &p.configmap, version, rules);
    n.apply(&cm("2.0.0", GOOD_RULES));
    n.apply(&object);
    let applied = |v: &'static str| {
        let p = &p;
        move || status(p).filter(|s| s["applied"]["version"] == v)
    };
    poll("2.0.0 applied", START, applied("2.0.0"));
    poll("2.0.0 recorded", CHANGE, || {
        (recorded(n, ns).as_deref() == Some("2.0.0")).then_some(())
    });

    n.apply(&cm("2.1.0", BROKEN_RULES));
    poll("2.1.0 refused and rolled back", CHANGE, || {
        status(&p)
            .filter(|s| s["candidate"]["version"] == "2.1.0" && s["active"]["version"] == "2.0.0")
    });
    n.apply(&cm("2.2.0", GOOD_RULES));
    poll("2.2.0 applied", CHANGE, applied("2.2.0"));
    poll("2.2.0 recorded", CHANGE, || {
        (recorded(n, ns).as_deref() == Some("2.2.0")).then_some(())
    });
    let logs = n.kubectl(&["logs", "-n", ns, &p.name, "-c", "confgate"]);
    let about = |what: &str| -> Vec<&str> { logs.lines().filter(|l| l.contains(what)).collect() };
    let trials = about("known-good trial started");
    assert!(
        trials.iter().any(|l| l.contains("2.0.0")) && trials.iter().any(|l| l.contains("2.2.0")),
        "{logs}"
    );
    assert!(
        trials.iter().all(|l| !l.contains("2.1.0")),
        "a trial of the refused config: {trials:?}"
    );
    assert!(
        about("recorded as the known-good")
            .iter()
            .all(|l| !l.contains("2.1.0")),
        "{logs}"
    );
    delete_pod(n, &p);
}
