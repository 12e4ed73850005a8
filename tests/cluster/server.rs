//! One etcd and one kube-apiserver on loopback, started once for the whole test binary, or the reason
//! the suite cannot run.
//!
//! - No TCP port is picked by binding and closing. etcd listens on unix sockets only (client and peer),
//!   and kube-apiserver reaches it through `unix://`. kube-apiserver cannot bind port 0 (its
//!   `--secure-port` "cannot be turned off with 0"), so it gets a random port below the kernel's
//!   ephemeral range, and another one when its log says the port was taken. Readiness is `/readyz`
//!   answering through a client that trusts only this run's CA, so another server on the port can never
//!   pass for ours.
//! - Nothing outlives the test process. The servers are started through `setpriv --pdeathsig KILL` by a
//!   thread that lives as long as the process (the parent-death signal follows the thread that forked
//!   the child), so the kernel kills them however the process ends, a panic or a SIGKILL included. A
//!   janitor shell holding the read end of a pipe removes the temp dir when that pipe closes, i.e.
//!   when the test process is gone. A start that fails kills what it started (guards).

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// How long kube-apiserver may take to become ready on a loaded 2-core machine.
const READY_DEADLINE: Duration = Duration::from_secs(90);
/// How many ports kube-apiserver is offered before the start is given up.
const PORT_ATTEMPTS: usize = 8;

/// The running servers and what a test needs to reach them.
pub struct Cluster {
    /// The temp dir holding the data, certificates, kubeconfigs and logs.
    pub dir: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The CA that signed the serving certificate.
    pub ca: PathBuf,
    /// A kubeconfig for the admin (a static token in the group `system:masters`).
    pub admin: PathBuf,
    /// A static token for the user `status-reader` in the group `confgate-status-readers`, the
    /// group `manifests/rbac/status-reader.yaml` binds.
    pub reader_token: String,
    /// The server's `gitVersion`.
    pub version: String,
    pub kubectl: PathBuf,
    pub setpriv: PathBuf,
    /// etcd, kept so it is not reaped by anyone else; the kernel kills it at exit.
    _etcd: Guard,
    /// kube-apiserver (`None` while stopped) and how to start it again on the same port.
    apiserver: Mutex<Option<Guard>>,
    apiserver_cmd: (PathBuf, Vec<String>),
    /// The janitor's stdin: closed when the process ends, whereupon the janitor removes `dir`.
    _janitor: ChildStdin,
}

impl Cluster {
    /// Stops kube-apiserver (SIGKILL, as a crash would); etcd and the data stay.
    pub fn stop_apiserver(&self) {
        drop(self.apiserver.lock().unwrap().take());
    }

    /// Starts kube-apiserver again with the same port, certificates, tokens and etcd, so every
    /// kubeconfig and ServiceAccount token made before stays valid, and waits until it is ready.
    pub fn start_apiserver(&self) {
        let mut slot = self.apiserver.lock().unwrap();
        assert!(slot.is_none(), "kube-apiserver is running");
        let (bin, args) = &self.apiserver_cmd;
        let log = self.dir.join("kube-apiserver.log");
        let mut guard = server(&self.dir, &self.setpriv, bin, args, "kube-apiserver.log")
            .unwrap_or_else(|e| panic!("{e}"));
        match wait_ready(&mut guard, &self.admin, &log, &mut []) {
            Ok(()) => *slot = Some(guard),
            Err(Ready::PortTaken) => {
                panic!("the port of {} was taken while it was stopped", self.server)
            }
            Err(Ready::Failed(why)) => panic!("restarting kube-apiserver: {why}"),
        }
    }
}

enum State {
    Up(Box<Cluster>),
    Skipped(String),
    Failed(String),
}

/// The shared cluster, started on first use. Without its binaries (the tests are `#[ignore]`d for
/// that, so this is a run with `--ignored`) or when it fails to start, every test fails with the reason.
pub fn cluster() -> &'static Cluster {
    static STATE: OnceLock<State> = OnceLock::new();
    static ANNOUNCED: std::sync::Once = std::sync::Once::new();
    match STATE.get_or_init(start) {
        State::Up(c) => {
            ANNOUNCED.call_once(|| {
                say(&format!(
                    "kube-apiserver {} at {}, etcd on a unix socket, in {}",
                    c.version,
                    c.server,
                    c.dir.display()
                ))
            });
            c
        }
        State::Skipped(why) => panic!("the real-API-server suite cannot run: {why}"),
        State::Failed(why) => panic!("starting etcd and kube-apiserver failed: {why}"),
    }
}

