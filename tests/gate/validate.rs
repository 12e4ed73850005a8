//! The component's own checker before promotion (`--validate`), through the real binary on a
//! kubelet volume: real `promtool` passing a good Prometheus config and refusing a broken rule, and
//! `/livez` answering while a checker runs.

use crate::common;

use common::*;
use std::os::unix::fs::PermissionsExt;

const PROMETHEUS_YML: &str = "global:\n  scrape_interval: 15s\nrule_files:\n  - rules.yml\nscrape_configs:\n  - job_name: self\n    static_configs:\n      - targets: ['127.0.0.1:9090']\n";
const GOOD_RULES: &str = "groups:\n  - name: g\n    rules:\n      - alert: Down\n        expr: up == 0\n        for: 5m\n";
const BROKEN_RULES: &str =
    "groups:\n  - name: g\n    rules:\n      - alert: Down\n        expr: up ==\n";

fn prometheus(version: &str, rules: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("version", version.as_bytes().to_vec()),
        ("prometheus.yml", PROMETHEUS_YML.as_bytes().to_vec()),
        ("rules.yml", rules.as_bytes().to_vec()),
    ]
}

fn write(dir: &std::path::Path, files: &[(&'static str, Vec<u8>)]) {
    let files: Vec<(&str, &[u8])> = files.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    kubelet_write(dir, &files);
}

/// promtool passes a good config, which is promoted; it refuses a broken rule, which is held with its
/// first lines and the fix, the staged candidate gone and the promoted dir untouched.
#[test]
fn promtool_passes_a_good_config_and_refuses_a_broken_rule() {
    let promtool = tool("promtool");
    let d = Dirs::new();
    write(&d.watch(), &prometheus("2.0.0", GOOD_RULES));
    let check = format!(
        "exec:{} check config {{dir}}/prometheus.yml",
        promtool.display()
    );
    let g = Gate::start(&d, &["--accepts", "^2", "--validate", &check]);
    g.wait_active("2.0.0");
    assert_eq!(
        read_promoted(&d.promoted()).unwrap()["rules.yml"],
        GOOD_RULES
    );

    write(&d.watch(), &prometheus("2.1.0", BROKEN_RULES));
    let s = g.wait_candidate(Some("2.1.0"), "invalid");
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("version 2.1.0 is in ^2, but promtool refused it (exit status: 1): "),
        "{reason}"
    );
    assert!(
        reason.contains("rules.yml"),
        "promtool's own words: {reason}"
    );
    assert!(
        reason.ends_with(
            "; correct the ConfigMap as the checker says, or change confgate.io/validate"
        ),
        "{reason}"
    );
    assert_eq!(s["active"]["version"], "2.0.0");
    assert_eq!(
        read_promoted(&d.promoted()).unwrap()["rules.yml"],
        GOOD_RULES
    );
    assert!(
        !d.promoted().join("..confgate_candidate").exists(),
        "the staged candidate is removed after the check"
    );
    let log = g.log_text();
    assert!(
        log.contains("the component's checker refused the candidate; not promoted"),
        "{log}"
    );

    write(&d.watch(), &prometheus("2.2.0", GOOD_RULES));
    g.wait_active("2.2.0");
}

/// The checker runs off the thread that answers `/livez`: while it waits (on a file the test makes
/// only after `/livez` answered), the probe endpoints answer and nothing is promoted.
#[test]
fn livez_answers_while_the_checker_runs() {
    let d = Dirs::new();
    let go = d.root.path().join("go");
    let started = d.root.path().join("started");
    let script = d.root.path().join("checker.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntest -f \"$1/version\" || exit 2\n: > {started}\nwhile [ ! -e {go} ]; do sleep 0.01; done\n",
            started = started.display(),
            go = go.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_version(&d.watch(), "2.0.0");
    let check = format!("exec:{} {{dir}}", script.display());
    let g = Gate::start(&d, &["--accepts", "^2", "--validate", &check]);
    wait_for("the checker to start", DEADLINE, || {
        started.exists().then_some(())
    });
    let (code, _) = get(g.port, "/livez").expect("/livez");
    assert_eq!(code, 200, "/livez answers while the checker runs");
    assert!(
        read_promoted(&d.promoted()).is_none(),
        "nothing promoted yet"
    );
    std::fs::write(&go, "").unwrap();
    g.wait_active("2.0.0");
}

/// Anyone who may patch the pod may write its annotations: an annotation naming a program the
/// container spec does not is never run. It is a settings problem, named; the spec's checker stays in
/// force and a new config is checked by it and promoted.
#[test]
fn an_annotation_cannot_name_a_program_to_run() {
    let d = Dirs::new();
    let ran = d.root.path().join("ran");
    let pwned = d.root.path().join("pwned");
    let script = d.root.path().join("checker.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$1\" >> {}\n", ran.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_version(&d.watch(), "2.0.0");
    let check = format!("exec:{} {{dir}}", script.display());
    let g = Gate::start(&d, &["--accepts", "^2", "--validate", &check]);
    g.wait_active("2.0.0");
    let hostile = format!("exec:/usr/bin/touch {} {{dir}}", pwned.display());
    write_annotations(&d.podinfo(), &[("confgate.io/validate", &hostile)]);
    let s = g.wait_status("the annotation reported as a settings problem", |s| {
        s["checks"].as_array().is_some_and(|c| {
            c.iter().any(|c| {
                c["name"] == "settings"
                    && c["ok"] == false
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("confgate.io/validate"))
            })
        })
    });
    let message = s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "settings")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("a checker the container spec does not"),
        "{message}"
    );
    write_version(&d.watch(), "2.1.0");
    g.wait_active("2.1.0");
    assert!(!pwned.exists(), "the annotation's program never ran");
    let ran = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(
        ran.lines().count(),
        2,
        "the spec's checker checked both: {ran}"
    );
}

