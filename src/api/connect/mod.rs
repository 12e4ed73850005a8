//! The API client's connection, built by confgate: where the API server is, which CA it is verified
//! against, and how each request is authenticated, read from the pod's ServiceAccount or a kubeconfig.
//!
//! kube's own `Config` would do this too, but its kubeconfig and auth code links a JSONPath and a
//! regular-expression engine for the deprecated `auth-provider`s, more than a megabyte of a binary
//! that must stay small. confgate reads only what it uses, with serde types of its own, and hands kube
//! a finished service ([`kube::client::ClientBuilder::new`]).
//!
//! - In a cluster: `KUBERNETES_SERVICE_HOST`/`_PORT`, the ServiceAccount's `token` (read again at every
//!   request: the kubelet rotates a projected token), `ca.crt` and `namespace`.
//! - Outside: the kubeconfig (`KUBECONFIG`, a list merged as kubectl merges it, else
//!   `~/.kube/config`), its current context's server, CA (file or data), client certificate and key
//!   (file or data), and user: `token`, `tokenFile` (read at every request, trimmed), `username` and
//!   `password`, or an `exec` plugin (its `ExecCredential` token, run again once it expires, or its
//!   client certificate). An `auth-provider` is refused, naming it and what to use instead.
//!
//! As with kube, the kubeconfig comes first and the ServiceAccount is the fallback.
//!
//! A token file is read again on the blocking pool, never on the loop's thread (which answers
//! `/livez`'s ping), with a bounded, non-blocking open; an exec plugin runs there too, killed with
//! its process group past `EXEC_TIMEOUT` (30 s) or `EXEC_OUTPUT_MAX` (1 MiB) of output.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use hyper::header::HeaderValue;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Deserialize;
use tower::{BoxError, ServiceExt as _};

mod exec;
mod files;
mod kubeconfig;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;
mod token;

use exec::{Credential, Exec};
use files::{bearer, certs, decode, header, identity, read, read_bounded};
use kubeconfig::from_kubeconfig;
pub(crate) use token::TokenFile;

/// Where a pod's ServiceAccount credentials are mounted.
pub(crate) const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// How long kube waits for a connection to the API server, kept.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// An exec plugin's token is replaced this long before it expires.
const EXPIRY_MARGIN: jiff::SignedDuration = jiff::SignedDuration::from_secs(10);
/// The most a kubeconfig or a credential file (CA, certificate, key) may hold: none is near it, and
/// a file past it is an error, not read whole.
const FILE_MAX: u64 = 4 * 1024 * 1024;
/// The most a token file may hold (a projected ServiceAccount token is about 1 KiB).
const TOKEN_MAX: u64 = 64 * 1024;
/// How long a request waits for the token file's re-read before it sends the last token read.
const TOKEN_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// How long an exec plugin may run before it is killed, with whatever it started.
const EXEC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The most an exec plugin may print on its standard output (an `ExecCredential` is a few KiB).
const EXEC_OUTPUT_MAX: usize = 1024 * 1024;

/// Why the kubeconfig gave no connection.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("no kubeconfig found (set KUBECONFIG, or create ~/.kube/config)")]
    NotFound,
    #[error(
        "the kubeconfig {} does not exist (point KUBECONFIG at yours, or create ~/.kube/config; \
         `kubectl config view` shows the one kubectl uses)", .0.display()
    )]
    Missing(PathBuf),
    #[error("cannot read the kubeconfig {}: {why}", path.display())]
    Read { path: PathBuf, why: std::io::Error },
    #[error("the kubeconfig {} is not valid YAML ({why})", path.display())]
    Yaml { path: PathBuf, why: String },
    #[error("the kubeconfig {named}: {problem}")]
    Content { named: String, problem: Problem },
}

/// What is wrong inside a kubeconfig (or the ServiceAccount's files).
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("it names no current-context")]
    NoContext,
    #[error("its context {0:?} is not defined")]
    Context(String),
    #[error("its cluster {0:?} is not defined")]
    Cluster(String),
    #[error("its user {0:?} is not defined")]
    User(String),
    #[error("cluster {0:?} names no server")]
    NoServer(String),
    #[error("the server {server:?} is not a URL ({why})")]
    Server { server: String, why: String },
    #[error(
        "user {user:?} uses the auth-provider {provider:?}, which confgate does not support (kubectl \
         dropped it in 1.26): use an exec plugin instead (gke-gcloud-auth-plugin for gcp, kubelogin \
         for azure or oidc), or a token"
    )]
    AuthProvider { user: String, provider: String },
    #[error(
        "cluster {0:?} sets insecure-skip-tls-verify: confgate always verifies the API server; set \
         certificate-authority or certificate-authority-data"
    )]
    Insecure(String),
    #[error("cluster {0:?} sets proxy-url: confgate connects to the API server directly")]
    Proxy(String),
    #[error("{what} {}: {why}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("{what} is not valid base64 ({why})")]
    Base64 { what: &'static str, why: String },
    #[error("{what} holds no PEM {kind}")]
    Pem {
        what: &'static str,
        kind: &'static str,
    },
    #[error(
        "user {0:?} has a client certificate without its key, or a key without its certificate"
    )]
    HalfIdentity(String),
    #[error("TLS set-up: {0}")]
    Tls(String),
    #[error("{0}")]
    Exec(#[from] ExecError),
}

