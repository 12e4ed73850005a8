//! The parts of the status: what runs, what was applied, the newest config, the checker's run, the
//! reload's outcome, and the readiness checks as `/readyz?verbose` names them.

use super::*;

/// The config the component runs (or, in gate-only mode, would run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// RFC 3339 in `/status`.
    pub since: jiff::Timestamp,
    pub verdict: Verdict,
    /// The variant key promoted (with the variants setting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// The config the component confirmed it runs: its last reload of it succeeded (HTTP 2xx, or its
/// metrics said so), or it started on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// When it was first confirmed (RFC 3339 in `/status`).
    pub since: jiff::Timestamp,
}

/// The newest snapshot seen (the desired config), whatever its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredView {
    pub version: Option<String>,
    pub sha256: Option<PrintedHash>,
    pub verdict: Verdict,
}

/// The newest snapshot, when it is not the active one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateView {
    pub version: Option<String>,
    pub sha256: Option<PrintedHash>,
    pub verdict: Verdict,
    pub reason: String,
    /// The variant key it would promote (with the variants setting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A candidate the component's checker is running on (`validate`), not promoted before it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckingView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// The checker's file name.
    pub checker: String,
    /// When the check began (RFC 3339 in `/status`).
    pub since: jiff::Timestamp,
}

/// A change this pod has seen and promotes later, after its share of the reload spread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadView {
    /// When it is promoted (RFC 3339 in `/status`).
    pub due_at: jiff::Timestamp,
    /// This pod's share of the spread: how long after the change was seen.
    pub delay_ms: u64,
    /// The reload spread in force.
    pub period_ms: u64,
}

/// The known-good config a pod runs because its source holds nothing it accepts: which one, and what
/// is wrong with the source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownGoodView {
    pub version: Option<String>,
    pub sha256: PrintedHash,
    /// The record it came from.
    pub record: String,
    /// The source's newest config's verdict (`too-new`, `missing`, ...), which made it used.
    pub because: Verdict,
    /// Why, as the verdict's reason says it.
    pub reason: String,
}

/// The last outcome of reload signalling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReloadResult {
    /// No reload attempted yet.
    #[default]
    None,
    /// An attempt is in flight, or a start-up check waits for the component to be there
    /// (`last_error` says what it waits for).
    Pending,
    Success,
    /// The reload did not reach the component (connection error, timeout, no handler, a redirect);
    /// retried.
    Failure,
    /// The component refused the content (`last_error` holds its reason); rolled back, not retried.
    Rejected,
    /// No process to signal: none runs, or each one started after the promotion and read it itself
    /// (or, at a start-up check, the component's metrics say it loaded the config since the promotion).
    NothingToReload,
}

/// The outcome of reload signalling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadView {
    pub target: String,
    pub last_result: ReloadResult,
    pub last_error: Option<String>,
    /// Content hash the last successful reload announced.
    pub last_success_sha256: Option<PrintedHash>,
    /// Reloads (and start-up checks) requested so far (coalesced requests count each).
    pub requested: u64,
    /// Whether the last finished reload was applied (false: rejected, or not reached); kept while the
    /// next one is in flight.
    pub last_reload_successful: Option<bool>,
    /// Attempts in a row that did not reach the component (`failure`), whatever content they carried;
    /// back to 0 when one reaches it (applied, refused, or nothing to reload).
    pub consecutive_failures: u32,
}

impl Default for ReloadView {
    fn default() -> Self {
        ReloadView {
            target: "none".into(),
            last_result: ReloadResult::None,
            last_error: None,
            last_success_sha256: None,
            requested: 0,
            last_reload_successful: None,
            consecutive_failures: 0,
        }
    }
}

/// Which readiness check, as `/readyz?verbose` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// The `confgate.io/` annotations.
    Settings,
    /// An accepted config is in place.
    Config,
    /// The newest snapshot is the one in force.
    Newest,
    /// The last promotion succeeded.
    Promote,
    /// The reload of the promoted config reaches the component (failing: it has not taken it).
    Reload,
    /// A candidate under the component's checker: in progress, never a failure.
    Validate,
}

impl CheckKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::Settings => "settings",
            CheckKind::Config => "config",
            CheckKind::Newest => "newest",
            CheckKind::Promote => "promote",
            CheckKind::Reload => "reload",
            CheckKind::Validate => "validate",
        }
    }

    /// Whether a failure of this check takes readiness. A bad annotation keeps the value in force
    /// before it, and a failing reload leaves the component on the config it had: neither changes
    /// the config the component runs, so both are reported (`[!]` in `/readyz?verbose`, the probe's
    /// line, the condition's message) without dropping a replica whose config in force is good.
    pub fn gates_readiness(self) -> bool {
        match self {
            CheckKind::Settings | CheckKind::Reload | CheckKind::Validate => false,
            CheckKind::Config | CheckKind::Newest | CheckKind::Promote => true,
        }
    }
}

impl std::fmt::Display for CheckKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One readiness check, as `/readyz?verbose` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: CheckKind,
    pub ok: bool,
    pub message: String,
}
