//! Outgoing HTTP: the client that reload POSTs and `confirm`'s metric reads go through (with its TLS
//! roots), and the plain blocking GET of `confgate probe`. Knows nothing of settings or status.
//!
//! The client trusts the system roots (read at its first https connection) plus `--reload-ca` (TLS
//! with the `tls` feature). `Wire` sees the first write on a connection, which is how the reload
//! worker says a request is on its way.
//! Imports nothing of the crate but the core's `Url`, which `request` makes a request of.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::sync::watch;

use crate::values::Url;

/// A request of `method` to `url`, without its body: the URI the core made of the URL's parts,
/// confgate's `User-Agent`, and the URL's credentials, if any, as an `Authorization` header marked
/// sensitive (hyper never logs it).
pub(crate) fn request(method: hyper::Method, url: &Url) -> hyper::http::request::Builder {
    let req = hyper::Request::builder()
        .method(method)
        .uri(url.uri())
        .header(
            hyper::header::USER_AGENT,
            concat!("confgate/", env!("CARGO_PKG_VERSION")),
        );
    let Some(credentials) = url.credentials() else {
        return req;
    };
    match hyper::header::HeaderValue::from_str(credentials.header_value()) {
        Ok(mut value) => {
            value.set_sensitive(true);
            req.header(hyper::header::AUTHORIZATION, value)
        }
        // Never for what the core accepts (base64; `url_agrees` holds it): given as text, the same
        // value fails the builder, so `body` reports it and no request goes without its credentials.
        Err(_) => req.header(hyper::header::AUTHORIZATION, credentials.header_value()),
    }
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("CA file {path}: {what}")]
    Ca { path: String, what: String },
    #[cfg(feature = "tls")]
    #[error("TLS set-up: {0}")]
    Tls(String),
}

#[cfg(feature = "tls")]
type Connector = LazyTls;
#[cfg(not(feature = "tls"))]
type Connector = hyper_util::client::legacy::connect::HttpConnector;

/// The HTTP(S) client reload POSTs and `confirm`'s reads go through.
#[derive(Clone, Debug)]
pub(crate) struct Client(
    hyper_util::client::legacy::Client<Wired<Connector>, Empty<Bytes>>,
    Arc<Wire>,
);

impl Client {
    pub(crate) async fn send(
        &self,
        req: hyper::Request<Empty<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        self.0.request(req).await
    }

    /// What tells that a request of this client is on its way.
    pub(crate) fn wire(&self) -> &Arc<Wire> {
        &self.1
    }
}

/// Tells that a request is on its way: armed with a tag before the request, it fires that tag once,
/// at the first write on any of the client's connections (the request, which the client's
/// connection task writes). Whoever waits for it learns that no work of this thread stands between
/// the request and the component.
#[derive(Debug)]
pub(crate) struct Wire {
    armed: AtomicU64,
    fired: watch::Sender<u64>,
}

impl Wire {
    fn new() -> Wire {
        Wire {
            armed: AtomicU64::new(0),
            fired: watch::Sender::new(0),
        }
    }

    /// Fires `tag` (non-zero) at the next write.
    pub(crate) fn arm(&self, tag: u64) {
        self.armed.store(tag, Ordering::Relaxed);
    }

    /// Fires `tag` now: the request went another way, or will not go.
    pub(crate) fn fire_now(&self, tag: u64) {
        self.armed.store(0, Ordering::Relaxed);
        self.fired.send_if_modified(|t| {
            let newer = tag > *t;
            *t = (*t).max(tag);
            newer
        });
    }

    fn fire(&self) {
        let tag = self.armed.swap(0, Ordering::Relaxed);
        if tag != 0 {
            self.fire_now(tag);
        }
    }

    /// The newest tag fired.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.fired.subscribe()
    }
}

/// A connector whose connections fire the [`Wire`].
#[derive(Clone, Debug)]
pub(crate) struct Wired<C> {
    inner: C,
    wire: Arc<Wire>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower_service::Service<hyper::Uri> for Wired<C>
where
    C: tower_service::Service<hyper::Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = WiredIo<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: hyper::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let wire = self.wire.clone();
        Box::pin(async move {
            let io = connecting.await.map_err(Into::into)?;
            Ok(WiredIo { io, wire })
        })
    }
}

/// A connection that fires its [`Wire`] when written to.
#[derive(Debug)]
pub(crate) struct WiredIo<T> {
    io: T,
    wire: Arc<Wire>,
}

impl<T: Connection> Connection for WiredIo<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for WiredIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for WiredIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.wire.fire();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.wire.fire();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl Client {
    /// A client trusting the system's roots and, for https targets with a private CA, `ca_file` (PEM).
    pub(crate) fn new(ca_file: Option<&std::path::Path>) -> Result<Client, Error> {
        let builder =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
        #[cfg(feature = "tls")]
        let connector = LazyTls::new(ca_file)?;
        #[cfg(not(feature = "tls"))]
        let connector = {
            if let Some(path) = ca_file {
                return Err(Error::Ca {
                    path: path.display().to_string(),
                    what: "this build has no TLS support (cargo feature tls)".into(),
                });
            }
            hyper_util::client::legacy::connect::HttpConnector::new()
        };
        let wire = Arc::new(Wire::new());
        let connector = Wired {
            inner: connector,
            wire: wire.clone(),
        };
        Ok(Client(builder.build(connector), wire))
    }
}

