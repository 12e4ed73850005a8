//! What the real binary logs, read as a log pipeline reads it: JSON lines with unique keys and no Rust
//! debug syntax, text lines in logfmt, and the lines an on-call engineer needs (settings in force and
//! where each came from, settings problems appearing and clearing, annotation overrides, gate-only mode).

use crate::common;

use std::fmt;
use std::process::Command;

use common::{DEADLINE, Dirs, Gate, Sink, wait_for, write_annotations, write_version};

/// A JSON object's keys in order, duplicates kept (serde_json's `Value` would keep only the last).
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    m.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(k);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(V)
    }
}

/// Every line of a JSON log, parsed; panics on a line that is not an object or repeats a key.
fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|l| {
            let Keys(keys) = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let mut sorted = keys.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), keys.len(), "a key repeats: {l}");
            assert!(!l.contains("Some("), "Rust debug syntax: {l}");
            serde_json::from_str(l).unwrap()
        })
        .collect()
}

fn with_message<'a>(lines: &'a [serde_json::Value], msg: &str) -> Vec<&'a serde_json::Value> {
    lines.iter().filter(|l| l["message"] == msg).collect()
}

#[test]
fn json_logs_have_unique_keys_and_say_where_settings_come_from() {
    let d = Dirs::new();
    let sink = Sink::start(false);
    write_version(&d.watch(), "2.4.1");
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", ">=2.4.0 <3.0.0")]);
    let mut cmd = Command::new(common::BIN);
    cmd.args(["run", "--log-format", "json", "--accepts", "^1", "--reload"])
        .arg(sink.url())
        .arg("--watch")
        .arg(d.watch())
        .arg("--promote-to")
        .arg(d.promoted())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"))
        .args(["--on-incompatible", "hold"])
        .env("CONFGATE_ON_INCOMPATIBLE", "hold")
        .env("CONFGATE_MODE", "enforce")
        .env_remove("CONFGATE_ACCEPTS");
    let g = Gate::from_command(cmd, &d.log());
    g.wait_active("2.4.1");
    // The first promotion into an empty promoted dir sends no reload; a second one does.
    write_version(&d.watch(), "2.4.2");
    g.wait_active("2.4.2");
    wait_for("the reload", DEADLINE, || (sink.count() > 0).then_some(()));
    // A typo'd annotation appears, then is fixed.
    write_annotations(
        &d.podinfo(),
        &[
            ("confgate.io/accepts", ">=2.4.0 <3.0.0"),
            ("confgate.io/acepts", "^3"),
        ],
    );
    wait_for("the problem logged", DEADLINE, || {
        g.log_text().contains("settings problem").then_some(())
    });
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", ">=2.4.0 <3.0.0")]);
    wait_for("the problem cleared", DEADLINE, || {
        g.log_text()
            .contains("settings problem cleared")
            .then_some(())
    });
    let lines = json_lines(&g.log_text());

    let setting = |name: &str| {
        let l = lines
            .iter()
            .find(|l| l["message"] == "setting in force" && l["setting"] == name)
            .unwrap_or_else(|| panic!("no start-up line for {name}"));
        (l["value"].as_str().unwrap(), l["from"].as_str().unwrap())
    };
    assert_eq!(
        setting("accepts"),
        (">=2.4.0 <3.0.0", "annotation confgate.io/accepts")
    );
    assert_eq!(setting("mode"), ("enforce", "env CONFGATE_MODE"));
    assert_eq!(setting("reload").1, "flag --reload");
    // The flag wins over its environment variable, and is named even when both hold the same value.
    assert_eq!(
        setting("on-incompatible"),
        ("hold", "flag --on-incompatible")
    );
    assert_eq!(setting("version-from"), ("file:version", "default"));

    let overrides = with_message(&lines, "annotation overrides flag");
    assert!(
        overrides
            .iter()
            .any(|l| l["setting"] == "accepts" && l["overrides"] == "^1"),
        "{overrides:?}"
    );
    let appeared = with_message(&lines, "settings problem");
    assert_eq!(appeared.len(), 1, "{appeared:?}");
    assert!(
        appeared[0]["problem"]
            .as_str()
            .unwrap()
            .contains("unknown annotation confgate.io/acepts")
    );
    assert_eq!(with_message(&lines, "settings problem cleared").len(), 1);

    let reloaded = with_message(&lines, "reloaded");
    assert_eq!(reloaded[0]["reload_target"], sink.url().as_str());
    assert_eq!(reloaded[0]["target"], "confgate::reload", "the module");
    assert_eq!(
        with_message(&lines, "confgate started")[0]["promote_to"],
        d.promoted().display().to_string().as_str()
    );
    assert!(
        lines
            .iter()
            .all(|l| !l["message"].as_str().unwrap_or("").starts_with("gate-only"))
    );
}

