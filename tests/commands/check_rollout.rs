//! `confgate check` on a ConfigMap mid-rollout (`K.next` keys and `confgate.rollout`), the real binary:
//! each track judged as the pods on it judge it, for every workload reading it, with the hash those
//! pods report; a candidate that would be held is a negative verdict.

use crate::common;

use std::path::Path;

use common::{confgate_alone, output_with_stdin};

struct Run {
    code: i32,
    /// Each line's verdict, version, hash, and the rest (what and why).
    lines: Vec<[String; 4]>,
    stderr: String,
}

fn check(args: &[&str], stdin: &str) -> Run {
    let mut cmd = confgate_alone();
    cmd.arg("check").args(args).arg("-");
    let out = output_with_stdin(cmd, stdin);
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut parts = l.split_whitespace();
            let mut next = || parts.next().unwrap_or_default().to_owned();
            let (verdict, version, hash) = (next(), next(), next());
            let rest = l.split_once(&format!(" {hash} ")).map_or("", |(_, r)| r);
            [verdict, version, hash, rest.to_owned()]
        })
        .collect();
    Run {
        code: out.status.code().unwrap(),
        lines,
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

const FLAGS: [&str; 4] = [
    "--accepts",
    ">=2.4.0, <3.0.0",
    "--version-from",
    "yaml:config.yaml#/schemaVersion",
];

/// The hash `check` gives a ConfigMap holding exactly `config_yaml` under `config.yaml`: what a pod
/// promoting that set reports.
fn hash_of(config_yaml: &str) -> String {
    let indented: String = config_yaml.lines().map(|l| format!("    {l}\n")).collect();
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: set\ndata:\n  config.yaml: |\n{indented}"
    );
    let run = check(&FLAGS, &cm);
    assert_eq!(run.lines.len(), 1, "{}", run.stderr);
    run.lines[0][2].clone()
}

const STABLE: &str = "schemaVersion: 2.4.1\ngreeting: hello\nlisten:\n  port: 8080\n";

/// The shipped example as kustomize builds it: one line per track for the deployment reading it, each
/// with the hash of the set its pods promote (never the stored ConfigMap's, `.next` keys included).
#[test]
fn the_shipped_rollout_is_judged_on_both_tracks() {
    let text = kustomized_rollout();
    let run = check(&[], &text);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.lines.len(), 2, "{:?}", run.lines);
    let [stable, candidate] = [&run.lines[0], &run.lines[1]];
    assert_eq!(
        [stable[0].as_str(), stable[1].as_str()],
        ["accepted", "2.4.1"]
    );
    assert!(
        stable[3]
            .starts_with("component-rollout-config (for deployment/component-rollout; - document ")
            && stable[3].ends_with(" stable: version 2.4.1 is in >=2.4.0, <3.0.0"),
        "{stable:?}"
    );
    assert_eq!(
        [candidate[0].as_str(), candidate[1].as_str()],
        ["accepted", "2.5.0"]
    );
    assert!(
        candidate[3].ends_with(
            " candidate 25%: promoted on the candidate pods (25%): version 2.5.0 is in >=2.4.0, <3.0.0"
        ),
        "{candidate:?}"
    );
    assert_eq!(stable[2], hash_of(STABLE));
    assert_eq!(
        candidate[2],
        hash_of("schemaVersion: 2.5.0\ngreeting: hello, world\nlisten:\n  port: 8080\n")
    );
}

