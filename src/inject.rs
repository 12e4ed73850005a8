//! `confgate inject`: adds the confgate native sidecar to every workload whose pod template carries
//! `confgate.io/accepts`, in the shape of `manifests/native-sidecar/deployment.yaml`; other documents pass through.
//!
//! The component keeps its mount paths: its mounts of the ConfigMap volume are pointed at the promoted
//! `emptyDir` instead, and only confgate mounts the ConfigMap. A pod that already has a `confgate`
//! container is left as it is, so injecting twice changes nothing.
//!
//! The sidecar moves off 9797 when another container declares that port (`CONFGATE_LISTEN`, which
//! `run` and `probe` both read), and, for a `hostNetwork` pod, onto `127.0.0.1` at a port no other
//! `hostNetwork` pod of the stream holds (`Stream`, surveyed before injecting). A signal reload
//! gets what it needs of the pod (`signal_needs`: `shareProcessNamespace`, the component's user).
//! Unless `--pod-report off`, the sidecar reports to its pod with the pod's own identity, never
//! changed, and the Role and RoleBinding it needs, with the own-pod policy, are added ahead of the
//! stream's documents but after its leading Namespaces (`added_at`). A checker a template's
//! annotation names is the manifest author's, who writes the container spec too: it goes into the
//! sidecar's spec (`CONFGATE_VALIDATE`). A field of the wrong type it edits is an error, never a panic.

pub use crate::workloads::volumes::Unchosen;
use std::collections::{BTreeMap, BTreeSet};

use crate::settings::{Reload, Settings};
use crate::verdict::fix::ANN_VALIDATE;
use crate::workloads::volumes::shape;
use serde_json::{Map, Value, json};

/// The annotation that marks a pod for injection (the same one confgate needs to accept anything).
pub const ACCEPTS: &str = "confgate.io/accepts";
/// The sidecar's container name; its presence makes a pod count as injected.
pub(crate) const CONTAINER: &str = "confgate";
/// The promoted config, shared read-only with the component.
pub(crate) const ACTIVE_VOLUME: &str = "confgate-active";
/// The downward-API annotations file.
pub(crate) const PODINFO_VOLUME: &str = "confgate-podinfo";
/// The ServiceAccount token, mounted into the confgate container alone, for reporting to its pod.
pub(crate) const TOKEN_VOLUME: &str = "confgate-token";
/// Where the in-cluster client looks for the token, the CA and the namespace.
const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The ServiceAccount a pod that names none runs as (inject never changes it).
const DEFAULT_ACCOUNT: &str = "default";
/// The Role (and its binding) that lets the sidecar report, as in `manifests/native-sidecar/rbac.yaml`.
const ROLE: &str = "confgate-reporter";
/// The ValidatingAdmissionPolicy (and its binding) that limits whoever holds `ROLE` to its own pod,
/// as in `manifests/own-pod/policy.yaml`.
pub const OWN_POD_POLICY: &str = "confgate-own-pod";

const INCOMING_PATH: &str = "/etc/confgate/incoming";
const ACTIVE_PATH: &str = "/etc/confgate/active";
const PODINFO_PATH: &str = "/etc/podinfo";
const UID: u64 = 65532;
/// The sidecar's port when no other container of the pod declares it (`run --listen`'s default).
const PORT: u16 = 9797;

/// Why a stream could not be injected.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not valid YAML or JSON ({what})")]
    Parse { path: String, what: String },
    #[error(
        "{path}: more than {max} documents; check and inject read at most {max} documents per input \
         (split the stream into several inputs)",
        max = crate::manifest::MAX_DOCUMENTS
    )]
    TooManyDocuments { path: String },
    #[error("{workload}: {problem}")]
    Workload { workload: String, problem: Problem },
    #[error(
        "--image {image:?}: {problem}; expected an image reference such as registry.example/confgate:0.1.0"
    )]
    Image { image: String, problem: BadImage },
    #[error("cannot write YAML: {0}")]
    Write(String),
}

/// Why one workload cannot be injected. Names keys, volumes and processes, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("annotation {key} is {shape}, not a string; quote it")]
    NotAString { key: String, shape: &'static str },
    /// The settings' own reasons, as the sidecar would report them.
    #[error("bad confgate.io/ annotations on its pods: {}", .0.join("; "))]
    Annotations(Vec<String>),
    #[error("pod template has no spec")]
    NoSpec,
    #[error(transparent)]
    Volume(#[from] Unchosen),
    #[error(
        "volume {0} is mounted with subPath, which the kubelet never updates; mount the whole volume"
    )]
    SubPath(String),
    #[error("initContainers is not a list")]
    InitNotAList,
    #[error(
        "confgate.io/reload signals {0}, which needs shareProcessNamespace: true, and the pod sets it to false; set it to true or use an HTTP reload"
    )]
    NoSharedProcesses(String),
    #[error(
        "confgate.io/reload signals {0}, but the pod's containers run as root, which confgate (non-root, no CAP_KILL) cannot signal; use an HTTP reload"
    )]
    Root(String),
    #[error("no free port from {PORT} up for confgate: the containers declare them all")]
    NoFreePort,
    #[error(
        "confgate.io/validate runs {program}, but no container of the pod mounts a volume at a dir \
         holding it, and confgate's image holds only /confgate; copy the checker into an emptyDir from \
         an init container that mounts it at that dir (docs/validate.md)"
    )]
    NoCheckerVolume { program: String },
    #[error(
        "init container {container} reads the config, and runs no later than {feeder}, which copies \
         the checker of confgate.io/validate into volume {volume}: confgate must start after {feeder} \
         (a first accepted config needs the checker) and before {container} (which reads the promoted \
         copy); move the copying ahead of {container}, in an init container of its own"
    )]
    ReadsConfigBeforeChecker {
        container: String,
        feeder: String,
        volume: String,
    },
}

