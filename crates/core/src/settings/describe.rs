//! The settings described for people: the known annotations, each setting in force with where it came
//! from (the start-up log), and the README's table.
//!
//! A setting's origin in the start-up `setting in force` lines is a valid annotation, else where
//! clap found the value (`Given`, flag or env, kept by the command line), else the default.

use super::container::ANN_SOURCE;
use super::gate::{Repeat, SETTINGS, Setting, Settings};
use crate::annotations::Annotations;

/// The `confgate.io/` annotations confgate reads: one per gate setting, and the API source's.
pub fn known_annotations() -> impl Iterator<Item = &'static str> {
    SETTINGS
        .iter()
        .map(|s| s.annotation)
        .chain(std::iter::once(ANN_SOURCE))
}

/// The README's table of gate settings, made from [`SETTINGS`]; `tests/docs/readme.rs` keeps the README's
/// copy equal to it.
pub fn readme_table() -> String {
    let mut out =
        String::from("| setting | flag | env | annotation | default |\n|---|---|---|---|---|\n");
    for s in SETTINGS {
        let value = if s.value_name.contains(' ') {
            format!("\"{}\"", s.value_name)
        } else {
            s.value_name.to_owned()
        };
        let flag = match s.repeat {
            Repeat::Lines {
                file_flag,
                file_env,
                ..
            } => format!(
                "`--{} {value}` (repeatable), `--{file_flag} FILE` (`{file_env}`)",
                s.flag
            ),
            Repeat::Once | Repeat::PerRange => format!("`--{} {value}`", s.flag),
        };
        let default = s
            .default_text()
            .map_or_else(|| "none".to_owned(), |d| format!("`{d}`"));
        let default = if s.default_means.is_empty() {
            default
        } else {
            format!("{default}: {}", s.default_means)
        };
        out.push_str(&format!(
            "| {} | {flag} | `{}` | `{}` | {default} |\n",
            s.title, s.env, s.annotation
        ));
    }
    out
}

impl Settings {
    /// Each gate setting as (name, annotation, value as text), in [`SETTINGS`]' order.
    pub fn describe(&self) -> Vec<(&'static str, &'static str, String)> {
        SETTINGS
            .iter()
            .map(|s| (s.flag, s.annotation, s.show(self)))
            .collect()
    }

    /// Where each gate setting in force came from, in [`Settings::describe`]'s order: the annotation
    /// (when present and valid), else where the command line's parser found the value (`given`: the
    /// flag or its environment variable), else the default.
    pub fn origins(ann: &Annotations, given: impl Fn(&Setting) -> Option<Given>) -> Vec<String> {
        SETTINGS
            .iter()
            .map(|s| {
                if s.annotated_by(ann) {
                    return format!("annotation {}", s.annotation);
                }
                match given(s) {
                    Some(Given::Env) => format!("env {}", s.env),
                    Some(Given::Flag) => format!("flag --{}", s.flag),
                    None => "default".to_owned(),
                }
            })
            .collect()
    }
}

/// Where the command line found a setting's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Given {
    Flag,
    Env,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> Annotations {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn origins_name_annotation_env_flag_or_default() {
        let a = ann(&[
            ("confgate.io/mode", "enforce"),
            ("confgate.io/reload", "nonsense"),
        ]);
        let given = |s: &Setting| match s.flag {
            "accepts" => Some(Given::Env),
            "mode" | "reload" => Some(Given::Flag),
            _ => None,
        };
        let o = Settings::origins(&a, given);
        let names: Vec<_> = Settings::default()
            .describe()
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        let by = |n: &str| o[names.iter().position(|x| *x == n).unwrap()].as_str();
        assert_eq!(by("accepts"), "env CONFGATE_ACCEPTS");
        assert_eq!(by("mode"), "annotation confgate.io/mode");
        assert_eq!(
            by("reload"),
            "flag --reload",
            "a bad annotation does not count"
        );
        assert_eq!(by("version-from"), "default");
    }
}
