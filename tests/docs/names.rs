//! Names the project does not own stay out of it: every reference to confgate's own images is under
//! `localhost/` (a name no registry on the internet serves, so a node that lacks the image cannot pull
//! someone else's by it), and the licence file matches Cargo.toml's `license`.

use std::path::Path;

/// The repository's own text files: sources, docs, manifests, scripts and fixtures.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "venv" | "node_modules") {
                files(&p, out);
            }
        } else if let Ok(text) = std::fs::read_to_string(&p)
            && !text.is_empty()
        {
            out.push(p);
        }
    }
}

#[test]
fn every_image_of_the_project_is_named_under_localhost() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    let mut wrong = Vec::new();
    // This file names the patterns it looks for.
    for p in all.iter().filter(|p| !p.ends_with("tests/docs/names.rs")) {
        let text = std::fs::read_to_string(p).unwrap();
        for (i, _) in text.match_indices("confgate/") {
            // The reference this `confgate/` is part of: back to a space, quote, `=`, `(` or line start.
            let start = text[..i]
                .rfind(|c: char| c.is_whitespace() || "\"'`=(,[-".contains(c))
                .map_or(0, |s| s + 1);
            let reference = &text[start..];
            let reference = &reference[..reference
                .find(|c: char| c.is_whitespace() || "\"'`)],".contains(c))
                .unwrap_or(reference.len())];
            let image = reference.contains("confgate/confgate")
                || reference.contains("confgate/example-component");
            if image && !reference.starts_with("localhost/confgate/") {
                wrong.push(format!(
                    "{}: {reference}",
                    p.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "images named outside localhost/ (a registry namespace the project does not own):\n{}",
        wrong.join("\n")
    );
}

/// Cargo.toml says Apache-2.0; LICENSE is that licence's text.
#[test]
fn the_licence_file_is_the_one_cargo_toml_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("\nlicense = \"Apache-2.0\"\n"));
    let licence = std::fs::read_to_string(root.join("LICENSE")).expect("a LICENSE file");
    assert!(
        licence.trim_start().starts_with("Apache License")
            && licence.contains("Version 2.0, January 2004")
            && licence.contains("http://www.apache.org/licenses/")
            && licence.contains("END OF TERMS AND CONDITIONS"),
        "LICENSE is not the Apache License 2.0"
    );
}
