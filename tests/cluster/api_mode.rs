//! API mode on a real API server, as the least-privilege ServiceAccount of `manifests/rbac` with a
//! token from the TokenRequest API: `confgate run --source configmap:NS/NAME` watches the ConfigMap,
//! promotes a compatible change, holds a too-new one, patches the condition on its pod and posts
//! Events; `confgate status` reads the fleet as the `status-reader` Role allows. No kubelet runs, so
//! the pod stays Pending and the sidecar runs beside the test, reporting on that pod object.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodCondition};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common::Gate;
use crate::server::{Cluster, client, cluster, runtime};
use crate::{confgate, poll};

const CM: &str = "webhook-config";
const POD: &str = "web-0";
const ACCEPTS: &str = ">=2.4.0, <3.0.0";
const VERSION_FROM: &str = "yaml:config.yaml#/schemaVersion";
/// Generous: a loaded 2-core machine, a watch, a promotion, a patch.
const DEADLINE: Duration = Duration::from_secs(30);

/// A shipped manifest moved to namespace `ns`, as the RBAC's header says to do.
fn manifest(path: &str, ns: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap()
        .replace("webhook-system", ns)
}

fn config(version: &str) -> String {
    format!("schemaVersion: {version}\ngreeting: hello\n")
}

const COMPATIBLE: &str = "confgate.io/config-compatible";
const CURRENT: &str = "confgate.io/config-current";

fn condition(pod: &Pod, type_: &str) -> Option<PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// A condition's status and reason.
fn said(c: &PodCondition) -> (&str, &str) {
    (c.status.as_str(), c.reason.as_deref().unwrap_or(""))
}

/// The shipped RBAC and ConfigMap in namespace `ns`, a Pending pod `web-0` of the ServiceAccount
/// `confgate`, and `confgate run` in API mode as that ServiceAccount, reporting on that pod.
struct Sidecar {
    ns: &'static str,
    gate: Gate,
    tmp: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    pods: Api<Pod>,
    configmaps: Api<ConfigMap>,
    events: Api<Event>,
}

impl Sidecar {
    fn start(c: &Cluster, ns: &'static str) -> Sidecar {
        Sidecar::start_with(c, ns, &[])
    }

