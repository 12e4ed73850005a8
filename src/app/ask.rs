//! `probe` (the exec probe's client of a running sidecar) and `status` (the fleet, read from the API
//! server).

use super::outcome::{Error, Outcome};
use crate::cli::ProbeArgs;
use crate::http;
use crate::settings;

/// `confgate status`: the table, then the summary; `No` unless every pod matches.
#[cfg(feature = "api")]
pub fn status(args: crate::cli::StatusArgs) -> Result<Outcome, Error> {
    let query = crate::api::status_cmd::Query {
        namespace: args.namespace,
        selector: args.selector,
        configmap: args.configmap,
    };
    let rt = super::startup::runtime()?;
    if args.wait {
        use crate::api::status_cmd::Waited;
        let timeout = args.timeout;
        let waited = rt.block_on(crate::api::status_cmd::wait(&query, timeout, |s| {
            println!("{s}")
        }))?;
        return Ok(match waited {
            Waited::Done(f) => {
                print!("{}", f.table());
                Outcome::Ok
            }
            Waited::Refused(why, f) => {
                print!("{}", f.table());
                Outcome::No(format!("refused: {why}"))
            }
            Waited::TimedOut(f) => {
                print!("{}", f.table());
                Outcome::No(format!(
                    "timed out after {}: {}",
                    humantime_like(timeout),
                    f.summaries().replace('\n', "; ")
                ))
            }
        });
    }
    let fleet = rt.block_on(crate::api::status_cmd::run(&query))?;
    print!("{}", fleet.table());
    if fleet.all_match() {
        println!("{}", fleet.summaries());
        Ok(Outcome::Ok)
    } else {
        Ok(Outcome::No(fleet.summaries()))
    }
}

/// `confgate probe`: GET the endpoint, print its body, succeed on 2xx.
pub fn probe(args: ProbeArgs) -> Result<Outcome, Error> {
    let listen = std::env::var("CONFGATE_LISTEN").ok();
    let host_port = probe_addr(args.addr.as_deref(), listen.as_deref())?;
    // Ready asks for the one line (`/readyz?line`: held back configs named), in one request.
    let path = match args.kind {
        crate::cli::ProbeKind::Ready => "/readyz?line",
        other => other.path(),
    };
    let url = format!("http://{host_port}{path}");
    let deadline = std::time::Instant::now() + args.timeout;
    let got = http::get(&host_port, path, deadline);
    Ok(match got {
        Ok((code, body)) if (200..300).contains(&code) => {
            print!("{body}");
            Outcome::Ok
        }
        // The kubelet shows this line in the pod's events: the reason alone, ending with its fix.
        Ok((_, body)) => Outcome::No(body.trim_end().to_owned()),
        Err(e) => Outcome::No(format!("GET {url}: {e}")),
    })
}

/// The HOST:PORT `probe` asks: `--addr`/`CONFGATE_PROBE_ADDR` (an `http://` prefix and a trailing
/// `/` are dropped, since users copy URLs), else loopback at `CONFGATE_LISTEN`'s port, else 9797.
fn probe_addr(addr: Option<&str>, listen: Option<&str>) -> Result<String, Error> {
    let bad = |value: &str, problem: &str| {
        Error::Settings(settings::Error(vec![settings::Invalid {
            setting: "--addr (CONFGATE_PROBE_ADDR)".into(),
            value: value.to_owned(),
            problem: problem.to_owned(),
            allowed: "HOST:PORT, e.g. 127.0.0.1:9797 or [::1]:9797 (http:// may prefix it)",
        }]))
    };
    let Some(given) = addr else {
        let port = listen
            .and_then(|l| l.parse::<std::net::SocketAddr>().ok())
            .map_or(9797, |a| a.port());
        let host = match listen.and_then(|l| l.parse::<std::net::SocketAddr>().ok()) {
            // A wildcard listener answers on loopback; 127.0.0.1 exists in every pod, IPv6-only too.
            Some(a) if !a.ip().is_unspecified() => a.ip().to_string(),
            _ => "127.0.0.1".to_owned(),
        };
        return Ok(if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        });
    };
    if given.starts_with("https://") {
        return Err(bad(given, "confgate serves plain HTTP"));
    }
    let hp = given.strip_prefix("http://").unwrap_or(given);
    let hp = hp.strip_suffix('/').unwrap_or(hp);
    let valid = hp
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        && !hp.contains(['/', '?', '#', '@']);
    if valid {
        Ok(hp.to_owned())
    } else {
        Err(bad(given, "not HOST:PORT"))
    }
}

/// A timeout as the user would write it back: whole seconds, or milliseconds below one second.
#[cfg(feature = "api")]
fn humantime_like(d: std::time::Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::probe_addr;

    #[test]
    fn probe_address_from_flag_url_or_listen() {
        let ok = |a: Option<&str>, l: Option<&str>| probe_addr(a, l).unwrap();
        assert_eq!(ok(None, None), "127.0.0.1:9797");
        assert_eq!(ok(None, Some("[::]:9000")), "127.0.0.1:9000");
        assert_eq!(ok(None, Some("0.0.0.0:9001")), "127.0.0.1:9001");
        assert_eq!(ok(None, Some("[::1]:9002")), "[::1]:9002");
        assert_eq!(ok(Some("10.0.0.1:9797"), Some("[::]:1")), "10.0.0.1:9797");
        assert_eq!(ok(Some("http://127.0.0.1:9797/"), None), "127.0.0.1:9797");
        assert_eq!(ok(Some("[::1]:9797"), None), "[::1]:9797");
        for bad in [
            "http://http://127.0.0.1:9797",
            "https://127.0.0.1:9797",
            "127.0.0.1",
            "127.0.0.1:9797/readyz",
        ] {
            let e = probe_addr(Some(bad), None).unwrap_err().to_string();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }
}
