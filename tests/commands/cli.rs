//! The command line as an operator meets it: help text, `probe` addressing and its held-back line,
//! `check --name`, and clear usage errors (exit 64, printed once) for a port in use or no kubeconfig.

use crate::common;

use std::process::{Command, Output};

use common::{BIN, Dirs, Gate, write_version};

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("CONFGATE_PROBE_ADDR")
        .env_remove("CONFGATE_LISTEN")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_marks_annotation_settings_and_check_lists_only_its_own() {
    let help = text(&run(&["run", "--help"]).stdout);
    for ann in confgate::settings::known_annotations() {
        assert!(
            help.contains(&format!("[annotation {ann}]")),
            "{ann} not marked in run:\n{help}"
        );
    }
    // `wait` judges and promotes; it sends no reload and serves no readiness.
    let wait = text(&run(&["wait", "--help"]).stdout);
    for s in confgate::settings::SETTINGS {
        let used = s.judging || s.flag == "mode";
        assert_eq!(
            wait.contains(&format!("--{} ", s.flag)),
            used,
            "--{} in wait's help:\n{wait}",
            s.flag
        );
        if used {
            assert!(wait.contains(&format!("[annotation {}]", s.annotation)));
        }
    }
    let check = text(&run(&["check", "--help"]).stdout);
    for used in [
        "--accepts",
        "--version-from",
        "--require",
        "--rule ",
        "--rules-file",
        "--variants",
        "--name",
    ] {
        assert!(check.contains(used), "{used} missing:\n{check}");
    }
    for unused in ["--reload", "--on-incompatible", "--mode", "--confirm"] {
        assert!(!check.contains(unused), "{unused} listed:\n{check}");
    }
    assert!(
        !check.contains("[annotation"),
        "check reads no annotations:\n{check}"
    );
    let probe = text(&run(&["probe", "--help"]).stdout);
    assert!(
        probe.contains("--timeout")
            && probe.contains("CONFGATE_PROBE_ADDR")
            && probe.contains("CONFGATE_LISTEN"),
        "{probe}"
    );
}

#[test]
fn probe_says_what_is_held_follows_listen_and_takes_a_url() {
    let d = Dirs::new();
    write_version(&d.watch(), "2.4.1");
    let g = Gate::start(&d, &["--accepts", ">=2.4.0 <3.0.0"]);
    g.wait_active("2.4.1");
    write_version(&d.watch(), "3.0.0");
    g.wait_candidate(Some("3.0.0"), "too-new");
    let url = format!("http://127.0.0.1:{}/", g.port);
    let out = run(&["probe", "ready", "--addr", &url]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "holding 2.4.1; 3.0.0 is too-new\n");
    assert_eq!(
        common::get(g.port, "/readyz?line"),
        Some((200, "holding 2.4.1; 3.0.0 is too-new\n".into()))
    );
    assert_eq!(common::get(g.port, "/readyz"), Some((200, "ok\n".into())));
    // No --addr: loopback at the port the sidecar was told to listen on.
    let out = Command::new(BIN)
        .args(["probe", "live"])
        .env_remove("CONFGATE_PROBE_ADDR")
        .env("CONFGATE_LISTEN", format!("[::]:{}", g.port))
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "ok\n".into())
    );
    let out = run(&["probe", "live", "--addr", "http://http://127.0.0.1:9797"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        text(&out.stderr).contains("HOST:PORT"),
        "{}",
        text(&out.stderr)
    );
}

/// The exec probe's one line (held back configs named) comes from one request, `/readyz?line`:
/// not `/readyz` and then the whole `/status`.
#[test]
fn probe_ready_asks_one_request_for_its_line() {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            record.lock().unwrap().push(line.trim_end().to_owned());
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {}
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n",
            );
        }
    });
    let out = run(&["probe", "ready", "--addr", &addr]);
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "ok\n".into()),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(*seen.lock().unwrap(), ["GET /readyz?line HTTP/1.1"]);
}

