//! `confgate check`, the real binary: verdicts for manifests (YAML, JSON, several documents, lists,
//! binaryData) and directories (kubelet and plain), exit codes, and the same `sha256:` hash the running
//! sidecar reports for the same data; workloads in the stream judging the ConfigMaps they read with their
//! own annotations, on the shipped manifests as `kubectl kustomize` builds them.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{DEADLINE, Gate, confgate_alone, get, kubelet_write, output_with_stdin, wait_for};

const BIN: &str = env!("CARGO_BIN_EXE_confgate");
const ACCEPTS: &str = ">=2.4.0, <3.0.0";

/// One report line: verdict, version, hash, and the rest (what and why).
#[derive(Debug)]
struct Line {
    verdict: String,
    version: String,
    sha256: String,
    rest: String,
}

struct Run {
    code: i32,
    lines: Vec<Line>,
    stderr: String,
}

fn check_with(args: &[&str], stdin: Option<&str>) -> Run {
    check_in(None, args, stdin)
}

/// `check_with`, run in `cwd` when given.
fn check_in(cwd: Option<&Path>, args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = confgate_alone();
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.arg("check").args(args);
    let out = output_with_stdin(cmd, stdin.unwrap_or(""));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines = stdout
        .lines()
        .map(|l| {
            let (verdict, l) = token(l);
            let (version, l) = token(l);
            let (sha256, l) = token(l);
            Line {
                verdict: verdict.to_owned(),
                version: version.to_owned(),
                sha256: sha256.to_owned(),
                rest: l.trim_start().to_owned(),
            }
        })
        .collect();
    Run {
        code: out.status.code().unwrap(),
        lines,
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// The first whitespace-separated word and what follows it.
fn token(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    s.split_at(s.find(char::is_whitespace).unwrap_or(s.len()))
}

fn check(args: &[&str]) -> Run {
    check_with(args, None)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_owned()
}

fn configmap(name: &str, version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: prod\ndata:\n  version: \"{version}\"\n  app.yaml: |\n    listen: 8080\n"
    )
}

fn verdicts(run: &Run) -> Vec<&str> {
    run.lines.iter().map(|l| l.verdict.as_str()).collect()
}

/// Every verdict from one multi-document manifest, one line each, in order; exit 1 as not all pass.
#[test]
fn every_verdict_from_a_multi_document_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = [
        configmap("ok", "2.4.1"),
        configmap("new", "3.0.0"),
        configmap("old", "2.3.9"),
        configmap("pre", "2.5.0-rc.1"),
        configmap("bad", "two"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: empty\n".to_owned(),
        // Not a ConfigMap: ignored.
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: other\n".to_owned(),
    ];
    let path = write(tmp.path(), "all.yaml", &docs.join("---\n"));
    let run = check(&["--accepts", ACCEPTS, &path]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        verdicts(&run),
        [
            "accepted",
            "too-new",
            "too-old",
            "out-of-range",
            "invalid",
            "missing"
        ]
    );
    let versions: Vec<&str> = run.lines.iter().map(|l| l.version.as_str()).collect();
    assert_eq!(
        versions,
        ["2.4.1", "3.0.0", "2.3.9", "2.5.0-rc.1", "two", "-"]
    );
    assert!(
        run.lines[0].rest.starts_with("prod/ok ("),
        "{:?}",
        run.lines[0]
    );
    assert!(
        run.lines[0].rest.contains("document 1"),
        "{:?}",
        run.lines[0]
    );
    assert!(
        run.lines[5].rest.contains("document 6"),
        "{:?}",
        run.lines[5]
    );
    for l in &run.lines[..4] {
        assert!(
            l.sha256.starts_with("sha256:") && l.sha256.len() == 71,
            "{l:?}"
        );
    }
    assert_eq!(run.lines[5].sha256, "-");
}

/// Exit 0 only when every ConfigMap in every path is accepted.
#[test]
fn exit_zero_only_when_all_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write(tmp.path(), "a.yaml", &configmap("a", "2.4.0"));
    let b = write(tmp.path(), "b.yaml", &configmap("b", "v2.9"));
    let run = check(&["--accepts", ACCEPTS, &a, &b]);
    assert_eq!(
        (run.code, verdicts(&run)),
        (0, vec!["accepted", "accepted"])
    );
    let c = write(tmp.path(), "c.yaml", &configmap("c", "3.1.0"));
    let run = check(&["--accepts", ACCEPTS, &a, &c, &b]);
    assert_eq!(
        (run.code, verdicts(&run)),
        (1, vec!["accepted", "too-new", "accepted"])
    );
}

