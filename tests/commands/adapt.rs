//! The shipped manifests fit a cluster that is not the examples': the API-mode example follows its
//! ConfigMap's name and namespace everywhere (RBAC included, through kustomize `replacements`), and the
//! PodMonitor finds sidecars by their port, not by the examples' app labels.

use crate::common;

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
    let kubectl = common::tool("kubectl");
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
        if doc["kind"] == "Namespace" {
            assert_eq!(doc["metadata"]["name"], "edge", "{doc}");
        } else {
            assert_eq!(doc["metadata"]["namespace"], "edge", "{doc}");
        }
    }
    assert!(docs.iter().any(|d| d["kind"] == "Namespace"), "{yaml}");
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
    // kube-prometheus-stack selects PodMonitors by its Helm release label.
    assert_eq!(
        monitor["metadata"]["labels"]["release"], "kube-prometheus-stack",
        "{monitor}"
    );
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

/// The namespaces that exist in every cluster the examples are for (`flux-system`: Flux's own).
const GIVEN_NAMESPACES: &[&str] = &["default", "flux-system", "kube-system"];

/// Every pod spec in a document: any object with `containers` (a workload's template, a CronJob's, an
/// AnalysisTemplate's Job).
fn pod_specs<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if m.get("containers").is_some_and(Value::is_array) {
                out.push(v);
            }
            m.values().for_each(|c| pod_specs(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| pod_specs(c, out)),
        _ => {}
    }
}

/// What one example's build names and does not hold, and a token given to a container other than
/// confgate's.
fn unresolved(docs: &[Value], is_base: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let has = |kind: &str, ns: Option<&str>, name: &str| {
        docs.iter().any(|d| {
            d["kind"] == kind
                && d["metadata"]["name"] == name
                && (ns.is_none()
                    || d["metadata"]["namespace"].as_str().unwrap_or("default") == ns.unwrap())
        })
    };
    for d in docs {
        let kind = d["kind"].as_str().unwrap_or_default();
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        let ns = d["metadata"]["namespace"].as_str();
        // A base another example builds on may leave its namespace to that example.
        if let Some(ns) = ns
            && !is_base
            && !GIVEN_NAMESPACES.contains(&ns)
            && !has("Namespace", None, ns)
        {
            problems.push(format!("{kind}/{name}: namespace {ns} is created nowhere"));
        }
        let ns = ns.unwrap_or("default");
        let mut specs = Vec::new();
        pod_specs(d, &mut specs);
        for spec in specs {
            if let Some(sa) = spec["serviceAccountName"].as_str()
                && sa != "default"
                && !has("ServiceAccount", Some(ns), sa)
            {
                problems.push(format!(
                    "{kind}/{name}: ServiceAccount {sa} is created nowhere"
                ));
            }
            let containers: Vec<&Value> = ["containers", "initContainers"]
                .iter()
                .flat_map(|k| spec[*k].as_array().into_iter().flatten())
                .collect();
            let others = containers.iter().filter(|c| c["name"] != "confgate");
            // A node's own component in kube-system (kube-proxy) is an API client by nature: it is
            // its token; confgate's reporting is off there.
            if ns == "kube-system" {
                continue;
            }
            if spec["automountServiceAccountToken"] != false && others.clone().next().is_some() {
                problems.push(format!(
                    "{kind}/{name}: the ServiceAccount token is mounted into every container"
                ));
            }
            let token_volumes: Vec<&str> = spec["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| {
                    v["projected"]["sources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|s| s.get("serviceAccountToken").is_some())
                })
                .filter_map(|v| v["name"].as_str())
                .collect();
            for c in others {
                for m in c["volumeMounts"].as_array().into_iter().flatten() {
                    if m["name"]
                        .as_str()
                        .is_some_and(|n| token_volumes.contains(&n))
                    {
                        problems.push(format!(
                            "{kind}/{name}: container {} gets the token",
                            c["name"]
                        ));
                    }
                }
            }
        }
        if kind == "RoleBinding" {
            for s in d["subjects"].as_array().into_iter().flatten() {
                let sa = s["name"].as_str().unwrap_or_default();
                let sns = s["namespace"].as_str().unwrap_or(ns);
                if s["kind"] == "ServiceAccount" && !has("ServiceAccount", Some(sns), sa) {
                    problems.push(format!(
                        "RoleBinding/{name}: ServiceAccount {sns}/{sa} is created nowhere"
                    ));
                }
            }
        }
        if kind == "Role" {
            for rule in d["rules"].as_array().into_iter().flatten() {
                let configmaps = rule["resources"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r == "configmaps"));
                for rn in rule["resourceNames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|_| configmaps)
                {
                    let cm = rn.as_str().unwrap_or_default();
                    // The known-good record is created by the first pod whose trial passes.
                    let record = cm.ends_with(".confgate-known-good");
                    if !is_base && !record && !has("ConfigMap", Some(ns), cm) {
                        problems.push(format!(
                            "Role/{name}: ConfigMap {ns}/{cm} is in no example beside it"
                        ));
                    }
                }
            }
        }
    }
    problems
}

