//! The `confgate run` process in API mode against a stand-in API server on loopback: the real binary
//! reads a kubeconfig, lists and watches the ConfigMap, promotes it and patches its pod's condition
//! (no Event for a routine promotion). The stand-in answers with the shapes the API server sends. In volume mode with no
//! credentials, it says so once and gates as ever.
#![cfg(feature = "api")]

use crate::common;

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

/// Serves `handler` on a loopback port from a thread of its own, which ends with the test process.
fn stand_in<F, Fut>(seen: Seen, handler: F) -> std::net::SocketAddr
where
    F: Fn(Request<Incoming>, Seen) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = Result<Reply, Infallible>> + Send + 'static,
{
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let api = std_listener.local_addr().unwrap();
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
                let s = seen.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| handler(req, s.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    api
}

/// A kubeconfig in `dir` naming the stand-in at `api`, with a static token.
fn kubeconfig(dir: &std::path::Path, api: std::net::SocketAddr) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    server: http://{api}\n\
             users:\n- name: confgate\n  user:\n    token: not-a-secret\ncontexts:\n- name: c\n  context:\n    \
             cluster: stand-in\n    user: confgate\n    namespace: prod\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn run_in_api_mode_promotes_reports_and_shows_the_source() {
    let seen: Seen = Arc::default();
    let api = stand_in(seen.clone(), handle);
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(tmp.path(), api);
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
    // A routine accepted promotion posts no Event; the reporter posts a change's Events before its
    // patch, so none came before the one seen.
    assert!(
        !requests
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

/// The shipped API-mode manifest's memory limit for the sidecar (manifests/api-mode:
/// `resources.limits.memory: 16Mi`).
const API_MODE_LIMIT_KIB: u64 = 16 * 1024;
/// The release build's RSS in API mode once it has promoted a small config and reported it (the most
/// measured, docs/performance.md, 2026-12-03). The test binary is a debug build, many MiB larger in
/// file-backed pages alone, so what is measured here is the growth the ConfigMap causes; the release
/// RSS plus that growth must stay within three quarters of the limit.
const API_MODE_RELEASE_RSS_KIB: u64 = 7_340;

/// A ConfigMap of 100,000 one-byte keys (700 KB of keys and values, within the API server's 1 MiB),
/// with the managedFields a server-side apply writes, which name every key again: its JSON is about
/// 2.5 MB.
fn many_keys(rv: &str) -> Value {
    let data: serde_json::Map<String, Value> = (0..100_000)
        .map(|i| (format!("k{i:05}"), json!("x")))
        .collect();
    let fields: serde_json::Map<String, Value> =
        data.keys().map(|k| (format!("f:{k}"), json!({}))).collect();
    json!({"metadata": {"name": "app", "namespace": "prod", "uid": "uid-1", "resourceVersion": rv,
                        "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                                           "fieldsType": "FieldsV1", "fieldsV1": {"f:data": fields}}]},
           "data": data})
}

/// Lets the first watch answer: the test measures memory before.
static MANY_KEYS_NOW: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// First list: a small ConfigMap. Its watch, once the test says so: the ConfigMap modified to 100,000 keys, then `410 Gone`.
/// Second list: the 100,000 keys again. Its watch stays open.
async fn many_keys_handler(req: Request<Incoming>, seen: Seen) -> Result<Reply, Infallible> {
    let what = format!(
        "{} {}?{}",
        req.method(),
        req.uri().path(),
        req.uri().query().unwrap_or_default()
    );
    let path = req.uri().path().to_owned();
    let watch = what.contains("watch=true");
    let (lists, watches) = {
        let mut seen = seen.lock().unwrap();
        seen.push((what.clone(), Value::Null));
        let count = |w: bool| {
            seen.iter()
                .filter(|(s, _)| s.starts_with("GET /api/v1/namespaces/prod/configmaps?"))
                .filter(|(s, _)| s.contains("watch=true") == w)
                .count()
        };
        (count(false), count(true))
    };
    let list = |item: Value, rv: &str| {
        reply(
            200,
            json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": rv},
                   "items": [item]}),
        )
    };
    Ok(match path.as_str() {
        "/api/v1/namespaces/prod/configmaps" if watch && watches == 1 => {
            MANY_KEYS_NOW.notified().await;
            let mut body =
                serde_json::to_vec(&json!({"type": "MODIFIED", "object": many_keys("101")}))
                    .unwrap();
            body.push(b'\n');
            let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "too old resource version", "reason": "Expired", "code": 410}});
            body.extend(serde_json::to_vec(&gone).unwrap());
            body.push(b'\n');
            Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)).boxed())
                .unwrap()
        }
        "/api/v1/namespaces/prod/configmaps" if watch => {
            let stream = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
            Response::builder()
                .header("content-type", "application/json")
                .body(StreamBody::new(stream).boxed())
                .unwrap()
        }
        "/api/v1/namespaces/prod/configmaps" if lists == 1 => list(configmap(), "100"),
        "/api/v1/namespaces/prod/configmaps" => list(many_keys("102"), "102"),
        _ => reply(
            404,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "not found", "reason": "NotFound", "code": 404}),
        ),
    })
}

