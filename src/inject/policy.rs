//! `inject --policy`: the MutatingAdmissionPolicy and binding that add the same sidecar at admission.

use serde_json::{Value, json};

use super::model::*;
use super::parts::*;
use super::pod::check_image;
use super::report::*;

/// How many containers (and, apart, init containers) a pod may have for the policy to inject it: CEL
/// has no loop over indexes, so each index is a mutation of its own.
pub const POLICY_MAX_CONTAINERS: usize = 8;

/// A JSON value as a CEL literal; the string `hole` becomes the expression `fill`.
pub(super) fn cel_literal(v: &Value, hole: &str, fill: &str, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) if s == hole => out.push_str(fill),
        // A JSON string is a CEL string literal: the same quotes and escapes.
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                cel_literal(x, hole, fill, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                cel_literal(x, hole, fill, out);
            }
            out.push('}');
        }
    }
}

/// A JSON object as a typed CEL object of the pod's schema at `path` (`Object.spec.volumes`): the API
/// server's CEL wants aggregate literals of one type, which a container's fields are not. A map-typed
/// field (resource quantities) stays a map literal; the string `hole` becomes `fill`.
pub(super) fn cel_typed(v: &Value, path: &str, hole: &str, fill: &str, out: &mut String) {
    match v {
        Value::Object(m) if !path.ends_with(".limits") && !path.ends_with(".requests") => {
            out.push_str(path);
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push_str(": ");
                cel_typed(x, &format!("{path}.{k}"), hole, fill, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                cel_typed(x, path, hole, fill, out);
            }
            out.push(']');
        }
        _ => cel_literal(v, hole, fill, out),
    }
}