/// A cluster of its own, for a test that stops and starts its API server; fails as [`cluster`] does.
pub fn private_cluster() -> Cluster {
    match start() {
        State::Up(c) => {
            say(&format!(
                "a private kube-apiserver at {}, in {}",
                c.server,
                c.dir.display()
            ));
            *c
        }
        State::Skipped(why) => panic!("the real-API-server suite cannot run: {why}"),
        State::Failed(why) => panic!("starting etcd and kube-apiserver failed: {why}"),
    }
}

/// One line on standard error, written at once and past the test harness's capture (which would
/// hide `eprintln!` of a passing test).
fn say(what: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("cluster: {what}\n").as_bytes());
}

/// An executable file named by `var`, or why not.
fn executable(var: &str) -> Result<PathBuf, String> {
    let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
        return Err(format!(
            "{var} is not set (set ETCD_BIN and KUBE_APISERVER_BIN to run it)"
        ));
    };
    let path = PathBuf::from(value);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(path),
        Ok(_) => Err(format!(
            "{var}={} is not an executable file",
            path.display()
        )),
        Err(e) => Err(format!("{var}={}: {e}", path.display())),
    }
}

/// A tool on PATH or in the virtual environment `.ci/setup` makes.
fn tool(name: &str) -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(std::iter::once(venv))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{name} is not on PATH"))
}

fn start() -> State {
    let found = (|| {
        Ok::<_, String>((
            executable("ETCD_BIN")?,
            executable("KUBE_APISERVER_BIN")?,
            tool("kubectl")?,
            tool("openssl")?,
            tool("setpriv")?,
        ))
    })();
    let (etcd, apiserver, kubectl, openssl, setpriv) = match found {
        Ok(f) => f,
        Err(why) => return State::Skipped(why),
    };
    match Start::new(setpriv).and_then(|s| s.run(&etcd, &apiserver, kubectl, &openssl)) {
        Ok(c) => State::Up(Box::new(c)),
        Err(why) => State::Failed(why),
    }
}

/// A child killed and reaped when dropped (a start that fails half-way leaves nothing running).
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `cmd` from the one thread that lives as long as the process, so a parent-death signal set
/// in the child fires only when the process ends.
fn spawn_kept(cmd: Command) -> std::io::Result<Child> {
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("cluster-keeper".into())
            // The sender lives in a static, so this loop, and the thread, end only with the process.
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the keeper thread");
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    keeper
        .lock()
        .unwrap()
        .send((cmd, tx))
        .expect("keeper thread");
    rx.recv().expect("keeper thread")
}

/// Runs `cmd` to completion; its stderr in the error.
fn run(mut cmd: Command, what: &str) -> Result<Vec<u8>, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

/// The end of a log file, for error messages.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(25)..].join("\n")
}

fn token() -> String {
    std::iter::repeat_with(fastrand::alphanumeric)
        .take(32)
        .collect()
}

/// Writes a kubeconfig for `server` trusting `ca`, authenticating with `token`.
pub fn write_kubeconfig(path: &Path, server: &str, ca: &Path, token: &str, namespace: &str) {
    write_kubeconfig_for(path, server, ca, &format!("token: {token}"), namespace);
}

/// Writes a kubeconfig whose user is `credential` (a line of its `user:` map).
pub fn write_kubeconfig_for(
    path: &Path,
    server: &str,
    ca: &Path,
    credential: &str,
    namespace: &str,
) {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\n    \
             certificate-authority: {}\nusers:\n- name: user\n  user:\n    {credential}\ncontexts:\n\
             - name: test\n  context:\n    cluster: test\n    user: user\n    namespace: {namespace}\n\
             current-context: test\n",
            ca.display()
        ),
    )
    .expect("write kubeconfig");
}

/// A server process in `dir`: killed by the kernel when the test process ends, its output appended
/// to `log`.
pub fn server(
    dir: &Path,
    setpriv: &Path,
    bin: &Path,
    args: &[String],
    log: &str,
) -> Result<Guard, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(log))
        .map_err(|e| format!("{log}: {e}"))?;
    let mut cmd = Command::new(setpriv);
    cmd.args(["--pdeathsig", "KILL", "--"])
        .arg(bin)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(file.try_clone().map_err(|e| format!("{log}: {e}"))?)
        .stderr(file);
    spawn_kept(cmd)
        .map(Guard)
        .map_err(|e| format!("start {}: {e}", bin.display()))
}

/// A start in progress: its dir, and what must die if it fails.
struct Start {
    dir: PathBuf,
    setpriv: PathBuf,
    janitor: ChildStdin,
}

