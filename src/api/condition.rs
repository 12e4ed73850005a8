//! The reason and message of the conditions `confgate.io/config-compatible` and
//! `confgate.io/config-current` (both carry the same message): written by the sidecar
//! ([`super::pod`]) and read back by `confgate status` ([`super::status_cmd`]), so one type formats
//! and parses each.
//!
//! The message is `version X sha256:…` (or `no accepted config`) for the active config, followed by
//! `; newest version Y sha256:… is VERDICT: REASON` while the newest snapshot is not the active one.
//! With the variants setting, a config names its variant key after the hash: `version X sha256:… from
//! config.v2.yaml`. With a rollout in the ConfigMap, `; rollout 25% candidate` (the percentage and
//! the track the pod's bucket assigns) comes before the newest part, followed by ` held CONFIG
//! VERDICT` when the candidate is held on that pod (outside its range, or refused by the component).

use std::fmt;
use std::str::FromStr;

use crate::state::Track;
use crate::verdict::Verdict;

/// A config as a condition message or Event note names it: `version X sha256:…`, with `-` for a
/// part that is unknown, or just `config` when all are (missing, unreadable); ` from KEY` follows
/// when a variant was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Described {
    pub version: Option<String>,
    pub sha256: Option<String>,
    /// The variant key the config was promoted from (with the variants setting).
    pub variant: Option<String>,
}

/// Between the hash and the variant key: neither a hash nor a key holds a space.
const FROM: &str = " from ";

impl Described {
    pub fn new(version: Option<&str>, sha256: Option<&str>) -> Described {
        Described {
            version: version.map(str::to_owned),
            sha256: sha256.map(str::to_owned),
            variant: None,
        }
    }

    /// The same config, naming the variant it came from.
    pub fn from_variant(self, variant: Option<&str>) -> Described {
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
                    Some(k) => write!(f, "{FROM}{k}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl FromStr for Described {
    type Err = String;
    fn from_str(s: &str) -> Result<Described, String> {
        if s == "config" {
            return Ok(Described::default());
        }
        let rest = s
            .strip_prefix("version ")
            .ok_or("expected `version X sha256:…` or `config`")?;
        let (version, rest) = rest
            .split_once(' ')
            .ok_or("expected a version and a hash")?;
        let (sha, variant) = match rest.split_once(FROM) {
            Some((sha, k)) if !k.is_empty() && !k.contains(' ') => (sha, Some(k.to_owned())),
            Some(_) => return Err("expected one variant key after `from`".into()),
            None => (rest, None),
        };
        let part = |p: &str| (p != "-").then(|| p.to_owned());
        let sha256 = part(sha);
        // `hmac-sha256:` is a Secret's sealed hash (see `snapshot::seal`).
        if sha256
            .as_deref()
            .is_some_and(|h| !h.starts_with("sha256:") && !h.starts_with("hmac-sha256:"))
        {
            return Err("the hash does not start with sha256: or hmac-sha256:".into());
        }
        Ok(Described {
            version: part(version),
            sha256,
            variant,
        })
    }
}

/// A condition's reason: the verdict in CamelCase, `NotPromoted` when an accepted config could not
/// be put in place, `Observed` for a replica ready in observe mode on a config it does not accept,
/// `NotReady` for a replica not ready for another reason (its settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Verdict(Verdict),
    NotPromoted,
    Observed,
    NotReady,
}

impl Reason {
    /// As `confgate status` words it in its summary (`too-new`, `not-promoted`).
    pub fn as_kebab(self) -> &'static str {
        match self {
            Reason::Verdict(v) => v.as_str(),
            Reason::NotPromoted => "not-promoted",
            Reason::Observed => "observed",
            Reason::NotReady => "not-ready",
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
        }
    }
}

impl FromStr for Reason {
    type Err = String;
    fn from_str(s: &str) -> Result<Reason, String> {
        for r in [Reason::NotPromoted, Reason::Observed, Reason::NotReady] {
            if s == r.to_string() {
                return Ok(r);
            }
        }
        Verdict::from_reason(s)
            .map(Reason::Verdict)
            .ok_or_else(|| format!("{s:?} is not a confgate condition reason"))
    }
}