/// Every example builds with `kubectl kustomize` and applies as built on a fresh cluster: each
/// namespace it uses is created in it (or exists everywhere), each ServiceAccount a pod runs as or a
/// RoleBinding names is in it, each Role's ConfigMap is the example's own, and only confgate's container
/// gets a ServiceAccount token. A base other examples build on (`rbac`) leaves namespace and ConfigMap to
/// them.
#[test]
fn every_example_builds_and_what_it_names_is_in_it() {
    let kubectl = common::tool("kubectl");
    let dirs: Vec<std::path::PathBuf> = std::fs::read_dir(manifests())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|d| d.join("kustomization.yaml").is_file())
        .collect();
    let kustomizations: String = dirs
        .iter()
        .map(|d| std::fs::read_to_string(d.join("kustomization.yaml")).unwrap())
        .collect();
    let mut problems = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_str().unwrap();
        let is_base = kustomizations.contains(&format!("- ../{name}\n"));
        let docs = documents(&kustomize(&kubectl, dir));
        problems.extend(
            unresolved(&docs, is_base)
                .into_iter()
                .map(|p| format!("{name}: {p}")),
        );
    }
    assert!(problems.is_empty(), "{problems:#?}");

    // Not vacuous: the API-mode example without its Namespace, its token for every container, and the
    // rollout without the ServiceAccount its analysis runs as.
    let api = documents(&kustomize(&kubectl, &manifests().join("api-mode")));
    let mut broken: Vec<Value> = api
        .iter()
        .filter(|d| d["kind"] != "Namespace")
        .cloned()
        .collect();
    for d in &mut broken {
        if d["kind"] == "Deployment" {
            d["spec"]["template"]["spec"]["automountServiceAccountToken"] = Value::Bool(true);
        }
    }
    let found = unresolved(&broken, false);
    assert!(
        found
            .iter()
            .any(|p| p.contains("namespace webhook-system is created nowhere")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("token is mounted into every container")),
        "{found:?}"
    );
    let rollout = documents(&kustomize(&kubectl, &manifests().join("rollout")));
    let broken: Vec<Value> = rollout
        .into_iter()
        .filter(|d| d["kind"] != "ServiceAccount")
        .collect();
    let found = unresolved(&broken, false);
    assert!(
        found
            .iter()
            .any(|p| p.contains("ServiceAccount confgate-status is created nowhere")),
        "{found:?}"
    );
}

/// A placeholder a user must replace is announced where `kubectl apply -k` starts: the kustomization of
/// the directory holding it says to edit it first.
#[test]
fn a_placeholder_account_is_marked_edit_first() {
    let mut seen = 0;
    for dir in ["admission/aws-auth"] {
        let dir = manifests().join(dir);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains("111122223333") {
                seen += 1;
                let kustomization =
                    std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
                assert!(
                    kustomization.starts_with("# EDIT FIRST:")
                        && kustomization.contains("111122223333"),
                    "{} names the placeholder account, and its kustomization does not say to edit it",
                    path.display()
                );
            }
        }
    }
    assert!(seen > 0);
}

/// Two examples applied into one namespace do not overwrite each other: an object (kind, namespace,
/// name) that two examples hold is the same object in both (the ServiceAccount `confgate` and its Role
/// may be shared, a Deployment or ConfigMap may not).
#[test]
fn no_two_examples_hold_different_objects_of_one_name() {
    let kubectl = common::tool("kubectl");
    let mut seen: std::collections::BTreeMap<(String, String, String), (String, Value)> =
        std::collections::BTreeMap::new();
    let mut clashes = Vec::new();
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(manifests())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|d| d.join("kustomization.yaml").is_file())
        .collect();
    dirs.sort();
    for dir in &dirs {
        let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
        // A Component is no example of its own: it is built through component-example.
        if text.contains("kind: Component\n") {
            continue;
        }
        let example = dir.file_name().unwrap().to_str().unwrap().to_owned();
        for d in documents(&kustomize(&kubectl, dir)) {
            let s = |p: &str| {
                d.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            let key = (s("/kind"), s("/metadata/namespace"), s("/metadata/name"));
            match seen.get(&key) {
                Some((other, first)) if *first != d => {
                    clashes.push(format!("{key:?} differs in {other} and {example}"));
                }
                Some(_) => {}
                None => {
                    seen.insert(key, (example.clone(), d));
                }
            }
        }
    }
    assert!(clashes.is_empty(), "{clashes:#?}");
    assert!(
        seen.keys().any(|(k, _, _)| k == "Deployment"),
        "nothing read"
    );
}
