//! The source a flag or the `confgate.io/source` annotation names ([`SourceSpec`]: the volume, or a
//! ConfigMap or Secret [`Target`]), parsed from its text, and why a text names none.

use crate::settings::ANN_SOURCE;

/// The forms a source may take, for the messages that refuse one.
pub(super) const ALLOWED_SOURCE: &str = "volume, configmap:NAMESPACE/NAME or secret:NAMESPACE/NAME";

/// A ConfigMap or Secret named by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Where snapshots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    Volume,
    ConfigMap(Target),
    Secret(Target),
}

impl SourceSpec {
    /// Whether the source is an object read through the API (then `--promote-to` is needed).
    pub(super) fn is_api(&self) -> bool {
        !matches!(self, SourceSpec::Volume)
    }
}

/// DNS-1123 subdomain, as the API server validates object and namespace names.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// Why a text is not a [`SourceSpec`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown source kind")]
    Kind,
    #[error("{0}: needs NAMESPACE/NAME")]
    NoTarget(String),
    #[error("{0:?} is not a valid Kubernetes name")]
    Name(String),
}

/// Why the source annotation cannot be used: confgate goes on, holding, and says this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSource {
    #[error("annotation {ANN_SOURCE} {value:?}: {why}; allowed: {ALLOWED_SOURCE}")]
    Invalid { value: String, why: SpecError },
    #[error(
        "annotation {ANN_SOURCE} {0:?} needs --promote-to: there is no mounted volume for the component to read"
    )]
    NeedsPromoteTo(String),
    /// Another object than the container spec's `--source` names: an annotation may repeat it, never
    /// widen what is read.
    #[error(
        "annotation {ANN_SOURCE} {value:?} names another source than the container spec names {spec} (--source, CONFGATE_SOURCE): an annotation may repeat it, not change it; to read another object, change --source in confgate's container spec"
    )]
    BeyondSpec { value: String, spec: String },
}

impl std::str::FromStr for SourceSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        if s == "volume" {
            return Ok(SourceSpec::Volume);
        }
        let (kind, rest) = s
            .split_once(':')
            .filter(|(k, _)| matches!(*k, "configmap" | "secret"))
            .ok_or(SpecError::Kind)?;
        let (namespace, name) = rest
            .split_once('/')
            .ok_or_else(|| SpecError::NoTarget(kind.to_owned()))?;
        for part in [namespace, name] {
            if !is_dns_subdomain(part) {
                return Err(SpecError::Name(part.to_owned()));
            }
        }
        let target = Target {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        Ok(if kind == "secret" {
            SourceSpec::Secret(target)
        } else {
            SourceSpec::ConfigMap(target)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_spec_parses_and_names_the_problem() {
        assert_eq!("volume".parse::<SourceSpec>(), Ok(SourceSpec::Volume));
        assert_eq!(
            "configmap:kube-system/gate-config".parse::<SourceSpec>(),
            Ok(SourceSpec::ConfigMap(Target {
                namespace: "kube-system".into(),
                name: "gate-config".into()
            }))
        );
        assert_eq!(
            "secret:kube-system/tokens".parse::<SourceSpec>(),
            Ok(SourceSpec::Secret(Target {
                namespace: "kube-system".into(),
                name: "tokens".into()
            }))
        );
        for (bad, why) in [
            ("configmap:x", "NAMESPACE/NAME"),
            ("configmap:ns/Big", "\"Big\" is not a valid"),
            ("secret:ns", "secret: needs NAMESPACE/NAME"),
            ("vault:ns/x", "unknown source kind"),
        ] {
            let e = bad.parse::<SourceSpec>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
