//! `confgate policy`: a `ValidatingAdmissionPolicy` and its binding for one ConfigMap, generated from the
//! same settings the sidecar and `check` use, so the API server refuses at write time what the sidecar
//! would hold back: a version outside the range, an absent required key, a content rule that does not
//! hold; and a DELETE of the ConfigMap, unless the namespace controller or the garbage collector sends it
//! or the stored object carries [`ALLOW_DELETE`]`: "true"`. An UPDATE that leaves `data` and `binaryData`
//! as stored (metadata only) is not judged, so that annotation can be added to content that predates
//! the policy.
//!
//! Pure: builds the objects; the command prints them.
//!
//! `print` takes the raw settings, the ConfigMap's names and an `Output`, not clap's struct; the
//! names are validated as Kubernetes validates them. The reasons end with the fixes of
//! `verdict::fix`, as the sidecar's do. `tests/commands/policy.rs` checks that the policy admits
//! exactly what `check` accepts (kube-cel's `VapEvaluator`, over a corpus and a property test).

mod error;
mod reason;
mod record;
pub mod rollout_cel;
pub mod semver_cel;
pub mod yaml;

pub use error::Error;
use error::check_name;
use reason::{ADMITTED, STORED_DATA, SemverRange, version_reason};
pub use record::{POD_NAME_EXTRA, Writer, writer};

use crate::rules::Rule;
use crate::settings::{Mode, Raw, Settings, VersionFrom};
use crate::verdict::fix;
use semver_cel::lit;

use yaml::Node;

/// The oldest Kubernetes with `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy (GA in 1.30).
pub(crate) const MIN_MINOR: u64 = 30;

/// The annotation that lets a DELETE of the guarded ConfigMap through, when the stored object carries
/// it with the value `"true"`: a deliberate second step (annotate, then delete), or, written in the
/// manifest, consent to deletion by the tool that manages it (Helm, GitOps pruning).
pub const ALLOW_DELETE: &str = "confgate.io/allow-delete";

/// The users whose DELETEs are always let through: the namespace controller (a namespace being
/// deleted empties itself through admission, and would stay Terminating) and the garbage collector
/// (owners' dependents), under their own service accounts (`kube-controller-manager
/// --use-service-account-credentials`, as kubeadm runs it) or the controller manager's one identity
/// without that flag, which its other controllers then share: part of the control plane, and refusing it
/// would leave namespaces stuck.
pub const CONTROLLER_USERS: [&str; 3] = [
    "system:serviceaccount:kube-system:namespace-controller",
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:kube-controller-manager",
];

/// What to generate the policy for.
pub struct Request<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub settings: &'a Settings,
    pub rules: &'a [Rule],
    /// `MAJOR.MINOR` of the oldest API server the policy must work on.
    pub kubernetes_version: &'a str,
    /// The ServiceAccounts whose pod-bound tokens may write the known-good record; none: any of the
    /// namespace's.
    pub writers: &'a [Writer],
}

/// The minor version of a `1.MINOR[.PATCH]` Kubernetes version, if it is 1.30 or newer.
pub(crate) fn kubernetes_minor(v: &str) -> Result<u64, Error> {
    let bad = || Error::KubernetesVersion(v.to_owned());
    let s = v.trim().trim_start_matches('v');
    let mut parts = s.split('.');
    let (Some("1"), Some(minor)) = (parts.next(), parts.next()) else {
        return Err(bad());
    };
    let minor: u64 = minor.parse().map_err(|_| bad())?;
    if minor < MIN_MINOR || parts.count() > 1 {
        return Err(bad());
    }
    Ok(minor)
}

/// The policy's and binding's name: `confgate.NAMESPACE.NAME` (a namespace has no dot, so it is unique).
pub(crate) fn object_name(namespace: &str, name: &str) -> String {
    format!("confgate.{namespace}.{name}")
}

