//! `confgate policy`: the generated ValidatingAdmissionPolicy evaluated client-side with kube-cel's
//! `VapEvaluator` (the `cel` crate with Kubernetes' CEL libraries) against CREATE, UPDATE and DELETE
//! requests, and a differential test: over a corpus and generated ConfigMaps and ranges, the policy
//! allows exactly what `confgate check`'s verdict accepts, and refuses with `check`'s reason.
//!
//! No API server runs here: what this proves is parity under the `cel` crate's reading of CEL, not
//! cel-go's (see docs/admission.md for what was and was not verified).
#![cfg(feature = "policy")]

use crate::common;
use common::as_admission_words_it;

use std::collections::BTreeMap;
use std::process::Command;

use base64::Engine as _;
use confgate::check;
use confgate::policy::{self, Request};
use confgate::rules::{self, Rule};
use confgate::settings::{Raw, RawValue, Settings};
use confgate::verdict::{self, Verdict};
use kube_cel::{AdmissionRequest, CompiledVapExpression, VapError, VapEvaluator, VapExpression};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The `cel` crate's parser recurses deeply on the generated expressions (a debug build overflows a
/// test thread's stack on a range with a pre-release); the stack is reserved, not committed.
const STACK: usize = 1 << 30;

/// Runs a test body on a thread with a [`STACK`]-sized stack.
pub(super) fn big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}
const BIN: &str = env!("CARGO_BIN_EXE_confgate");
pub(super) const NS: &str = "team-a";
pub(super) const NAME: &str = "app-config";

pub(super) fn settings(accepts: Option<&str>, require: Option<&str>) -> Settings {
    Settings::from_raw(&Raw {
        accepts: accepts.map(RawValue::from),
        require: require.map(RawValue::from),
        ..Raw::default()
    })
    .unwrap()
}

/// The policy object (first of the two) as JSON.
pub(super) fn policy_for(s: &Settings, rules: &[Rule]) -> Value {
    let objects = policy::generate(&Request {
        namespace: NS,
        name: NAME,
        settings: s,
        rules,
        kubernetes_version: "1.30",
        writers: &[],
    })
    .unwrap();
    objects[0].to_json()
}

/// A compiled policy: match conditions and validations, ready to evaluate many requests.
pub(super) struct Compiled {
    conditions: Vec<Result<CompiledVapExpression, VapError>>,
    validations: Vec<Result<CompiledVapExpression, VapError>>,
    /// The validations as written, to rebuild a policy without its match conditions.
    sources: Vec<VapExpression>,
}

/// `confgate.io/allow-delete` as kube-cel's evaluator stores it: it escapes every JSON object key as
/// a declared field name, where the API server leaves the keys of `metadata.annotations`, a map, as
/// written. The policy is evaluated with the key spelled so (checked in [`kube_cel_escapes_annotation_keys`]).
const ALLOW_DELETE_AS_KUBE_CEL_READS: &str = "confgate__dot__io__slash__allow__dash__delete";

/// A policy expression as kube-cel must read it to see what the API server sees. The keys of a
/// rollout all hold a `.`, which kube-cel escapes as `__dot__` in `data` too: the rollout key, the
/// candidate's version key and the suffix its test looks for are spelled so.
fn as_kube_cel_reads(expression: &str) -> String {
    expression
        .replace(
            &format!("'{}'", policy::ALLOW_DELETE),
            &format!("'{ALLOW_DELETE_AS_KUBE_CEL_READS}'"),
        )
        .replace("'confgate.rollout'", "'confgate__dot__rollout'")
        .replace("'version.next'", "'version__dot__next'")
        .replace("'.next'", "'__dot__next'")
}

impl Compiled {
    pub(super) fn new(policy: &Value) -> Compiled {
        let expr = |v: &Value| VapExpression {
            expression: as_kube_cel_reads(v["expression"].as_str().unwrap()),
            message: v["message"].as_str().map(str::to_owned),
            message_expression: v["messageExpression"].as_str().map(as_kube_cel_reads),
        };
        let list = |k: &str| -> Vec<VapExpression> {
            policy["spec"][k]
                .as_array()
                .unwrap()
                .iter()
                .map(expr)
                .collect()
        };
        Compiled::from_parts(&list("matchConditions"), list("validations"))
    }

    fn from_parts(conditions: &[VapExpression], validations: Vec<VapExpression>) -> Compiled {
        let compiler = VapEvaluator::builder().build();
        Compiled {
            conditions: compiler.compile_expressions(conditions),
            validations: compiler.compile_expressions(&validations),
            sources: validations,
        }
    }

    /// `Ok(())` when admitted, else the first refusal's message. A request the match conditions do not
    /// select is admitted; an evaluation error refuses (failurePolicy: Fail).
    fn admit(
        &self,
        op: &str,
        ns: &str,
        name: &str,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), String> {
        self.admit_as("alice", op, ns, name, object, old)
    }

    /// [`Compiled::admit`] for a request sent by `user` (`request.userInfo.username`).
    pub(super) fn admit_as(
        &self,
        user: &str,
        op: &str,
        ns: &str,
        name: &str,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), String> {
        let mut b = VapEvaluator::builder().request(AdmissionRequest {
            operation: op.into(),
            name: name.into(),
            namespace: ns.into(),
            username: user.into(),
            ..Default::default()
        });
        if let Some(o) = object {
            b = b.object(o.clone());
        }
        if let Some(o) = old {
            b = b.old_object(o.clone());
        }
        let ev = b.build();
        if !ev
            .evaluate_compiled(&self.conditions)
            .iter()
            .all(|r| r.passed)
        {
            return Ok(());
        }
        match ev
            .evaluate_compiled(&self.validations)
            .into_iter()
            .find(|r| !r.passed)
        {
            None => Ok(()),
            Some(r) => Err(r.message.unwrap_or_default()),
        }
    }

    fn create(&self, cm: &Value) -> Result<(), String> {
        self.admit("CREATE", NS, NAME, Some(cm), None)
    }
}

/// Keys here avoid `.`, `-`, `_` and `/`: kube-cel's evaluator escapes every JSON object key as the API
/// server escapes only declared field names (`config.yaml` would become `config__dot__yaml`), while the
/// API server leaves the keys of `data`, a map, as they are.
pub(super) fn configmap(data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"namespace": NS, "name": NAME}, "data": data})
}

