//! An http(s) URL a setting names (the reload target, the metrics that confirm a reload), as one type
//! that cannot print its secret: a `user:password@` in it is sent as HTTP Basic credentials and shown
//! nowhere (`Display` and `Debug` put `<credentials removed>` in its place, the request's URI has none).
//!
//! `redact` does the same for a text that failed to parse as a URL, so no error about a bad value
//! repeats the credentials it held.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// What stands for the userinfo of a URL wherever it is shown.
pub(crate) const REMOVED: &str = "<credentials removed>";

/// The longest URL text (without its userinfo) a request can be sent to: the HTTP client's own bound
/// (`http::Uri`, 2^16 - 2 bytes).
const MAX_LEN: usize = u16::MAX as usize - 1;

/// An `http://` or `https://` URL with a host. The text with its userinfo is never kept: only the text
/// as shown (userinfo replaced), its parts (the request's URI is made of them, without the userinfo
/// or fragment) and the [`Credentials`] its userinfo makes. Shared: a request carries it to the
/// worker on every reload.
///
/// What it accepts is what the HTTP client (`http::Uri`) accepts once the userinfo is taken out, with
/// the same parts: the edge builds its request from [`Url::uri`] and [`Url::credentials`], and a test
/// there holds the two together over accepted and refused texts.
#[derive(Clone, PartialEq, Eq)]
pub struct Url(Arc<Parts>);

#[derive(PartialEq, Eq)]
struct Parts {
    shown: String,
    https: bool,
    /// `scheme://authority/path?query`: the request's URI, without userinfo or fragment (no longer
    /// than the text, so within the client's bound).
    uri: String,
    /// Where the authority ends in `uri` (it starts after the scheme's `://`).
    authority_end: usize,
    /// Where the query starts in `uri`, after its `?`, if there is one.
    query_at: Option<usize>,
    credentials: Option<Credentials>,
}

/// The `Authorization: Basic` value a URL's userinfo makes. Its `Debug` shows nothing of it, and it
/// has no `Display`: the edge puts it in a header it marks sensitive, and nowhere else.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials(String);

impl Credentials {
    /// The header's value, `Basic ` and the base64 of `user:password`: for the request only.
    pub fn header_value(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REMOVED)
    }
}

impl Url {
    /// The URI to send the request to, as text: the URL without its userinfo or its fragment (a
    /// request carries neither).
    pub fn uri(&self) -> &str {
        &self.0.uri
    }

    /// The `Authorization` header the URL's userinfo makes, if it has one.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.0.credentials.as_ref()
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.0.https { "https" } else { "http" }
    }

    fn authority(&self) -> &str {
        &self.0.uri[self.scheme().len() + 3..self.0.authority_end]
    }

    /// The host as written: an IPv6 literal with its brackets.
    pub fn host(&self) -> &str {
        let authority = self.authority();
        match authority.find(']') {
            Some(end) if authority.starts_with('[') => &authority[..=end],
            _ => authority.split(':').next().unwrap_or(authority),
        }
    }

    /// The port written after the authority's last `:`, when that is a number a port can be (none
    /// written, or not one, and the client uses the scheme's).
    pub fn port(&self) -> Option<u16> {
        let authority = self.authority();
        authority
            .rfind(':')
            .and_then(|i| authority[i + 1..].parse().ok())
    }

    /// The path, `/` when none is written.
    pub fn path(&self) -> &str {
        let end = self.0.query_at.map_or(self.0.uri.len(), |q| q - 1);
        match &self.0.uri[self.0.authority_end..end] {
            "" => "/",
            path => path,
        }
    }

    /// The query, after its `?`.
    pub fn query(&self) -> Option<&str> {
        self.0.query_at.map(|q| &self.0.uri[q..])
    }

    /// Whether it names the pod's own loopback (`localhost`, `127.0.0.0/8`, `::1`): a place inside
    /// the pod's network namespace, which no annotation can widen.
    pub(crate) fn is_loopback(&self) -> bool {
        let host = self.host().trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// Whether `other` is the same URL as shown: the same URI (its authority in any case), and
    /// credentials or none alike (which ones is not compared: they are shown nowhere, and a record of
    /// the URL holds none).
    pub fn same_as_shown(&self, other: &Url) -> bool {
        self.0.https == other.0.https
            && self.authority().eq_ignore_ascii_case(other.authority())
            && self.path() == other.path()
            && self.query() == other.query()
            && self.0.credentials.is_some() == other.0.credentials.is_some()
    }

    /// Whether `other` is sent to the same place: scheme, host and port.
    pub(crate) fn same_origin(&self, other: &Url) -> bool {
        self.0.https == other.0.https
            && self.host().eq_ignore_ascii_case(other.host())
            && self.port() == other.port()
    }

    #[cfg(not(feature = "tls"))]
    pub fn is_https(&self) -> bool {
        self.0.https
    }
}

