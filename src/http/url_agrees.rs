//! The core's `Url` and the HTTP client's types agree: the core accepts a URL exactly when its text,
//! the userinfo taken out, is an `http::Uri`, with the same parts, and refuses it naming the fault as
//! the client does (the settings' errors are as they were when the client's parser read them); what
//! it accepts, [`request`] makes a request of, with its credentials in a sensitive header.

use base64::Engine;
use bytes::Bytes;
use http_body_util::Empty;
use proptest::prelude::*;

use super::request;
use crate::values::{Url, UrlError};

/// The text the client's parser read before the core had its own: the scheme, then what follows
/// the userinfo (the last `@` before the first `/`, `?` or `#`), or `None` when the core refuses the
/// text before any parser would see it (another scheme, no host).
fn plain(text: &str) -> Option<String> {
    let (scheme, rest) = ["http://", "https://"]
        .into_iter()
        .find_map(|p| text.strip_prefix(p).map(|rest| (p, rest)))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_on = match authority.rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    (!host_on.is_empty() && !host_on.starts_with(['/', '?', '#', ':']))
        .then(|| format!("{scheme}{host_on}"))
}

/// The userinfo's `user:password`, %-decoded, when it has one that decodes.
fn userinfo(text: &str) -> Option<Vec<u8>> {
    let rest = text.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let info = &authority[..authority.rfind('@')?];
    let (user, password) = info.split_once(':').unwrap_or((info, ""));
    let mut pair = decode(user)?;
    pair.push(b':');
    pair.extend(decode(password)?);
    Some(pair)
}

fn decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        out.push(if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?
        } else {
            b
        });
    }
    Some(out)
}

/// Checks the one text, panicking with what differs.
fn agrees(text: &str) {
    let core = text.parse::<Url>();
    let Some(plain) = plain(text) else {
        assert!(
            matches!(core, Err(UrlError::Scheme | UrlError::NoHost)),
            "{text:?}: {core:?}"
        );
        return;
    };
    let client = plain.parse::<http::Uri>();
    let url = match (core, client) {
        (Ok(url), Ok(uri)) => {
            assert_eq!(
                url.uri().parse::<http::Uri>().ok(),
                Some(uri.clone()),
                "{text:?}"
            );
            assert_eq!(
                (
                    Some(url.scheme()),
                    Some(url.host()),
                    url.port(),
                    url.path(),
                    url.query()
                ),
                (
                    uri.scheme_str(),
                    uri.host(),
                    uri.port_u16(),
                    uri.path(),
                    uri.query()
                ),
                "{text:?}"
            );
            assert_eq!(userinfo(text).is_some(), url.credentials().is_some());
            url
        }
        (Err(UrlError::Invalid(fault)), Err(e)) => {
            assert_eq!(fault.to_string(), e.to_string(), "{text:?}");
            return;
        }
        // A port no connection can be made to, which the client's parser lets through (its
        // connector would use the scheme's port instead): the core refuses it.
        (Err(UrlError::Port), Ok(uri)) => {
            let port = uri.port().map(|p| p.as_str().to_owned());
            assert!(
                port.as_deref().is_none_or(|p| {
                    p.is_empty()
                        || p.len() > 5
                        || !p.bytes().all(|b| b.is_ascii_digit())
                        || !matches!(p.parse::<u16>(), Ok(1..))
                }) && plain.contains(':'),
                "{text:?}: the core refused a port the client reads as {port:?}"
            );
            return;
        }
        // The credentials are read after the URI: a bad %-escape in them is refused as such.
        (Err(UrlError::Escape), Ok(_)) => {
            assert!(userinfo(text).is_none(), "{text:?}");
            return;
        }
        (core, client) => panic!("{text:?}: the core says {core:?}, the client {client:?}"),
    };
    let req = request(hyper::Method::POST, &url)
        .body(Empty::<Bytes>::new())
        .unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(req.uri(), &plain.parse::<http::Uri>().unwrap(), "{text:?}");
    let auth = req.headers().get(hyper::header::AUTHORIZATION);
    match userinfo(text) {
        Some(pair) => {
            let auth = auth.unwrap();
            assert!(auth.is_sensitive(), "{text:?}");
            let basic = base64::engine::general_purpose::STANDARD.encode(pair);
            assert_eq!(auth.to_str().unwrap(), format!("Basic {basic}"));
            for shown in [url.to_string(), format!("{url:?}"), format!("{auth:?}")] {
                assert!(!shown.contains(&basic), "{text:?}: {shown}");
            }
        }
        None => assert!(auth.is_none(), "{text:?}"),
    }
}