/// A ConfigMap within the API server's size limit but of 100,000 one-byte keys, in a watch event and
/// then in the list made after a `410 Gone`: confgate refuses it past 8192 keys while reading it, and
/// its peak memory stays within the shipped API-mode limit with room to spare.
#[test]
fn a_configmap_of_many_small_keys_fits_the_api_mode_memory_limit() {
    let seen: Seen = Arc::default();
    let api = stand_in(seen.clone(), many_keys_handler);
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(tmp.path(), api);
    let promoted = tmp.path().join("promoted");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"));
    cmd.args(["run", "--accepts", "^2.4", "--source", "configmap:prod/app"])
        .arg("--promote-to")
        .arg(&promoted)
        .arg("--watch")
        .arg(tmp.path().join("no-volume"))
        .arg("--annotations")
        .arg(tmp.path().join("no-annotations"))
        .args(["--pod-report", "off"])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST");
    let gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
    gate.wait_active("2.4.1");
    // The growth is measured from here: the watch answers only now.
    let before = common::status_kb(gate.pid(), "VmRSS");
    MANY_KEYS_NOW.notify_one();
    let second_watch = |seen: &Seen| {
        seen.lock()
            .unwrap()
            .iter()
            .any(|(w, _)| w.contains("watch=true") && w.contains("resourceVersion=102"))
            .then_some(())
    };
    // The second list was read whole once the watch after it is asked for.
    wait_for("the list after the 410", Duration::from_secs(60), || {
        second_watch(&seen)
    });
    let status = gate.wait_status("the 100,000 keys refused", |s| {
        s.to_string().contains("more than 8192 keys")
    });
    assert_eq!(common::active_version(&status), Some("2.4.1"), "{status}");
    assert_eq!(
        std::fs::read_to_string(promoted.join("version")).unwrap(),
        "2.4.1"
    );
    let peak = common::status_kb(gate.pid(), "VmHWM");
    let growth = peak.saturating_sub(before);
    eprintln!(
        "API mode: RSS {before} KiB before the 100,000 keys, peak {peak} KiB: grew {growth} KiB"
    );
    assert!(
        API_MODE_RELEASE_RSS_KIB + growth < API_MODE_LIMIT_KIB * 3 / 4,
        "peak RSS grew by {growth} KiB; with the release build's {API_MODE_RELEASE_RSS_KIB} KiB that is not well within the {API_MODE_LIMIT_KIB} KiB limit"
    );
}

/// A stand-in whose RBAC forbids the ConfigMap: every request answered 403 with the API server's
/// `Status`.
async fn forbidding(req: Request<Incoming>, seen: Seen) -> Result<Reply, Infallible> {
    let what = format!("{} {}", req.method(), req.uri());
    seen.lock().unwrap().push((what, Value::Null));
    Ok(reply(
        403,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "configmaps \"app\" is forbidden: User \"system:serviceaccount:prod:confgate\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"prod\"",
               "reason": "Forbidden", "details": {"name": "app", "kind": "configmaps"}, "code": 403}),
    ))
}

/// A ConfigMap outside the Role: the probe (what `kubectl describe pod` shows) says why no config is
/// read yet, naming the rule, not only "no config read yet"; and the retries' log lines carry that one
/// line, never kube's Debug form of the `Status`.
#[test]
fn a_forbidden_configmap_is_named_by_the_probe_with_the_rule() {
    let seen: Seen = Arc::default();
    let api = stand_in(seen.clone(), forbidding);
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(tmp.path(), api);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"));
    cmd.args(["run", "--accepts", "^2.4", "--source", "configmap:prod/app"])
        .arg("--promote-to")
        .arg(tmp.path().join("promoted"))
        .arg("--watch")
        .arg(tmp.path().join("no-volume"))
        .arg("--annotations")
        .arg(tmp.path().join("no-annotations"))
        .env("KUBECONFIG", &kubeconfig)
        .env("CONFGATE_POD_REPORT", "off")
        .env_remove("KUBERNETES_SERVICE_HOST");
    let gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
    let said = wait_for(
        "the probe to name the refusal",
        Duration::from_secs(20),
        || {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"))
                .args([
                    "probe",
                    "ready",
                    "--addr",
                    &format!("127.0.0.1:{}", gate.port),
                ])
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            said.contains("forbidden")
                .then_some((out.status.code(), said))
        },
    );
    assert_eq!(said.0, Some(1), "{}", said.1);
    assert!(
        said.1
            .contains("no config read yet: cannot read configmap prod/app")
            && said.1.contains("get, list and watch on configmaps"),
        "{}",
        said.1
    );
    wait_for("a retry", Duration::from_secs(20), || {
        (seen.lock().unwrap().len() >= 2).then_some(())
    });
    let log = gate.log_text();
    assert!(log.contains("watch failed; retrying"), "{log}");
    assert!(!log.contains("Status {"), "kube's Debug form: {log}");
}