/// Why `--image` is not an image reference the kubelet can pull.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadImage {
    #[error("empty")]
    Empty,
    #[error("holds {0:?}")]
    Holds(char),
    #[error("a digest is ALGORITHM:HEX")]
    DigestForm,
    #[error("the digest {0:?} is not ALGORITHM:HEX (e.g. sha256: and 64 hex digits)")]
    Digest(String),
    #[error(
        "the tag {0:?} is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"
    )]
    Tag(String),
    #[error("the registry {0:?} is not HOST or HOST:PORT")]
    Registry(String),
    #[error(
        "the name part {0:?} is not lower-case letters and digits separated by '.', '_', '__' or '-'"
    )]
    NamePart(String),
}

/// What inject adds; the defaults are those of the shipped manifests.
#[derive(Debug, Clone)]
pub struct Options {
    pub image: String,
    /// The ConfigMap volume to gate, when a pod has more than one.
    pub volume: Option<String>,
    pub log_format: String,
    /// Whether the sidecar reports to its pod (Events and conditions): `POD_NAME`, `POD_NAMESPACE`,
    /// `POD_UID`, a token for confgate alone, and the own-pod policy, Role and RoleBinding it needs
    /// (before the documents that use them); the pod's ServiceAccount is never changed.
    pub pod_report: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            image: format!("localhost/confgate/confgate:{}", env!("CARGO_PKG_VERSION")),
            volume: None,
            log_format: "json".into(),
            pod_report: true,
        }
    }
}

/// What happened to one workload, for the summary on standard error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `kind/name`.
    pub workload: String,
    pub injected: bool,
    pub why: String,
}

/// Parses a stream of YAML or JSON documents (one JSON document is YAML too).
pub fn documents(path: &str, text: &str) -> Result<Vec<Value>, Error> {
    let mut options = crate::manifest::yaml_options(text.len());
    // `yes` and `on` stay the booleans they always were here, as kubectl reads them.
    options.strict_booleans = false;
    serde_saphyr::from_multiple_with_options::<Value>(text, options).map_err(|e| {
        if crate::manifest::too_many_documents(&e) {
            return Error::TooManyDocuments { path: path.into() };
        }
        Error::Parse {
            path: path.into(),
            what: e.to_string().lines().next().unwrap_or_default().to_owned(),
        }
    })
}

/// What injecting one stream needs across its workloads.
#[derive(Debug, Default)]
struct Stream {
    /// Ports taken on the node by the stream's `hostNetwork` pods (declared, or chosen for confgate):
    /// they share the node's network namespace, so two listeners on one port collide.
    host_ports: BTreeSet<u64>,
    /// Per namespace (`None`: the one applied to), the ServiceAccounts of injected pods that report.
    reporters: BTreeMap<Option<String>, BTreeSet<String>>,
    /// Per namespace, the known-good records of the ConfigMaps those pods gate.
    records: BTreeMap<Option<String>, BTreeSet<String>>,
    /// `kind/namespace/name` of the objects the stream already holds, so none is added twice.
    present: BTreeSet<(String, Option<String>, String)>,
}

/// What injecting a stream did: one outcome per workload, and one line per object added.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub outcomes: Vec<Outcome>,
    /// `Kind namespace/name: why`, for standard error, so nothing is added unsaid.
    pub added: Vec<String>,
}

