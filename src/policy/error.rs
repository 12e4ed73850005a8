//! Why `confgate policy` printed nothing (all usage errors), and the check of the names it is given,
//! as Kubernetes validates them.

/// Why no policy could be generated. All are usage errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "--version-from {0} cannot be checked at admission: CEL in the API server cannot parse a JSON or \
         YAML document inside a ConfigMap value. Keep the version in a key of its own (e.g. a `version` key \
         written next to the document) and use --version-from file:KEY, or generate the policy without \
         --accepts to guard only required keys, rules and deletion"
    )]
    VersionInDocument(String),
    #[error(
        "invalid --kubernetes-version {0:?}: expected MAJOR.MINOR such as 1.30 or 1.34; \
         ValidatingAdmissionPolicy v1 needs Kubernetes 1.30 or newer"
    )]
    KubernetesVersion(String),
    #[error("invalid --{what} {value:?}: {problem}")]
    Name {
        what: &'static str,
        value: String,
        problem: &'static str,
    },
    #[error(
        "--accepts {0:?} lists Kubernetes API versions, which cannot be checked at admission: a config's \
         apiVersion is a field inside its own document, which CEL in the API server cannot parse out of a \
         ConfigMap value (a line match would let through what a YAML reader sees otherwise: a quoted or \
         folded value, a second document, an anchor). Generate the policy without --accepts to guard only \
         required keys, rules and deletion, and leave the API version to the sidecar and `confgate check`"
    )]
    ApiVersions(String),
    #[error("the policy would check nothing but deletion: give --accepts, --require or --rule")]
    ChecksNothing,
    #[error(
        "--variants {0} cannot be checked at admission: each variant carries its version inside its \
         own document (--version-from yaml: or json:), which CEL in the API server cannot parse, and a \
         file: version is one key every variant shares, so it cannot tell them apart. Generate the \
         policy without --variants and with only what holds for the stored keys (e.g. --require of keys \
         every variant shares), or leave the variants to the sidecar and `confgate check`"
    )]
    Variants(String),
}

/// What Kubernetes accepts as a ConfigMap's name (a DNS subdomain, RFC 1123) or a namespace (a DNS
/// label), as its `IsDNS1123Subdomain` and `IsDNS1123Label` validate them: the API server refuses any
/// other, and the policy's own name is built from both.
pub(super) fn check_name(what: &'static str, value: &str) -> Result<(), Error> {
    let (max, allowed) = if what == "namespace" {
        (
            63,
            "a namespace is a DNS label: at most 63 characters, lower-case letters, digits and '-', \
             starting and ending with a letter or digit",
        )
    } else {
        (
            253,
            "a ConfigMap's name is a DNS subdomain: at most 253 characters, lower-case letters, digits, \
             '-' and '.', where each '.'-separated part starts and ends with a letter or digit",
        )
    };
    let label_ok = |l: &str| {
        let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let b = l.as_bytes();
        !b.is_empty()
            && alnum(b[0])
            && alnum(b[b.len() - 1])
            && b.iter().all(|&c| alnum(c) || c == b'-')
    };
    let ok = value.len() <= max
        && if what == "namespace" {
            label_ok(value)
        } else {
            value.split('.').all(label_ok)
        };
    if ok {
        Ok(())
    } else {
        Err(Error::Name {
            what,
            value: value.to_owned(),
            problem: allowed,
        })
    }
}
