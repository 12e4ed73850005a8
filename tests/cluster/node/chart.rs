//! The Helm chart's injection policy on the real node: `helm template charts/confgate | kubectl apply`,
//! then a Deployment labelled `confgate.io/inject: enabled`, written as its owners write it (the
//! ConfigMap mounted where the component reads it, no sidecar, no init container), applied to the API
//! server; its pod gets the sidecar at admission and runs on the kubelet, gated: the component starts
//! only on an accepted config.
//!
//! The test bed runs no controller-manager, so the test does the ReplicaSet controller's one part
//! here: it creates the Deployment's pod from its template. The node's adaptation (no CNI, so
//! `hostNetwork`; the API server's address; a loopback port for confgate) is a second
//! MutatingAdmissionPolicy of the test's, which acts only on a pod confgate's policy has injected.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{self, running};
use super::{CHANGE, PodSpec, START, config, harness_wait_text, wait_version};
use crate::chart::{documents, helm_template, scoped};
use crate::common::poll;

const NS: &str = "node-chart";
/// How long the API server may take to load a new policy and its binding: seconds alone; in two runs
/// of the whole suite on two cores the pod was not injected within a minute (the cause is not
/// established: the injection policy's CEL is large), so the wait is generous.
const LOADED: Duration = Duration::from_secs(180);

/// The node's adaptation of an injected pod: on the node's network, confgate on a loopback port of
/// its own (its declared port left out: a hostNetwork pod's ports must be host ports) and told the API
/// server's address. Matches only a pod whose first init container is confgate, so it acts after
/// confgate's policy whatever the order the API server runs them in (both are reinvoked if needed).
fn adaptation(gate_port: u16, api_port: &str) -> Vec<Value> {
    let env = |name: &str, value: &str| {
        format!(
            "JSONPatch{{op: \"add\", path: \"/spec/initContainers/0/env/-\", value: \
             Object.spec.initContainers.env{{name: {name:?}, value: {value:?}}}}}"
        )
    };
    let patch = format!(
        "[JSONPatch{{op: \"add\", path: \"/spec/hostNetwork\", value: true}}, \
         JSONPatch{{op: \"remove\", path: \"/spec/initContainers/0/ports\"}}, {}, {}, {}]",
        env("CONFGATE_LISTEN", &format!("127.0.0.1:{gate_port}")),
        env("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        env("KUBERNETES_SERVICE_PORT", api_port),
    );
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
               "metadata": {"name": "node-chart-adaptation"},
               "spec": {
                   "failurePolicy": "Fail",
                   "reinvocationPolicy": "IfNeeded",
                   "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["pods"]}]},
                   "matchConditions": [{"name": "injected-not-adapted", "expression":
                       "has(object.spec.initContainers) && size(object.spec.initContainers) > 0 && \
                        object.spec.initContainers[0].name == 'confgate' && \
                        !(has(object.spec.hostNetwork) && object.spec.hostNetwork)"}],
                   "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": "node-chart-adaptation"},
               "spec": {"policyName": "node-chart-adaptation",
                        "matchResources": {"namespaceSelector": {"matchLabels":
                            {"kubernetes.io/metadata.name": NS}}}}}),
    ]
}

