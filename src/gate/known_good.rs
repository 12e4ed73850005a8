//! The loop's link to the known-good edge (`api::known_good`): the pipeline sends it what the gate
//! asks for ([`Ask`]: read the component's containers, write the record) and hears its answers
//! ([`Answer`]) among its other inputs, so an API request never holds the loop up. The gate knows
//! nothing of the API; without a link (no credentials, no API build) the pipeline answers at once
//! that the component cannot be read.

// Without the `api` feature no edge exists: the link's other end is never made.
#![cfg_attr(
    not(feature = "api"),
    allow(dead_code, reason = "only the API edge answers the link")
)]

use tokio::sync::mpsc;

use crate::known_good::{ComponentRead, Entry, Line, Recorded};
use crate::snapshot::Snapshot;
use crate::values::SchemeVersion;

/// What the loop asks the edge.
#[derive(Debug)]
pub(crate) enum Ask {
    /// Read the pod's component containers: answer [`Answer::Component`].
    Component,
    /// Record `entry` as the known-good of `line`, unless the record holds it or a newer one:
    /// answer [`Answer::Recorded`].
    Record {
        line: Line,
        parsed: SchemeVersion,
        entry: Entry,
    },
    /// Read the record: answer [`Answer::Read`].
    Read,
}

/// What the edge answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Component(ComponentRead),
    Recorded(Recorded),
    /// The record's name and the config of each line that reads back, or why there is none.
    Read(Result<(String, Vec<Snapshot>), String>),
}

/// The loop's end.
#[derive(Debug)]
pub(crate) struct Link {
    pub(super) asks: mpsc::UnboundedSender<Ask>,
    pub(super) answers: mpsc::UnboundedReceiver<Answer>,
}

/// The edge's end.
#[derive(Debug)]
pub(crate) struct Edge {
    pub(crate) asks: mpsc::UnboundedReceiver<Ask>,
    pub(crate) answers: mpsc::UnboundedSender<Answer>,
}

/// A link and the edge it talks to.
pub(crate) fn link() -> (Link, Edge) {
    let (ask_tx, ask_rx) = mpsc::unbounded_channel();
    let (ans_tx, ans_rx) = mpsc::unbounded_channel();
    (
        Link {
            asks: ask_tx,
            answers: ans_rx,
        },
        Edge {
            asks: ask_rx,
            answers: ans_tx,
        },
    )
}
