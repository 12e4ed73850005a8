//! API mode against an in-process API server stand-in (`tower-test`): every request is checked for its
//! method, path and query, and answered with bodies shaped as the API server sends them (lists with
//! `metadata.resourceVersion`, newline-delimited watch events, `Status` objects for errors).
#![cfg(feature = "api")]

use crate::common;

use std::time::Duration;

use confgate::api::condition::FACTS_ANNOTATION;
use confgate::api::pod::{self, PodRef};
use confgate::api::source;
use confgate::api::status_cmd::{self, Query as StatusArgs};
use confgate::api::{CONDITION_TYPE, CURRENT_TYPE, Target};
use confgate::snapshot::{ContentHash, Observed, PrintedHash};
use confgate::state::{ActiveView, CandidateView, Notice, Shared, SourceClock, SourceView, Status};
use confgate::verdict::Verdict;
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::sync::watch;
use tower_test::mock::{Handle, SendResponse};

/// The in-process API server: scripted answers, and every request checked against a Role.
struct Mock {
    h: Handle<Request<Body>, Response<Body>>,
    role: &'static str,
}

/// The sidecar's Role, or the read-only one for `confgate status`.
const SIDECAR_ROLE: &str = "manifests/rbac/sidecar.yaml";
const STATUS_ROLE: &str = "manifests/rbac/status-reader.yaml";

fn mock(role: &'static str) -> (kube::Client, Mock) {
    let (svc, h) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(svc, "default"), Mock { h, role })
}

/// Whether the Role in `file` allows the request: verb from method and query, resource and name from
/// the path (or from the `metadata.name` field selector for list and watch, as RBAC reads it).
/// The manifests name the ConfigMap `webhook-config`; the tests call it `app`.
fn rbac_allows(file: &str, req: &Request<Body>) -> bool {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("webhook-config", "app");
    let query = req.uri().query().unwrap_or_default();
    let parts: Vec<&str> = req
        .uri()
        .path()
        .trim_start_matches('/')
        .split('/')
        .collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", "namespaces", _, rest @ ..] => ("", rest),
        ["apis", group, _, "namespaces", _, rest @ ..] => (*group, rest),
        _ => panic!("unexpected path {}", req.uri()),
    };
    let (resource, name) = match rest {
        [r] => (r.to_string(), None),
        [r, n] => (r.to_string(), Some(n.to_string())),
        [r, n, sub] => (format!("{r}/{sub}"), Some(n.to_string())),
        _ => panic!("unexpected path {}", req.uri()),
    };
    let verb = match (req.method().as_str(), name.is_some()) {
        ("GET", false) if query.contains("watch=true") => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PATCH", _) => "patch",
        (m, _) => panic!("unexpected method {m}"),
    };
    let name = name.or_else(|| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix("fieldSelector=metadata.name%3D"))
            .map(str::to_owned)
    });
    serde_saphyr::from_multiple::<serde_json::Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|doc| doc["kind"] == "Role")
        .flat_map(|doc| doc["rules"].as_array().cloned().unwrap_or_default())
        .any(|rule| {
            let has = |key: &str, v: &str| {
                rule[key]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|x| x.as_str() == Some(v)))
            };
            has("apiGroups", group)
                && has("resources", &resource)
                && has("verbs", verb)
                && (rule.get("resourceNames").is_none()
                    || name.as_deref().is_some_and(|n| has("resourceNames", n)))
        })
}

/// Waits for the next request, checks its method, path, that its query holds each `params`, and that
/// the Role allows it.
async fn expect(
    m: &mut Mock,
    method: Method,
    path: &str,
    params: &[&str],
) -> (Request<Body>, SendResponse<Response<Body>>) {
    let (req, send) = tokio::time::timeout(Duration::from_secs(120), m.h.next_request())
        .await
        .unwrap_or_else(|_| panic!("no {method} {path} request came"))
        .expect("the client is gone");
    assert_eq!(req.method(), method, "{}", req.uri());
    assert_eq!(req.uri().path(), path, "{}", req.uri());
    let query = req.uri().query().unwrap_or_default().to_owned();
    let pairs: Vec<&str> = query.split('&').collect();
    for p in params {
        assert!(pairs.contains(p), "{p} not in {query}");
    }
    assert!(
        rbac_allows(m.role, &req),
        "{} does not allow {} {}",
        m.role,
        req.method(),
        req.uri()
    );
    (req, send)
}

/// Waits for the next request and checks that it lists ConfigMap `prod/app` (no watch).
async fn expect_list(m: &mut Mock) -> SendResponse<Response<Body>> {
    let (req, send) = expect(m, Method::GET, CM_PATH, LIST_PARAMS).await;
    let query = req.uri().query().unwrap_or_default();
    assert!(
        !query.contains("watch=true"),
        "a watch, not a list: {query}"
    );
    send
}

fn respond(send: SendResponse<Response<Body>>, code: StatusCode, body: &Value) {
    send.send_response(
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

/// A watch response: one JSON event per line, then the server ends the watch (as its timeout does).
fn respond_events(send: SendResponse<Response<Body>>, events: &[Value]) {
    let mut body = Vec::new();
    for e in events {
        serde_json::to_writer(&mut body, e).unwrap();
        body.push(b'\n');
    }
    send.send_response(
        Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .header("transfer-encoding", "chunked")
            .body(Body::from(body))
            .unwrap(),
    );
}

async fn body_json(req: Request<Body>) -> Value {
    let bytes = req.into_body().collect_bytes().await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The next request must create an Event on the pod; returns its body and the responder.
async fn next_event(m: &mut Mock) -> (Value, SendResponse<Response<Body>>) {
    let (req, send) = expect(
        m,
        Method::POST,
        "/apis/events.k8s.io/v1/namespaces/prod/events",
        &[],
    )
    .await;
    (body_json(req).await, send)
}

/// The next request must patch the pod's conditions; returns `config-current` and the responder
/// (`config-compatible` follows readiness, checked where it matters).
async fn next_condition(m: &mut Mock) -> (Value, SendResponse<Response<Body>>) {
    let (req, send) = expect(
        m,
        Method::PATCH,
        "/api/v1/namespaces/prod/pods/web-0/status",
        &[],
    )
    .await;
    let body = body_json(req).await;
    let current = body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == CURRENT_TYPE)
        .cloned()
        .unwrap();
    (current, send)
}

/// A ConfigMap as a watch event carries it (with kind and apiVersion).
fn configmap(uid: &str, rv: &str, version: &str) -> Value {
    json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": "app",
            "namespace": "prod",
            "uid": uid,
            "resourceVersion": rv,
            "creationTimestamp": "2026-11-29T22:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "time": "2026-11-29T22:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:version": {}}}}]
        },
        "data": {"version": version, "app.yaml": "replicas: 3\n"},
        "binaryData": {"blob": "AAEC/w=="}
    })
}

