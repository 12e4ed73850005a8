//! Progressive rollout of a config across a fleet, carried in the ConfigMap itself. Pure: no I/O, no
//! clock.
//!
//! Beside a key `K` (the stable config) a ConfigMap may hold `K.next` (its candidate) and the key
//! `confgate.rollout` with a percentage (`25%`). Each pod has a bucket, a number in `[0, 100%)` hashed
//! from its identity (`POD_UID`, else the pod name); a pod whose bucket is below the percentage is on
//! the candidate: it promotes every `K.next` under the name `K`. Every other pod promotes the stable
//! keys. Neither `.next` keys nor `confgate.rollout` are ever part of what is promoted.
//!
//! - [`Percent`] and [`Bucket`]: the share of the fleet, the pod's place in it.
//! - `Plan`: what a ConfigMap says about its rollout (percentage, candidate keys), or why it cannot
//!   be read.
//! - `assign`: [`choose`], the set a pod promotes, judged by the existing machinery
//!   ([`crate::variants::choose`]), with the candidate held back on that pod when it is not accepted or
//!   the component refused it.
//!
//! `app` reads the pod's identity (`POD_UID`, else `POD_NAME`, else `HOSTNAME`) into the loop's
//! `Config::bucket`, which the gate also takes for this pod's share of the reload spread. The
//! pipeline calls `choose` in place of `variants::choose` when the gate asks for a judgement (the
//! bucket and the refused contents come in the action) and hands the rollout as this pod sees it
//! ([`Rollout`]) back with the judgement; the gate keeps it, logs its changes, shows it
//! (`Rollout::view`) and asks for a judgement again after a refusal while a rollout is in force.

mod assign;
mod plan;
mod status;

pub use assign::Split;
pub use assign::{choose, choose_as, split};
pub use plan::KEY;
pub use plan::Plan;
#[cfg(feature = "policy")]
pub use plan::SUFFIX;
pub use status::{HeldCandidate, Rollout, RolloutHeld, RolloutView, Track};

pub use crate::values::{Bucket, Percent};
