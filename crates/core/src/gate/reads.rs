//! What the loop reads: what was last judged (or why the next read is judged whatever it is), a
//! config read put off until the annotations file is read, whether the last read was small, the
//! source's view and the watch's problem, and the promoted dir found changed behind confgate's
//! back. [`Reads`] is the [`Gate`](super::state::Gate)'s part for them; its steps here are the
//! only writers.

use super::messages::{Anew, Seen};
use super::state::Last;
use crate::snapshot::ContentHash;
use crate::state::SourceView;

/// What the loop reads, and what it last judged: the [`Gate`](super::state::Gate)'s part written
/// only by this file.
#[derive(Debug, Clone)]
pub(super) struct Reads {
    /// What was last judged, or why the next read is judged whatever it is.
    last: Last,
    /// The config is to be looked at once the annotations file asked for is read.
    config_wanted: bool,
    /// Whether the last config read was small ([`is_small`](super::small::is_small)): the next is
    /// then read on the loop.
    small_before: bool,
    /// The API source's view, as last reported.
    source: Option<SourceView>,
    /// Why the config dir is not watched, if it is not.
    watch_error: Option<String>,
    /// The promoted dir was found changed behind confgate's back (what it held instead): the next
    /// promotion of the config in force repairs it, and the status says so until a re-read finds it
    /// whole.
    tampered: Option<Option<ContentHash>>,
    /// The promoted dir is to be written again even where what is on disk says the config is in place.
    repair: bool,
}

impl Reads {
    pub(super) fn new() -> Reads {
        Reads {
            last: Last::Nothing,
            config_wanted: false,
            small_before: false,
            source: None,
            watch_error: None,
            tampered: None,
            repair: false,
        }
    }

    /// `seen` was judged: a read identical to it is not judged again.
    pub(super) fn judged(&mut self, seen: Seen) {
        self.last = Last::Judged(seen);
    }

    /// The next read is judged whatever it is, for this reason.
    pub(super) fn anew(&mut self, why: Anew) {
        self.last = Last::Anew(why);
    }

    /// What was last judged, or why the next read is judged whatever it is.
    pub(super) fn last(&self) -> &Last {
        &self.last
    }

    /// The config is to be looked at once the annotations file asked for is read (`want`), kept
    /// until then.
    pub(super) fn want_config(&mut self, want: bool) {
        self.config_wanted |= want;
    }

    /// Whether the config was wanted with the annotations file just read; no longer.
    pub(super) fn take_config_wanted(&mut self) -> bool {
        std::mem::take(&mut self.config_wanted)
    }

    /// Whether the config just read was small.
    pub(super) fn read_small(&mut self, small: bool) {
        self.small_before = small;
    }

    /// Whether the last config read was small: the next is then read on the loop.
    pub(super) fn small_before(&self) -> bool {
        self.small_before
    }

    /// The API source's view, as reported now.
    pub(super) fn source_seen(&mut self, view: Option<SourceView>) {
        self.source = view;
    }

    pub(super) fn source(&self) -> &Option<SourceView> {
        &self.source
    }

    /// Why the config dir is not watched now (`None`: it is).
    pub(super) fn watch_problem(&mut self, problem: Option<String>) {
        self.watch_error = problem;
    }

    pub(super) fn watch_error(&self) -> &Option<String> {
        &self.watch_error
    }

    /// The promoted dir read back holds what was promoted.
    pub(super) fn whole(&mut self) {
        self.tampered = None;
    }

    /// The promoted dir read back holds `found` instead of what was promoted: the next read of the
    /// config in force promotes it again.
    pub(super) fn tampered_with(&mut self, found: Option<ContentHash>) {
        self.tampered = Some(found);
        self.repair = true;
        self.last = Last::Anew(Anew::Repair);
    }

    /// The promoted dir was written again.
    pub(super) fn repaired(&mut self) {
        self.repair = false;
    }

    /// Whether the promoted dir is to be written again even where it holds the config in force.
    pub(super) fn repair(&self) -> bool {
        self.repair
    }

    /// What the promoted dir held instead of what was promoted, until a re-read finds it whole.
    pub(super) fn tampered(&self) -> Option<&Option<ContentHash>> {
        self.tampered.as_ref()
    }
}