#[test]
fn a_port_in_use_is_a_usage_error_said_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let d = Dirs::new();
    let out = Command::new(BIN)
        .args(["run", "--accepts", "^1", "--listen", &addr, "--watch"])
        .arg(d.watch())
        .env("CONFGATE_LOG", "info")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = text(&out.stderr);
    assert_eq!(err.matches("cannot listen on").count(), 1, "{err}");
    assert!(err.contains("--listen"), "{err}");
}

/// `status --wait` without `--configmap` compares nothing, so it would pass at once while the pods still
/// run the old config: refused as a usage error naming what it needs, before the API server is asked.
#[cfg(feature = "api")]
#[test]
fn status_wait_without_a_configmap_is_refused_naming_it() {
    let d = Dirs::new();
    let out = Command::new(BIN)
        .args(["status", "-n", "default", "--wait", "--timeout", "1s"])
        .env_clear()
        .env("KUBECONFIG", d.root.path().join("no-such-kubeconfig"))
        .env("HOME", d.root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("--wait needs --configmap NAME"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[cfg(feature = "api")]
#[test]
fn a_missing_kubeconfig_is_a_usage_error_said_once() {
    let d = Dirs::new();
    let out = Command::new(BIN)
        .args(["status", "-n", "default"])
        .env_clear()
        .env("KUBECONFIG", d.root.path().join("no-such-kubeconfig"))
        .env("HOME", d.root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("kubeconfig"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // Said once, not kube's nested paragraph of both attempts.
    assert!(!err.contains("failed to infer config"), "{err}");
    assert!(err.contains("no-such-kubeconfig"), "{err}");
    // Said plainly, not as the io error's kind.
    assert!(err.contains("does not exist"), "{err}");
    assert!(!err.contains("entity not found"), "{err}");
}

/// `status` against an API server that does not answer says which server, and why, and exits 69.
#[cfg(feature = "api")]
#[test]
fn status_against_a_dead_server_names_its_url() {
    let d = Dirs::new();
    let kubeconfig = d.root.path().join("kubeconfig");
    // Port 1 on loopback: privileged, and nothing listens there.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u, namespace: default}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["status", "-n", "default"])
        .env_clear()
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", d.root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let said = err
        .lines()
        .find(|l| l.starts_with("confgate: "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(said.contains("API server https://127.0.0.1:1/"), "{said}");
    assert!(said.contains("Connection refused"), "{said}");
}

/// A server URL with `user:password@` is named in `status`'s error without them (it printed the
/// password).
#[cfg(feature = "api")]
#[test]
fn status_names_a_server_without_its_password() {
    let d = Dirs::new();
    let kubeconfig = d.root.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://admin:PASSWORD@127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u, namespace: default}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["status", "-n", "default"])
        .env_clear()
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", d.root.path())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(!err.contains("PASSWORD") && !err.contains("admin"), "{err}");
    assert!(err.contains("<credentials removed>@127.0.0.1:1"), "{err}");
}

/// `confgate` as an unprivileged user: through `setpriv` when the tests run as root (root reads a
/// mode-000 file), else as it is.
fn unprivileged() -> Command {
    // A file this process makes is owned by its effective user.
    let me = tempfile::tempfile().unwrap().metadata().unwrap();
    if std::os::unix::fs::MetadataExt::uid(&me) == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN]);
        c
    } else {
        Command::new(BIN)
    }
}

/// An input `check` cannot read exits 64 naming it, a directory as a file (a directory exited 1,
/// judged `invalid`, for the same fault).
#[test]
fn check_exits_64_for_an_unreadable_directory_as_for_an_unreadable_file() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = Dirs::new();
    std::fs::set_permissions(d.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = d.root.path().join("volume");
    write_version(&dir, "2.0.0");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000)).unwrap();
    let file = d.root.path().join("cm.yaml");
    std::fs::write(
        &file,
        "kind: ConfigMap\nmetadata: {name: a}\ndata: {version: 2.0.0}\n",
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
    for input in [&dir, &file] {
        let out = unprivileged()
            .args(["check", "--accepts", "^2"])
            .arg(input)
            .output()
            .expect("setpriv (util-linux) to run confgate as another user");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{}: {err}", input.display());
        assert!(
            err.contains(&format!("cannot read {}", input.display()))
                && err.contains("Permission denied"),
            "{err}"
        );
    }
}

/// A `--promote-to` confgate cannot create exits 64 naming the flag (it exited 70, naming only the
/// path).
#[test]
fn a_promoted_dir_that_cannot_be_made_names_the_flag_and_exits_64() {
    let d = Dirs::new();
    write_version(&d.watch(), "2.0.0");
    let out = Command::new(BIN)
        .args([
            "run",
            "--accepts",
            "^2",
            "--listen",
            "127.0.0.1:0",
            "--promote-to",
            "/proc/nope",
        ])
        .arg("--watch")
        .arg(d.watch())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("--promote-to (CONFGATE_PROMOTE_TO) /proc/nope: cannot create /proc/nope"),
        "{err}"
    );
}

#[test]
fn check_selects_configmaps_by_name() {
    let d = Dirs::new();
    let file = d.root.path().join("all.yaml");
    std::fs::write(
        &file,
        "kind: ConfigMap\nmetadata: {name: app, namespace: prod}\ndata: {version: 2.4.1}\n---\n\
         kind: ConfigMap\nmetadata: {name: unrelated}\ndata: {other: x}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let all = run(&["check", "--accepts", "^2", f]);
    assert_eq!(all.status.code(), Some(1), "the unrelated one fails");
    let one = run(&["check", "--accepts", "^2", "--name", "app", f]);
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stdout));
    assert_eq!(text(&one.stdout).lines().count(), 1);
    let typo = run(&["check", "--accepts", "^2", "--name", "ap", f]);
    assert_eq!(typo.status.code(), Some(64));
    assert!(text(&typo.stderr).contains("no ConfigMap named ap"));
}

/// `policy` reads no annotations and acts on nothing but its own output: its help lists what it
/// compiles into the policy, untagged, and the version sources CEL can read.
#[cfg(feature = "policy")]
#[test]
fn policy_help_lists_only_what_policy_reads() {
    let help = text(&run(&["policy", "--help"]).stdout);
    assert!(!help.contains("[annotation"), "{help}");
    for unused in ["--reload", "--on-incompatible", "--confirm"] {
        assert!(!help.contains(unused), "{unused} listed:\n{help}");
    }
    for used in [
        "--accepts",
        "--version-from",
        "--require",
        "--rule ",
        "--rules-file",
        "--mode",
    ] {
        assert!(help.contains(used), "{used} missing:\n{help}");
    }
    assert!(!help.contains("json:") && !help.contains("yaml:"), "{help}");
    assert!(help.contains("file:KEY"), "{help}");
    // What the help says is what the command does: the flags it no longer lists are refused.
    let out = run(&[
        "policy",
        "--namespace",
        "ns",
        "--name",
        "cm",
        "--reload",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(64));
}

/// The log filter is an environment variable only; every command's help says so.
#[test]
fn help_names_the_log_filter() {
    for args in [&["--help"][..], &["run", "--help"], &["wait", "--help"]] {
        let help = text(&run(args).stdout);
        assert!(help.contains("CONFGATE_LOG "), "{args:?}:\n{help}");
    }
}

/// An unknown flag gets a suggestion only when one is near it.
#[test]
fn an_unknown_flag_is_suggested_only_a_near_one() {
    let out = run(&["run", "--frobnicate"]);
    assert_eq!(out.status.code(), Some(64));
    let err = text(&out.stderr);
    assert!(err.contains("--frobnicate"), "{err}");
    assert!(!err.contains("similar argument"), "{err}");
    assert!(!err.contains("--on-incompatible"), "{err}");
    let out = run(&["check", "--acepts", "^1", "."]);
    assert_eq!(out.status.code(), Some(64));
    let err = text(&out.stderr);
    assert!(
        err.contains("similar argument exists: '--accepts'"),
        "{err}"
    );
}

/// The probe says why it could not ask: the address and the operating system's reason.
#[test]
fn a_probe_that_cannot_connect_says_where_and_why() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let out = run(&["probe", "ready", "--addr", &addr]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!("cannot connect to {addr}")),
        "{said}"
    );
    assert!(said.to_lowercase().contains("connection refused"), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
}

/// API mode without credentials stops before it starts, with one line that names the kubeconfig.
#[cfg(feature = "api")]
#[test]
fn api_mode_without_credentials_stops_before_starting_with_one_line() {
    let d = Dirs::new();
    let kubeconfig = d.root.path().join("no-such-kubeconfig");
    let run_api_mode = || {
        Command::new(BIN)
            .args(["run", "--source", "configmap:ns/cm", "--accepts", "^1"])
            .args(["--listen", "127.0.0.1:0", "--watch"])
            .arg(d.watch())
            .arg("--promote-to")
            .arg(d.promoted())
            .env_clear()
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", d.root.path())
            .output()
            .unwrap()
    };
    let out = run_api_mode();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(!err.contains("confgate started"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&kubeconfig.display().to_string()), "{err}");
    assert!(!err.contains("failed to infer config"), "{err}");

    // A kubeconfig that is there but broken is named too, with what is wrong, in one line.
    std::fs::write(&kubeconfig, "apiVersion: v1\nclusters: [unclosed\n").unwrap();
    let out = run_api_mode();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "the kubeconfig {} is not valid YAML",
            kubeconfig.display()
        )),
        "{err}"
    );
}