/// Why a text is not a [`Url`]. No variant repeats the text: it may hold credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("the URL must start with http:// or https://")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    /// What the HTTP client would refuse in it (named as its URI parser names it: the fault, not the
    /// text).
    #[error("not a valid URL ({0})")]
    Invalid(UrlFault),
    #[error("the URL's credentials hold a bad %-escape")]
    Escape,
    /// A `:` after the host with no port a connection can be made to after it: empty, not a number,
    /// 0 or above 65535 (the client would fall back to the scheme's port, a place nobody wrote).
    #[error(
        "the URL's port must be a number from 1 to 65535 (or left out, with its `:`, for the scheme's)"
    )]
    Port,
}

/// What makes a URL's text one no request can be sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UrlFault {
    /// A byte a URI may not hold where it stands (a space, a control character, `<`, ...).
    #[error("invalid uri character")]
    Character,
    /// The host and port do not make an authority: brackets, colons or a `%` out of place.
    #[error("invalid authority")]
    Authority,
    #[error("uri too long")]
    TooLong,
}

impl FromStr for Url {
    type Err = UrlError;
    /// Reads `http(s)://[user[:password]@]host[:port][/path][?query][#fragment]`; an error never
    /// repeats the text.
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
        if scheme.len() + host_on.len() > MAX_LEN {
            return Err(UrlError::Invalid(UrlFault::TooLong));
        }
        let end = authority_end(host_on.as_bytes()).map_err(UrlError::Invalid)?;
        let (path, query) = path_and_query(&host_on[end..]).map_err(UrlError::Invalid)?;
        check_port(&host_on[..end])?;
        let credentials = userinfo.map(basic).transpose()?;
        let mut uri = format!("{scheme}{}", &host_on[..end]);
        let authority_end = uri.len();
        uri.push_str(path);
        let query_at = query.map(|q| {
            uri.push('?');
            let at = uri.len();
            uri.push_str(q);
            at
        });
        let shown = match userinfo {
            Some(_) => format!("{scheme}{REMOVED}@{host_on}"),
            None => format!("{scheme}{host_on}"),
        };
        Ok(Url(Arc::new(Parts {
            shown,
            https: scheme == "https://",
            uri,
            authority_end,
            query_at,
            credentials,
        })))
    }
}

/// A port written after the host (past an IPv6 literal's `]`) is one a connection can be made to.
fn check_port(authority: &str) -> Result<(), UrlError> {
    let after_host = authority
        .rfind(']')
        .map_or(authority, |end| &authority[end + 1..]);
    let Some(colon) = after_host.find(':') else {
        return Ok(());
    };
    let port = &after_host[colon + 1..];
    let digits = !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
    match port.parse::<u16>() {
        Ok(1..) if digits => Ok(()),
        _ => Err(UrlError::Port),
    }
}

/// Where the authority (`host[:port]`, the userinfo taken out) at the start of `text` ends, at its
/// first `/`, `?` or `#`: the HTTP client's rules. Its bytes are a URI's own; an IPv6 literal is in
/// one pair of brackets; at most one `:` follows the host; a `%` stands only inside the brackets (a
/// zone).
fn authority_end(text: &[u8]) -> Result<usize, UrlFault> {
    let (mut colons, mut open, mut closed, mut percent) = (0, false, false, false);
    for (i, &b) in text.iter().enumerate() {
        match b {
            b'/' | b'?' | b'#' => return authority_checked(i, colons, open, closed, percent),
            b'%' => percent = true,
            b':' if colons >= 8 => return Err(UrlFault::Authority),
            b':' => colons += 1,
            b'[' if percent || open => return Err(UrlFault::Authority),
            b'[' => open = true,
            b']' if !open || closed => return Err(UrlFault::Authority),
            // The colons and `%` so far were the IPv6 literal's.
            b']' => (closed, colons, percent) = (true, 0, false),
            _ if is_authority_byte(b) => {}
            _ => return Err(UrlFault::Character),
        }
    }
    authority_checked(text.len(), colons, open, closed, percent)
}

fn authority_checked(
    end: usize,
    colons: u32,
    open: bool,
    closed: bool,
    percent: bool,
) -> Result<usize, UrlFault> {
    if open != closed || colons > 1 || percent {
        return Err(UrlFault::Authority);
    }
    Ok(end)
}

/// A byte that may stand in an authority as it is (besides `:`, `[`, `]` and `%`, which have rules).
fn is_authority_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!$&'()*+,-.;=@_~".contains(&b)
}

/// The path and the query of what follows the authority (empty, or from its `/`, `?` or `#`), the
/// fragment dropped: the HTTP client's rules for each (a path or query byte it accepts unescaped).
fn path_and_query(text: &str) -> Result<(&str, Option<&str>), UrlFault> {
    let bytes = text.as_bytes();
    let mut query = None;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'#' => return Ok(split(text, query, i)),
            b'?' if query.is_none() => query = Some(i),
            _ if query.is_none() && is_path_byte(b) => {}
            _ if query.is_some() && is_query_byte(b) => {}
            _ => return Err(UrlFault::Character),
        }
    }
    Ok(split(text, query, text.len()))
}

