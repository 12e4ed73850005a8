//! The verdict on one snapshot, as every layer names it: status, metrics, logs, the pod condition.
//! Judging lives in [`crate::verdict`]; this is only the value.

use std::fmt;

/// The outcome for one snapshot; serialised as [`Verdict::as_str`] names it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Accepted,
    TooNew,
    TooOld,
    OutOfRange,
    Invalid,
    Missing,
    /// Accepted by confgate, then refused by the component on reload (set by the gate, never by `verdict::judge`).
    RejectedByComponent,
}

impl Verdict {
    pub const ALL: [Verdict; 7] = [
        Verdict::Accepted,
        Verdict::TooNew,
        Verdict::TooOld,
        Verdict::OutOfRange,
        Verdict::Invalid,
        Verdict::Missing,
        Verdict::RejectedByComponent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Accepted => "accepted",
            Verdict::TooNew => "too-new",
            Verdict::TooOld => "too-old",
            Verdict::OutOfRange => "out-of-range",
            Verdict::Invalid => "invalid",
            Verdict::Missing => "missing",
            Verdict::RejectedByComponent => "rejected-by-component",
        }
    }
}

impl Verdict {
    /// The verdict as a Kubernetes condition or Event reason (CamelCase): `too-new` is `TooNew`.
    pub fn reason(self) -> &'static str {
        match self {
            Verdict::Accepted => "Accepted",
            Verdict::TooNew => "TooNew",
            Verdict::TooOld => "TooOld",
            Verdict::OutOfRange => "OutOfRange",
            Verdict::Invalid => "Invalid",
            Verdict::Missing => "Missing",
            Verdict::RejectedByComponent => "RejectedByComponent",
        }
    }

    /// The verdict a [`Verdict::reason`] names.
    #[cfg(feature = "api")]
    pub fn from_reason(reason: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.reason() == reason)
    }
}

/// A text that names no [`Verdict`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a verdict")]
pub struct NotAVerdict(pub String);

impl std::str::FromStr for Verdict {
    type Err = NotAVerdict;
    /// The verdict [`Verdict::as_str`] names.
    fn from_str(s: &str) -> Result<Verdict, NotAVerdict> {
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| NotAVerdict(s.to_owned()))
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
