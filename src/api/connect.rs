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
//! A token file is read again on the blocking pool, never on the thread that answers probes, with a
//! bounded, non-blocking open; an exec plugin runs there too, killed with its process group past
//! `EXEC_TIMEOUT` (30 s) or `EXEC_OUTPUT_MAX` (1 MiB) of output.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use hyper::header::HeaderValue;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Deserialize;
use tower::{BoxError, ServiceExt as _};

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

/// A kubeconfig as confgate reads it: only the fields it uses; the rest is ignored.
#[derive(Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    clusters: Option<Vec<NamedCluster>>,
    #[serde(default)]
    users: Option<Vec<NamedUser>>,
    #[serde(default)]
    contexts: Option<Vec<NamedContext>>,
    #[serde(default)]
    current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    name: String,
    #[serde(default)]
    cluster: Option<Cluster>,
    #[serde(skip)]
    dir: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: Option<User>,
    #[serde(skip)]
    dir: PathBuf,
}

/// A kubeconfig user; never printed (it may hold a token or a key).
#[derive(Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    username: Option<String>,
    password: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    auth_provider: Option<AuthProvider>,
    exec: Option<ExecConfig>,
}

#[derive(Deserialize)]
struct AuthProvider {
    name: String,
}

/// An exec plugin, as client-go runs it.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecConfig {
    command: String,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<ExecEnv>>,
    #[serde(default)]
    api_version: Option<String>,
}

#[derive(Clone, Deserialize)]
struct ExecEnv {
    name: String,
    value: String,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    name: String,
    #[serde(default)]
    context: Option<Context>,
}

#[derive(Debug, Default, Deserialize)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
    namespace: Option<String>,
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

/// The kubeconfig's paths: `KUBECONFIG` (a list, as kubectl reads it), else `~/.kube/config`.
fn kubeconfig_paths() -> Result<Vec<PathBuf>, KubeconfigError> {
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let paths: Vec<PathBuf> = std::env::split_paths(&v)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            return Ok(paths);
        }
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or(KubeconfigError::NotFound)?;
    Ok(vec![Path::new(&home).join(".kube").join("config")])
}

/// The kubeconfig's names, as the operator gave them, for messages about its content.
fn kubeconfig_named(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// One kubeconfig file's text, read. An error says what and where, never what the file holds (a
/// serde message can quote the value it found, and a kubeconfig holds credentials).
fn parse(path: &Path, text: &str) -> Result<Kubeconfig, KubeconfigError> {
    serde_saphyr::from_str(text).map_err(|e| KubeconfigError::Yaml {
        path: path.to_path_buf(),
        why: crate::extract::yaml_error(&e).to_string(),
    })
}

fn from_kubeconfig() -> Result<Connection, KubeconfigError> {
    let paths = kubeconfig_paths()?;
    let mut merged = Kubeconfig::default();
    let mut found = false;
    for path in &paths {
        let text = match read_bounded(path, FILE_MAX).and_then(|b| {
            String::from_utf8(b).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "is not UTF-8 text")
            })
        }) {
            Ok(t) => t,
            // kubectl skips a listed file that is not there, as long as one is.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && paths.len() > 1 => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(KubeconfigError::Missing(path.clone()));
            }
            Err(why) => {
                return Err(KubeconfigError::Read {
                    path: path.clone(),
                    why,
                });
            }
        };
        found = true;
        let one = parse(path, &text)?;
        merge(&mut merged, one, path.parent().unwrap_or(Path::new(".")));
    }
    if !found {
        return Err(KubeconfigError::Missing(paths[0].clone()));
    }
    resolve(merged).map_err(|problem| KubeconfigError::Content {
        named: kubeconfig_named(&paths),
        problem,
    })
}

/// Merges `one` into `into` as kubectl does: the first file to name a thing, or the current
/// context, wins. Relative paths stay relative to the file that holds them.
fn merge(into: &mut Kubeconfig, one: Kubeconfig, dir: &Path) {
    if into.current_context.as_deref().is_none_or(str::is_empty) {
        into.current_context = one.current_context;
    }
    let clusters = into.clusters.get_or_insert_default();
    for mut c in one.clusters.unwrap_or_default() {
        if !clusters.iter().any(|k| k.name == c.name) {
            c.dir = dir.to_owned();
            clusters.push(c);
        }
    }
    let users = into.users.get_or_insert_default();
    for mut u in one.users.unwrap_or_default() {
        if !users.iter().any(|k| k.name == u.name) {
            u.dir = dir.to_owned();
            users.push(u);
        }
    }
    let contexts = into.contexts.get_or_insert_default();
    for c in one.contexts.unwrap_or_default() {
        if !contexts.iter().any(|k| k.name == c.name) {
            contexts.push(c);
        }
    }
}

