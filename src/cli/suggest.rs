//! clap's suggestion for an unknown flag, kept only when it is near what was typed.

/// A usage error as clap made it, without a suggestion that is not near what was typed: clap suggests
/// the flag most similar by Jaro similarity over 0.7, which pairs unrelated names (`--frobnicate` with
/// `--on-incompatible`). A suggestion is kept when it is at most a third of the typed name's edits away
/// (at least two: a transposed pair), as `--acept` for `--accepts` or `--relaod` for `--reload` are.
pub fn without_far_suggestions(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let (Some(ContextValue::String(typed)), Some(ContextValue::String(suggested))) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::SuggestedArg),
    ) else {
        return e;
    };
    let typed = typed.split('=').next().unwrap_or(typed);
    let (a, b) = (
        typed.trim_start_matches('-'),
        suggested.trim_start_matches('-'),
    );
    if crate::listing::nearest(a, [b]).is_none() {
        e.remove(ContextKind::SuggestedArg);
        // The usage line clap made shows the suggested flag as if it were required.
        e.remove(ContextKind::Usage);
    }
    e
}

#[cfg(test)]
mod tests {
    use crate::listing::edits;

    #[test]
    fn edits_count_insertions_deletions_and_substitutions() {
        assert_eq!(edits("accepts", "accepts"), 0);
        assert_eq!(edits("acept", "accepts"), 2);
        assert_eq!(edits("relaod", "reload"), 2);
        assert_eq!(edits("", "mode"), 4);
        assert!(edits("frobnicate", "on-incompatible") > 5);
    }
}
