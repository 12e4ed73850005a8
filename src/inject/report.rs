//! The objects a reporting sidecar needs beside its pod: the Role and RoleBinding for the pod's own
//! ServiceAccount, and the own-pod policy that keeps them to the pod's own object.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::model::*;

/// The Role and the RoleBinding for `accounts` in namespace `ns`, with the known-good `records` of the
/// ConfigMaps they gate: what `manifests/native-sidecar/rbac.yaml` holds.
pub(super) fn reporting_objects(
    ns: Option<&str>,
    accounts: &BTreeSet<String>,
    records: &BTreeSet<String>,
) -> Vec<Value> {
    let meta = |name: &str| {
        let mut m = json!({"name": name});
        if let Some(ns) = ns {
            m["namespace"] = ns.into();
        }
        m
    };
    let mut out = Vec::new();
    let mut rules = match reporter_rules() {
        Value::Array(rules) => rules,
        _ => Vec::new(),
    };
    if !records.is_empty() {
        // The known-good records by name; their creation cannot be narrowed by name.
        rules.push(json!({"apiGroups": [""], "resources": ["configmaps"],
                          "resourceNames": records, "verbs": ["get", "patch"]}));
        rules.push(json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}));
    }
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(ROLE),
        "rules": rules,
    }));
    let subjects: Vec<Value> = accounts
        .iter()
        .map(|a| {
            let mut s = json!({"kind": "ServiceAccount", "name": a});
            if let Some(ns) = ns {
                s["namespace"] = ns.into();
            }
            s
        })
        .collect();
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(ROLE),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
        "subjects": subjects,
    }));
    out
}

/// The API group, resource and verb of the rule that marks a holder of `ROLE` for
/// [`OWN_POD_POLICY`]. Nothing serves it, so it grants nothing; the policy asks the authorizer
/// whether the request's user holds it.
pub const MARK: (&str, &str, &str) = ("confgate.io", "pods", "report-own-pod-only");
/// A verb no Role grants: a user allowed it holds a wildcard (`*`), so holds [`MARK`] by accident
/// (an admin, a controller with every right), and the policy leaves it alone.
pub(super) const UNGRANTED: &str = "no-role-grants-this";

/// [`ROLE`]'s rules: Events, `pods/status`, and [`MARK`].
pub(super) fn reporter_rules() -> Value {
    json!([
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        {"apiGroups": [MARK.0], "resources": [MARK.1], "verbs": [MARK.2]},
    ])
}

/// The ValidatingAdmissionPolicy and its binding that keep a holder of `ROLE` to its own pod.
///
/// RBAC cannot: pod and Event names are generated, so `resourceNames` cannot narrow either rule, and a
/// `pods/status` patch can change any pod's conditions, labels and annotations in the namespace. The
/// policy applies to requests from ServiceAccounts holding [`MARK`] (and no wildcard): it needs a token
/// bound to a pod (the kubelet's projected tokens are) and compares the pod it names with the object
/// (the `pods/status` patch's, or the Event's `regarding`). `failurePolicy: Fail`: it is a limit on
/// rights, so an error denies; it only ever meets marked users, whose reporting is retried.
pub fn own_pod_policy() -> Vec<Value> {
    let (group, resource, verb) = MARK;
    let marked = format!(
        "authorizer.group('{group}').resource('{resource}').namespace(request.namespace)\
         .check('{verb}').allowed() && !authorizer.group('{group}').resource('{resource}')\
         .namespace(request.namespace).check('{UNGRANTED}').allowed()"
    );
    let extra = |key: &str| {
        format!(
            "'authentication.kubernetes.io/{key}' in request.userInfo.extra && \
             size(request.userInfo.extra['authentication.kubernetes.io/{key}']) > 0 ? \
             request.userInfo.extra['authentication.kubernetes.io/{key}'][0] : ''"
        )
    };
    vec![
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": OWN_POD_POLICY},
            "spec": {
                "failurePolicy": "Fail",
                // With the server's defaults written out, so a later server-side apply of the same
                // object co-owns `matchConstraints` (an atomic field) instead of conflicting.
                "matchConstraints": {
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {},
                    "objectSelector": {},
                    "resourceRules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"],
                         "operations": ["UPDATE"], "scope": "*"},
                        {"apiGroups": ["events.k8s.io"], "apiVersions": ["v1"], "resources": ["events"],
                         "operations": ["CREATE", "UPDATE"], "scope": "*"},
                    ],
                },
                "matchConditions": [
                    // Cheap first: the kubelet and every user not a ServiceAccount are skipped here.
                    {"name": "a-service-account",
                     "expression": "request.userInfo.username.startsWith('system:serviceaccount:')"},
                    {"name": "holds-confgate-reporter", "expression": marked},
                ],
                "variables": [
                    {"name": "pod", "expression": extra("pod-name")},
                    {"name": "uid", "expression": extra("pod-uid")},
                ],
                "validations": [
                    {"expression": "variables.pod != ''",
                     "message": "Role confgate-reporter is for a ServiceAccount token bound to a pod \
                                 (as the kubelet mounts it); this token names no pod"},
                    {"expression": "request.resource.resource != 'pods' || \
                                    (object.metadata.name == variables.pod && \
                                    (variables.uid == '' || object.metadata.uid == variables.uid))",
                     "messageExpression": "'Role confgate-reporter lets pod ' + variables.pod + \
                                           ' patch its own status only, not pod ' + object.metadata.name"},
                    {"expression": "request.resource.resource != 'pods' || \
                                    (has(object.metadata.labels) == has(oldObject.metadata.labels) && \
                                    (!has(object.metadata.labels) || \
                                    object.metadata.labels == oldObject.metadata.labels))",
                     "message": "Role confgate-reporter does not let a pod change its labels through \
                                 pods/status (they choose the Services and the ReplicaSet it is part of)"},
                    {"expression": "request.resource.resource != 'events' || \
                                    (has(object.regarding) && has(object.regarding.kind) && \
                                    object.regarding.kind == 'Pod' && has(object.regarding.name) && \
                                    object.regarding.name == variables.pod)",
                     "messageExpression": "'Role confgate-reporter lets pod ' + variables.pod + \
                                           ' make Events about itself only'"},
                ],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": OWN_POD_POLICY},
            "spec": {"policyName": OWN_POD_POLICY, "validationActions": ["Deny"]},
        }),
    ]
}