/// A list as the API server sends it: items without kind/apiVersion, the list's resourceVersion.
fn list(rv: &str, items: &[Value]) -> Value {
    let items: Vec<Value> = items
        .iter()
        .map(|i| {
            let mut i = i.clone();
            let o = i.as_object_mut().unwrap();
            o.remove("kind");
            o.remove("apiVersion");
            i
        })
        .collect();
    json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": rv}, "items": items})
}

fn status_error(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

/// The API source for ConfigMap `prod/app`, spawned as `confgate run --source configmap:prod/app`
/// spawns it: its snapshots and its view.
fn spawn_source(
    client: kube::Client,
    shared: std::sync::Arc<Shared>,
) -> (
    watch::Receiver<Option<Observed>>,
    watch::Receiver<Option<SourceView>>,
) {
    let (snapshots, rx) = watch::channel(None);
    let (view, view_rx) = watch::channel(None);
    let target = Target {
        namespace: "prod".into(),
        name: "app".into(),
    };
    tokio::spawn(source::run(
        client,
        source::Kind::ConfigMap,
        target,
        source::Outputs { snapshots, view },
        shared,
        Duration::from_secs(60),
        std::future::pending(),
    ));
    (rx, view_rx)
}

/// Waits until the newest snapshot satisfies `f`.
async fn settled(
    rx: &mut watch::Receiver<Option<Observed>>,
    what: &str,
    f: impl Fn(&Observed) -> bool,
) {
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        rx.wait_for(|o| o.as_ref().is_some_and(&f)),
    )
    .await
    .is_ok();
    assert!(r, "never saw {what}; last: {:?}", *rx.borrow());
}

fn version_of(o: &Observed) -> Option<String> {
    match o {
        Observed::Config(s) => s
            .files()
            .get("version")
            .map(|v| String::from_utf8_lossy(v).into()),
        _ => None,
    }
}

const LIST_PARAMS: &[&str] = &["fieldSelector=metadata.name%3Dapp"];
const WATCH_PARAMS: &[&str] = &[
    "watch=true",
    "fieldSelector=metadata.name%3Dapp",
    "allowWatchBookmarks=true",
];
const CM_PATH: &str = "/api/v1/namespaces/prod/configmaps";

/// The whole life of a watched ConfigMap: list, modify, bookmark, 410 Gone and re-list, delete,
/// recreate under a new UID, and a 403 that names the missing RBAC rule.
#[tokio::test(start_paused = true)]
async fn configmap_watch_follows_the_object_through_its_life() {
    let (client, mut h) = mock(SIDECAR_ROLE);
    let shared = Shared::new();
    let (mut rx, view_rx) = spawn_source(client, shared.clone());

    // Initial list.
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, LIST_PARAMS).await;
    respond(
        send,
        StatusCode::OK,
        &list("100", &[configmap("uid-1", "100", "2.4.1")]),
    );
    settled(&mut rx, "the listed 2.4.1", |o| {
        version_of(o).as_deref() == Some("2.4.1")
    })
    .await;
    let Some(Observed::Config(snap)) = rx.borrow().clone() else {
        panic!()
    };
    assert_eq!(
        snap.files()["blob"],
        vec![0, 1, 2, 255],
        "binaryData is decoded"
    );
    assert_eq!(snap.files()["app.yaml"], b"replicas: 3\n");
    let view = view_rx.borrow().clone().unwrap();
    assert_eq!(
        (view.uid.as_deref(), view.resource_version.as_deref()),
        (Some("uid-1"), Some("100"))
    );

    // Watch from the list's resourceVersion: a MODIFIED, then a BOOKMARK moves the resourceVersion.
    let mut params = WATCH_PARAMS.to_vec();
    params.push("resourceVersion=100");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, &params).await;
    respond_events(
        send,
        &[
            json!({"type": "MODIFIED", "object": configmap("uid-1", "101", "2.5.0")}),
            json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"resourceVersion": "150", "creationTimestamp": null}}}),
        ],
    );
    settled(&mut rx, "the modified 2.5.0", |o| {
        version_of(o).as_deref() == Some("2.5.0")
    })
    .await;

    // The next watch starts at the bookmark; the server says it is too old: 410 Gone, list again.
    let mut params = WATCH_PARAMS.to_vec();
    params.push("resourceVersion=150");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, &params).await;
    respond_events(
        send,
        &[
            json!({"type": "ERROR", "object": status_error(410, "Expired",
            "too old resource version: 150 (180)")}),
        ],
    );
    let gone = tokio::time::Instant::now();
    let send = expect_list(&mut h).await;
    assert!(
        gone.elapsed() < Duration::from_millis(100),
        "a 410 re-lists at once, not after a backoff: {:?}",
        gone.elapsed()
    );
    assert_eq!(
        serde_json::to_value(view_rx.borrow().as_ref().unwrap().rendered()).unwrap()["watch"]["healthy"],
        false,
        "not healthy before the new list is in"
    );
    respond(
        send,
        StatusCode::OK,
        &list("200", &[configmap("uid-1", "101", "2.5.0")]),
    );

    // Deleted, then created again under a new UID.
    let mut params = WATCH_PARAMS.to_vec();
    params.push("resourceVersion=200");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, &params).await;
    let view = view_rx.borrow().clone().unwrap();
    assert!(
        view.failing_for().is_none(),
        "a 410 is not a failure: {view:?}"
    );
    assert!(!view.recreated);
    respond_events(
        send,
        &[json!({"type": "DELETED", "object": configmap("uid-1", "201", "2.5.0")})],
    );
    settled(
        &mut rx,
        "missing after DELETED",
        |o| matches!(o, Observed::Missing(m) if m.to_string() == "ConfigMap prod/app was deleted"),
    )
    .await;
    let mut params = WATCH_PARAMS.to_vec();
    params.push("resourceVersion=201");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, &params).await;
    respond_events(
        send,
        &[json!({"type": "ADDED", "object": configmap("uid-2", "202", "2.6.0")})],
    );
    settled(&mut rx, "the recreated 2.6.0", |o| {
        version_of(o).as_deref() == Some("2.6.0")
    })
    .await;
    let view = view_rx.borrow().clone().unwrap();
    assert!(view.recreated, "{view:?}");
    assert_eq!(view.uid.as_deref(), Some("uid-2"));
    assert_eq!(view.previous_uid.as_deref(), Some("uid-1"));
    let json = serde_json::to_value(view.rendered()).unwrap();
    assert_eq!(json["recreated"], true);
    assert_eq!(json["uid"], "uid-2");
    assert_eq!(json["resource_version"], "202");

    // RBAC taken away: the watch is refused with a Status 403.
    let mut params = WATCH_PARAMS.to_vec();
    params.push("resourceVersion=202");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, &params).await;
    respond(
        send,
        StatusCode::FORBIDDEN,
        &status_error(
            403,
            "Forbidden",
            "configmaps is forbidden: User \"system:serviceaccount:prod:confgate\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"prod\"",
        ),
    );
    let mut src = view_rx.clone();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        src.wait_for(|v| v.as_ref().is_some_and(|v| v.last_error.is_some())),
    )
    .await
    .is_ok();
    assert!(r, "the 403 was not reported");
    let view = view_rx.borrow().clone().unwrap();
    let err = view.last_error.clone().unwrap();
    assert!(
        err.contains("cannot watch resource \"configmaps\""),
        "{err}"
    );
    assert!(
        err.contains("get, list and watch on configmaps")
            && err.contains("resourceNames [\"app\"]"),
        "{err}"
    );
    assert!(view.failing_for().is_some());
    assert_eq!(
        serde_json::to_value(view.rendered()).unwrap()["watch"]["healthy"],
        false
    );
    assert!(view.stuck().is_none(), "not stuck yet: {view:?}");
    let metrics = shared.metrics.render(&Status::default());
    assert!(
        metrics.contains("confgate_watch_errors_total{source=\"api\"} 1\n")
            && metrics.contains("confgate_watch_errors_total{source=\"files\"} 0\n"),
        "a 410 is not counted, the 403 is: {metrics}"
    );

    // Still refused a minute later (every attempt a new list): /livez's reason.
    let start = tokio::time::Instant::now();
    while start.elapsed() < Duration::from_secs(70) {
        let send = expect_list(&mut h).await;
        respond(
            send,
            StatusCode::FORBIDDEN,
            &status_error(403, "Forbidden", "configmaps is forbidden"),
        );
        if view_rx.borrow().as_ref().and_then(|v| v.stuck()).is_some() {
            break;
        }
    }
    let stuck = view_rx.borrow().as_ref().and_then(|v| v.stuck());
    let stuck = stuck.expect("a watch failing for over a minute is stuck");
    assert!(
        stuck.starts_with("the configmap prod/app watch has been failing for"),
        "{stuck}"
    );
}