fn split(text: &str, query: Option<usize>, end: usize) -> (&str, Option<&str>) {
    match query {
        Some(q) => (&text[..q], Some(&text[q + 1..end])),
        None => (&text[..end], None),
    }
}

/// A byte a path may hold unescaped: printable ASCII but space, `<`, `>` and `` ` `` (and `?` and
/// `#`, which end it), or any byte of a multi-byte character.
fn is_path_byte(b: u8) -> bool {
    b >= 0x80 || (b.is_ascii_graphic() && !b"<>`".contains(&b))
}

/// A byte a query may hold unescaped: printable ASCII but space, `"`, `<` and `>` (and `#`, which
/// ends it), or any byte of a multi-byte character.
fn is_query_byte(b: u8) -> bool {
    b >= 0x80 || (b.is_ascii_graphic() && !b"\"<>".contains(&b))
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
    // Base64's alphabet: a header value whatever the userinfo held.
    Ok(Credentials(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )))
}

fn percent_decode(s: &str) -> Result<Vec<u8>, UrlError> {
    let bad = || UrlError::Escape;
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            // Two hex digits, no more and no less: `from_str_radix` alone takes a sign (`%+f`).
            let hex = [bytes.next().ok_or_else(bad)?, bytes.next().ok_or_else(bad)?];
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(bad());
            }
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
        assert_eq!(u.uri(), "http://127.0.0.1:9090/metrics?x=1");
        assert_eq!(
            (u.scheme(), u.host(), u.port(), u.path(), u.query()),
            ("http", "127.0.0.1", Some(9090), "/metrics", Some("x=1"))
        );
        let auth = u.credentials().unwrap();
        // base64("ops:PASS@word")
        assert_eq!(auth.header_value(), "Basic b3BzOlBBU1NAd29yZA==");
        assert!(!format!("{auth:?}").contains("b3Bz"));
        let plain: Url = "https://app:8443/-/reload".parse().unwrap();
        assert_eq!(plain.to_string(), "https://app:8443/-/reload");
        assert!(plain.credentials().is_none());
        assert_eq!(plain.scheme(), "https");
    }

    #[test]
    fn the_request_has_neither_userinfo_nor_fragment_and_a_path() {
        let u: Url = "http://u:p@[::1]:8080#top".parse().unwrap();
        assert_eq!(u.uri(), "http://[::1]:8080");
        assert_eq!(u.to_string(), "http://<credentials removed>@[::1]:8080#top");
        assert_eq!((u.host(), u.port(), u.path()), ("[::1]", Some(8080), "/"));
        assert!(u.is_loopback());
        let u: Url = "http://h?q=1#f".parse().unwrap();
        assert_eq!(
            (u.uri(), u.path(), u.query()),
            ("http://h?q=1", "/", Some("q=1"))
        );
    }

    #[test]
    fn each_fault_is_named_as_the_http_client_names_it() {
        for (bad, fault) in [
            ("http://h:1:2/", UrlFault::Authority),
            ("http://[::1/", UrlFault::Authority),
            ("http://h%41/", UrlFault::Authority),
            ("http://h x/", UrlFault::Character),
            ("http://h/a b", UrlFault::Character),
            ("http://h/?a\"b", UrlFault::Character),
        ] {
            assert_eq!(
                bad.parse::<Url>().unwrap_err(),
                UrlError::Invalid(fault),
                "{bad}"
            );
        }
        let long = format!("http://h/{}", "a".repeat(MAX_LEN));
        assert_eq!(
            long.parse::<Url>().unwrap_err().to_string(),
            "not a valid URL (uri too long)"
        );
    }

    #[test]
    fn a_port_is_one_a_connection_can_be_made_to_or_left_out() {
        for bad in [
            "http://h:99999/",
            "http://h:65536/",
            "http://h:0/",
            "http://h:/",
            "http://h:abc/",
            "http://h:+80/",
            "http://h:0000080/",
            "http://[::1]:/r",
            "http://[::1]:70000/r",
            "http://u:p@h:99999/",
        ] {
            assert_eq!(bad.parse::<Url>().unwrap_err(), UrlError::Port, "{bad}");
        }
        for (good, port) in [
            ("http://h/", None),
            ("http://h:1/", Some(1)),
            ("http://h:65535", Some(65535)),
            ("http://h:08080/", Some(8080)),
            ("http://[::1]/r", None),
            ("http://[::1]:9090/r", Some(9090)),
        ] {
            assert_eq!(good.parse::<Url>().unwrap().port(), port, "{good}");
        }
    }

    #[test]
    fn a_credentials_escape_is_two_hex_digits() {
        for bad in [
            "http://u:%+f@h/",
            "http://u:%-1@h/",
            "http://u:% f@h/",
            "http://%4@h/",
        ] {
            assert_eq!(bad.parse::<Url>().unwrap_err(), UrlError::Escape, "{bad}");
        }
        let ok: Url = "http://u:%2Bf@h/".parse().unwrap();
        // base64("u:+f")
        assert_eq!(ok.credentials().unwrap().header_value(), "Basic dTorZg==");
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