/// Injects into every workload in `docs` (recursing into `kind: List`), and adds what the reporting
/// sidecars need unless the stream holds it: per namespace, the Role and its RoleBinding to the pods'
/// own ServiceAccounts, and once the ValidatingAdmissionPolicy that limits those rights to each pod's
/// own object. No ServiceAccount is added or changed: a pod runs as the account it named.
///
/// The added objects come first (after the input's Namespaces ahead of its first reporting pod): the
/// policy and its binding, then the Roles, then the RoleBindings, so the rights are limited before they
/// are granted and a first `kubectl apply -f` of the output meets each object before what uses it. The
/// input's own documents keep their order.
pub fn inject_all(docs: &mut Vec<Value>, opts: &Options) -> Result<Summary, Error> {
    let mut stream = Stream::default();
    for d in docs.iter() {
        survey(d, &mut stream);
    }
    let mut out = Vec::new();
    let mut first_reporting = None;
    for (i, d) in docs.iter_mut().enumerate() {
        inject_doc(d, opts, &mut stream, &mut out)?;
        if first_reporting.is_none() && !stream.reporters.is_empty() {
            first_reporting = Some(i);
        }
    }
    let mut added = Vec::new();
    let mut said = Vec::new();
    let present = |kind: &str, ns: &Option<String>, name: &str| {
        stream
            .present
            .contains(&(kind.to_owned(), ns.clone(), name.to_owned()))
    };
    if !stream.reporters.is_empty() {
        for doc in own_pod_policy() {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            if !present(&kind, &None, OWN_POD_POLICY) {
                said.push(format!(
                    "{kind} {OWN_POD_POLICY} (cluster-wide): a holder of Role {ROLE} may patch the \
                     status of its own pod only (never its labels) and make Events about it only"
                ));
                added.push(doc);
            }
        }
    }
    for (ns, accounts) in &stream.reporters {
        let at = ns.as_deref().unwrap_or("(the namespace applied to)");
        let names: Vec<&str> = accounts.iter().map(String::as_str).collect();
        let none = BTreeSet::new();
        let records = stream.records.get(ns).unwrap_or(&none);
        for doc in reporting_objects(ns.as_deref(), accounts, records) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            if present(&kind, ns, ROLE) {
                continue;
            }
            said.push(if kind == "Role" {
                format!(
                    "Role {at}/{ROLE}: create and patch Events, patch pods/status (which can also \
                     change a pod's labels and annotations; {OWN_POD_POLICY} keeps it to the pod's own \
                     object and its labels as they are)"
                )
            } else {
                format!(
                    "RoleBinding {at}/{ROLE}: Role {ROLE} for the pods' own ServiceAccount(s) {}, \
                     unchanged; every pod running as them may then report about itself",
                    names.join(", ")
                )
            });
            added.push(doc);
        }
    }
    // Stable: within a kind, the namespaces keep their order.
    added.sort_by_key(|d| match d["kind"].as_str() {
        Some("ValidatingAdmissionPolicy") => 0,
        Some("ValidatingAdmissionPolicyBinding") => 1,
        Some("Role") => 2,
        _ => 3,
    });
    if let Some(first) = first_reporting {
        let tail = docs.split_off(added_at(docs, first));
        docs.extend(added);
        docs.extend(tail);
    }
    Ok(Summary {
        outcomes: out,
        added: said,
    })
}

/// Where the objects inject adds go, given the index of the first document whose pods report: at the
/// front of the stream, but after every `Namespace` before that document (a namespaced object cannot
/// be made before its namespace, and the input's workload already needs it there).
fn added_at(docs: &[Value], first_reporting: usize) -> usize {
    let holds_namespace = |d: &Value| match d.get("kind").and_then(Value::as_str) {
        Some("Namespace") => true,
        Some("List") => d
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|i| i.get("kind").and_then(Value::as_str) == Some("Namespace")),
        _ => false,
    };
    docs[..first_reporting]
        .iter()
        .rposition(holds_namespace)
        .map_or(0, |i| i + 1)
}

/// Notes what `doc` (and a `List`'s items) holds: its identity, and the node ports of a
/// `hostNetwork` pod template.
fn survey(doc: &Value, stream: &mut Stream) {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "List" {
        for i in doc
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            survey(i, stream);
        }
        return;
    }
    let meta = |k: &str| {
        doc.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if let Some(name) = meta("name") {
        stream
            .present
            .insert((kind.to_owned(), meta("namespace"), name));
    }
    let spec = match kind {
        "Pod" => doc.get("spec"),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            doc.pointer("/spec/template/spec")
        }
        "CronJob" => doc.pointer("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    };
    if let Some(spec) = spec.and_then(Value::as_object)
        && host_network(spec)
    {
        stream
            .host_ports
            .extend(declared_ports(spec).into_iter().map(|(p, _)| p));
    }
}

fn host_network(spec: &Map<String, Value>) -> bool {
    spec.get("hostNetwork").and_then(Value::as_bool) == Some(true)
}

/// The ConfigMap of the volume the injected sidecar gates (none for a projected volume): its
/// known-good record is named after it.
fn gated_config_map(spec: &Map<String, Value>, opts: &Options) -> Option<String> {
    let volume = config_volume(spec, opts).ok()?;
    spec.get("volumes")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == volume.as_str())?
        .pointer("/configMap/name")?
        .as_str()
        .map(str::to_owned)
}

/// The Role and the RoleBinding for `accounts` in namespace `ns`, with the known-good `records` of the
/// ConfigMaps they gate: what `manifests/native-sidecar/rbac.yaml` holds.
fn reporting_objects(
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
const UNGRANTED: &str = "no-role-grants-this";

/// [`ROLE`]'s rules: Events, `pods/status`, and [`MARK`].
fn reporter_rules() -> Value {
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

/// Renders documents as a YAML stream, `---` between them.
pub fn render(docs: &[Value]) -> Result<String, Error> {
    let mut s = String::new();
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            s.push_str("---\n");
        }
        let y = serde_saphyr::to_string(d).map_err(|e| Error::Write(e.to_string()))?;
        s.push_str(&y);
        if !s.ends_with('\n') {
            s.push('\n');
        }
    }
    Ok(s)
}