/// The API server goes away and comes back. While nothing answers, a new list is tried at least
/// every 5 s; the errors a server answers as it starts are retried from 0.8 s; the watch is not
/// healthy until a list made after the errors is in. A successful list resets the backoff.
#[tokio::test(start_paused = true)]
async fn the_watch_is_back_within_seconds_of_the_api_server() {
    let (client, mut h) = mock(SIDECAR_ROLE);
    let shared = Shared::new();
    let (mut rx, view_rx) = spawn_source(client, shared.clone());
    let healthy = || {
        serde_json::to_value(view_rx.borrow().as_ref().unwrap().rendered()).unwrap()["watch"]["healthy"]
            == true
    };
    let send = expect_list(&mut h).await;
    respond(
        send,
        StatusCode::OK,
        &list("100", &[configmap("uid-1", "100", "2.4.1")]),
    );
    settled(&mut rx, "the listed 2.4.1", |o| {
        version_of(o).as_deref() == Some("2.4.1")
    })
    .await;
    let mut params = WATCH_PARAMS.to_vec();
    params.push("resourceVersion=100");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, &params).await;
    assert!(healthy());
    // Gone: the connection is refused for a minute.
    send.send_error(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    let down = tokio::time::Instant::now();
    let mut last = down;
    let mut gaps = Vec::new();
    while down.elapsed() < Duration::from_secs(60) {
        let send = expect_list(&mut h).await;
        gaps.push(last.elapsed());
        last = tokio::time::Instant::now();
        assert!(!healthy(), "healthy while nothing answers");
        send.send_error(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    }
    assert!(
        gaps.iter().all(|g| *g <= Duration::from_secs(5)) && gaps.len() >= 12,
        "at most 5 s between attempts while nothing answers: {gaps:?}"
    );
    // Back, still starting: it answers 503 twice, then lists.
    let mut send = expect_list(&mut h).await;
    assert!(last.elapsed() <= Duration::from_secs(5));
    for limit in [800, 1600] {
        respond(
            send,
            StatusCode::SERVICE_UNAVAILABLE,
            &status_error(503, "ServiceUnavailable", "starting"),
        );
        last = tokio::time::Instant::now();
        send = expect_list(&mut h).await;
        let gap = last.elapsed();
        assert!(
            gap <= Duration::from_millis(limit) && gap >= Duration::from_millis(limit / 2),
            "an answered error waits {limit} ms or down to half of it: {gap:?}"
        );
        assert!(!healthy());
    }
    respond(
        send,
        StatusCode::OK,
        &list("300", &[configmap("uid-1", "250", "2.5.0")]),
    );
    settled(&mut rx, "the 2.5.0 listed after the return", |o| {
        version_of(o).as_deref() == Some("2.5.0")
    })
    .await;
    assert!(healthy(), "healthy from the fresh list");
    assert_eq!(
        view_rx
            .borrow()
            .as_ref()
            .unwrap()
            .resource_version
            .as_deref(),
        Some("250")
    );
    // The list reset the backoff: a later error waits 0.8 s again.
    let mut params = WATCH_PARAMS.to_vec();
    params.push("resourceVersion=300");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, &params).await;
    tokio::time::sleep(Duration::from_secs(40)).await;
    respond(
        send,
        StatusCode::INTERNAL_SERVER_ERROR,
        &status_error(500, "InternalError", "etcd"),
    );
    let failed = tokio::time::Instant::now();
    let _send = expect_list(&mut h).await;
    assert!(
        failed.elapsed() <= Duration::from_millis(800),
        "{:?}",
        failed.elapsed()
    );
    let metrics = shared.metrics.render(&Status::default());
    assert!(
        !metrics.contains("confgate_watch_errors_total{source=\"api\"} 0\n"),
        "{metrics}"
    );
}