    /// As [`Sidecar::start`], with more `confgate run` arguments.
    fn start_with(c: &Cluster, ns: &'static str, args: &[&str]) -> Sidecar {
        c.namespaces(&[ns]);
        for path in [
            "manifests/rbac/sidecar.yaml",
            "manifests/rbac/status-reader.yaml",
            "manifests/api-mode/configmap.yaml",
        ] {
            c.kubectl_ok(&["apply", "-f", "-"], &manifest(path, ns));
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "namespace": ns,
                         "labels": {"app.kubernetes.io/name": "webhook"}},
            "spec": {"serviceAccountName": "confgate",
                     "readinessGates": [{"conditionType": "confgate.io/config-compatible"}],
                     "containers": [{"name": "webhook", "image": "example/webhook:1"}]}});
        c.kubectl_ok(&["apply", "-f", "-"], &pod.to_string());
        let token = c.kubectl_ok(
            &["create", "token", "confgate", "-n", ns, "--duration=1h"],
            "",
        );
        let tmp = tempfile::tempdir().unwrap();
        let kubeconfig = tmp.path().join("sidecar.kubeconfig");
        c.kubeconfig(&kubeconfig, token.trim(), ns);

        let mut cmd = c.confgate_tied();
        cmd.args(["run", "--accepts", ACCEPTS, "--version-from", VERSION_FROM])
            .args(["--source", &format!("configmap:{ns}/{CM}")])
            .args(args)
            .arg("--promote-to")
            .arg(tmp.path().join("promoted"))
            .arg("--watch")
            .arg(tmp.path().join("no-volume"))
            .arg("--annotations")
            .arg(tmp.path().join("no-annotations"))
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAME", POD)
            .env("POD_NAMESPACE", ns);
        let mut gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
        gate.deadline = DEADLINE;

        let rt = runtime();
        let admin = rt.block_on(client(&c.admin));
        Sidecar {
            ns,
            gate,
            tmp,
            rt,
            pods: Api::namespaced(admin.clone(), ns),
            configmaps: Api::namespaced(admin.clone(), ns),
            events: Api::namespaced(admin, ns),
        }
    }

    fn promoted_config(&self) -> Option<String> {
        std::fs::read_to_string(self.tmp.path().join("promoted/config.yaml")).ok()
    }

    fn pod(&self) -> Pod {
        self.rt.block_on(self.pods.get(POD)).unwrap()
    }

    /// Waits for `config-compatible` to satisfy `pred`.
    fn wait_condition(&self, what: &str, pred: impl Fn(&PodCondition) -> bool) -> PodCondition {
        self.wait_conditions(what, |c, _| pred(c)).0
    }

    /// Waits for `config-compatible` and `config-current` together to satisfy `pred`.
    fn wait_conditions(
        &self,
        what: &str,
        pred: impl Fn(&PodCondition, &PodCondition) -> bool,
    ) -> (PodCondition, PodCondition) {
        poll(what, DEADLINE, || {
            let pod = self.pod();
            let both = (condition(&pod, COMPATIBLE)?, condition(&pod, CURRENT)?);
            pred(&both.0, &both.1).then_some(both)
        })
    }

    /// The Events about the pod.
    fn events(&self) -> Vec<Event> {
        let list = self
            .rt
            .block_on(self.events.list(&ListParams::default()))
            .unwrap();
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(POD))
            .collect()
    }

    fn wait_event(&self, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        poll(what, DEADLINE, || {
            self.events().into_iter().find(|e| pred(e))
        })
    }

    fn set_version(&self, version: &str) {
        let patch = json!({"data": {"config.yaml": config(version)}});
        self.rt
            .block_on(
                self.configmaps
                    .patch(CM, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .unwrap();
    }
}

#[test]
fn run_as_the_least_privilege_service_account() {
    let Some(c) = cluster() else { return };
    let s = Sidecar::start(c, "confgate-api");

    // The shipped ConfigMap (2.4.1) is promoted and reported.
    s.gate.wait_active("2.4.1");
    assert_eq!(s.promoted_config().unwrap(), shipped_config(s.ns));
    let accepted = s.wait_condition("the condition True/Accepted", |c| {
        c.status == "True" && c.reason.as_deref() == Some("Accepted")
    });
    assert!(
        accepted
            .message
            .as_deref()
            .unwrap()
            .starts_with("version 2.4.1 sha256:"),
        "{accepted:?}"
    );
    let event = s.wait_event("an Accepted Event", |e| {
        e.reason.as_deref() == Some("Accepted")
    });
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.reporting_controller.as_deref(), Some("confgate"));
    assert_eq!(event.action.as_deref(), Some("Promote"));
    assert!(
        event
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("version 2.4.1 sha256:") && n.ends_with(" is active")),
        "{event:?}"
    );
    assert_eq!(
        event.regarding.unwrap().uid,
        s.pod().metadata.uid,
        "the Event names this pod"
    );

    // A compatible change is promoted.
    s.set_version("2.5.0");
    s.gate.wait_active("2.5.0");
    assert_eq!(s.promoted_config().unwrap(), config("2.5.0"));
    s.wait_condition("the condition on 2.5.0", |c| {
        c.status == "True"
            && c.message
                .as_deref()
                .is_some_and(|m| m.starts_with("version 2.5.0 sha256:"))
    });

    // A too-new one is held: the promoted config stays, and the replica stays ready (`hold`), so the
    // readiness gate stays True; `config-current` and an Event say what is held and why.
    s.set_version("3.0.0");
    let status = s.gate.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(s.promoted_config().unwrap(), config("2.5.0"));
    let (compatible, held) = s.wait_conditions("True/Accepted and current False/TooNew", |a, b| {
        said(a) == ("True", "Accepted") && said(b) == ("False", "TooNew")
    });
    assert_eq!(compatible.message, held.message);
    let message = held.message.unwrap();
    assert!(
        message.starts_with("version 2.5.0 sha256:")
            && message.contains("; newest version 3.0.0 sha256:")
            && message.contains("is too-new: version 3.0.0 is newer than >=2.4.0, <3.0.0 allows")
            && message.ends_with("or raise confgate.io/accepts once the component reads 3.0.0"),
        "{message}"
    );
    let rejected = s.wait_event("a Rejected Event", |e| {
        e.reason.as_deref() == Some("Rejected")
    });
    assert_eq!(rejected.type_.as_deref(), Some("Warning"));
    assert_eq!(rejected.action.as_deref(), Some("Hold"));
    let note = rejected.note.unwrap();
    assert!(
        note.starts_with("holding version 2.5.0 sha256:")
            && note.contains("; version 3.0.0 sha256:")
            && note.contains(" is too-new: version 3.0.0 is newer than >=2.4.0, <3.0.0 allows")
            && note.ends_with("or raise confgate.io/accepts once the component reads 3.0.0"),
        "{note}"
    );
    assert_eq!(
        s.pod().status.unwrap().phase.as_deref(),
        Some("Pending"),
        "no kubelet runs here"
    );

    // `confgate status` as a member of the group the status-reader Role is bound to.
    status_as_reader(c, &s);

    // Deleted: missing, the last accepted config stays. Created again: a new UID, promoted.
    s.rt.block_on(s.configmaps.delete(CM, &Default::default()))
        .unwrap();
    s.gate.wait_candidate(None, "missing");
    assert_eq!(s.promoted_config().unwrap(), config("2.5.0"));
    s.wait_conditions("True/Accepted and current False/Missing", |a, b| {
        said(a) == ("True", "Accepted") && said(b) == ("False", "Missing")
    });
    let missing = s.wait_event("a Missing Event", |e| {
        e.reason.as_deref() == Some("Missing")
    });
    let holding = s.gate.status()["active"]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        missing.note.unwrap(),
        format!(
            "holding version 2.5.0 {holding}; the newest config is missing: ConfigMap {}/{CM} was deleted",
            s.ns
        )
    );
    let old_uid = s.gate.status()["source"]["uid"].clone();
    c.kubectl_ok(
        &["apply", "-f", "-"],
        &manifest("manifests/api-mode/configmap.yaml", s.ns),
    );
    let status = s.gate.wait_active("2.4.1");
    assert_eq!(status["source"]["recreated"], true, "{status}");
    assert_eq!(status["source"]["previous_uid"], old_uid, "{status}");
    s.wait_condition("the condition True/Accepted again", |c| {
        c.status == "True"
            && c.message
                .as_deref()
                .is_some_and(|m| m.starts_with("version 2.4.1 sha256:"))
    });

    // Least privilege sufficed: nothing was refused along the way.
    let log = s.gate.log_text();
    assert!(
        !log.contains("forbidden") && !log.contains("reporting to the pod failed"),
        "{log}"
    );
}

