//! What the conditions `confgate.io/config-compatible` and `confgate.io/config-current` say, in two
//! forms made from one [`Facts`] value: the condition message, prose for `kubectl describe pod`
//! ([`Display`](fmt::Display)), and the annotation [`FACTS_ANNOTATION`], the same facts as JSON
//! (serde), which `confgate status` reads. Nothing reads the message back. The conditions' type
//! names are [`CONDITION_TYPE`] and [`CURRENT_TYPE`], next to the reasons they carry.
//!
//! The message is `version X sha256:…` (or `no accepted config`) for the active config, then
//! `; applied …` when known, `; newest version Y sha256:… is VERDICT: REASON` while the newest snapshot
//! is not the active one, and `; reload via TARGET failing: ERROR` while the reload keeps failing. With
//! the variants setting, a config names its variant key after the hash: `version X sha256:… from
//! config.v2.yaml`. With a rollout in the ConfigMap, `; rollout 25% candidate` (the percentage and the
//! track the pod's bucket assigns) follows, with ` held CONFIG VERDICT` when the candidate is held on
//! that pod (outside its range, or refused by the component).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::state::Track;
use crate::verdict::Verdict;

/// The condition for `readinessGates`: True exactly when `/readyz` answers 200.
pub const CONDITION_TYPE: &str = "confgate.io/config-compatible";
/// The condition saying whether the newest config is the one in force and accepted; never a gate.
pub const CURRENT_TYPE: &str = "confgate.io/config-current";

/// The pod annotation holding the [`Facts`] as JSON. Outside the `confgate.io/` prefix, which holds
/// the settings confgate reads from the same pod's annotations (an unknown key there is a problem).
pub const FACTS_ANNOTATION: &str = "status.confgate.io/facts";

/// A config as a condition message or Event note names it: `version X sha256:…`, with `-` for a
/// part that is unknown, or just `config` when all are (missing, unreadable); ` from KEY` follows
/// when a variant was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Described {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The variant key the config was promoted from (with the variants setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Described {
    pub fn new(version: Option<&str>, sha256: Option<&str>) -> Described {
        Described {
            version: version.map(str::to_owned),
            sha256: sha256.map(str::to_owned),
            variant: None,
        }
    }

    /// The same config, naming the variant it came from.
    pub(crate) fn with_variant(self, variant: Option<&str>) -> Described {
        Described {
            variant: variant.map(str::to_owned),
            ..self
        }
    }
}

impl fmt::Display for Described {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.version, &self.sha256, &self.variant) {
            (None, None, None) => f.write_str("config"),
            (v, sha, variant) => {
                write!(
                    f,
                    "version {} {}",
                    v.as_deref().unwrap_or("-"),
                    sha.as_deref().unwrap_or("-")
                )?;
                match variant {
                    Some(k) => write!(f, " from {k}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A condition's reason: the verdict in CamelCase, `NotPromoted` when an accepted config could not
/// be put in place, `Observed` for a replica ready in observe mode on a config it does not accept,
/// `NotReady` for a replica not ready for another reason (a failed rollback), `ReloadFailing` while the
/// component has not taken the promoted config because its reload keeps failing, `Spreading` while an
/// accepted newer config waits for this pod's share of the reload spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Verdict(Verdict),
    NotPromoted,
    Observed,
    NotReady,
    ReloadFailing,
    Spreading,
    /// The pod runs the known-good from the record: the source holds no accepted config.
    KnownGood,
}

impl Reason {
    /// As `confgate status` words it in its summary (`too-new`, `not-promoted`).
    pub(crate) fn as_kebab(self) -> &'static str {
        match self {
            Reason::Verdict(v) => v.as_str(),
            Reason::NotPromoted => "not-promoted",
            Reason::Observed => "observed",
            Reason::NotReady => "not-ready",
            Reason::ReloadFailing => "reload-failing",
            Reason::Spreading => "spreading",
            Reason::KnownGood => "known-good",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Verdict(v) => f.write_str(v.reason()),
            Reason::NotPromoted => f.write_str("NotPromoted"),
            Reason::Observed => f.write_str("Observed"),
            Reason::NotReady => f.write_str("NotReady"),
            Reason::ReloadFailing => f.write_str("ReloadFailing"),
            Reason::Spreading => f.write_str("Spreading"),
            Reason::KnownGood => f.write_str("KnownGood"),
        }
    }
}

/// A text that names no condition reason confgate writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a confgate condition reason")]
pub struct NotAReason(pub String);

/// A condition's reason is a one-word machine-readable value (Kubernetes' API conventions), so it is
/// read back; the message is not.
impl FromStr for Reason {
    type Err = NotAReason;
    fn from_str(s: &str) -> Result<Reason, NotAReason> {
        for r in [
            Reason::NotPromoted,
            Reason::Observed,
            Reason::NotReady,
            Reason::ReloadFailing,
            Reason::Spreading,
            Reason::KnownGood,
        ] {
            if s == r.to_string() {
                return Ok(r);
            }
        }
        Verdict::from_reason(s)
            .map(Reason::Verdict)
            .ok_or_else(|| NotAReason(s.to_owned()))
    }
}

/// The newest snapshot while it is not the active one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Newest {
    #[serde(flatten)]
    pub config: Described,
    pub verdict: Verdict,
    /// Bounded, and never content (see `listing`).
    pub reason: String,
}

/// The reload of the promoted config keeps failing (it did not reach the component).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadFailing {
    /// The reload target, as `/status` shows it.
    pub target: String,
    /// The last attempt's error.
    pub error: String,
}