/// The current context's connection.
fn resolve(config: Kubeconfig) -> Result<Connection, Problem> {
    let current = config
        .current_context
        .filter(|c| !c.is_empty())
        .ok_or(Problem::NoContext)?;
    let context = config
        .contexts
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == current)
        .ok_or_else(|| Problem::Context(current.clone()))?
        .context
        .unwrap_or_default();
    let cluster_name = context.cluster.unwrap_or_default();
    let named = config
        .clusters
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == cluster_name)
        .ok_or_else(|| Problem::Cluster(cluster_name.clone()))?;
    let dir = named.dir;
    let cluster = named.cluster.unwrap_or_default();
    if cluster.insecure_skip_tls_verify {
        return Err(Problem::Insecure(cluster_name));
    }
    if cluster.proxy_url.is_some_and(|p| !p.is_empty()) {
        return Err(Problem::Proxy(cluster_name));
    }
    let server = cluster
        .server
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Problem::NoServer(cluster_name.clone()))?;
    let server = server.parse::<hyper::Uri>().map_err(|e| Problem::Server {
        server: crate::values::redact(&server),
        why: crate::values::redact(&e.to_string()),
    })?;
    let roots = match (
        cluster.certificate_authority_data,
        cluster.certificate_authority,
    ) {
        (Some(data), _) => Some(certs(
            &decode("certificate-authority-data", &data)?,
            "certificate-authority-data",
        )?),
        (None, Some(file)) => {
            let what = "certificate-authority";
            Some(certs(&read(what, &dir.join(file))?, what)?)
        }
        (None, None) => None,
    };
    let (user_name, user, user_dir) = match context.user.filter(|u| !u.is_empty()) {
        None => (String::new(), User::default(), dir.clone()),
        Some(name) => {
            let u = config
                .users
                .unwrap_or_default()
                .into_iter()
                .find(|u| u.name == name)
                .ok_or_else(|| Problem::User(name.clone()))?;
            (name, u.user.unwrap_or_default(), u.dir)
        }
    };
    if let Some(p) = &user.auth_provider {
        return Err(Problem::AuthProvider {
            user: user_name,
            provider: p.name.clone(),
        });
    }
    let cert = match (user.client_certificate_data, user.client_certificate) {
        (Some(data), _) => Some(decode("client-certificate-data", &data)?),
        (None, Some(file)) => Some(read("client-certificate", &user_dir.join(file))?),
        (None, None) => None,
    };
    let key = match (user.client_key_data, user.client_key) {
        (Some(data), _) => Some(decode("client-key-data", &data)?),
        (None, Some(file)) => Some(read("client-key", &user_dir.join(file))?),
        (None, None) => None,
    };
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => Some(identity(&cert, &key, "client-certificate", "client-key")?),
        (None, None) => None,
        _ => return Err(Problem::HalfIdentity(user_name)),
    };
    // kube's order: user and password, a token, a token file, an exec plugin.
    let auth = if let (Some(u), Some(p)) = (&user.username, &user.password) {
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        Auth::Header(header(&format!("Basic {basic}")).ok_or(Problem::Tls(
            "the user's name or password is not valid in a header".into(),
        ))?)
    } else if let Some(token) = user.token.filter(|t| !t.is_empty()) {
        Auth::Header(bearer(&token).ok_or(Problem::Tls(
            "the user's token is not valid in a header".into(),
        ))?)
    } else if let Some(file) = user.token_file.filter(|f| !f.is_empty()) {
        Auth::TokenFile(TokenFile::open(user_dir.join(file))?)
    } else if let Some(exec) = user.exec {
        Auth::Exec(Exec::new(exec, &user_dir))
    } else {
        Auth::None
    };
    Ok(Connection {
        server,
        roots,
        tls_server_name: cluster.tls_server_name.filter(|s| !s.is_empty()),
        identity,
        auth,
        namespace: context
            .namespace
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned()),
    })
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

/// Reads `path` whole when it is a regular file of at most `max` bytes. The open never blocks (a
/// FIFO or device in its place is refused, not waited on) and a larger file is refused, not read.
fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "is not a regular file (a FIFO, device or directory is not read)",
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "holds more than {max} bytes; not read"
        )));
    }
    Ok(bytes)
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, Problem> {
    read_bounded(path, FILE_MAX).map_err(|e| Problem::File {
        what,
        path: path.to_owned(),
        why: if e.kind() == std::io::ErrorKind::NotFound {
            "does not exist".to_owned()
        } else {
            e.to_string()
        },
    })
}

