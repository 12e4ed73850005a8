//! `confgate policy` on a real API server: the generated ValidatingAdmissionPolicy and binding are
//! accepted (the server compiles every expression with cel-go), and with the binding in force the
//! server allows and refuses ConfigMap creates, updates and deletes exactly as `confgate check` judges
//! them, refusing with check's reason.
//!
//! `status.typeChecking` (cel-go's type check against the ConfigMap schema) is not looked at: the
//! controller that writes it runs in kube-controller-manager, and only kube-apiserver runs here.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::common::{self, as_admission_words_it, poll};
use crate::confgate;
use crate::server::{Cluster, client, cluster, runtime};

const NS: &str = "policy";
const OTHER_NS: &str = "policy-other";

/// One policy: the ConfigMap it guards and the settings `policy` and `check` both take.
struct Case {
    name: &'static str,
    args: &'static [&'static str],
}

const POLICIES: &[Case] = &[
    Case {
        name: "range",
        args: &["--accepts", ">=2.4.0, <3.0.0"],
    },
    Case {
        name: "caret-rules",
        args: &[
            "--accepts",
            "^2.4",
            "--require",
            "config.yaml",
            "--rule",
            "data['config.yaml'].contains('listen:')",
        ],
    },
    Case {
        name: "tilde",
        args: &["--accepts", "~1.2.3"],
    },
    Case {
        name: "pre-release",
        args: &["--accepts", ">=2.5.0-rc.1, <2.6.0"],
    },
];

/// The rollouts in the corpus, after its versions and three other ConfigMaps.
const ROLLOUTS: usize = 6;

/// Versions at the edges of the ranges above and of the sidecar's reading.
const VERSIONS: &[&str] = &[
    "2.4.0",
    "2.4.1",
    "2.3.9",
    "3.0.0",
    "v2.5",
    "2.5.0-rc.1",
    "2.5.0-rc.2",
    "2.5.0",
    "1.2.3",
    "1.2.9",
    "1.3.0",
    "10",
    " 2.4.7\n",
    "2.4.1+build.5",
    "2.4.x",
    "01.2.3",
    "99999999999999999999.0.0",
    "",
    "secret text",
];

/// The ConfigMaps judged for `name`: each version with a config that satisfies the rule, plus one
/// without `config.yaml`, one whose config breaks the rule, and one with no version at all.
fn corpus(name: &str) -> Vec<Value> {
    let cm = |data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": NS, "name": name}, "data": data})
    };
    let mut out: Vec<Value> = VERSIONS
        .iter()
        .map(|v| cm(json!({"version": v, "config.yaml": "listen: :80\n"})))
        .collect();
    out.push(cm(json!({"version": "2.4.5"})));
    out.push(cm(json!({"version": "2.4.5", "config.yaml": "port: 80\n"})));
    out.push(cm(json!({"config.yaml": "listen: :80\n"})));
    // Mid-rollout: the candidate's version judged as the pods on the candidate judge it; none of
    // them at 0%; a rollout key that is not a percentage.
    let rollouts = [
        ("3.1.0", "25%"),
        ("2.4.9", "12.50%"),
        ("1.2.4", "100%"),
        ("banana", " 5 %"),
        ("3.1.0", "0%"),
        ("2.4.9", "2.555%"),
    ];
    assert_eq!(rollouts.len(), ROLLOUTS);
    for (next, percent) in rollouts {
        out.push(cm(json!({"version": "2.4.1", "version.next": next,
                           "confgate.rollout": percent, "config.yaml": "listen: :80\n"})));
    }
    out
}

/// `confgate check ARGS -` over the corpus: per ConfigMap, `None` when accepted, else the reason, less
/// the two documented differences: the keys present (CEL's map keys are unordered) and the `semver`
/// crate's account of why a version-like value does not parse.
fn check(args: &[&str], corpus: &[Value]) -> Vec<Option<String>> {
    let stream: String = corpus.iter().map(|c| format!("{c}\n")).collect();
    let mut cmd = confgate();
    cmd.arg("check").args(args).arg("-");
    let out = common::output_with_stdin(cmd, &stream);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "check {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A ConfigMap mid-rollout has a line per track: the first not accepted is what is refused.
    let mut first: Vec<Option<String>> = vec![None; corpus.len()];
    let mut seen = vec![false; corpus.len()];
    for line in stdout.lines() {
        let (_, after) = line
            .split_once(" (- document ")
            .expect("check's line format");
        let (doc, rest) = after.split_once(')').expect("check's line format");
        let i: usize = doc.parse::<usize>().unwrap() - 1;
        seen[i] = true;
        let (_, reason) = rest.split_once(": ").expect("check's line format");
        if first[i].is_none() && !line.starts_with("accepted ") {
            first[i] = Some(reason.to_owned());
        }
    }
    assert!(seen.iter().all(|&s| s), "{stdout}");
    first
        .into_iter()
        .map(|reason| reason.map(as_admission_words_it))
        .collect()
}