/// A ConfigMap with `data` and `binaryData` (base64, as the API serves it).
fn configmap_with(data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> Value {
    let mut cm = configmap(data);
    if !binary.is_empty() {
        let b64 = base64::engine::general_purpose::STANDARD;
        cm["binaryData"] = binary
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String(b64.encode(v))))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    cm
}

/// `check`'s verdict for the same data, through its manifest reader (the one that splits keys).
fn check_accepts(s: &Settings, data: &[(&str, &str)]) -> bool {
    check_accepts_cm(s, &configmap(data))
}

fn check_accepts_cm(s: &Settings, cm: &Value) -> bool {
    let found = check::manifests("cm.json", &cm.to_string()).unwrap();
    assert_eq!(found.len(), 1);
    verdict::judge(&found[0].1, s).verdict == Verdict::Accepted
}

/// The reason `check` gives for a ConfigMap, as far as the policy can say it: without the keys present
/// (a map's keys come unordered in CEL) and without the `semver` crate's account of why a version-like
/// value does not parse.
fn check_reason(s: &Settings, cm: &Value) -> (Verdict, String) {
    let found = check::manifests("cm.json", &cm.to_string()).unwrap();
    let j = verdict::judge(&found[0].1, s);
    (j.verdict, as_admission_words_it(j.reason))
}

/// The policy refuses with `check`'s reason, after the ConfigMap's name; `Err` says how it differs.
fn same_reason(p: &Compiled, s: &Settings, cm: &Value) -> Result<bool, String> {
    let (verdict, reason) = check_reason(s, cm);
    match (verdict, p.create(cm)) {
        (Verdict::Accepted, Ok(())) => Ok(true),
        // The admission message is check's reason, fix included, after the ConfigMap's name.
        (_, Err(msg)) if msg == format!("ConfigMap {NS}/{NAME}: {reason}") => Ok(false),
        (v, got) => Err(format!("check: {v} {reason:?}; policy: {got:?}")),
    }
}

/// Settings with content rules, as `--rule` gives them.
fn settings_with_rules(accepts: Option<&str>, require: Option<&str>, rules: &[&str]) -> Settings {
    Settings::from_raw(&Raw {
        accepts: accepts.map(RawValue::from),
        require: require.map(RawValue::from),
        rules: Some(RawValue::Lines(
            rules.iter().map(|r| (*r).to_owned()).collect(),
        )),
        ..Raw::default()
    })
    .unwrap()
}

#[test]
fn create_update_and_delete_requests() {
    big_stack(|| {
        let s = settings(Some(">=2.4.0, <3.0.0"), Some("config"));
        let rules = rules::compile_all(["data['config'].contains('listen:')"]).unwrap();
        let p = Compiled::new(&policy_for(&s, &rules));
        let good = configmap(&[("version", "2.5.1\n"), ("config", "listen: :80\n")]);
        let too_new = configmap(&[("version", "3.0.0"), ("config", "listen: :80\n")]);
        let no_key = configmap(&[("version", "2.5.1")]);
        let rule_broken = configmap(&[("version", "2.5.1"), ("config", "port: 80\n")]);

        assert_eq!(p.create(&good), Ok(()));
        assert_eq!(
            p.admit("UPDATE", NS, NAME, Some(&good), Some(&too_new)),
            Ok(())
        );
        let msg = p
            .admit("UPDATE", NS, NAME, Some(&too_new), Some(&good))
            .unwrap_err();
        assert_eq!(
            msg,
            "ConfigMap team-a/app-config: version 3.0.0 is newer than >=2.4.0, <3.0.0 allows; roll the \
             ConfigMap back to a version in >=2.4.0, <3.0.0, or raise confgate.io/accepts once the \
             component reads 3.0.0"
        );
        let msg = p.create(&no_key).unwrap_err();
        assert_eq!(
            msg,
            "ConfigMap team-a/app-config: required key config is absent; add it to the ConfigMap, or \
             drop it from confgate.io/require"
        );
        let msg = p.create(&rule_broken).unwrap_err();
        assert_eq!(
            msg,
            "ConfigMap team-a/app-config: version 2.5.1 is in >=2.4.0, <3.0.0, but rule 1 \
             (`data['config'].contains('listen:')`) is false"
        );
        assert!(!msg.contains("port: 80"), "content leaked: {msg}");
        let msg = p.admit("DELETE", NS, NAME, None, Some(&good)).unwrap_err();
        assert!(msg.contains("deleting it is refused"), "{msg}");

        // Another ConfigMap, or the same name elsewhere, is not this policy's business.
        assert_eq!(p.admit("CREATE", NS, "other", Some(&too_new), None), Ok(()));
        assert_eq!(p.admit("DELETE", "team-b", NAME, None, Some(&good)), Ok(()));

        // A version that is not one is refused without being echoed.
        let junk = configmap(&[("version", "secret-ish text"), ("config", "listen: x")]);
        let msg = p.create(&junk).unwrap_err();
        assert!(
            msg.ends_with("the value at file:version is not a semantic version (15 bytes, with characters a version does not have); allowed: MAJOR[.MINOR[.PATCH]][-PRE][+BUILD], optionally with a leading v; write a version such as 2.4.1 at file:version in the ConfigMap"),
            "{msg}"
        );
        assert!(!msg.contains("secret-ish"), "{msg}");
    });
}

/// `confgate policy ARGS` prints exactly the committed example at `path` (no gate setting from the
/// environment).
fn assert_example_is_printed_by(args: &[&str], path: &str) {
    let out = Command::new(BIN)
        .arg("policy")
        .args(args)
        .env_remove("CONFGATE_ACCEPTS")
        .env_remove("CONFGATE_REQUIRE")
        .env_remove("CONFGATE_MODE")
        .env_remove("CONFGATE_VERSION_FROM")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        committed,
        "regenerate {path} with the command in docs/admission.md"
    );
}