fn inject_doc(
    doc: &mut Value,
    opts: &Options,
    stream: &mut Stream,
    out: &mut Vec<Outcome>,
) -> Result<(), Error> {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if kind == "List" {
        if let Some(items) = doc.get_mut("items").and_then(Value::as_array_mut) {
            for i in items {
                inject_doc(i, opts, stream, out)?;
            }
        }
        return Ok(());
    }
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("(unnamed)");
    let workload = format!("{}/{name}", kind.to_lowercase());
    let namespace = doc
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(template) = pod_template(doc, &kind) else {
        return Ok(());
    };
    let annotations = template.pointer("/metadata/annotations");
    let settings = check_annotations(annotations).map_err(|problem| Error::Workload {
        workload: workload.clone(),
        problem,
    })?;
    let accepts = annotations.and_then(|a| a.get(ACCEPTS)).is_some();
    let volume_hint = annotations
        .and_then(|a| a.get(VOLUME_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if !accepts {
        out.push(Outcome {
            workload,
            injected: false,
            why: format!("no {ACCEPTS} annotation on its pods"),
        });
        return Ok(());
    }
    let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) else {
        return Err(Error::Workload {
            workload,
            problem: Problem::NoSpec,
        });
    };
    // The pod's own choice of volume, as the admission policy reads it, when --volume names none.
    let named;
    let opts = match (&opts.volume, &volume_hint) {
        (None, Some(v)) => {
            named = Options {
                volume: Some(v.clone()),
                ..opts.clone()
            };
            &named
        }
        _ => opts,
    };
    let o = inject_pod(spec, opts, &settings, stream).map_err(|problem| Error::Workload {
        workload: workload.clone(),
        problem,
    })?;
    if let Some(account) = o.as_ref().and_then(|i| i.account.as_ref()) {
        if let Some(cm) = gated_config_map(spec, opts) {
            stream
                .records
                .entry(namespace.clone())
                .or_default()
                .insert(crate::known_good::record_name(&cm));
        }
        stream
            .reporters
            .entry(namespace)
            .or_default()
            .insert(account.clone());
    }
    out.push(Outcome {
        workload,
        injected: o.is_some(),
        why: o.map_or_else(|| format!("already has a {CONTAINER} container"), |i| i.why),
    });
    Ok(())
}

/// The pod's `confgate.io/` annotations, checked as the sidecar will read them (and as `check` does): a
/// misspelled or bad one would leave the injected sidecar never ready, or a typo in `accepts` skip the
/// workload in silence.
fn check_annotations(annotations: Option<&Value>) -> Result<Settings, Problem> {
    let mut defaults = Settings::default();
    let Some(map) = annotations.and_then(Value::as_object) else {
        return Ok(defaults);
    };
    let mut ours = crate::annotations::Annotations::new();
    for (k, v) in map.iter().filter(|(k, _)| k.starts_with("confgate.io/")) {
        let Some(v) = v.as_str() else {
            return Err(Problem::NotAString {
                key: k.clone(),
                shape: shape(v),
            });
        };
        ours.insert(k.clone(), v.to_owned());
    }
    // The checker a template's annotation names is written by the manifest's author, who writes
    // the container spec too: it becomes the sidecar's own (`CONFGATE_VALIDATE`), which a later patch
    // of the pod's annotation may only pick or turn off.
    if let Some(Ok(v)) = ours.get(ANN_VALIDATE).map(|v| v.parse()) {
        defaults.validate = v;
    }
    let resolved = Settings::with_annotations(&defaults, &defaults, &ours);
    if resolved.problems.is_empty() {
        Ok(resolved.settings)
    } else {
        Err(Problem::Annotations(resolved.problems))
    }
}

/// Whether `image` is an image reference the kubelet can pull: `[HOST[:PORT]/]PATH[:TAG][@DIGEST]`, as
/// the distribution reference grammar has it. The pod would otherwise be accepted and never start.
pub(crate) fn check_image(image: &str) -> Result<(), BadImage> {
    if image.is_empty() {
        return Err(BadImage::Empty);
    }
    if let Some(c) = image.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(BadImage::Holds(c));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let (alg, hex) = d.split_once(':').ok_or(BadImage::DigestForm)?;
        let alg_ok = !alg.is_empty()
            && alg.split(['+', '.', '_', '-']).all(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            });
        if !alg_ok
            || hex.len() < 32
            || !hex
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "=_-".contains(c))
        {
            return Err(BadImage::Digest(d.to_owned()));
        }
    }
    // A tag follows the last `:` that comes after the last `/` (a colon before it is a port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag {
        let ok = (1..=128).contains(&t.len())
            && t.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !ok {
            return Err(BadImage::Tag(t.to_owned()));
        }
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    // The first part is a registry when it looks like a host: a dot, a port, or localhost.
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        let host = parts.remove(0);
        let (h, port) = host
            .split_once(':')
            .map_or((host, None), |(h, p)| (h, Some(p)));
        let host_ok = !h.is_empty()
            && h.split('.').all(|l| {
                !l.is_empty()
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        if !host_ok || port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
        {
            return Err(BadImage::Registry(host.to_owned()));
        }
    }
    for p in &parts {
        // Lower-case letters and digits, separated by one `.` or `_`, two `_`, or any number of `-`.
        let ok = !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.ends_with(|c: char| c.is_ascii_alphanumeric())
            && !p.contains("..")
            && !p.contains("._")
            && !p.contains("_.")
            && !p.contains("___");
        if !ok {
            return Err(BadImage::NamePart((*p).to_owned()));
        }
    }
    Ok(())
}

