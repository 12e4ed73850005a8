//! The recommended deployment's reporting on a real API server: `confgate run` in volume mode (a
//! kubelet-style volume, no ConfigMap access) with a token of the ServiceAccount that
//! `manifests/native-sidecar/rbac.yaml` binds, reporting on a pod object created for it (no kubelet
//! runs, so it stays Pending). A held config and a reload that keeps failing show in the conditions,
//! the facts annotation and Events; `confgate status` reads the pod; `--pod-report off` makes no
//! request.

use std::path::PathBuf;

use confgate::api::condition::{FACTS_ANNOTATION, Facts};
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use serde_json::json;

use crate::common::{Gate, poll, write_version};
use crate::confgate;
use crate::server::{Cluster, cluster};
use crate::sidecar::{ACCEPTS, COMPATIBLE, CURRENT, DEADLINE, PodView, condition, manifest, said};

const POD: &str = "component-0";

/// A reload target that refuses every connection: a loopback port bound, then closed.
fn refusing_target() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}/reload")
}

/// The shipped native-sidecar RBAC in namespace `ns`, a Pending pod of its ServiceAccount, and
/// `confgate run` on a kubelet-style volume reporting on that pod as that ServiceAccount.
struct Sidecar {
    ns: &'static str,
    gate: Gate,
    tmp: tempfile::TempDir,
    incoming: PathBuf,
    view: PodView,
}

impl Sidecar {
    fn start(c: &Cluster, ns: &'static str, args: &[&str], env: &[(&str, &str)]) -> Sidecar {
        Sidecar::start_on(c, ns, args, env, "2.4.1", &[])
    }

    /// [`Sidecar::start`] with `first` in the volume when confgate starts and `objects` applied by
    /// the admin before; the pod's spec mounts ConfigMap `component-config` at the watched path, as
    /// the kubelet would, so the known-good record beside it is named.
    fn start_on(
        c: &Cluster,
        ns: &'static str,
        args: &[&str],
        env: &[(&str, &str)],
        first: &str,
        objects: &[serde_json::Value],
    ) -> Sidecar {
        c.namespaces(&[ns]);
        for o in objects {
            c.kubectl_ok(&["apply", "-f", "-"], &o.to_string());
        }
        let tmp = tempfile::tempdir().unwrap();
        let incoming = tmp.path().join("incoming");
        c.kubectl_ok(
            &["apply", "-n", ns, "-f", "-"],
            &manifest("manifests/native-sidecar/rbac.yaml", ns),
        );
        c.kubectl_ok(
            &["apply", "-f", "-"],
            &manifest("manifests/rbac/status-reader.yaml", ns),
        );
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "namespace": ns,
                         "labels": {"app.kubernetes.io/name": "component"}},
            "spec": {"serviceAccountName": "confgate",
                     "containers": [
                         {"name": "component", "image": "example/component:1"},
                         {"name": "confgate", "image": "localhost/confgate/confgate:dev",
                          "volumeMounts": [{"name": "config",
                                            "mountPath": incoming.to_str().unwrap()}]}],
                     "volumes": [{"name": "config",
                                  "configMap": {"name": "component-config"}}]}});
        c.kubectl_ok(&["apply", "-f", "-"], &pod.to_string());
        let uid = c.kubectl_ok(
            &[
                "get",
                "pod",
                POD,
                "-n",
                ns,
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            "",
        );
        // Bound to the pod, as the kubelet's projected token is: the own-pod policy, which a test
        // applying the shipped manifests binds on this shared API server, refuses a token bound to
        // no pod for a holder of this Role.
        let token = c.kubectl_ok(
            &[
                "create",
                "token",
                "confgate",
                "-n",
                ns,
                "--duration=1h",
                "--bound-object-kind=Pod",
                &format!("--bound-object-name={POD}"),
                &format!("--bound-object-uid={}", uid.trim()),
            ],
            "",
        );
        let kubeconfig = tmp.path().join("sidecar.kubeconfig");
        c.kubeconfig(&kubeconfig, token.trim(), ns);
        write_version(&incoming, first);

        let mut cmd = c.confgate_tied();
        cmd.args(["run", "--accepts", ACCEPTS])
            .args(args)
            .arg("--watch")
            .arg(&incoming)
            .arg("--promote-to")
            .arg(tmp.path().join("promoted"))
            .arg("--annotations")
            .arg(tmp.path().join("no-annotations"))
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAME", POD)
            .env("POD_NAMESPACE", ns)
            .env("POD_UID", uid.trim())
            .envs(env.iter().copied());
        let mut gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
        gate.deadline = DEADLINE;

        Sidecar {
            ns,
            gate,
            tmp,
            incoming,
            view: PodView::new(c, ns, POD),
        }
    }

    /// Waits until the pod's two conditions and its facts satisfy `pred`.
    fn wait_reported(
        &self,
        what: &str,
        pred: impl Fn(&PodCondition, &PodCondition, &Facts) -> bool,
    ) -> (PodCondition, PodCondition, Facts) {
        poll(what, DEADLINE, || {
            let pod = self.view.pod();
            let got = (
                condition(&pod, COMPATIBLE)?,
                condition(&pod, CURRENT)?,
                facts(&pod)?,
            );
            pred(&got.0, &got.1, &got.2).then_some(got)
        })
    }

    /// `confgate status` as a member of the group `status-reader.yaml` binds: its exit code and output.
    fn status_as_reader(&self, c: &Cluster) -> (Option<i32>, String) {
        let reader = self.tmp.path().join("reader.kubeconfig");
        c.kubeconfig(&reader, &c.reader_token, self.ns);
        let out = confgate()
            .args([
                "status",
                "-n",
                self.ns,
                "-l",
                "app.kubernetes.io/name=component",
            ])
            .env("KUBECONFIG", &reader)
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// Nothing confgate asked for was refused: the narrowed Role sufficed.
    fn assert_nothing_refused(&self) {
        let log = self.gate.log_text();
        assert!(
            !log.contains("forbidden") && !log.contains("reporting to the pod failed"),
            "{log}"
        );
    }
}

