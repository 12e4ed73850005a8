//! [`Note`], one Event as the reporter decides it (`pod/derive/`) and the sink publishes it
//! (`events.rs`): below both, so neither imports the other for it.

/// One Event to publish, before it meets the Recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}
