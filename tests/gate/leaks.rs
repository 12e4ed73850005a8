//! Config content never leaves the process: for configs whose parse errors used to quote the document
//! (long numbers, tagged scalars, repeated keys, a YAML document read with `file:`), the real binary's
//! `/readyz?verbose`, `/status`, `/metrics`, `confgate probe ready` output and logs hold no secret.

use crate::common;

use std::time::Duration;

use common::{Gate, Volume};

const SECRET: &str = "s3cr3tpassw0rdvalue";
const LONG_NUMBER: &str = "918273645546372819918273645546372819";

/// The version spec, and the key's content that must be judged invalid without being quoted.
fn cases() -> Vec<(&'static str, String)> {
    let y = "yaml:app.yaml#/version";
    vec![
        (y, format!("version: !!int {SECRET}\n")),
        (y, format!("password: !!int {SECRET}\nversion: 1.2.0\n")),
        (
            y,
            format!("password: {LONG_NUMBER}\nversion: [1, {SECRET}\n"),
        ),
        (y, format!("{SECRET}: 1\n{SECRET}: 2\nversion: 1.2.0\n")),
        (y, format!("version: 1.2.0\npassword: \"{SECRET}\n")),
        (
            "file:app.yaml",
            format!("version: 1.2.0\npassword: {SECRET}\n"),
        ),
        (
            "json:app.yaml#/version",
            format!("{{\"version\": \"1.2.0\", \"password\": {SECRET}}}"),
        ),
    ]
}

fn probe_output(port: u16) -> String {
    let out = std::process::Command::new(common::BIN)
        .args(["probe", "ready", "--addr", &format!("127.0.0.1:{port}")])
        .output()
        .expect("run confgate probe");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn no_endpoint_probe_or_log_quotes_the_config() {
    for (from, bad) in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let vol = Volume::new(tmp.path().join("incoming"));
        let good = if from.starts_with("file:") {
            "1.0.0"
        } else if from.starts_with("json:") {
            "{\"version\": \"1.0.0\"}"
        } else {
            "version: 1.0.0\n"
        };
        vol.write(&[("app.yaml", good.as_bytes())]).unwrap();
        let promoted = tmp.path().join("promoted");
        let ann = tmp.path().join("podinfo/annotations");
        let mut cg = Gate::spawn(
            &[
                "--watch",
                vol.dir.to_str().unwrap(),
                "--promote-to",
                promoted.to_str().unwrap(),
                "--annotations",
                ann.to_str().unwrap(),
                "--accepts",
                "^1",
                "--version-from",
                from,
                "--on-incompatible",
                "unready",
            ],
            &tmp.path().join("confgate.log"),
        );
        cg.deadline = Duration::from_secs(15);
        cg.wait_active("1.0.0");

        vol.write(&[("app.yaml", bad.as_bytes())]).unwrap();
        let s = cg.wait_status(&format!("{from}: {bad:?} judged invalid"), |s| {
            s["candidate"]["verdict"] == "invalid"
        });
        let reason = s["candidate"]["reason"].as_str().unwrap_or_default();
        assert!(!reason.is_empty(), "{s}");

        let readyz = common::get(cg.port, "/readyz?verbose").unwrap();
        assert_eq!(readyz.0, 503, "{from}: {}", readyz.1);
        let metrics = common::get(cg.port, "/metrics").unwrap().1;
        let probe = probe_output(cg.port);
        assert!(probe.contains("config"), "{from}: probe said {probe:?}");
        let log = cg.log_text();
        for (what, text) in [
            ("/status", s.to_string()),
            ("/readyz?verbose", readyz.1),
            ("/metrics", metrics),
            ("confgate probe ready", probe),
            ("the log", log),
        ] {
            for needle in [SECRET, &LONG_NUMBER[..12], "password"] {
                assert!(
                    !text.contains(needle),
                    "{from}: {what} quotes {needle:?} of {bad:?}:\n{text}"
                );
            }
        }
        drop(cg);
    }
}
