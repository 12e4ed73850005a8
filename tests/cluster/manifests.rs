//! The shipped manifests and `confgate inject`'s output, applied with server-side dry-run: the API
//! server's own validation, defaulting and admission, strict field validation, and no warnings.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::server::cluster;
use crate::{common, confgate};

/// API groups the manifests use that a bare API server does not serve: their CRDs come with the
/// operator the manifest is for.
const NEEDS_CRD: &[&str] = &[
    "monitoring.coreos.com/",
    "argoproj.io/",
    "kustomize.toolkit.fluxcd.io/",
];

fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// Every YAML file under `dir` but kustomization.yaml, and every directory with a kustomization.yaml.
fn walk(dir: &Path, files: &mut Vec<PathBuf>, kustomizations: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, files, kustomizations);
        } else if p.file_name().is_some_and(|n| n == "kustomization.yaml") {
            kustomizations.push(dir.to_path_buf());
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            files.push(p);
        }
    }
}

/// A kubeadm patch file (`manifests/static-pod/patches`): a fragment kubeadm merges into the manifest
/// it writes, not an object (`tests/commands/static_pods.rs` applies them as kubeadm does).
fn kubeadm_patch(file: &Path) -> bool {
    file.parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "patches")
}

/// Whether `doc` is an object the API server serves: a component's config file (kube-scheduler's,
/// kube-apiserver's admission configuration and audit policy, kubeadm's) is read from disk by the
/// component alone, and `.ci/validate-manifests` checks its shape.
fn is_api_object(doc: &Value) -> bool {
    let group = doc["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    !(group.ends_with(".config.k8s.io") || group == "audit.k8s.io" || group == "kubeadm.k8s.io")
}

/// Whether the kustomization.yaml beside `file` lists it under `resources`.
fn listed(file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file.with_file_name("kustomization.yaml")) else {
        return false;
    };
    let k: Value = serde_saphyr::from_str(&text).unwrap();
    let name = file.file_name().unwrap().to_str().unwrap();
    k["resources"]
        .as_array()
        .is_some_and(|r| r.iter().any(|r| r == name))
}

/// `kubectl apply --dry-run=server` of `docs` (client-side apply, as `kubectl apply -k` does, and
/// server-side apply), strict field validation; panics with what the server said unless every object
/// passed without a warning.
fn dry_run(c: &crate::server::Cluster, what: &str, namespace: Option<&str>, docs: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string();
    for mode in [
        &[][..],
        &["--server-side", "--field-manager=confgate-tests"][..],
    ] {
        let mut args = vec!["apply", "--dry-run=server", "--validate=strict", "-f", "-"];
        args.extend_from_slice(mode);
        if let Some(ns) = namespace {
            args.extend(["-n", ns]);
        }
        let out = c.kubectl_with(&args, &list);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.trim().is_empty(),
            "{what}: kubectl {args:?} ({}):\n{stdout}{stderr}",
            out.status
        );
        let applied = stdout.lines().filter(|l| l.ends_with("(server dry run)"));
        assert_eq!(applied.count(), docs.len(), "{what} {args:?}:\n{stdout}");
    }
}

