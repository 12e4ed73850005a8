//! Fuzz target: the downward-API annotations parser. Whatever it accepts must survive a round trip
//! through the kubelet's own format.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(parsed) = confgate::annotations::parse(text) {
        let again = confgate::annotations::parse(&confgate::annotations::format(&parsed))
            .expect("formatted annotations parse");
        assert_eq!(again, parsed, "round trip changed the annotations");
    }
});
