//! The shipped manifests fit a cluster that is not the examples': the API-mode example follows its
//! ConfigMap's name and namespace everywhere (RBAC included, through kustomize `replacements`), and the
//! PodMonitor finds sidecars by their port, not by the examples' app labels.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn manifests() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/manifests"))
}

fn documents(yaml: &str) -> Vec<Value> {
    confgate::inject::documents("test", yaml).unwrap()
}

fn kustomize(kubectl: &Path, dir: &Path) -> String {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Renaming the ConfigMap and moving it to another namespace, in configmap.yaml alone, moves every object
/// and renames every reference: the Roles' resourceNames, the RoleBinding's subject, `--source`.
#[test]
fn the_api_mode_example_follows_its_config_maps_name_and_namespace() {
    let Some(kubectl) = common::tool("kubectl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&manifests().join("api-mode"), &dir.path().join("api-mode"));
    copy_dir(&manifests().join("rbac"), &dir.path().join("rbac"));
    let configmap = dir.path().join("api-mode/configmap.yaml");
    let text = std::fs::read_to_string(&configmap).unwrap();
    assert!(text.contains("  name: webhook-config\n  namespace: webhook-system\n"));
    std::fs::write(
        &configmap,
        text.replace(
            "  name: webhook-config\n  namespace: webhook-system\n",
            "  name: gateway-settings\n  namespace: edge\n",
        ),
    )
    .unwrap();
    let yaml = kustomize(&kubectl, &dir.path().join("api-mode"));
    for old in ["webhook-config", "webhook-system"] {
        assert!(!yaml.contains(old), "{old} is still named:\n{yaml}");
    }
    let docs = documents(&yaml);
    assert!(docs.len() >= 6, "{yaml}");
    for doc in &docs {
        assert_eq!(doc["metadata"]["namespace"], "edge", "{doc}");
    }
    let role = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Role {name}"))
    };
    assert_eq!(
        role("confgate")["rules"][0]["resourceNames"],
        serde_json::json!(["gateway-settings"])
    );
    assert_eq!(
        role("confgate-status-reader")["rules"][1]["resourceNames"],
        serde_json::json!(["gateway-settings"])
    );
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "RoleBinding" && d["metadata"]["name"] == "confgate")
        .unwrap();
    assert_eq!(binding["subjects"][0]["namespace"], "edge");
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let args = &deployment["spec"]["template"]["spec"]["initContainers"][0]["args"];
    assert_eq!(args[1], "--source");
    assert_eq!(args[2], "configmap:edge/gateway-settings");

    // Unchanged, the example is what its files say.
    let shipped = kustomize(&kubectl, &manifests().join("api-mode"));
    assert!(shipped.contains("- configmap:webhook-system/webhook-config\n"));
}

/// The PodMonitor selects no app label: it keeps every pod with the sidecar's named port, which every
/// shipped workload and `confgate inject` declare.
#[test]
fn the_pod_monitor_finds_sidecars_by_their_port_not_by_app_labels() {
    let text = std::fs::read_to_string(manifests().join("monitoring/podmonitor.yaml")).unwrap();
    let monitor = &documents(&text)[0];
    assert_eq!(monitor["kind"], "PodMonitor");
    assert_eq!(
        monitor["spec"]["selector"],
        serde_json::json!({}),
        "the selector names no labels"
    );
    assert_eq!(monitor["spec"]["namespaceSelector"]["any"], true);
    let port = monitor["spec"]["podMetricsEndpoints"][0]["port"]
        .as_str()
        .unwrap();
    // Every confgate container of the examples declares that port.
    let mut seen = 0;
    for dir in [
        "native-sidecar",
        "classic",
        "signal-reload",
        "api-mode",
        "variants",
    ] {
        for entry in std::fs::read_dir(manifests().join(dir)).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for doc in documents(&text) {
                let spec = &doc["spec"]["template"]["spec"];
                let containers = spec["initContainers"]
                    .as_array()
                    .into_iter()
                    .chain(spec["containers"].as_array())
                    .flatten();
                for c in containers.filter(|c| c["name"] == "confgate") {
                    seen += 1;
                    let ports = c["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                    assert!(
                        ports.iter().any(|p| p["name"] == port),
                        "{dir}: the confgate container declares no port named {port}"
                    );
                }
            }
        }
    }
    assert!(seen >= 5, "found {seen} confgate containers");
}