/// A rollout as a pod reports it: the percentage (`None`: no `confgate.rollout` key), the track its
/// bucket assigns, and the candidate held on it with the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutPart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<String>,
    pub assigned: Track,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
}

/// A rollout's candidate held on a pod assigned to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub config: Described,
    pub verdict: Verdict,
}

impl RolloutPart {
    /// The track of what the pod runs: stable when the candidate is held on it.
    pub fn track(&self) -> Track {
        if self.held.is_some() {
            Track::Stable
        } else {
            self.assigned
        }
    }
}

impl fmt::Display for RolloutPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}",
            self.percent.as_deref().unwrap_or("-"),
            self.assigned
        )?;
        if let Some(h) = &self.held {
            write!(f, " held {} {}", h.config, h.verdict)?;
        }
        Ok(())
    }
}

/// What both conditions say, as facts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Facts {
    /// `None`: no config has been accepted yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<Described>,
    /// The config the component confirmed it runs, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Described>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<Newest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload_failing: Option<ReloadFailing>,
    /// With a rollout in the ConfigMap: the pod's part in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutPart>,
    /// A bad or unknown `confgate.io/` annotation (the value in force before it is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_problem: Option<String>,
}

impl Facts {
    /// The annotation's value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The facts in an annotation's value; `None` for anything else.
    pub fn from_json(s: &str) -> Option<Facts> {
        serde_json::from_str(s).ok()
    }
}

