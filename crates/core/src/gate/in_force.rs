//! The settings in force and their problems: the flags' values, the annotations' values over them,
//! what is wrong with the annotations, and the record of the values in force kept in the promoted
//! dir. [`InForce`] is the [`Gate`]'s part for them, written only here (the annotations file applied,
//! the record asked for); the rest of the gate reads it.

use super::problems::SettingsProblem;
use super::state::Gate;
use crate::annotations::Annotations;
use crate::settings::Settings;

/// The settings in force, what they come from, and what is wrong with them.
#[derive(Debug, Clone)]
pub(super) struct InForce {
    /// The flag/env/default settings.
    base: Settings,
    settings: Settings,
    /// What is wrong with the annotations (the values in force before each are kept).
    problems: Vec<SettingsProblem>,
    /// Why the settings in force are not what the annotations file says now (reported, not failing).
    annotations_note: Option<String>,
    /// Per setting of [`crate::settings::SETTINGS`], whether the annotations give it a valid value.
    annotated: Vec<bool>,
    /// The annotations' values in force (by annotation, as given, none with credentials): kept in
    /// the promoted dir, so that after a restart a bad annotation keeps them too.
    given: Annotations,
    /// What the promoted dir's record of `given` holds, as last read or written.
    settings_recorded: Annotations,
}

impl InForce {
    pub(super) fn new(base: Settings) -> InForce {
        InForce {
            settings: base.clone(),
            base,
            problems: Vec::new(),
            annotations_note: None,
            annotated: Vec::new(),
            given: Annotations::default(),
            settings_recorded: Annotations::default(),
        }
    }

    /// The values last in force before a restart, as the promoted dir's record holds them
    /// ([`Gate::with_last_in_force`]).
    pub(super) fn last_in_force(&mut self, settings: Settings, values: Annotations) {
        self.settings = settings;
        self.given.clone_from(&values);
        self.settings_recorded = values;
    }

    pub(super) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The flag/env/default settings.
    pub(super) fn base(&self) -> &Settings {
        &self.base
    }

    pub(super) fn problems(&self) -> &[SettingsProblem] {
        &self.problems
    }

    pub(super) fn annotations_note(&self) -> Option<&str> {
        self.annotations_note.as_deref()
    }

    /// Whether the annotations give the `i`th setting of [`crate::settings::SETTINGS`] a valid value.
    pub(super) fn annotated(&self, i: usize) -> bool {
        self.annotated.get(i).copied().unwrap_or(false)
    }
}

impl Gate {
    /// Applies the annotations file as read; `Err` is a file that could not be read or parsed, which keeps
    /// the settings in force. Returns true when the settings in force changed.
    pub(super) fn set_annotations(
        &mut self,
        ann: Result<Annotations, crate::annotations::ReadFailure>,
    ) -> bool {
        match ann {
            Ok(ann) => {
                let r =
                    Settings::with_annotations(&self.in_force.base, &self.in_force.settings, &ann);
                self.in_force.annotated = crate::settings::SETTINGS
                    .iter()
                    .map(|s| s.annotated_by(&ann))
                    .collect();
                let changed = r.settings != self.in_force.settings;
                // A bad annotation keeps the value in force, and so its record; a valid one is
                // recorded unless it carries credentials; an absent one gives the flag's value.
                let mut given = crate::annotations::Annotations::new();
                for setting in crate::settings::SETTINGS {
                    let key = setting.annotation;
                    let value = match r.given.get(key) {
                        Some(v) if crate::settings::recordable(key, v) => Some(v),
                        Some(_) => None,
                        None if ann.contains_key(key) => self.in_force.given.get(key),
                        None => None,
                    };
                    if let Some(v) = value {
                        given.insert(key.to_owned(), v.clone());
                    }
                }
                self.in_force.given = given;
                self.in_force.settings = r.settings;
                self.in_force.problems = r
                    .found
                    .into_iter()
                    .map(SettingsProblem::Annotation)
                    .collect();
                changed
            }
            Err(e) => {
                self.in_force.problems = vec![SettingsProblem::Unreadable(e)];
                false
            }
        }
    }

    /// Asks for the promoted dir's record of the annotations' values in force to be written, when it
    /// no longer holds them.
    pub(super) fn record_settings(&mut self, out: &mut Vec<super::messages::Action>) {
        if !self.setup.gate_only() && self.in_force.given != self.in_force.settings_recorded {
            self.in_force
                .settings_recorded
                .clone_from(&self.in_force.given);
            out.push(super::messages::Action::RecordSettings(
                self.in_force.given.clone(),
            ));
        }
    }

    /// Notes why the settings in force differ from what the annotations file now says (`None`: they
    /// do not); shown in the settings check without failing it.
    pub(super) fn set_annotations_note(&mut self, note: Option<String>) {
        self.in_force.annotations_note = note;
    }
}