#[test]
#[ignore = "needs KUBELET_BIN, CONTAINERD_BIN, RUNC_BIN, CONFGATE_IMAGES, ETCD_BIN, KUBE_APISERVER_BIN and helm (docs/development.md)"]
fn a_labelled_deployment_gets_the_sidecar_from_the_charts_policy_and_its_pod_runs_gated() {
    let n = harness::node();
    n.namespace(NS, &[]);
    let c = n.cluster;

    // The chart, with the node's image, its bindings scoped to this namespace: the suite's other
    // tests share this API server.
    let image = n.image("confgate");
    let (repository, tag) = image.rsplit_once(':').expect("a tagged image");
    let home = tempfile::tempdir().unwrap();
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/confgate");
    let rendered = helm_template(
        home.path(),
        "confgate",
        &chart,
        "confgate-system",
        &[
            "--set",
            &format!("image.repository={repository},image.tag={tag}"),
        ],
    );
    let api_port = c.server.rsplit(':').next().unwrap().to_owned();
    let gate_port = n.port();
    let mut items: Vec<Value> = documents(&rendered)
        .into_iter()
        .map(|mut d| {
            // Policies and bindings are cluster-wide and named as the chart names them; other tests
            // on this API server apply the same names with their own images and scopes. This one's
            // are its own: named after its namespace, the bindings scoped to it.
            let kind = d["kind"].as_str().unwrap_or_default().to_owned();
            if kind.ends_with("AdmissionPolicyBinding") {
                let policy = format!("{}-{NS}", d["spec"]["policyName"].as_str().unwrap());
                d["spec"]["policyName"] = json!(policy);
                scoped(d, NS)
            } else if kind.ends_with("AdmissionPolicy") {
                let name = format!("{}-{NS}", d["metadata"]["name"].as_str().unwrap());
                d["metadata"]["name"] = json!(name);
                d
            } else {
                d
            }
        })
        .collect();
    items.extend(adaptation(gate_port, &api_port));
    c.kubectl_ok(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    );

    // The component as its owners write it, labelled for injection.
    let port = n.port();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web", "confgate.io/inject": "enabled"},
                    "annotations": {
                        "confgate.io/accepts": ">=2.4.0, <3.0.0",
                        "confgate.io/version-from": "yaml:config.yaml#/schemaVersion",
                        "confgate.io/reload": format!("http://127.0.0.1:{port}/reload")}},
                "spec": {"nodeName": harness::NODE,
                    "containers": [{"name": "component", "image": n.image("example-component"),
                        "args": ["/etc/component/config", format!("127.0.0.1:{port}")],
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/component/config"}]}],
                    "volumes": [{"name": "config", "configMap": {"name": "web-config"}}]}}}});
    n.apply(&deployment);
    n.apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "web-config", "namespace": NS},
                    "data": {"config.yaml": config("3.0.0")}}));

    // The ReplicaSet controller's part: the Deployment's pod, from its template as stored.
    let stored: Value =
        serde_json::from_str(&n.kubectl(&["get", "deployment", "-n", NS, "web", "-o", "json"]))
            .unwrap();
    let template = &stored["spec"]["template"];
    let mut meta = template["metadata"].clone();
    meta["name"] = json!("web-0");
    meta["namespace"] = json!(NS);
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]});
    // Created once the policies are loaded, so the pod is never made without its sidecar.
    poll("the chart's policy to inject the pod", LOADED, || {
        let p: Value = serde_json::from_str(&c.kubectl_ok(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            &pod.to_string(),
        ))
        .unwrap();
        (p["spec"]["initContainers"][0]["name"] == "confgate" && p["spec"]["hostNetwork"] == true)
            .then_some(())
    });
    c.kubectl_ok(&["create", "-f", "-"], &pod.to_string());

    let created = n.pod(NS, "web-0");
    let spec = &created["spec"];
    assert_eq!(spec["initContainers"][0]["image"], json!(image), "{spec}");
    assert_eq!(spec["serviceAccountName"], "default", "{spec}");
    assert_eq!(
        spec["containers"][0]["volumeMounts"][0]["name"], "confgate-active",
        "the component reads the promoted copy: {spec}"
    );

    // Gated on the node: blocked on the too-new config, started on an accepted one.
    let p = PodSpec {
        ns: NS.into(),
        name: "web-0".into(),
        configmap: "web-config".into(),
        component_port: port,
        gate_port,
        annotations: Vec::new(),
        env: Vec::new(),
        deployment: None,
    };
    harness_wait_text(n, &p, "Startup probe failed: no accepted config yet");
    assert_eq!(p.component_version(), None);
    n.apply(&p.configmap("2.4.1"));
    wait_version(&p, "2.4.1", CHANGE);
    n.wait_pod(
        NS,
        "web-0",
        "confgate and the component running",
        START,
        |pod| running(pod, "confgate") && running(pod, "component"),
    );
}