/// The settings `run` takes for the version and required keys apply offline too.
#[test]
fn version_from_and_require_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write(tmp.path(), "cm.yaml", &configmap("a", "1.0.0"));
    let pointer = check(&[
        "--accepts",
        "^8080",
        "--version-from",
        "yaml:app.yaml#/listen",
        &path,
    ]);
    assert_eq!((pointer.code, verdicts(&pointer)), (0, vec!["accepted"]));
    assert_eq!(pointer.lines[0].version, "8080");

    let required = check(&["--accepts", "^1", "--require", "version,tls.crt", &path]);
    assert_eq!((required.code, verdicts(&required)), (1, vec!["invalid"]));
    assert!(
        required.lines[0].rest.contains("tls.crt"),
        "{:?}",
        required.lines[0]
    );
}

/// `kubectl get -o json` output, tab-indented JSON, a JSON stream and a top-level List all work.
#[test]
fn json_manifests() {
    let tmp = tempfile::tempdir().unwrap();
    let cm = |name: &str, v: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"version":"{v}"}}}}"#
        )
    };
    let single = write(
        tmp.path(),
        "one.json",
        "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"ConfigMap\",\n\t\"metadata\": {\"name\": \"tabbed\"},\n\t\"data\": {\"version\": \"2.4.1\"}\n}\n",
    );
    let stream = write(
        tmp.path(),
        "stream.json",
        &format!("{}\n{}\n", cm("s1", "2.4.2"), cm("s2", "1.0.0")),
    );
    let list = write(
        tmp.path(),
        "list.json",
        &format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{},{}]}}"#,
            cm("l1", "2.5.0"),
            cm("l2", "3.0.0")
        ),
    );
    let run = check(&["--accepts", ACCEPTS, &single, &stream, &list]);
    assert_eq!(
        verdicts(&run),
        ["accepted", "accepted", "too-old", "accepted", "too-new"]
    );
    assert!(run.lines[2].rest.starts_with("s2 ("), "{:?}", run.lines[2]);
    assert!(
        run.lines[2].rest.contains("document 2"),
        "{:?}",
        run.lines[2]
    );
    assert!(run.lines[4].rest.contains("item 2"), "{:?}", run.lines[4]);
    assert_eq!(run.code, 1);

    // The same ConfigMap as YAML and as JSON hashes the same.
    let yaml = write(
        tmp.path(),
        "s1.yaml",
        "kind: ConfigMap\nmetadata: {name: s1}\ndata: {version: \"2.4.2\"}\n",
    );
    let again = check(&["--accepts", ACCEPTS, &yaml]);
    assert_eq!(again.lines[0].sha256, run.lines[1].sha256);
}

/// A YAML `kind: List` names each item; `-` reads standard input.
#[test]
fn yaml_list_and_stdin() {
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}\n- {}",
        configmap("x", "2.4.1").replace('\n', "\n  "),
        configmap("y", "2.6.0").replace('\n', "\n  ")
    );
    let run = check_with(&["--accepts", ACCEPTS, "-"], Some(&list));
    assert_eq!(
        (run.code, verdicts(&run)),
        (0, vec!["accepted", "accepted"]),
        "{}",
        run.stderr
    );
    assert!(
        run.lines[1]
            .rest
            .starts_with("prod/y (- document 1 item 2)"),
        "{:?}",
        run.lines[1]
    );
}

