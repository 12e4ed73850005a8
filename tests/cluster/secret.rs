//! A Secret source on a real API server: `confgate run --source secret:NS/NAME` as a ServiceAccount
//! whose Role reaches that one Secret (`manifests/rbac/secret-source.yaml`, `resourceNames`), promoting
//! and holding it as a ConfigMap source, while no surface a reader of the pod meets (`/status`,
//! `/metrics`, logs, the pod condition and pods/status, Events) shows a value or the content's plain
//! `sha256:`.

use confgate::snapshot::ContentHash;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::common::{get, poll};
use crate::server::cluster;
use crate::sidecar::{COMPATIBLE, CURRENT, DEADLINE, Sidecar, condition};

const NS: &str = "confgate-secret";
const SECRET: &str = "webhook-credentials";
/// Low-entropy values, the kind a plain hash gives away.
const OLD: &str = "pin-4821";
const NEW: &str = "pin-9307";

fn config(version: &str) -> String {
    format!("schemaVersion: {version}\n")
}

fn plain_hex(version: &str, token: &str) -> String {
    let c = config(version);
    let h = ContentHash::of([("config.yaml", c.as_bytes()), ("token", token.as_bytes())]);
    h.to_string().strip_prefix("sha256:").unwrap().to_owned()
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_secret_source_under_a_role_narrowed_to_it() {
    let c = cluster();
    let secrets: Vec<serde_json::Value> = [(SECRET, OLD), ("other", "not-for-confgate")]
        .into_iter()
        .map(|(name, token)| {
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": NS},
                "stringData": {"config.yaml": config("2.4.1"), "token": token}})
        })
        .collect();
    let sidecar = Sidecar::start(
        c,
        NS,
        &[
            "manifests/rbac/sidecar.yaml",
            "manifests/rbac/secret-source.yaml",
        ],
        &secrets,
        &format!("secret:{NS}/{SECRET}"),
        &[],
    );

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

    let gate = &sidecar.gate;
    let rt = &sidecar.view.rt;
    let secrets: Api<Secret> = Api::namespaced(sidecar.view.admin.clone(), NS);

    // Promoted as it is, reported with a sealed hash.
    let s = gate.wait_active("2.4.1");
    assert_eq!(sidecar.promoted("token").as_deref(), Some(OLD));
    assert_eq!(s["source"]["kind"], "secret", "{s}");
    sidecar.wait_condition("the condition True/Accepted", |c| {
        c.status == "True"
            && c.message
                .as_deref()
                .is_some_and(|m| m.starts_with("version 2.4.1 hmac-sha256:"))
    });

    // A too-new one is held.
    let patch = json!({"stringData": {"config.yaml": config("3.0.0"), "token": NEW}});
    rt.block_on(secrets.patch(SECRET, &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap();
    gate.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(sidecar.promoted("token").as_deref(), Some(OLD));
    // Held, not unready: the readiness condition stays True, the other says what is held.
    sidecar.wait_condition_of("config-current False/TooNew", CURRENT, |c| {
        c.status == "False" && c.reason.as_deref() == Some("TooNew")
    });
    let ready = condition(&sidecar.view.pod(), COMPATIBLE).unwrap();
    assert_eq!(ready.status, "True", "{ready:?}");
    poll("a Rejected Event", DEADLINE, || {
        sidecar
            .view
            .events()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Rejected"))
    });

    // Every surface, as one text: nothing of the content, nor its plain hash.
    let mut seen = String::new();
    for path in ["/status", "/metrics", "/readyz?verbose", "/livez?verbose"] {
        seen.push_str(&get(gate.port, path).unwrap().1);
    }
    seen.push_str(&gate.log_text());
    seen.push_str(&serde_json::to_string(&sidecar.view.pod().status).unwrap());
    seen.push_str(&serde_json::to_string(&sidecar.view.events()).unwrap());
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