/// An UPDATE that leaves `data` and `binaryData` as stored (an annotation, a label) passes even when
/// the stored content breaks the policy (it predates it), so `kubectl annotate ...
/// confgate.io/allow-delete=true` and `kubectl label` still work; any change of the content is judged.
#[test]
fn metadata_only_updates_pass_when_the_content_is_unchanged() {
    big_stack(|| {
        let s = settings(Some(">=2.4.0, <3.0.0"), Some("config"));
        let rules = rules::compile_all(["data['config'].contains('listen:')"]).unwrap();
        let p = Compiled::new(&policy_for(&s, &rules));
        let blob: &[u8] = &[0, 1, 2];
        // Stored before the policy: too new, and breaking the rule.
        let stored = configmap_with(
            &[("version", "3.0.0"), ("config", "port: 80\n")],
            &[("blob", blob)],
        );
        let mut annotated = stored.clone();
        annotated["metadata"]["annotations"] = json!({policy::ALLOW_DELETE: "true"});
        annotated["metadata"]["labels"] = json!({"team": "a"});
        assert_eq!(
            p.admit("UPDATE", NS, NAME, Some(&annotated), Some(&stored)),
            Ok(())
        );
        // Without a required key, as stored: the same.
        let no_key = configmap(&[("version", "2.5.0")]);
        let mut labelled = no_key.clone();
        labelled["metadata"]["labels"] = json!({"team": "a"});
        assert_eq!(
            p.admit("UPDATE", NS, NAME, Some(&labelled), Some(&no_key)),
            Ok(())
        );

        // A change of `data`, or of `binaryData` alone, is judged as ever.
        let too_new = "ConfigMap team-a/app-config: version 3.0.0 is newer than >=2.4.0, <3.0.0 allows; \
             roll the ConfigMap back to a version in >=2.4.0, <3.0.0, or raise confgate.io/accepts once \
             the component reads 3.0.0";
        let mut data_changed = annotated.clone();
        data_changed["data"]["config"] = json!("port: 81\n");
        assert_eq!(
            p.admit("UPDATE", NS, NAME, Some(&data_changed), Some(&stored)),
            Err(too_new.to_owned())
        );
        for binary in [
            json!({"blob": "AAED"}),
            json!({}),
            json!({"blob": "AAEC", "more": "AA=="}),
        ] {
            let mut changed = annotated.clone();
            changed["binaryData"] = binary.clone();
            assert_eq!(
                p.admit("UPDATE", NS, NAME, Some(&changed), Some(&stored)),
                Err(too_new.to_owned()),
                "binaryData {binary}"
            );
        }
        let mut dropped = annotated.clone();
        dropped.as_object_mut().unwrap().remove("binaryData");
        assert_eq!(
            p.admit("UPDATE", NS, NAME, Some(&dropped), Some(&stored)),
            Err(too_new.to_owned())
        );
        // A key added to `data` of a ConfigMap that had none is a change too.
        let mut bare = stored.clone();
        bare.as_object_mut().unwrap().remove("data");
        assert!(
            p.admit("UPDATE", NS, NAME, Some(&stored), Some(&bare))
                .is_err()
        );
        // A CREATE has no stored content to compare with.
        assert_eq!(p.create(&annotated), Err(too_new.to_owned()));
        // And the annotation it let through lets the DELETE through.
        assert_eq!(p.admit("DELETE", NS, NAME, None, Some(&annotated)), Ok(()));
    });
}

#[test]
fn aws_auth_guard_example_is_what_the_command_prints() {
    assert_example_is_printed_by(
        &[
            "--namespace",
            "kube-system",
            "--name",
            "aws-auth",
            "--require",
            "mapRoles",
            "--rules-file",
            "manifests/admission/aws-auth/rules.cel",
        ],
        "manifests/admission/aws-auth/policy.yaml",
    );
}

#[test]
fn gated_component_example_is_what_the_command_prints() {
    assert_example_is_printed_by(
        &[
            "--namespace",
            "default",
            "--name",
            "app-config",
            "--accepts",
            ">=2.4.0, <3.0.0",
            "--require",
            "config.yaml",
        ],
        "manifests/admission/gated-component/policy.yaml",
    );
}

#[test]
fn aws_auth_guard_keeps_the_node_role() {
    big_stack(|| {
        let text = std::fs::read_to_string("manifests/admission/aws-auth/rules.cel").unwrap();
        let rules =
            rules::compile_all(rules::parse_file(&text).iter().map(String::as_str)).unwrap();
        let s = settings(None, Some("mapRoles"));
        let p = Compiled::new(&policy_for(&s, &rules));
        let node = "- rolearn: arn:aws:iam::111122223333:role/eks-node-group\n  username: system:node:{{EC2PrivateDNSName}}\n  groups:\n  - system:bootstrappers\n  - system:nodes\n";
        let with_admin = format!(
            "{node}- rolearn: arn:aws:iam::111122223333:role/admin\n  username: admin\n  groups:\n  - system:masters\n"
        );
        assert_eq!(p.create(&configmap(&[("mapRoles", &with_admin)])), Ok(()));
        let erased = configmap(&[(
            "mapRoles",
            "- rolearn: arn:aws:iam::111122223333:role/admin\n  username: admin\n",
        )]);
        let msg = p.create(&erased).unwrap_err();
        assert!(msg.contains("rule 1 (`"), "{msg}");
        assert!(p.create(&configmap(&[("mapUsers", "[]")])).is_err());
        assert!(
            p.admit("DELETE", "kube-system", "aws-auth", None, Some(&erased))
                .is_ok()
        );
        let guard = Compiled::from_parts(&[], p.sources.clone());
        assert!(
            guard
                .admit("DELETE", "kube-system", NAME, None, Some(&erased))
                .is_err()
        );
        // The same rules, evaluated as the sidecar and `check` do.
        let data = |v: &str| BTreeMap::from([("mapRoles".to_owned(), v.to_owned())]);
        assert_eq!(
            rules::evaluate(&rules, &data(&with_admin), &BTreeMap::new()),
            Ok(())
        );
        assert!(rules::evaluate(&rules, &data("[]"), &BTreeMap::new()).is_err());

        // Only a whole, uncommented line mapping exactly this role keeps it, where it stands in its item.
        let admin = "- rolearn: arn:aws:iam::111122223333:role/admin\n  username: admin\n";
        let kept = [
            // eksctl: groups first, rolearn indented under the item.
            "- groups:\n  - system:bootstrappers\n  - system:nodes\n  rolearn: arn:aws:iam::111122223333:role/eks-node-group\n  username: system:node:{{EC2PrivateDNSName}}\n",
            // Terraform's yamlencode: quoted keys and values.
            "- \"groups\":\n  - \"system:nodes\"\n  \"rolearn\": \"arn:aws:iam::111122223333:role/eks-node-group\"\n",
            "- rolearn: arn:aws:iam::111122223333:role/eks-node-group   # the nodes\n",
            "    -   rolearn:   arn:aws:iam::111122223333:role/eks-node-group\t\n",
        ];
        let lost = [
            // A longer role name that only starts with it.
            "- rolearn: arn:aws:iam::111122223333:role/eks-node-group-OLD\n  username: system:node:{{EC2PrivateDNSName}}\n",
            // Commented out.
            "# - rolearn: arn:aws:iam::111122223333:role/eks-node-group\n",
            "- username: x\n  # rolearn: arn:aws:iam::111122223333:role/eks-node-group\n",
            // Inside another value, or another key.
            "- rolearn: arn:aws:iam::111122223333:role/admin # was arn:aws:iam::111122223333:role/eks-node-group\n",
            "- userarn: arn:aws:iam::111122223333:role/eks-node-group\n",
            "- rolearn: arn:aws:iam::999999999999:role/x/arn:aws:iam::111122223333:role/eks-node-group\n",
            "- rolearn: arn:aws:iam::111122223333:role/eks-node-group#x\n",
        ];
        for (entry, want) in kept
            .iter()
            .map(|e| (e, true))
            .chain(lost.iter().map(|e| (e, false)))
        {
            let roles = format!("{admin}{entry}");
            let by_policy = p.create(&configmap(&[("mapRoles", &roles)])).is_ok();
            let by_sidecar = rules::evaluate(&rules, &data(&roles), &BTreeMap::new()).is_ok();
            assert_eq!((by_policy, by_sidecar), (want, want), "{entry:?}");
        }
    });
}