/// The connector of a client with TLS: plain TCP for http targets; for https ones, rustls trusting
/// the system roots plus the `--reload-ca` certificates. The system roots are read at the first
/// https connection, on the blocking pool, not at start: on a node or host that has them they take
/// about 250 KiB of heap (a bundle file and a dir, each parsed), which a sidecar whose targets are
/// all plain HTTP never needs. The CA file is read at start, so a bad one still stops start-up.
#[cfg(feature = "tls")]
#[derive(Clone)]
pub(crate) struct LazyTls {
    http: hyper_util::client::legacy::connect::HttpConnector,
    ca: Arc<[rustls::pki_types::CertificateDer<'static>]>,
    tls: Arc<std::sync::OnceLock<TlsConnector>>,
}

#[cfg(feature = "tls")]
type TlsConnector =
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;

#[cfg(feature = "tls")]
impl std::fmt::Debug for LazyTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyTls")
            .field("ca_certificates", &self.ca.len())
            .field("roots_read", &self.tls.get().is_some())
            .finish()
    }
}

#[cfg(feature = "tls")]
impl LazyTls {
    fn new(ca_file: Option<&std::path::Path>) -> Result<LazyTls, Error> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut ca: Vec<CertificateDer<'static>> = Vec::new();
        if let Some(path) = ca_file {
            let ca_err = |what: String| Error::Ca {
                path: path.display().to_string(),
                what,
            };
            ca = CertificateDer::pem_file_iter(path)
                .map_err(|e| ca_err(e.to_string()))?
                .collect::<Result<_, _>>()
                .map_err(|e| ca_err(format!("not a PEM certificate file ({e})")))?;
            if ca.is_empty() {
                return Err(ca_err("holds no PEM certificate".into()));
            }
            // Each is checked now (as adding it to the roots at the first connection does), so a
            // file that is PEM but no certificate stops start-up as before.
            let mut roots = rustls::RootCertStore::empty();
            for c in &ca {
                roots.add(c.clone()).map_err(|e| ca_err(e.to_string()))?;
            }
        }
        // The crypto provider's protocol versions, checked at start as before (they cannot change).
        tls_builder()?;
        Ok(LazyTls {
            http: hyper_util::client::legacy::connect::HttpConnector::new(),
            ca: ca.into(),
            tls: Arc::new(std::sync::OnceLock::new()),
        })
    }

    /// The https connector: the system roots (read now; an image built FROM scratch has none, which
    /// is fine when --reload-ca names the CA) and the CA file's certificates.
    fn tls_connector(
        mut http: hyper_util::client::legacy::connect::HttpConnector,
        ca: &[rustls::pki_types::CertificateDer<'static>],
    ) -> Result<TlsConnector, Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        for c in ca {
            roots
                .add(c.clone())
                .map_err(|e| Error::Tls(e.to_string()))?;
        }
        let config = tls_builder()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // hyper's connector refuses an https URI unless told the TLS layer above handles it.
        http.enforce_http(false);
        Ok(hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http))
    }

    /// Whether the system roots were read (the first https connection was made).
    #[cfg(test)]
    fn roots_read(&self) -> bool {
        self.tls.get().is_some()
    }
}

#[cfg(feature = "tls")]
fn tls_builder() -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>, Error>
{
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))
}

#[cfg(feature = "tls")]
impl tower_service::Service<hyper::Uri> for LazyTls {
    type Response = hyper_rustls::MaybeHttpsStream<hyper_util::rt::TokioIo<tokio::net::TcpStream>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Both connectors are always ready (hyper's HttpConnector and rustls' over it).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: hyper::Uri) -> Self::Future {
        if uri.scheme() != Some(&hyper::http::uri::Scheme::HTTPS) {
            let connecting = self.http.call(uri);
            return Box::pin(
                async move { Ok(hyper_rustls::MaybeHttpsStream::Http(connecting.await?)) },
            );
        }
        if let Some(tls) = self.tls.get() {
            let connecting = tls.clone().call(uri);
            return Box::pin(connecting);
        }
        let (http, ca, cell) = (self.http.clone(), self.ca.clone(), self.tls.clone());
        Box::pin(async move {
            // Reading the roots is file I/O: kept off the runtime's threads.
            let built = tokio::task::spawn_blocking(move || LazyTls::tls_connector(http, &ca))
                .await
                .map_err(|e| Error::Tls(format!("reading the system roots: {e}")))??;
            let mut tls = cell.get_or_init(|| built).clone();
            tls.call(uri).await
        })
    }
}