/// The pod template of a workload kind, or the pod itself.
fn pod_template<'a>(doc: &'a mut Value, kind: &str) -> Option<&'a mut Value> {
    match kind {
        "Pod" => Some(doc),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            doc.pointer_mut("/spec/template")
        }
        "CronJob" => doc.pointer_mut("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// One pod spec injected: what the line on standard error says, and the ServiceAccount whose
/// sidecar reports (none with `--pod-report off`).
struct Injected {
    why: String,
    account: Option<String>,
}

/// Adds the sidecar to one pod spec; `Ok(None)` when it is already there.
fn inject_pod(
    spec: &mut Map<String, Value>,
    opts: &Options,
    settings: &Settings,
    stream: &mut Stream,
) -> Result<Option<Injected>, Problem> {
    let has_sidecar = ["initContainers", "containers"].iter().any(|k| {
        spec.get(*k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))
    });
    if has_sidecar {
        return Ok(None);
    }
    let config = config_volume(spec, opts)?;
    let on_node = host_network(spec);
    let (port, taken_by) = free_port(spec, on_node.then_some(&stream.host_ports))?;
    let mut notes = Vec::new();
    let run_as = match &settings.reload {
        Reload::Signal { process, .. } => signal_needs(spec, process, &mut notes)?,
        _ => None,
    };
    let checker = checker_volume(spec, &settings.validate, &config)?;
    // The component and any other init container now read the promoted copy, at the same path.
    let mut repointed = 0;
    for k in ["initContainers", "containers"] {
        for c in spec
            .get_mut(k)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for m in c
                .get_mut("volumeMounts")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if m.get("name").and_then(Value::as_str) == Some(config.as_str()) {
                    if m.get("subPath").is_some() || m.get("subPathExpr").is_some() {
                        return Err(Problem::SubPath(config));
                    }
                    m["name"] = ACTIVE_VOLUME.into();
                    m["readOnly"] = true.into();
                    repointed += 1;
                }
            }
        }
    }
    let volumes = spec
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .expect("config_volume found the volumes");
    for v in volumes.iter_mut() {
        if v.get("name").and_then(Value::as_str) != Some(config.as_str()) {
            continue;
        }
        // A missing ConfigMap becomes the verdict "missing" instead of a pod stuck in ContainerCreating.
        if let Some(cm) = v.get_mut("configMap").and_then(Value::as_object_mut) {
            cm.insert("optional".into(), true.into());
        }
        for s in v
            .pointer_mut("/projected/sources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(cm) = s.get_mut("configMap").and_then(Value::as_object_mut) {
                cm.insert("optional".into(), true.into());
            }
        }
    }
    let mut added = vec![
        // tmpfs: a promotion costs the kernel half the time it does on the node's disk, and the
        // pages (twice the config at most, during a promotion) count against confgate's memory,
        // which its limit allows for (docs/deploying.md).
        (
            ACTIVE_VOLUME,
            json!({"emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}}),
        ),
        (
            PODINFO_VOLUME,
            json!({"downwardAPI": {"items": [
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
            ]}}),
        ),
    ];
    if opts.pod_report {
        added.push((TOKEN_VOLUME, token_volume()));
    }
    for (name, v) in added {
        volumes.retain(|x| x.get("name").and_then(Value::as_str) != Some(name));
        let mut v = v;
        v["name"] = name.into();
        volumes.push(v);
    }
    let init = spec
        .entry("initContainers")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(init) = init.as_array_mut() else {
        return Err(Problem::InitNotAList);
    };
    let listen = if on_node {
        // The node's address is every pod's: /status and /metrics stay on loopback, where the exec
        // probes reach them.
        stream.host_ports.insert(u64::from(port));
        format!("127.0.0.1:{port}")
    } else {
        format!("[::]:{port}")
    };
    let mut c = sidecar(
        &config,
        opts,
        port,
        (port != PORT || on_node).then_some(&listen),
    );
    if settings.validate != crate::settings::Validate::None {
        // Only the container spec names a program confgate runs.
        let env = c
            .as_object_mut()
            .expect("an object")
            .entry("env")
            .or_insert_with(|| json!([]));
        if let Some(env) = env.as_array_mut() {
            env.push(json!({"name": "CONFGATE_VALIDATE", "value": settings.validate.to_string()}));
        }
    }
    if let Some((uid, gid)) = run_as {
        c["securityContext"]["runAsUser"] = uid.into();
        c["securityContext"]["runAsGroup"] = gid.into();
    }
    if let Some(v) = &checker {
        c["volumeMounts"]
            .as_array_mut()
            .expect("a list")
            .push(json!({"name": v.volume, "mountPath": v.mount_path, "readOnly": true}));
        if v.after > 0 {
            notes.push(format!(
                "confgate starts after init container(s) {} (they put the checker of \
                 confgate.io/validate in volume {}, mounted read-only at {})",
                v.feeders.join(", "),
                v.volume,
                v.mount_path
            ));
        } else {
            notes.push(format!(
                "volume {} (the checker of confgate.io/validate) mounted read-only at {}",
                v.volume, v.mount_path
            ));
        }
    }
    // First, so that later init containers and the component start only with an accepted config;
    // after the init containers that copy the checker in, which a first accepted config needs (a
    // native sidecar's startup probe must pass before the next init container starts).
    init.insert(checker.as_ref().map_or(0, |v| v.after), c);
    let account = opts.pod_report.then(|| runs_as(spec));
    let token_for_confgate_only = account.is_some()
        && spec
            .get("automountServiceAccountToken")
            .and_then(Value::as_bool)
            == Some(false);
    let mut done =
        format!("gates volume {config} ({repointed} mount(s) now read the promoted copy)");
    if let Some(c) = taken_by {
        done.push_str(&format!(
            "; port {PORT} is container {c}'s, so confgate listens on {port} (CONFGATE_LISTEN)"
        ));
    }
    if on_node {
        done.push_str(&format!(
            "; the pod uses the node's network, so confgate listens on {listen} only (CONFGATE_LISTEN): \
             its /status and /metrics are not on the node's address and no PodMonitor scrapes them, \
             and port {port} is one no other hostNetwork pod of this input declares (one outside it \
             on the same node may still take it)"
        ));
    }
    for n in notes {
        done.push_str("; ");
        done.push_str(&n);
    }
    match &account {
        Some(a) => {
            done.push_str(&format!(
                "; reports to its pod as the pod's own ServiceAccount {a}, unchanged (Role {ROLE}, \
                 limited to the pod's own object by {OWN_POD_POLICY})"
            ));
            if token_for_confgate_only {
                done.push_str(&format!(
                    "; the pod mounts no token into its containers, so confgate's container alone \
                     holds {a}'s token and may do whatever {a} may: run the pod as an account with \
                     no other rights, or use --pod-report off"
                ));
            }
        }
        None => done.push_str("; does not report to its pod (--pod-report off)"),
    }
    Ok(Some(Injected { why: done, account }))
}

/// The ServiceAccount the pod runs as, which its sidecar reports as: the one it names, or `default`.
/// A pod holds one identity, so confgate's token is the pod's own; inject never changes it (a
/// workload moved to another account would lose its own rights and token).
fn runs_as(spec: &Map<String, Value>) -> String {
    ["serviceAccountName", "serviceAccount"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_str))
        .find(|a| !a.is_empty())
        .unwrap_or(DEFAULT_ACCOUNT)
        .to_owned()
}

