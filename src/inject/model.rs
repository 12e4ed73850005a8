//! What the injection works with: its names and paths, its errors, its options, and what one stream
//! holds across its workloads.

pub use crate::workloads::volumes::Unchosen;
use std::collections::{BTreeMap, BTreeSet};

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
pub(super) const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The ServiceAccount a pod that names none runs as (inject never changes it).
pub(super) const DEFAULT_ACCOUNT: &str = "default";
/// The Role (and its binding) that lets the sidecar report, as in `manifests/native-sidecar/rbac.yaml`.
pub(super) const ROLE: &str = "confgate-reporter";
/// The ValidatingAdmissionPolicy (and its binding) that limits whoever holds `ROLE` to its own pod,
/// as in `manifests/own-pod/policy.yaml`.
pub const OWN_POD_POLICY: &str = "confgate-own-pod";

pub(super) const INCOMING_PATH: &str = "/etc/confgate/incoming";
pub(super) const ACTIVE_PATH: &str = "/etc/confgate/active";
pub(super) const PODINFO_PATH: &str = "/etc/podinfo";
pub(super) const UID: u64 = 65532;
/// The sidecar's port when no other container of the pod declares it (`run --listen`'s default).
pub(super) const PORT: u16 = 9797;

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

/// What injecting one stream needs across its workloads.
#[derive(Debug, Default)]
pub(super) struct Stream {
    /// Ports taken on the node by the stream's `hostNetwork` pods (declared, or chosen for confgate):
    /// they share the node's network namespace, so two listeners on one port collide.
    pub(super) host_ports: BTreeSet<u64>,
    /// Per namespace (`None`: the one applied to), the ServiceAccounts of injected pods that report.
    pub(super) reporters: BTreeMap<Option<String>, BTreeSet<String>>,
    /// Per namespace, the known-good records of the ConfigMaps those pods gate.
    pub(super) records: BTreeMap<Option<String>, BTreeSet<String>>,
    /// `kind/namespace/name` of the objects the stream already holds, so none is added twice.
    pub(super) present: BTreeSet<(String, Option<String>, String)>,
}

/// The MutatingAdmissionPolicy that injects at admission, its name and its binding's.
pub const INJECT_POLICY: &str = "confgate-inject";
/// The label that asks for the sidecar at admission; the binding's `objectSelector`, so the API
/// server skips every other pod before any expression runs.
pub const INJECT_LABEL: (&str, &str) = ("confgate.io/inject", "enabled");
/// The annotation naming the ConfigMap volume to gate, when a pod has several (as `--volume` does).
/// Outside `confgate.io/`, whose keys the sidecar reads as its settings: this one is for injection only.
pub const VOLUME_ANNOTATION: &str = "inject.confgate.io/volume";