fn decode(what: &'static str, data: &str) -> Result<Vec<u8>, Problem> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| Problem::Base64 {
            what,
            why: e.to_string(),
        })
}

fn certs(pem: &[u8], what: &'static str) -> Result<Vec<CertificateDer<'static>>, Problem> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|_| Problem::Pem {
            what,
            kind: "certificate",
        })?;
    if certs.is_empty() {
        return Err(Problem::Pem {
            what,
            kind: "certificate",
        });
    }
    Ok(certs)
}

type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn identity(
    cert: &[u8],
    key: &[u8],
    cert_what: &'static str,
    key_what: &'static str,
) -> Result<Identity, Problem> {
    let certs = certs(cert, cert_what)?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| Problem::Pem {
        what: key_what,
        kind: "private key",
    })?;
    Ok((certs, key))
}

/// An `Authorization` value, marked sensitive so that no debug output shows it.
fn header(value: &str) -> Option<HeaderValue> {
    let mut v = HeaderValue::try_from(value).ok()?;
    v.set_sensitive(true);
    Some(v)
}

fn bearer(token: &str) -> Option<HeaderValue> {
    header(&format!("Bearer {token}"))
}

/// A token file read as kubectl reads it: trimmed, and at every request, so a rotated token is in use
/// at once. A read that fails or finds no token keeps the last token (as kube does: a file may be
/// removed once read).
///
/// The re-read runs on the blocking pool, never on the thread that answers probes, bounded in size
/// (a FIFO or device in its place is refused, not waited on): a request waits for it at most
/// [`TOKEN_READ_WAIT`], then sends the last token, and one read at a time is in flight.
pub(crate) struct TokenFile {
    path: Arc<PathBuf>,
    last: Arc<Mutex<HeaderValue>>,
    reading: Arc<std::sync::atomic::AtomicBool>,
}

impl TokenFile {
    /// The file, which must hold a token now: one it cannot read is named.
    pub(crate) fn open(path: PathBuf) -> Result<TokenFile, Problem> {
        let what = "the token file";
        let text = read_bounded(&path, TOKEN_MAX).map_err(|e| Problem::File {
            what,
            path: path.clone(),
            why: if e.kind() == std::io::ErrorKind::NotFound {
                "does not exist".to_owned()
            } else {
                e.to_string()
            },
        })?;
        let header = Self::parse(&text).ok_or_else(|| Problem::File {
            what,
            path: path.clone(),
            why: "holds no token".to_owned(),
        })?;
        Ok(TokenFile {
            path: Arc::new(path),
            last: Arc::new(Mutex::new(header)),
            reading: Arc::default(),
        })
    }

    fn parse(text: &[u8]) -> Option<HeaderValue> {
        let token = std::str::from_utf8(text).ok()?.trim();
        if token.is_empty() {
            return None;
        }
        bearer(token)
    }