/// The evaluator escapes annotation keys, so the policy's key is spelled as it reads them
/// ([`as_kube_cel_reads`]); should that change, this fails rather than the deletion test passing on a
/// key that is never found.
#[test]
fn kube_cel_escapes_annotation_keys() {
    let stored = json!({"metadata": {"annotations": {policy::ALLOW_DELETE: "true"}}});
    let c = Compiled::from_parts(
        &[],
        vec![VapExpression {
            expression: format!(
                "oldObject.metadata.annotations.exists(k, k == '{ALLOW_DELETE_AS_KUBE_CEL_READS}')"
            ),
            message: None,
            message_expression: None,
        }],
    );
    assert_eq!(c.admit("DELETE", NS, NAME, None, Some(&stored)), Ok(()));
}

/// A DELETE of the guarded ConfigMap: the namespace controller and the garbage collector (under their
/// service accounts, or the controller manager's own identity) always pass, so a namespace being
/// deleted does not stay Terminating and owners' dependents are collected; anyone else passes only when
/// the stored object carries `confgate.io/allow-delete: "true"`, and is told so when refused.
#[test]
fn deletion_lets_the_controllers_and_the_annotation_through() {
    big_stack(|| {
        let s = settings(Some("^2"), Some("config"));
        let p = Compiled::new(&policy_for(&s, &[]));
        let stored = configmap(&[("version", "2.0.0"), ("config", "x")]);
        let annotated = |value: &str| {
            let mut cm = stored.clone();
            cm["metadata"]["annotations"] = json!({policy::ALLOW_DELETE: value, "other": "y"});
            cm
        };
        let way_out = format!(
            "ConfigMap {NS}/{NAME} is protected by confgate: deleting it is refused. To delete it, \
             annotate it first (kubectl annotate configmap -n {NS} {NAME} confgate.io/allow-delete=true), \
             or remove the policy confgate.{NS}.{NAME}"
        );
        let people = [
            "alice",
            "system:serviceaccount:kube-system:replicaset-controller",
            "system:serviceaccount:argocd:argocd-application-controller",
            "system:admin",
        ];
        for user in people {
            assert_eq!(
                p.admit_as(user, "DELETE", NS, NAME, None, Some(&stored)),
                Err(way_out.clone()),
                "{user}"
            );
            for value in ["false", "yes", "True", ""] {
                assert!(
                    p.admit_as(user, "DELETE", NS, NAME, None, Some(&annotated(value)))
                        .is_err(),
                    "{user} with {value:?}"
                );
            }
            assert_eq!(
                p.admit_as(user, "DELETE", NS, NAME, None, Some(&annotated("true"))),
                Ok(()),
                "{user}"
            );
            // Other ConfigMaps of the namespace are not this policy's to guard.
            assert_eq!(
                p.admit_as(user, "DELETE", NS, "other", None, Some(&stored)),
                Ok(())
            );
        }
        for user in policy::CONTROLLER_USERS {
            assert_eq!(
                p.admit_as(user, "DELETE", NS, NAME, None, Some(&stored)),
                Ok(()),
                "{user}"
            );
            // Only DELETE: the controllers' writes are judged as anyone's.
            assert!(
                p.admit_as(
                    user,
                    "UPDATE",
                    NS,
                    NAME,
                    Some(&configmap(&[])),
                    Some(&stored)
                )
                .is_err()
            );
        }
        // A request without the stored object fails closed for anyone but the controllers.
        assert_eq!(
            p.admit("DELETE", NS, NAME, None, None),
            Err(way_out.clone())
        );
        assert_eq!(
            p.admit_as(policy::CONTROLLER_USERS[0], "DELETE", NS, NAME, None, None),
            Ok(())
        );
        // Adding the annotation is an UPDATE judged on the content, which passes when the content does.
        assert_eq!(
            p.admit("UPDATE", NS, NAME, Some(&annotated("true")), Some(&stored)),
            Ok(())
        );
    });
}