fn facts(pod: &Pod) -> Option<Facts> {
    Facts::from_json(pod.metadata.annotations.as_ref()?.get(FACTS_ANNOTATION)?)
}

/// A too-new config held under `hold`: the replica stays ready and the readiness condition True, while
/// `config-current`, the facts and a Warning Event say what is held; `confgate status` shows it.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn volume_mode_reports_a_held_config_under_the_narrowed_role() {
    let c = cluster();
    let s = Sidecar::start(c, "confgate-volume-held", &[], &[]);

    s.gate.wait_active("2.4.1");
    let (_, _, f) = s.wait_reported("2.4.1 reported", |a, b, f| {
        said(a) == ("True", "Accepted")
            && said(b) == ("True", "Accepted")
            && f.active.as_ref().and_then(|a| a.version.as_deref()) == Some("2.4.1")
    });
    assert_eq!(
        f.active.unwrap().sha256,
        s.gate.status()["active"]["sha256"]
            .as_str()
            .map(str::to_owned)
    );

    write_version(&s.incoming, "3.0.0");
    let status = s.gate.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(status["ready"], true, "{status}");
    let (compatible, current, f) =
        s.wait_reported("3.0.0 held", |_, b, _| said(b) == ("False", "TooNew"));
    assert_eq!(said(&compatible), ("True", "Accepted"));
    let newest = f.newest.unwrap();
    assert_eq!(
        (newest.config.version.as_deref(), newest.verdict.as_str()),
        (Some("3.0.0"), "too-new")
    );
    assert!(
        current
            .message
            .as_deref()
            .unwrap()
            .contains("newest version 3.0.0"),
        "{current:?}"
    );
    let ev = s.view.wait_event("the Rejected Event", |e| {
        e.reason.as_deref() == Some("Rejected")
    });
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(ev.regarding.as_ref().unwrap().uid.is_some(), "{ev:?}");

    // The fleet view reads the volume-mode pod as it reads an API-mode one.
    let (code, out) = s.status_as_reader(c);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("component-0  false  True/Accepted  False/TooNew  2.4.1"),
        "{out}"
    );
    assert!(
        out.ends_with("0/1 on the expected config, 1 holding 2.4.1; 3.0.0 is too-new\n"),
        "{out}"
    );
    s.assert_nothing_refused();
}