/// The ValidatingAdmissionPolicy and its binding.
pub fn generate(req: &Request<'_>) -> Result<[Node; 2], Error> {
    let minor = kubernetes_minor(req.kubernetes_version)?;
    check_name("namespace", req.namespace)?;
    check_name("name", req.name)?;
    let s = req.settings;
    if let Some(v) = &s.variants {
        return Err(Error::Variants(v.to_string()));
    }
    let version = match (&s.accepts, &s.version_from) {
        (None, _) => None,
        (Some(a), _) if a.semver().is_none() => {
            return Err(Error::ApiVersions(a.text().to_owned()));
        }
        (Some(a), VersionFrom::File { key }) => a.semver().map(|req| {
            (
                SemverRange {
                    req,
                    text: a.text(),
                },
                key.as_str(),
            )
        }),
        (Some(_), other) => return Err(Error::VersionInDocument(other.to_string())),
    };
    if version.is_none() && s.require.is_empty() && req.rules.is_empty() {
        return Err(Error::ChecksNothing);
    }
    let full = object_name(req.namespace, req.name);
    if full.len() > 253 {
        return Err(Error::Name {
            what: "name",
            value: req.name.to_owned(),
            problem: "with confgate.NAMESPACE. in front it exceeds 253 characters",
        });
    }
    let cm = format!("ConfigMap {}/{}", req.namespace, req.name);
    // The content is judged on CREATE and on an UPDATE that changes it. A DELETE has its own rule; an
    // UPDATE that leaves `data` and `binaryData` as stored (an annotation, a label) changes nothing the
    // sidecar judges, and must pass even when the stored content predates the policy and breaks it:
    // otherwise not even `kubectl annotate ... confgate.io/allow-delete=true` could get through.
    let metadata_only = "(request.operation == 'UPDATE' && oldObject != null \
         && (has(object.data) ? object.data : {}) == (has(oldObject.data) ? oldObject.data : {}) \
         && (has(object.binaryData) ? object.binaryData : {}) == (has(oldObject.binaryData) ? oldObject.binaryData : {}))";
    // The known-good record beside the source is guarded by the same policy (`record`), when its name
    // can exist; the source's validations pass at once for a request about the record.
    let record = Some(crate::known_good::record_name(req.name)).filter(|r| r.len() <= 253);
    let not_source = match &record {
        Some(_) => format!("request.name != {} || ", lit(req.name)),
        None => String::new(),
    };
    let skip_delete = format!("{not_source}request.operation == 'DELETE' || {metadata_only} || ");

    // Every refusal says what the sidecar and `check` would say of the same ConfigMap, after its name,
    // so a user meets one vocabulary wherever confgate judges.
    let message = |reason: String| format!("{} + ({reason})", lit(&format!("{cm}: ")));

    // On DELETE `object` is null and `oldObject` is the stored object.
    let allow = lit(ALLOW_DELETE);
    let deletion = format!(
        "request.operation != 'DELETE' || request.userInfo.username in [{users}] || \
         (oldObject != null && has(oldObject.metadata.annotations) && {allow} in oldObject.metadata.annotations \
         && oldObject.metadata.annotations[{allow}] == 'true')",
        users = CONTROLLER_USERS
            .iter()
            .map(|u| lit(u))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let mut validations = vec![Node::map([
        ("expression", Node::str(format!("{not_source}{deletion}"))),
        (
            "message",
            Node::str(format!(
                "{cm} is protected by confgate: deleting it is refused. To delete it, annotate it first \
                 (kubectl annotate configmap -n {ns} {name} {ALLOW_DELETE}=true), or remove the policy {full}",
                ns = req.namespace,
                name = req.name,
            )),
        ),
        ("reason", Node::str("Forbidden")),
    ])];
    // A rollout key the sidecar cannot follow makes the ConfigMap invalid on every pod, before
    // anything else is judged.
    validations.push(Node::map([
        (
            "expression",
            Node::str(format!("{skip_delete}{}", rollout_cel::valid())),
        ),
        (
            "messageExpression",
            Node::str(message(rollout_cel::invalid_reason())),
        ),
        ("reason", Node::str("Invalid")),
    ]));
    // As the sidecar reads a rollout: its key under `binaryData` too, then the candidate keys.
    for (expr, reason) in [
        (rollout_cel::not_binary(), rollout_cel::binary_reason()),
        (
            rollout_cel::no_reserved_candidate(),
            rollout_cel::reserved_reason(),
        ),
    ] {
        validations.push(Node::map([
            ("expression", Node::str(format!("{skip_delete}{expr}"))),
            ("messageExpression", Node::str(message(reason))),
            ("reason", Node::str("Invalid")),
        ]));
    }
    if !s.require.is_empty() {
        let present = |k: &str| {
            format!(
                "((has(object.data) && {k} in object.data) || (has(object.binaryData) && {k} in object.binaryData))"
            )
        };
        let keys: Vec<String> = s.require.iter().map(|k| lit(k)).collect();
        let expr = format!(
            "{skip_delete}{}",
            keys.iter()
                .map(|k| present(k))
                .collect::<Vec<_>>()
                .join(" && ")
        );
        // The sidecar also lists the keys present; left out here, as a map's keys come unordered in CEL
        // and 1.30 has no list sort.
        // Listed as `listing::names` lists them: the first five, then how many more.
        let shown = format!(
            "(size(a) <= {max} ? a.join(', ') : [{first}].join(', ') + ' and ' + string(size(a) - {max}) + ' more')",
            max = crate::listing::MAX_NAMES,
            first = (0..crate::listing::MAX_NAMES)
                .map(|i| format!("a[{i}]"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        let reason = format!(
            "[[{}].filter(k, !{})].map(a, size(a) == 1 ? 'required key ' + a[0] + ' is absent; ' + {one} : 'required keys ' + {shown} + ' are absent; ' + {many})[0]",
            keys.join(", "),
            present("k"),
            one = lit(&fix::required(1, ADMITTED)),
            many = lit(&fix::required(2, ADMITTED)),
        );
        validations.push(Node::map([
            ("expression", Node::str(expr)),
            ("messageExpression", Node::str(message(reason))),
            ("reason", Node::str("Invalid")),
        ]));
    }
    if let Some((accepts, key)) = &version {
        let k = lit(key);
        let value = format!("object.data[{k}]");
        let expr = format!(
            "{skip_delete}(has(object.data) && {k} in object.data && {})",
            semver_cel::accepts(&value, accepts.req),
        );
        validations.push(Node::map([
            ("expression", Node::str(expr)),
            (
                "messageExpression",
                Node::str(message(version_reason(
                    key,
                    &s.version_from,
                    accepts,
                    STORED_DATA,
                ))),
            ),
            ("reason", Node::str("Invalid")),
        ]));
    }
    for (i, rule) in req.rules.iter().enumerate() {
        let expr = format!(
            "{skip_delete}[has(object.data) ? object.data : {{}}].all(data, [has(object.binaryData) ? object.binaryData : {{}}].all(binaryData, {}))",
            rule.text
        );
        // An evaluation error is reported by the API server in its own words, so only "is false" is ours.
        let failure = lit(&format!("rule {} (`{}`) is false", i + 1, rule.text));
        let reason = match &version {
            // The sidecar judges rules only for a version in range and says so first.
            Some((accepts, key)) => {
                let k = lit(key);
                let value = format!("object.data[{k}]");
                format!(
                    "(has(object.data) && {k} in object.data && {ok} ? 'version ' + {v} + {is_in} : '') + {failure}",
                    ok = semver_cel::accepts(&value, accepts.req),
                    v = semver_cel::display(&semver_cel::trimmed(&value)),
                    is_in = lit(&format!(" is in {}, but ", accepts.text)),
                )
            }
            None => failure,
        };
        validations.push(Node::map([
            ("expression", Node::str(expr)),
            ("messageExpression", Node::str(message(reason))),
            ("reason", Node::str("Invalid")),
        ]));
    }

    if let Some((accepts, key)) = &version {
        // Mid-rollout the pods on the candidate judge its version (`K.next` in place of `K`), as
        // `check` does on the candidate's line; content rules are judged on the stored data only.
        validations.push(Node::map([
            (
                "expression",
                Node::str(format!(
                    "{skip_delete}{}",
                    rollout_cel::candidate_not_binary(key)
                )),
            ),
            (
                "messageExpression",
                Node::str(message(rollout_cel::candidate_binary_reason(key))),
            ),
            ("reason", Node::str("Invalid")),
        ]));
        let data = rollout_cel::candidate_data(key);
        let k = lit(key);
        let expr = format!(
            "{skip_delete}!{live} || [{data}].all(d, {k} in d && {ok})",
            live = rollout_cel::live(),
            ok = semver_cel::accepts(&format!("d[{k}]"), accepts.req),
        );
        let reason = format!(
            "{held} + {percent} + {keep} + [{data}].map(d, {why})[0]",
            held = lit("would be held on the candidate pods ("),
            percent = rollout_cel::display(),
            keep = lit("), which keep stable: "),
            why = version_reason(key, &s.version_from, accepts, "d"),
        );
        validations.push(Node::map([
            ("expression", Node::str(expr)),
            ("messageExpression", Node::str(message(reason))),
            ("reason", Node::str("Invalid")),
        ]));
    }

    // Last, so the source's refusals keep their order.
    if let Some(record) = &record {
        validations.extend(record::validations(&record::Guard {
            namespace: req.namespace,
            source: req.name,
            record,
            writers: req.writers,
            allow_delete: ALLOW_DELETE,
            policy: &full,
            deletion: &deletion,
            metadata_only,
        }));
    }

    let mut annotations = vec![(
        "confgate.io/kubernetes-version".to_owned(),
        Node::str(format!("1.{minor}")),
    )];
    if let Some((a, _)) = version {
        annotations.push(("confgate.io/accepts".into(), Node::str(a.text.to_owned())));
        annotations.push((
            "confgate.io/version-from".into(),
            Node::str(s.version_from.to_string()),
        ));
    }
    if !s.require.is_empty() {
        annotations.push(("confgate.io/require".into(), Node::str(s.require.join(","))));
    }
    let metadata = || {
        Node::map([
            ("name", Node::str(full.clone())),
            (
                "labels",
                Node::map([("app.kubernetes.io/managed-by", Node::str("confgate"))]),
            ),
            ("annotations", Node::Map(annotations.clone())),
        ])
    };
    let policy = Node::map([
        ("apiVersion", Node::str("admissionregistration.k8s.io/v1")),
        ("kind", Node::str("ValidatingAdmissionPolicy")),
        ("metadata", metadata()),
        (
            "spec",
            Node::map([
                ("failurePolicy", Node::str("Fail")),
                (
                    "matchConstraints",
                    Node::map([
                        (
                            "namespaceSelector",
                            Node::map([(
                                "matchLabels",
                                Node::map([(
                                    "kubernetes.io/metadata.name",
                                    Node::str(req.namespace),
                                )]),
                            )]),
                        ),
                        (
                            "resourceRules",
                            Node::Seq(vec![Node::map([
                                ("apiGroups", Node::strs([""])),
                                ("apiVersions", Node::strs(["v1"])),
                                ("operations", Node::strs(["CREATE", "UPDATE", "DELETE"])),
                                ("resources", Node::strs(["configmaps"])),
                                (
                                    "resourceNames",
                                    Node::Seq(
                                        std::iter::once(req.name)
                                            .chain(record.as_deref())
                                            .map(Node::str)
                                            .collect(),
                                    ),
                                ),
                            ])]),
                        ),
                    ]),
                ),
                (
                    "matchConditions",
                    Node::Seq(vec![Node::map([
                        ("name", Node::str("the-guarded-configmap")),
                        (
                            "expression",
                            Node::str(format!(
                                "request.namespace == {} && request.name in [{}]",
                                lit(req.namespace),
                                std::iter::once(req.name)
                                    .chain(record.as_deref())
                                    .map(lit)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                        ),
                    ])]),
                ),
                ("validations", Node::Seq(validations)),
            ]),
        ),
    ]);
    let actions = match s.mode {
        Mode::Enforce => Node::strs(["Deny"]),
        Mode::Observe => Node::strs(["Warn", "Audit"]),
    };
    let binding = Node::map([
        ("apiVersion", Node::str("admissionregistration.k8s.io/v1")),
        ("kind", Node::str("ValidatingAdmissionPolicyBinding")),
        ("metadata", metadata()),
        (
            "spec",
            Node::map([
                ("policyName", Node::str(full.clone())),
                ("validationActions", actions),
            ]),
        ),
    ]);
    Ok([policy, binding])
}

/// The two objects as a YAML stream.
pub(crate) fn to_yaml(objects: &[Node; 2]) -> String {
    format!("---\n{}---\n{}", objects[0].to_yaml(), objects[1].to_yaml())
}

/// The two objects as one JSON `List` (what `kubectl get -o json` prints and `kubectl apply` reads).
pub fn to_json(objects: &[Node; 2]) -> String {
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": objects,
    });
    yaml::escape_json(&serde_json::to_string_pretty(&list).unwrap_or_default()) + "\n"
}

/// Why `confgate policy` printed nothing. Every case is a usage error (exit 64).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Settings(#[from] crate::settings::Error),
    #[error(transparent)]
    Policy(#[from] Error),
}

/// The text `confgate policy` prints the objects as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Yaml,
    Json,
}

/// `confgate policy`: the settings (rules among them: flags first, then the file), the objects as text.
/// `service_accounts` (`NAME` or `NAMESPACE:NAME`) are those whose pod-bound tokens may write the
/// known-good record.
pub fn print(
    raw: &Raw,
    namespace: &str,
    name: &str,
    service_accounts: &[String],
    kubernetes_version: &str,
    output: Output,
) -> Result<String, CommandError> {
    let settings = Settings::from_raw(raw)?;
    let rules = settings.rules.compiled();
    let writers = service_accounts
        .iter()
        .map(|v| writer(v, namespace))
        .collect::<Result<Vec<_>, _>>()?;
    let objects = generate(&Request {
        namespace,
        name,
        settings: &settings,
        rules,
        kubernetes_version,
        writers: &writers,
    })?;
    tracing::debug!(
        %namespace,
        %name,
        rules = rules.len(),
        required = settings.require.len(),
        "policy generated"
    );
    Ok(match output {
        Output::Yaml => to_yaml(&objects),
        Output::Json => to_json(&objects),
    })
}
