//! Outgoing HTTP: the client that reload POSTs and `confirm`'s metric reads go through (with its TLS
//! roots), and the plain GET of `confgate probe`. Knows nothing of settings or status.

#[cfg(feature = "tls")]
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("CA file {path}: {what}")]
    Ca { path: String, what: String },
    #[error("TLS set-up: {0}")]
    Tls(String),
}

#[cfg(feature = "tls")]
type Connector = hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;
#[cfg(not(feature = "tls"))]
type Connector = hyper_util::client::legacy::connect::HttpConnector;

/// The HTTP(S) client reload POSTs and `confirm`'s reads go through.
#[derive(Clone, Debug)]
pub struct Client(hyper_util::client::legacy::Client<Connector, Empty<Bytes>>);

impl Client {
    pub(crate) async fn send(
        &self,
        req: hyper::Request<Empty<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        self.0.request(req).await
    }
}

impl Client {
    /// A client trusting the system's roots and, for https targets with a private CA, `ca_file` (PEM).
    pub fn new(ca_file: Option<&std::path::Path>) -> Result<Client, Error> {
        let builder =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
        #[cfg(feature = "tls")]
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(ca_file)?)
            .https_or_http()
            .enable_http1()
            .build();
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
        Ok(Client(builder.build(connector)))
    }
}

#[cfg(feature = "tls")]
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, Error> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    // An image built FROM scratch has no system roots; that is fine when --reload-ca names the CA.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = ca_file {
        let ca_err = |what: String| Error::Ca {
            path: path.display().to_string(),
            what,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| ca_err(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| ca_err(format!("not a PEM certificate file ({e})")))?;
        if certs.is_empty() {
            return Err(ca_err("holds no PEM certificate".into()));
        }
        for c in certs {
            roots.add(c).map_err(|e| ca_err(e.to_string()))?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::Tls(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
}

/// Why a request failed, with the cause the innermost error names: hyper's outer errors say only
/// "client error (Connect)" and "tcp connect error", the operating system says "Connection refused".
fn failure(e: &hyper_util::client::legacy::Error, authority: &str) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    if e.is_connect() {
        format!("cannot connect to {authority}: {cause}")
    } else if std::ptr::addr_eq(cause, e) {
        e.to_string()
    } else {
        format!("{e}: {cause}")
    }
}

/// GETs `url` over plain HTTP: the status code and the body as text.
pub(crate) async fn get(url: &str) -> Result<(u16, String), String> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<Bytes>>();
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{e}"))?;
    let authority = uri.authority().map(ToString::to_string).unwrap_or_default();
    let resp = client.get(uri).await.map_err(|e| failure(&e, &authority))?;
    let code = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}
