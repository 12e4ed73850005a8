//! [`Gate`]: the pure decision state, driven by one [`Event`] at a time through [`Gate::handle`],
//! which answers with the [`Action`]s the pipeline carries out. No I/O, no clock: the time an event
//! is handled at comes in as [`Now`], and what an action reads or writes comes back as an event.
//!
//! - `state`: [`Gate`] itself, made of parts each written only by the file below that defines
//!   it, and the types of what it holds (the configs active and newest, the work in flight).
//! - `messages`: what the gate is told and answers: [`Event`], [`Now`], [`Action`] and what an
//!   action carries ([`ReloadRequest`], [`Count`], [`LogLine`]).
//! - `decision`: what a decision on a snapshot leads to, and what the component is told of it.
//! - `notices`: what an operator acts on, told at the event it happens at ([`crate::state::Notice`]).
//! - `in_force`: the settings in force and their problems, and the record of the annotations'
//!   values in force.
//! - `problems`: a settings problem, and why a refused content stays in place, as values, and
//!   their words.
//! - `small`: what is small enough to be read, judged and switched on the loop ([`is_small`]).
//! - `decide`: the verdict state: what each snapshot leads to, what is active, on disk, applied
//!   and refused.
//! - `fallback`: starting on the known-good from the record when the source holds nothing
//!   accepted.
//! - `grace`: the annotations file's grace period.
//! - `reads`: what the loop reads and last judged, and the promoted dir found changed.
//! - `reloads`: the reload owed to the component, and what the reload worker reported.
//! - `rollouts`: the rollout as this pod sees it, the candidate it holds and the one promoted.
//! - `spread`: a change's promotion put off by this pod's share of the reload spread.
//! - `handle`: [`Gate::handle`], the one entry: events in, actions out; the handlers of each phase
//!   of the work in flight are in `checking` (a candidate under the component's checker),
//!   `promotion` (a switch answered) and `rollback` (a refused content put back); `reported`
//!   handles the reload worker's reports.
//! - `status`: readiness checks, their text and the published status.
//! - `trial`: the known-good trial of the config the component applied, and its record.
//!
//! This file only declares and re-exports: each file imports what it uses from the file it lives
//! in, so no file here imports this one. The one kind of circle is between `state`, which names
//! each part of the [`Gate`], and the file that defines that part and the handlers that write it.

mod checking;
mod decide;
mod decision;
mod fallback;
mod grace;
mod handle;
mod in_force;
mod messages;
mod notices;
mod problems;
mod promotion;
mod reads;
mod reloads;
mod reported;
mod rollback;
mod rollouts;
mod small;
mod spread;
mod state;
mod status;
#[cfg(test)]
mod tests;
mod trial;

pub use decide::held_refusals;
pub use grace::ANNOTATIONS_GRACE;
pub use messages::{
    Action, AppliedBy, Count, Event, Files, Found, JudgedLine, LogLine, Now, ReloadRequest,
    RollbackFailure, Seen,
};
pub use small::{SMALL_BYTES, SMALL_KEYS, is_small};
pub use state::Gate;
