//! A Secret source on a real API server: `confgate run --source secret:NS/NAME` as a ServiceAccount
//! whose Role reaches that one Secret (`manifests/rbac/secret-source.yaml`, `resourceNames`), promoting
//! and holding it as a ConfigMap source, while no surface a reader of the pod meets (`/status`,
//! `/metrics`, logs, the pod condition and pods/status, Events) shows a value or the content's plain
//! `sha256:`.

use std::path::Path;

use confgate::snapshot::ContentHash;
use k8s_openapi::api::core::v1::{Pod, PodCondition, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common::{Gate, get};
use crate::poll;
use crate::server::{client, cluster, runtime};

const NS: &str = "confgate-secret";
const SECRET: &str = "webhook-credentials";
const POD: &str = "web-0";
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);
/// Low-entropy values, the kind a plain hash gives away.
const OLD: &str = "pin-4821";
const NEW: &str = "pin-9307";

fn manifest(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap()
        .replace("webhook-system", NS)
}

fn config(version: &str) -> String {
    format!("schemaVersion: {version}\n")
}

fn plain_hex(version: &str, token: &str) -> String {
    let c = config(version);
    let h = ContentHash::of([("config.yaml", c.as_bytes()), ("token", token.as_bytes())]);
    h.to_string().strip_prefix("sha256:").unwrap().to_owned()
}

fn condition(pod: &Pod, type_: &str) -> Option<PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

#[test]
fn a_secret_source_under_a_role_narrowed_to_it() {
    let Some(c) = cluster() else { return };
    c.namespaces(&[NS]);
    for path in [
        "manifests/rbac/sidecar.yaml",
        "manifests/rbac/secret-source.yaml",
    ] {
        c.kubectl_ok(&["apply", "-f", "-"], &manifest(path));
    }
    for (name, token) in [(SECRET, OLD), ("other", "not-for-confgate")] {
        let s = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": NS},
            "stringData": {"config.yaml": config("2.4.1"), "token": token}});
        c.kubectl_ok(&["apply", "-f", "-"], &s.to_string());
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": POD, "namespace": NS},
        "spec": {"serviceAccountName": "confgate",
                 "readinessGates": [{"conditionType": "confgate.io/config-compatible"}],
                 "containers": [{"name": "webhook", "image": "example/webhook:1"}]}});
    c.kubectl_ok(&["apply", "-f", "-"], &pod.to_string());

    // The Role reaches this Secret and no other.
    let sa = format!("--as=system:serviceaccount:{NS}:confgate");
    for (what, expected) in [
        (format!("secrets/{SECRET}"), "yes"),
        ("secrets/other".to_owned(), "no"),
    ] {
        for verb in ["get", "watch"] {
            let out = c.kubectl_with(&["auth", "can-i", verb, &what, "-n", NS, &sa], "");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                expected,
                "{verb} {what}"
            );
        }
    }

    let token = c.kubectl_ok(
        &["create", "token", "confgate", "-n", NS, "--duration=1h"],
        "",
    );
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("sidecar.kubeconfig");
    c.kubeconfig(&kubeconfig, token.trim(), NS);
    let mut cmd = c.confgate_tied();
    cmd.args(["run", "--accepts", ">=2.4.0, <3.0.0"])
        .args(["--version-from", "yaml:config.yaml#/schemaVersion"])
        .args(["--source", &format!("secret:{NS}/{SECRET}")])
        .arg("--promote-to")
        .arg(tmp.path().join("promoted"))
        .arg("--watch")
        .arg(tmp.path().join("no-volume"))
        .arg("--annotations")
        .arg(tmp.path().join("no-annotations"))
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", POD)
        .env("POD_NAMESPACE", NS);
    let mut gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
    gate.deadline = DEADLINE;
    let promoted = |key: &str| std::fs::read_to_string(tmp.path().join("promoted").join(key)).ok();

    let rt = runtime();
    let admin = rt.block_on(client(&c.admin));
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let events: Api<Event> = Api::namespaced(admin, NS);
    let wait_condition = |what: &str, type_: &str, pred: &dyn Fn(&PodCondition) -> bool| {
        poll(what, DEADLINE, || {
            condition(&rt.block_on(pods.get(POD)).unwrap(), type_).filter(|c| pred(c))
        })
    };
    let our_events = || -> Vec<Event> {
        rt.block_on(events.list(&ListParams::default()))
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(POD))
            .collect()
    };

    // Promoted as it is, reported with a sealed hash.
    let s = gate.wait_active("2.4.1");
    assert_eq!(promoted("token").as_deref(), Some(OLD));
    assert_eq!(s["source"]["kind"], "secret", "{s}");
    wait_condition(
        "the condition True/Accepted",
        "confgate.io/config-compatible",
        &|c| {
            c.status == "True"
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("version 2.4.1 hmac-sha256:"))
        },
    );

    // A too-new one is held.
    let patch = json!({"stringData": {"config.yaml": config("3.0.0"), "token": NEW}});
    rt.block_on(secrets.patch(SECRET, &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap();
    gate.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(promoted("token").as_deref(), Some(OLD));
    // Held, not unready: the readiness condition stays True, the other says what is held.
    wait_condition(
        "config-current False/TooNew",
        "confgate.io/config-current",
        &|c| c.status == "False" && c.reason.as_deref() == Some("TooNew"),
    );
    let pod = rt.block_on(pods.get(POD)).unwrap();
    let ready = condition(&pod, "confgate.io/config-compatible").unwrap();
    assert_eq!(ready.status, "True", "{ready:?}");
    poll("a Rejected Event", DEADLINE, || {
        our_events()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Rejected"))
    });

    // Every surface, as one text: nothing of the content, nor its plain hash.
    let mut seen = String::new();
    for path in ["/status", "/metrics", "/readyz?verbose", "/livez?verbose"] {
        seen.push_str(&get(gate.port, path).unwrap().1);
    }
    seen.push_str(&gate.log_text());
    let pod = rt.block_on(pods.get(POD)).unwrap();
    seen.push_str(&serde_json::to_string(&pod.status).unwrap());
    seen.push_str(&serde_json::to_string(&our_events()).unwrap());
    assert!(seen.contains("hmac-sha256:"), "{seen}");
    for value in [OLD, NEW] {
        assert!(!seen.contains(value), "{value} is shown:\n{seen}");
        let b64 = k8s_openapi::ByteString(value.as_bytes().to_vec());
        let b64 = serde_json::to_string(&b64).unwrap();
        assert!(
            !seen.contains(b64.trim_matches('"')),
            "{b64} is shown:\n{seen}"
        );
    }
    for (version, token) in [("2.4.1", OLD), ("3.0.0", NEW)] {
        let hex = plain_hex(version, token);
        assert!(
            !seen.contains(&hex[..12]),
            "the plain hash {hex} is shown:\n{seen}"
        );
    }
    let log = gate.log_text();
    assert!(!log.contains("forbidden"), "{log}");
}
