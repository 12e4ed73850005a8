//! Content rules as a gate setting, end to end through the real binary: a failing rule holds the config
//! in `run`, `check` gives the same verdict and message, a fix promotes, the annotation applies live, and
//! a build without the `policy` feature refuses a rule instead of ignoring it.

use crate::common;

use common::*;
use std::process::{Command, Output};

#[cfg(feature = "policy")]
const RULE_OK: &str = "data['config'].contains('listen:')";

fn confgate(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("CONFGATE_ACCEPTS")
        .env_remove("CONFGATE_REQUIRE")
        .env_remove("CONFGATE_RULES")
        .env_remove("CONFGATE_RULES_FILE")
        .env_remove("CONFGATE_VERSION_FROM")
        .output()
        .expect("run confgate")
}

#[cfg(feature = "policy")]
/// The reason `check` gives for its only line (the fifth column onwards, after `PATH: `).
fn check_reason(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_default().to_owned();
    line.split_once(": ")
        .map(|(_, r)| r.to_owned())
        .unwrap_or(line)
}

#[cfg(feature = "policy")]
#[test]
fn a_failing_rule_holds_until_the_config_is_fixed() {
    let d = Dirs::new();
    kubelet_write(
        &d.watch(),
        &[("version", b"2.4.1"), ("config", b"listen: :8080\n")],
    );
    let g = Gate::start(&d, &["--accepts", "^2", "--rule", RULE_OK]);
    g.wait_active("2.4.1");

    // Accepted by the range, refused by the rule: held, and the reason names the rule, not the content.
    kubelet_write(
        &d.watch(),
        &[("version", b"2.5.0"), ("config", b"port: 8080 # hunter2\n")],
    );
    let s = g.wait_candidate(Some("2.5.0"), "invalid");
    let reason = s["candidate"]["reason"].as_str().unwrap().to_owned();
    assert_eq!(
        reason,
        format!("version 2.5.0 is in ^2, but rule 1 (`{RULE_OK}`) is false")
    );
    assert_eq!(s["active"]["version"], "2.4.1");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "2.4.1");
    assert!(!g.log_text().contains("hunter2"), "content in the log");

    // `check` on the same volume: the same verdict, the same words.
    let out = confgate(&[
        "check",
        "--accepts",
        "^2",
        "--rule",
        RULE_OK,
        d.watch().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(check_reason(&out), reason);

    // Fixed: promoted.
    kubelet_write(
        &d.watch(),
        &[("version", b"2.5.0"), ("config", b"listen: :9090\n")],
    );
    g.wait_active("2.5.0");
    assert_eq!(
        read_promoted(&d.promoted()).unwrap()["config"],
        "listen: :9090\n"
    );
}

/// `confgate.io/rules` replaces the flag's rules live (one per line, `#` comments), and removing it
/// brings the flag's back.
#[cfg(feature = "policy")]
#[test]
fn the_rules_annotation_applies_live() {
    let d = Dirs::new();
    kubelet_write(
        &d.watch(),
        &[("version", b"1.0.0"), ("config", b"listen: x")],
    );
    let g = Gate::start(&d, &["--accepts", "^1", "--rule", RULE_OK]);
    g.wait_active("1.0.0");
    write_annotations(
        &d.podinfo(),
        &[(
            "confgate.io/rules",
            "# the config must name a port\n'port' in data\nsize(data) >= 2\n",
        )],
    );
    kubelet_write(
        &d.watch(),
        &[("version", b"1.1.0"), ("config", b"listen: x")],
    );
    let s = g.wait_candidate(Some("1.1.0"), "invalid");
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("rule 1 (`'port' in data`) is false"),
        "{reason}"
    );
    write_annotations(&d.podinfo(), &[]);
    g.wait_active("1.1.0");
}

