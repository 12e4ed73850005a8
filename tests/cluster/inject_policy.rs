//! `confgate inject --policy` on a real API server: the MutatingAdmissionPolicy and its binding are
//! accepted (the server compiles every expression), and a labelled pod created with it in force gets
//! exactly the pod spec `confgate inject` writes for the same pod, both through the server's defaulting
//! (a server-side dry run); a pod already injected, or not labelled, is left as it is; the pod's
//! ServiceAccount is never changed.

use serde_json::{Value, json};

use crate::common::{self, poll};
use crate::confgate;
use crate::server::{Cluster, cluster};

const NS: &str = "inject-policy";

/// A pod reading ConfigMap `app-config` through volume `config`, marked for injection at admission.
fn pod(name: &str, labelled: bool) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS,
                     "annotations": {"confgate.io/accepts": "^2.4",
                                     "confgate.io/version-from": "yaml:config.yaml#/schemaVersion",
                                     "inject.confgate.io/volume": "config"}},
        "spec": {
            "initContainers": [{"name": "setup", "image": "example/setup:1",
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/setup"}]}],
            "containers": [
                {"name": "app", "image": "example/app:1", "ports": [{"containerPort": 8080}],
                 "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                  {"name": "config", "mountPath": "/etc/app", "mountPropagation": "None"}]},
                {"name": "helper", "image": "example/helper:1"}],
            "volumes": [{"name": "data", "emptyDir": {}},
                        {"name": "config", "configMap": {"name": "app-config"}},
                        {"name": "other", "configMap": {"name": "other"}}]}});
    if labelled {
        p["metadata"]["labels"] = json!({"confgate.io/inject": "enabled"});
    }
    p
}

/// The pod as the server would store it on create, without storing it.
fn created(c: &Cluster, pod: &Value) -> Value {
    let out = c.kubectl_ok(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        &pod.to_string(),
    );
    serde_json::from_str(&out).unwrap()
}

/// A pod spec as text, with what the API server's ServiceAccount admission adds made comparable: its
/// token volume's generated name fixed, and the volumes sorted by name (it appends its volume after
/// those in the request, which are inject's own in one case and not yet the policy's in the other).
fn same_form(spec: &Value) -> String {
    let mut spec = spec.clone();
    if let Some(v) = spec["volumes"].as_array_mut() {
        v.sort_by_key(|v| v["name"].as_str().unwrap_or_default().to_owned());
    }
    let text = serde_json::to_string_pretty(&spec).unwrap();
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("kube-api-access-") {
        let end = i + "kube-api-access-".len();
        out.push_str(&rest[..end]);
        out.push_str("SUFFIX");
        rest = rest[end..].trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    }
    out.push_str(rest);
    out
}

/// `confgate inject` of `pod`: the pod it prints.
fn injected(pod: &Value) -> Value {
    let mut cmd = confgate();
    cmd.arg("inject");
    let out = common::output_with_stdin(cmd, &pod.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_saphyr::from_multiple::<Value>(&String::from_utf8(out.stdout).unwrap())
        .unwrap()
        .into_iter()
        .find(|d| d["kind"] == "Pod")
        .unwrap()
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (see tests/cluster/main.rs)"]
fn the_admission_policy_makes_the_pod_inject_makes() {
    let c = cluster();
    c.namespaces(&[NS]);
    c.kubectl_ok(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": NS}})
        .to_string(),
    );
    let mut cmd = confgate();
    cmd.args(["inject", "--policy"]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> =
        serde_saphyr::from_multiple::<Value>(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding"
        ]
    );
    // The mutating policy and a binding of it to this test's namespace only: the shipped binding
    // covers every namespace but kube-system and confgate's own, and other tests make pods too.
    let mut binding = docs[3].clone();
    binding["metadata"]["name"] = "confgate-inject-test".into();
    binding["spec"]["matchResources"]["namespaceSelector"] =
        json!({"matchLabels": {"kubernetes.io/metadata.name": NS}});
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [docs[2].clone(), binding]});
    c.kubectl_ok(&["apply", "-f", "-"], &list.to_string());

    let labelled = pod("web", true);
    let got = poll("the policy to inject a labelled pod", LOADED, || {
        let p = created(c, &labelled);
        let names: Vec<String> = p["spec"]["initContainers"]
            .as_array()?
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        (names.first().map(String::as_str) == Some("confgate")).then_some(p)
    });
    // inject's pod, through the same defaulting; the policy leaves it alone (already injected).
    let want = created(c, &injected(&labelled));
    let (a, b) = (same_form(&got["spec"]), same_form(&want["spec"]));
    let differ: Vec<String> = a
        .lines()
        .zip(b.lines())
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("line {}: policy {x:?}, inject {y:?}", i + 1))
        .take(10)
        .collect();
    assert!(
        a == b,
        "the policy's pod and inject's differ:\n{}\n(lengths {} and {})",
        differ.join("\n"),
        a.lines().count(),
        b.lines().count()
    );
    assert_eq!(got["spec"]["serviceAccountName"], "default");
    assert_eq!(got["metadata"]["labels"], want["metadata"]["labels"]);

    // A pod with no init container, as most are: confgate becomes its first, and the pod is again
    // inject's.
    let mut bare = pod("bare", true);
    bare["spec"]
        .as_object_mut()
        .unwrap()
        .remove("initContainers");
    let got = created(c, &bare);
    assert_eq!(got["spec"]["initContainers"][0]["name"], "confgate");
    let want = created(c, &injected(&bare));
    assert_eq!(same_form(&got["spec"]), same_form(&want["spec"]));

    // Not labelled: left as it is.
    let plain = created(c, &pod("plain", false));
    assert_eq!(
        plain["spec"]["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].clone())
            .collect::<Vec<_>>(),
        [json!("setup")]
    );
}

/// How long the API server may take to load a new policy binding.
const LOADED: std::time::Duration = std::time::Duration::from_secs(30);