/// `confgate inject --policy`: a MutatingAdmissionPolicy and its binding that add the same sidecar
/// `inject` adds to pods labelled [`INJECT_LABEL`] that carry `confgate.io/accepts`, at admission, in
/// the API server (CEL; no webhook, no certificate), and, when they report, the own-pod policy.
///
/// What it does, as `inject` does for a pod in the common case: the ConfigMap volume (named by
/// [`VOLUME_ANNOTATION`], or the pod's only one) becomes `optional`, every mount of it in the other
/// containers reads the promoted copy, the three volumes are appended and confgate is the first init
/// container, on port 9797. Never the ServiceAccount. What it cannot see to (a port 9797 taken, the
/// node's network, a signal reload, a checker to copy in, a projected volume, `subPath`, more than
/// [`POLICY_MAX_CONTAINERS`] containers) is left to `inject`: such a pod is not matched.
/// `failurePolicy: Fail`: a labelled pod asked for the gate, and one created without it would run on
/// the raw ConfigMap unseen; only labelled pods can be refused. `reinvocationPolicy: IfNeeded`, and a
/// pod already carrying a `confgate` container is not matched, so it is idempotent.
pub fn admission_policy(opts: &Options, own_namespace: &str) -> Vec<Value> {
    const HOLE: &str = "\u{0}volume";
    let mut container = sidecar(HOLE, opts, PORT, None);
    container.as_object_mut().expect("a map").remove("env");
    if opts.pod_report {
        let env: Vec<Value> = [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
            ("POD_UID", "metadata.uid"),
        ]
        .iter()
        .map(|(n, f)| json!({"name": n, "valueFrom": {"fieldRef": {"fieldPath": f}}}))
        .collect();
        container["env"] = env.into();
    }
    let mut literal = String::new();
    cel_typed(
        &container,
        "Object.spec.initContainers",
        HOLE,
        "variables.volume",
        &mut literal,
    );
    let mut volumes = vec![
        json!({"name": ACTIVE_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}}),
        json!({"name": PODINFO_VOLUME, "downwardAPI": {"items": [
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}),
    ];
    if opts.pod_report {
        let mut t = token_volume();
        t["name"] = TOKEN_VOLUME.into();
        volumes.push(t);
    }
    let jp = |expression: String| json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}});
    let mut mutations = Vec::new();
    // Every mount of the ConfigMap volume in another container now reads the promoted copy, at the
    // same path: its name and readOnly, other fields kept.
    for list in ["initContainers", "containers"] {
        for i in 0..POLICY_MAX_CONTAINERS {
            let c = format!("object.spec.{list}[{i}]");
            let ops = |field: &str, value: &str| {
                format!(
                    "{c}.volumeMounts.filter(m, m.name == variables.volume).map(m, JSONPatch{{op: \
                     \"add\", path: \"/spec/{list}/{i}/volumeMounts/\" + \
                     string({c}.volumeMounts.indexOf(m)) + \"/{field}\", value: {value}}})"
                )
            };
            mutations.push(jp(format!(
                "has(object.spec.{list}) && size(object.spec.{list}) > {i} && \
                 has({c}.volumeMounts) ? {} + {} : []",
                ops("name", &format!("\"{ACTIVE_VOLUME}\"")),
                ops("readOnly", "true"),
            )));
        }
    }
    // The ConfigMap volume is optional (a missing one is the verdict "missing", not a pod stuck in
    // ContainerCreating), and the sidecar's volumes come after the pod's own.
    let mut appended = String::new();
    for v in &volumes {
        appended.push_str(", JSONPatch{op: \"add\", path: \"/spec/volumes/-\", value: ");
        cel_typed(
            v,
            "Object.spec.volumes",
            HOLE,
            "variables.volume",
            &mut appended,
        );
        appended.push('}');
    }
    mutations.push(jp(format!(
        "[JSONPatch{{op: \"add\", path: \"/spec/volumes/\" + \
         string(object.spec.volumes.map(v, v.name).indexOf(variables.volume)) + \
         \"/configMap/optional\", value: true}}{appended}]"
    )));
    // confgate first, so that later init containers and the component start only with an accepted
    // config. A pod with no init containers gets an empty list, then confgate appended: kube-apiserver
    // 1.36 cannot convert a list of typed objects as one patch's value (the request fails with a
    // panic in its handler, seen on the test bed's server).
    mutations.push(jp(format!(
        "has(object.spec.initContainers) && size(object.spec.initContainers) > 0 ? \
         [JSONPatch{{op: \"add\", path: \"/spec/initContainers/0\", value: {literal}}}] : \
         [JSONPatch{{op: \"add\", path: \"/spec/initContainers\", value: []}}, \
          JSONPatch{{op: \"add\", path: \"/spec/initContainers/-\", value: {literal}}}]"
    )));
    let annotation =
        |key: &str| format!("object.metadata.annotations[{}]", Value::String(key.into()));
    let names = |list: &str| format!("(has(object.spec.{list}) ? object.spec.{list} : [])");
    let volume = format!(
        "has(object.metadata.annotations) && {key:?} in object.metadata.annotations ? \
         {named} : (has(object.spec.volumes) && \
         size(object.spec.volumes.filter(v, has(v.configMap))) == 1 ? \
         object.spec.volumes.filter(v, has(v.configMap))[0].name : '')",
        key = VOLUME_ANNOTATION,
        named = annotation(VOLUME_ANNOTATION),
    );
    // Conditions cannot read the policy's variables: the volume's expression, in parentheses.
    let volume_in = format!("({volume})");
    let conditions = vec![
        json!({"name": "accepts", "expression": format!(
            "has(object.metadata.annotations) && {ACCEPTS:?} in object.metadata.annotations")}),
        json!({"name": "not-injected", "expression": format!(
            "!{}.exists(c, c.name == {CONTAINER:?}) && !{}.exists(c, c.name == {CONTAINER:?})",
            names("initContainers"), names("containers"))}),
        json!({"name": "a-configmap-volume", "expression": format!(
            "{volume_in} != '' && object.spec.volumes.exists(v, v.name == {volume_in} && has(v.configMap))")}),
        json!({"name": "what-inject-alone-sees-to", "expression": format!(
            "size({init}) <= {max} && size({regular}) <= {max} && \
             !(has(object.spec.hostNetwork) && object.spec.hostNetwork) && \
             !({init} + {regular}).exists(c, has(c.ports) && c.ports.exists(p, p.containerPort == {PORT})) && \
             !({init} + {regular}).exists(c, has(c.volumeMounts) && c.volumeMounts.exists(m, \
               m.name == {volume_in} && (has(m.subPath) || has(m.subPathExpr)))) && \
             !(has(object.metadata.annotations) && \
               ((\"confgate.io/reload\" in object.metadata.annotations && \
                 {reload}.startsWith('signal:')) || \"confgate.io/validate\" in object.metadata.annotations))",
            init = names("initContainers"), regular = names("containers"),
            max = POLICY_MAX_CONTAINERS, reload = annotation("confgate.io/reload"))}),
    ];
    let mut out = vec![
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": INJECT_POLICY},
            "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": "IfNeeded",
                "matchConstraints": {
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {},
                    "objectSelector": {},
                    "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["pods"], "scope": "*"}],
                },
                "variables": [{"name": "volume", "expression": volume}],
                "matchConditions": conditions,
                "mutations": mutations,
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": INJECT_POLICY},
            "spec": {
                "policyName": INJECT_POLICY,
                "matchResources": {
                    "objectSelector": {"matchLabels": {INJECT_LABEL.0: INJECT_LABEL.1}},
                    "namespaceSelector": {"matchExpressions": [{
                        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": ["kube-system", own_namespace],
                    }]},
                },
            },
        }),
    ];
    if opts.pod_report {
        out.splice(0..0, own_pod_policy());
    }
    out
}

/// The `--image` check `run` makes, for `--policy`.
pub fn check_policy_image(opts: &Options) -> Result<(), Error> {
    check_image(&opts.image).map_err(|problem| Error::Image {
        image: opts.image.clone(),
        problem,
    })
}