    /// The header to send: the file's token now, else the last one read.
    pub(crate) async fn header(&self) -> HeaderValue {
        use std::sync::atomic::Ordering;
        if !self.reading.swap(true, Ordering::AcqRel) {
            let (path, last, reading) =
                (self.path.clone(), self.last.clone(), self.reading.clone());
            let read = tokio::task::spawn_blocking(move || {
                let fresh = read_bounded(&path, TOKEN_MAX)
                    .ok()
                    .and_then(|t| Self::parse(&t));
                if let Some(fresh) = fresh {
                    *last.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
                }
                reading.store(false, Ordering::Release);
            });
            // A read still running past the wait finishes on its own and updates the last token.
            let _ = tokio::time::timeout(TOKEN_READ_WAIT, read).await;
        }
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What an exec plugin returned.
enum Credential {
    Token(HeaderValue, Option<jiff::Timestamp>),
    Identity(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
}

/// An exec plugin's token and when it expires, if it said.
type Cached = Option<(HeaderValue, Option<jiff::Timestamp>)>;

/// An exec plugin and the token it last gave, until that expires.
#[derive(Clone)]
struct Exec {
    config: ExecConfig,
    command: PathBuf,
    cached: Arc<Mutex<Cached>>,
    /// How long it may run ([`EXEC_TIMEOUT`]).
    timeout: std::time::Duration,
}

#[derive(Deserialize)]
struct ExecCredential {
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    token: Option<String>,
    expiration_timestamp: Option<jiff::Timestamp>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

impl Exec {
    fn new(config: ExecConfig, dir: &Path) -> Exec {
        // client-go: a relative path with a separator is relative to the kubeconfig; a bare name is
        // looked up on PATH.
        let command = if config.command.contains('/') && Path::new(&config.command).is_relative() {
            dir.join(&config.command)
        } else {
            PathBuf::from(&config.command)
        };
        Exec {
            config,
            command,
            cached: Arc::new(Mutex::new(None)),
            timeout: EXEC_TIMEOUT,
        }
    }

    /// The plugin's token, run again when there is none or it is about to expire.
    async fn header(&self) -> Result<HeaderValue, ExecError> {
        {
            let cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((value, until)) = &*cached
                && until.is_none_or(|u| jiff::Timestamp::now() + EXPIRY_MARGIN < u)
            {
                return Ok(value.clone());
            }
        }
        match self.run().await? {
            Credential::Token(value, until) => {
                *self.cached.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((value.clone(), until));
                Ok(value)
            }
            // The client's TLS identity was fixed when it was built: a plugin that switched to
            // certificates is a token it no longer gives.
            Credential::Identity(..) => Err(ExecError::Empty {
                command: self.config.command.clone(),
            }),
        }
    }

    /// Runs the plugin off the runtime's thread (it may take seconds), its stderr shown as kubectl
    /// shows it, its stdout (the credential) read and never shown.
    async fn run(&self) -> Result<Credential, ExecError> {
        let this = self.clone();
        let command = self.config.command.clone();
        tokio::task::spawn_blocking(move || this.run_blocking())
            .await
            .map_err(|_| ExecError::Interrupted { command })?
    }

    fn run_blocking(&self) -> Result<Credential, ExecError> {
        let command = || self.config.command.clone();
        let api_version = self
            .config
            .api_version
            .clone()
            .unwrap_or_else(|| "client.authentication.k8s.io/v1".to_owned());
        let info = serde_json::json!({
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": false},
        });
        let mut cmd = std::process::Command::new(&self.command);
        cmd.stdout(std::process::Stdio::piped());
        // Its own process group, so the kill at the time bound reaches what it started too.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.args(self.config.args.iter().flatten())
            .envs(
                self.config
                    .env
                    .iter()
                    .flatten()
                    .map(|e| (&e.name, &e.value)),
            )
            .env("KUBERNETES_EXEC_INFO", info.to_string())
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit());
        let stdout = self.output(cmd)?;
        // serde_json's error names a line and column, never the text.
        let cred: ExecCredential =
            serde_json::from_slice(&stdout).map_err(|e| ExecError::Output {
                command: command(),
                why: e.to_string(),
            })?;
        let status = cred
            .status
            .ok_or_else(|| ExecError::Empty { command: command() })?;
        if let Some(token) = status.token.filter(|t| !t.is_empty()) {
            let value = bearer(&token).ok_or_else(|| ExecError::Output {
                command: command(),
                why: "its token is not valid in a header".to_owned(),
            })?;
            return Ok(Credential::Token(value, status.expiration_timestamp));
        }
        if let (Some(cert), Some(key)) = (status.client_certificate_data, status.client_key_data) {
            let (certs, key) = identity(
                cert.as_bytes(),
                key.as_bytes(),
                "the exec plugin's clientCertificateData",
                "the exec plugin's clientKeyData",
            )
            .map_err(|e| ExecError::Output {
                command: command(),
                why: e.to_string(),
            })?;
            return Ok(Credential::Identity(certs, key));
        }
        Err(ExecError::Empty { command: command() })
    }
}

impl Exec {
    /// Runs `cmd` (its stdout piped) within [`Exec::timeout`], keeping at most [`EXEC_OUTPUT_MAX`]
    /// bytes of its standard output; past either bound its process group is killed.
    fn output(&self, mut cmd: std::process::Command) -> Result<Vec<u8>, ExecError> {
        use std::io::Read as _;
        let command = || self.config.command.clone();
        let mut child = cmd.spawn().map_err(|why| ExecError::Spawn {
            command: command(),
            why,
        })?;
        drop(cmd);
        let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
        let kill = move || {
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        };
        let Some(mut stdout) = child.stdout.take() else {
            kill();
            let _ = child.wait();
            return Err(ExecError::Interrupted { command: command() });
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            let mut over = false;
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) if kept.len() + n > EXEC_OUTPUT_MAX => {
                        // Stopped at once: a plugin printing without end is not waited for.
                        over = true;
                        kill();
                        break;
                    }
                    Ok(n) => kept.extend_from_slice(&buf[..n]),
                }
            }
            let status = child.wait();
            let _ = tx.send((status, kept, over));
        });
        let (status, out, over) = match rx.recv_timeout(self.timeout) {
            Ok(done) => done,
            Err(_) => {
                kill();
                tracing::warn!(
                    plugin = %self.config.command,
                    timeout_s = self.timeout.as_secs(),
                    "exec plugin killed at its time bound"
                );
                return Err(ExecError::TimedOut {
                    command: command(),
                    after: self.timeout,
                });
            }
        };
        if over {
            return Err(ExecError::TooMuch {
                command: command(),
                max: EXEC_OUTPUT_MAX,
            });
        }
        let status = status.map_err(|why| ExecError::Spawn {
            command: command(),
            why,
        })?;
        if !status.success() {
            return Err(ExecError::Failed {
                command: command(),
                status: status.to_string(),
            });
        }
        Ok(out)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::explain::{explain, tls_error};