/// The URL tests' own cases and the settings', then hostile ones.
const CORPUS: &[&str] = &[
    "http://h:99999/",
    "http://h:0/",
    "http://h:/",
    "http://h:abc/",
    "http://[::1]:/r",
    "http://u:%+f@h/",
    "http://127.0.0.1:9090/-/reload",
    "http://ops:PASS%40word@127.0.0.1:9090/metrics?x=1",
    "https://app:8443/-/reload",
    "ftp://u:SECRET@x/",
    "http://u:SECRET@/x",
    "http://u:SECRET@",
    "http://u:SECRET%zz@x/",
    "http://u:SECRET@x y/",
    "http://",
    "https://",
    "http://x/metrics",
    "http://127.0.0.1/r",
    "http://[::1]:8080/reload",
    "http://localhost:9090/-/reload",
    "http://169.254.169.254/latest",
    "https://user:pw@component.internal:8443/reload",
    "https://x:secret@elsewhere.example:8443/reload",
    // Userinfo: several `@`, empty parts, escapes, what only a password may hold.
    "http://a@b@h/",
    "http://@h/",
    "http://:@h/",
    "http://u:@h/",
    "http://:p@h/",
    "http://u:p:q@h/",
    "http://u%3Ap:w%2F@h/",
    "http://u:p w\t\"<>@h/",
    "http://u:%@h/",
    "http://u:%4@h/",
    "http://u:%+f@h/",
    "http://u:%-1@h/",
    "http://u:%é@h/",
    "http://é:ü@h/",
    "http://u:p@h@/",
    "http://u:p@:80/",
    "http://u:p@?q",
    // IPv6 literals and zones.
    "http://[::1]/",
    "http://[::1]",
    "http://[fe80::1%25eth0]:8080/",
    "http://[fe80::1%eth0]/",
    "http://[::1/",
    "http://::1]/",
    "http://[::1]]/",
    "http://[[::1]/",
    "http://[::1]:80:90/",
    "http://[1:2:3:4:5:6:7:8]:80/",
    "http://[1:2:3:4:5:6:7:8:9]/",
    "http://[1:2:3:4:5:6:7:8:9:10]/",
    "http://[::::::::]/",
    "http://[:::::::::]/",
    "http://[]/",
    "http://h[::1]/",
    "http://[::1]h:80/",
    "http://%[::1]/",
    // Ports.
    "http://h:0/",
    "http://h:80/",
    "http://h:65535/",
    "http://h:65536/",
    "http://h:99999999999/",
    "http://h:-1/",
    "http://h:+80/",
    "http://h:0080/",
    "http://h:/",
    "http://h:8o/",
    "http://h:1:2/",
    "http://h::/",
    "http://:80/",
    // Control characters, spaces, non-ASCII, characters a URI escapes.
    "http://h\n/",
    "http://h/\r\n",
    "http://h/a\tb",
    "http://h/\u{7f}",
    "http://h/\0",
    "http://h /",
    "http://h/a b",
    "http://h/?a b",
    "http://h/é?ü",
    "http://hé/",
    "http://h/<>",
    "http://h/?<",
    "http://h/`",
    "http://h/?`",
    "http://h/\"{}|\\^",
    "http://h/?\"",
    "http://h/?{}|\\^`",
    "http://h\"/",
    "http://h{/",
    "http://h|/",
    "http://h\\/",
    "http://h^/",
    "http://h`/",
    "http://h</",
    // `%` escapes.
    "http://h/%20",
    "http://h/%zz",
    "http://h/%",
    "http://h/?%",
    "http://h%20/",
    "http://h%/",
    // Fragments.
    "http://h#f",
    "http://h/#",
    "http://h/p#f g<>\n",
    "http://h/p?q#f",
    "http://h?q",
    "http://h?",
    "http://h/??#?",
    "http://h#@x",
    "http://u:p#ss/w@h/m#x",
    // Other schemes and shapes.
    "HTTP://h/",
    "Http://h/",
    "http:/h/",
    "http:h",
    "https:///x",
    "http://h",
    "http://H.Example/P",
    "http://h/./../a",
    "http://h//",
];

#[test]
fn the_core_accepts_what_the_client_accepts_with_the_same_parts() {
    for text in CORPUS {
        agrees(text);
    }
    // The client's length bound, in the host and in the path, and the userinfo outside it.
    for (room, filler) in [(9, "/"), (8, "")] {
        for extra in [0, 1] {
            let text = format!("http://h{filler}{}", "a".repeat(65534 - room + extra));
            assert_eq!(
                text.parse::<Url>().is_ok(),
                extra == 0,
                "{} bytes",
                text.len()
            );
            agrees(&text);
        }
    }
    agrees(&format!("http://{}@h/", "u".repeat(70_000)));
    agrees(&format!("http://h/?{}", "é".repeat(40_000)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Texts made of the bytes that have a rule somewhere in a URL.
    #[test]
    fn any_text_of_the_characters_that_matter(
        scheme in prop::sample::select(vec!["http://", "https://"]),
        rest in "[a1:@\\[\\]%/?#. \"<>`{}|\\\\^~\t\né+-]{0,24}",
    ) {
        agrees(&format!("{scheme}{rest}"));
    }
}