/// `-` is standard input even where the working directory holds a directory named `-`; `./-` reads that.
#[test]
fn dash_is_standard_input_not_a_directory_named_dash() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("-")).unwrap();
    std::fs::write(tmp.path().join("-/version"), "9.9.9").unwrap();
    let run = check_in(
        Some(tmp.path()),
        &["--accepts", ACCEPTS, "-"],
        Some(&configmap("piped", "2.4.1")),
    );
    assert_eq!(
        (run.code, verdicts(&run)),
        (0, vec!["accepted"]),
        "{:?} {}",
        run.lines,
        run.stderr
    );
    assert!(
        run.lines[0].rest.starts_with("prod/piped (- document 1)"),
        "{:?}",
        run.lines[0]
    );
    let run = check_in(Some(tmp.path()), &["--accepts", ACCEPTS, "./-"], None);
    assert_eq!(
        (run.code, verdicts(&run)),
        (1, vec!["too-new"]),
        "{}",
        run.stderr
    );
}

/// A `kustomize build` of a large platform: thousands of documents are read; past the documented limit
/// the message names the limit rather than calling a document invalid, for YAML and JSON streams.
#[test]
fn large_streams_are_read_up_to_the_documented_limit() {
    // Past the parser's default of 1024.
    let n = 1500;
    let stream: Vec<String> = (0..n)
        .map(|i| configmap(&format!("c{i}"), "2.4.1"))
        .collect();
    let run = check_with(&["--accepts", ACCEPTS, "-"], Some(&stream.join("---\n")));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.lines.len(), n);
    assert!(
        run.lines[n - 1]
            .rest
            .starts_with(&format!("prod/c{} (- document {n})", n - 1))
    );

    let limit = 100_000;
    let want = format!(
        "confgate: -: more than {limit} documents; check and inject read at most {limit} documents per input (split the stream into several inputs)\n"
    );
    for over in ["---\n{}\n".repeat(limit + 1), "{}\n".repeat(limit + 1)] {
        let run = check_with(&["--accepts", ACCEPTS, "-"], Some(&over));
        assert_eq!((run.code, run.stderr.as_str()), (64, want.as_str()));
    }
    // At the limit, the stream is read (and holds no ConfigMap).
    let run = check_with(&["--accepts", ACCEPTS, "-"], Some(&"{}\n".repeat(limit)));
    assert!(run.stderr.contains("no ConfigMap found"), "{}", run.stderr);
}

/// A kubelet volume whose `..data` names a directory that is not there is broken, and says so.
#[test]
fn dangling_data_link_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    kubelet_write(&dir, &[("version", b"2.4.1")]);
    let target = std::fs::read_link(dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join(&target)).unwrap();
    let run = check(&["--accepts", ACCEPTS, dir.to_str().unwrap()]);
    assert_eq!(
        (run.code, verdicts(&run)),
        (1, vec!["invalid"]),
        "{}",
        run.stderr
    );
    let want = format!(
        "{}/..data points nowhere: {} does not exist",
        dir.display(),
        target.display()
    );
    assert!(run.lines[0].rest.ends_with(&want), "{:?}", run.lines[0]);
}