/// Names the API server would refuse are refused (exit 64), saying what is allowed; names it takes are
/// taken, including a DNS subdomain's long parts (Kubernetes limits only the whole to 253).
#[test]
fn names_and_namespaces_are_validated_as_kubernetes_does() {
    let s = settings(Some("^2"), None);
    let generate = |namespace: &str, name: &str| {
        policy::generate(&Request {
            namespace,
            name,
            settings: &s,
            rules: &[],
            kubernetes_version: "1.30",
            writers: &[],
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    let long_label = "a".repeat(100);
    let longest = format!("{}.{}", "b".repeat(200), "c".repeat(52 - NS.len() - 10));
    for name in ["a", "a.b", "a-b.c-d", "0.9", &long_label, &longest] {
        assert_eq!(generate(NS, name), Ok(()), "{name}");
    }
    for name in [
        "a..b",
        "a.-b",
        "a-.b",
        ".a",
        "a.",
        "-a",
        "a-",
        "A",
        "a_b",
        "a b",
        "",
        "é",
        &"a".repeat(254),
    ] {
        let err = generate(NS, name).unwrap_err();
        assert!(
            err.starts_with(&format!("invalid --name {name:?}: a ConfigMap's name is a DNS subdomain: at most 253 characters, lower-case letters, digits, '-' and '.', where each '.'-separated part starts and ends with a letter or digit")),
            "{err}"
        );
    }
    for ns in ["a.b", "a..b", "-a", "A", "", &"n".repeat(64)] {
        let err = generate(ns, NAME).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "invalid --namespace {ns:?}: a namespace is a DNS label: at most 63 characters"
            )),
            "{err}"
        );
    }
    assert_eq!(generate(&"n".repeat(63), NAME), Ok(()));
    let out = Command::new(BIN)
        .args([
            "policy",
            "--namespace",
            NS,
            "--name",
            "a..b",
            "--accepts",
            "^2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid --name \"a..b\": a ConfigMap's name is a DNS subdomain"),
        "{err}"
    );
}

/// A rule holding characters YAML 1.1 folds (NEL, U+2028, U+2029) or that are not printable is printed
/// escaped, so every reader gets the rule the sidecar evaluates: serde-saphyr (YAML 1.2), PyYAML
/// (YAML 1.1, the reader that folds NEL into a space) when installed, and JSON readers.
#[test]
fn unusual_characters_in_a_rule_survive_every_reader() {
    let rule = "data.config.contains('a\u{85}b\u{2028}c\u{2029}d\u{7f}e\u{9f}f\u{feff}g')";
    let run = |output: &str| {
        let out = Command::new(BIN)
            .args(["policy", "--namespace", NS, "--name", NAME, "--rule", rule])
            .args(["--output", output])
            .env_remove("CONFGATE_ACCEPTS")
            .env_remove("CONFGATE_REQUIRE")
            .env_remove("CONFGATE_RULES")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let (yaml, json_text) = (run("yaml"), run("json"));
    for text in [&yaml, &json_text] {
        let raw: Vec<char> = text
            .chars()
            .filter(|c| *c != '\n' && confgate::policy::yaml::needs_escape(*c))
            .collect();
        assert!(raw.is_empty(), "raw {raw:?} in\n{text}");
    }
    // The rule's validation: the one that reads `binaryData` as a variable.
    let expression = |policy: &Value| {
        policy["spec"]["validations"]
            .as_array()
            .and_then(|v| {
                v.iter().find(|v| {
                    v["expression"]
                        .as_str()
                        .unwrap()
                        .contains("].all(binaryData,")
                })
            })
            .and_then(|v| v["expression"].as_str())
            .unwrap()
            .to_owned()
    };
    let want = format!(
        "request.name != '{NAME}' || request.operation == 'DELETE' || (request.operation == 'UPDATE' && oldObject != null \
         && (has(object.data) ? object.data : {{}}) == (has(oldObject.data) ? oldObject.data : {{}}) \
         && (has(object.binaryData) ? object.binaryData : {{}}) == (has(oldObject.binaryData) ? oldObject.binaryData : {{}})) \
         || [has(object.data) ? object.data : {{}}].all(data, \
         [has(object.binaryData) ? object.binaryData : {{}}].all(binaryData, {rule}))"
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(expression(&docs[0]), want);
    let list: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(expression(&list["items"][0]), want);
    let python = common::tool("python3");
    for text in [&yaml, &json_text] {
        let mut cmd = Command::new(&python);
        cmd.args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin.read()))))",
        ]);
        let out = common::output_with_stdin(cmd, text);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("No module named 'yaml'"),
            "this test needs PyYAML: run .ci/setup (kubernetes-validate brings it)"
        );
        assert!(out.status.success(), "{err}");
        let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
        let policy = if docs[0]["kind"] == "List" {
            &docs[0]["items"][0]
        } else {
            &docs[0]
        };
        assert_eq!(expression(policy), want);
    }
}