/// Rules see a key under `data` when it is UTF-8 and under `binaryData` otherwise: in a volume, and in a
/// manifest's real fields when they agree with that (what `kubectl create configmap` writes).
#[cfg(feature = "policy")]
#[test]
fn check_splits_keys_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cm.yaml");
    std::fs::write(
        &manifest,
        "kind: ConfigMap\nmetadata: {name: a, namespace: b}\ndata: {version: 1.0.0}\nbinaryData: {blob: /wAB}\n",
    )
    .unwrap();
    let vol = dir.path().join("vol");
    kubelet_write(&vol, &[("version", b"1.0.0"), ("blob", &[0xff, 0, 1])]);
    for path in [manifest.to_str().unwrap(), vol.to_str().unwrap()] {
        let ok = confgate(&[
            "check",
            "--accepts",
            "^1",
            "--rule",
            "'blob' in binaryData && size(binaryData['blob']) == 3",
            "--rule",
            "!('blob' in data) && data['version'] == '1.0.0'",
            path,
        ]);
        assert_eq!(
            ok.status.code(),
            Some(0),
            "{path}: {}",
            String::from_utf8_lossy(&ok.stdout)
        );
    }
}

#[cfg(feature = "policy")]
#[test]
fn a_rule_that_does_not_compile_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.cel");
    std::fs::write(&file, "# fine\ntrue\ndata.(\n").unwrap();
    for args in [
        vec!["check", "--accepts", "^1", "--rule", "data.(", "."],
        vec![
            "check",
            "--accepts",
            "^1",
            "--rules-file",
            file.to_str().unwrap(),
            ".",
        ],
        vec!["run", "--accepts", "^1", "--rule", "data.("],
    ] {
        let out = confgate(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains("--rule (CONFGATE_RULES)"), "{err}");
        assert!(err.contains("is not a valid CEL expression"), "{err}");
    }
    let out = confgate(&[
        "check",
        "--accepts",
        "^1",
        "--rules-file",
        "/nonexistent/r",
        ".",
    ]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the rules file"));
}

/// Each `--rule` is one rule, whatever it spans (a CEL expression may be written over several lines);
/// the environment variable and the rules file hold one per line, after the flags' in the numbering.
#[cfg(feature = "policy")]
#[test]
fn a_rule_flag_is_one_rule_and_the_env_var_and_file_one_per_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("version"), "1.0.0").unwrap();
    let rules = dir.path().join("rules.cel");
    std::fs::write(&rules, "# from the file\ndata.version != '1.0.0'\n").unwrap();
    let path = dir.path().to_str().unwrap();
    let out = confgate(&[
        "check",
        "--accepts",
        "^1",
        "--rule",
        "'version' in data &&\n  data.version == '1.0.0'",
        path,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let out = confgate(&[
        "check",
        "--accepts",
        "^1",
        "--rule",
        "true",
        "--rule",
        "'version' in data &&\n  data.version == '1.0.0'",
        "--rules-file",
        rules.to_str().unwrap(),
        path,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let reason = check_reason(&out);
    assert!(
        reason.contains("rule 3 (`data.version != '1.0.0'`) is false"),
        "{reason}"
    );
    let out = Command::new(BIN)
        .args(["check", "--accepts", "^1", path])
        .env(
            "CONFGATE_RULES",
            "true\n# a comment\ndata.version != '1.0.0'\n",
        )
        .env_remove("CONFGATE_RULES_FILE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let reason = check_reason(&out);
    assert!(
        reason.contains("rule 2 (`data.version != '1.0.0'`) is false"),
        "{reason}"
    );
}

/// Without the `policy` feature there is no CEL engine: a rule is refused, never skipped.
#[cfg(not(feature = "policy"))]
#[test]
fn without_the_policy_feature_a_rule_is_refused() {
    for args in [
        vec!["check", "--accepts", "^1", "--rule", "true", "."],
        vec!["run", "--accepts", "^1", "--rule", "true"],
        vec!["wait", "--accepts", "^1", "--rule", "true"],
    ] {
        let out = confgate(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains("`policy` cargo feature"), "{err}");
    }
}
