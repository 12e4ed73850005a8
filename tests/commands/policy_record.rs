//! `confgate policy` guarding the known-good record (`NAME.confgate-known-good`) beside the source,
//! evaluated client-side with kube-cel as in `policy`: the record is matched by the same policy, its
//! content is never judged as a config, a write from anyone but a gated pod's ServiceAccount is refused
//! (kube-cel has no `userInfo.extra`, so the pod-bound half is proven on the real API server in
//! `tests/cluster/policy_record.rs`), a metadata-only change passes, and its deletion is refused as
//! the source's. And `--service-account` as the command reads it.
#![cfg(feature = "policy")]

use std::process::Command;

use serde_json::{Value, json};

use super::policy::{Compiled, NAME, NS, big_stack, configmap, policy_for, settings};
use confgate::policy::{self, Request};

const BIN: &str = env!("CARGO_BIN_EXE_confgate");

fn record_name() -> String {
    format!("{NAME}.confgate-known-good")
}

/// The record as the sidecar writes it: one line's entry, JSON in a ConfigMap value.
fn record(version: &str) -> Value {
    let mut cm = configmap(&[("v2", &format!(r#"{{"version":"{version}","keys":{{}}}}"#))]);
    cm["metadata"]["name"] = json!(record_name());
    cm
}

#[test]
fn the_policy_matches_the_record_and_names_its_writers() {
    let s = settings(Some("^2"), None);
    let p = policy_for(&s, &[]);
    let rules = &p["spec"]["matchConstraints"]["resourceRules"][0];
    assert_eq!(rules["resourceNames"], json!([NAME, record_name()]));
    let condition = p["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap();
    assert_eq!(
        condition,
        format!(
            "request.namespace == '{NS}' && request.name in ['{NAME}', '{}']",
            record_name()
        )
    );
    // Any ServiceAccount of the namespace by default; the named ones only with --service-account;
    // either way with a token bound to a pod.
    let writer = |p: &Value| -> String {
        p["spec"]["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["expression"].as_str().unwrap().to_owned())
            .find(|e| e.contains("authentication.kubernetes.io/pod-name"))
            .expect("a validation of the record's writers")
    };
    let default = writer(&p);
    assert!(
        default.contains(&format!(
            "request.userInfo.username.startsWith('system:serviceaccount:{NS}:') && \
             'authentication.kubernetes.io/pod-name' in request.userInfo.extra"
        )),
        "{default}"
    );
    let writers = [
        policy::writer("gated", NS).unwrap(),
        policy::writer("other-ns:web", NS).unwrap(),
    ];
    let named = policy::generate(&Request {
        namespace: NS,
        name: NAME,
        settings: &s,
        rules: &[],
        kubernetes_version: "1.30",
        writers: &writers,
    })
    .unwrap()[0]
        .to_json();
    let named = writer(&named);
    assert!(
        named.contains(&format!(
            "request.userInfo.username in ['system:serviceaccount:{NS}:gated', \
             'system:serviceaccount:other-ns:web'] && 'authentication.kubernetes.io/pod-name'"
        )),
        "{named}"
    );
}

#[test]
fn only_the_gated_pods_write_the_record_and_its_deletion_is_refused() {
    big_stack(|| {
        let s = settings(Some(">=2.4.0, <3.0.0"), Some("config"));
        let p = Compiled::new(&policy_for(&s, &[]));
        let name = record_name();
        let rec = record("2.4.1");
        let only_pods = format!(
            "ConfigMap {NS}/{name} is the known-good record of ConfigMap {NS}/{NAME}: only confgate \
             in the gated pods writes it (a ServiceAccount of namespace {NS}, with a token bound to \
             its pod"
        );
        // Not judged as a config (no version key, no config.yaml): refused for who writes it.
        for (op, old) in [("CREATE", None), ("UPDATE", Some(&rec))] {
            for user in [
                "alice",
                "system:admin",
                "system:serviceaccount:elsewhere:gated",
            ] {
                let got = p.admit_as(user, op, NS, &name, Some(&record("9.0.0")), old);
                assert!(
                    got.as_ref().is_err_and(|m| m.starts_with(&only_pods)),
                    "{op} by {user}: {got:?}"
                );
            }
        }
        // A metadata-only change passes, from anyone: so it can be annotated, then deleted.
        let mut annotated = rec.clone();
        annotated["metadata"]["annotations"] = json!({policy::ALLOW_DELETE: "true"});
        assert_eq!(
            p.admit_as("alice", "UPDATE", NS, &name, Some(&annotated), Some(&rec)),
            Ok(())
        );
        let refused = format!(
            "ConfigMap {NS}/{name}, the known-good record of ConfigMap {NS}/{NAME} that new pods \
             start on, is protected by confgate: deleting it is refused. To delete it, annotate it \
             first (kubectl annotate configmap -n {NS} {name} confgate.io/allow-delete=true), or \
             remove the policy confgate.{NS}.{NAME}"
        );
        for user in ["alice", &format!("system:serviceaccount:{NS}:gated")] {
            assert_eq!(
                p.admit_as(user, "DELETE", NS, &name, None, Some(&rec)),
                Err(refused.clone()),
                "{user}"
            );
        }
        assert_eq!(
            p.admit_as("alice", "DELETE", NS, &name, None, Some(&annotated)),
            Ok(())
        );
        assert_eq!(
            p.admit_as(
                policy::CONTROLLER_USERS[0],
                "DELETE",
                NS,
                &name,
                None,
                Some(&rec)
            ),
            Ok(())
        );
        // The source is judged as before, and its refusals name it.
        let too_new = configmap(&[("version", "3.0.0"), ("config", "x")]);
        let got = p.admit_as("alice", "CREATE", NS, NAME, Some(&too_new), None);
        assert!(
            got.as_ref()
                .is_err_and(|m| m.starts_with(&format!("ConfigMap {NS}/{NAME}: version 3.0.0"))),
            "{got:?}"
        );
    });
}

#[test]
fn service_accounts_are_read_as_kubectl_writes_them() {
    let run = |sa: &str| {
        Command::new(BIN)
            .args([
                "policy",
                "--namespace",
                NS,
                "--name",
                NAME,
                "--require",
                "a",
            ])
            .args(["--service-account", sa])
            .env_remove("CONFGATE_ACCEPTS")
            .env_remove("CONFGATE_REQUIRE")
            .output()
            .unwrap()
    };
    let out = run("other:gated");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("request.userInfo.username in ['system:serviceaccount:other:gated']"),
        "{text}"
    );
    for bad in ["Gated", "a:b:c", "ns_x:gated", ":gated"] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(64), "{bad}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains(&format!("invalid --service-account {bad:?}")),
            "{bad}: {err}"
        );
    }
}