/// A policy generated with `--variants` used to ignore the setting and guard a `version` key a
/// variants ConfigMap does not have; it is refused, saying why.
#[test]
fn variants_are_refused_with_exit_64_not_ignored() {
    let out = Command::new(BIN)
        .args(["policy", "--namespace", NS, "--name", NAME])
        .args([
            "--accepts",
            "^2",
            "--variants",
            "config.v*.yaml -> config.yaml",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("--variants config.v*.yaml -> config.yaml cannot be checked at admission"),
        "{err}"
    );
    assert!(err.contains("CEL in the API server cannot parse"), "{err}");
    assert!(out.stdout.is_empty(), "no policy printed");
}

#[test]
fn json_and_yaml_version_sources_are_refused_with_exit_64() {
    for from in ["json:c.json#/v", "yaml:c.yaml#/schema/version"] {
        let out = Command::new(BIN)
            .args(["policy", "--namespace", NS, "--name", NAME])
            .args(["--accepts", "^2", "--version-from", from])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot parse a JSON or YAML document"),
            "{err}"
        );
        assert!(err.contains("--version-from file:KEY"), "{err}");
    }
    for (args, needle) in [
        (
            &["--kubernetes-version", "1.29", "--accepts", "^2"][..],
            "1.30 or newer",
        ),
        (&["--accepts", "^2", "--rule", "data.("][..], "rule 1"),
        (&[][..], "check nothing but deletion"),
    ] {
        let out = Command::new(BIN)
            .args(["policy", "--namespace", NS, "--name", NAME])
            .args(args)
            .env_remove("CONFGATE_ACCEPTS")
            .env_remove("CONFGATE_REQUIRE")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn observe_mode_binds_warn_and_audit() {
    let mut s = settings(Some("^2"), None);
    s.mode = confgate::settings::Mode::Observe;
    let objects = policy::generate(&Request {
        namespace: NS,
        name: NAME,
        settings: &s,
        rules: &[],
        kubernetes_version: "1.34",
        writers: &[],
    })
    .unwrap();
    assert_eq!(
        objects[1].to_json()["spec"]["validationActions"],
        json!(["Warn", "Audit"])
    );
}

/// Versions and ranges chosen at the edges of the sidecar's reading.
const CORPUS_VERSIONS: &[&str] = &[
    "2.4.0",
    "2.4",
    "2",
    "v2.4.1",
    "V2.4.1",
    " 2.4.1\n",
    "\u{a0}2.5.0\u{3000}",
    "2.4.1-rc.1",
    "2.4-rc.1",
    "2.4.0-rc.1",
    "2.4.0-rc.10",
    "2.4.0-rc.9",
    "2.4.0-alpha",
    "2.4.0-0",
    "2.4.0-00",
    "2.4.0-rc.01",
    "2.4.0-01a",
    "2.4.0+build.5",
    "2.4.0-rc.1+b.01",
    "2.4+b-x",
    "02.4.0",
    "2.04",
    "2.4.0.1",
    "2.",
    ".4",
    "v",
    "vv2.4.0",
    "2.4.0-",
    "2.4.0+",
    "2.4.0-rc..1",
    "3.0.0-alpha",
    "3.0.0",
    "2.99.99",
    "0.0.1",
    "0.1.0",
    "0.1.5",
    "18446744073709551615.0.0",
    "18446744073709551616.0.0",
    "",
    "  ",
    "2.4.0 x",
    "x2.4.0",
    "2.4.0-rc.1-b",
    "1.0.0-x.7.z.92",
    "2.4.0-beta.2",
    "2.4.0-beta.11",
    "2.4.0-beta",
    "2.4.0-beta.2.1",
];
const CORPUS_RANGES: &[&str] = &[
    ">=2.4.0, <3.0.0",
    "^2.4",
    "~2.4.1",
    "2.*",
    "*",
    "=2.4.0",
    ">2.4.0-rc.1",
    ">=2.4.0-rc.2",
    "<2.4.0-beta.11",
    "<=2.4.0-rc.1",
    "~2.4.0-rc.1",
    "^2.4.0-beta.2",
    "^0.1.2",
    "^0.1",
    "^0.0.1",
    "^0",
    "~2",
    "~2.4",
    ">=2.4.1, <2.4.2",
    "2.4.0-rc.1",
    "=2.4",
    ">2.4",
    "<2",
    "<=2.4",
    ">=1.0.0-x.7.z.92",
    ">18446744073709551614.0.0",
];

#[test]
fn corpus_parity_with_check() {
    big_stack(|| {
        let mut mismatches = Vec::new();
        let mut accepted = 0;
        for range in CORPUS_RANGES {
            let s = settings(Some(range), None);
            let p = Compiled::new(&policy_for(&s, &[]));
            for v in CORPUS_VERSIONS {
                let data = [("version", *v)];
                let want = check_accepts(&s, &data);
                accepted += usize::from(want);
                let got = p.create(&configmap(&data)).is_ok();
                if want != got {
                    mismatches.push(format!("{v:?} in {range:?}: check {want}, policy {got}"));
                }
            }
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
        // The corpus must exercise both outcomes, or parity would be vacuous.
        assert!(accepted > 50, "only {accepted} accepted");
    });
}

/// Over the corpus, the policy's message is `check`'s reason: the same verdict words for every range and
/// version, and for absent keys and an unreadable version.
#[test]
fn corpus_messages_are_checks_reasons() {
    big_stack(|| {
        let mut differ = Vec::new();
        let mut kinds = std::collections::BTreeSet::new();
        for range in CORPUS_RANGES {
            let s = settings(Some(range), None);
            let p = Compiled::new(&policy_for(&s, &[]));
            for v in CORPUS_VERSIONS {
                let cm = configmap(&[("version", v)]);
                kinds.insert(check_reason(&s, &cm).0);
                if let Err(e) = same_reason(&p, &s, &cm) {
                    differ.push(format!("{v:?} in {range:?}: {e}"));
                }
            }
        }
        let s = settings(Some("^2"), Some("a,b,config"));
        let p = Compiled::new(&policy_for(&s, &[]));
        for data in [
            &[("config", "x")][..],
            &[("version", "2.0.0"), ("a", "x")],
            &[("version", "2.0.0"), ("a", "x"), ("b", "y")],
            &[("a", "x"), ("b", "y"), ("config", "z")],
            &[
                ("version", &"1".repeat(300)),
                ("a", "x"),
                ("b", "y"),
                ("config", "z"),
            ],
        ] {
            let cm = configmap(data);
            if let Err(e) = same_reason(&p, &s, &cm) {
                differ.push(format!("{cm}: {e}"));
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n"));
        // Every verdict a range and a version can give, or the comparison would be partial.
        use Verdict::*;
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            [Accepted, TooNew, TooOld, OutOfRange, Invalid]
        );
    });
}

/// Rules over `data` and `binaryData` that the parity tests combine. `binaryData` is only tested by
/// membership and count: kube-cel's evaluator has no schema and reads its base64 as a string, where the
/// API server (and confgate) see bytes.
const PARITY_RULES: &[&str] = &[
    "'config' in data",
    "!('blob' in data)",
    "'blob' in binaryData",
    "size(data) <= 2",
    "data.all(k, !data[k].contains('forbidden'))",
    "!('mode' in data) || data['mode'] == 'strict'",
    "size(binaryData) == 0 || size(data) >= 1",
];

/// `binaryData` keys and their bytes.
type Binary<'a> = Vec<(&'a str, &'a [u8])>;

/// With rules: every subset of one to two rules over ConfigMaps with and without a non-UTF-8
/// `binaryData` key, the policy admits exactly what `check` accepts.
#[test]
fn rules_parity_with_check() {
    big_stack(|| {
        let configs: Vec<(Vec<(&str, &str)>, Binary)> = vec![
            (vec![("version", "2.4.1"), ("config", "a: 1")], vec![]),
            (vec![("version", "2.4.1")], vec![("blob", &[0xff, 0, 1])]),
            (
                vec![("version", "2.4.1"), ("config", "a: 1")],
                vec![("blob", &[0xfe, 0xff])],
            ),
            (vec![("version", "2.4.1"), ("config", "forbidden")], vec![]),
            (
                vec![("version", "2.4.1"), ("config", "a"), ("mode", "lax")],
                vec![],
            ),
            (vec![("version", "2.4.1"), ("mode", "strict")], vec![]),
            (vec![("version", "3.0.0"), ("config", "a: 1")], vec![]),
        ];
        let mut sets: Vec<Vec<&str>> = PARITY_RULES.iter().map(|r| vec![*r]).collect();
        for (i, a) in PARITY_RULES.iter().enumerate() {
            for b in &PARITY_RULES[i + 1..] {
                sets.push(vec![*a, *b]);
            }
        }
        let (mut mismatches, mut outcomes) = (Vec::new(), [0usize; 2]);
        for rules in &sets {
            let s = settings_with_rules(Some("^2"), None, rules);
            let p = Compiled::new(&policy_for(&s, s.rules.compiled()));
            for (data, binary) in &configs {
                let cm = configmap_with(data, binary);
                let want = check_accepts_cm(&s, &cm);
                outcomes[usize::from(want)] += 1;
                let got = p.create(&cm).is_ok();
                if want != got {
                    mismatches.push(format!("{rules:?} on {cm}: check {want}, policy {got}"));
                } else if let Err(e) = same_reason(&p, &s, &cm) {
                    mismatches.push(format!("{rules:?} on {cm}: {e}"));
                }
            }
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
        assert!(outcomes[0] > 50 && outcomes[1] > 50, "{outcomes:?}");
    });
}

/// The one place the split can differ, pinned so the README's account of it stays true: a `binaryData`
/// value that is valid UTF-8 is under `binaryData` to the API server but under `data` to confgate (a
/// volume cannot tell the two apart, and `check` predicts the sidecar).
#[test]
fn utf8_binary_data_is_data_to_the_gate() {
    big_stack(|| {
        let s = settings_with_rules(Some("^2"), None, &["'blob' in binaryData"]);
        let p = Compiled::new(&policy_for(&s, s.rules.compiled()));
        let cm = configmap_with(&[("version", "2.4.1")], &[("blob", b"text")]);
        assert!(p.create(&cm).is_ok());
        assert!(!check_accepts_cm(&s, &cm));
        let not_utf8 = configmap_with(&[("version", "2.4.1")], &[("blob", &[0xff])]);
        assert!(p.create(&not_utf8).is_ok() && check_accepts_cm(&s, &not_utf8));
    });
}

fn arb_ident() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..12).prop_map(|n| n.to_string()),
        "(alpha|beta|rc|x|0a|-)",
        Just("01".to_owned()),
    ]
}

fn arb_version_text() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["", "", "v", "V", " ", "\t"]),
        0u64..4,
        prop::option::of(0u64..4),
        prop::option::of(0u64..4),
        prop::option::of(prop::collection::vec(arb_ident(), 1..3)),
        prop::option::of("[a-z0-9]{1,3}"),
        prop::sample::select(vec!["", "", "\n", " x", "."]),
    )
        .prop_map(|(lead, a, b, c, pre, build, tail)| {
            let mut s = format!("{lead}{a}");
            if let Some(b) = b {
                s.push_str(&format!(".{b}"));
                if let Some(c) = c {
                    s.push_str(&format!(".{c}"));
                }
            }
            if let Some(pre) = pre {
                s.push('-');
                s.push_str(&pre.join("."));
            }
            if let Some(b) = build {
                s.push('+');
                s.push_str(&b);
            }
            s.push_str(tail);
            s
        })
}