/// binaryData is decoded as the kubelet projects it: the hash equals a directory holding the raw bytes.
#[test]
fn binary_data_hashes_as_projected() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = write(
        tmp.path(),
        "bin.yaml",
        // "AAEC/w==" is the bytes 00 01 02 ff, which are not UTF-8.
        "kind: ConfigMap\nmetadata: {name: bin}\ndata:\n  version: \"2.4.1\"\nbinaryData:\n  blob: AAEC/w==\n",
    );
    let dir = tmp.path().join("vol");
    kubelet_write(
        &dir,
        &[("version", b"2.4.1"), ("blob", &[0u8, 1, 2, 0xff][..])],
    );
    let run = check(&["--accepts", ACCEPTS, &manifest, dir.to_str().unwrap()]);
    assert_eq!(
        (run.code, verdicts(&run)),
        (0, vec!["accepted", "accepted"])
    );
    assert_eq!(run.lines[0].sha256, run.lines[1].sha256);

    let bad = write(
        tmp.path(),
        "bad.yaml",
        "kind: ConfigMap\nmetadata: {name: b}\ndata: {version: \"2.4.1\"}\nbinaryData: {blob: \"not base64!\"}\n",
    );
    let both = write(
        tmp.path(),
        "both.yaml",
        "kind: ConfigMap\nmetadata: {name: b}\ndata: {version: \"2.4.1\"}\nbinaryData: {version: MS4w}\n",
    );
    let run = check(&["--accepts", ACCEPTS, &bad, &both]);
    assert_eq!((run.code, verdicts(&run)), (1, vec!["invalid", "invalid"]));
    assert!(run.lines[0].rest.contains("base64"), "{:?}", run.lines[0]);
    assert!(
        run.lines[1].rest.contains("both data and binaryData"),
        "{:?}",
        run.lines[1]
    );
}

/// Directories: a kubelet volume and a plain directory with the same keys give the same line, and
/// every verdict a directory can have is reported.
#[test]
fn directories_kubelet_and_plain() {
    let tmp = tempfile::tempdir().unwrap();
    let kubelet = tmp.path().join("kubelet");
    kubelet_write(&kubelet, &[("version", b"2.4.1"), ("extra", b"x")]);
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("version"), "2.4.1").unwrap();
    std::fs::write(plain.join("extra"), "x").unwrap();
    let run = check(&[
        "--accepts",
        ACCEPTS,
        kubelet.to_str().unwrap(),
        plain.to_str().unwrap(),
    ]);
    assert_eq!(
        (run.code, verdicts(&run)),
        (0, vec!["accepted", "accepted"])
    );
    assert_eq!(run.lines[0].sha256, run.lines[1].sha256);
    assert_eq!(run.lines[0].rest.split(':').next(), kubelet.to_str());

    let mut dirs = Vec::new();
    for (name, version) in [
        ("new", "3.0.0"),
        ("old", "1.2.3"),
        ("pre", "2.6.0-beta.1"),
        ("bad", "x.y"),
    ] {
        let d = tmp.path().join(name);
        kubelet_write(&d, &[("version", version.as_bytes())]);
        dirs.push(d);
    }
    // An optional ConfigMap that does not exist: the kubelet mounts `..data` pointing at an empty dir.
    let empty = tmp.path().join("empty");
    kubelet_write(&empty, &[]);
    dirs.push(empty);
    let args: Vec<&str> = ["--accepts", ACCEPTS]
        .into_iter()
        .chain(dirs.iter().map(|d| d.to_str().unwrap()))
        .collect();
    let run = check(&args);
    assert_eq!(
        (run.code, verdicts(&run)),
        (
            1,
            vec!["too-new", "too-old", "out-of-range", "invalid", "missing"]
        )
    );
}

/// Bad settings and unreadable input are usage errors (64), told on stderr, not verdicts.
#[test]
fn usage_errors_exit_64() {
    let tmp = tempfile::tempdir().unwrap();
    let good = write(tmp.path(), "good.yaml", &configmap("a", "2.4.1"));
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![good.clone()], "no accepted range"),
        (
            vec!["--accepts".into(), "bigger than 2".into(), good.clone()],
            "invalid --accepts",
        ),
        (
            vec![
                "--accepts".into(),
                ACCEPTS.into(),
                "--version-from".into(),
                "toml:x".into(),
                good.clone(),
            ],
            "invalid --version-from",
        ),
        (
            vec![
                "--accepts".into(),
                ACCEPTS.into(),
                tmp.path().join("absent.yaml").to_str().unwrap().into(),
            ],
            "cannot read",
        ),
        (
            vec![
                "--accepts".into(),
                ACCEPTS.into(),
                write(
                    tmp.path(),
                    "broken.yaml",
                    "kind: ConfigMap\ndata: [unclosed\n",
                ),
            ],
            "not valid YAML or JSON",
        ),
        (
            vec![
                "--accepts".into(),
                ACCEPTS.into(),
                write(tmp.path(), "deploy.yaml", "kind: Deployment\n"),
            ],
            "no ConfigMap found",
        ),
        (vec!["--accepts".into(), ACCEPTS.into()], "PATH"),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = check(&args);
        assert_eq!(run.code, 64, "{args:?}: {}", run.stderr);
        assert!(run.lines.is_empty(), "{args:?} printed verdicts");
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
}

