//! The annotations file's grace period: a file that existed and is absent or unreadable keeps the
//! settings in force for [`ANNOTATIONS_GRACE`]; only a lasting absence changes them.

use std::time::Duration;

use std::time::Instant;

use crate::annotations::Annotations;

/// How long an annotations file that existed may be absent (or unreadable) before the settings it
/// gave are dropped: the downward-API volume swaps `..data` like any AtomicWriter volume, so a read
/// can miss the file for a moment.
pub const ANNOTATIONS_GRACE: Duration = Duration::from_secs(2);

/// The annotations file's presence over time.
#[derive(Debug, Clone, Default)]
pub(super) struct Grace {
    /// The file as named in what the settings check says.
    file: String,
    /// Whether the file was read at least once (absent since start means none).
    existed: bool,
    /// Since when the file that existed has been absent or unreadable.
    missing_since: Option<Instant>,
    /// When to read it again: the end of the grace period, while it runs.
    recheck: Option<Instant>,
}

/// What a read of the annotations file means for the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Apply these annotations (`Err`: an unreadable file, which keeps the settings in force and
    /// fails the settings check). `note` says why the settings differ from what the file says;
    /// `back` when the file was missing for a moment; `lasting` when its absence outlived the grace
    /// period.
    Apply {
        annotations: Result<Annotations, crate::annotations::ReadFailure>,
        note: Option<String>,
        back: bool,
        lasting: bool,
    },
    /// Within the grace period: the settings in force stay. `began` when this read began it.
    Keep { began: bool, why: String },
}

impl Grace {
    pub(super) fn new(file: String) -> Grace {
        Grace {
            file,
            ..Grace::default()
        }
    }

    /// The read at start-up: nothing was in force before, so there is no grace period.
    pub(super) fn first(
        &mut self,
        read: Result<Option<Annotations>, crate::annotations::ReadFailure>,
    ) -> Result<Annotations, crate::annotations::ReadFailure> {
        self.existed = matches!(read, Ok(Some(_)));
        read.map(Option::unwrap_or_default)
    }

    /// A later read, at `now`.
    pub(super) fn read(
        &mut self,
        read: Result<Option<Annotations>, crate::annotations::ReadFailure>,
        now: Instant,
    ) -> Step {
        let missing = match read {
            Ok(Some(a)) => {
                self.existed = true;
                self.recheck = None;
                return Step::Apply {
                    annotations: Ok(a),
                    note: None,
                    back: self.missing_since.take().is_some(),
                    lasting: false,
                };
            }
            Ok(None) if !self.existed => {
                return Step::Apply {
                    annotations: Ok(Annotations::new()),
                    note: None,
                    back: false,
                    lasting: false,
                };
            }
            missing => missing,
        };
        let (why, unreadable) = match missing {
            Err(e) => (e.to_string(), Some(e)),
            _ => (format!("annotations file {} is absent", self.file), None),
        };
        let began = self.missing_since.is_none();
        let since = *self.missing_since.get_or_insert(now);
        if now.saturating_duration_since(since) < ANNOTATIONS_GRACE {
            self.recheck = Some(since + ANNOTATIONS_GRACE);
            return Step::Keep { began, why };
        }
        self.recheck = None;
        if let Some(e) = unreadable {
            // Unreadable, not gone: the settings in force stay, and the check fails naming why.
            Step::Apply {
                annotations: Err(e),
                note: None,
                back: false,
                lasting: false,
            }
        } else {
            let note = format!(
                "{why} (it existed) for over {} s: settings from flags and environment",
                ANNOTATIONS_GRACE.as_secs()
            );
            Step::Apply {
                annotations: Ok(Annotations::new()),
                note: Some(note),
                back: false,
                lasting: true,
            }
        }
    }

    /// When the file, missing for the moment, is to be read again.
    pub(super) fn recheck_at(&self) -> Option<Instant> {
        self.recheck
    }