/// A healthy change with a reload target costs the API server one write of the pod and no Event:
/// the patch for the promotion waits for the reload's answer, so `active` and `applied` arrive
/// together.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn a_healthy_change_is_one_write_of_the_pod_and_no_event() {
    let c = cluster();
    let sink = crate::common::Sink::start(false);
    let url = sink.url();
    let s = Sidecar::start(c, "confgate-volume-writes", &["--reload", &url], &[]);
    let version = |d: &Option<confgate::api::condition::Described>| {
        d.as_ref().and_then(|d| d.version.clone())
    };
    s.gate.wait_active("2.4.1");
    s.wait_reported("2.4.1 applied", |_, _, f| {
        version(&f.applied).as_deref() == Some("2.4.1")
    });
    let rv = s.view.pod().metadata.resource_version.unwrap();

    write_version(&s.incoming, "2.4.2");
    let writes = s.view.writes_since(&rv, |p| {
        facts(p).is_some_and(|f| version(&f.applied).as_deref() == Some("2.4.2"))
    });
    let seen: Vec<(Option<String>, Option<String>)> = writes
        .iter()
        .map(|p| {
            let f = facts(p).unwrap();
            (version(&f.active), version(&f.applied))
        })
        .collect();
    assert_eq!(
        seen,
        [(Some("2.4.2".into()), Some("2.4.2".into()))],
        "one write, with the promotion and the reload's answer together"
    );
    assert!(sink.count() >= 1);
    let events = s.view.events();
    assert!(
        events.is_empty(),
        "no Event for a healthy change: {events:?}"
    );
    s.assert_nothing_refused();
}

/// Five promotions whose reloads are all refused: readiness stays (the component still runs the
/// config it had), and `config-current` says `ReloadFailing`, the facts name the target and the
/// error, a Warning `ReloadFailed` Event is posted and `confgate status` shows it.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn volume_mode_reports_a_reload_that_keeps_failing() {
    let c = cluster();
    let target = refusing_target();
    let s = Sidecar::start(c, "confgate-volume-reload", &["--reload", &target], &[]);
    s.gate.wait_active("2.4.1");
    for v in ["2.5.0", "2.5.1", "2.5.2", "2.5.3", "2.5.4"] {
        write_version(&s.incoming, v);
        s.gate.wait_active(v);
    }
    let status = s.gate.wait_status("the reload failing", |st| {
        st["reload"]["consecutive_failures"].as_u64() >= Some(3)
    });
    assert_eq!(status["ready"], true, "{status}");
    // The condition's flip is patched at once; the facts of the last promotion, which flips no
    // condition, follow within the pod's share of the report spread: waited for, not assumed.
    let (compatible, current, f) = s.wait_reported(
        "ReloadFailing, with the facts naming the promoted config",
        |_, b, f| {
            said(b) == ("False", "ReloadFailing")
                && f.active.as_ref().and_then(|a| a.version.as_deref()) == Some("2.5.4")
        },
    );
    assert_eq!(said(&compatible), ("True", "Accepted"));
    let failing = f.reload_failing.unwrap();
    assert_eq!(failing.target, target);
    assert!(failing.error.contains("refused"), "{failing:?}");
    assert!(
        current.message.as_deref().unwrap().contains("failing"),
        "{current:?}"
    );
    let ev = s.view.wait_event("the ReloadFailed Event", |e| {
        e.reason.as_deref() == Some("ReloadFailed")
    });
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(ev.note.as_deref().unwrap().contains(&target), "{ev:?}");

    let (code, out) = s.status_as_reader(c);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("True/Accepted  False/ReloadFailing  2.5.4"),
        "{out}"
    );
    assert!(out.contains("1 running 2.5.4: reload-failing"), "{out}");
    s.assert_nothing_refused();
}