/// Why `get` got no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GetError {
    #[error("no answer in time")]
    Timeout,
    #[error("cannot resolve {host_port}: {why}")]
    Resolve {
        host_port: String,
        why: std::io::Error,
    },
    #[error("{0} resolves to no address")]
    NoAddress(String),
    #[error("cannot connect to {addr}: {why}")]
    Connect {
        addr: std::net::SocketAddr,
        why: std::io::Error,
    },
    #[error("{0}")]
    Io(std::io::Error),
    #[error("answer too large")]
    TooLarge,
    #[error("not an HTTP/1.1 answer")]
    NotHttp,
}

/// The most of an answer `get` reads: every endpoint's answer is bounded far below it.
const GET_MAX: usize = 1024 * 1024;

/// GETs `path` from `host_port` over plain HTTP/1.1, blocking, all within `deadline`: the status
/// code and the body as text. `confgate probe`'s one request, run every few seconds in every pod, so
/// it is a connect, a write and a read on one socket: no async runtime, no pool, no TLS.
pub(crate) fn get(
    host_port: &str,
    path: &str,
    deadline: std::time::Instant,
) -> Result<(u16, String), GetError> {
    use std::io::{Read, Write};
    let left = || {
        deadline
            .checked_duration_since(std::time::Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(GetError::Timeout)
    };
    let addrs =
        std::net::ToSocketAddrs::to_socket_addrs(host_port).map_err(|why| GetError::Resolve {
            host_port: host_port.to_owned(),
            why,
        })?;
    let mut last = GetError::NoAddress(host_port.to_owned());
    let mut conn = None;
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, left()?) {
            Ok(s) => {
                conn = Some(s);
                break;
            }
            Err(why) => last = GetError::Connect { addr: a, why },
        }
    }
    let mut s = conn.ok_or(last)?;
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => GetError::Timeout,
        _ => GetError::Io(e),
    };
    s.set_write_timeout(Some(left()?)).map_err(io)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(io)?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        s.set_read_timeout(Some(left()?)).map_err(io)?;
        match s.read(&mut chunk).map_err(io)? {
            0 => break,
            n if buf.len() + n > GET_MAX => return Err(GetError::TooLarge),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
    parse_answer(&buf).ok_or(GetError::NotHttp)
}

/// The status code and body of a complete HTTP/1.x answer (its connection closed after it).
fn parse_answer(raw: &[u8]) -> Option<(u16, String)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let code = lines
        .next()?
        .strip_prefix("HTTP/1.")?
        .get(2..5)?
        .parse()
        .ok()?;
    let mut chunked = false;
    let mut length = None;
    for l in lines {
        let (k, v) = l.split_once(':')?;
        let v = v.trim();
        if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v.eq_ignore_ascii_case("chunked");
        } else if k.eq_ignore_ascii_case("content-length") {
            length = Some(v.parse::<usize>().ok()?);
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        let mut out = Vec::new();
        let mut at = rest;
        loop {
            let nl = at.windows(2).position(|w| w == b"\r\n")?;
            let size = std::str::from_utf8(&at[..nl]).ok()?;
            let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            out.extend_from_slice(at.get(nl + 2..nl + 2 + size)?);
            at = at.get(nl + 4 + size..)?;
        }
        out
    } else {
        rest.get(..length.unwrap_or(rest.len()))?.to_vec()
    };
    Some((code, String::from_utf8_lossy(&body).into_owned()))
}

#[cfg(test)]
mod url_agrees;

#[cfg(test)]
mod tests {
    use super::parse_answer;

    #[test]
    fn answers_with_a_length_chunks_or_neither() {
        let p = |s: &str| parse_answer(s.as_bytes());
        assert_eq!(
            p("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n"),
            Some((200, "ok\n".into()))
        );
        assert_eq!(
            p(
                "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwait\r\n3\r\ning\r\n0\r\n\r\n"
            ),
            Some((503, "waiting".into()))
        );
        assert_eq!(
            p("HTTP/1.0 204 No Content\r\n\r\n"),
            Some((204, String::new()))
        );
        // Cut short: the length promises more than came.
        assert_eq!(p("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nok"), None);
        assert_eq!(p("SSH-2.0-OpenSSH\r\n\r\n"), None);
    }

    /// A client whose targets are all plain HTTP never reads the system roots (about 250 KiB of
    /// heap where a host has them); the first https connection does, and later ones reuse them.
    #[cfg(feature = "tls")]
    #[tokio::test]
    async fn the_system_roots_are_read_at_the_first_https_connection_only() {
        use tower_service::Service;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts and closes: a plain connection succeeds, a TLS handshake fails.
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                drop(conn);
            }
        });
        let mut connector = super::LazyTls::new(None).unwrap();
        let plain = format!("http://{addr}/").parse().unwrap();
        assert!(connector.call(plain).await.is_ok());
        assert!(
            !connector.roots_read(),
            "a plain HTTP connection read the roots"
        );
        let tls = format!("https://{addr}/").parse().unwrap();
        assert!(connector.call(tls).await.is_err());
        assert!(
            connector.roots_read(),
            "an https connection did not read the roots"
        );
    }
}
