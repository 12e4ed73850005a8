//! HTTP endpoints: `/readyz`, `/livez`, `/startupz`, `/status`, `/metrics`. Reads the published status
//! only; never any config content.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::debug;

use crate::state::{Shared, Status};

/// How long `/livez` waits for the decision loop to answer; under the kubelet's default 1 s probe timeout.
pub const LIVENESS_DEADLINE: Duration = Duration::from_millis(500);

/// Serves until `shutdown` completes; connections in flight are dropped then.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    debug!(error = %e, "accept failed");
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(&req, &shared).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn text(code: StatusCode, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(hyper::header::CACHE_CONTROL, "no-store")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

async fn handle(req: &Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
    }
    let verbose = req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    match req.uri().path() {
        "/readyz" => {
            let s = shared.snapshot();
            readyz(&s, verbose)
        }
        "/livez" => {
            let stuck = shared.snapshot().source_stuck();
            if let Some(why) = stuck {
                text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"))
            } else if shared.loop_answers(LIVENESS_DEADLINE).await {
                text(StatusCode::OK, "ok\n".into())
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "the decision loop did not answer within {} ms\n",
                        LIVENESS_DEADLINE.as_millis()
                    ),
                )
            }
        }
        "/startupz" => {
            let s = shared.snapshot();
            if s.started {
                text(StatusCode::OK, "ok\n".into())
            } else {
                text(StatusCode::SERVICE_UNAVAILABLE, format!("{}\n", s.reason))
            }
        }
        "/status" => {
            let s = shared.snapshot();
            let source = s.source.as_ref().map(|v| v.to_json());
            let body = match source {
                None => serde_json::to_vec_pretty(&s),
                Some(src) => serde_json::to_value(&s).and_then(|mut v| {
                    v["source"] = src;
                    serde_json::to_vec_pretty(&v)
                }),
            }
            .unwrap_or_default();
            Response::builder()
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .header(hyper::header::CACHE_CONTROL, "no-store")
                .body(Full::new(Bytes::from(body)))
                .unwrap_or_default()
        }
        "/metrics" => {
            let s = shared.snapshot();
            Response::builder()
                .header(
                    hyper::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )
                .body(Full::new(Bytes::from(shared.metrics.render(&s))))
                .unwrap_or_default()
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; endpoints: /readyz /livez /startupz /status /metrics\n".into(),
        ),
    }
}

/// `ok`, or the one-line reason; with `verbose`, one line per check as the Kubernetes API server does.
pub fn readyz(s: &Status, verbose: bool) -> Response<Full<Bytes>> {
    let code = if s.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    if !verbose {
        let body = if s.ready {
            "ok".to_owned()
        } else {
            s.reason.clone()
        };
        return text(code, format!("{body}\n"));
    }
    let mut body = String::new();
    for c in &s.checks {
        if c.ok {
            body.push_str(&format!("[+]{} ok: {}\n", c.name, c.message));
        } else {
            body.push_str(&format!("[-]{} failed: {}\n", c.name, c.message));
        }
    }
    if s.mode == crate::settings::Mode::Observe {
        body.push_str("observe mode: checks are reported, not enforced\n");
    }
    body.push_str(if s.ready {
        "readyz check passed\n"
    } else {
        "readyz check failed\n"
    });
    text(code, body)
}