/// `confgate status` with the token of the group `manifests/rbac/status-reader.yaml` binds: the pod
/// holds 2.5.0 while the ConfigMap says 3.0.0.
fn status_as_reader(c: &Cluster, s: &Sidecar) {
    let reader = s.tmp.path().join("reader.kubeconfig");
    c.kubeconfig(&reader, &c.reader_token, s.ns);
    let out = confgate()
        .args(["status", "-n", s.ns, "-l", "app.kubernetes.io/name=webhook"])
        .args(["--configmap", CM])
        .env("KUBECONFIG", &reader)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("web-0  false  True/Accepted  False/TooNew  2.5.0"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("0/1 on the expected config, 1 holding 2.5.0; 3.0.0 is too-new\n"),
        "{stdout}"
    );
}

/// The readiness gate's condition is True exactly when `/readyz` is 200, whatever the policy and
/// mode: `unready` makes a too-new config NotReady; observe mode stays ready on it. `config-current`
/// says the newest config is not in force in both.
#[test]
fn the_readiness_condition_follows_readyz_under_every_policy_and_mode() {
    let Some(c) = cluster() else { return };
    for (ns, args, ready, reason) in [
        (
            "confgate-api-unready",
            ["--on-incompatible", "unready"],
            false,
            "TooNew",
        ),
        (
            "confgate-api-observe",
            ["--mode", "observe"],
            true,
            "Observed",
        ),
    ] {
        let s = Sidecar::start_with(c, ns, &args);
        s.gate.wait_active("2.4.1");
        s.wait_conditions("both True/Accepted", |a, b| {
            said(a) == ("True", "Accepted") && said(b) == ("True", "Accepted")
        });
        s.set_version("3.0.0");
        let status = s.gate.wait_status("the too-new config judged", |st| {
            st["desired"]["version"] == "3.0.0"
        });
        assert_eq!(status["ready"], ready, "{ns}: {status}");
        let want = if ready { "True" } else { "False" };
        let (compatible, current) = s.wait_conditions(&format!("{ns}: {want}/{reason}"), |a, b| {
            said(a) == (want, reason) && said(b) == ("False", "TooNew")
        });
        assert_eq!(
            s.gate.status()["ready"],
            ready,
            "{ns}: {compatible:?} {current:?}"
        );
    }
}

