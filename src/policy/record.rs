//! The policy's guard of the source's known-good record (`NAME.confgate-known-good`): only the gated
//! pods write it, and deleting it is refused as deleting the source is.
//!
//! "The gated pods" are a request from a ServiceAccount token bound to a pod (the API server adds the
//! pod's name to the user's `extra`, as it does for every token the kubelet mounts) whose
//! ServiceAccount is one of those named (`--service-account`), or, with none named, any of the
//! namespace's. The pod binding matters: a token made with `kubectl create token` for the same
//! ServiceAccount, or a long-lived Secret token, carries no pod, so a person or a CI job holding the
//! ServiceAccount's rights still cannot rewrite what the pods start on. The user's name alone is the
//! only identity admission sees; the pod's labels cannot be read from a policy, so the ServiceAccount is
//! the narrowest a policy can name. An UPDATE that leaves `data` and `binaryData` as stored
//! (metadata only) is let through from anyone, so the record can be annotated
//! [`super::ALLOW_DELETE`] and then deleted, the same two steps as the source.

use super::error::{Error, check_name};
use super::semver_cel::lit;
use super::yaml::Node;

/// The `userInfo.extra` key the API server sets to the pod's name for a token bound to a pod.
pub const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";

/// A ServiceAccount whose pod-bound tokens may write the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    pub namespace: String,
    pub name: String,
}

impl Writer {
    pub(super) fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

/// `NAME` (in `namespace`) or `NAMESPACE:NAME`, as `kubectl create rolebinding --serviceaccount`
/// writes it; both validated as Kubernetes validates them.
pub fn writer(value: &str, namespace: &str) -> Result<Writer, Error> {
    let (ns, name) = value.split_once(':').unwrap_or((namespace, value));
    check_name("namespace", ns).map_err(|_| Error::Name {
        what: "service-account",
        value: value.to_owned(),
        problem: "expected NAME or NAMESPACE:NAME, where a namespace is a DNS label (lower-case \
                  letters, digits and '-', at most 63 characters)",
    })?;
    check_name("name", name).map_err(|_| Error::Name {
        what: "service-account",
        value: value.to_owned(),
        problem: "a ServiceAccount's name is a DNS subdomain: lower-case letters, digits, '-' and \
                  '.', at most 253 characters",
    })?;
    Ok(Writer {
        namespace: ns.to_owned(),
        name: name.to_owned(),
    })
}

/// What the record's validations need from the policy.
pub(super) struct Guard<'a> {
    pub(super) namespace: &'a str,
    pub(super) source: &'a str,
    pub(super) record: &'a str,
    pub(super) writers: &'a [Writer],
    /// The annotation that lets a DELETE through.
    pub(super) allow_delete: &'a str,
    /// The policy's name, for the way out the messages name.
    pub(super) policy: &'a str,
    /// The source's deletion rule (true when the DELETE may go through), applied to the record too.
    pub(super) deletion: &'a str,
    /// True for an UPDATE that leaves `data` and `binaryData` as stored.
    pub(super) metadata_only: &'a str,
}

/// The record's validations; each passes at once for a request about the source.
pub(super) fn validations(g: &Guard<'_>) -> Vec<Node> {
    let only = format!("request.name != {} || ", lit(g.record));
    let id = format!("ConfigMap {}/{}", g.namespace, g.record);
    let who = if g.writers.is_empty() {
        format!(
            "request.userInfo.username.startsWith({})",
            lit(&format!("system:serviceaccount:{}:", g.namespace))
        )
    } else {
        format!(
            "request.userInfo.username in [{}]",
            g.writers
                .iter()
                .map(|w| lit(&w.username()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let extra = lit(POD_NAME_EXTRA);
    let pod_bound =
        format!("{extra} in request.userInfo.extra && size(request.userInfo.extra[{extra}]) > 0");
    let accounts = if g.writers.is_empty() {
        format!("a ServiceAccount of namespace {}", g.namespace)
    } else {
        format!(
            "ServiceAccount {}",
            g.writers
                .iter()
                .map(|w| format!("{}:{}", w.namespace, w.name))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    vec![
        Node::map([
            ("expression", Node::str(format!("{only}{}", g.deletion))),
            (
                "message",
                Node::str(format!(
                    "{id}, the known-good record of ConfigMap {ns}/{source} that new pods start on, is \
                     protected by confgate: deleting it is refused. To delete it, annotate it first \
                     (kubectl annotate configmap -n {ns} {record} {allow}=true), or remove the policy {policy}",
                    ns = g.namespace,
                    source = g.source,
                    record = g.record,
                    allow = g.allow_delete,
                    policy = g.policy,
                )),
            ),
            ("reason", Node::str("Forbidden")),
        ]),
        Node::map([
            (
                "expression",
                Node::str(format!(
                    "{only}request.operation == 'DELETE' || {} || ({who} && {pod_bound})",
                    g.metadata_only
                )),
            ),
            (
                "message",
                Node::str(format!(
                    "{id} is the known-good record of ConfigMap {ns}/{source}: only confgate in the \
                     gated pods writes it ({accounts}, with a token bound to its pod, as the kubelet \
                     mounts it), after the component ran a config through its trial. Its content cannot \
                     be written by anyone else; to start over, annotate it \
                     (kubectl annotate configmap -n {ns} {record} {allow}=true) and delete it, or \
                     remove the policy {policy}",
                    ns = g.namespace,
                    source = g.source,
                    record = g.record,
                    allow = g.allow_delete,
                    policy = g.policy,
                )),
            ),
            ("reason", Node::str("Forbidden")),
        ]),
    ]
}