/// A candidate outside the range would be held on the candidate pods: its line says so, ends with the
/// fix, and the check exits 1 although every pod off the candidate is fine.
#[test]
fn a_candidate_that_would_be_held_fails_the_check() {
    let text = kustomized_rollout();
    let text = text.replace("schemaVersion: 2.5.0", "schemaVersion: 3.0.0");
    let run = check(&[], &text);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.lines.len(), 2, "{:?}", run.lines);
    assert_eq!(run.lines[0][0], "accepted");
    let candidate = &run.lines[1];
    assert_eq!(
        [candidate[0].as_str(), candidate[1].as_str()],
        ["too-new", "3.0.0"]
    );
    assert!(
        candidate[3].ends_with(
            " candidate 25%: would be held on the candidate pods (25%), which keep stable: version \
             3.0.0 is newer than >=2.4.0, <3.0.0 allows; roll the ConfigMap back to a version in \
             >=2.4.0, <3.0.0, or raise confgate.io/accepts once the component reads 3.0.0"
        ),
        "{candidate:?}"
    );
    assert!(!candidate[3].contains("greeting"), "content leaked");
}

fn deployment(name: &str, accepts: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  template:\n    metadata:\n      annotations: {{confgate.io/accepts: '{accepts}', confgate.io/version-from: 'file:version'}}\n    spec:\n      initContainers:\n      - name: confgate\n        restartPolicy: Always\n        volumeMounts: [{{name: incoming, mountPath: /etc/confgate/incoming}}]\n      containers:\n      - name: app\n      volumes:\n      - {{name: incoming, configMap: {{name: cfg}}}}\n"
    )
}

fn rolling(stable: &str, next: &str, percent: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  version: '{stable}'\n  version.next: '{next}'\n  confgate.rollout: '{percent}'\n"
    )
}

/// Every workload reading the ConfigMap judges both tracks against its own range.
#[test]
fn each_workload_judges_both_tracks_against_its_range() {
    let stream = [
        deployment("old", ">=2.0, <2.5"),
        deployment("new", "^2"),
        rolling("2.4.1", "2.5.0", "10%"),
    ]
    .join("---\n");
    let run = check(&[], &stream);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let got: Vec<(&str, &str, &str)> = run
        .lines
        .iter()
        .map(|l| {
            let (what, _) = l[3].split_once(": ").unwrap();
            (l[0].as_str(), l[1].as_str(), what)
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "accepted",
                "2.4.1",
                "cfg (for deployment/old; - document 3) stable"
            ),
            (
                "too-new",
                "2.5.0",
                "cfg (for deployment/old; - document 3) candidate 10%"
            ),
            (
                "accepted",
                "2.4.1",
                "cfg (for deployment/new; - document 3) stable"
            ),
            (
                "accepted",
                "2.5.0",
                "cfg (for deployment/new; - document 3) candidate 10%"
            ),
        ]
    );
    assert!(
        run.lines[1][3].contains("would be held on the candidate pods (10%)"),
        "{:?}",
        run.lines[1]
    );
}

/// With no pod on the candidate (0%, or no `confgate.rollout` left after an abort) only the stable set
/// is judged, as every pod promotes it; a rollout key that is not a percentage makes the ConfigMap
/// invalid, as on every pod.
#[test]
fn without_pods_on_the_candidate_only_stable_is_judged() {
    let flags = ["--accepts", "^2", "--version-from", "file:version"];
    for cm in [
        rolling("2.4.1", "9.0.0", "0%"),
        rolling("2.4.1", "9.0.0", "0%").replace("  confgate.rollout: '0%'\n", ""),
    ] {
        let run = check(&flags, &cm);
        assert_eq!(run.code, 0, "{cm}: {}", run.stderr);
        assert_eq!(run.lines.len(), 1, "{:?}", run.lines);
        assert_eq!(run.lines[0][1], "2.4.1");
        assert!(
            run.lines[0][3].starts_with("cfg (- document 1) stable: version 2.4.1 is in ^2"),
            "{:?}",
            run.lines[0]
        );
    }
    let run = check(&flags, &rolling("2.4.1", "2.5.0", "lots"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.lines.len(), 1, "{:?}", run.lines);
    assert_eq!(run.lines[0][0], "invalid");
    assert!(
        run.lines[0][3].contains("key confgate.rollout is not a percentage"),
        "{:?}",
        run.lines[0]
    );
}

/// `kubectl kustomize manifests/rollout`.
fn kustomized_rollout() -> String {
    common::kustomize(&Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/rollout"))
}