/// Where the checker `confgate.io/validate` runs comes from, for confgate's container.
#[derive(Debug)]
struct CheckerVolume {
    volume: String,
    /// The dir another container mounts it at, a prefix of the checker's path; confgate mounts it there.
    mount_path: String,
    /// How many init containers confgate must start after: up to the last one that writes the volume.
    after: usize,
    feeders: Vec<String>,
}

/// The volume holding the checker of `validate`, as the pod's other containers mount it (the longest
/// mount path that is a dir of the program's path), and the init containers that write it (regular
/// ones that mount it writable), which confgate must follow. An image volume, a PVC or a hostPath has
/// no writer: confgate mounts it and stays first.
fn checker_volume(
    spec: &Map<String, Value>,
    validate: &crate::settings::Validate,
    config: &str,
) -> Result<Option<CheckerVolume>, Problem> {
    let crate::settings::Validate::Exec { program, .. } = validate else {
        return Ok(None);
    };
    let containers = |k: &str| {
        spec.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (init, regular) = (containers("initContainers"), containers("containers"));
    let mounts = |c: &Value| -> Vec<(String, String, bool)> {
        c.get("volumeMounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| {
                Some((
                    m.get("name")?.as_str()?.to_owned(),
                    m.get("mountPath")?
                        .as_str()?
                        .trim_end_matches('/')
                        .to_owned(),
                    m.get("readOnly").and_then(Value::as_bool) == Some(true),
                ))
            })
            .collect()
    };
    let found = init
        .iter()
        .chain(&regular)
        .flat_map(mounts)
        .filter(|(_, path, _)| !path.is_empty() && program.starts_with(&format!("{path}/")))
        .max_by_key(|(_, path, _)| path.len());
    let Some((volume, mount_path, _)) = found else {
        return Err(Problem::NoCheckerVolume {
            program: program.clone(),
        });
    };
    let name = |c: &Value| {
        c.get("name")
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)")
            .to_owned()
    };
    let mut after = 0;
    let mut feeders = Vec::new();
    for (i, c) in init.iter().enumerate() {
        let sidecar = c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
        if !sidecar && mounts(c).iter().any(|(v, _, ro)| *v == volume && !ro) {
            after = i + 1;
            feeders.push(name(c));
        }
    }
    // Whatever reads the config must come after confgate, so after the last feeder.
    if let Some(reader) = init[..after]
        .iter()
        .find(|c| mounts(c).iter().any(|(v, _, _)| v == config))
    {
        return Err(Problem::ReadsConfigBeforeChecker {
            container: name(reader),
            feeder: feeders.last().cloned().unwrap_or_default(),
            volume,
        });
    }
    Ok(Some(CheckerVolume {
        volume,
        mount_path,
        after,
        feeders,
    }))
}