/// The namespaces `docs` name, besides `default`.
fn namespaces_of(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .map(str::to_owned)
        .collect()
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn every_shipped_manifest_passes_server_side_dry_run() {
    let c = cluster();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let (mut files, mut kustomizations) = (Vec::new(), Vec::new());
    walk(&root, &mut files, &mut kustomizations);
    let mut streams: Vec<(String, Vec<Value>)> = Vec::new();
    for dir in &kustomizations {
        let yaml = c.kubectl_ok(&["kustomize", dir.to_str().unwrap()], "");
        streams.push((
            format!("kubectl kustomize {}", dir.display()),
            documents(&yaml),
        ));
    }
    // A file its kustomization lists is applied as built (a Component may complete it); any other
    // file alone.
    for f in files.iter().filter(|f| !listed(f) && !kubeadm_patch(f)) {
        let yaml = std::fs::read_to_string(f).unwrap();
        let docs: Vec<Value> = documents(&yaml).into_iter().filter(is_api_object).collect();
        if !docs.is_empty() {
            streams.push((f.display().to_string(), docs));
        }
    }
    let all: Vec<Value> = streams.iter().flat_map(|(_, d)| d.clone()).collect();
    let mut namespaces = namespaces_of(&all);
    namespaces.insert("default".into());
    // Client-side apply, as `kubectl apply -k` of an example that ships its own Namespace makes it:
    // a later apply of that Namespace finds the annotation it keeps and warns about nothing.
    let made: Vec<Value> = namespaces
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
        .collect();
    c.kubectl_ok(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "List", "items": made}).to_string(),
    );
    // What a controller-manager makes in every namespace; a Pod naming no ServiceAccount (the static
    // pod's) needs it to pass admission.
    let accounts: Vec<Value> = namespaces
        .iter()
        .map(|ns| {
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": "default", "namespace": ns}})
        })
        .collect();
    c.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=confgate-tests",
            "-f",
            "-",
        ],
        &json!({"apiVersion": "v1", "kind": "List", "items": accounts}).to_string(),
    );

    let mut applied = 0;
    let mut without_crd = BTreeSet::new();
    for (what, docs) in &streams {
        let (crd, served): (Vec<Value>, Vec<Value>) = docs.iter().cloned().partition(|d| {
            let api = d["apiVersion"].as_str().unwrap_or_default();
            NEEDS_CRD.iter().any(|g| api.starts_with(g))
        });
        without_crd.extend(
            crd.iter()
                .map(|d| format!("{}/{}", d["kind"].as_str().unwrap(), d["metadata"]["name"])),
        );
        if served.is_empty() {
            continue;
        }
        dry_run(c, what, None, &served);
        applied += served.len();
    }
    assert!(applied > 20, "only {applied} objects were applied");
    // The kinds that need a CRD are named, so a new one cannot slip by unapplied.
    assert_eq!(
        without_crd.into_iter().collect::<Vec<_>>(),
        [
            "AnalysisTemplate/\"confgate-rollout\"",
            "Kustomization/\"web\"",
            "PodMonitor/\"confgate\""
        ],
        "objects whose CRD this API server lacks"
    );
}

/// A bare workload of `kind` reading the ConfigMap `app-config`, with confgate's annotations.
fn workload(kind: &str, api: &str, name: &str) -> Value {
    let pod = json!({
        "metadata": {"labels": {"app": name},
                     "annotations": {"confgate.io/accepts": ">=2.4.0, <3.0.0",
                                     "confgate.io/version-from": "yaml:config.yaml#/schemaVersion"}},
        "spec": {
            "containers": [{"name": "app", "image": "example/app:1",
                            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]}],
            "volumes": [{"name": "config", "configMap": {"name": "app-config"}}]
        }
    });
    let selector = json!({"matchLabels": {"app": name}});
    let mut job_pod = pod.clone();
    job_pod["spec"]["restartPolicy"] = json!("OnFailure");
    let spec = match kind {
        "Pod" => pod["spec"].clone(),
        "Job" => json!({"template": job_pod}),
        "CronJob" => {
            json!({"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": job_pod}}})
        }
        "StatefulSet" => json!({"serviceName": name, "selector": selector, "template": pod}),
        _ => json!({"selector": selector, "template": pod}),
    };
    let mut doc =
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec});
    if kind == "Pod" {
        doc["metadata"] = pod["metadata"].clone();
        doc["metadata"]["name"] = json!(name);
    }
    doc
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn inject_output_passes_server_side_dry_run() {
    let c = cluster();
    let kinds = [
        ("Deployment", "apps/v1"),
        ("StatefulSet", "apps/v1"),
        ("DaemonSet", "apps/v1"),
        ("ReplicaSet", "apps/v1"),
        ("Job", "batch/v1"),
        ("CronJob", "batch/v1"),
        ("Pod", "v1"),
    ];
    let mut docs = vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "app-config"},
                               "data": {"config.yaml": "schemaVersion: 2.4.1\n"}})];
    for (kind, api) in kinds {
        docs.push(workload(kind, api, &kind.to_lowercase()));
    }
    let input: String = docs
        .iter()
        .map(|d| format!("---\n{}\n", serde_json::to_string(d).unwrap()))
        .collect();
    let mut cmd = confgate();
    cmd.arg("inject");
    let out = common::output_with_stdin(cmd, &input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "confgate inject: {stderr}");
    for (kind, _) in kinds {
        let k = kind.to_lowercase();
        assert!(stderr.contains(&format!("{k}/{k} injected")), "{stderr}");
    }
    let injected = documents(&String::from_utf8(out.stdout).unwrap());
    // First the own-pod policy and its binding, then the Role and RoleBinding the reporting sidecars
    // need; no ServiceAccount: the pods run as they did.
    assert_eq!(injected.len(), docs.len() + 4);
    let kinds_in_order: Vec<&str> = injected.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds_in_order[..4],
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "Role",
            "RoleBinding"
        ],
        "{kinds_in_order:?}"
    );
    let ns = "inject";
    c.namespaces(&[ns]);
    // The ServiceAccount controller is not running; a Pod needs its namespace's `default` account.
    c.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=confgate-tests",
            "-n",
            ns,
            "-f",
            "-",
        ],
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
            .to_string(),
    );
    dry_run(c, "confgate inject output", Some(ns), &injected);
}