/// The hash `check` prints for a manifest is the one the running sidecar reports for the same data
/// mounted by the kubelet, so a pipeline can match what it checked with what is running.
#[test]
fn hash_matches_the_running_sidecar() {
    let tmp = tempfile::tempdir().unwrap();
    let watch = tmp.path().join("incoming");
    let app = "listen: 8080\nname: \"caf\u{e9}\"\n";
    kubelet_write(
        &watch,
        &[
            ("version", b"2.4.1"),
            ("app.yaml", app.as_bytes()),
            ("blob", &[0u8, 0xfe, 0xff][..]),
        ],
    );
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--watch"])
        .arg(&watch)
        .arg("--annotations")
        .arg(tmp.path().join("no-annotations"))
        .args(["--accepts", ACCEPTS]);
    let gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
    let port = gate.port;
    let running = wait_for("the sidecar to report an active config", DEADLINE, || {
        let (code, body) = get(port, "/status")?;
        let status: serde_json::Value = serde_json::from_str(&body).ok()?;
        (code == 200).then_some(())?;
        status["active"]["sha256"].as_str().map(str::to_owned)
    });

    let manifest = write(
        tmp.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  version: \"2.4.1\"\n  app.yaml: |\n    listen: 8080\n    name: \"caf\u{e9}\"\nbinaryData:\n  blob: AP7/\n",
    );
    let run = check(&["--accepts", ACCEPTS, &manifest, watch.to_str().unwrap()]);
    assert_eq!(
        (run.code, verdicts(&run)),
        (0, vec!["accepted", "accepted"])
    );
    assert_eq!(run.lines[0].sha256, running, "manifest vs running sidecar");
    assert_eq!(
        run.lines[1].sha256, running,
        "mounted dir vs running sidecar"
    );
}

/// The hash of one ConfigMap manifest as `check` computes it with explicit flags.
fn hash_with_flags(manifest: &str, flags: &[&str]) -> String {
    let mut args = flags.to_vec();
    args.push("-");
    let run = check_with(&args, Some(manifest));
    assert_eq!(run.lines.len(), 1, "{}", run.stderr);
    run.lines[0].sha256.clone()
}

/// Each shipped example, built by kustomize, passes `check -` with no flag at all: the workload's
/// annotations are the settings, and each line names the ConfigMap and the workload that reads it.
#[test]
fn shipped_manifests_are_judged_by_their_workloads_without_flags() {
    for (dir, configmap, workload) in [
        ("native-sidecar", "component-config", "deployment/component"),
        (
            "variants",
            "component-variants-config",
            "deployment/component-variants",
        ),
        (
            "component-example",
            "component-kustomized-config",
            "deployment/component-kustomized",
        ),
        (
            "classic",
            "component-classic-config",
            "deployment/component-classic",
        ),
    ] {
        let text = kustomize(dir);
        let run = check_with(&["-"], Some(&text));
        assert_eq!(run.code, 0, "{dir}: {}", run.stderr);
        assert_eq!(verdicts(&run), ["accepted"], "{dir}");
        assert!(
            run.lines[0]
                .rest
                .starts_with(&format!("{configmap} (for {workload}; - document ")),
            "{dir}: {:?}",
            run.lines[0]
        );
        assert_eq!(run.lines[0].version, "2.4.1", "{dir}");
        assert!(run.stderr.is_empty(), "{dir}: {}", run.stderr);
        // The same hash as flags spelling out the annotations give for the ConfigMap alone.
        // Kustomize puts the native sidecar's ServiceAccount and Role before it.
        let cm = text
            .split("\n---\n")
            .find(|d| d.contains("\nkind: ConfigMap\n"))
            .unwrap();
        let mut flags = vec![
            "--accepts",
            ACCEPTS,
            "--version-from",
            "yaml:config.yaml#/schemaVersion",
        ];
        if dir == "variants" {
            flags.extend(["--variants", "config.v*.yaml -> config.yaml"]);
            assert!(
                run.lines[0].rest.contains("variant config.v2.yaml"),
                "{:?}",
                run.lines[0]
            );
        }
        assert_eq!(run.lines[0].sha256, hash_with_flags(cm, &flags), "{dir}");
    }
}

