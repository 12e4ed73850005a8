//! Connections read from kubeconfigs and the ServiceAccount: tokens, exec plugins, TLS, and errors
//! that name what is wrong and show no credential.

use super::kubeconfig::{ExecConfig, Kubeconfig, merge, parse, resolve};
use super::*;

fn kubeconfig(dir: &Path, user: &str, cluster_extra: &str) -> Result<Connection, Problem> {
    kubeconfig_at(dir, "http://127.0.0.1:1", user, cluster_extra)
}

pub(super) fn kubeconfig_at(
    dir: &Path,
    server: &str,
    user: &str,
    cluster_extra: &str,
) -> Result<Connection, Problem> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}\
         users:\n- name: u\n  user:\n{user}\
         contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: prod\ncurrent-context: x\n"
    );
    let mut config: Kubeconfig = serde_saphyr::from_str(&text).unwrap();
    let one = std::mem::take(&mut config);
    merge(&mut config, one, dir);
    resolve(config)
}

/// A kubeconfig whose user is a bare string (a pasted token where a mapping belongs): the error
/// names the file and where, never the value.
#[test]
fn an_unreadable_kubeconfig_is_named_without_its_content() {
    let path = Path::new("/home/ops/.kube/config");
    let text = "users:\n- name: u\n  user: secret-token-4711\n";
    let e = parse(path, text).err().unwrap().to_string();
    assert!(e.contains("/home/ops/.kube/config"), "{e}");
    assert!(e.contains("line 3"), "{e}");
    assert!(!e.contains("secret-token"), "{e}");
}

#[test]
fn an_auth_provider_is_refused_naming_it_and_what_to_use() {
    let tmp = tempfile::tempdir().unwrap();
    let e = kubeconfig(
        tmp.path(),
        "    auth-provider:\n      name: gcp\n      config: {access-token: secret-token}\n",
        "",
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("auth-provider \"gcp\""), "{e}");
    assert!(e.contains("exec plugin"), "{e}");
    assert!(!e.contains("secret-token"), "{e}");
}

#[test]
fn a_kubeconfig_that_skips_tls_verification_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = kubeconfig(
        tmp.path(),
        "    token: t\n",
        "    insecure-skip-tls-verify: true\n",
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("insecure-skip-tls-verify"), "{e}");
}

#[test]
fn a_token_file_is_relative_to_the_kubeconfig_and_named_when_absent() {
    let tmp = tempfile::tempdir().unwrap();
    let e = kubeconfig(tmp.path(), "    tokenFile: absent\n", "")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(&tmp.path().join("absent").display().to_string()),
        "{e}"
    );
    assert!(e.contains("does not exist"), "{e}");
    std::fs::write(tmp.path().join("token"), "t\n").unwrap();
    let c = kubeconfig(tmp.path(), "    tokenFile: token\n", "").unwrap();
    assert!(matches!(c.auth, Auth::TokenFile(_)));
    assert_eq!(c.namespace, "prod");
}

#[test]
fn an_inline_token_comes_before_a_token_file_as_in_kube() {
    let tmp = tempfile::tempdir().unwrap();
    let c = kubeconfig(tmp.path(), "    token: inline\n    tokenFile: absent\n", "").unwrap();
    let Auth::Header(v) = c.auth else {
        panic!("not the inline token")
    };
    assert_eq!(v, "Bearer inline");
    assert!(v.is_sensitive());
}

/// An HTTP/1.1 server on loopback that answers every request 200 and sends the `Authorization`
/// header it got (if any) to the returned channel.
fn recording_server() -> (u16, std::sync::mpsc::Receiver<Option<String>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut auth = None;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line.trim_end().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("authorization")
                {
                    auth = Some(v.trim().to_owned());
                }
                line.clear();
            }
            let _ = tx.send(auth);
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, rx)
}

async fn ask(
    client: &kube::Client,
    rx: &std::sync::mpsc::Receiver<Option<String>>,
) -> Option<String> {
    let req = hyper::Request::get("/version").body(Vec::new()).unwrap();
    client.request_text(req).await.unwrap();
    rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap()
}

/// A token file with a trailing newline (as `echo` writes one) is sent trimmed, and read again
/// at every request: a rotated token is in use at the next request, never frozen at the first.
#[tokio::test]
async fn a_token_file_is_trimmed_and_read_again_at_every_request() {
    let (port, rx) = recording_server();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("token");
    std::fs::write(&path, "first.token\n").unwrap();
    let server = format!("http://127.0.0.1:{port}");
    let client = kubeconfig_at(tmp.path(), &server, "    tokenFile: token\n", "")
        .unwrap()
        .client()
        .await
        .unwrap();
    assert_eq!(
        ask(&client, &rx).await.as_deref(),
        Some("Bearer first.token")
    );
    std::fs::write(&path, "  second.token \n").unwrap();
    assert_eq!(
        ask(&client, &rx).await.as_deref(),
        Some("Bearer second.token")
    );
    // A file emptied (or removed) keeps the last token, as kube does.
    std::fs::write(&path, "\n").unwrap();
    assert_eq!(
        ask(&client, &rx).await.as_deref(),
        Some("Bearer second.token")
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        ask(&client, &rx).await.as_deref(),
        Some("Bearer second.token")
    );
}

