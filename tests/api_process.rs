//! The `confgate run` process in API mode against a stand-in API server on loopback: the real binary
//! reads a kubeconfig, lists and watches the ConfigMap, promotes it, posts an Event and patches its
//! pod's condition. The stand-in answers with the shapes the API server sends. In volume mode with no
//! credentials, it says so once and gates as ever.
#![cfg(feature = "api")]

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use common::{Gate, get, wait_for};

type Reply = Response<BoxBody<Bytes, Infallible>>;

/// Requests the stand-in saw, as `METHOD path?query` with the body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn reply(code: u16, body: Value) -> Reply {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap()
}

fn configmap() -> Value {
    json!({"metadata": {"name": "app", "namespace": "prod", "uid": "uid-1", "resourceVersion": "100",
                        "creationTimestamp": "2026-11-29T22:00:00Z"},
           "data": {"version": "2.4.1", "app.yaml": "replicas: 3\n"}})
}

fn pod() -> Value {
    json!({"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "web-0", "namespace": "prod", "uid": "uid-web-0", "resourceVersion": "5"},
           "spec": {"containers": [{"name": "web", "image": "web:1"}]},
           "status": {"phase": "Running"}})
}

async fn handle(req: Request<Incoming>, seen: Seen) -> Result<Reply, Infallible> {
    let what = format!(
        "{} {}?{}",
        req.method(),
        req.uri().path(),
        req.uri().query().unwrap_or_default()
    );
    let method = req.method().clone();
    let metadata_only = req
        .headers()
        .get("accept")
        .is_some_and(|a| a == "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    let path = req.uri().path().to_owned();
    let watch = req.uri().query().unwrap_or_default().contains("watch=true");
    let bytes = req.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    seen.lock().unwrap().push((what, body.clone()));
    Ok(match (method.as_str(), path.as_str()) {
        ("GET", "/api/v1/namespaces/prod/configmaps") if watch => {
            // A watch that stays open with nothing to say, as a quiet API server's does.
            let stream = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
            Response::builder()
                .header("content-type", "application/json")
                .body(StreamBody::new(stream).boxed())
                .unwrap()
        }
        ("GET", "/api/v1/namespaces/prod/configmaps") => reply(
            200,
            json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "100"},
                   "items": [configmap()]}),
        ),
        // The sidecar reads only its pod's metadata, asking for the metadata-only form.
        ("GET", "/api/v1/namespaces/prod/pods/web-0") if metadata_only => reply(
            200,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": pod()["metadata"].clone()}),
        ),
        ("GET", "/api/v1/namespaces/prod/configmaps/app") => {
            let mut cm = configmap();
            cm["kind"] = json!("ConfigMap");
            cm["apiVersion"] = json!("v1");
            reply(200, cm)
        }
        ("GET", "/api/v1/namespaces/prod/pods") => {
            // The pod as the API server would now show it: with the conditions and the facts
            // annotation the sidecar patched.
            let patched = seen.lock().unwrap().iter().rev().find_map(|(w, b)| {
                w.starts_with("PATCH /api/v1/namespaces/prod/pods/web-0/status")
                    .then(|| b.clone())
            });
            let mut p = pod();
            if let Some(b) = patched {
                p["status"]["conditions"] = b["status"]["conditions"].clone();
                p["metadata"]["annotations"] = b["metadata"]["annotations"].clone();
            }
            p.as_object_mut().unwrap().remove("kind");
            p.as_object_mut().unwrap().remove("apiVersion");
            reply(
                200,
                json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "6"}, "items": [p]}),
            )
        }
        ("POST", "/apis/events.k8s.io/v1/namespaces/prod/events") => reply(201, body),
        ("PATCH", "/api/v1/namespaces/prod/pods/web-0/status") => reply(200, pod()),
        _ => reply(
            404,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": format!("the server could not find the requested resource ({path})"),
                   "reason": "NotFound", "code": 404}),
        ),
    })
}