/// The newest snapshot while it is not the active one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Newest {
    pub config: Described,
    pub verdict: Verdict,
    pub reason: String,
}

/// A rollout as a pod reports it: the percentage (`None`: no `confgate.rollout` key), the track its
/// bucket assigns, and the candidate held on it with the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutPart {
    pub percent: Option<String>,
    pub assigned: Track,
    pub held: Option<(Described, Verdict)>,
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

const HELD: &str = " held ";

impl fmt::Display for RolloutPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}",
            self.percent.as_deref().unwrap_or("-"),
            self.assigned
        )?;
        if let Some((c, v)) = &self.held {
            write!(f, "{HELD}{c} {v}")?;
        }
        Ok(())
    }
}

impl FromStr for RolloutPart {
    type Err = String;
    fn from_str(s: &str) -> Result<RolloutPart, String> {
        let (head, held) = match s.split_once(HELD) {
            Some((h, rest)) => {
                let (c, v) = rest
                    .rsplit_once(' ')
                    .ok_or("expected a held config and its verdict")?;
                (
                    h,
                    Some((c.parse()?, v.parse::<Verdict>().map_err(|e| e.to_string())?)),
                )
            }
            None => (s, None),
        };
        let (percent, track) = head
            .split_once(' ')
            .ok_or("expected a percentage and a track")?;
        let assigned = match track {
            "stable" => Track::Stable,
            "candidate" => Track::Candidate,
            _ => return Err("expected the track stable or candidate".into()),
        };
        Ok(RolloutPart {
            percent: (percent != "-").then(|| percent.to_owned()),
            assigned,
            held,
        })
    }
}

/// The whole condition message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionMessage {
    /// `None`: no config has been accepted yet.
    pub active: Option<Described>,
    /// The config the component confirmed it runs, when known.
    pub applied: Option<Described>,
    /// With a rollout in the ConfigMap: the pod's part in it.
    pub rollout: Option<RolloutPart>,
    pub newest: Option<Newest>,
}

const ROLLOUT: &str = "; rollout ";
const NO_ACCEPTED: &str = "no accepted config";
const NEWEST: &str = "; newest ";
const APPLIED: &str = "; applied ";

impl fmt::Display for ConditionMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.active {
            Some(a) => write!(f, "{a}")?,
            None => f.write_str(NO_ACCEPTED)?,
        }
        if let Some(a) = &self.applied {
            write!(f, "{APPLIED}{a}")?;
        }
        if let Some(r) = &self.rollout {
            write!(f, "{ROLLOUT}{r}")?;
        }
        if let Some(n) = &self.newest {
            write!(f, "{NEWEST}{} is {}: {}", n.config, n.verdict, n.reason)?;
        }
        Ok(())
    }
}

