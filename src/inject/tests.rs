//! `inject`'s unit tests: the stream as a whole, the reporting objects and the policy.

use super::*;
use serde_json::{Value, json};

/// A bare Pod reading ConfigMap `config`, marked for injection, in `ns` when given.
fn pod(name: &str, ns: Option<&str>) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {ACCEPTS: "^1"}},
        "spec": {"containers": [{"name": "c", "image": "example/c:1",
                                 "volumeMounts": [{"name": "config", "mountPath": "/etc/c"}]}],
                 "volumes": [{"name": "config", "configMap": {"name": "config"}}]}});
    if let Some(ns) = ns {
        p["metadata"]["namespace"] = ns.into();
    }
    p
}

fn kinds_and_names(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| {
            let ns = d["metadata"]["namespace"].as_str().unwrap_or("-");
            format!(
                "{}/{ns}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// What inject adds comes before the documents that use it, the own-pod policy and its binding,
/// Roles, RoleBindings in that order; the input's documents keep theirs, and a Namespace ahead stays ahead.
#[test]
fn the_objects_inject_adds_come_before_the_pods_that_use_them() {
    let configmap =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config"}});
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}});
    let mut docs = vec![configmap.clone(), pod("a", None)];
    inject_all(&mut docs, &Options::default()).unwrap();
    assert_eq!(
        kinds_and_names(&docs),
        [
            "ValidatingAdmissionPolicy/-/confgate-own-pod",
            "ValidatingAdmissionPolicyBinding/-/confgate-own-pod",
            "Role/-/confgate-reporter",
            "RoleBinding/-/confgate-reporter",
            "ConfigMap/-/config",
            "Pod/-/a",
        ]
    );

    let mut docs = vec![
        namespace.clone(),
        configmap.clone(),
        pod("a", Some("shop")),
        namespace.clone(),
        pod("b", None),
    ];
    inject_all(&mut docs, &Options::default()).unwrap();
    assert_eq!(
        kinds_and_names(&docs),
        [
            "Namespace/-/shop",
            "ValidatingAdmissionPolicy/-/confgate-own-pod",
            "ValidatingAdmissionPolicyBinding/-/confgate-own-pod",
            "Role/-/confgate-reporter",
            "Role/shop/confgate-reporter",
            "RoleBinding/-/confgate-reporter",
            "RoleBinding/shop/confgate-reporter",
            "ConfigMap/-/config",
            "Pod/shop/a",
            "Namespace/-/shop",
            "Pod/-/b",
        ],
        "after the Namespace ahead of the first reporting pod, not the later one"
    );

    // Nothing reports: nothing added, nothing moved.
    let mut docs = vec![configmap.clone(), pod("a", None)];
    let opts = Options {
        pod_report: false,
        ..Options::default()
    };
    inject_all(&mut docs, &opts).unwrap();
    assert_eq!(kinds_and_names(&docs), ["ConfigMap/-/config", "Pod/-/a"]);
}

/// A pod keeps the ServiceAccount it runs as and its token automount, whether it names one or
/// not; the RoleBinding is to that account (`default` when it names none), and nothing else
/// about identities is added.
#[test]
fn inject_never_changes_what_a_pod_runs_as() {
    let mut named = pod("named", None);
    named["spec"]["serviceAccountName"] = "operator".into();
    let mut no_token = pod("no-token", None);
    no_token["spec"]["serviceAccountName"] = "webhook".into();
    no_token["spec"]["automountServiceAccountToken"] = false.into();
    let mut docs = vec![pod("bare", None), named, no_token];
    let summary = inject_all(&mut docs, &Options::default()).unwrap();
    let spec = |name: &str| {
        docs.iter()
            .find(|d| d["metadata"]["name"] == name && d["kind"] == "Pod")
            .unwrap()["spec"]
            .clone()
    };
    assert!(spec("bare").get("serviceAccountName").is_none());
    assert!(spec("bare").get("automountServiceAccountToken").is_none());
    assert_eq!(spec("named")["serviceAccountName"], "operator");
    assert!(spec("named").get("automountServiceAccountToken").is_none());
    assert_eq!(spec("no-token")["automountServiceAccountToken"], false);
    assert!(!docs.iter().any(|d| d["kind"] == "ServiceAccount"));
    let binding = docs.iter().find(|d| d["kind"] == "RoleBinding").unwrap();
    assert_eq!(
        binding["subjects"],
        json!([
            {"kind": "ServiceAccount", "name": "default"},
            {"kind": "ServiceAccount", "name": "operator"},
            {"kind": "ServiceAccount", "name": "webhook"},
        ])
    );
    let why = |name: &str| {
        summary
            .outcomes
            .iter()
            .find(|o| o.workload == format!("pod/{name}"))
            .unwrap()
            .why
            .clone()
    };
    assert!(
        why("bare").contains("the pod's own ServiceAccount default, unchanged"),
        "{}",
        why("bare")
    );
    assert!(
        why("no-token").contains("confgate's container alone holds webhook's token"),
        "{}",
        why("no-token")
    );
    assert!(!why("named").contains("alone holds"), "{}", why("named"));
    // Every object added is said, the binding with the accounts it grants to.
    assert_eq!(summary.added.len(), 4, "{:?}", summary.added);
    assert!(
        summary.added[3].contains("default, operator, webhook"),
        "{:?}",
        summary.added
    );
}

/// The policy and the Role's marker rule agree, and the shipped manifest is what inject adds.
#[test]
fn the_shipped_own_pod_policy_is_the_one_inject_adds() {
    let text = include_str!("../../manifests/own-pod/policy.yaml");
    let shipped = documents("policy.yaml", text).unwrap();
    assert_eq!(shipped, own_pod_policy());
    let rules = reporter_rules();
    assert_eq!(rules[2]["verbs"][0], MARK.2);
    let policy = serde_json::to_string(&own_pod_policy()[0]).unwrap();
    assert!(policy.contains(&format!("check('{}')", MARK.2)), "{policy}");
}

/// Each way an image reference is wrong is its own cause, with the message `--image` shows.
#[test]
fn each_bad_image_is_its_own_cause() {
    assert_eq!(check_image("localhost/confgate/confgate:0.1.0"), Ok(()));
    assert_eq!(check_image(""), Err(BadImage::Empty));
    assert_eq!(check_image("a b"), Err(BadImage::Holds(' ')));
    assert_eq!(check_image("a@sha256"), Err(BadImage::DigestForm));
    assert_eq!(check_image("a:-x"), Err(BadImage::Tag("-x".into())));
    assert_eq!(
        check_image("Upper"),
        Err(BadImage::NamePart("Upper".into()))
    );
    assert_eq!(
        BadImage::Tag("-x".into()).to_string(),
        "the tag \"-x\" is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"
    );
}
