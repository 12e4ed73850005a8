//! An http(s) URL a setting names (the reload target, the metrics that confirm a reload), as one type
//! that cannot print its secret: a `user:password@` in it is sent as HTTP Basic credentials and shown
//! nowhere (`Display` and `Debug` put `<credentials removed>` in its place, the request's URI has none).
//!
//! `redact` does the same for a text that failed to parse as a URL, so no error about a bad value
//! repeats the credentials it held.

use std::fmt;
use std::str::FromStr;

/// What stands for the userinfo of a URL wherever it is shown.
pub(crate) const REMOVED: &str = "<credentials removed>";

/// An `http://` or `https://` URL with a host. The text with its userinfo is never kept: only the text
/// as shown (userinfo replaced), the URI requests go to (without it), and the `Authorization` header it
/// makes (marked sensitive). Shared: a request carries it to the worker on every reload.
#[derive(Clone, PartialEq, Eq)]
pub struct Url(std::sync::Arc<Parts>);

#[derive(PartialEq, Eq)]
struct Parts {
    shown: String,
    uri: http::Uri,
    credentials: Option<Credentials>,
}

/// The `Authorization: Basic` value a URL's userinfo makes. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
struct Credentials(http::HeaderValue);

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REMOVED)
    }
}

impl Url {
    /// The URI to send the request to: without the userinfo.
    pub fn uri(&self) -> &http::Uri {
        &self.0.uri
    }

    /// The `Authorization` header the URL's userinfo makes, if it has one (marked sensitive, so hyper
    /// never logs it).
    pub fn authorization(&self) -> Option<&http::HeaderValue> {
        self.0.credentials.as_ref().map(|c| &c.0)
    }

    /// Whether it names the pod's own loopback (`localhost`, `127.0.0.0/8`, `::1`): a place inside
    /// the pod's network namespace, which no annotation can widen.
    pub(crate) fn is_loopback(&self) -> bool {
        let Some(host) = self.0.uri.host() else {
            return false;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// Whether `other` is the same URL as shown: the same URI, and credentials or none alike (which
    /// ones is not compared: they are shown nowhere, and a record of the URL holds none).
    pub fn same_as_shown(&self, other: &Url) -> bool {
        self.0.uri == other.0.uri && self.0.credentials.is_some() == other.0.credentials.is_some()
    }

    /// Whether `other` is sent to the same place: scheme, host and port.
    pub(crate) fn same_origin(&self, other: &Url) -> bool {
        let (a, b) = (&self.0.uri, &other.0.uri);
        a.scheme() == b.scheme()
            && a.host().map(str::to_ascii_lowercase) == b.host().map(str::to_ascii_lowercase)
            && a.port_u16() == b.port_u16()
    }

    #[cfg(not(feature = "tls"))]
    pub fn is_https(&self) -> bool {
        self.0.uri.scheme() == Some(&http::uri::Scheme::HTTPS)
    }
}

/// Why a text is not a [`Url`]. No variant repeats the text: it may hold credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("the URL must start with http:// or https://")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    /// The URI parser's reason (it names the fault, not the text).
    #[error("not a valid URL ({0})")]
    Invalid(String),
    #[error("the URL's credentials cannot be sent")]
    Credentials,
    #[error("the URL's credentials hold a bad %-escape")]
    Escape,
}

impl FromStr for Url {
    type Err = UrlError;
    /// Reads `http(s)://[user[:password]@]host[:port][/path][?query]`; an error never repeats the text.
    fn from_str(s: &str) -> Result<Url, UrlError> {
        let (scheme, rest) = ["http://", "https://"]
            .into_iter()
            .find_map(|p| s.strip_prefix(p).map(|rest| (p, rest)))
            .ok_or(UrlError::Scheme)?;
        let auth_len = authority(rest).len();
        let (userinfo, host_on) = match rest[..auth_len].rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        if host_on.is_empty() || host_on.starts_with(['/', '?', '#', ':']) {
            return Err(UrlError::NoHost);
        }
        let plain = format!("{scheme}{host_on}");
        let uri = plain
            .parse::<http::Uri>()
            .map_err(|e| UrlError::Invalid(e.to_string()))?;
        let credentials = userinfo.map(basic).transpose()?;
        let shown = match userinfo {
            Some(_) => format!("{scheme}{REMOVED}@{host_on}"),
            None => plain,
        };
        Ok(Url(std::sync::Arc::new(Parts {
            shown,
            uri,
            credentials,
        })))
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.shown)
    }
}