/// `--version` names the version, the commit built from (this checkout's, when it is a git checkout)
/// and the features built in, so an operator can tell which image a pod runs; `-V` says the same on
/// one line.
#[test]
fn version_names_the_commit_and_the_features_built_in() {
    let long = text(&run(&["--version"]).stdout);
    let mut lines = long.lines();
    assert_eq!(
        lines.next(),
        Some(concat!("confgate ", env!("CARGO_PKG_VERSION"))),
        "{long}"
    );
    let commit = lines
        .next()
        .and_then(|l| l.strip_prefix("commit: "))
        .unwrap_or_else(|| panic!("no commit line:\n{long}"));
    let head = Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| text(&o.stdout).trim().to_owned());
    match head {
        Some(head) => assert!(
            commit.len() == 12 && head.starts_with(commit),
            "commit {commit}, HEAD {head}"
        ),
        None => assert_eq!(commit, "unknown"),
    }
    let built: Vec<&str> = [
        ("api", cfg!(feature = "api")),
        ("tls", cfg!(feature = "tls")),
        ("policy", cfg!(feature = "policy")),
    ]
    .into_iter()
    .filter_map(|(f, on)| on.then_some(f))
    .collect();
    let features = if built.is_empty() {
        "none".to_owned()
    } else {
        built.join(", ")
    };
    assert_eq!(lines.next(), Some(format!("features: {features}").as_str()));
    // Where the missing feature is, when it is missing.
    let rest: Vec<&str> = lines.collect();
    if cfg!(feature = "policy") {
        assert!(rest.is_empty(), "{long}");
    } else {
        assert!(rest[0].contains("-policy image") && rest[0].contains("--features policy"));
    }
    let short = text(&run(&["-V"]).stdout);
    assert_eq!(
        short.trim(),
        format!(
            "confgate {} (commit {commit}; features: {features})",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// A build without `policy` answers `confgate policy` with the build that has it, not clap's
/// "unrecognized subcommand".
#[cfg(not(feature = "policy"))]
#[test]
fn policy_in_a_build_without_it_names_the_build_that_has_it() {
    let out = run(&[
        "policy",
        "--namespace",
        "ns",
        "--name",
        "cm",
        "--accepts",
        "^1",
    ]);
    assert_eq!(out.status.code(), Some(64));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("`policy` is not in this build"), "{err}");
    assert!(err.contains("-policy"), "{err}");
    assert!(err.contains("cargo build --features policy"), "{err}");
}

/// Completion scripts for bash, zsh and fish, from the same command line: bash's is loaded by a real
/// bash and completes the commands.
#[test]
fn completions_are_printed_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F _confgate"),
        ("zsh", "#compdef confgate"),
        ("fish", "complete -c confgate"),
    ] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}:\n{script}");
        for command in ["run", "check", "inject", "probe"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
    let bash = common::tool("bash");
    // What bash offers after `confgate ` and after `confgate probe `.
    let offered = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let script = format!(
            "source <({BIN} completions bash)\nCOMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; \
             COMP_POINT=${{#COMP_LINE}}\n_confgate confgate '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let out = Command::new(&bash).args(["-c", &script]).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let commands = offered("confgate ''");
    for command in ["run", "wait", "check", "probe", "inject", "completions"] {
        assert!(commands.lines().any(|l| l == command), "{commands}");
    }
    let kinds = offered("confgate probe ''");
    for kind in ["ready", "live", "startup"] {
        assert!(kinds.lines().any(|l| l == kind), "{kinds}");
    }
}

/// The binary installed as `kubectl-confgate` is a kubectl plugin: its help says `kubectl confgate`
/// and lists the workstation's commands; it runs them as `confgate` does.
#[test]
fn installed_as_kubectl_confgate_it_answers_as_a_kubectl_plugin() {
    let bin = tempfile::tempdir().unwrap();
    let plugin = bin.path().join("kubectl-confgate");
    std::os::unix::fs::symlink(BIN, &plugin).unwrap();

    let out = Command::new(&plugin).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = text(&out.stdout);
    assert!(help.contains("Usage: kubectl confgate <COMMAND>"), "{help}");
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut expected = vec!["check", "inject"];
    if cfg!(feature = "policy") {
        expected.push("policy");
    }
    if cfg!(feature = "api") {
        expected.push("status");
    }
    expected.push("help");
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "{help}");
    let check_help = text(
        &Command::new(&plugin)
            .args(["check", "--help"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(
        check_help.contains("Usage: kubectl confgate check"),
        "{check_help}"
    );

    // A real command through the plugin name: check a directory.
    let d = Dirs::new();
    write_version(&d.watch(), "2.4.1");
    let out = Command::new(&plugin)
        .args(["check", "--accepts", ">=2.4.0, <3.0.0"])
        .arg(d.watch())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        text(
            &run(&[
                "check",
                "--accepts",
                ">=2.4.0, <3.0.0",
                &d.watch().display().to_string()
            ])
            .stdout
        )
    );

    // kubectl's own plugin discovery: on PATH, `kubectl plugin list` names it and `kubectl confgate`
    // runs it.
    let kubectl = common::tool("kubectl");
    let kubectl_run = |args: &[&str]| {
        Command::new(&kubectl)
            .args(args)
            .env("PATH", bin.path())
            .env("HOME", bin.path())
            .env("KUBECONFIG", bin.path().join("none"))
            .output()
            .unwrap()
    };
    let out = kubectl_run(&["plugin", "list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&plugin.display().to_string()),
        "{}",
        text(&out.stdout)
    );
    let out = kubectl_run(&["confgate", "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Usage: kubectl confgate <COMMAND>"));
    let out = kubectl_run(&["confgate", "inject", "--help"]);
    assert!(text(&out.stdout).contains("Usage: kubectl confgate inject"));
}