/// The in-cluster connection reads the ServiceAccount's token at every request, too.
#[tokio::test]
async fn the_service_account_token_is_read_at_every_request() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("token");
    std::fs::write(&path, "one\n").unwrap();
    let t = TokenFile::open(path.clone()).unwrap();
    assert_eq!(t.header().await, "Bearer one");
    std::fs::write(&path, "two\n").unwrap();
    assert_eq!(t.header().await, "Bearer two");
    assert!(t.header().await.is_sensitive());
}

/// The token file is read on the blocking pool, never on the loop's thread (which answers
/// `/livez`'s ping): with the pool's one thread held, a request sends the last token read once
/// `TOKEN_READ_WAIT` has passed, and the new token once the pool is free again.
#[test]
fn a_token_file_is_read_on_the_blocking_pool_not_the_requests_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("token");
    std::fs::write(&path, "one\n").unwrap();
    let t = TokenFile::open(path.clone()).unwrap();
    std::fs::write(&path, "two\n").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started, holding) = tokio::sync::oneshot::channel();
        let hold = tokio::task::spawn_blocking(move || {
            let _ = started.send(());
            let _ = held.recv();
        });
        holding.await.unwrap();
        // A read made on this thread would find the new token at once.
        assert_eq!(t.header().await, "Bearer one");
        release.send(()).unwrap();
        hold.await.unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while t.header().await != "Bearer two" {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new token was never read once the pool was free"
            );
            tokio::task::yield_now().await;
        }
    });
}

/// The token file replaced by a FIFO no one writes, then by a file of 1 MiB: a request neither
/// waits on the FIFO (it froze the thread answering probes for good) nor reads the large file
/// whole; each sends the last token read, and a good token is read again after them. Asked from
/// a thread of its own, so a request that blocks fails this test instead of hanging it.
#[test]
fn a_token_file_made_a_fifo_or_huge_neither_blocks_nor_is_read_whole() {
    let (port, rx) = recording_server();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("token");
    std::fs::write(&path, "good.token\n").unwrap();
    let server = format!("http://127.0.0.1:{port}");
    let conn = kubeconfig_at(tmp.path(), &server, "    tokenFile: token\n", "").unwrap();
    let (done_tx, done) = std::sync::mpsc::channel();
    let p = path.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let client = conn.client().await.unwrap();
            std::fs::remove_file(&p).unwrap();
            nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
            let fifo = ask(&client, &rx).await;
            std::fs::remove_file(&p).unwrap();
            std::fs::write(&p, vec![b'a'; 1024 * 1024]).unwrap();
            let huge = ask(&client, &rx).await;
            std::fs::write(&p, "next.token\n").unwrap();
            let next = ask(&client, &rx).await;
            let _ = done_tx.send((fifo, huge, next));
        });
    });
    let (fifo, huge, next) = done
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the requests to finish: one blocked on the token file");
    assert_eq!(fifo.as_deref(), Some("Bearer good.token"));
    assert_eq!(huge.as_deref(), Some("Bearer good.token"));
    assert_eq!(next.as_deref(), Some("Bearer next.token"));
    // At start, the same file is refused, naming it, not waited on.
    std::fs::remove_file(&path).unwrap();
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let e = TokenFile::open(path.clone()).err().unwrap().to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

/// A plugin that hangs is killed at its time bound, with what it started, and named; one that
/// prints without end is stopped past its output bound, not buffered whole.
#[tokio::test]
async fn an_exec_plugin_that_hangs_or_prints_without_end_is_stopped_and_named() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let plugin = tmp.path().join("hang.sh");
    let pidfile = tmp.path().join("child.pid");
    // A child of its own holds stdout open, as a helper a plugin starts would.
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\nsleep 300 &\necho $! > {}\nwait\n",
            pidfile.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = |command: &str| ExecConfig {
        command: command.to_owned(),
        args: None,
        env: None,
        api_version: None,
    };
    let mut exec = Exec::new(config(&plugin.display().to_string()), tmp.path());
    exec.timeout = std::time::Duration::from_millis(500);
    let started = std::time::Instant::now();
    let e = exec.run().await.err().unwrap().to_string();
    assert!(
        e.contains("hang.sh") && e.contains("did not finish within 500ms and was killed"),
        "{e}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed with its group: gone, or a zombie waiting for its reaper.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !(std::fs::read_to_string(format!("/proc/{child}/stat"))
        .map_or(true, |s| s.split(' ').nth(2) == Some("Z")))
    {
        assert!(
            std::time::Instant::now() < end,
            "the plugin's child {child} outlived the kill"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let loud = tmp.path().join("loud.sh");
    std::fs::write(&loud, "#!/bin/sh\nexec yes '{\"status\":{}}'\n").unwrap();
    std::fs::set_permissions(&loud, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = Exec::new(config(&loud.display().to_string()), tmp.path())
        .run()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("printed more than 1048576 bytes"), "{e}");
}

/// A server URL's password is shown nowhere: not in `server()` (what `confgate status` names in
/// its errors), nor in the error about a server that is not a URL.
#[test]
fn a_server_urls_userinfo_is_never_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let c = kubeconfig_at(
        tmp.path(),
        "http://admin:PASSWORD@203.0.113.7:8080",
        "    token: t\n",
        "",
    )
    .unwrap();
    let shown = c.server();
    assert!(
        !shown.contains("PASSWORD") && !shown.contains("admin"),
        "{shown}"
    );
    assert!(shown.contains("203.0.113.7:8080"), "{shown}");
    let e = kubeconfig_at(
        tmp.path(),
        "http://admin:PASSWORD@bad host",
        "    token: t\n",
        "",
    )
    .err()
    .unwrap()
    .to_string();
    assert!(!e.contains("PASSWORD"), "{e}");
}