/// Why the pod's ServiceAccount gave no connection.
#[derive(Debug, thiserror::Error)]
pub enum InClusterError {
    #[error("KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set")]
    NoEnv,
    #[error("KUBERNETES_SERVICE_PORT {0:?} is not a port")]
    Port(String),
    #[error("{0}")]
    Files(Problem),
}

/// Why no client could be built: the kubeconfig's problem and, when that failed, the ServiceAccount's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Outside a cluster the kubeconfig is what the operator can fix, so it alone is named.
    #[error("no usable Kubernetes credentials: not in a cluster, and {0}")]
    NotInCluster(Box<KubeconfigError>),
    #[error(
        "no usable Kubernetes credentials: the pod's service account could not be used ({in_cluster}), and {kubeconfig}"
    )]
    Neither {
        kubeconfig: Box<KubeconfigError>,
        in_cluster: Box<InClusterError>,
    },
    #[error("cannot build a Kubernetes client: {0}")]
    Build(Box<Problem>),
}

/// Why an exec plugin gave no credential.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot run the exec plugin {command:?}: {why}")]
    Spawn {
        command: String,
        why: std::io::Error,
    },
    #[error("the exec plugin {command:?} failed ({status})")]
    Failed { command: String, status: String },
    #[error("the exec plugin {command:?} printed no ExecCredential ({why})")]
    Output { command: String, why: String },
    #[error(
        "the exec plugin {command:?} returned neither a token nor a client certificate and key"
    )]
    Empty { command: String },
    #[error("the exec plugin {command:?} was interrupted")]
    Interrupted { command: String },
    #[error(
        "the exec plugin {command:?} did not finish within {after:?} and was killed (run it by hand \
         to see where it waits: it may ask for input, which confgate cannot give)"
    )]
    TimedOut {
        command: String,
        after: std::time::Duration,
    },
    #[error(
        "the exec plugin {command:?} printed more than {max} bytes; it was stopped and its output not read"
    )]
    TooMuch { command: String, max: usize },
}

/// How each request is authenticated.
enum Auth {
    None,
    /// A fixed `Authorization` value (a token, or user and password).
    Header(HeaderValue),
    /// A token file, read at every request.
    TokenFile(TokenFile),
    /// An exec plugin's token, run again once it expires.
    Exec(Exec),
}

/// The connection to the API server, read but not yet built: nothing run, nothing connected.
pub(crate) struct Connection {
    server: hyper::Uri,
    /// The CA certificates the server is verified against; `None`: the system's roots.
    roots: Option<Vec<CertificateDer<'static>>>,
    tls_server_name: Option<String>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    auth: Auth,
    namespace: String,
}

impl Connection {
    /// The API server's URL, for messages that must say where.
    pub(crate) fn server(&self) -> String {
        crate::values::redact(&self.server.to_string())
    }

    /// The connection kube's `Config::infer` would choose: the kubeconfig, else the ServiceAccount.
    pub(crate) fn infer() -> Result<Connection, Error> {
        match from_kubeconfig() {
            Ok(c) => Ok(c),
            Err(kubeconfig) => match in_cluster(Path::new(SERVICE_ACCOUNT_DIR)) {
                Ok(c) => Ok(c),
                Err(InClusterError::NoEnv) => Err(Error::NotInCluster(Box::new(kubeconfig))),
                Err(in_cluster) => Err(Error::Neither {
                    kubeconfig: Box::new(kubeconfig),
                    in_cluster: Box::new(in_cluster),
                }),
            },
        }
    }