/// `CONFGATE_POD_REPORT=off`: with a token and the Role in place, confgate gates and promotes and
/// writes nothing on the pod.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn pod_report_off_writes_nothing() {
    let c = cluster();
    let s = Sidecar::start(
        c,
        "confgate-volume-off",
        &[],
        &[("CONFGATE_POD_REPORT", "off")],
    );
    s.gate.wait_active("2.4.1");
    write_version(&s.incoming, "3.0.0");
    s.gate.wait_candidate(Some("3.0.0"), "too-new");
    assert!(
        s.gate.log_text().contains("--pod-report off"),
        "{}",
        s.gate.log_text()
    );
    let pod = s.view.pod();
    assert_eq!(condition(&pod, COMPATIBLE), None);
    assert_eq!(facts(&pod), None);
    assert!(s.view.events().is_empty(), "{:?}", s.view.events());
}

/// A pod-like sidecar in volume mode whose mounted dir holds only a too-new version starts on the
/// known-good it reads through the API (the record beside the ConfigMap its spec mounts at the
/// watched path, under the shipped Role), and reports it: `/status`, `config-current` `KnownGood`,
/// the Event, `confgate status`; the volume's first accepted version then replaces it.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn volume_mode_starts_on_the_known_good_read_through_the_api() {
    let c = cluster();
    let ns = "confgate-volume-known-good";
    let record = "component-config.confgate-known-good";
    // The record as an earlier pod wrote it: 2.4.1, with the keys the volume holds.
    let files = std::collections::BTreeMap::from([("version".to_owned(), b"2.4.1".to_vec())]);
    let entry = confgate::known_good::Entry::of(&confgate::snapshot::Snapshot::new(files), "2.4.1");
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": record, "namespace": ns},
                        "data": {"v2": entry.to_json()}});
    let sink = crate::common::Sink::start(false);
    let url = sink.url();
    let s = Sidecar::start_on(c, ns, &["--reload", &url], &[], "3.0.0", &[object]);

    let status = s.gate.wait_status("started on the known-good", |s| {
        s["active"]["version"] == "2.4.1" && !s["known_good"].is_null()
    });
    assert_eq!(status["known_good"]["record"], record, "{status}");
    assert_eq!(status["known_good"]["because"], "too-new", "{status}");
    assert_eq!(status["ready"], true, "hold: {status}");
    assert_eq!(
        std::fs::read_to_string(s.tmp.path().join("promoted/version")).unwrap(),
        "2.4.1"
    );
    let (_, current, _) = s.wait_reported("config-current KnownGood", |_, b, _| {
        said(b) == ("False", "KnownGood")
    });
    // The message is the facts in prose: what runs, and why the newest is not it.
    assert!(
        current
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("version 2.4.1 ")
                && m.contains("newest version 3.0.0 sha256:")
                && m.contains("is too-new")),
        "{current:?}"
    );
    s.view.wait_event("the KnownGood Event", |e| {
        e.reason.as_deref() == Some("KnownGood")
            && e.note.as_deref().is_some_and(|n| n.contains(record))
    });
    // The pod's row: config-current False/KnownGood, running 2.4.1; not on the expected config.
    let (code, out) = s.status_as_reader(c);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with(POD)
            && l.contains("False/KnownGood")
            && l.split_whitespace().nth(4) == Some("2.4.1")),
        "{out}"
    );

    write_version(&s.incoming, "2.5.0");
    let status = s.gate.wait_active("2.5.0");
    assert!(status["known_good"].is_null(), "{status}");
    s.assert_nothing_refused();
}
