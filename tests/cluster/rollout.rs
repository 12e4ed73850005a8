//! A rollout watched and gated with `confgate status` on a real API server: four pods, each with a
//! sidecar in API mode knowing its pod's UID; `status --wait` exits 0 once every pod applied what the
//! ConfigMap assigns it (and its summary counts the tracks), 1 at the first refusal, and 1 at the
//! timeout while a selected pod does not report.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::json;

use crate::common::Gate;
use crate::confgate;
use crate::server::{Cluster, cluster};
use ::confgate::rollout::{Bucket, Percent};

const CM: &str = "webhook-config";
const NS: &str = "confgate-rollout";
const PODS: [&str; 4] = ["web-0", "web-1", "web-2", "web-3"];
const SELECTOR: &str = "app.kubernetes.io/name=webhook";

fn manifest(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap()
        .replace("webhook-system", NS)
}

fn pod(c: &Cluster, name: &str) -> String {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app.kubernetes.io/name": "webhook"}},
        "spec": {"serviceAccountName": "confgate",
                 "containers": [{"name": "webhook", "image": "example/webhook:1"}]}});
    c.kubectl_ok(&["apply", "-f", "-"], &pod.to_string());
    c.kubectl_ok(
        &[
            "get",
            "pod",
            name,
            "-n",
            NS,
            "-o",
            "jsonpath={.metadata.uid}",
        ],
        "",
    )
}

/// A sidecar in API mode for pod `name`, with its UID from the downward API as `POD_UID`.
fn sidecar(c: &Cluster, dir: &Path, name: &str, uid: &str) -> Gate {
    let token = c.kubectl_ok(
        &["create", "token", "confgate", "-n", NS, "--duration=1h"],
        "",
    );
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    c.kubeconfig(&kubeconfig, token.trim(), NS);
    let mut cmd = c.confgate_tied();
    cmd.args(["run", "--accepts", ">=2.4.0, <3.0.0"])
        .args(["--version-from", "yaml:config.yaml#/schemaVersion"])
        .args(["--source", &format!("configmap:{NS}/{CM}")])
        .arg("--promote-to")
        .arg(dir.join(name).join("promoted"))
        .arg("--watch")
        .arg(dir.join(name).join("no-volume"))
        .arg("--annotations")
        .arg(dir.join(name).join("no-annotations"))
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", name)
        .env("POD_UID", uid)
        .env("POD_NAMESPACE", NS);
    let mut g = Gate::from_command(cmd, &dir.join(format!("{name}.log")));
    g.deadline = Duration::from_secs(30);
    g
}

fn status_wait(c: &Cluster, dir: &Path, selector: &str, timeout: &str) -> (Option<i32>, String) {
    let reader = dir.join("reader.kubeconfig");
    c.kubeconfig(&reader, &c.reader_token, NS);
    let out: Output = confgate()
        .args(["status", "-n", NS, "-l", selector, "--configmap", CM])
        .args(["--wait", "--timeout", timeout])
        .env("KUBECONFIG", &reader)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

fn patch(c: &Cluster, data: serde_json::Value) {
    c.kubectl_ok(
        &[
            "patch",
            "configmap",
            CM,
            "-n",
            NS,
            "--type",
            "merge",
            "-p",
            &json!({"data": data}).to_string(),
        ],
        "",
    );
}

fn config(version: &str) -> String {
    format!("schemaVersion: {version}\ngreeting: hello\n")
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn status_wait_gates_a_rollout() {
    let c = cluster();
    c.namespaces(&[NS]);
    for path in [
        "manifests/rbac/sidecar.yaml",
        "manifests/rbac/status-reader.yaml",
        "manifests/api-mode/configmap.yaml",
    ] {
        c.kubectl_ok(&["apply", "-f", "-"], &manifest(path));
    }
    let tmp = tempfile::tempdir().unwrap();
    let uids: Vec<String> = PODS.iter().map(|p| pod(c, p)).collect();
    let gates: Vec<Gate> = PODS
        .iter()
        .zip(&uids)
        .map(|(p, u)| sidecar(c, tmp.path(), p, u))
        .collect();
    for g in &gates {
        g.wait_active("2.4.1");
    }
    let (code, out) = status_wait(c, tmp.path(), SELECTOR, "60s");
    assert_eq!(code, Some(0), "{out}");

    // 50% on the candidate 2.5.0: each pod applies what its bucket assigns.
    patch(
        c,
        json!({"config.yaml.next": config("2.5.0"), "confgate.rollout": "50%"}),
    );
    let (code, out) = status_wait(c, tmp.path(), SELECTOR, "60s");
    assert_eq!(code, Some(0), "{out}");
    let half = Percent::parse("50%").unwrap();
    let on = uids
        .iter()
        .filter(|u| Bucket::of(u).on_candidate(half))
        .count();
    let stable = if on == PODS.len() {
        String::new()
    } else {
        " 2.4.1".into()
    };
    let candidate = if on == 0 {
        String::new()
    } else {
        " 2.5.0".into()
    };
    // No reload target and no component: no sidecar knows what was applied.
    let want = format!(
        "rollout 50% of config.yaml: {on}/4 pods on the candidate{candidate} (0 applied), {}/4 on stable{stable}, 0 refused",
        4 - on
    );
    assert!(out.contains(&want), "want {want:?} in:\n{out}");
    for (g, u) in gates.iter().zip(&uids) {
        let s = g.status();
        let track = if Bucket::of(u).on_candidate(half) {
            "candidate"
        } else {
            "stable"
        };
        assert_eq!(s["rollout"]["track"], track, "{s}");
    }

    // A candidate no pod accepts, at 100%: the first refusal ends the wait with 1 and the reason.
    patch(
        c,
        json!({"config.yaml.next": config("3.0.0"), "confgate.rollout": "100%"}),
    );
    for g in &gates {
        g.wait_status("the candidate held", |s| {
            s["rollout"]["held"]["verdict"] == "too-new"
        });
    }
    let (code, out) = status_wait(c, tmp.path(), SELECTOR, "60s");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("refused: pod web-0 holds the candidate version 3.0.0 sha256:"),
        "{out}"
    );
    assert!(
        out.contains("0/4 pods on the candidate (0 applied), 0/4 on stable, 4 refused (4 too-new)"),
        "{out}"
    );

    // Finished: the candidate's content in config.yaml, the rollout keys removed.
    c.kubectl_ok(
        &["patch", "configmap", CM, "-n", NS, "--type", "json", "-p",
          r#"[{"op":"remove","path":"/data/config.yaml.next"},{"op":"remove","path":"/data/confgate.rollout"}]"#],
        "",
    );
    patch(c, json!({"config.yaml": config("2.5.0")}));
    let (code, out) = status_wait(c, tmp.path(), SELECTOR, "60s");
    assert_eq!(code, Some(0), "{out}");

    // A selected pod with no sidecar never reports: the timeout ends the wait with 1.
    pod(c, "web-silent");
    let (code, out) = status_wait(c, tmp.path(), SELECTOR, "2s");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("timed out after 2 s: "), "{out}");
    assert!(out.contains("1 not reporting"), "{out}");
}