/// The condition message.
impl fmt::Display for Facts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.active {
            Some(a) => write!(f, "{a}")?,
            None => f.write_str("no accepted config")?,
        }
        if let Some(a) = &self.applied {
            write!(f, "; applied {a}")?;
        }
        if let Some(r) = &self.rollout {
            write!(f, "; rollout {r}")?;
        }
        if let Some(n) = &self.newest {
            write!(f, "; newest {} is {}: {}", n.config, n.verdict, n.reason)?;
        }
        if let Some(r) = &self.reload_failing {
            write!(f, "; reload via {} failing: {}", r.target, r.error)?;
        }
        if let Some(p) = &self.settings_problem {
            write!(f, "; settings problem (the values in force are kept): {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn described() -> impl Strategy<Value = Described> {
        (
            proptest::option::of("[0-9A-Za-z.+][0-9A-Za-z.+-]{0,23}"),
            proptest::option::of("sha256:[0-9a-f]{64}"),
            proptest::option::of("[-._a-zA-Z0-9]{1,40}"),
        )
            .prop_map(|(version, sha256, variant)| Described {
                version,
                sha256,
                variant,
            })
    }

    proptest! {
        #[test]
        fn facts_round_trip_through_the_annotation(
            active in proptest::option::of(described()),
            applied in proptest::option::of(described()),
            newest in proptest::option::of((described(), 0..Verdict::ALL.len(), any::<String>())),
            reload in proptest::option::of((any::<String>(), any::<String>())),
            rollout in proptest::option::of((
                proptest::option::of("[0-9]{1,3}(\\.[0-9]{1,2})?%"),
                any::<bool>(),
                proptest::option::of((described(), 0..Verdict::ALL.len())),
            )),
        ) {
            let f = Facts {
                active,
                applied,
                newest: newest.map(|(config, v, reason)| Newest { config, verdict: Verdict::ALL[v], reason }),
                reload_failing: reload.map(|(target, error)| ReloadFailing { target, error }),
                rollout: rollout.map(|(percent, candidate, held)| RolloutPart {
                    percent,
                    assigned: if candidate { Track::Candidate } else { Track::Stable },
                    held: held.map(|(config, v)| Held { config, verdict: Verdict::ALL[v] }),
                }),
                settings_problem: None,
            };
            prop_assert_eq!(Facts::from_json(&f.to_json()), Some(f));
        }

        #[test]
        fn any_text_parses_or_fails_without_panicking(s in any::<String>()) {
            let _ = Facts::from_json(&s);
            let _ = s.parse::<Reason>();
        }
    }

    #[test]
    fn reasons_are_camel_case_verdicts_and_back() {
        for (v, r) in [
            (Verdict::Accepted, "Accepted"),
            (Verdict::TooNew, "TooNew"),
            (Verdict::TooOld, "TooOld"),
            (Verdict::OutOfRange, "OutOfRange"),
            (Verdict::Invalid, "Invalid"),
            (Verdict::Missing, "Missing"),
            (Verdict::RejectedByComponent, "RejectedByComponent"),
        ] {
            assert_eq!(Reason::Verdict(v).to_string(), r);
            assert_eq!(r.parse::<Reason>(), Ok(Reason::Verdict(v)));
        }
        assert_eq!("NotPromoted".parse::<Reason>(), Ok(Reason::NotPromoted));
        assert_eq!(Reason::NotPromoted.as_kebab(), "not-promoted");
        assert_eq!("Observed".parse::<Reason>(), Ok(Reason::Observed));
        assert_eq!("NotReady".parse::<Reason>(), Ok(Reason::NotReady));
        assert_eq!("ReloadFailing".parse::<Reason>(), Ok(Reason::ReloadFailing));
        assert_eq!(Reason::ReloadFailing.as_kebab(), "reload-failing");
    }

    #[test]
    fn the_message_and_the_annotation_say_the_same() {
        let f = Facts {
            active: Some(
                Described::new(Some("2.5.0"), Some("sha256:ab"))
                    .with_variant(Some("config.v2.yaml")),
            ),
            applied: None,
            newest: Some(Newest {
                config: Described::new(Some("3.0.0"), Some("sha256:cd"))
                    .with_variant(Some("config.v3.yaml")),
                verdict: Verdict::TooNew,
                reason: "no variant is accepted by ^2: config.v3.yaml 3.0.0 too-new".into(),
            }),
            reload_failing: Some(ReloadFailing {
                target: "http://127.0.0.1:8080/reload".into(),
                error: "connection refused".into(),
            }),
            rollout: None,
            settings_problem: None,
        };
        assert_eq!(
            f.to_string(),
            "version 2.5.0 sha256:ab from config.v2.yaml; newest version 3.0.0 sha256:cd from \
             config.v3.yaml is too-new: no variant is accepted by ^2: config.v3.yaml 3.0.0 too-new; \
             reload via http://127.0.0.1:8080/reload failing: connection refused"
        );
        assert_eq!(
            f.to_json(),
            r#"{"active":{"version":"2.5.0","sha256":"sha256:ab","variant":"config.v2.yaml"},"newest":{"version":"3.0.0","sha256":"sha256:cd","variant":"config.v3.yaml","verdict":"too-new","reason":"no variant is accepted by ^2: config.v3.yaml 3.0.0 too-new"},"reload_failing":{"target":"http://127.0.0.1:8080/reload","error":"connection refused"}}"#
        );
        assert_eq!(Facts::default().to_string(), "no accepted config");
        assert_eq!(Facts::default().to_json(), "{}");
    }

    #[test]
    fn the_rollout_part_names_the_track_and_a_held_candidate() {
        let f = Facts {
            active: Some(Described::new(Some("2.4.1"), Some("sha256:ab"))),
            rollout: Some(RolloutPart {
                percent: Some("25%".into()),
                assigned: Track::Candidate,
                held: Some(Held {
                    config: Described::new(Some("3.0.0"), Some("sha256:cd")),
                    verdict: Verdict::TooNew,
                }),
            }),
            ..Facts::default()
        };
        assert_eq!(
            f.to_string(),
            "version 2.4.1 sha256:ab; rollout 25% candidate held version 3.0.0 sha256:cd too-new"
        );
        assert_eq!(f.rollout.as_ref().unwrap().track(), Track::Stable);
        assert_eq!(Facts::from_json(&f.to_json()), Some(f));
    }
}
