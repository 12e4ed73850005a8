//! `confgate check` with a known-good record in the input (`NAME.confgate-known-good`, a ConfigMap or
//! a Secret), through the real binary: after each source's line, a `starts-on` line says what a pod
//! would start on (the source's accepted config, else the newest known-good it accepts, else nothing)
//! and why; the record itself is never judged as a config, and its content is never shown.

use crate::common;

use std::process::Output;

use base64::Engine as _;

const ACCEPTS: &str = ">=2.4.0, <3.0.0";

fn run(args: &[&str], stdin: &str) -> Output {
    let mut cmd = common::confgate_alone();
    cmd.arg("check").args(args);
    common::output_with_stdin(cmd, stdin)
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A source ConfigMap in `prod` whose `version` key says `version`.
fn source(name: &str, version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: prod}}\ndata: {{version: '{version}', app.yaml: 'listen: 8080'}}\n"
    )
}

/// One record entry as the sidecar writes it: the version and each key's bytes, base64.
fn entry(version: &str) -> String {
    format!(
        r#"{{"version":"{version}","keys":{{"app.yaml":{{"data":"{}"}},"version":{{"data":"{}"}}}}}}"#,
        b64("listen: 8080"),
        b64(version)
    )
}

/// The record ConfigMap of `source`, one entry per `(line, entry JSON)`.
fn record(source: &str, entries: &[(&str, String)]) -> String {
    let data: Vec<String> = entries
        .iter()
        .map(|(line, e)| format!("  {line}: '{e}'\n"))
        .collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {source}.confgate-known-good, namespace: prod}}\ndata:\n{}",
        data.concat()
    )
}

fn lines(out: &Output) -> Vec<String> {
    text(out.stdout.clone())
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The `starts-on` lines' version and hash columns.
fn starts(out: &Output) -> Vec<(String, String, String)> {
    lines(out)
        .iter()
        .filter(|l| l.starts_with("starts-on "))
        .map(|l| {
            let mut w = l.split_whitespace();
            w.next();
            let version = w.next().unwrap().to_owned();
            let sha = w.next().unwrap().to_owned();
            (version, sha, l.clone())
        })
        .collect()
}

/// The hash `check` prints for `version`'s config as a source: the one a pod running it reports.
fn sha_of(version: &str) -> String {
    let out = run(&["--accepts", ACCEPTS, "-"], &source("x", version));
    let line = lines(&out).remove(0);
    line.split_whitespace().nth(2).unwrap().to_owned()
}

/// A too-new source with a record: the pod would start on the newest known-good its range accepts
/// (2.4.1 of line v2, not 3.1.0 of line v3), with the hash a pod running it reports; the check still
/// fails, as the source is not accepted, and the record is not judged as a config of its own.
#[test]
fn a_too_new_source_starts_on_the_newest_known_good_the_range_accepts() {
    let stream = [
        source("web", "3.0.0"),
        record(
            "web",
            &[
                ("v2", entry("2.4.1")),
                ("v3", entry("3.1.0")),
                ("v1", entry("1.9.0")),
            ],
        ),
    ]
    .join("---\n");
    let out = run(&["--accepts", ACCEPTS, "-"], &stream);
    assert_eq!(out.status.code(), Some(1), "{}", text(out.stderr.clone()));
    let all = lines(&out);
    assert_eq!(
        all.len(),
        2,
        "one line for the source, one for its start: {all:?}"
    );
    assert!(all[0].starts_with("too-new "), "{all:?}");
    let s = starts(&out);
    assert_eq!(s[0].0, "2.4.1", "{all:?}");
    assert_eq!(s[0].1, sha_of("2.4.1"), "{all:?}");
    assert!(
        s[0].2.contains(
            "prod/web (- document 1): the known-good 2.4.1 from prod/web.confgate-known-good (line v2): the source's newest config 3.0.0 is too-new"
        ),
        "{all:?}"
    );
    assert!(!s[0].2.contains("listen"), "content shown: {all:?}");

    // Under a range of the newer line, the source is accepted and the record is not read.
    let out = run(&["--accepts", ">=3.0.0, <4.0.0", "-"], &stream);
    assert_eq!(out.status.code(), Some(0), "{}", text(out.stderr.clone()));
    let s = starts(&out);
    assert_eq!(s[0].0, "3.0.0");
    assert_eq!(s[0].1, sha_of_in("3.0.0", ">=3.0.0, <4.0.0"));
    assert!(
        s[0].2
            .ends_with("the source's config, accepted; the known-good is not read"),
        "{s:?}"
    );
}

fn sha_of_in(version: &str, accepts: &str) -> String {
    let out = run(&["--accepts", accepts, "-"], &source("x", version));
    let line = lines(&out).remove(0);
    line.split_whitespace().nth(2).unwrap().to_owned()
}

/// Nothing accepted in the record: the pod starts on nothing, and the line says why, each line's
/// version and verdict (an unreadable entry named, never shown); an empty record says it is empty.
#[test]
fn nothing_accepted_in_the_record_starts_on_nothing_and_says_why() {
    let stream = [
        source("web", "3.0.0"),
        record(
            "web",
            &[
                ("v2", entry("2.3.0")),
                ("v3", entry("3.1.0")),
                ("v9", "secret-looking-text".to_owned()),
            ],
        ),
    ]
    .join("---\n");
    let out = run(&["--accepts", ACCEPTS, "-"], &stream);
    assert_eq!(out.status.code(), Some(1));
    let s = starts(&out);
    assert_eq!((s[0].0.as_str(), s[0].1.as_str()), ("-", "-"), "{s:?}");
    let why = &s[0].2;
    for part in [
        "nothing: the source's newest config 3.0.0 is too-new and no known-good in prod/web.confgate-known-good is accepted under these settings",
        "v2: 2.3.0 too-old",
        "v3: 3.1.0 too-new",
        "v9: unreadable, skipped",
        "the component does not start until the source holds an accepted config",
    ] {
        assert!(why.contains(part), "{part:?} not in {why}");
    }
    assert!(!why.contains("secret-looking-text"), "{why}");

    let out = run(
        &["--accepts", ACCEPTS, "-"],
        &[source("web", "3.0.0"), record("web", &[])].join("---\n"),
    );
    let s = starts(&out);
    assert!(
        s[0].2
            .contains("prod/web.confgate-known-good holds no known-good yet"),
        "{s:?}"
    );
}

/// A workload reading the source judges the record with its own annotations: its range picks the
/// line, and `on-incompatible: unready` says the pod stays unready on the known-good.
#[test]
fn a_workload_judges_the_record_with_its_annotations() {
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app, namespace: prod}\nspec:\n  template:\n    metadata:\n      annotations: {confgate.io/accepts: '^3.0', confgate.io/on-incompatible: unready}\n    spec:\n      containers:\n      - name: app\n        volumeMounts: [{name: config, mountPath: /etc/app}]\n      volumes:\n      - name: config\n        configMap: {name: web}\n";
    let stream = [
        deploy.to_owned(),
        source("web", "4.0.0"),
        record("web", &[("v2", entry("2.4.1")), ("v3", entry("3.1.0"))]),
    ]
    .join("---\n");
    let out = run(&["-"], &stream);
    assert_eq!(out.status.code(), Some(1), "{}", text(out.stderr.clone()));
    let s = starts(&out);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0].0, "3.1.0", "{s:?}");
    assert!(
        s[0].2
            .contains("prod/web (for deployment/app; - document 2)"),
        "{s:?}"
    );
    assert!(
        s[0].2.ends_with(
            "the component starts on it and the pod stays unready (on-incompatible: unready)"
        ),
        "{s:?}"
    );
}