#[test]
fn start_up_says_so_in_gate_only_mode() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let mut cmd = Command::new(common::BIN);
    cmd.args(["run", "--log-format", "json", "--accepts", "^1", "--watch"])
        .arg(d.watch())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"))
        .env_remove("CONFGATE_PROMOTE_TO");
    let g = Gate::from_command(cmd, &d.log());
    wait_for("the gate-only line", DEADLINE, || {
        let lines = json_lines(&g.log_text());
        lines
            .iter()
            .find(|l| {
                l["level"] == "WARN"
                    && l["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("gate-only mode: no --promote-to"))
            })
            .map(|_| ())
    });
    let lines = json_lines(&g.log_text());
    assert_eq!(
        with_message(&lines, "confgate started")[0]["promote_to"],
        "none"
    );
}

/// A logfmt line as Loki's parser reads it: `key=value` or `key="quoted \" value"`, separated by spaces.
fn logfmt(fields: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = fields.trim_start();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .unwrap_or_else(|| panic!("no `=` in {rest:?}"));
        assert!(
            !key.contains(' ') && !key.is_empty(),
            "bad key {key:?} in {fields}"
        );
        let (value, after) = if let Some(q) = after.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.char_indices();
            let end = loop {
                match chars.next() {
                    Some((_, '\\')) => v.push(chars.next().expect("escape").1),
                    Some((i, '"')) => break i + 1,
                    Some((_, c)) => v.push(c),
                    None => panic!("unterminated quote in {fields}"),
                }
            };
            (v, &q[end..])
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            assert!(!after[..end].contains('"'), "stray quote in {fields}");
            (after[..end].to_owned(), &after[end..])
        };
        out.push((key.to_owned(), value));
        rest = after.trim_start();
    }
    out
}

#[test]
fn text_logs_parse_as_logfmt() {
    let d = Dirs::new();
    write_version(&d.watch(), "3.0.0");
    let g = Gate::start(&d, &["--accepts", ">=2.4.0, <3.0.0"]);
    g.wait_candidate(Some("3.0.0"), "too-new");
    let text = g.log_text();
    let mut judged = None;
    for line in text.lines() {
        // `TIMESTAMP LEVEL module::path: fields`
        let fields = line
            .split_once(": ")
            .unwrap_or_else(|| panic!("no target in {line}"))
            .1;
        let kv = logfmt(fields);
        assert!(!line.contains("Some("), "Rust debug syntax: {line}");
        if kv.iter().any(|(k, v)| k == "msg" && v == "judged") {
            judged = Some(kv);
        }
    }
    let judged = judged.expect("a judged line");
    let reason = &judged.iter().find(|(k, _)| k == "reason").unwrap().1;
    assert_eq!(
        reason,
        "version 3.0.0 is newer than >=2.4.0, <3.0.0 allows; roll the ConfigMap back to a version in \
         >=2.4.0, <3.0.0, or raise confgate.io/accepts once the component reads 3.0.0",
        "the whole reason is one value"
    );
}

/// A loopback server that answers only requests carrying `Authorization: Basic` of `user:password`
/// (401 otherwise): `POST /reload` with 200, `GET /metrics` with a reload that succeeded just now.
/// Every request's line and whether its credentials were right are recorded.
struct Guarded {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, bool)>>>,
}