fn deployment(name: &str, namespace: &str, annotations: &str, volumes: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  template:\n    metadata:\n      annotations: {{{annotations}}}\n    spec:\n      initContainers:\n      - name: confgate\n        restartPolicy: Always\n        volumeMounts: [{{name: incoming, mountPath: /etc/confgate/incoming}}]\n      containers:\n      - name: app\n        volumeMounts: [{{name: active, mountPath: /etc/app}}]\n      volumes:\n{volumes}"
    )
}

fn incoming(configmap: &str) -> String {
    format!(
        "      - {{name: incoming, configMap: {{name: {configmap}}}}}\n      - {{name: active, emptyDir: {{}}}}\n"
    )
}

/// Annotations override the flags for the ConfigMap the workload reads; a ConfigMap no workload reads
/// (or one of the same name in another namespace) is judged with the flags as before.
#[test]
fn annotations_override_flags_only_for_the_configmaps_their_workload_reads() {
    let stream = [
        deployment("app", "prod", "confgate.io/accepts: '^3'", &incoming("a")),
        configmap("a", "3.1.0"),
        configmap("b", "2.5.0"),
        configmap("a", "3.1.0").replace("namespace: prod", "namespace: staging"),
    ]
    .join("---\n");
    let run = check_with(&["--accepts", ACCEPTS, "-"], Some(&stream));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(verdicts(&run), ["accepted", "accepted", "too-new"]);
    assert!(
        run.lines[0]
            .rest
            .starts_with("prod/a (for deployment/app; - document 2): version 3.1.0 is in ^3"),
        "{:?}",
        run.lines[0]
    );
    assert!(
        run.lines[1].rest.starts_with("prod/b (- document 3)"),
        "{:?}",
        run.lines[1]
    );
    assert!(
        run.lines[2].rest.starts_with("staging/a (- document 4)"),
        "{:?}",
        run.lines[2]
    );
    // --name still selects by the ConfigMap's name.
    let run = check_with(&["--accepts", ACCEPTS, "--name", "b", "-"], Some(&stream));
    assert_eq!((run.code, verdicts(&run)), (0, vec!["accepted"]));
}

/// A workload's other settings come from its annotations too (here where the version is), and without
/// any flag, a ConfigMap no workload reads is named on stderr as not judged.
#[test]
fn without_flags_only_the_workloads_configmaps_are_judged() {
    let stream = [
        deployment(
            "app",
            "prod",
            "confgate.io/accepts: '^2', confgate.io/version-from: 'yaml:app.yaml#/v'",
            &incoming("a"),
        ),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: prod}\ndata:\n  app.yaml: 'v: 2.7.0'\n".to_owned(),
        configmap("b", "2.5.0"),
    ]
    .join("---\n");
    let run = check_with(&["-"], Some(&stream));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(verdicts(&run), ["accepted"]);
    assert_eq!(run.lines[0].version, "2.7.0");
    assert!(
        run.stderr
            .contains("prod/b (- document 3): not judged: no workload"),
        "{}",
        run.stderr
    );
    // Nothing judged at all stays the usage error it was.
    let run = check_with(&["-"], Some(&configmap("b", "2.5.0")));
    assert_eq!(run.code, 64);
    assert!(run.stderr.contains("no accepted range"), "{}", run.stderr);
}