/// A ConfigMap that is absent at the first list is missing; one over 1 MiB is broken with the reason.
#[tokio::test(start_paused = true)]
async fn absent_and_oversized_configmaps() {
    let (client, mut h) = mock(SIDECAR_ROLE);
    let (mut rx, _view_rx) = spawn_source(client, Shared::new());
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, LIST_PARAMS).await;
    respond(send, StatusCode::OK, &list("7", &[]));
    settled(
        &mut rx,
        "missing",
        |o| matches!(o, Observed::Missing(m) if m.to_string().contains("does not exist")),
    )
    .await;
    let mut big = configmap("uid-1", "8", "2.4.1");
    big["data"]["huge"] = json!("x".repeat(1024 * 1024));
    let (_, send) = expect(
        &mut h,
        Method::GET,
        CM_PATH,
        &["watch=true", "resourceVersion=7"],
    )
    .await;
    respond_events(send, &[json!({"type": "ADDED", "object": big})]);
    settled(&mut rx, "broken", |o| {
        matches!(o, Observed::Broken(m) if m.to_string().contains("over the ConfigMap size limit of 1048576 bytes"))
    })
    .await;
}

/// The API source for ConfigMap `prod/app` on a mocked API server, feeding the decision loop (settings
/// `base`, promoting into `<tmp>/promoted`), both spawned: what `confgate run --source configmap:…`
/// wires together. Returns the mock's handle, the temp dir and the shared status.
fn fed_gate(
    base: confgate::settings::Settings,
) -> (Mock, tempfile::TempDir, std::sync::Arc<Shared>) {
    use confgate::gate::{self, Feed};
    let (client, h) = mock(SIDECAR_ROLE);
    let tmp = tempfile::tempdir().unwrap();
    let promoted = tmp.path().join("promoted");
    let shared = Shared::new();
    let (rx, view_rx) = spawn_source(client, shared.clone());
    let cfg = gate::Config {
        watch: tmp.path().join("no-volume"),
        promote_to: Some(promoted.clone()),
        annotations: tmp.path().join("annotations"),
        resync: Duration::from_secs(30),
        bucket: None,
    };
    let reloads = confgate::reload::spawn(shared.clone());
    tokio::spawn(gate::run_fed(
        cfg,
        Feed::Channel {
            snapshots: rx,
            source: view_rx,
        },
        base,
        shared.clone(),
        reloads,
        std::future::pending(),
    ));
    (h, tmp, shared)
}

/// The API feed drives the same decision loop as the volume: a listed config is judged and promoted.
#[tokio::test]
async fn api_snapshots_are_judged_and_promoted_by_the_gate_loop() {
    use confgate::settings::{Raw, Settings};
    let base = Settings::from_raw(&Raw {
        accepts: Some("^2.4".into()),
        ..Raw::default()
    })
    .unwrap();
    let (mut h, tmp, shared) = fed_gate(base);
    let promoted = tmp.path().join("promoted");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, LIST_PARAMS).await;
    respond(
        send,
        StatusCode::OK,
        &list("100", &[configmap("uid-1", "100", "2.4.1")]),
    );
    let mut st = shared.subscribe();
    let s = tokio::time::timeout(Duration::from_secs(10), st.wait_for(|s| s.started))
        .await
        .expect("the listed config was not accepted")
        .unwrap()
        .clone();
    assert_eq!(s.active.unwrap().version.as_deref(), Some("2.4.1"));
    assert_eq!(
        std::fs::read_to_string(promoted.join("version")).unwrap(),
        "2.4.1"
    );
    assert_eq!(
        std::fs::read(promoted.join("blob")).unwrap(),
        vec![0, 1, 2, 255]
    );

    // A too-new version arrives by watch: held, reported as the candidate.
    let (_, send) = expect(
        &mut h,
        Method::GET,
        CM_PATH,
        &["watch=true", "resourceVersion=100"],
    )
    .await;
    respond_events(
        send,
        &[json!({"type": "MODIFIED", "object": configmap("uid-1", "101", "3.0.0")})],
    );
    let s = tokio::time::timeout(Duration::from_secs(10), st.wait_for(|s| s.stale))
        .await
        .expect("the too-new config was not held")
        .unwrap()
        .clone();
    assert_eq!(s.candidate.unwrap().verdict, Verdict::TooNew);
    assert_eq!(
        std::fs::read_to_string(promoted.join("version")).unwrap(),
        "2.4.1"
    );
}

/// Variants in API mode: one ConfigMap with config.v2.yaml and config.v3.yaml and a sidecar accepting
/// ^2. The loop chooses v2 and promotes it as config.yaml; `/status` and the pod condition patch name
/// the variant, and the active hash is the promoted set's, the one `confgate check` prints.
#[tokio::test]
async fn api_mode_chooses_the_variant_and_reports_it() {
    use confgate::settings::{Raw, Settings};
    const V2: &str = "version: 2.5.0\nlisten: 8080\n";
    const V3: &str = "version: 3.1.0\nserver: {listen: 8080}\n";
    const FROM: &str = "yaml:config.yaml#/version";
    const VARIANTS: &str = "config.v*.yaml -> config.yaml";
    let cm = json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "app", "namespace": "prod", "uid": "uid-1", "resourceVersion": "100",
                     "creationTimestamp": "2026-11-29T22:00:00Z"},
        "data": {"config.v2.yaml": V2, "config.v3.yaml": V3, "shared.txt": "both\n"}
    });
    let base = Settings::from_raw(&Raw {
        accepts: Some("^2".into()),
        version_from: Some(FROM.into()),
        variants: Some(VARIANTS.into()),
        ..Raw::default()
    })
    .unwrap();
    let (mut h, tmp, shared) = fed_gate(base);
    let promoted = tmp.path().join("promoted");
    let (_, send) = expect(&mut h, Method::GET, CM_PATH, LIST_PARAMS).await;
    respond(
        send,
        StatusCode::OK,
        &list("100", std::slice::from_ref(&cm)),
    );
    let mut st = shared.subscribe();
    let status = tokio::time::timeout(Duration::from_secs(10), st.wait_for(|s| s.started))
        .await
        .expect("no variant was accepted")
        .unwrap()
        .clone();

    // What /status serves.
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["active"]["variant"], "config.v2.yaml", "{json}");
    assert_eq!(json["active"]["version"], "2.5.0", "{json}");
    let sha = json["active"]["sha256"].as_str().unwrap().to_owned();
    let mut names: Vec<String> = std::fs::read_dir(&promoted)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".."))
        .collect();
    names.sort();
    assert_eq!(names, ["config.yaml", "shared.txt"]);
    assert_eq!(
        std::fs::read_to_string(promoted.join("config.yaml")).unwrap(),
        V2
    );

    // The hash `confgate check` prints for the same ConfigMap under the same settings.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"))
        .args(["check", "--accepts", "^2", "--version-from", FROM])
        .args(["--variants", VARIANTS, "-"])
        .env_remove("CONFGATE_ACCEPTS")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), cm.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{line}");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..3], ["accepted", "2.5.0", sha.as_str()], "{line}");
    assert!(line.contains("variant config.v2.yaml"), "{line}");

    // The pod condition patch names the variant.
    let (client, mut h) = mock(SIDECAR_ROLE);
    let pod = PodRef {
        namespace: "prod".into(),
        name: "web-0".into(),
        uid: None,
    };
    let server = async {
        let (_, send) = expect(
            &mut h,
            Method::GET,
            "/api/v1/namespaces/prod/pods/web-0",
            &[],
        )
        .await;
        let p = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": pod_json("web-0", true, None)["metadata"].clone()});
        respond(send, StatusCode::OK, &p);
        h
    };
    let (mut r, mut h) = tokio::join!(pod::reporter(client, pod), server);
    let reporting = r.report(&[], &status);
    let server = async {
        let (cond, send) = next_condition(&mut h).await;
        assert_eq!(cond["status"], "True");
        assert_eq!(
            cond["message"],
            format!("version 2.5.0 {sha} from config.v2.yaml")
        );
        let mut p = pod_json("web-0", true, None);
        p["kind"] = json!("Pod");
        p["apiVersion"] = json!("v1");
        respond(send, StatusCode::OK, &p);
    };
    let (ok, ()) = tokio::join!(reporting, server);
    assert!(ok);
}

