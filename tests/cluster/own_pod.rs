//! `inject`'s reporting objects on a real API server: a plain `kubectl apply -f` of its output for bare
//! Pods succeeds on the first try, the pods keep the ServiceAccount they run as, and the
//! ValidatingAdmissionPolicy `confgate-own-pod` keeps a token bound to one pod to that pod: its status
//! (not its labels) and Events about it, while RBAC alone would let it patch every pod's status.
//!
//! The policy is bound here to this test's namespace only (a binding of its own, by label): the
//! shipped binding is cluster-wide, and other tests of this binary report with tokens bound to no pod.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{self, poll};
use crate::confgate;
use crate::server::{client, cluster, runtime};

const NS: &str = "own-pod";
/// How long the API server may take to load a new policy binding.
const LOADED: Duration = Duration::from_secs(30);

/// A bare Pod reading ConfigMap `config`, marked for injection, running as whatever it names (none).
fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name},
                     "annotations": {"confgate.io/accepts": "^2"}},
        "spec": {"containers": [{"name": "c", "image": "example/c:1",
                                 "volumeMounts": [{"name": "config", "mountPath": "/etc/c"}]}],
                 "volumes": [{"name": "config", "configMap": {"name": "config"}}]}})
}

/// What the server answered: `Ok`, or its message.
fn answer<T>(r: Result<T, kube::Error>) -> Result<(), String> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err(s.message),
        Err(e) => Err(format!("not an API answer: {e}")),
    }
}

/// A pods/status patch of `pod` as the holder of `kubeconfig`, as confgate sends it (no GET first): a
/// condition, and `labels` when given.
fn patch_status(kubeconfig: &Path, pod: &str, labels: Option<Value>) -> Result<(), String> {
    let mut patch = json!({"status": {"conditions": [
        {"type": "confgate.io/config-compatible", "status": "True", "reason": "Accepted"}]}});
    if let Some(l) = labels {
        patch["metadata"] = json!({"labels": l});
    }
    runtime().block_on(async {
        let pods: Api<Pod> = Api::namespaced(client(kubeconfig).await, NS);
        answer(
            pods.patch_status(pod, &PatchParams::default(), &Patch::Strategic(patch))
                .await,
        )
    })
}

