//! `confgate check` finds, in a pod not injected yet, the ConfigMap volume `confgate inject` would gate
//! (one shared choice): a ConfigMap volume beside a projected volume that mixes kinds, an all-ConfigMap
//! projected volume, and a mixed one alone, which neither gates. The real binary, both commands.

use crate::common;

use std::process::Output;

use common::{confgate_alone, output_with_stdin};

fn run(args: &[&str], stdin: &str) -> Output {
    let mut cmd = confgate_alone();
    cmd.args(args);
    output_with_stdin(cmd, stdin)
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

fn deployment(volumes: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app, namespace: prod}}\nspec:\n  template:\n    metadata:\n      annotations: {{confgate.io/accepts: '^2.4'}}\n    spec:\n      containers:\n      - name: app\n        volumeMounts: [{{name: config, mountPath: /etc/app}}]\n      volumes:\n{volumes}"
    )
}

fn configmap(name: &str, version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: prod}}\ndata: {{version: '{version}'}}\n"
    )
}

/// `check -` on `stream`, and on the same stream after the real `inject`: the report lines of both,
/// and the injected stream.
fn before_and_after(stream: &str) -> (Output, Output, String) {
    let out = run(&["inject", "-"], stream);
    assert!(out.status.success(), "{}", text(out.stderr));
    let injected = text(out.stdout);
    assert!(injected.contains("name: confgate"), "{injected}");
    (
        run(&["check", "-"], stream),
        run(&["check", "-"], &injected),
        injected,
    )
}

/// The 1-based place of `kind/name` in `stream`, as `check` numbers documents.
fn document_of(stream: &str, kind: &str, name: &str) -> usize {
    confgate::inject::documents("-", stream)
        .unwrap()
        .iter()
        .position(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in {stream}"))
        + 1
}

#[test]
fn check_judges_the_volume_inject_gates() {
    let mixed = "      - {name: extra, projected: {sources: [{configMap: {name: other}}, {downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}}]}}\n";
    for (volumes, want) in [
        // A ConfigMap volume beside a projected volume mixing kinds: inject gates the first.
        (
            format!("      - {{name: config, configMap: {{name: ok}}}}\n{mixed}"),
            vec![("ok", "version 2.5.0 is in ^2.4")],
        ),
        // A projected volume of ConfigMaps only is gated as one: each of its ConfigMaps is judged.
        (
            "      - {name: config, projected: {sources: [{configMap: {name: ok}}, {configMap: {name: other}}]}}\n"
                .to_owned(),
            vec![
                ("ok", "version 2.5.0 is in ^2.4"),
                ("other", "version 2.6.0 is in ^2.4"),
            ],
        ),
    ] {
        let stream = [
            deployment(&volumes),
            configmap("ok", "2.5.0"),
            configmap("other", "2.6.0"),
        ]
        .join("---\n");
        let (before, after, injected) = before_and_after(&stream);
        for (what, out, input) in [
            ("before inject", before, &stream),
            ("after inject", after, &injected),
        ] {
            let stderr = text(out.stderr);
            assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
            let stdout = text(out.stdout);
            let rests: Vec<&str> = stdout
                .lines()
                .map(|l| l.split_once(" prod/").map_or(l, |(_, r)| r))
                .collect();
            // Each ConfigMap named at its place in the stream checked (inject adds documents).
            let want: Vec<String> = want
                .iter()
                .map(|(name, verdict)| {
                    let n = document_of(input, "ConfigMap", name);
                    format!("{name} (for deployment/app; - document {n}): {verdict}")
                })
                .collect();
            assert_eq!(rests, want, "{what}: {stdout}\n{stderr}");
        }
    }
}

/// A pod whose only ConfigMap comes in a projected volume with a Secret: inject refuses it, and check
/// judges nothing for it, saying why in inject's words.
#[test]
fn a_mixed_projected_volume_is_neither_gated_nor_judged() {
    let stream = [
        deployment(
            "      - {name: config, projected: {sources: [{configMap: {name: ok}}, {secret: {name: s}}]}}\n",
        ),
        configmap("ok", "2.5.0"),
    ]
    .join("---\n");
    let why = "volume config projects a ConfigMap together with secret";
    let inject = run(&["inject", "-"], &stream);
    assert_eq!(inject.status.code(), Some(64));
    assert!(text(inject.stderr).contains(why));
    let check = run(&["check", "--accepts", "^3", "-"], &stream);
    let stderr = text(check.stderr);
    assert!(
        stderr.contains(&format!(
            "deployment/app: its pods run no confgate container, and confgate inject would not gate a \
             volume: {why}"
        )),
        "{stderr}"
    );
    // Judged with the flags, as a ConfigMap no workload reads.
    let stdout = text(check.stdout);
    assert!(
        stdout.contains("prod/ok (- document 2): version 2.5.0 is older than ^3 allows"),
        "{stdout}"
    );
    assert_eq!(check.status.code(), Some(1));
}