#[test]
fn run_in_api_mode_promotes_reports_and_shows_the_source() {
    let seen: Seen = Arc::default();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let api = std_listener.local_addr().unwrap();
    let s = seen.clone();
    // The stand-in runs on its own thread; it ends with the test process.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| handle(req, s.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });

    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    server: http://{api}\n\
             users:\n- name: confgate\n  user:\n    token: not-a-secret\ncontexts:\n- name: c\n  context:\n    \
             cluster: stand-in\n    user: confgate\n    namespace: prod\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let promoted = tmp.path().join("promoted");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"));
    cmd.args(["run", "--accepts", "^2.4", "--source", "configmap:prod/app"])
        .arg("--promote-to")
        .arg(&promoted)
        .arg("--watch")
        .arg(tmp.path().join("no-volume"))
        .arg("--annotations")
        .arg(tmp.path().join("no-annotations"))
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "web-0")
        .env("POD_NAMESPACE", "prod")
        .env_remove("KUBERNETES_SERVICE_HOST");
    let gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
    let port = gate.port;

    wait_for(
        "the ConfigMap to be promoted",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(promoted.join("version"))
                .is_ok_and(|v| v == "2.4.1")
                .then_some(())
        },
    );
    let condition = |seen: &Seen| {
        seen.lock()
            .unwrap()
            .iter()
            .find(|(w, _)| w.starts_with("PATCH /api/v1/namespaces/prod/pods/web-0/status"))
            .map(|(_, b)| b["status"]["conditions"][0].clone())
    };
    let c = wait_for("the condition patch", Duration::from_secs(20), || {
        condition(&seen)
    });
    assert_eq!(c["type"], "confgate.io/config-compatible");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("Accepted"))
    );
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .starts_with("version 2.4.1 sha256:"),
        "{c}"
    );
    let requests: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(w, _)| w.clone())
        .collect();
    assert!(
        requests
            .iter()
            .any(|w| w.starts_with("POST /apis/events.k8s.io/v1/namespaces/prod/events")),
        "{requests:#?}"
    );
    assert!(
        requests
            .iter()
            .filter(|w| w.starts_with("GET /api/v1/namespaces/prod/configmaps"))
            .all(|w| w.contains("fieldSelector=metadata.name%3Dapp")),
        "every list and watch carries the field selector RBAC resourceNames needs: {requests:#?}"
    );

    let status = wait_for("/status", Duration::from_secs(10), || {
        get(port, "/status")
            .map(|(_, body)| body)
            .filter(|body| body.contains("\"source\""))
    });
    let body: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["source"]["uid"], "uid-1");
    assert_eq!(body["source"]["resource_version"], "100");
    assert_eq!(body["source"]["recreated"], false);
    assert_eq!(body["source"]["watch"]["healthy"], true);
    let live = get(port, "/livez").unwrap();
    assert_eq!(live.0, 200, "{live:?}");

    // `confgate status` reads back the condition the sidecar wrote and finds the ConfigMap's content.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"))
        .args([
            "status",
            "-n",
            "prod",
            "-l",
            "app=web",
            "--configmap",
            "app",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("web-0  false  True/Accepted  True/Accepted  2.4.1"),
        "{stdout}"
    );
    assert!(stdout.ends_with("1/1 on 2.4.1\n"), "{stdout}");

    // `confgate wait` in API mode, promoting into a fresh dir: it lists the ConfigMap and returns.
    let fresh = tmp.path().join("promoted-by-wait");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"))
        .args([
            "wait",
            "--accepts",
            "^2.4",
            "--source",
            "configmap:prod/app",
            "--timeout",
            "20s",
        ])
        .arg("--promote-to")
        .arg(&fresh)
        .arg("--annotations")
        .arg(tmp.path().join("no-annotations"))
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(fresh.join("version")).unwrap(),
        "2.4.1"
    );
}

/// Volume mode in a pod without a ServiceAccount token (`automountServiceAccountToken: false`): the
/// in-cluster environment is there, the token is not. confgate says once that it cannot report, and
/// gates as ever: the log line does not repeat with later status changes, and nothing fails.
#[test]
fn volume_mode_without_a_token_says_so_once_and_gates() {
    let tmp = tempfile::tempdir().unwrap();
    let incoming = tmp.path().join("incoming");
    common::write_version(&incoming, "2.4.1");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"));
    cmd.args(["run", "--accepts", "^2.4"])
        .arg("--watch")
        .arg(&incoming)
        .arg("--promote-to")
        .arg(tmp.path().join("promoted"))
        .arg("--annotations")
        .arg(tmp.path().join("no-annotations"))
        .env("POD_NAME", "web-0")
        .env("POD_NAMESPACE", "prod")
        // What the kubelet sets in every container; the token file it would mount is absent.
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", "1")
        .env("HOME", tmp.path())
        .env_remove("KUBECONFIG")
        .env_remove("CONFGATE_POD_REPORT");
    let mut gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
    gate.wait_active("2.4.1");
    common::write_version(&incoming, "2.5.0");
    gate.wait_active("2.5.0");
    common::write_version(&incoming, "3.0.0");
    let status = gate.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(status["active"]["version"], "2.5.0", "{status}");
    assert!(gate.alive());
    let log = gate.log_text();
    assert_eq!(
        log.matches("no Kubernetes credentials").count(),
        1,
        "said once: {log}"
    );
}