/// Each promotion and each refusal leaves an Event naming its version: a repeat is folded into an
/// Event's series only when its note is the same, so going back to 2.5.0 counts on 2.5.0's Event.
#[test]
fn each_promotion_has_an_event_naming_its_version() {
    let Some(c) = cluster() else { return };
    let s = Sidecar::start(c, "confgate-api-events");
    let starts = |e: &Event, v: &str| {
        e.note
            .as_deref()
            .is_some_and(|n| n.starts_with(&format!("version {v} sha256:")))
    };
    let count = |e: &Event| e.series.as_ref().map_or(1, |s| s.count);
    // Step by step, so that no change is published before the previous one was reported.
    let steps = [
        ("2.4.1", 1),
        ("2.5.0", 1),
        ("2.6.0", 1),
        ("2.7.0", 1),
        ("2.8.0", 1),
        ("2.5.0", 2),
    ];
    for (i, (v, n)) in steps.into_iter().enumerate() {
        if i > 0 {
            s.set_version(v);
        }
        s.gate.wait_active(v);
        s.wait_event(&format!("an Accepted Event naming {v}, count {n}"), |e| {
            e.reason.as_deref() == Some("Accepted") && starts(e, v) && count(e) == n
        });
    }
    for v in ["3.0.0", "3.1.0"] {
        s.set_version(v);
        s.gate.wait_candidate(Some(v), "too-new");
        s.wait_event(&format!("a Rejected Event naming {v}"), |e| {
            e.reason.as_deref() == Some("Rejected") && starts(e, v)
        });
    }
    let events = s.events();
    let accepted: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Accepted"))
        .collect();
    assert_eq!(accepted.len(), 5, "one Event per version: {accepted:?}");
    let rejected: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Rejected"))
        .collect();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(rejected.iter().all(|e| count(e) == 1), "{rejected:?}");
}

/// `config.yaml` of `manifests/api-mode/configmap.yaml`, as a promoted file holds it.
fn shipped_config(ns: &str) -> String {
    let cm: ConfigMap =
        serde_saphyr::from_str(&manifest("manifests/api-mode/configmap.yaml", ns)).unwrap();
    cm.data.unwrap()["config.yaml"].clone()
}
