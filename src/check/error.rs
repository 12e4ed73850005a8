//! Why `check` could not check an input at all (exit 64), apart from the verdicts it reports.

/// Why an input could not be checked at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: document {doc} is not valid YAML or JSON ({what})")]
    Parse {
        path: String,
        doc: usize,
        what: String,
    },
    #[error(
        "{path}: more than {max} documents; check and inject read at most {max} documents per input \
         (split the stream into several inputs)",
        max = crate::manifest::MAX_DOCUMENTS
    )]
    TooManyDocuments { path: String },
    #[error(
        "{path}: no ConfigMap found (a manifest needs kind: ConfigMap, or kind: List of them, or a workload whose pods carry confgate.io/ annotations)"
    )]
    NoConfigMap { path: String },
    /// Without a range every verdict would be a rejection, so the check could never pass.
    #[error(
        "no accepted range to check against: pass --accepts or set CONFGATE_ACCEPTS (e.g. --accepts '>=2.4.0, <3.0.0')"
    )]
    NoRange,
    #[error("no ConfigMap named {name} in the input (--name)")]
    NoSuchName { name: String },
    /// The sidecar would not be ready with these annotations, so nothing could pass for it.
    #[error("{workload}: bad confgate.io/ annotations on its pods: {problems}")]
    Annotations { workload: String, problems: String },
    /// Passing on nothing judged would let a wrong input pass a pipeline.
    #[error(
        "nothing to judge: the input holds no ConfigMap or directory, and none of the ConfigMaps its workloads read ({missing}); add their manifests"
    )]
    NothingToJudge { missing: String },
}