/// A ConfigMap the workload reads that is not in the input is a warning naming both, not a failure;
/// with nothing else to judge, it is a usage error rather than a pass of nothing.
#[test]
fn a_configmap_not_in_the_input_is_a_warning() {
    let w = deployment(
        "app",
        "prod",
        "confgate.io/accepts: '^2'",
        &incoming("elsewhere"),
    );
    let stream = [w.clone(), configmap("b", "2.5.0")].join("---\n");
    let run = check_with(&["--accepts", ACCEPTS, "-"], Some(&stream));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(verdicts(&run), ["accepted"]);
    assert!(
        run.stderr.contains(
            "warning: deployment/app: reads ConfigMap prod/elsewhere (volume incoming), which is not in the input"
        ),
        "{}",
        run.stderr
    );
    let run = check_with(&["-"], Some(&w));
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(run.lines.is_empty());
    assert!(run.stderr.contains("nothing to judge"), "{}", run.stderr);
    assert!(run.stderr.contains("prod/elsewhere"), "{}", run.stderr);
}

/// A ConfigMap volume mounted with subPath is told on stderr (workload, container, volume,
/// ConfigMap); the verdict and exit code are unchanged.
#[test]
fn a_sub_path_mount_is_warned_about() {
    let text = kustomize("native-sidecar");
    let text = text.replace(
        "        - mountPath: /etc/confgate/incoming\n          name: incoming\n",
        "        - mountPath: /etc/confgate/incoming/config.yaml\n          name: incoming\n          subPath: config.yaml\n",
    );
    assert!(
        text.contains("subPath"),
        "the shipped manifest changed shape"
    );
    let run = check_with(&["-"], Some(&text));
    assert_eq!(
        (run.code, verdicts(&run)),
        (0, vec!["accepted"]),
        "{}",
        run.stderr
    );
    let warnings: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(
        warnings[0].starts_with(
            "confgate: warning: deployment/component: container confgate mounts volume incoming (ConfigMap component-config) with subPath"
        ),
        "{}",
        warnings[0]
    );
}

/// A bad annotation is refused as a bad flag is (64), naming the workload and the annotation: the
/// sidecar would judge by another value than the annotation says.
#[test]
fn a_bad_annotation_is_a_usage_error_naming_the_workload() {
    let stream = [
        deployment(
            "app",
            "prod",
            "confgate.io/accepts: 'bigger than 2'",
            &incoming("a"),
        ),
        configmap("a", "2.5.0"),
    ]
    .join("---\n");
    let run = check_with(&["-"], Some(&stream));
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(run.lines.is_empty());
    assert!(
        run.stderr.contains(
            "deployment/app: bad confgate.io/ annotations on its pods: invalid confgate.io/accepts"
        ),
        "{}",
        run.stderr
    );
}

