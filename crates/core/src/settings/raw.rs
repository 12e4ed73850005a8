//! `RawValue`: a setting's value as given (a flag, an environment variable, an annotation), before
//! its parser reads it.

/// A setting's value as given, before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawValue {
    /// One text: a flag given once, an environment variable, an annotation.
    Text(String),
    /// The items of a [`Repeat::Lines`](super::gate::Repeat::Lines) setting from the command line,
    /// in order: each value of its flag, then each line of its file (or of its environment
    /// variable), never joined into one text.
    Lines(Vec<String>),
}

impl From<&str> for RawValue {
    fn from(text: &str) -> RawValue {
        RawValue::Text(text.to_owned())
    }
}

impl From<String> for RawValue {
    fn from(text: String) -> RawValue {
        RawValue::Text(text)
    }
}

/// As a bad value is shown back: the text, or the items one per line.
impl std::fmt::Display for RawValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawValue::Text(text) => f.write_str(text),
            RawValue::Lines(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    f.write_str(item)?;
                }
                Ok(())
            }
        }
    }
}