/// Credentials to an `http://` server other than loopback are sent in the clear: said.
#[test]
fn http_to_a_server_other_than_loopback_is_in_the_clear() {
    for (url, clear) in [
        ("http://203.0.113.7:8080", true),
        ("http://api.example.com", true),
        ("http://127.0.0.1:8080", false),
        ("http://localhost:8080", false),
        ("http://[::1]:8080", false),
        ("https://203.0.113.7", false),
    ] {
        assert_eq!(in_clear(&url.parse().unwrap()), clear, "{url}");
    }
}

/// An exec plugin (a real process) gives the token; once it has expired the plugin runs again.
#[tokio::test]
async fn an_exec_plugin_token_is_used_and_fetched_again_once_expired() {
    use std::os::unix::fs::PermissionsExt as _;
    let (port, rx) = recording_server();
    let tmp = tempfile::tempdir().unwrap();
    let plugin = tmp.path().join("plugin.sh");
    // Each run counts itself and gives a token already expired, so the next request runs it again.
    std::fs::write(
        &plugin,
        "#!/bin/sh\nn=$(cat \"$0.count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0.count\"\n\
         printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
         \"status\":{\"token\":\"exec-%s-%s\",\"expirationTimestamp\":\"2000-01-01T00:00:00Z\"}}' \"$n\" \"$GREETING\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = format!("http://127.0.0.1:{port}");
    let user = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ./plugin.sh\n      \
                env:\n      - name: GREETING\n        value: hi\n";
    let client = kubeconfig_at(tmp.path(), &server, user, "")
        .unwrap()
        .client()
        .await
        .unwrap();
    // The first run was at build; the token it gave had expired by the first request.
    assert_eq!(ask(&client, &rx).await.as_deref(), Some("Bearer exec-2-hi"));
    assert_eq!(ask(&client, &rx).await.as_deref(), Some("Bearer exec-3-hi"));
}

/// A plugin that fails is said at build, naming it.
#[tokio::test]
async fn an_exec_plugin_that_fails_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let user = "    exec:\n      command: false\n";
    let e = kubeconfig(tmp.path(), user, "")
        .unwrap()
        .client()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("exec plugin \"false\" failed"), "{e}");
}

/// The ServiceAccount's files make the in-cluster connection: the server from the service's
/// environment (an IPv6 address bracketed, 443 left out), the namespace trimmed, and a file that
/// is missing named.
#[test]
fn the_service_account_dir_gives_the_in_cluster_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let e = in_cluster_at("10.0.0.1".into(), "443", dir)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&dir.join("ca.crt").display().to_string()), "{e}");
    assert!(e.contains("does not exist"), "{e}");
    std::fs::write(
        dir.join("ca.crt"),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let e = in_cluster_at("10.0.0.1".into(), "443", dir)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&dir.join("token").display().to_string()), "{e}");
    std::fs::write(dir.join("token"), "sa-token\n").unwrap();
    std::fs::write(dir.join("namespace"), "prod\n").unwrap();
    let c = in_cluster_at("10.0.0.1".into(), "443", dir).unwrap();
    assert_eq!(c.server(), "https://10.0.0.1/");
    assert_eq!(c.namespace, "prod");
    let Auth::TokenFile(t) = &c.auth else {
        panic!("not the token file")
    };
    assert_eq!(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(t.header()),
        "Bearer sa-token"
    );
    let c = in_cluster_at("fd00::1".into(), "6443", dir).unwrap();
    assert_eq!(c.server(), "https://[fd00::1]:6443/");
    assert!(matches!(
        in_cluster_at("10.0.0.1".into(), "https", dir),
        Err(InClusterError::Port(_))
    ));
}
