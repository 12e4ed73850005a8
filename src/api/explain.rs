//! What an API error says to the operator: [`explain`]'s one line, naming the RBAC rule a 403 calls
//! for, and [`tls_error`], the TLS failure behind a connection error.

/// The TLS error somewhere in `e`'s sources, if the connection failed in TLS. An `io::Error` shows
/// its inner error's text but gives that error's own source, so each one's inner error is looked into.
pub(crate) fn tls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(r) = e.downcast_ref::<rustls::Error>() {
        return Some(r);
    }
    if let Some(inner) = e
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
        && let Some(r) = tls_error(inner)
    {
        return Some(r);
    }
    e.source().and_then(tls_error)
}

/// A one-line explanation of an API error, naming the RBAC rule a 403 calls for.
pub(crate) fn explain(e: &kube::Error, rule: &str) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => {
            format!("forbidden: {}; the ServiceAccount needs {rule}", s.message)
        }
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        // kube's own text ("ServiceError: client error (Connect)") hides the cause: its sources
        // say it ("Connection refused").
        other => {
            use std::error::Error as _;
            let mut out = other.to_string();
            let mut cur = other.source();
            while let Some(c) = cur {
                let c_text = c.to_string();
                if !out.contains(&c_text) {
                    out.push_str(": ");
                    out.push_str(&c_text);
                }
                cur = c.source();
            }
            // rustls says `UnknownIssuer`; the operator needs to hear which CA is meant.
            if let Some(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )) = tls_error(other)
            {
                out.push_str(
                    "; the API server's certificate is not trusted: no CA confgate verifies it \
                     against signed it (the kubeconfig cluster's certificate-authority or \
                     certificate-authority-data; in a pod, the ServiceAccount's ca.crt)",
                );
            }
            out
        }
    }
}