// === Events and the pod condition ===

fn hash(s: &str) -> PrintedHash {
    ContentHash::of([("version", s.as_bytes())]).printed()
}

fn accepted(version: &str) -> Status {
    Status {
        ready: true,
        reason: "ok".into(),
        active: Some(ActiveView {
            version: Some(version.into()),
            sha256: hash(version),
            since: "2026-11-29T22:00:00Z".parse().unwrap(),
            verdict: Verdict::Accepted,
            variant: None,
        }),
        ..Status::default()
    }
}

fn holding(active: &str, newest: &str) -> Status {
    let mut s = accepted(active);
    s.stale = true;
    s.candidate = Some(CandidateView {
        version: Some(newest.into()),
        sha256: Some(hash(newest)),
        verdict: Verdict::TooNew,
        reason: format!("{newest} is above every upper bound of ^2.4"),
        variant: None,
    });
    s
}

fn pod_json(name: &str, ready: bool, cond: Option<(&str, &str, String)>) -> Value {
    let mut conditions = vec![
        json!({"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T22:00:00Z"}),
        json!({"type": "Ready", "status": if ready { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": "2026-11-29T22:00:00Z"}),
    ];
    if let Some((status, reason, message)) = cond {
        conditions.push(json!({"type": CONDITION_TYPE, "status": status, "reason": reason,
            "message": message, "lastProbeTime": null, "lastTransitionTime": "2026-11-29T22:00:00Z"}));
    }
    json!({
        "metadata": {"name": name, "namespace": "prod", "uid": format!("uid-{name}"),
                     "resourceVersion": "300", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "web:1"}]},
        "status": {"phase": "Running", "conditions": conditions}
    })
}

/// Events go to events.k8s.io/v1 about this pod (repeats fold into a series); the condition is patched
/// on pods/status with a strategic merge patch, and only when it changes.
#[tokio::test]
async fn events_and_condition_requests_are_exactly_as_expected() {
    let (client, mut h) = mock(SIDECAR_ROLE);
    let pod = PodRef {
        namespace: "prod".into(),
        name: "web-0".into(),
        uid: None,
    };
    let server = async {
        // Only the UID is needed: a metadata-only get, answered as the API server answers one.
        let (req, send) = expect(
            &mut h,
            Method::GET,
            "/api/v1/namespaces/prod/pods/web-0",
            &[],
        )
        .await;
        assert_eq!(
            req.headers()["accept"],
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
        );
        let p = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": pod_json("web-0", true, None)["metadata"].clone()});
        respond(send, StatusCode::OK, &p);
        h
    };
    let (mut r, mut h) = tokio::join!(pod::reporter(client, pod), server);

    // First accepted config: no Event (a routine promotion makes none), the condition True.
    let first = accepted("2.4.1");
    let reporting = r.report(&[], &first);
    let server = async {
        let (req, send) = expect(
            &mut h,
            Method::PATCH,
            "/api/v1/namespaces/prod/pods/web-0/status",
            &[],
        )
        .await;
        assert_eq!(
            req.headers()["content-type"],
            "application/strategic-merge-patch+json"
        );
        let mut patch = body_json(req).await;
        for i in 0..2 {
            let t = patch["status"]["conditions"][i]
                .as_object_mut()
                .unwrap()
                .remove("lastTransitionTime")
                .unwrap();
            assert!(
                t.as_str().unwrap().parse::<jiff::Timestamp>().is_ok(),
                "{t}"
            );
            assert!(
                !t.as_str().unwrap().contains('.'),
                "whole seconds, as the API stores them: {t}"
            );
        }
        let message = format!("version 2.4.1 {}", hash("2.4.1"));
        let facts = format!(
            r#"{{"active":{{"version":"2.4.1","sha256":"{}"}}}}"#,
            hash("2.4.1")
        );
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {FACTS_ANNOTATION: facts}},
                "status": {"conditions": [
                {"type": "confgate.io/config-compatible", "status": "True",
                 "reason": "Accepted", "message": message},
                {"type": "confgate.io/config-current", "status": "True",
                 "reason": "Accepted", "message": message}]}})
        );
        let mut p = pod_json(
            "web-0",
            true,
            Some((
                "True",
                "Accepted",
                format!("version 2.4.1 {}", hash("2.4.1")),
            )),
        );
        p["kind"] = json!("Pod");
        p["apiVersion"] = json!("v1");
        respond(send, StatusCode::OK, &p);
    };
    let (ok, ()) = tokio::join!(reporting, server);
    assert!(ok);

    // Nothing changed: no request at all (a request here would wait for an answer forever).
    let same =
        tokio::time::timeout(Duration::from_secs(2), r.report(&[], &accepted("2.4.1"))).await;
    assert_eq!(
        same.ok(),
        Some(true),
        "an unchanged status must not call the API"
    );

    // A too-new config is held: a Warning Rejected event, the condition False/TooNew.
    let held = holding("2.4.1", "3.0.0");
    let told = [held_notice(&held)];
    let reporting = r.report(&told, &held);
    let server = async {
        let (ev, send) = next_event(&mut h).await;
        assert_eq!(
            (ev["type"].as_str(), ev["reason"].as_str()),
            (Some("Warning"), Some("Rejected"))
        );
        assert_eq!(ev["action"], "Hold");
        assert_eq!(ev["reportingController"], "confgate");
        assert_eq!(ev["reportingInstance"], "web-0");
        assert_eq!(
            ev["regarding"],
            json!({"apiVersion": "v1", "kind": "Pod", "name": "web-0", "namespace": "prod", "uid": "uid-web-0"})
        );
        assert!(
            ev["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("web-0.")
        );
        assert!(ev["eventTime"].as_str().unwrap().ends_with('Z'));
        assert_eq!(
            ev["note"],
            format!(
                "holding version 2.4.1 {}; version 3.0.0 {} is too-new: 3.0.0 is above every upper bound of ^2.4",
                hash("2.4.1"),
                hash("3.0.0")
            )
        );
        respond(send, StatusCode::CREATED, &ev);
        let name = ev["metadata"]["name"].as_str().unwrap().to_owned();
        let (c, send) = next_condition(&mut h).await;
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("TooNew"))
        );
        assert_eq!(
            c["message"],
            format!(
                "version 2.4.1 {}; newest version 3.0.0 {} is too-new: 3.0.0 is above every upper bound of ^2.4",
                hash("2.4.1"),
                hash("3.0.0")
            )
        );
        respond(send, StatusCode::OK, &pod_json("web-0", true, None));
        name
    };
    let (ok, rejected_name) = tokio::join!(reporting, server);
    assert!(ok);

    // The config goes away (Missing), then the same too-new config returns: the identical Rejected
    // note is folded into a series, a merge patch of the Event created for it.
    let mut gone = accepted("2.4.1");
    gone.stale = true;
    gone.candidate = Some(CandidateView {
        version: None,
        sha256: None,
        verdict: Verdict::Missing,
        reason: "ConfigMap prod/app was deleted".into(),
        variant: None,
    });
    let reporting = async {
        let a = r.report(&[held_notice(&gone)], &gone).await;
        let b = r
            .report(
                &[held_notice(&holding("2.4.1", "3.0.0"))],
                &holding("2.4.1", "3.0.0"),
            )
            .await;
        a && b
    };
    let server = async {
        let (ev, send) = next_event(&mut h).await;
        assert_eq!(
            (ev["type"].as_str(), ev["reason"].as_str()),
            (Some("Warning"), Some("Missing"))
        );
        assert_eq!(
            ev["note"],
            format!(
                "holding version 2.4.1 {}; the newest config is missing: ConfigMap prod/app was deleted",
                hash("2.4.1")
            )
        );
        respond(send, StatusCode::CREATED, &ev);
        let (c, send) = next_condition(&mut h).await;
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("Missing"))
        );
        respond(send, StatusCode::OK, &pod_json("web-0", true, None));

        let path = format!("/apis/events.k8s.io/v1/namespaces/prod/events/{rejected_name}");
        let (req, send) = expect(&mut h, Method::PATCH, &path, &[]).await;
        assert_eq!(
            req.headers()["content-type"],
            "application/merge-patch+json"
        );
        let ev = body_json(req).await;
        assert_eq!(ev["series"]["count"], 2);
        assert!(ev["series"]["lastObservedTime"].as_str().is_some());
        respond(send, StatusCode::OK, &ev);
        let (c, send) = next_condition(&mut h).await;
        assert_eq!(c["reason"], "TooNew");
        respond(send, StatusCode::OK, &pod_json("web-0", true, None));
    };
    let (ok, ()) = tokio::join!(reporting, server);
    assert!(ok);
}