/// An Event regarding `pod`, created as the holder of `kubeconfig`.
fn event_about(kubeconfig: &Path, pod: &str) -> Result<(), String> {
    let event: Event =
        serde_json::from_value(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"generateName": "confgate-", "namespace": NS},
        "eventTime": "2026-12-04T00:00:00.000000Z",
        "reportingController": "confgate.io/sidecar", "reportingInstance": "test",
        "action": "Judge", "reason": "Accepted", "type": "Normal", "note": "accepted",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": pod}}))
        .unwrap();
    runtime().block_on(async {
        let events: Api<Event> = Api::namespaced(client(kubeconfig).await, NS);
        answer(events.create(&PostParams::default(), &event).await)
    })
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (see tests/cluster/main.rs)"]
fn inject_keeps_the_pods_identity_and_its_reporting_to_its_own_pod() {
    let c = cluster();
    c.namespaces(&[NS]);
    c.kubectl_ok(
        &[
            "label",
            "namespace",
            NS,
            "confgate-test=own-pod",
            "--overwrite",
        ],
        "",
    );
    // What kube-controller-manager, which does not run here, makes in every namespace.
    c.kubectl_ok(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": NS}})
        .to_string(),
    );

    // inject's output, as a user applies it: a first plain `kubectl apply -f`, bare Pods included.
    let input: String = ["a", "b"]
        .iter()
        .map(|n| format!("{}\n---\n", pod(n)))
        .collect();
    let mut cmd = confgate();
    cmd.arg("inject");
    let out = common::output_with_stdin(cmd, &input);
    assert!(out.status.success(), "{}", said(&out));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple::<Value>(&String::from_utf8_lossy(&out.stdout))
            .unwrap()
            .into_iter()
            .filter(|d| d["kind"] != "ValidatingAdmissionPolicyBinding")
            .collect();
    // One document per object, in inject's order, as the YAML stream has them.
    let stream: String = docs.iter().map(|d| format!("{d}\n")).collect();
    c.kubectl_ok(&["apply", "-n", NS, "-f", "-"], &stream);
    for p in ["a", "b"] {
        let account = c.kubectl_ok(
            &[
                "get",
                "pod",
                p,
                "-n",
                NS,
                "-o",
                "jsonpath={.spec.serviceAccountName} {.spec.automountServiceAccountToken}",
            ],
            "",
        );
        // The API server's default, as for any pod that names none: inject changed nothing.
        assert_eq!(account.trim(), "default", "pod {p} runs as");
    }

    let dir = tempfile::tempdir().unwrap();
    let uid = c.kubectl_ok(
        &[
            "get",
            "pod",
            "a",
            "-n",
            NS,
            "-o",
            "jsonpath={.metadata.uid}",
        ],
        "",
    );
    let bound = c.kubectl_ok(
        &[
            "create",
            "token",
            "default",
            "-n",
            NS,
            "--bound-object-kind=Pod",
            "--bound-object-name=a",
            &format!("--bound-object-uid={}", uid.trim()),
        ],
        "",
    );
    let as_a = dir.path().join("a.kubeconfig");
    c.kubeconfig(&as_a, bound.trim(), NS);
    let unbound = c.kubectl_ok(&["create", "token", "default", "-n", NS], "");
    let as_nobody = dir.path().join("unbound.kubeconfig");
    c.kubeconfig(&as_nobody, unbound.trim(), NS);

    // RBAC alone: the Role's rights without its marker let pod a's token patch every pod's status,
    // labels included. (The suite's API server is shared, and a test applying the shipped manifests
    // binds the policy cluster-wide; it leaves the holders of an unmarked Role alone.)
    let role = docs
        .iter()
        .find(|d| d["kind"] == "Role")
        .expect("inject adds a Role")
        .clone();
    let mut unmarked = role.clone();
    unmarked["rules"] = json!(
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["apiGroups"][0] != "confgate.io")
            .cloned()
            .collect::<Vec<_>>()
    );
    c.kubectl_ok(&["apply", "-n", NS, "-f", "-"], &unmarked.to_string());
    poll("RBAC alone to let pod a patch pod b", LOADED, || {
        patch_status(&as_a, "b", None).ok()
    });
    c.kubectl_ok(&["apply", "-n", NS, "-f", "-"], &role.to_string());

    // The policy bound to this namespace; the server loads it within a few seconds.
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "confgate-own-pod-test"},
        "spec": {"policyName": confgate::inject::OWN_POD_POLICY, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"confgate-test": "own-pod"}}}}});
    c.kubectl_ok(&["apply", "-f", "-"], &binding.to_string());
    let refused = poll(
        "the policy to refuse a patch of another pod",
        LOADED,
        || patch_status(&as_a, "b", None).err(),
    );
    assert!(
        refused.contains("Role confgate-reporter lets pod a patch its own status only, not pod b"),
        "{refused}"
    );

    // Its own status: allowed; its own labels: refused.
    assert_eq!(patch_status(&as_a, "a", None), Ok(()), "its own status");
    let labels = patch_status(&as_a, "a", Some(json!({"app": "b"})));
    assert!(
        labels
            .as_ref()
            .is_err_and(|e| e.contains("does not let a pod change its labels")),
        "{labels:?}"
    );

    // Events about itself only.
    assert_eq!(event_about(&as_a, "a"), Ok(()), "an Event about itself");
    let other = event_about(&as_a, "b");
    assert!(
        other
            .as_ref()
            .is_err_and(|e| e.contains("lets pod a make Events about itself only")),
        "{other:?}"
    );

    // A token bound to no pod cannot prove which pod it speaks for.
    let unbound = patch_status(&as_nobody, "a", None);
    assert!(
        unbound
            .as_ref()
            .is_err_and(|e| e.contains("this token names no pod")),
        "{unbound:?}"
    );

    // Users without the marker (here the admin, who holds every right) are not matched.
    let admin = c.kubectl_with(
        &[
            "patch",
            "pod",
            "b",
            "-n",
            NS,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"app":"moved"}}}"#,
        ],
        "",
    );
    assert!(admin.status.success(), "the admin: {}", said(&admin));
}