/// What a `signal:SIGNAL:PROCESS` reload needs of the pod: `shareProcessNamespace: true` (set here
/// unless the pod refuses it; without it confgate sees no other process and no reload can reach the
/// component) and confgate running as the component's user (the restricted profile gives it no
/// `CAP_KILL`). The user, when every regular container declares the same one, is returned for
/// confgate's container; otherwise a note says what to set.
fn signal_needs(
    spec: &mut Map<String, Value>,
    process: &str,
    notes: &mut Vec<String>,
) -> Result<Option<(u64, u64)>, Problem> {
    match spec.get("shareProcessNamespace") {
        Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            return Err(Problem::NoSharedProcesses(process.to_owned()));
        }
        _ => {
            spec.insert("shareProcessNamespace".into(), true.into());
            notes.push(format!(
                "shareProcessNamespace: true, so the signal reaches {process} (every container now \
                 sees the pod's processes)"
            ));
        }
    }
    let pod = spec.get("securityContext").cloned().unwrap_or(Value::Null);
    let id = |c: &Value, k: &str| {
        c.pointer(&format!("/securityContext/{k}"))
            .or_else(|| pod.get(k))
            .and_then(Value::as_u64)
    };
    let users: BTreeSet<Option<(u64, Option<u64>)>> = spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| id(c, "runAsUser").map(|u| (u, id(c, "runAsGroup"))))
        .collect();
    match users.into_iter().collect::<Vec<_>>()[..] {
        [Some((0, _))] => Err(Problem::Root(process.to_owned())),
        [Some((uid, gid))] => {
            if uid != UID {
                notes.push(format!(
                    "confgate runs as user {uid}, the component's, so that it may signal {process}"
                ));
            }
            Ok(Some((uid, gid.unwrap_or(UID))))
        }
        _ => {
            notes.push(format!(
                "confgate runs as user {UID}: {process} must run as the same user for the signal to \
                 reach it (set runAsUser on the pod)"
            ));
            Ok(None)
        }
    }
}

/// The ServiceAccount token as `automountServiceAccountToken` would mount it (the kubelet rotates it),
/// for the confgate container alone.
fn token_volume() -> Value {
    json!({"projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [
            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
        ]}},
    ]}})
}

/// The port confgate listens on: [`PORT`], or the next one no container of the pod declares (with the
/// container that declares [`PORT`]). Two containers of a pod share its network namespace, so a second
/// listener on a port fails with `Address already in use`; moving confgate keeps the pod's own ports as
/// they are, and its probes follow (`confgate probe` reads `CONFGATE_LISTEN`, the liveness probe the
/// port's name).
///
/// A `hostNetwork` pod shares the node's network with every other such pod on it: `on_node` holds the
/// ports the input's other `hostNetwork` pods declare (and confgate ports already chosen), which are
/// skipped too.
fn free_port(
    spec: &Map<String, Value>,
    on_node: Option<&BTreeSet<u64>>,
) -> Result<(u16, Option<String>), Problem> {
    let taken = declared_ports(spec);
    let owner = taken
        .iter()
        .find(|(n, _)| *n == u64::from(PORT))
        .map(|(_, o)| o.clone());
    let busy = |p: u16| {
        taken.iter().any(|(n, _)| *n == u64::from(p))
            || on_node.is_some_and(|s| s.contains(&u64::from(p)))
    };
    if !busy(PORT) {
        return Ok((PORT, None));
    }
    (PORT..=u16::MAX)
        .find(|p| !busy(*p))
        .map(|p| (p, owner))
        .ok_or(Problem::NoFreePort)
}

/// The ports the pod's containers declare (`containerPort`, and `hostPort` when it differs), each with
/// its container's name.
fn declared_ports(spec: &Map<String, Value>) -> Vec<(u64, String)> {
    let mut taken = Vec::new();
    for k in ["initContainers", "containers"] {
        for c in spec.get(k).and_then(Value::as_array).into_iter().flatten() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("(unnamed)");
            for p in c
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for f in ["containerPort", "hostPort"] {
                    if let Some(n) = p.get(f).and_then(Value::as_u64) {
                        taken.push((n, name.to_owned()));
                    }
                }
            }
        }
    }
    taken
}

/// The ConfigMap volume to gate: the one named with `--volume`, or the only one, as `check` finds it.
fn config_volume(spec: &Map<String, Value>, opts: &Options) -> Result<String, Problem> {
    Ok(crate::workloads::volumes::choose(
        spec,
        opts.volume.as_deref(),
    )?)
}