/// The gate's notice that `s`'s newest config is held.
fn held_notice(s: &Status) -> Notice {
    Notice::Held {
        candidate: s.candidate.clone().unwrap(),
        active: s.active.clone(),
        applied: s.applied.clone(),
    }
}

/// A config held for less than the reporter takes to see a status: the statuses before and after
/// show a healthy config, so comparing them would say nothing; the gate's notice of the hold is
/// published all the same, then the end of the hold, then the conditions of the status in force.
#[tokio::test]
async fn a_hold_shorter_than_a_status_still_makes_its_event() {
    let (client, mut h) = mock(SIDECAR_ROLE);
    let pod = PodRef {
        namespace: "prod".into(),
        name: "web-0".into(),
        uid: Some("uid-web-0".into()),
    };
    let shared = Shared::new();
    let publisher = shared.publisher().unwrap();
    let (rx, notices) = (shared.subscribe(), shared.notices());
    publisher.publish(accepted("2.4.1"));
    let held = holding("2.4.1", "3.0.0");
    publisher.notice(held_notice(&held));
    publisher.notice(Notice::Active(accepted("2.4.2").active.unwrap()));
    publisher.publish(accepted("2.4.2"));
    let reporter = tokio::spawn(pod::run(client, pod, rx, notices, std::future::pending()));
    let (ev, send) = next_event(&mut h).await;
    assert_eq!(
        (ev["type"].as_str(), ev["reason"].as_str()),
        (Some("Warning"), Some("Rejected"))
    );
    assert!(
        ev["note"].as_str().unwrap().contains("version 3.0.0"),
        "{ev}"
    );
    respond(send, StatusCode::CREATED, &ev);
    let (ev, send) = next_event(&mut h).await;
    assert_eq!(
        (ev["type"].as_str(), ev["reason"].as_str()),
        (Some("Normal"), Some("Accepted"))
    );
    assert_eq!(
        ev["note"],
        format!("version 2.4.2 {} is active", hash("2.4.2"))
    );
    respond(send, StatusCode::CREATED, &ev);
    let (c, send) = next_condition(&mut h).await;
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("Accepted"))
    );
    respond(send, StatusCode::OK, &pod_json("web-0", true, None));
    reporter.abort();
}

