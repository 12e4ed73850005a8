//! Fuzz target: version extraction and judging. The first byte picks where the version is read from
//! (`file:`, `json:` or `yaml:` with one of a few pointers); the rest is the content of that key.
//! Besides not crashing, no reason may quote the content beyond the version read.
#![no_main]

use std::collections::BTreeMap;

use confgate::settings::{Raw, Settings};
use confgate::snapshot::{Observed, Snapshot};
use libfuzzer_sys::fuzz_target;

const SOURCES: [(&str, &str); 8] = [
    ("version", "file:version"),
    ("cfg.json", "json:cfg.json#/version"),
    ("cfg.json", "json:cfg.json#/meta/schema~1version"),
    ("cfg.json", "json:cfg.json#/a/0/b"),
    ("cfg.yaml", "yaml:cfg.yaml#/version"),
    ("cfg.yaml", "yaml:cfg.yaml#/meta/schema~1version"),
    ("cfg.yaml", "yaml:cfg.yaml#/a/0/b"),
    ("cfg.yaml", "yaml:cfg.yaml#"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, content)) = data.split_first() else {
        return;
    };
    let (key, from) = SOURCES[pick as usize % SOURCES.len()];
    let accepts = if pick & 0x80 == 0 { ">=1.2.0, <2.0.0" } else { "^0.3.0-beta, <1" };
    let settings = Settings::from_raw(&Raw {
        accepts: Some(accepts.into()),
        version_from: Some(from.into()),
        ..Raw::default()
    })
    .expect("fixed settings are valid");
    let snap = Snapshot::new(BTreeMap::from([(key.to_owned(), content.to_vec())]));
    let j = confgate::verdict::judge(&Observed::Config(snap), &settings);
    assert!(!j.reason.is_empty(), "every verdict has a reason");
    // No run of the content longer than 8 letters or digits is quoted unless it is the version read
    // or part of the settings (key names, pointer, range).
    let allowed = [from, accepts, j.version.as_deref().unwrap_or("")];
    for w in content.windows(9) {
        if w.iter().all(u8::is_ascii_alphanumeric) {
            let w = std::str::from_utf8(w).expect("ASCII");
            assert!(
                !j.reason.contains(w) || allowed.iter().any(|a| a.contains(w)),
                "the reason {:?} quotes {w:?}",
                j.reason
            );
        }
    }
});