/// A checker not there yet (an init container still copying it) holds the config with "could not be
/// run", and is tried again after a wait: once it is there, the same content is checked and promoted,
/// with no change to the ConfigMap.
#[test]
fn a_checker_not_there_yet_is_tried_again_until_it_is() {
    let d = Dirs::new();
    let script = d.root.path().join("checker.sh");
    write_version(&d.watch(), "2.0.0");
    let check = format!("exec:{} {{dir}}", script.display());
    let g = Gate::start(&d, &["--accepts", "^2", "--validate", &check]);
    let s = g.wait_candidate(Some("2.0.0"), "invalid");
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("the checker could not be run") && reason.contains("it is run again in"),
        "{reason}"
    );
    assert!(!reason.contains("correct the ConfigMap"), "{reason}");
    std::fs::write(d.root.path().join("checker.tmp"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(
        d.root.path().join("checker.tmp"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::rename(d.root.path().join("checker.tmp"), &script).unwrap();
    g.wait_active("2.0.0");
}

/// A slow check of a config a newer one superseded is ended at once, not waited out to its bound
/// (5m here): the newer config is checked and promoted, and `/status` showed the check under way.
#[test]
fn a_slow_check_of_a_superseded_config_is_cancelled() {
    let d = Dirs::new();
    let pid = d.root.path().join("pid");
    let script = d.root.path().join("checker.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif grep -q 2.1.0 \"$1/version\"; then echo $$ > {}.tmp; mv {pid}.tmp {pid}; exec sleep 600; fi\nexit 0\n",
            pid.display(),
            pid = pid.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_version(&d.watch(), "2.0.0");
    let check = format!("exec:{} {{dir}}", script.display());
    let g = Gate::start(
        &d,
        &[
            "--accepts",
            "^2",
            "--validate",
            &check,
            "--validate-timeout",
            "5m",
        ],
    );
    g.wait_active("2.0.0");
    write_version(&d.watch(), "2.1.0");
    let s = g.wait_status("the check of 2.1.0 shown under way", |s| {
        s["checking"]["version"] == "2.1.0"
    });
    assert_eq!(s["checking"]["checker"], "checker.sh");
    let (_, verbose) = get(g.port, "/readyz?verbose").expect("/readyz?verbose");
    assert!(
        verbose.contains("checking 2.1.0 with checker.sh"),
        "{verbose}"
    );
    let sleeping = wait_for("the checker to start", DEADLINE, || {
        std::fs::read_to_string(&pid).ok()
    });
    write_version(&d.watch(), "2.2.0");
    let s = g.wait_active("2.2.0");
    assert!(s["checking"].is_null(), "{s}");
    assert!(
        !std::path::Path::new("/proc").join(sleeping.trim()).exists(),
        "the superseded checker was ended"
    );
    assert!(
        g.log_text()
            .contains("a newer snapshot superseded the candidate under check"),
        "{}",
        g.log_text()
    );
}