/// The policy's message when the server refused, `Ok` when it admitted.
fn admitted(result: Result<ConfigMap, kube::Error>) -> Result<(), String> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err(s
            .message
            .split_once(" denied request: ")
            .map_or(s.message.clone(), |(_, m)| m.to_owned())),
        Err(e) => Err(format!("not an API answer: {e}")),
    }
}

/// Applies `confgate policy --namespace NS --name NAME ARGS` and waits until the server enforces it.
async fn install(c: &Cluster, api: &Api<ConfigMap>, case: &Case) {
    let mut cmd = confgate();
    cmd.args(["policy", "--namespace", NS, "--name", case.name])
        .args(case.args);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    c.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=confgate-tests",
            "-f",
            "-",
        ],
        &yaml,
    );
    // The admission plugin learns of new policies and bindings through an informer: wait until a
    // ConfigMap with no version at all is refused.
    let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"namespace": NS, "name": case.name}, "data": {}});
    let probe: ConfigMap = serde_json::from_value(probe).unwrap();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while admitted(api.create(&dry, &probe).await).is_ok() {
        assert!(
            std::time::Instant::now() < end,
            "policy for {} not in force after 30 s",
            case.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn generated_policies_allow_and_refuse_as_check_does() {
    let c = cluster();
    c.namespaces(&[NS]);
    runtime().block_on(async {
        let client = client(&c.admin).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(client);
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let mut compared = 0;
        for case in POLICIES {
            install(c, &api, case).await;
            let vap = policies
                .get(&format!("confgate.{NS}.{}", case.name))
                .await
                .unwrap();
            assert!(vap.spec.unwrap().validations.unwrap().len() > 1);

            let corpus = corpus(case.name);
            let verdicts = check(case.args, &corpus);
            let prefix = format!("ConfigMap {NS}/{}: ", case.name);
            // The admission message is check's reason, ending with the same fix (docs/admission.md).
            let expect = |v: &Option<String>| match v {
                None => Ok(()),
                Some(reason) => Err(format!("{prefix}{reason}")),
            };
            // CREATE, while the ConfigMap does not exist (dry run: nothing is stored).
            for (cm, verdict) in corpus.iter().zip(&verdicts) {
                let cm: ConfigMap = serde_json::from_value(cm.clone()).unwrap();
                let got = admitted(api.create(&dry, &cm).await);
                assert_eq!(
                    got,
                    expect(verdict),
                    "CREATE {:?} under {:?}",
                    cm.data,
                    case.args
                );
                compared += 1;
            }
            // One accepted version stored for real, then every UPDATE from it.
            let base = corpus
                .iter()
                .zip(&verdicts)
                .find(|(_, v)| v.is_none())
                .expect("the corpus has an accepted ConfigMap for every range")
                .0;
            let base: ConfigMap = serde_json::from_value(base.clone()).unwrap();
            let stored = api.create(&PostParams::default(), &base).await.unwrap();
            for (cm, verdict) in corpus.iter().zip(&verdicts) {
                let mut cm: ConfigMap = serde_json::from_value(cm.clone()).unwrap();
                cm.metadata.resource_version = stored.metadata.resource_version.clone();
                let got = admitted(api.replace(case.name, &dry, &cm).await);
                assert_eq!(
                    got,
                    expect(verdict),
                    "UPDATE to {:?} under {:?}",
                    cm.data,
                    case.args
                );
                compared += 1;
            }
            // DELETE is refused whatever the content.
            let deleted = api.delete(case.name, &DeleteParams::default()).await;
            match deleted {
                Err(kube::Error::Api(s)) => {
                    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{s:?}");
                    assert!(s.message.contains("deleting it is refused"), "{s:?}");
                }
                other => panic!("DELETE of {} was not refused: {other:?}", case.name),
            }
        }
        assert_eq!(
            compared,
            POLICIES.len() * (VERSIONS.len() + 3 + ROLLOUTS) * 2
        );

        // Another ConfigMap of the namespace, and the same name in another namespace, are not the
        // policies' business (resourceNames, namespaceSelector and the match condition).
        c.namespaces(&[OTHER_NS]);
        let too_new = |ns: &str, name: &str| -> ConfigMap {
            serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name},
                                          "data": {"version": "3.0.0"}}))
            .unwrap()
        };
        let other: Api<ConfigMap> = Api::namespaced(api.clone().into_client(), OTHER_NS);
        for (api, ns, name) in [
            (&api, NS, "unguarded"),
            (&other, OTHER_NS, POLICIES[0].name),
        ] {
            let got = admitted(api.create(&dry, &too_new(ns, name)).await);
            assert_eq!(got, Ok(()), "{ns}/{name}");
        }
    });
}

