//! Manifest streams as `check` and `inject` read them: the YAML options, and the most documents one
//! input may hold.

/// The most documents one input may hold. A `kustomize build` of a large platform runs to thousands
/// of documents, so the limit sits far above any real stream; work and memory are bounded by the
/// budgets [`crate::extract::yaml_options`] scales with the input's length, not by this number.
pub(crate) const MAX_DOCUMENTS: usize = 100_000;

/// The YAML options for a manifest stream: those of [`crate::extract::yaml_options`] (no snippets,
/// which would quote the input; budgets scaled to its length) with the stream's document limit.
pub(crate) fn yaml_options(len: usize) -> serde_saphyr::Options {
    let mut options = crate::extract::yaml_options(len);
    if let Some(budget) = options.budget.as_mut() {
        budget.max_documents = MAX_DOCUMENTS;
    }
    options
}

/// Whether the parser stopped because the stream holds more than [`MAX_DOCUMENTS`] documents.
pub(crate) fn too_many_documents(e: &serde_saphyr::Error) -> bool {
    let mut e = e;
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = e
    {
        e = error;
    }
    matches!(
        e,
        serde_saphyr::Error::Budget {
            breach: serde_saphyr::budget::BudgetBreach::Documents { .. },
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_told_apart_from_bad_yaml() {
        let stream = |n: usize| "---\na: 1\n".repeat(n);
        let read = |text: &str| {
            serde_saphyr::from_multiple_with_options::<serde_json::Value>(
                text,
                yaml_options(text.len()),
            )
        };
        assert_eq!(read(&stream(MAX_DOCUMENTS)).unwrap().len(), MAX_DOCUMENTS);
        let e = read(&stream(MAX_DOCUMENTS + 1)).unwrap_err();
        assert!(too_many_documents(&e), "{e}");
        assert!(!too_many_documents(&read("a: [").unwrap_err()));
    }
}