fn arb_range() -> impl Strategy<Value = String> {
    let cmp = (
        prop::sample::select(vec!["=", ">", ">=", "<", "<=", "~", "^", ""]),
        0u64..4,
        prop::option::of(0u64..4),
        prop::option::of(0u64..4),
        prop::option::of(prop::collection::vec(arb_ident(), 1..3)),
    )
        .prop_filter_map("a semver comparator", |(op, a, b, c, pre)| {
            let mut s = format!("{op}{a}");
            if let Some(b) = b {
                s.push_str(&format!(".{b}"));
                if let Some(c) = c {
                    s.push_str(&format!(".{c}"));
                    if let Some(pre) = pre {
                        s.push('-');
                        s.push_str(&pre.join("."));
                    }
                }
            }
            semver::VersionReq::parse(&s).ok().map(|_| s)
        });
    prop_oneof![
        prop::collection::vec(cmp, 1..3).prop_map(|cs| cs.join(", ")),
        (0u64..4).prop_map(|a| format!("{a}.*")),
    ]
    // A range that matches no version (`>=3, <2`) is refused as a setting.
    .prop_filter("a range some version matches", |r| {
        Settings::from_raw(&Raw {
            accepts: Some(RawValue::from(r.as_str())),
            ..Raw::default()
        })
        .is_ok()
    })
}

/// The policy admits a generated ConfigMap exactly when `check` accepts it.
#[test]
fn generated_parity_with_check() {
    // Run on a large stack: proptest's runner and the `cel` parser both recurse in a debug build.
    big_stack(|| {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 120,
            ..ProptestConfig::default()
        });
        let strategy = (
            arb_range(),
            prop::collection::vec(arb_version_text(), 1..6),
            any::<bool>(),
            prop::sample::subsequence(PARITY_RULES, 0..3),
            prop::sample::select(vec!["a: 1", "forbidden"]),
            any::<bool>(),
        );
        runner
            .run(
                &strategy,
                |(range, versions, with_key, rules, config, blob)| {
                    let s = settings_with_rules(Some(&range), Some("config"), &rules);
                    let p = Compiled::new(&policy_for(&s, s.rules.compiled()));
                    let binary: &[(&str, &[u8])] = if blob { &[("blob", &[0xff, 1])] } else { &[] };
                    for v in &versions {
                        let mut data = vec![("version", v.as_str())];
                        if with_key {
                            data.push(("config", config));
                        }
                        let cm = configmap_with(&data, binary);
                        let want = check_accepts_cm(&s, &cm);
                        let got = p.create(&cm).is_ok();
                        prop_assert_eq!(
                            want,
                            got,
                            "{:?} in {:?} with {:?} on {}",
                            v,
                            range,
                            rules,
                            cm
                        );
                        if let Err(e) = same_reason(&p, &s, &cm) {
                            return Err(TestCaseError::fail(format!(
                                "{v:?} in {range:?} with {rules:?} on {cm}: {e}"
                            )));
                        }
                    }
                    Ok(())
                },
            )
            .unwrap();
    });
}