/// A first plain `kubectl apply -f` of inject's output for a bare Pod, every document in the order
/// printed, is accepted for real: the own-pod policy, the Role and the RoleBinding come before it, and
/// the Pod runs as the ServiceAccount it named (none: `default`).
///
/// The policy's binding is left out of this real create: it is cluster-wide, and other tests of this
/// binary report with tokens bound to no pod, which it refuses (`own_pod.rs` binds it to a namespace
/// of its own and enforces it).
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn inject_output_of_a_bare_pod_is_created_in_one_plain_pass() {
    let c = cluster();
    let ns = "inject-create";
    c.namespaces(&[ns]);
    let input = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config"},
               "data": {"config.yaml": "schemaVersion: 2.4.1\n"}}),
        workload("Pod", "v1", "bare"),
    ]
    .iter()
    .map(|d| format!("---\n{d}\n"))
    .collect::<String>();
    let mut cmd = confgate();
    cmd.arg("inject");
    let out = common::output_with_stdin(cmd, &input);
    assert!(
        out.status.success(),
        "confgate inject: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: String = documents(&String::from_utf8(out.stdout).unwrap())
        .iter()
        .filter(|d| d["kind"] != "ValidatingAdmissionPolicyBinding")
        .map(|d| format!("---\n{d}\n"))
        .collect();
    // What kube-controller-manager, which does not run here, makes in every namespace.
    c.kubectl_ok(&["create", "serviceaccount", "default", "-n", ns], "");
    // The stream as printed, in one plain `kubectl apply`: each document made in turn, none retried
    // (the cluster-wide policy may exist already, from another test).
    let created = c.kubectl_with(&["apply", "-n", ns, "-f", "-"], &printed);
    let stdout = String::from_utf8_lossy(&created.stdout);
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(
        created.status.success() && stderr.trim().is_empty(),
        "kubectl apply ({}):\n{stdout}{stderr}",
        created.status
    );
    let kinds: Vec<String> = documents(&printed)
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Pod"
        ]
    );
    // The namespaced objects are made here; the cluster-wide policy may have been made before.
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.ends_with(" created") && !l.starts_with("validatingadmissionpolicy"))
            .count(),
        kinds.len() - 1,
        "every namespaced object made: {stdout}"
    );
    let pod: Value =
        serde_json::from_str(&c.kubectl_ok(&["get", "pod", "-n", ns, "bare", "-o", "json"], ""))
            .unwrap();
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
}