    /// Whether the recheck is due at `now`; it is then no longer pending.
    pub(super) fn take_due(&mut self, now: Instant) -> bool {
        let due = self.recheck.is_some_and(|t| t <= now);
        if due {
            self.recheck = None;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(v: &str) -> Option<Annotations> {
        Some(Annotations::from([(
            "confgate.io/accepts".to_owned(),
            v.to_owned(),
        )]))
    }

    fn present() -> Grace {
        let mut g = Grace::new("/podinfo/annotations".into());
        assert_eq!(g.first(Ok(ann("^2"))), Ok(ann("^2").unwrap()));
        g
    }

    #[test]
    fn absent_since_start_is_no_annotations_at_once() {
        let t0 = Instant::now();
        let mut g = Grace::new("f".into());
        assert_eq!(g.first(Ok(None)), Ok(Annotations::new()));
        assert!(matches!(
            g.read(Ok(None), t0),
            Step::Apply { annotations: Ok(a), note: None, .. } if a.is_empty()
        ));
        assert_eq!(g.recheck_at(), None);
    }

    #[test]
    fn a_momentary_absence_keeps_the_settings_and_is_rechecked_at_the_end_of_the_grace() {
        let t0 = Instant::now();
        let mut g = present();
        let Step::Keep { began: true, why } = g.read(Ok(None), t0) else {
            panic!("kept")
        };
        assert_eq!(why, "annotations file /podinfo/annotations is absent");
        assert_eq!(g.recheck_at(), Some(t0 + ANNOTATIONS_GRACE));
        // Still within the grace, from when the absence began, not from the last read.
        let later = t0 + ANNOTATIONS_GRACE - Duration::from_millis(1);
        assert!(matches!(
            g.read(Ok(None), later),
            Step::Keep { began: false, .. }
        ));
        assert_eq!(g.recheck_at(), Some(t0 + ANNOTATIONS_GRACE));
        assert!(!g.take_due(later));
        // Back before the end: applied, said so, and no recheck left.
        assert_eq!(
            g.read(Ok(ann("^2")), later),
            Step::Apply {
                annotations: Ok(ann("^2").unwrap()),
                note: None,
                back: true,
                lasting: false
            }
        );
        assert_eq!(g.recheck_at(), None);
        // A new absence starts a new grace period.
        let t1 = t0 + Duration::from_secs(60);
        assert!(matches!(
            g.read(Ok(None), t1),
            Step::Keep { began: true, .. }
        ));
        assert_eq!(g.recheck_at(), Some(t1 + ANNOTATIONS_GRACE));
    }

    #[test]
    fn a_lasting_absence_applies_no_annotations_and_says_why() {
        let t0 = Instant::now();
        let mut g = present();
        g.read(Ok(None), t0);
        let end = t0 + ANNOTATIONS_GRACE;
        assert!(g.take_due(end));
        assert!(!g.take_due(end), "due once");
        let Step::Apply {
            annotations: Ok(a),
            note: Some(note),
            back: false,
            lasting: true,
        } = g.read(Ok(None), end)
        else {
            panic!("applied")
        };
        assert!(a.is_empty());
        assert_eq!(
            note,
            "annotations file /podinfo/annotations is absent (it existed) for over 2 s: settings from flags and environment"
        );
        assert_eq!(g.recheck_at(), None, "nothing more to wait for");
        // Still absent later: the same, with no new grace period.
        assert!(matches!(
            g.read(Ok(None), end + Duration::from_secs(30)),
            Step::Apply { lasting: true, .. }
        ));
        // Back: the file's settings again.
        assert!(matches!(
            g.read(Ok(ann("^3")), end + Duration::from_secs(31)),
            Step::Apply {
                annotations: Ok(_),
                back: true,
                note: None,
                ..
            }
        ));
    }

    #[test]
    fn an_unreadable_file_keeps_the_settings_then_fails_the_check() {
        let t0 = Instant::now();
        let mut g = present();
        assert!(matches!(
            g.read(Err(crate::annotations::unreadable("EACCES")), t0),
            Step::Keep { began: true, .. }
        ));
        assert_eq!(
            g.read(
                Err(crate::annotations::unreadable("EACCES")),
                t0 + ANNOTATIONS_GRACE
            ),
            Step::Apply {
                annotations: Err(crate::annotations::unreadable("EACCES")),
                note: None,
                back: false,
                lasting: false
            }
        );
    }

    #[test]
    fn unreadable_at_start_is_a_problem_at_once() {
        let mut g = Grace::new("f".into());
        assert_eq!(
            g.first(Err(crate::annotations::unreadable("bad"))),
            Err(crate::annotations::unreadable("bad"))
        );
        assert_eq!(g.recheck_at(), None);
    }
}
