//! The reload owed to the component: requested at a promotion or a rollback, sent again when the
//! target or the confirmation in force changes, done when the worker reports it done (or the
//! component refused that content); and the worker's reports as the status shows them.
//!
//! The request not yet done is kept (`Owed`): a newer promotion's replaces it, and an older
//! content's outcome leaves it. It is written to the promoted dir (`..confgate_reload_owed`) for
//! every promotion that requests a reload or a start-up check and for a rollback, cleared on the
//! worker's report that it was made (or that there was nothing to reload) or on a refusal of that
//! content, and requested again at start-up when it matches the promoted content and that content
//! was not refused.

use crate::reload::{BootTicks, Kind, Outcome};
use crate::settings::Settings;
use crate::snapshot::ContentHash;
use crate::state::{ReloadResult, ReloadView};

use super::messages::ReloadRequest;

/// A reload (or start-up check) requested and not yet done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owed {
    pub(super) kind: Kind,
    pub(super) sha: ContentHash,
    pub(super) version: Option<String>,
    /// When the promotion was made (`None`: unknown, as for a reload owed before a restart).
    pub(super) promoted_at: Option<BootTicks>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Reloads {
    /// The newest request not yet done; a newer promotion replaces it, as the worker coalesces.
    owed: Option<Owed>,
    /// What the worker reported (target and count are filled in when publishing).
    view: ReloadView,
}

impl Reloads {
    /// Owes `o`, replacing an older request.
    pub(super) fn owe(&mut self, o: Owed) {
        self.owed = Some(o);
    }

    /// `sha` needs no reload any more (done, or refused); a request of other content stays owed.
    pub(super) fn drop(&mut self, sha: ContentHash) {
        if self.owed.as_ref().is_some_and(|o| o.sha == sha) {
            self.owed = None;
        }
    }

    /// The owed request, for the target and confirmation in `settings`.
    pub(super) fn request(&self, settings: &Settings) -> Option<ReloadRequest> {
        let o = self.owed.as_ref()?;
        Some(ReloadRequest {
            kind: o.kind,
            target: settings.reload.clone(),
            confirm: settings.confirm.clone(),
            sha: o.sha,
            version: o.version.clone(),
            promoted_at: o.promoted_at,
        })
    }

    #[cfg(test)]
    pub(super) fn owed(&self) -> Option<&Owed> {
        self.owed.as_ref()
    }

    /// Records the worker's report in the view. Whether the content is done with, applied or
    /// refused is the caller's to act on.
    pub(super) fn report(&mut self, o: &Outcome) {
        let r = &mut self.view;
        match o {
            Outcome::Attempting => r.last_result = ReloadResult::Pending,
            Outcome::Reloaded(h) => {
                r.consecutive_failures = 0;
                r.last_reload_successful = Some(true);
                r.last_result = ReloadResult::Success;
                r.last_error = None;
                r.last_success_sha256 = Some(h.printed());
            }
            Outcome::Failed(e) => {
                r.consecutive_failures = r.consecutive_failures.saturating_add(1);
                r.last_reload_successful = Some(false);
                r.last_result = ReloadResult::Failure;
                r.last_error = Some(e.to_string());
            }
            // A start-up check still looking for the component: pending, with what it waits for.
            Outcome::Waiting(why) => {
                r.last_result = ReloadResult::Pending;
                r.last_error = Some(why.clone());
            }
            Outcome::NothingToReload { why, .. } => {
                r.consecutive_failures = 0;
                r.last_reload_successful = Some(true);
                r.last_result = ReloadResult::NothingToReload;
                r.last_error = Some(why.clone());
            }
            Outcome::Rejected { refusal, .. } => {
                r.consecutive_failures = 0;
                r.last_reload_successful = Some(false);
                r.last_result = ReloadResult::Rejected;
                r.last_error = Some(refusal.to_string());
            }
        }
    }

    /// The owed request while its attempts keep failing (not reaching the component), with how
    /// many failed in a row.
    pub(super) fn failing(&self) -> Option<(&Owed, u32)> {
        let failures = self.view.consecutive_failures;
        self.owed
            .as_ref()
            .filter(|_| failures > 0)
            .map(|o| (o, failures))
    }

    pub(super) fn view(&self) -> &ReloadView {
        &self.view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reload::{Error, Failure};
    use std::time::Duration;

    #[test]
    fn failures_in_a_row_are_counted_until_an_attempt_reaches_the_component() {
        let mut r = Reloads::default();
        let h = ContentHash::of([("version", b"2.5.0".as_slice())]);
        for _ in 0..3 {
            r.report(&Outcome::Attempting);
            r.report(&Outcome::Failed(Failure::new(Error::Timeout(
                Duration::from_secs(1),
            ))));
        }
        r.report(&Outcome::Attempting);
        assert_eq!(
            r.view().consecutive_failures,
            3,
            "an attempt in flight keeps the count"
        );
        // The worker's typed error, shown as its text.
        assert_eq!(
            r.view().last_error.as_deref(),
            Some("attempt timed out after 1s")
        );
        r.report(&Outcome::Reloaded(h));
        assert_eq!(r.view().consecutive_failures, 0);
        r.report(&Outcome::Failed(Failure::new(Error::Timeout(
            Duration::from_secs(2),
        ))));
        r.report(&Outcome::Rejected {
            sha256: h,
            refusal: crate::reload::Refusal {
                by: crate::reload::RefusedBy::Metrics,
                said: "bad rule".into(),
            },
        });
        assert_eq!(r.view().consecutive_failures, 0, "a refusal reached it");
        r.report(&Outcome::Failed(Failure::new(Error::Timeout(
            Duration::from_secs(2),
        ))));
        r.report(&Outcome::NothingToReload {
            sha256: h,
            why: "no process".into(),
        });
        assert_eq!(r.view().consecutive_failures, 0);
    }
}
