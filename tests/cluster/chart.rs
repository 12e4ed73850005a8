//! `helm template charts/confgate | kubectl apply` on a real API server: every part the chart renders
//! (the Prometheus Operator's kinds aside, which need its CRDs) passes a server-side dry run, cluster-wide
//! bindings included, and is applied, the bindings scoped to the test's namespace as the other tests
//! share this server; then each part does its work there: a labelled pod is injected, a too-new
//! ConfigMap refused, the status reader may read what `confgate status` reads and no more. A component
//! chart with the sidecar templates applies too.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{self, poll};
use crate::confgate;
use crate::server::{Cluster, cluster};

const NS: &str = "chart";
/// The API groups only a CRD serves.
const NEEDS_CRD: &str = "monitoring.coreos.com/";
/// How long the API server may take to load a new policy binding.
const LOADED: std::time::Duration = std::time::Duration::from_secs(30);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `helm template NAME CHART -n NS ARGS`, with Helm's own dirs in `home`.
pub fn helm_template(home: &Path, name: &str, chart: &Path, ns: &str, args: &[&str]) -> String {
    let out = Command::new(common::helm())
        .env_remove("HELM_PLUGINS")
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .args(["template", name])
        .arg(chart)
        .args(["--namespace", ns])
        .args(args)
        .output()
        .expect("helm");
    assert!(
        out.status.success(),
        "helm template {}: {}",
        chart.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// A binding of the chart's scoped to `ns` alone, under a name of its own.
pub fn scoped(mut binding: Value, ns: &str) -> Value {
    let name = format!("{}-{ns}", binding["metadata"]["name"].as_str().unwrap());
    binding["metadata"] = json!({"name": name});
    binding["spec"]["matchResources"]["namespaceSelector"] =
        json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
    binding
}

fn is_binding(d: &Value) -> bool {
    d["kind"]
        .as_str()
        .is_some_and(|k| k.ends_with("AdmissionPolicyBinding"))
}

/// `tests/fixtures/component-chart` with `charts/confgate` as its subchart, in `dir`.
fn component_chart(dir: &Path) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            if e.path().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    let to = dir.join("component");
    copy(&root().join("tests/fixtures/component-chart"), &to);
    copy(&root().join("charts/confgate"), &to.join("charts/confgate"));
    to
}

fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// `kubectl auth can-i VERB RESOURCE [NAME]` as the suite's status reader, in [`NS`].
fn reader_may(c: &Cluster, dir: &Path, verb: &str, what: &str) -> bool {
    let config = dir.join("reader.kubeconfig");
    c.kubeconfig(&config, &c.reader_token, NS);
    let out = Command::new(&c.kubectl)
        .arg("--kubeconfig")
        .arg(&config)
        .args(["auth", "can-i", verb, what, "-n", NS])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

#[test]
#[ignore = "needs ETCD_BIN, KUBE_APISERVER_BIN and helm (see tests/cluster/main.rs)"]
fn the_chart_applies_and_each_part_works() {
    let c = cluster();
    c.namespaces(&[NS]);
    c.kubectl_ok(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": NS}})
        .to_string(),
    );
    let home = tempfile::tempdir().unwrap();
    let policy = home.path().join("policy.yaml");
    let mut cmd = confgate();
    cmd.args([
        "policy",
        "--namespace",
        NS,
        "--name",
        "chart-config",
        "--accepts",
        ">=2.4.0, <3.0.0",
        "--version-from",
        "file:version",
    ]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::write(&policy, &out.stdout).unwrap();
    let file = format!("configMapPolicies.chart={}", policy.display());
    let rendered = helm_template(
        home.path(),
        "confgate",
        &root().join("charts/confgate"),
        "confgate-system",
        &[
            "--set",
            "podMonitor.enabled=true,alertRules.enabled=true",
            "--set",
            &format!(
                "statusReader.enabled=true,statusReader.namespace={NS},statusReader.configMap=chart-config"
            ),
            "--set-file",
            &file,
        ],
    );
    let (crd, served): (Vec<Value>, Vec<Value>) = documents(&rendered).into_iter().partition(|d| {
        d["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .starts_with(NEEDS_CRD)
    });
    let crd_kinds: Vec<&str> = crd.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(crd_kinds, ["PodMonitor", "PrometheusRule"]);

    // Every object as rendered, cluster-wide bindings included: the server compiles each CEL
    // expression and validates each object, and stores nothing.
    c.kubectl_ok(
        &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
        &list(served.clone()),
    );
    // Applied, with each binding scoped to this namespace: the suite's other tests make pods and
    // report with tokens bound to no pod in namespaces of their own on this server.
    let (bindings, objects): (Vec<Value>, Vec<Value>) = served.into_iter().partition(is_binding);
    assert_eq!(bindings.len(), 3, "{bindings:?}");
    let mut items = objects;
    items.extend(bindings.into_iter().map(|b| {
        if b["kind"] == "ValidatingAdmissionPolicyBinding"
            && b["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("confgate."))
        {
            // The ConfigMap policy's binding is already this namespace's (its policy matches it).
            b
        } else {
            scoped(b, NS)
        }
    }));
    c.kubectl_ok(&["apply", "--validate=strict", "-f", "-"], &list(items));

    // The injection policy: a labelled pod gets the sidecar, as server-side dry runs show.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": NS,
                     "labels": {"confgate.io/inject": "enabled"},
                     "annotations": {"confgate.io/accepts": "^2.4",
                                     "confgate.io/version-from": "yaml:config.yaml#/schemaVersion"}},
        "spec": {"containers": [{"name": "app", "image": "example/app:1",
                                 "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]}],
                 "volumes": [{"name": "config", "configMap": {"name": "chart-config"}}]}});
    poll(
        "the chart's injection policy to inject a labelled pod",
        LOADED,
        || {
            let out = c.kubectl_ok(
                &["create", "--dry-run=server", "-o", "json", "-f", "-"],
                &pod.to_string(),
            );
            let p: Value = serde_json::from_str(&out).unwrap();
            (p["spec"]["initContainers"][0]["name"] == "confgate").then_some(())
        },
    );

    // The ConfigMap policy: a too-new config is refused at the API server.
    let configmap = |version: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "chart-config", "namespace": NS},
               "data": {"version": version}})
        .to_string()
    };
    let refused = poll(
        "the chart's ConfigMap policy to refuse 3.0.0",
        LOADED,
        || {
            let out = c.kubectl_with(
                &["apply", "--dry-run=server", "-f", "-"],
                &configmap("3.0.0"),
            );
            (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
        },
    );
    assert!(refused.contains("version 3.0.0 is newer than"), "{refused}");
    c.kubectl_ok(&["apply", "-f", "-"], &configmap("2.4.1"));

    // The status reader: what `confgate status --configmap chart-config` reads, and no other object.
    assert!(reader_may(c, home.path(), "list", "pods"));
    assert!(reader_may(c, home.path(), "get", "configmap/chart-config"));
    assert!(!reader_may(c, home.path(), "get", "configmap/other"));
    assert!(!reader_may(c, home.path(), "list", "configmaps"));

    // A component chart with the sidecar templates: applied as rendered.
    let chart = component_chart(home.path());
    let component = helm_template(home.path(), "component", &chart, NS, &[]);
    c.kubectl_ok(&["apply", "--validate=strict", "-f", "-"], &component);
    let deployment: Value = serde_json::from_str(&c.kubectl_ok(
        &["get", "deployment", "-n", NS, "component", "-o", "json"],
        "",
    ))
    .unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["initContainers"][0]["name"],
        "confgate"
    );
}