/// `confgate status` reads the fleet from a real-shaped pod list and compares with the ConfigMap.
#[tokio::test]
async fn status_command_renders_the_fleet_from_conditions() {
    let (client, mut h) = mock(STATUS_ROLE);
    let args = StatusArgs {
        namespace: Some("prod".into()),
        selector: Some("app=web".into()),
        configmap: Some("app".into()),
    };
    let on = |v: &str| Some(("True", "Accepted", format!("version {v} {}", hash(v))));
    let held = Some((
        "False",
        "TooNew",
        format!(
            "version 2.3.0 {}; newest version 2.4.1 {} is too-new: 2.4.1 is above every upper bound of ~2.3",
            hash("2.3.0"),
            hash("2.4.1")
        ),
    ));
    // The facts come from the annotation; the message is prose for people, not read.
    let with_facts = |mut pod: Value, facts: Value| {
        pod["metadata"]["annotations"] = json!({FACTS_ANNOTATION: facts.to_string()});
        pod
    };
    let on_facts = json!({"active": {"version": "2.4.1", "sha256": hash("2.4.1")}});
    let held_facts = json!({"active": {"version": "2.3.0", "sha256": hash("2.3.0")},
        "newest": {"version": "2.4.1", "sha256": hash("2.4.1"), "verdict": "too-new",
                   "reason": "2.4.1 is above every upper bound of ~2.3"}});
    let pods = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "400"}, "items": [
        with_facts(pod_json("web-0", true, on("2.4.1")), on_facts.clone()),
        with_facts(pod_json("web-1", true, on("2.4.1")), on_facts.clone()),
        with_facts(pod_json("web-2", true, held.clone()), held_facts.clone()),
        with_facts(pod_json("web-3", true, on("2.4.1")), on_facts),
        with_facts(pod_json("web-4", true, held), held_facts),
    ]});
    let server = async {
        let (_, send) = expect(
            &mut h,
            Method::GET,
            "/api/v1/namespaces/prod/pods",
            &["labelSelector=app%3Dweb"],
        )
        .await;
        respond(send, StatusCode::OK, &pods);
        let (_, send) = expect(
            &mut h,
            Method::GET,
            "/api/v1/namespaces/prod/configmaps/app",
            &[],
        )
        .await;
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "app", "namespace": "prod", "uid": "uid-1", "resourceVersion": "99",
                         "creationTimestamp": "2026-11-29T22:00:00Z"},
            "data": {"version": "2.4.1"}});
        respond(send, StatusCode::OK, &cm);
    };
    let (fleet, ()) = tokio::join!(status_cmd::fleet(client, &args), server);
    let fleet = fleet.unwrap();
    let short = |v: &str| hash(v).to_string()[7..19].to_owned();
    assert_eq!(
        fleet.render(),
        format!(
            "POD    READY  CONDITION      CURRENT  VERSION  SHA256        APPLIED\n\
             web-0  true   True/Accepted  -        2.4.1    {a}  -\n\
             web-1  true   True/Accepted  -        2.4.1    {a}  -\n\
             web-2  true   False/TooNew   -        2.3.0    {b}  -\n\
             web-3  true   True/Accepted  -        2.4.1    {a}  -\n\
             web-4  true   False/TooNew   -        2.3.0    {b}  -\n\
             configmap prod/app: {a}\n\
             3/5 on 2.4.1, 2 holding 2.3.0; 2.4.1 is too-new\n",
            a = short("2.4.1"),
            b = short("2.3.0")
        )
    );
    assert!(!fleet.all_match());
}

/// A pod on an accepted config that is not the ConfigMap's current content does not match.
#[test]
fn status_summary_for_pods_behind_and_not_reporting() {
    let row = |pod: &str, cond: Option<bool>, v: Option<&str>| status_cmd::Row {
        pod: pod.into(),
        ready: cond == Some(true),
        condition: cond.map(|c| (c, "Accepted".to_owned())),
        current: cond.map(|c| (c, "Accepted".to_owned())),
        held: None,
        held_sha256: None,
        waiting: None,
        version: v.map(str::to_owned),
        sha256: v.map(|v| hash(v).to_string()),
        applied: None,
        rollout: None,
    };
    let fleet = status_cmd::Fleet {
        namespace: "prod".into(),
        rows: vec![
            row("a", Some(true), Some("2.4.1")),
            row("b", Some(true), Some("2.4.0")),
            row("c", None, None),
        ],
        configmap: Some((
            "app".into(),
            Some(ContentHash::of([("version", b"2.4.1".as_slice())])),
        )),
        tracks: None,
    };
    assert_eq!(
        fleet.summary(),
        "1/3 on 2.4.1, 1 not reporting, 1 running 2.4.0: not yet the ConfigMap's content"
    );
    assert!(!fleet.all_match());
    let all = status_cmd::Fleet {
        rows: fleet.rows[..1].to_vec(),
        ..fleet
    };
    assert!(all.all_match());
}

/// A watch failing for longer than its limit makes `/livez` fail with the reason, and `/status`
/// carries the source (real HTTP on loopback).
#[tokio::test]
async fn stuck_watch_fails_livez_and_shows_in_status() {
    let shared = Shared::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(confgate::server::serve(
        listener,
        shared.clone(),
        std::future::pending(),
    ));
    // The tests' one blocking client, off the runtime that serves.
    let get = |path: &'static str| async move {
        tokio::task::spawn_blocking(move || common::get(port, path).expect(path))
            .await
            .unwrap()
    };
    let now = tokio::time::Instant::now().into_std();
    let mut view = source::Tracker::new(
        Target {
            namespace: "prod".into(),
            name: "app".into(),
        },
        Duration::from_secs(60),
    )
    .view()
    .clone();
    view.uid = Some("uid-2".into());
    view.recreated = true;
    view.last_error = Some("list: forbidden".into());
    view.failing_since = Some((now, jiff::Timestamp::now()));
    view.last_error_at = Some(now);
    let publisher = shared.publisher().unwrap();
    publisher.publish(Status {
        source: Some(view.clone()),
        ..Status::default()
    });
    // Failing, but not for long: alive (the loop answers the ping as the gate loop would).
    let pong = shared.clone();
    tokio::spawn(async move {
        loop {
            pong.pinged().await;
            pong.pong();
        }
    });
    let (code, live) = get("/livez").await;
    assert_eq!(code, 200, "{live}");
    let (code, status) = get("/status").await;
    assert_eq!(code, 200, "{status}");
    let body: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(body["source"]["kind"], "configmap");
    assert_eq!(body["source"]["recreated"], true);
    assert_eq!(body["source"]["watch"]["healthy"], false);
    assert_eq!(body["source"]["watch"]["last_error"], "list: forbidden");

    let Some(long_ago) = now.checked_sub(Duration::from_secs(61)) else {
        panic!("the monotonic clock is younger than a minute")
    };
    view.failing_since = Some((long_ago, jiff::Timestamp::now()));
    publisher.publish(Status {
        source: Some(view),
        ..Status::default()
    });
    let (code, live) = get("/livez").await;
    assert_eq!(code, 503, "{live}");
    assert!(
        live.contains("the configmap prod/app watch has been failing for 61 s: list: forbidden"),
        "{live}"
    );
}

/// `--source configmap:...` without `--promote-to` is a usage error (exit 64) naming the setting.
#[test]
fn configmap_source_without_promote_to_exits_64() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_confgate"))
        .args([
            "run",
            "--accepts",
            "^2",
            "--listen",
            "127.0.0.1:0",
            "--source",
            "configmap:prod/app",
        ])
        .arg("--annotations")
        .arg(tmp.path().join("none"))
        .env_remove("CONFGATE_PROMOTE_TO")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid --source (CONFGATE_SOURCE) \"configmap:prod/app\": a ConfigMap source needs --promote-to"),
        "{err}"
    );
}