impl FromStr for ConditionMessage {
    type Err = String;
    /// Parses what [`Display`](fmt::Display) writes. The newest part is read from the first
    /// `; newest ` on, so a reason may hold anything; a message cut short by the length limit
    /// still gives its active part.
    fn from_str(s: &str) -> Result<ConditionMessage, String> {
        let (head, newest) = match s.split_once(NEWEST) {
            Some((h, n)) => (h, Some(n)),
            None => (s, None),
        };
        let (head, rollout) = match head.split_once(ROLLOUT) {
            Some((h, r)) => (h, r.parse::<RolloutPart>().ok()),
            None => (head, None),
        };
        let (head, applied) = match head.split_once(APPLIED) {
            Some((h, a)) => (h, a.parse::<Described>().ok()),
            None => (head, None),
        };
        let active = if head == NO_ACCEPTED {
            None
        } else {
            Some(head.parse::<Described>()?)
        };
        let newest = newest.and_then(|n| {
            let (config, rest) = n.split_once(" is ")?;
            let (verdict, reason) = rest.split_once(": ")?;
            Some(Newest {
                config: config.parse().ok()?,
                verdict: verdict.parse().ok()?,
                reason: reason.to_owned(),
            })
        });
        Ok(ConditionMessage {
            active,
            applied,
            rollout,
            newest,
        })
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
        fn message_round_trips(
            active in proptest::option::of(described()),
            applied in proptest::option::of(described()),
            newest in proptest::option::of((described(), 0..Verdict::ALL.len(), any::<String>())),
            rollout in proptest::option::of((
                proptest::option::of("[0-9]{1,3}(\\.[0-9]{1,2})?%"),
                any::<bool>(),
                proptest::option::of((described(), 0..Verdict::ALL.len())),
            )),
        ) {
            let m = ConditionMessage {
                active,
                applied,
                rollout: rollout.map(|(percent, candidate, held)| RolloutPart {
                    percent,
                    assigned: if candidate { Track::Candidate } else { Track::Stable },
                    held: held.map(|(c, v)| (c, Verdict::ALL[v])),
                }),
                newest: newest.map(|(config, v, reason)| Newest { config, verdict: Verdict::ALL[v], reason }),
            };
            prop_assert_eq!(m.to_string().parse::<ConditionMessage>(), Ok(m));
        }

        #[test]
        fn any_text_parses_or_fails_without_panicking(s in any::<String>()) {
            let _ = s.parse::<ConditionMessage>();
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
    }

    #[test]
    fn the_variant_follows_the_hash() {
        let m = ConditionMessage {
            active: Some(
                Described::new(Some("2.5.0"), Some("sha256:ab"))
                    .from_variant(Some("config.v2.yaml")),
            ),
            applied: None,
            rollout: None,
            newest: Some(Newest {
                config: Described::new(Some("3.0.0"), Some("sha256:cd"))
                    .from_variant(Some("config.v3.yaml")),
                verdict: Verdict::TooNew,
                reason: "no variant is accepted by ^2: config.v3.yaml 3.0.0 too-new".into(),
            }),
        };
        let text = "version 2.5.0 sha256:ab from config.v2.yaml; newest version 3.0.0 sha256:cd from \
                    config.v3.yaml is too-new: no variant is accepted by ^2: config.v3.yaml 3.0.0 too-new";
        assert_eq!(m.to_string(), text);
        assert_eq!(text.parse::<ConditionMessage>(), Ok(m));
        // A message written before variants were named still reads.
        let old: ConditionMessage = "version 2.5.0 sha256:ab".parse().unwrap();
        assert_eq!(old.active.unwrap().variant, None);
        assert!(
            "version 2.5.0 sha256:ab from "
                .parse::<Described>()
                .is_err()
        );
    }

    #[test]
    fn the_rollout_part_names_the_track_and_a_held_candidate() {
        let text = "version 2.4.1 sha256:ab; applied version 2.4.1 sha256:ab; rollout 25% candidate held version 3.0.0 sha256:cd too-new";
        let m: ConditionMessage = text.parse().unwrap();
        let r = m.rollout.clone().unwrap();
        assert_eq!(
            (r.percent.as_deref(), r.assigned, r.track()),
            (Some("25%"), Track::Candidate, Track::Stable)
        );
        assert_eq!(r.held.as_ref().unwrap().1, Verdict::TooNew);
        assert_eq!(m.to_string(), text);
        assert_eq!(m.applied.unwrap().version.as_deref(), Some("2.4.1"));
        let m: ConditionMessage = "version 2.5.0 sha256:ef; rollout - stable".parse().unwrap();
        assert_eq!(
            m.rollout.unwrap(),
            RolloutPart {
                percent: None,
                assigned: Track::Stable,
                held: None
            }
        );
    }

    #[test]
    fn multibyte_hash_is_no_panic() {
        let m: ConditionMessage = "version 2.4.1 sha256:ééééééééééééé".parse().unwrap();
        assert_eq!(
            m.active.unwrap().sha256.as_deref(),
            Some("sha256:ééééééééééééé")
        );
    }
}
