//! Fuzz target: the ConfigMap manifest reader used by `confgate check` (multi-document YAML or JSON).
#![no_main]

use confgate::snapshot::Observed;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(found) = confgate::check::manifests("fuzz.yaml", text) {
        for (_, obs) in found {
            if let Observed::Config(snap) = &obs {
                assert!(snap.total_bytes() <= confgate::snapshot::MAX_BYTES);
            }
        }
    }
});