/// The native sidecar, as in `manifests/native-sidecar/deployment.yaml`, listening on `port` (at
/// `listen`, `CONFGATE_LISTEN`, when that is not the default).
fn sidecar(config: &str, opts: &Options, port: u16, listen: Option<&str>) -> Value {
    let probe = |kind: &str| json!({"exec": {"command": ["/confgate", "probe", kind]}});
    let mut startup = probe("startup");
    // 150 x 2 s: a ConfigMap update can take about 90 s to reach the volume.
    startup["periodSeconds"] = 2.into();
    startup["timeoutSeconds"] = 2.into();
    startup["failureThreshold"] = 150.into();
    let mut ready = probe("ready");
    ready["periodSeconds"] = 5.into();
    ready["timeoutSeconds"] = 2.into();
    // Every probe is exec, over loopback, where the server keeps slots whatever other clients hold.
    let mut live = probe("live");
    live["timeoutSeconds"] = 2.into();
    live["periodSeconds"] = 10.into();
    live["failureThreshold"] = 3.into();
    let mut c = json!({
        "name": CONTAINER,
        "image": opts.image,
        "restartPolicy": "Always",
        "args": [
            "run", "--watch", INCOMING_PATH, "--promote-to", ACTIVE_PATH,
            "--annotations", format!("{PODINFO_PATH}/annotations"), "--log-format", opts.log_format,
        ],
        "ports": [{"name": "confgate", "containerPort": port}],
        "startupProbe": startup,
        "readinessProbe": ready,
        "livenessProbe": live,
        "resources": {
            "requests": {"cpu": "5m", "memory": "10Mi"},
            "limits": {"memory": "16Mi"},
        },
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": UID,
            "runAsGroup": UID,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": config, "mountPath": INCOMING_PATH, "readOnly": true},
            {"name": ACTIVE_VOLUME, "mountPath": ACTIVE_PATH},
            {"name": PODINFO_VOLUME, "mountPath": PODINFO_PATH, "readOnly": true},
        ],
    });
    let mut env = Vec::new();
    if let Some(listen) = listen {
        // One setting for both: `run` listens on it and `confgate probe` (the exec probes) reads it.
        env.push(json!({"name": "CONFGATE_LISTEN", "value": listen}));
    }
    if opts.pod_report {
        // Which pod Events and the conditions are about (the UID spares a GET on pods).
        for (name, field) in [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
            ("POD_UID", "metadata.uid"),
        ] {
            env.push(json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": field}}}));
        }
        c["volumeMounts"]
            .as_array_mut()
            .expect("a list")
            .push(json!({"name": TOKEN_VOLUME, "mountPath": TOKEN_PATH, "readOnly": true}));
    }
    if !env.is_empty() {
        c["env"] = env.into();
    }
    c
}

/// The MutatingAdmissionPolicy that injects at admission, its name and its binding's.
pub const INJECT_POLICY: &str = "confgate-inject";
/// The label that asks for the sidecar at admission; the binding's `objectSelector`, so the API
/// server skips every other pod before any expression runs.
pub const INJECT_LABEL: (&str, &str) = ("confgate.io/inject", "enabled");
/// The annotation naming the ConfigMap volume to gate, when a pod has several (as `--volume` does).
/// Outside `confgate.io/`, whose keys the sidecar reads as its settings: this one is for injection only.
pub const VOLUME_ANNOTATION: &str = "inject.confgate.io/volume";
/// How many containers (and, apart, init containers) a pod may have for the policy to inject it: CEL
/// has no loop over indexes, so each index is a mutation of its own.
pub const POLICY_MAX_CONTAINERS: usize = 8;

/// A JSON value as a CEL literal; the string `hole` becomes the expression `fill`.
fn cel_literal(v: &Value, hole: &str, fill: &str, out: &mut String) {
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
fn cel_typed(v: &Value, path: &str, hole: &str, fill: &str, out: &mut String) {
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
    // config.
    mutations.push(jp(format!(
        "has(object.spec.initContainers) && size(object.spec.initContainers) > 0 ? \
         [JSONPatch{{op: \"add\", path: \"/spec/initContainers/0\", value: {literal}}}] : \
         [JSONPatch{{op: \"add\", path: \"/spec/initContainers\", value: [{literal}]}}]"
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

/// Reads each path (`-` is standard input; none means standard input), injects, and renders.
pub fn run(paths: &[std::path::PathBuf], opts: &Options) -> Result<(String, Summary), Error> {
    check_image(&opts.image).map_err(|problem| Error::Image {
        image: opts.image.clone(),
        problem,
    })?;
    let stdin = [std::path::PathBuf::from("-")];
    let paths = if paths.is_empty() { &stdin[..] } else { paths };
    let mut docs = Vec::new();
    for p in paths {
        let (name, text) = if p.as_os_str() == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|source| {
                Error::Read {
                    path: "standard input".into(),
                    source,
                }
            })?;
            ("standard input".to_owned(), s)
        } else {
            let name = p.display().to_string();
            let s = std::fs::read_to_string(p).map_err(|source| Error::Read {
                path: name.clone(),
                source,
            })?;
            (name, s)
        };
        docs.extend(documents(&name, &text)?);
    }
    let summary = inject_all(&mut docs, opts)?;
    Ok((render(&docs)?, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}});
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
        let text = include_str!("../manifests/own-pod/policy.yaml");
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
}