impl Start {
    fn new(setpriv: PathBuf) -> Result<Start, String> {
        let dir = tempfile::Builder::new()
            .prefix("confgate-cluster-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?
            .keep();
        // Reads until the test process is gone (its end of the pipe closes with it), then removes the
        // dir; the second try covers a server the kernel is still tearing down.
        let mut janitor = Command::new("sh")
            .args([
                "-c",
                "cat >/dev/null; rm -rf -- \"$1\" 2>/dev/null || { sleep 1; rm -rf -- \"$1\"; }",
                "janitor",
            ])
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("janitor: {e}"))?;
        let janitor = janitor.stdin.take().expect("piped stdin");
        Ok(Start {
            dir,
            setpriv,
            janitor,
        })
    }

    fn server(&self, bin: &Path, args: &[String], log: &str) -> Result<Guard, String> {
        server(&self.dir, &self.setpriv, bin, args, log)
    }

    /// A CA, a serving certificate for 127.0.0.1 signed by it, and a service-account signing key.
    fn certificates(&self, openssl: &Path) -> Result<(), String> {
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        let mut ca = Command::new(openssl);
        ca.current_dir(&self.dir)
            .args(["req", "-x509"])
            .args(ec)
            .args(["-days", "1", "-subj", "/CN=confgate-test-ca"])
            .args(["-keyout", "ca.key", "-out", "ca.crt"]);
        run(ca, "openssl: the CA")?;
        let mut serving = Command::new(openssl);
        serving
            .current_dir(&self.dir)
            .args(["req", "-x509", "-CA", "ca.crt", "-CAkey", "ca.key"])
            .args(ec)
            .args(["-days", "1", "-subj", "/CN=kube-apiserver"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1"])
            .args(["-addext", "basicConstraints=critical,CA:FALSE"])
            .args(["-addext", "extendedKeyUsage=serverAuth"])
            .args(["-keyout", "serving.key", "-out", "serving.crt"]);
        run(serving, "openssl: the serving certificate")?;
        let mut sa = Command::new(openssl);
        sa.current_dir(&self.dir)
            .args(["genpkey", "-algorithm", "EC"])
            .args(["-pkeyopt", "ec_paramgen_curve:P-256", "-out", "sa.key"]);
        run(sa, "openssl: the service-account key")?;
        // The verifying side reads a public key only.
        let mut public = Command::new(openssl);
        public
            .current_dir(&self.dir)
            .args(["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"]);
        run(public, "openssl: the service-account public key")?;
        Ok(())
    }

    fn run(
        self,
        etcd: &Path,
        apiserver: &Path,
        kubectl: PathBuf,
        openssl: &Path,
    ) -> Result<Cluster, String> {
        self.certificates(openssl)?;
        let (admin_token, reader_token) = (token(), token());
        std::fs::write(
            self.dir.join("tokens.csv"),
            format!(
                "{admin_token},admin,admin,system:masters\n\
                 {reader_token},status-reader,status-reader,confgate-status-readers\n"
            ),
        )
        .map_err(|e| format!("tokens.csv: {e}"))?;

        // Socket files in the dir (etcd wants `unix://HOST:PORT` and makes the file `HOST:PORT` in
        // its working directory): no TCP port at all.
        let etcd_args: Vec<String> = [
            "--name=test",
            "--data-dir=etcd-data",
            "--listen-client-urls=unix://etcd-client:0",
            "--advertise-client-urls=unix://etcd-client:0",
            "--listen-peer-urls=unix://etcd-peer:0",
            "--initial-advertise-peer-urls=unix://etcd-peer:0",
            "--initial-cluster=test=unix://etcd-peer:0",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        .map(String::from)
        .into();
        let mut etcd_guard = [self.server(etcd, &etcd_args, "etcd.log")?];

        let admin = self.dir.join("admin.kubeconfig");
        let ca = self.dir.join("ca.crt");
        let (port, guard, args) =
            self.apiserver(apiserver, &admin, &ca, &admin_token, &mut etcd_guard)?;
        let [etcd_guard] = etcd_guard;
        let server = format!("https://127.0.0.1:{port}");
        let version = runtime().block_on(async {
            let client = client(&admin).await;
            let v = client
                .request_text(http::Request::get("/version").body(vec![]).unwrap())
                .await
                .map_err(|e| format!("GET /version: {e}"))?;
            let v: serde_json::Value = serde_json::from_str(&v).map_err(|e| e.to_string())?;
            Ok::<_, String>(v["gitVersion"].as_str().unwrap_or("unknown").to_owned())
        })?;
        Ok(Cluster {
            dir: self.dir,
            server,
            ca,
            admin,
            reader_token,
            version,
            kubectl,
            setpriv: self.setpriv,
            _etcd: etcd_guard,
            apiserver: Mutex::new(Some(guard)),
            apiserver_cmd: (apiserver.to_owned(), args),
            _janitor: self.janitor,
        })
    }

    /// Starts kube-apiserver on a free port and waits until it is ready; another port when the one
    /// offered is taken.
    fn apiserver(
        &self,
        bin: &Path,
        admin: &Path,
        ca: &Path,
        admin_token: &str,
        children: &mut [Guard],
    ) -> Result<(u16, Guard, Vec<String>), String> {
        let (low, high) = ephemeral_range();
        let d = self.dir.display();
        let mut last = String::new();
        for _ in 0..PORT_ATTEMPTS {
            // Below the ephemeral range, where outgoing connections take their ports from.
            let port = if low > 20_000 {
                fastrand::u16(10_000..low)
            } else {
                fastrand::u16(high.saturating_add(1).max(10_000)..=u16::MAX)
            };
            let args: Vec<String> = vec![
                format!("--etcd-servers=unix://{d}/etcd-client:0"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
                format!("--tls-cert-file={d}/serving.crt"),
                format!("--tls-private-key-file={d}/serving.key"),
                format!("--cert-dir={d}/certs"),
                format!("--token-auth-file={d}/tokens.csv"),
                "--authorization-mode=RBAC".into(),
                // As kubeadm runs it: kube-proxy's DaemonSet (manifests/kube-proxy) is privileged.
                "--allow-privileged=true".into(),
                "--service-account-issuer=https://kubernetes.default.svc".into(),
                format!("--service-account-key-file={d}/sa.pub"),
                format!("--service-account-signing-key-file={d}/sa.key"),
                // Cluster IPs are only allocated, never routed: nothing listens on them.
                "--service-cluster-ip-range=10.96.0.0/24".into(),
                // The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints refuse.
                "--endpoint-reconciler-type=none".into(),
                "--profiling=false".into(),
            ];
            write_kubeconfig(
                admin,
                &format!("https://127.0.0.1:{port}"),
                ca,
                admin_token,
                "default",
            );
            let log = self.dir.join("kube-apiserver.log");
            // A port taken is read from this attempt's log alone.
            let _ = std::fs::remove_file(&log);
            let mut guard = self.server(bin, &args, "kube-apiserver.log")?;
            match wait_ready(&mut guard, admin, &log, children) {
                Ok(()) => return Ok((port, guard, args)),
                Err(Ready::PortTaken) => {
                    last = format!("port {port} was taken");
                    continue;
                }
                Err(Ready::Failed(why)) => return Err(why),
            }
        }
        Err(format!(
            "no free port after {PORT_ATTEMPTS} attempts; last: {last}"
        ))
    }
}

/// The kernel's ephemeral port range.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999))
}

enum Ready {
    PortTaken,
    Failed(String),
}

/// Waits until `/readyz` answers `ok` through `kubeconfig`, while the process (and etcd) live.
fn wait_ready(
    apiserver: &mut Guard,
    kubeconfig: &Path,
    log: &Path,
    others: &mut [Guard],
) -> Result<(), Ready> {
    let end = Instant::now() + READY_DEADLINE;
    runtime().block_on(async {
        let client = client(kubeconfig).await;
        let mut last: String;
        loop {
            if let Ok(Some(status)) = apiserver.0.try_wait() {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                if text.contains("address already in use") {
                    return Err(Ready::PortTaken);
                }
                return Err(Ready::Failed(format!(
                    "kube-apiserver exited ({status}); its log ends:\n{}",
                    log_tail(log)
                )));
            }
            for other in others.iter_mut() {
                if let Ok(Some(status)) = other.0.try_wait() {
                    return Err(Ready::Failed(format!(
                        "etcd exited ({status}); its log ends:\n{}",
                        log_tail(&log.with_file_name("etcd.log"))
                    )));
                }
            }
            let req = http::Request::get("/readyz").body(vec![]).unwrap();
            match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => last = body,
                Err(e) => last = e.to_string(),
            }
            if Instant::now() > end {
                return Err(Ready::Failed(format!(
                    "kube-apiserver not ready after {READY_DEADLINE:?}: {last}; its log ends:\n{}",
                    log_tail(log)
                )));
            }
            // Polling, not synchronising: the next look at a condition with a deadline.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// A current-thread runtime for the kube client calls of the harness and the tests.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A kube client from a kubeconfig file, with short timeouts so a wait loop keeps looking.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("kubeconfig");
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(20));
    kube::Client::try_from(config).expect("kube client")
}