/// With variants, every workload reading the ConfigMap is a range: the shipped variants example plus
/// two more deployments of the same ConfigMap (^3, and ^4 that no variant serves) give one line per
/// workload, each with its variant, and exit 1 for the one none serves.
#[test]
fn variants_are_reported_per_workload() {
    let text = kustomize("variants");
    let (cm, deploy) = text.split_once("\n---\n").unwrap();
    let other = |name: &str, range: &str| {
        deploy
            .replace("  name: component-variants\n", &format!("  name: {name}\n"))
            .replace("'>=2.4.0, <3.0.0'", &format!("'{range}'"))
    };
    let stream = [
        cm,
        deploy,
        &other("component-v3", "^3"),
        &other("component-v4", "^4"),
    ]
    .join("\n---\n");
    let run = check_with(&["-"], Some(&stream));
    assert_eq!(run.code, 1, "{}", run.stderr);
    let got: Vec<(&str, &str, &str)> = run
        .lines
        .iter()
        .map(|l| {
            (
                l.verdict.as_str(),
                l.version.as_str(),
                l.rest.split(": ").next().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "accepted",
                "2.4.1",
                "component-variants-config (for deployment/component-variants; - document 1) [>=2.4.0, <3.0.0]"
            ),
            (
                "accepted",
                "3.0.0",
                "component-variants-config (for deployment/component-v3; - document 1) [^3]"
            ),
            (
                "too-old",
                "-",
                "component-variants-config (for deployment/component-v4; - document 1) [^4]"
            ),
        ]
    );
    assert!(
        run.lines[0].rest.contains("variant config.v2.yaml"),
        "{:?}",
        run.lines[0]
    );
    assert!(
        run.lines[1].rest.contains("variant config.v3.yaml"),
        "{:?}",
        run.lines[1]
    );
    assert!(
        run.lines[2].rest.contains("no variant is accepted by ^4"),
        "{:?}",
        run.lines[2]
    );
    assert_ne!(run.lines[0].sha256, run.lines[1].sha256);
    // The check's hash for each is the promoted set's, as with --accepts given twice.
    let flags = check_with(
        &[
            "--accepts",
            "^2.4",
            "--accepts",
            "^3",
            "--version-from",
            "yaml:config.yaml#/schemaVersion",
            "--variants",
            "config.v*.yaml -> config.yaml",
            "-",
        ],
        Some(cm),
    );
    let hashes: Vec<&str> = flags.lines.iter().map(|l| l.sha256.as_str()).collect();
    // --name selects lines that carry a range too.
    let named = check_with(&["--name", "component-variants-config", "-"], Some(&stream));
    assert_eq!((named.code, named.lines.len()), (1, 3), "{}", named.stderr);
    let none = check_with(
        &[
            "--name",
            "component-variants-config",
            "--accepts",
            "^2",
            "--accepts",
            "^3",
            "-",
        ],
        Some(cm),
    );
    assert_eq!((none.code, none.lines.len()), (1, 2), "{}", none.stderr);
    assert_eq!(
        hashes,
        [run.lines[0].sha256.as_str(), run.lines[1].sha256.as_str()]
    );
}

/// The rule for which ConfigMap a workload reads fits `confgate inject`: a workload before injection
/// (its only ConfigMap volume) and the same workload after the real `inject` give the same line.
#[test]
fn before_and_after_inject_the_workload_reads_the_same_configmap() {
    let plain = [
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app, namespace: prod}\nspec:\n  template:\n    metadata:\n      annotations: {confgate.io/accepts: '^2.4'}\n    spec:\n      containers:\n      - name: app\n        volumeMounts: [{name: config, mountPath: /etc/app}]\n      volumes:\n      - {name: config, configMap: {name: ok}}\n".to_owned(),
        configmap("ok", "2.5.0"),
    ]
    .join("---\n");
    let mut cmd = Command::new(BIN);
    cmd.args(["inject", "-"]);
    let out = output_with_stdin(cmd, &plain);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let injected = String::from_utf8(out.stdout).unwrap();
    assert!(injected.contains("name: confgate"), "{injected}");
    for (what, stream) in [("before inject", &plain), ("after inject", &injected)] {
        let run = check_with(&["-"], Some(stream));
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        assert_eq!(verdicts(&run), ["accepted"], "{what}");
        // The ConfigMap at its place in the stream checked: inject adds documents.
        let n = confgate::inject::documents("-", stream)
            .unwrap()
            .iter()
            .position(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "ok")
            .unwrap()
            + 1;
        assert!(
            run.lines[0].rest.starts_with(&format!(
                "prod/ok (for deployment/app; - document {n}): version 2.5.0 is in ^2.4"
            )),
            "{what}: {:?}",
            run.lines[0]
        );
        assert!(run.stderr.is_empty(), "{what}: {}", run.stderr);
    }
}

/// `kubectl kustomize manifests/DIR`.
fn kustomize(dir: &str) -> String {
    common::kustomize(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("manifests")
            .join(dir),
    )
}