    /// The client: TLS verified against the connection's CA, every request authenticated. An exec
    /// plugin runs here once (off the runtime's thread), so a plugin that fails is said at start.
    pub(crate) async fn client(mut self) -> Result<kube::Client, Error> {
        if let Auth::Exec(exec) = &self.auth {
            let exec = exec.clone();
            match exec
                .run()
                .await
                .map_err(|e| Error::Build(Box::new(e.into())))?
            {
                Credential::Token(token, until) => {
                    *exec.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some((token, until));
                }
                Credential::Identity(certs, key) => {
                    self.identity = Some((certs, key));
                    self.auth = Auth::None;
                }
            }
        }
        self.warn_if_credentials_in_clear();
        let tls = self.tls().map_err(|e| Error::Build(Box::new(e)))?;
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls);
        let https = match &self.tls_server_name {
            Some(name) => {
                let name = ServerName::try_from(name.clone()).map_err(|e| {
                    Error::Build(Box::new(Problem::Tls(format!("tls-server-name: {e}"))))
                })?;
                https
                    .https_or_http()
                    .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
            }
            None => https.https_or_http(),
        }
        .enable_http1()
        .wrap_connector(http);
        let client: hyper_util::client::legacy::Client<_, kube::client::Body> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https);
        let service = Authenticated {
            inner: client,
            auth: Arc::new(self.auth),
        };
        let service = tower::Layer::layer(
            &kube::client::middleware::BaseUriLayer::new(self.server),
            service,
        );
        Ok(kube::client::ClientBuilder::new(service, self.namespace).build())
    }

    /// Says, once per process, that credentials would be sent unencrypted: an `http://` server
    /// other than loopback, with a token, password or plugin's token to send.
    fn warn_if_credentials_in_clear(&self) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        if matches!(self.auth, Auth::None) || !in_clear(&self.server) {
            return;
        }
        WARNED.call_once(|| {
            tracing::warn!(
                server = %self.server(),
                "credentials sent unencrypted: the API server's URL is http:// and not loopback, so its token or password can be read on the way; use https://"
            );
        });
    }

    fn tls(&self) -> Result<rustls::ClientConfig, Problem> {
        let mut store = rustls::RootCertStore::empty();
        match &self.roots {
            Some(roots) => {
                for c in roots {
                    store
                        .add(c.clone())
                        .map_err(|e| Problem::Tls(format!("the cluster's CA: {e}")))?;
                }
            }
            None => {
                store.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| Problem::Tls(e.to_string()))?
        .with_root_certificates(store);
        match &self.identity {
            Some((certs, key)) => builder
                .with_client_auth_cert(certs.clone(), key.clone_key())
                .map_err(|e| Problem::Tls(format!("the client certificate and key: {e}"))),
            None => Ok(builder.with_no_client_auth()),
        }
    }
}

/// The connection of a pod's ServiceAccount mounted at `dir`.
pub(crate) fn in_cluster(dir: &Path) -> Result<Connection, InClusterError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (Some(host), Some(port)) = (
        env("KUBERNETES_SERVICE_HOST"),
        env("KUBERNETES_SERVICE_PORT"),
    ) else {
        return Err(InClusterError::NoEnv);
    };
    in_cluster_at(host, &port, dir)
}

/// The in-cluster connection to `host`:`port` (the service's environment) with the ServiceAccount at
/// `dir`.
fn in_cluster_at(host: String, port: &str, dir: &Path) -> Result<Connection, InClusterError> {
    let port_n = port
        .parse::<u16>()
        .map_err(|_| InClusterError::Port(port.to_owned()))?;
    let host = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => host,
    };
    let server = if port_n == 443 {
        format!("https://{host}")
    } else {
        format!("https://{host}:{port_n}")
    };
    let server = server.parse::<hyper::Uri>().map_err(|e| {
        InClusterError::Files(Problem::Server {
            server,
            why: e.to_string(),
        })
    })?;
    let files = |p| InClusterError::Files(p);
    let ca = "the ServiceAccount's CA";
    let roots = certs(&read(ca, &dir.join("ca.crt")).map_err(files)?, ca).map_err(files)?;
    let token = TokenFile::open(dir.join("token")).map_err(files)?;
    let namespace =
        read("the ServiceAccount's namespace", &dir.join("namespace")).map_err(files)?;
    Ok(Connection {
        server,
        roots: Some(roots),
        tls_server_name: None,
        identity: None,
        auth: Auth::TokenFile(token),
        namespace: String::from_utf8_lossy(&namespace).trim().to_owned(),
    })
}

/// Whether a request to `server` goes unencrypted over a network: `http://` to a host other than
/// loopback (`localhost`, `127.0.0.0/8`, `::1`).
fn in_clear(server: &hyper::Uri) -> bool {
    if server.scheme_str() != Some("http") {
        return false;
    }
    let host = server.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

/// The service under kube's client that authenticates each request, then sends it.
#[derive(Clone)]
struct Authenticated<S> {
    inner: S,
    auth: Arc<Auth>,
}

impl<S, B> tower::Service<hyper::Request<kube::client::Body>> for Authenticated<S>
where
    S: tower::Service<hyper::Request<kube::client::Body>, Response = hyper::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
{
    type Response = hyper::Response<B>;
    type Error = BoxError;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        // Readiness is the inner service's, awaited in `call` on the clone that sends.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: hyper::Request<kube::client::Body>) -> Self::Future {
        let inner = self.inner.clone();
        let auth = self.auth.clone();
        Box::pin(async move {
            let value = match &*auth {
                Auth::None => None,
                Auth::Header(v) => Some(v.clone()),
                Auth::TokenFile(t) => Some(t.header().await),
                Auth::Exec(e) => Some(e.header().await?),
            };
            if let Some(v) = value {
                req.headers_mut().insert(hyper::header::AUTHORIZATION, v);
            }
            inner.oneshot(req).await.map_err(Into::into)
        })
    }
}