/// `check`'s first line that is not accepted for a ConfigMap, read as `check` reads a manifest (so a
/// rollout is taken apart into its tracks), without what the policy cannot say (as [`check_reason`]).
fn check_first_refusal(s: &Settings, cm: &Value) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cm.json");
    std::fs::write(&path, cm.to_string()).unwrap();
    let report = check::check(&[&path], s).unwrap();
    let line = report
        .lines
        .into_iter()
        .find(|l| l.judgement.verdict != Verdict::Accepted)?;
    Some(as_admission_words_it(line.judgement.reason))
}

/// Mid-rollout the policy judges the candidate's version as the pods on the candidate do, and refuses
/// with `check`'s reason for its candidate line (`would be held on the candidate pods (25%), …`); a
/// rollout key that is not a percentage is refused with the sidecar's reason; with no pod on the
/// candidate (0%, no percentage) only the stable version counts.
#[test]
fn rollout_parity_with_check() {
    big_stack(|| {
        let mut differ = Vec::new();
        let mut outcomes = [0usize; 3];
        for range in ["^2", ">=2.4.0, <2.6.0"] {
            let s = settings(Some(range), Some("config"));
            let p = Compiled::new(&policy_for(&s, &[]));
            for stable in ["2.4.1", "3.0.0"] {
                for next in [
                    None,
                    Some("2.5.0"),
                    Some("2.7.1"),
                    Some("3.1.0"),
                    Some("1.0.0"),
                    Some("2.5.0-rc.1"),
                    Some("banana"),
                    Some(" "),
                ] {
                    for rollout in [
                        None,
                        Some("25%"),
                        Some("0%"),
                        Some("100%"),
                        Some("2.5%"),
                        Some("0.05%"),
                        Some(" 25 %\n"),
                        Some("007.10%"),
                        Some("25"),
                        Some("abc%"),
                        Some("2.555%"),
                        Some("101%"),
                        Some("100.01%"),
                        Some("99999999999999999999999%"),
                    ] {
                        for other_next in [false, true] {
                            let mut data = vec![("version", stable), ("config", "x")];
                            if let Some(n) = next {
                                data.push(("version.next", n));
                            }
                            if let Some(r) = rollout {
                                data.push(("confgate.rollout", r));
                            }
                            if other_next {
                                data.push(("config.next", "y"));
                            }
                            let cm = configmap(&data);
                            let want = check_first_refusal(&s, &cm);
                            let got = p.create(&cm).err();
                            outcomes[match &want {
                                None => 0,
                                Some(r) if r.starts_with("would be held") => 1,
                                Some(_) => 2,
                            }] += 1;
                            let want = want.map(|r| format!("ConfigMap {NS}/{NAME}: {r}"));
                            if want != got {
                                differ.push(format!(
                                    "{data:?} under {range}: check {want:?}, policy {got:?}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n"));
        // Admitted, held on the candidate, and refused otherwise: each outcome is exercised.
        assert!(outcomes.iter().all(|&n| n > 20), "{outcomes:?}");
    });
}

/// The rollout cases a real API server admitted though every pod refuses them: a candidate key the
/// sidecar reserves (`a.next.next`, `confgate.rollout.next`, `.next`) is refused with the sidecar's
/// reason, and a rollout key or a live candidate's version key under `binaryData` (read by the pods,
/// bytes to the API server) with a sentence of its own; never admitted where `check` refuses.
#[test]
fn rollout_parity_covers_reserved_keys_and_binary_data() {
    big_stack(|| {
        let s = settings(Some("^2"), Some("config"));
        let p = Compiled::new(&policy_for(&s, &[]));
        // kube-cel escapes the `.` of the keys it lists back as `__dot__`; the API server does not.
        let create = |cm: &Value| p.create(cm).map_err(|m| m.replace("__dot__", "."));
        let base = [
            ("version", "2.4.1"),
            ("config", "x"),
            ("confgate.rollout", "25%"),
        ];
        for reserved in ["a.next.next", "confgate.rollout.next", ".next"] {
            let mut data = base.to_vec();
            data.push((reserved, "x"));
            let cm = configmap(&data);
            let want = check_first_refusal(&s, &cm).expect("check refuses it");
            assert!(want.contains("cannot be a candidate"), "{want}");
            assert_eq!(
                create(&cm).err(),
                Some(format!("ConfigMap {NS}/{NAME}: {want}")),
                "{reserved}"
            );
        }
        let binary = |data: &[(&str, &str)], bin: &[(&str, &[u8])], sentence: &str| {
            let cm = configmap_with(data, bin);
            let want = check_first_refusal(&s, &cm);
            let got = create(&cm).err();
            assert!(
                got.as_deref().is_some_and(|g| g.ends_with(sentence)),
                "check {want:?}, policy {got:?}"
            );
            want
        };
        let too_new = binary(
            &base,
            &[("version.next", b"3.1.0")],
            "would be held on the candidate pods (25%), which keep stable: key version.next is under \
             binaryData, where the admission policy cannot read a version; keep it under data",
        );
        assert!(too_new.is_some_and(|w| w.starts_with("would be held")));
        let rollout = binary(
            &[
                ("version", "2.4.1"),
                ("config", "x"),
                ("version.next", "3.1.0"),
            ],
            &[("confgate.rollout", b"25%")],
            "key confgate.rollout is under binaryData, where the admission policy cannot read a \
             percentage; keep it under data",
        );
        assert!(rollout.is_some_and(|w| w.starts_with("would be held")));
        // With no pod on the candidate, a candidate under binaryData is not judged, by either.
        let mut idle = base.to_vec();
        idle[2] = ("confgate.rollout", "0%");
        let cm = configmap_with(&idle, &[("version.next", b"3.1.0")]);
        assert_eq!(check_first_refusal(&s, &cm), None);
        assert_eq!(create(&cm), Ok(()));
    });
}