/// A Secret record (base64 values, as the sidecar writes a Secret source's) is read as a ConfigMap
/// one is, by a directory (a mounted Secret), which takes the input's one record; a ConfigMap of the
/// same name never takes it, as a pod gated on a ConfigMap reads only the ConfigMap record; a record
/// of a source not in the input is named in a warning, and without a record the report has no
/// `starts-on` line.
#[test]
fn secret_records_directories_and_unmatched_records() {
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: web.confgate-known-good, namespace: prod}}\ndata:\n  v2: {}\n",
        b64(&entry("2.4.1"))
    );
    let out = run(
        &["--accepts", ACCEPTS, "-"],
        &[source("web", "3.0.0"), secret.clone()].join("---\n"),
    );
    assert!(starts(&out).is_empty(), "{:?}", lines(&out));
    let err = text(out.stderr);
    assert!(
        err.contains("prod/web.confgate-known-good (- document 2): a Secret, the known-good record of Secret web, which check does not read"),
        "{err}"
    );
    let as_configmap = secret
        .replace("kind: Secret", "kind: ConfigMap")
        .replace(&b64(&entry("2.4.1")), &format!("'{}'", entry("2.4.1")));
    let out = run(
        &["--accepts", ACCEPTS, "-"],
        &[source("web", "3.0.0"), as_configmap].join("---\n"),
    );
    let s = starts(&out);
    assert_eq!(s[0].0, "2.4.1", "{s:?}");
    assert_eq!(s[0].1, sha_of("2.4.1"));

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("config");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("version"), "3.0.0").unwrap();
    let rec = tmp.path().join("record.yaml");
    std::fs::write(&rec, &secret).unwrap();
    let mut cmd = common::confgate_alone();
    cmd.args(["check", "--accepts", ACCEPTS])
        .arg(&dir)
        .arg(&rec);
    let out = cmd.output().unwrap();
    let s = starts(&out);
    assert_eq!(s.len(), 1, "{:?}", lines(&out));
    assert_eq!(s[0].0, "2.4.1", "{s:?}");

    let out = run(
        &["--accepts", ACCEPTS, "-"],
        &[source("api", "3.0.0"), secret].join("---\n"),
    );
    assert!(starts(&out).is_empty(), "{:?}", lines(&out));
    assert_eq!(
        lines(&out).len(),
        1,
        "the record is not judged: {:?}",
        lines(&out)
    );
    let err = text(out.stderr);
    assert!(
        err.contains("prod/web.confgate-known-good (- document 2): a Secret, the known-good record of Secret web"),
        "{err}"
    );

    let out = run(&["--accepts", ACCEPTS, "-"], &source("web", "3.0.0"));
    assert!(starts(&out).is_empty(), "{:?}", lines(&out));
}

/// A forged entry whose key leads out of the promoted dir (`../x`) is never started on: the pod
/// skips it as unreadable, and check says so, naming the line, not the content.
#[test]
fn an_entry_whose_key_leads_out_of_the_promoted_dir_is_skipped() {
    let forged = format!(
        r#"{{"version":"2.4.1","keys":{{"version":{{"data":"{}"}},"../../escaped":{{"data":"{}"}}}}}}"#,
        b64("2.4.1"),
        b64("secret-looking-text")
    );
    let out = run(
        &["--accepts", ACCEPTS, "-"],
        &[source("web", "3.0.0"), record("web", &[("v2", forged)])].join("---\n"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(out.stderr.clone()));
    let s = starts(&out);
    assert_eq!((s[0].0.as_str(), s[0].1.as_str()), ("-", "-"), "{s:?}");
    assert!(
        s[0].2.contains(
            "v2: unreadable, skipped (key \"../../escaped\" is not a path inside the promoted dir"
        ),
        "{s:?}"
    );
    assert!(!s[0].2.contains("secret-looking-text"), "{s:?}");
}
