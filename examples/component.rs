//! An example component for the manifests: it reads its config only from the directory confgate promotes
//! into, and reloads it on SIGHUP or on `POST /reload`.
//!
//! ```text
//! component CONFIG_DIR [LISTEN_ADDR]      (LISTEN_ADDR defaults to 127.0.0.1:8080)
//!
//! GET  /config-version   the schemaVersion of the config in use
//! POST /reload           re-read CONFIG_DIR/config.yaml; 200 with the version, or 500 keeping the old one
//! GET  /metrics          component_config_last_reload_successful (1 or 0) and
//!                        component_config_last_reload_success_timestamp_seconds, in whole seconds as
//!                        VictoriaMetrics reports it: what confgate's `--confirm` reads
//! ```
//!
//! `config.yaml` is read through the directory's `config.yaml -> ..data/config.yaml` link, so each read
//! sees one whole promoted version. A config that cannot be read is refused and the one in use stays,
//! which is what a component does when nothing gates its config; confgate makes that path unused.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

const CONFIG_FILE: &str = "config.yaml";

/// The config in use and where to read the next one.
struct Component {
    dir: PathBuf,
    version: Mutex<String>,
    /// Whether the last load succeeded, and the Unix second of the last one that did.
    last: Mutex<(bool, u64)>,
}

impl Component {
    /// Reads the config; on success it replaces the one in use.
    fn reload(&self, why: &str) -> Result<String, String> {
        let loaded = load(&self.dir);
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let version = match loaded {
            Ok(v) => v,
            Err(e) => {
                last.0 = false;
                return Err(e);
            }
        };
        let mut current = self.version.lock().unwrap_or_else(|e| e.into_inner());
        println!("loaded config version {version} ({why})");
        current.clone_from(&version);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        *last = (true, now);
        Ok(version)
    }

    fn metrics(&self) -> String {
        let (ok, at) = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        format!(
            "# TYPE component_config_last_reload_successful gauge\n\
             component_config_last_reload_successful {}\n\
             # TYPE component_config_last_reload_success_timestamp_seconds gauge\n\
             component_config_last_reload_success_timestamp_seconds {at}",
            u8::from(ok)
        )
    }

    fn version(&self) -> String {
        self.version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The `schemaVersion` of `dir/config.yaml`, as written (a string or a number).
fn load(dir: &Path) -> Result<String, String> {
    let path = dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let doc: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| format!("{} is not YAML: {e}", path.display()))?;
    match doc.get("schemaVersion") {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        _ => Err(format!("{} has no schemaVersion", path.display())),
    }
}

fn reply(code: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body + "\n")));
    *resp.status_mut() = code;
    resp
}

fn handle(req: &Request<hyper::body::Incoming>, c: &Component) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/config-version") => reply(StatusCode::OK, c.version()),
        (&Method::GET, "/metrics") => reply(StatusCode::OK, c.metrics()),
        (&Method::POST, "/reload") => match c.reload("POST /reload") {
            Ok(v) => reply(StatusCode::OK, v),
            Err(e) => {
                eprintln!("reload refused, keeping version {}: {e}", c.version());
                reply(StatusCode::INTERNAL_SERVER_ERROR, e)
            }
        },
        _ => reply(StatusCode::NOT_FOUND, "not found".into()),
    }
}

async fn on_sighup(c: Arc<Component>) -> std::io::Result<()> {
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    while hup.recv().await.is_some() {
        if let Err(e) = c.reload("SIGHUP") {
            eprintln!("reload refused, keeping version {}: {e}", c.version());
        }
    }
    Ok(())
}

/// SIGTERM (how the kubelet stops a container; as PID 1 nothing else would end us) or SIGINT.
async fn terminated() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => Ok(()),
        r = tokio::signal::ctrl_c() => r,
    }
}

async fn serve(listener: tokio::net::TcpListener, c: Arc<Component>) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let c = c.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let resp = handle(&req, &c);
                async move { Ok::<_, Infallible>(resp) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: component CONFIG_DIR [LISTEN_ADDR]")?,
    );
    let addr: SocketAddr = match args.next() {
        Some(a) => a.to_str().ok_or("LISTEN_ADDR is not UTF-8")?.parse()?,
        None => "127.0.0.1:8080".parse()?,
    };
    let component = Arc::new(Component {
        dir,
        version: Mutex::new(String::new()),
        last: Mutex::new((false, 0)),
    });
    // Refusing to start without a config is the behaviour confgate's start-up ordering relies on.
    component.reload("start-up")?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            // Bind before announcing, so "listening" means requests are served.
            let listener = tokio::net::TcpListener::bind(addr).await?;
            println!("listening on {}", listener.local_addr()?);
            tokio::select! {
                r = serve(listener, component.clone()) => r,
                r = on_sighup(component.clone()) => r,
                r = terminated() => r,
            }
        })?;
    Ok(())
}
