//! API mode on a real API server, as the least-privilege ServiceAccount of `manifests/rbac` with a
//! token from the TokenRequest API: `confgate run --source configmap:NS/NAME` watches the ConfigMap,
//! promotes a compatible change, holds a too-new one, patches the condition on its pod and posts
//! Events; `confgate status` reads the fleet as the `status-reader` Role allows. No kubelet runs, so
//! the pod stays Pending and the sidecar runs beside the test, reporting on that pod object.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::confgate;
use crate::server::{Cluster, cluster};
use crate::sidecar::{Sidecar, config, manifest, said};

const CM: &str = "webhook-config";

/// The RBAC of `manifests/rbac` (the sidecar's and the status reader's) and the shipped ConfigMap in
/// namespace `ns`, and a sidecar watching that ConfigMap.
pub fn start(c: &Cluster, ns: &str, args: &[&str]) -> Sidecar {
    let manifests = [
        "manifests/rbac/sidecar.yaml",
        "manifests/rbac/status-reader.yaml",
        "manifests/api-mode/configmap.yaml",
    ];
    Sidecar::start(
        c,
        ns,
        &manifests,
        &[],
        &format!("configmap:{ns}/{CM}"),
        args,
    )
}

/// Sets `config.yaml` of the sidecar's ConfigMap to version `version`.
pub fn set_version(s: &Sidecar, version: &str) {
    let configmaps: Api<ConfigMap> = Api::namespaced(s.view.admin.clone(), &s.ns);
    let patch = json!({"data": {"config.yaml": config(version)}});
    s.view
        .rt
        .block_on(configmaps.patch(CM, &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap();
}

#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn run_as_the_least_privilege_service_account() {
    let c = cluster();
    let s = start(c, "confgate-api", &[]);

    // The shipped ConfigMap (2.4.1) is promoted and reported.
    s.gate.wait_active("2.4.1");
    assert_eq!(s.promoted("config.yaml").unwrap(), shipped_config(&s.ns));
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
    // A routine promotion makes no Event: the conditions say what is active.
    assert!(
        s.view
            .events()
            .iter()
            .all(|e| e.reason.as_deref() != Some("Accepted")),
        "{:?}",
        s.view.events()
    );

    // A compatible change is promoted.
    set_version(&s, "2.5.0");
    s.gate.wait_active("2.5.0");
    assert_eq!(s.promoted("config.yaml").unwrap(), config("2.5.0"));
    s.wait_condition("the condition on 2.5.0", |c| {
        c.status == "True"
            && c.message
                .as_deref()
                .is_some_and(|m| m.starts_with("version 2.5.0 sha256:"))
    });

    // A too-new one is held: the promoted config stays, and the replica stays ready (`hold`), so the
    // readiness gate stays True; `config-current` and an Event say what is held and why.
    set_version(&s, "3.0.0");
    let status = s.gate.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(s.promoted("config.yaml").unwrap(), config("2.5.0"));
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
    let rejected = s.view.wait_event("a Rejected Event", |e| {
        e.reason.as_deref() == Some("Rejected")
    });
    assert_eq!(rejected.type_.as_deref(), Some("Warning"));
    assert_eq!(rejected.action.as_deref(), Some("Hold"));
    assert_eq!(rejected.reporting_controller.as_deref(), Some("confgate"));
    assert_eq!(
        rejected.regarding.as_ref().unwrap().uid,
        s.view.pod().metadata.uid,
        "the Event names this pod"
    );
    let note = rejected.note.unwrap();
    assert!(
        note.starts_with("holding version 2.5.0 sha256:")
            && note.contains("; version 3.0.0 sha256:")
            && note.contains(" is too-new: version 3.0.0 is newer than >=2.4.0, <3.0.0 allows")
            && note.ends_with("or raise confgate.io/accepts once the component reads 3.0.0"),
        "{note}"
    );
    assert_eq!(
        s.view.pod().status.unwrap().phase.as_deref(),
        Some("Pending"),
        "no kubelet runs here"
    );

    // `confgate status` as a member of the group the status-reader Role is bound to.
    status_while_holding(c, &s);

    // Deleted: missing, the last accepted config stays. Created again: a new UID, promoted.
    let configmaps: Api<ConfigMap> = Api::namespaced(s.view.admin.clone(), &s.ns);
    s.view
        .rt
        .block_on(configmaps.delete(CM, &Default::default()))
        .unwrap();
    s.gate.wait_candidate(None, "missing");
    assert_eq!(s.promoted("config.yaml").unwrap(), config("2.5.0"));
    s.wait_conditions("True/Accepted and current False/Missing", |a, b| {
        said(a) == ("True", "Accepted") && said(b) == ("False", "Missing")
    });
    let missing = s.view.wait_event("a Missing Event", |e| {
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
    // `confgate status` names the ConfigMap that is not there (exit 1: the pods do not run it).
    let (code, stdout, stderr) = status_as_reader(c, &s, &["--configmap", CM]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("no such ConfigMap {}/{CM}\n", s.ns)),
        "{stdout}"
    );
    let old_uid = s.gate.status()["source"]["uid"].clone();
    c.kubectl_ok(
        &["apply", "-f", "-"],
        &manifest("manifests/api-mode/configmap.yaml", &s.ns),
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

/// `confgate status ARGS` in the sidecar's namespace with the token of the group
/// `manifests/rbac/status-reader.yaml` binds, read from a `tokenFile` that ends in a newline, as
/// kubectl accepts it: exit code, stdout, stderr.
fn status_as_reader(c: &Cluster, s: &Sidecar, args: &[&str]) -> (Option<i32>, String, String) {
    let reader = s.tmp.path().join("reader.kubeconfig");
    c.kubeconfig_with_token_file(&reader, &format!("{}\n", c.reader_token), &s.ns);
    let out = confgate()
        .args(["status", "-n", &s.ns])
        .args(args)
        .env("KUBECONFIG", &reader)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    (out.status.code(), stdout, stderr)
}

/// The pod holds 2.5.0 while the ConfigMap says 3.0.0 (exit 1); a selection with no pod is neither a
/// failure of the pods nor a success (exit 66).
fn status_while_holding(c: &Cluster, s: &Sidecar) {
    let (code, stdout, stderr) = status_as_reader(
        c,
        s,
        &["-l", "app.kubernetes.io/name=webhook", "--configmap", CM],
    );
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("web-0  false  True/Accepted  False/TooNew  2.5.0"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("0/1 on the expected config, 1 holding 2.5.0; 3.0.0 is too-new\n"),
        "{stdout}"
    );
    let (code, stdout, stderr) = status_as_reader(c, s, &["-l", "app.kubernetes.io/name=nothing"]);
    assert_eq!(code, Some(66), "{stdout}{stderr}");
    assert_eq!(
        stderr,
        format!(
            "confgate: no pods in namespace {} match -l app.kubernetes.io/name=nothing: nothing to compare\n",
            s.ns
        )
    );
}

/// The readiness gate's condition is True exactly when `/readyz` is 200, whatever the policy and
/// mode: `unready` makes a too-new config NotReady; observe mode stays ready on it. `config-current`
/// says the newest config is not in force in both.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn the_readiness_condition_follows_readyz_under_every_policy_and_mode() {
    let c = cluster();
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
        let s = start(c, ns, &args);
        s.gate.wait_active("2.4.1");
        s.wait_conditions("both True/Accepted", |a, b| {
            said(a) == ("True", "Accepted") && said(b) == ("True", "Accepted")
        });
        set_version(&s, "3.0.0");
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

/// A routine promotion leaves no Event; each refusal leaves one naming its version, and the promotion
/// that ends a hold leaves one too, so a Warning is followed by its resolution. A repeat is folded
/// into an Event's series only when its note is the same.
#[test]
#[ignore = "needs ETCD_BIN and KUBE_APISERVER_BIN (docs/development.md)"]
fn refusals_and_the_end_of_a_hold_have_events_routine_promotions_none() {
    let c = cluster();
    let s = start(c, "confgate-api-events", &[]);
    let starts = |e: &Event, v: &str| {
        e.note
            .as_deref()
            .is_some_and(|n| n.starts_with(&format!("version {v} sha256:")))
    };
    let count = |e: &Event| e.series.as_ref().map_or(1, |s| s.count);
    // Step by step, so that no change is published before the previous one was reported.
    for (i, v) in ["2.4.1", "2.5.0", "2.6.0"].into_iter().enumerate() {
        if i > 0 {
            set_version(&s, v);
        }
        s.gate.wait_active(v);
        s.wait_condition(&format!("the condition on {v}"), |c| {
            c.message
                .as_deref()
                .is_some_and(|m| m.starts_with(&format!("version {v} sha256:")))
        });
    }
    for v in ["3.0.0", "3.1.0"] {
        set_version(&s, v);
        s.gate.wait_candidate(Some(v), "too-new");
        s.view
            .wait_event(&format!("a Rejected Event naming {v}"), |e| {
                e.reason.as_deref() == Some("Rejected")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains(&format!("; version {v} sha256:")))
            });
    }
    set_version(&s, "2.7.0");
    s.gate.wait_active("2.7.0");
    let ended = s.view.wait_event("an Accepted Event naming 2.7.0", |e| {
        e.reason.as_deref() == Some("Accepted") && starts(e, "2.7.0")
    });
    assert_eq!(ended.type_.as_deref(), Some("Normal"));
    let events = s.view.events();
    let accepted: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Accepted"))
        .collect();
    assert_eq!(accepted.len(), 1, "only the end of the hold: {accepted:?}");
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
