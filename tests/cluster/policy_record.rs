//! `confgate policy` guarding the known-good record on a real API server: with the policy in force,
//! only a token of the named ServiceAccount bound to a pod (as the kubelet mounts it) may create and
//! change `NAME.confgate-known-good`; the same ServiceAccount's token bound to no pod, another
//! ServiceAccount's pod-bound token and the admin are refused, though RBAC lets all of them; a
//! metadata-only change passes, and deleting the record is refused until it is annotated, as for the
//! source.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::{self, poll};
use crate::confgate;
use crate::server::cluster;

const NS: &str = "policy-record";
const SOURCE: &str = "app-config";
const RECORD: &str = "app-config.confgate-known-good";

/// `kubectl` authenticating with the kubeconfig at `as_who` (the last `--kubeconfig` wins).
fn kubectl_as(c: &crate::server::Cluster, as_who: &Path, args: &[&str], stdin: &str) -> Output {
    let mut cmd: Command = c.kubectl();
    cmd.arg("--kubeconfig").arg(as_who).args(args);
    common::output_with_stdin(cmd, stdin)
}

fn record(version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {RECORD}\n  namespace: {NS}\n\
         data:\n  v2: '{{\"version\":\"{version}\",\"keys\":{{}}}}'\n"
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn only_the_gated_pods_write_the_record_and_its_deletion_is_refused() {
    let c = cluster();
    c.namespaces(&[NS]);
    // RBAC lets every one of them write the record: the policy is what refuses.
    let rbac = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: gated, namespace: {NS}}}\n---\n\
         apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: other, namespace: {NS}}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: configmaps, namespace: {NS}}}\n\
         rules:\n- apiGroups: ['']\n  resources: [configmaps]\n  verbs: [get, create, update, patch, delete]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: configmaps, namespace: {NS}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmaps}}\n\
         subjects:\n- {{kind: ServiceAccount, name: gated, namespace: {NS}}}\n- {{kind: ServiceAccount, name: other, namespace: {NS}}}\n"
    );
    c.kubectl_ok(&["apply", "-f", "-"], &rbac);
    // Pods only to bind tokens to: no kubelet runs them.
    for (pod, account) in [("gated-0", "gated"), ("other-0", "other")] {
        c.kubectl_ok(
            &["apply", "-f", "-"],
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}, namespace: {NS}}}\n\
                 spec:\n  serviceAccountName: {account}\n  containers:\n  - {{name: c, image: localhost/none}}\n"
            ),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    // A token of `account`, bound to `pod` when given (as the kubelet mounts one), in a kubeconfig.
    let token = |account: &str, pod: Option<&str>, file: &str| {
        let mut args: Vec<String> = ["create", "token", account, "-n", NS]
            .map(str::to_owned)
            .to_vec();
        if let Some(p) = pod {
            let uid = c.kubectl_ok(
                &["get", "pod", p, "-n", NS, "-o", "jsonpath={.metadata.uid}"],
                "",
            );
            args.push("--bound-object-kind=Pod".into());
            args.push(format!("--bound-object-name={p}"));
            args.push(format!("--bound-object-uid={}", uid.trim()));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let t = c.kubectl_ok(&args, "");
        let path = dir.path().join(file);
        c.kubeconfig(&path, t.trim(), NS);
        path
    };
    let gated_pod = token("gated", Some("gated-0"), "gated-pod.kubeconfig");
    let gated_unbound = token("gated", None, "gated-unbound.kubeconfig");
    let other_pod = token("other", Some("other-0"), "other-pod.kubeconfig");

    let out = confgate()
        .args(["policy", "--namespace", NS, "--name", SOURCE])
        .args(["--accepts", ">=2.4.0, <3.0.0", "--service-account", "gated"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    c.kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=confgate-tests",
            "-f",
            "-",
        ],
        &String::from_utf8(out.stdout).unwrap(),
    );
    let only_pods = "only confgate in the gated pods writes it (ServiceAccount policy-record:gated, \
                     with a token bound to its pod";
    // In force once the admin's dry-run create of the record is refused.
    let refused = poll("the policy in force", Duration::from_secs(30), || {
        let out = c.kubectl_with(&["create", "--dry-run=server", "-f", "-"], &record("2.4.1"));
        (!out.status.success()).then(|| stderr(&out))
    });
    assert!(refused.contains(only_pods), "{refused}");

    // Refused: the same ServiceAccount's token bound to no pod, another ServiceAccount's pod.
    for who in [&gated_unbound, &other_pod] {
        let out = kubectl_as(c, who, &["create", "-f", "-"], &record("2.4.1"));
        assert!(!out.status.success(), "{who:?} created the record");
        assert!(stderr(&out).contains(only_pods), "{}", stderr(&out));
    }
    // The gated pod's token creates it and changes it, as the sidecar does.
    let out = kubectl_as(c, &gated_pod, &["create", "-f", "-"], &record("2.4.1"));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = kubectl_as(c, &gated_pod, &["apply", "-f", "-"], &record("2.5.0"));
    assert!(out.status.success(), "{}", stderr(&out));
    // Nobody else changes its content, the admin included.
    for who in [&gated_unbound, &other_pod, &c.admin] {
        let out = kubectl_as(c, who, &["apply", "-f", "-"], &record("9.9.9"));
        assert!(!out.status.success(), "{who:?} rewrote the record");
        assert!(stderr(&out).contains(only_pods), "{}", stderr(&out));
    }
    let v2 = c.kubectl_ok(
        &[
            "get",
            "configmap",
            RECORD,
            "-n",
            NS,
            "-o",
            "jsonpath={.data.v2}",
        ],
        "",
    );
    assert!(v2.contains("2.5.0"), "{v2}");
    // Deleting it is refused, for the gated pod too, until it is annotated (a metadata-only
    // change, which anyone RBAC lets update may make).
    for who in [&gated_pod, &c.admin] {
        let out = kubectl_as(c, who, &["delete", "configmap", RECORD, "-n", NS], "");
        assert!(!out.status.success(), "{who:?} deleted the record");
        assert!(
            stderr(&out).contains("the known-good record of ConfigMap policy-record/app-config that new pods start on, is protected by confgate: deleting it is refused"),
            "{}",
            stderr(&out)
        );
    }
    c.kubectl_ok(
        &[
            "annotate",
            "configmap",
            RECORD,
            "-n",
            NS,
            "confgate.io/allow-delete=true",
        ],
        "",
    );
    c.kubectl_ok(&["delete", "configmap", RECORD, "-n", NS], "");
    // The source is guarded as before.
    let out = c.kubectl_with(
        &["create", "--dry-run=server", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {SOURCE}, namespace: {NS}}}\ndata: {{version: '3.0.0'}}\n"
        ),
    );
    assert!(
        stderr(&out).contains("version 3.0.0 is newer than >=2.4.0, <3.0.0 allows"),
        "{}",
        stderr(&out)
    );
}
