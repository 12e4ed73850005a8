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

use std::collections::BTreeSet;

use serde_json::Value;

mod model;
mod parts;
mod pod;
mod policy;
mod report;
#[cfg(test)]
mod tests;

pub use model::*;
use parts::*;
pub(crate) use pod::check_image;
use pod::*;
pub use policy::{POLICY_MAX_CONTAINERS, admission_policy, check_policy_image};
use report::*;
pub use report::{MARK, own_pod_policy};

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
                // The record's rules are said too: their `create` is on every ConfigMap of the
                // namespace, which the own-pod policy does not narrow.
                let record_rules = if records.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = records.iter().map(String::as_str).collect();
                    format!(
                        "; get and patch ConfigMap(s) {} (the known-good record), and create \
                         ConfigMaps, any name in the namespace (a create cannot be narrowed by name: \
                         drop that rule and create the record yourself, docs/known-good.md#rbac)",
                        names.join(", ")
                    )
                };
                format!(
                    "Role {at}/{ROLE}: create and patch Events, patch pods/status (which can also \
                     change a pod's labels and annotations; {OWN_POD_POLICY} keeps it to the pod's own \
                     object and its labels as they are){record_rules}"
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