impl Guarded {
    fn start(user: &str, password: &str) -> Guarded {
        use base64::Engine;
        use std::io::{BufRead, BufReader, Write};
        let want = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let mut authorized = false;
                let mut request = None;
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    let l = line.trim_end().to_owned();
                    line.clear();
                    if l.is_empty() {
                        break;
                    }
                    if request.is_none() {
                        request = Some(l);
                    } else if let Some((name, value)) = l.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        authorized = value.trim() == want;
                    }
                }
                let request = request.unwrap_or_default();
                record.lock().unwrap().push((request.clone(), authorized));
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
                    + 1;
                let (code, body) = match (authorized, request.split(' ').nth(1)) {
                    (false, _) => ("401 Unauthorized", "who are you\n".to_owned()),
                    (true, Some("/metrics")) => {
                        ("200 OK", format!("app_ok 1\napp_ok_time {now}\n"))
                    }
                    (true, _) => ("200 OK", "reloaded\n".to_owned()),
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {code}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Guarded { port, seen }
    }

    /// How many requests for `path` came with the right credentials, and how many without.
    fn counts(&self, path: &str) -> (usize, usize) {
        let seen = self.seen.lock().unwrap();
        let of = |ok| {
            seen.iter()
                .filter(|(r, a)| r.split(' ').nth(1) == Some(path) && *a == ok)
                .count()
        };
        (of(true), of(false))
    }
}

/// A reload URL and a confirm URL with `user:password@` (flags, then annotations): the credentials are
/// sent as HTTP Basic to the component, and shown nowhere: no log line at any level (the settings in
/// force, an annotation overriding a flag, a bad annotation, the reloads and confirmations), not
/// `/status`, not `/readyz?verbose`.
#[test]
fn credentials_in_reload_and_confirm_urls_are_sent_and_never_shown() {
    let d = Dirs::new();
    let reload = Guarded::start("admin", "RELOADPW");
    let metrics = Guarded::start("ops", "METRICSPW");
    let confirm = |password: &str, metric: &str| {
        format!(
            "http://ops:{password}@127.0.0.1:{}/metrics#{metric}",
            metrics.port
        )
    };
    write_version(&d.watch(), "2.4.1");
    write_annotations(
        &d.podinfo(),
        &[(
            "confgate.io/confirm",
            &confirm("METRICSPW", "app_ok,app_ok_time"),
        )],
    );
    let reload_url = format!("http://admin:RELOADPW@127.0.0.1:{}/reload", reload.port);
    let flag_confirm = confirm("FLAGPW", "app_ok");
    let g = Gate::start(
        &d,
        &[
            "--accepts",
            "^2",
            "--reload",
            &reload_url,
            "--confirm",
            &flag_confirm,
        ],
    );
    g.wait_active("2.4.1");
    write_version(&d.watch(), "2.4.2");
    g.wait_status("2.4.2 reloaded and confirmed", |s| {
        s["applied"]["version"] == "2.4.2"
    });
    assert!(reload.counts("/reload").0 >= 1, "{:?}", reload.seen);
    assert_eq!(reload.counts("/reload").1, 0, "{:?}", reload.seen);
    assert!(metrics.counts("/metrics").0 >= 1, "{:?}", metrics.seen);
    // The annotation changes to other credentials (it overrides the flag, logged), then to a bad value.
    write_annotations(
        &d.podinfo(),
        &[(
            "confgate.io/confirm",
            &confirm("OTHERPW", "app_ok,app_ok_time"),
        )],
    );
    wait_for("the override logged", DEADLINE, || {
        (g.log_text().matches("annotation overrides flag").count() >= 2).then_some(())
    });
    write_annotations(
        &d.podinfo(),
        &[("confgate.io/confirm", &confirm("BADPW", "9not-a-metric"))],
    );
    wait_for("the bad annotation reported", DEADLINE, || {
        g.log_text().contains("settings problem").then_some(())
    });
    let status = common::get(g.port, "/status").unwrap().1;
    let verbose = common::get(g.port, "/readyz?verbose").unwrap().1;
    let log = g.log_text();
    assert!(log.contains("<credentials removed>@127.0.0.1"), "{log}");
    assert!(
        status.contains("<credentials removed>@127.0.0.1"),
        "{status}"
    );
    for secret in [
        "RELOADPW",
        "METRICSPW",
        "FLAGPW",
        "OTHERPW",
        "BADPW",
        "admin:",
        "ops:",
    ] {
        for (what, text) in [("log", &log), ("/status", &status), ("/readyz", &verbose)] {
            assert!(!text.contains(secret), "{secret} in {what}: {text}");
        }
    }
}