impl fmt::Debug for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Url({:?})", self.0.shown)
    }
}

/// The Basic credentials of a userinfo `user[:password]`, percent-decoded as RFC 3986 writes them.
fn basic(userinfo: &str) -> Result<Credentials, UrlError> {
    use base64::Engine;
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let mut pair = percent_decode(user)?;
    pair.push(b':');
    pair.extend(percent_decode(password)?);
    let value = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    );
    let mut header = http::HeaderValue::from_str(&value).map_err(|_| UrlError::Credentials)?;
    header.set_sensitive(true);
    Ok(Credentials(header))
}

fn percent_decode(s: &str) -> Result<Vec<u8>, UrlError> {
    let bad = || UrlError::Escape;
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next().ok_or_else(bad)?, bytes.next().ok_or_else(bad)?];
            let hex = std::str::from_utf8(&hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
        } else {
            out.push(b);
        }
    }
    Ok(out)
}

/// The authority part of a URL after its scheme.
pub(crate) fn authority(rest: &str) -> &str {
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

/// `value` as it may be shown: the userinfo of every `scheme://user:password@` in it replaced, so an
/// error about a bad value never repeats a credential, whatever the setting and wherever it sits. A
/// value that failed to parse may hold a `#`, `/` or `?` unescaped in its password, so everything up
/// to the last `@` of the word is removed (a path with an `@` is shown cut, never a password).
pub fn redact(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find("://") {
        let (head, after) = rest.split_at(i + 3);
        out.push_str(head);
        let auth = after.split(char::is_whitespace).next().unwrap_or(after);
        match auth.rfind('@') {
            Some(at) => {
                out.push_str(REMOVED);
                rest = &after[at..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_sent_as_basic_credentials_and_shown_nowhere() {
        let u: Url = "http://ops:PASS%40word@127.0.0.1:9090/metrics?x=1"
            .parse()
            .unwrap();
        for shown in [u.to_string(), format!("{u:?}"), format!("{u:#?}")] {
            assert!(!shown.contains("PASS"), "{shown}");
            assert!(!shown.contains("ops"), "{shown}");
            assert!(shown.contains("127.0.0.1:9090/metrics?x=1"), "{shown}");
        }
        assert_eq!(
            u.to_string(),
            "http://<credentials removed>@127.0.0.1:9090/metrics?x=1"
        );
        assert_eq!(u.uri().to_string(), "http://127.0.0.1:9090/metrics?x=1");
        let auth = u.authorization().unwrap();
        assert!(auth.is_sensitive());
        // base64("ops:PASS@word")
        assert_eq!(auth.to_str().unwrap(), "Basic b3BzOlBBU1NAd29yZA==");
        assert!(!format!("{auth:?}").contains("b3Bz"));
        let plain: Url = "https://app:8443/-/reload".parse().unwrap();
        assert_eq!(plain.to_string(), "https://app:8443/-/reload");
        assert!(plain.authorization().is_none());
        assert_eq!(plain.uri().scheme_str(), Some("https"));
    }

    #[test]
    fn a_bad_url_is_refused_without_repeating_it() {
        for bad in [
            "ftp://u:SECRET@x/",
            "http://u:SECRET@/x",
            "http://u:SECRET@",
            "http://u:SECRET%zz@x/",
            "http://u:SECRET@x y/",
            "http://",
        ] {
            let e = bad.parse::<Url>().unwrap_err().to_string();
            assert!(!e.contains("SECRET"), "{bad}: {e}");
        }
    }

    #[test]
    fn redact_removes_every_userinfo_wherever_it_sits() {
        assert_eq!(
            redact(" HTTP://a:SECRET@h/x#m and https://b:c@d"),
            " HTTP://<credentials removed>@h/x#m and https://<credentials removed>@d"
        );
        assert_eq!(
            redact("http://u:p#ss/w@h/m#x"),
            "http://<credentials removed>@h/m#x"
        );
        assert_eq!(redact("http://h/a"), "http://h/a");
        assert_eq!(redact("signal:HUP:x"), "signal:HUP:x");
    }
}