    fn kubeconfig(dir: &Path, user: &str, cluster_extra: &str) -> Result<Connection, Problem> {
        kubeconfig_at(dir, "http://127.0.0.1:1", user, cluster_extra)
    }

    fn kubeconfig_at(
        dir: &Path,
        server: &str,
        user: &str,
        cluster_extra: &str,
    ) -> Result<Connection, Problem> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}\
             users:\n- name: u\n  user:\n{user}\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: prod\ncurrent-context: x\n"
        );
        let mut config: Kubeconfig = serde_saphyr::from_str(&text).unwrap();
        let one = std::mem::take(&mut config);
        merge(&mut config, one, dir);
        resolve(config)
    }

    /// A kubeconfig whose user is a bare string (a pasted token where a mapping belongs): the error
    /// names the file and where, never the value.
    #[test]
    fn an_unreadable_kubeconfig_is_named_without_its_content() {
        let path = Path::new("/home/ops/.kube/config");
        let text = "users:\n- name: u\n  user: secret-token-4711\n";
        let e = parse(path, text).err().unwrap().to_string();
        assert!(e.contains("/home/ops/.kube/config"), "{e}");
        assert!(e.contains("line 3"), "{e}");
        assert!(!e.contains("secret-token"), "{e}");
    }

    #[test]
    fn an_auth_provider_is_refused_naming_it_and_what_to_use() {
        let tmp = tempfile::tempdir().unwrap();
        let e = kubeconfig(
            tmp.path(),
            "    auth-provider:\n      name: gcp\n      config: {access-token: secret-token}\n",
            "",
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("auth-provider \"gcp\""), "{e}");
        assert!(e.contains("exec plugin"), "{e}");
        assert!(!e.contains("secret-token"), "{e}");
    }

    #[test]
    fn a_kubeconfig_that_skips_tls_verification_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let e = kubeconfig(
            tmp.path(),
            "    token: t\n",
            "    insecure-skip-tls-verify: true\n",
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("insecure-skip-tls-verify"), "{e}");
    }

    #[test]
    fn a_token_file_is_relative_to_the_kubeconfig_and_named_when_absent() {
        let tmp = tempfile::tempdir().unwrap();
        let e = kubeconfig(tmp.path(), "    tokenFile: absent\n", "")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&tmp.path().join("absent").display().to_string()),
            "{e}"
        );
        assert!(e.contains("does not exist"), "{e}");
        std::fs::write(tmp.path().join("token"), "t\n").unwrap();
        let c = kubeconfig(tmp.path(), "    tokenFile: token\n", "").unwrap();
        assert!(matches!(c.auth, Auth::TokenFile(_)));
        assert_eq!(c.namespace, "prod");
    }

    #[test]
    fn an_inline_token_comes_before_a_token_file_as_in_kube() {
        let tmp = tempfile::tempdir().unwrap();
        let c = kubeconfig(tmp.path(), "    token: inline\n    tokenFile: absent\n", "").unwrap();
        let Auth::Header(v) = c.auth else {
            panic!("not the inline token")
        };
        assert_eq!(v, "Bearer inline");
        assert!(v.is_sensitive());
    }

    /// An HTTP/1.1 server on loopback that answers every request 200 and sends the `Authorization`
    /// header it got (if any) to the returned channel.
    fn recording_server() -> (u16, std::sync::mpsc::Receiver<Option<String>>) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut auth = None;
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line.trim_end().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':')
                        && k.eq_ignore_ascii_case("authorization")
                    {
                        auth = Some(v.trim().to_owned());
                    }
                    line.clear();
                }
                let _ = tx.send(auth);
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        (port, rx)
    }

    async fn ask(
        client: &kube::Client,
        rx: &std::sync::mpsc::Receiver<Option<String>>,
    ) -> Option<String> {
        let req = hyper::Request::get("/version").body(Vec::new()).unwrap();
        client.request_text(req).await.unwrap();
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap()
    }

    /// A token file with a trailing newline (as `echo` writes one) is sent trimmed, and read again
    /// at every request: a rotated token is in use at the next request, never frozen at the first.
    #[tokio::test]
    async fn a_token_file_is_trimmed_and_read_again_at_every_request() {
        let (port, rx) = recording_server();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("token");
        std::fs::write(&path, "first.token\n").unwrap();
        let server = format!("http://127.0.0.1:{port}");
        let client = kubeconfig_at(tmp.path(), &server, "    tokenFile: token\n", "")
            .unwrap()
            .client()
            .await
            .unwrap();
        assert_eq!(
            ask(&client, &rx).await.as_deref(),
            Some("Bearer first.token")
        );
        std::fs::write(&path, "  second.token \n").unwrap();
        assert_eq!(
            ask(&client, &rx).await.as_deref(),
            Some("Bearer second.token")
        );
        // A file emptied (or removed) keeps the last token, as kube does.
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(
            ask(&client, &rx).await.as_deref(),
            Some("Bearer second.token")
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            ask(&client, &rx).await.as_deref(),
            Some("Bearer second.token")
        );
    }

    /// The in-cluster connection reads the ServiceAccount's token at every request, too.
    #[tokio::test]
    async fn the_service_account_token_is_read_at_every_request() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("token");
        std::fs::write(&path, "one\n").unwrap();
        let t = TokenFile::open(path.clone()).unwrap();
        assert_eq!(t.header().await, "Bearer one");
        std::fs::write(&path, "two\n").unwrap();
        assert_eq!(t.header().await, "Bearer two");
        assert!(t.header().await.is_sensitive());
    }

    /// The token file replaced by a FIFO no one writes, then by a file of 1 MiB: a request neither
    /// waits on the FIFO (it froze the thread answering probes for good) nor reads the large file
    /// whole; each sends the last token read, and a good token is read again after them. Asked from
    /// a thread of its own, so a request that blocks fails this test instead of hanging it.
    #[test]
    fn a_token_file_made_a_fifo_or_huge_neither_blocks_nor_is_read_whole() {
        let (port, rx) = recording_server();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("token");
        std::fs::write(&path, "good.token\n").unwrap();
        let server = format!("http://127.0.0.1:{port}");
        let conn = kubeconfig_at(tmp.path(), &server, "    tokenFile: token\n", "").unwrap();
        let (done_tx, done) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let client = conn.client().await.unwrap();
                std::fs::remove_file(&p).unwrap();
                nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
                let fifo = ask(&client, &rx).await;
                std::fs::remove_file(&p).unwrap();
                std::fs::write(&p, vec![b'a'; 1024 * 1024]).unwrap();
                let huge = ask(&client, &rx).await;
                std::fs::write(&p, "next.token\n").unwrap();
                let next = ask(&client, &rx).await;
                let _ = done_tx.send((fifo, huge, next));
            });
        });
        let (fifo, huge, next) = done
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the requests to finish: one blocked on the token file");
        assert_eq!(fifo.as_deref(), Some("Bearer good.token"));
        assert_eq!(huge.as_deref(), Some("Bearer good.token"));
        assert_eq!(next.as_deref(), Some("Bearer next.token"));
        // At start, the same file is refused, naming it, not waited on.
        std::fs::remove_file(&path).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = TokenFile::open(path.clone()).err().unwrap().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }

    /// A plugin that hangs is killed at its time bound, with what it started, and named; one that
    /// prints without end is stopped past its output bound, not buffered whole.
    #[tokio::test]
    async fn an_exec_plugin_that_hangs_or_prints_without_end_is_stopped_and_named() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let plugin = tmp.path().join("hang.sh");
        let pidfile = tmp.path().join("child.pid");
        // A child of its own holds stdout open, as a helper a plugin starts would.
        std::fs::write(
            &plugin,
            format!(
                "#!/bin/sh\nsleep 300 &\necho $! > {}\nwait\n",
                pidfile.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = |command: &str| ExecConfig {
            command: command.to_owned(),
            args: None,
            env: None,
            api_version: None,
        };
        let mut exec = Exec::new(config(&plugin.display().to_string()), tmp.path());
        exec.timeout = std::time::Duration::from_millis(500);
        let started = std::time::Instant::now();
        let e = exec.run().await.err().unwrap().to_string();
        assert!(
            e.contains("hang.sh") && e.contains("did not finish within 500ms and was killed"),
            "{e}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        let child: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed with its group: gone, or a zombie waiting for its reaper.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !(std::fs::read_to_string(format!("/proc/{child}/stat"))
            .map_or(true, |s| s.split(' ').nth(2) == Some("Z")))
        {
            assert!(
                std::time::Instant::now() < end,
                "the plugin's child {child} outlived the kill"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let loud = tmp.path().join("loud.sh");
        std::fs::write(&loud, "#!/bin/sh\nexec yes '{\"status\":{}}'\n").unwrap();
        std::fs::set_permissions(&loud, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = Exec::new(config(&loud.display().to_string()), tmp.path())
            .run()
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("printed more than 1048576 bytes"), "{e}");
    }

    /// A server URL's password is shown nowhere: not in `server()` (what `confgate status` names in
    /// its errors), nor in the error about a server that is not a URL.
    #[test]
    fn a_server_urls_userinfo_is_never_shown() {
        let tmp = tempfile::tempdir().unwrap();
        let c = kubeconfig_at(
            tmp.path(),
            "http://admin:PASSWORD@203.0.113.7:8080",
            "    token: t\n",
            "",
        )
        .unwrap();
        let shown = c.server();
        assert!(
            !shown.contains("PASSWORD") && !shown.contains("admin"),
            "{shown}"
        );
        assert!(shown.contains("203.0.113.7:8080"), "{shown}");
        let e = kubeconfig_at(
            tmp.path(),
            "http://admin:PASSWORD@bad host",
            "    token: t\n",
            "",
        )
        .err()
        .unwrap()
        .to_string();
        assert!(!e.contains("PASSWORD"), "{e}");
    }

    /// Credentials to an `http://` server other than loopback are sent in the clear: said.
    #[test]
    fn http_to_a_server_other_than_loopback_is_in_the_clear() {
        for (url, clear) in [
            ("http://203.0.113.7:8080", true),
            ("http://api.example.com", true),
            ("http://127.0.0.1:8080", false),
            ("http://localhost:8080", false),
            ("http://[::1]:8080", false),
            ("https://203.0.113.7", false),
        ] {
            assert_eq!(in_clear(&url.parse().unwrap()), clear, "{url}");
        }
    }

    /// An exec plugin (a real process) gives the token; once it has expired the plugin runs again.
    #[tokio::test]
    async fn an_exec_plugin_token_is_used_and_fetched_again_once_expired() {
        use std::os::unix::fs::PermissionsExt as _;
        let (port, rx) = recording_server();
        let tmp = tempfile::tempdir().unwrap();
        let plugin = tmp.path().join("plugin.sh");
        // Each run counts itself and gives a token already expired, so the next request runs it again.
        std::fs::write(
            &plugin,
            "#!/bin/sh\nn=$(cat \"$0.count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0.count\"\n\
             printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
             \"status\":{\"token\":\"exec-%s-%s\",\"expirationTimestamp\":\"2000-01-01T00:00:00Z\"}}' \"$n\" \"$GREETING\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let server = format!("http://127.0.0.1:{port}");
        let user = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ./plugin.sh\n      \
                    env:\n      - name: GREETING\n        value: hi\n";
        let client = kubeconfig_at(tmp.path(), &server, user, "")
            .unwrap()
            .client()
            .await
            .unwrap();
        // The first run was at build; the token it gave had expired by the first request.
        assert_eq!(ask(&client, &rx).await.as_deref(), Some("Bearer exec-2-hi"));
        assert_eq!(ask(&client, &rx).await.as_deref(), Some("Bearer exec-3-hi"));
    }

    /// A plugin that fails is said at build, naming it.
    #[tokio::test]
    async fn an_exec_plugin_that_fails_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let user = "    exec:\n      command: false\n";
        let e = kubeconfig(tmp.path(), user, "")
            .unwrap()
            .client()
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("exec plugin \"false\" failed"), "{e}");
    }

    /// The ServiceAccount's files make the in-cluster connection: the server from the service's
    /// environment (an IPv6 address bracketed, 443 left out), the namespace trimmed, and a file that
    /// is missing named.
    #[test]
    fn the_service_account_dir_gives_the_in_cluster_connection() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let e = in_cluster_at("10.0.0.1".into(), "443", dir)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(&dir.join("ca.crt").display().to_string()), "{e}");
        assert!(e.contains("does not exist"), "{e}");
        std::fs::write(
            dir.join("ca.crt"),
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = in_cluster_at("10.0.0.1".into(), "443", dir)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(&dir.join("token").display().to_string()), "{e}");
        std::fs::write(dir.join("token"), "sa-token\n").unwrap();
        std::fs::write(dir.join("namespace"), "prod\n").unwrap();
        let c = in_cluster_at("10.0.0.1".into(), "443", dir).unwrap();
        assert_eq!(c.server(), "https://10.0.0.1/");
        assert_eq!(c.namespace, "prod");
        let Auth::TokenFile(t) = &c.auth else {
            panic!("not the token file")
        };
        assert_eq!(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(t.header()),
            "Bearer sa-token"
        );
        let c = in_cluster_at("fd00::1".into(), "6443", dir).unwrap();
        assert_eq!(c.server(), "https://[fd00::1]:6443/");
        assert!(matches!(
            in_cluster_at("10.0.0.1".into(), "https", dir),
            Err(InClusterError::Port(_))
        ));
    }

    /// Two CAs made with `openssl` in `dir` (`ca` and `other-ca`, each `.crt` and `.key`), and a
    /// serving certificate for 127.0.0.1 that `ca` signed (`server.crt`, `server.key`).
    fn certificates(dir: &Path) {
        let made = std::process::Command::new("sh")
            .current_dir(dir)
            .arg("-ec")
            .arg(
                "for ca in ca other-ca; do\n\
                 openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=confgate-test-$ca \
                   -keyout $ca.key -out $ca.crt\n\
                 done\n\
                 openssl req -newkey rsa:2048 -nodes -subj /CN=confgate-test-server \
                   -keyout server.key -out server.csr\n\
                 printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext\n\
                 openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
                   -extfile ext -out server.crt",
            )
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl must be installed");
        assert!(made.success());
    }

    /// An HTTPS server on loopback with `dir`'s `server.crt`: every request whose handshake succeeds
    /// is answered 200.
    fn tls_server(dir: &Path) -> u16 {
        use std::io::{Read as _, Write as _};
        let certs = CertificateDer::pem_file_iter(dir.join("server.crt"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { continue };
                // A client gone silent cannot hold the thread.
                let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let Ok(tls) = rustls::ServerConnection::new(config.clone()) else {
                    continue;
                };
                let mut stream = rustls::StreamOwned::new(tls, tcp);
                let (mut head, mut buf) = (Vec::new(), [0u8; 4096]);
                // A refused handshake ends the read with an error; an accepted one reads the request.
                while let Ok(n @ 1..) = stream.read(&mut buf) {
                    head.extend_from_slice(&buf[..n]);
                    if head.windows(4).any(|w| w == b"\r\n\r\n") {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        );
                        let _ = stream.flush();
                        break;
                    }
                }
            }
        });
        port
    }

    /// An API server whose certificate a CA other than the kubeconfig's signed is refused: the
    /// request fails with rustls' `InvalidCertificate(UnknownIssuer)`, said as such, and the message
    /// holds neither the token nor anything of the certificates. The same server with its own CA in
    /// the kubeconfig answers, so it is the trust that failed.
    #[tokio::test]
    async fn a_server_whose_certificate_another_ca_signed_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        certificates(tmp.path());
        let server = format!("https://127.0.0.1:{}", tls_server(tmp.path()));
        let user = "    token: secret-token-4711\n";
        let request = || hyper::Request::get("/version").body(Vec::new()).unwrap();

        let wrong = kubeconfig_at(
            tmp.path(),
            &server,
            user,
            "    certificate-authority: other-ca.crt\n",
        )
        .unwrap()
        .client()
        .await
        .unwrap();
        let e = wrong.request_text(request()).await.unwrap_err();
        assert!(
            matches!(
                tls_error(&e),
                Some(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer
                ))
            ),
            "{e:?}"
        );
        let said = explain(&e, "get on /version");
        assert!(
            said.contains("invalid peer certificate: UnknownIssuer")
                && said.contains("the API server's certificate is not trusted")
                && said.contains("certificate-authority"),
            "{said}"
        );
        let pems: Vec<String> = ["ca.crt", "other-ca.crt", "server.crt"]
            .iter()
            .map(|f| std::fs::read_to_string(tmp.path().join(f)).unwrap())
            .collect();
        for secret in ["secret-token-4711", "confgate-test-", "BEGIN"] {
            assert!(!said.contains(secret), "{said}");
        }
        for pem in &pems {
            let body = pem.lines().nth(1).unwrap();
            assert!(!said.contains(body), "{said}");
        }

        let right = kubeconfig_at(
            tmp.path(),
            &server,
            user,
            "    certificate-authority: ca.crt\n",
        )
        .unwrap()
        .client()
        .await
        .unwrap();
        assert_eq!(right.request_text(request()).await.unwrap(), "ok");
    }
}