/// The Roles allow what confgate asks for and no more: no list of pods for the sidecar, no other
/// ConfigMap, no writes for the status reader.
#[test]
fn roles_are_narrow() {
    let req = |method: &str, uri: &str| {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap()
    };
    let cm = "/api/v1/namespaces/prod/configmaps";
    assert!(rbac_allows(
        SIDECAR_ROLE,
        &req(
            "GET",
            &format!("{cm}?fieldSelector=metadata.name%3Dapp&watch=true")
        )
    ));
    assert!(!rbac_allows(
        SIDECAR_ROLE,
        &req("GET", &format!("{cm}?watch=true"))
    ));
    assert!(!rbac_allows(
        SIDECAR_ROLE,
        &req("GET", &format!("{cm}/other"))
    ));
    assert!(!rbac_allows(
        SIDECAR_ROLE,
        &req("PATCH", &format!("{cm}/app"))
    ));
    assert!(!rbac_allows(
        SIDECAR_ROLE,
        &req("GET", "/api/v1/namespaces/prod/pods")
    ));
    assert!(!rbac_allows(
        SIDECAR_ROLE,
        &req("PATCH", "/api/v1/namespaces/prod/pods/web-0")
    ));
    assert!(!rbac_allows(
        STATUS_ROLE,
        &req("PATCH", "/api/v1/namespaces/prod/pods/web-0/status")
    ));
    assert!(!rbac_allows(
        STATUS_ROLE,
        &req("GET", &format!("{cm}/other"))
    ));
}

/// A condition patch the API server refuses is tried again after 30 s, then twice as long each
/// time up to 300 s; no Event repeats meanwhile. On paused time: the gaps are the reporter's waits.
#[tokio::test(start_paused = true)]
async fn a_refused_condition_patch_is_retried_twice_as_late_each_time() {
    let (client, mut h) = mock(SIDECAR_ROLE);
    let pod = PodRef {
        namespace: "prod".into(),
        name: "web-0".into(),
        uid: None,
    };
    let (_tx, rx) = watch::channel(accepted("2.4.1"));
    let (_notices, notices) = tokio::sync::broadcast::channel(1);
    let reporter = tokio::spawn(pod::run(client, pod, rx, notices, std::future::pending()));
    let (_, send) = expect(
        &mut h,
        Method::GET,
        "/api/v1/namespaces/prod/pods/web-0",
        &[],
    )
    .await;
    let p = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": pod_json("web-0", true, None)["metadata"].clone()});
    respond(send, StatusCode::OK, &p);
    let refused = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "etcdserver: request timed out", "reason": "InternalError", "code": 500});
    let (mut at, mut events) = (Vec::new(), 0);
    while at.len() < 6 {
        // Not `expect`, whose own deadline (120 s) is shorter than the later waits.
        let (req, send) = h.h.next_request().await.expect("the reporter is gone");
        match (req.method(), req.uri().path()) {
            (&Method::POST, "/apis/events.k8s.io/v1/namespaces/prod/events") => {
                events += 1;
                let ev = body_json(req).await;
                respond(send, StatusCode::CREATED, &ev);
            }
            (&Method::PATCH, "/api/v1/namespaces/prod/pods/web-0/status") => {
                at.push(tokio::time::Instant::now());
                respond(send, StatusCode::INTERNAL_SERVER_ERROR, &refused);
            }
            (m, p) => panic!("{m} {p}"),
        }
    }
    assert!(
        events <= 1,
        "the Event is not repeated with the patch: {events}"
    );
    let gaps: Vec<u64> = at.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect();
    assert_eq!(gaps, [30, 60, 120, 240, 300]);
    reporter.abort();
}

/// A routine patch (a healthy change: only the facts move) waits for the pod's offset into the
/// report spread, and the statuses that come meanwhile are coalesced into it; a patch that changes
/// a condition's status or reason goes at once. On paused time: the gaps are the reporter's waits.
#[tokio::test(start_paused = true)]
async fn routine_patches_wait_for_the_pods_offset_into_the_spread_and_coalesce() {
    let (client, mut h) = mock(SIDECAR_ROLE);
    let pod = PodRef {
        namespace: "prod".into(),
        name: "web-0".into(),
        uid: Some("uid-web-0".into()),
    };
    let offset = pod::report_offset(&pod);
    assert!(
        offset > Duration::from_millis(100) && offset < pod::REPORT_SPREAD,
        "a pod whose offset shows the wait: {offset:?}"
    );
    let (tx, rx) = watch::channel(accepted("2.4.1"));
    let (_notices, notices) = tokio::sync::broadcast::channel(1);
    let reporter = tokio::spawn(pod::run(client, pod, rx, notices, std::future::pending()));
    let facts_of = |p: &Value| p["metadata"]["annotations"][FACTS_ANNOTATION].clone();

    // The first patch is not routine: at once.
    let t0 = tokio::time::Instant::now();
    let (req, send) = expect(
        &mut h,
        Method::PATCH,
        "/api/v1/namespaces/prod/pods/web-0/status",
        &[],
    )
    .await;
    assert_eq!(tokio::time::Instant::now(), t0, "the first patch waited");
    let _ = body_json(req).await;
    respond(send, StatusCode::OK, &pod_json("web-0", true, None));

    // Two healthy changes in a row: one patch, with the second's facts, at the pod's offset after
    // the first.
    tx.send(accepted("2.4.2")).unwrap();
    let t1 = tokio::time::Instant::now();
    tokio::time::sleep(offset / 2).await;
    tx.send(accepted("2.4.3")).unwrap();
    let (req, send) = expect(
        &mut h,
        Method::PATCH,
        "/api/v1/namespaces/prod/pods/web-0/status",
        &[],
    )
    .await;
    // The timer wheel's millisecond rounds the wait up.
    let waited = tokio::time::Instant::now() - t1;
    assert!(
        waited >= offset && waited <= offset + Duration::from_millis(1),
        "{waited:?} against the offset {offset:?}"
    );
    let patch = body_json(req).await;
    assert!(
        facts_of(&patch).as_str().unwrap().contains("2.4.3"),
        "{patch}"
    );
    respond(send, StatusCode::OK, &pod_json("web-0", true, None));

    // A hold changes `config-current`'s status and reason: at once. (Its Event comes from the
    // gate's notice, not from the status: `notices` stays silent here.)
    tx.send(holding("2.4.3", "3.0.0")).unwrap();
    let t2 = tokio::time::Instant::now();
    let (c, send) = next_condition(&mut h).await;
    assert_eq!(c["reason"], "TooNew");
    assert_eq!(tokio::time::Instant::now(), t2, "the hold's patch waited");
    respond(send, StatusCode::OK, &pod_json("web-0", true, None));
    reporter.abort();
}