/// docs/admission.md's example: the committed gated-component policy refusing a ConfigMap of version 3.0.0,
/// in the words `kubectl apply` prints.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn the_committed_example_refuses_as_the_readme_shows() {
    let c = cluster();
    let ns = "readme-example";
    c.namespaces(&[ns]);
    let policy = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("manifests/admission/gated-component/policy.yaml"),
    )
    .unwrap()
    // The example guards default/app-config; moved to a namespace of this test's own.
    .replace("default", ns);
    c.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=confgate-tests",
            "-f",
            "-",
        ],
        &policy,
    );
    let cm = |version: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n  namespace: {ns}\n\
             data:\n  version: \"{version}\"\n  config.yaml: \"listen: :80\\n\"\n"
        )
    };
    // Wait until the policy is in force, with dry runs of the refused ConfigMap.
    let refused = poll(
        "the example policy in force",
        Duration::from_secs(30),
        || {
            let out = c.kubectl_with(&["apply", "--dry-run=server", "-f", "-"], &cm("3.0.0"));
            (!out.status.success()).then(|| String::from_utf8(out.stderr).unwrap())
        },
    );
    assert_eq!(
        refused,
        format!(
            "The configmaps \"app-config\" is invalid: : ValidatingAdmissionPolicy \
             'confgate.{ns}.app-config' with binding 'confgate.{ns}.app-config' denied request: \
             ConfigMap {ns}/app-config: version 3.0.0 is newer than >=2.4.0, <3.0.0 allows; roll the \
             ConfigMap back to a version in >=2.4.0, <3.0.0, or raise confgate.io/accepts once the \
             component reads 3.0.0\n"
        )
    );
    let out = c.kubectl_with(&["apply", "-f", "-"], &cm("2.4.1"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A ConfigMap stored before the policy, whose content the policy refuses: `kubectl annotate` and
/// `kubectl label` (UPDATEs that leave `data` and `binaryData` as stored) pass, so the
/// `confgate.io/allow-delete` annotation can be added and the DELETE then passes; a change of the
/// content is still refused.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn metadata_updates_pass_over_content_that_predates_the_policy() {
    let c = cluster();
    let ns = "policy-predates";
    c.namespaces(&[ns]);
    let cm = |version: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n  namespace: {ns}\n\
             data:\n  version: \"{version}\"\n  config.yaml: \"listen: :80\\n\"\n"
        )
    };
    c.kubectl_ok(&["apply", "-f", "-"], &cm("3.0.0"));
    let policy = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("manifests/admission/gated-component/policy.yaml"),
    )
    .unwrap()
    .replace("default", ns);
    c.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=confgate-tests",
            "-f",
            "-",
        ],
        &policy,
    );
    // In force once a change of the content is refused.
    let refused = poll("the policy in force", Duration::from_secs(30), || {
        let out = c.kubectl_with(&["apply", "--dry-run=server", "-f", "-"], &cm("3.1.0"));
        (!out.status.success()).then(|| String::from_utf8(out.stderr).unwrap())
    });
    assert!(
        refused.contains("version 3.1.0 is newer than >=2.4.0, <3.0.0 allows"),
        "{refused}"
    );
    for args in [
        &["label", "configmap", "-n", ns, "app-config", "team=a"][..],
        &[
            "annotate",
            "configmap",
            "-n",
            ns,
            "app-config",
            "confgate.io/allow-delete=true",
        ],
    ] {
        c.kubectl_ok(args, "");
    }
    let out = c.kubectl_with(&["apply", "-f", "-"], &cm("3.1.0"));
    assert!(!out.status.success(), "a change of the content passed");
    c.kubectl_ok(&["delete", "configmap", "-n", ns, "app-config"], "");
}
