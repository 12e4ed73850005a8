//! A real node beside the suite's kube-apiserver: containerd (with runc) and a kubelet, each run by the
//! suite with a root, state dir, socket and cgroup of its own, and confgate's images imported offline.
//!
//! What the node needs on this machine, each measured here (docs/development.md has the details):
//! - cgroup v1 hierarchies are mounted, so the kubelet runs with `failCgroupV1: false` and the
//!   `cgroupfs` driver, under a `cgroupRoot` made for this node (a kubelet deletes pod cgroups it does
//!   not know under its root, so no two nodes share one);
//! - root here lacks CAP_SYS_RESOURCE, so containerd's CRI sets `restrict_oom_score_adj` (otherwise
//!   runc fails every sandbox setting the pause container's oom_score_adj of -998);
//! - pods are `hostNetwork` (no CNI plugin needed) and bound with `nodeName` (no scheduler); the
//!   controller-manager's jobs the pods need (a ServiceAccount, `kube-root-ca.crt`) are done by the
//!   suite; probes are exec probes, so nothing but loopback is ever dialled.
//!
//! Binaries come from `KUBELET_BIN`, `CONTAINERD_BIN` and `RUNC_BIN`, images from `CONFGATE_IMAGES`
//! (the dir `scripts/build-images.sh` writes); the node tests are `#[ignore]`d with what they need, and
//! a run with `--ignored` that lacks one fails saying which. Nothing outlives the test process: the
//! daemons run under `setpriv --pdeathsig KILL`, and a janitor kills what is left in the node's
//! cgroups (containers outlive containerd through their shims) when the process is gone.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::server::{self, Cluster, Guard};

/// The node's name, as `nodeName` binds pods to it.
pub const NODE: &str = "confgate-node";
/// A warm node registers in about 12 s; a cold one on a loaded 2-core machine takes longer.
const REGISTER_DEADLINE: Duration = Duration::from_secs(120);
/// The v1 hierarchies the kubelet's cgroupfs driver uses.
const HIERARCHIES: &[&str] = &[
    "cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd",
];

/// How often the kubelet syncs each pod, which is when a ConfigMap volume catches up with the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeletSync {
    /// The test bed's: `syncFrequency: 1s` and the `Watch` change-detection strategy, so a volume
    /// follows a ConfigMap within seconds and a test's minutes are enough.
    Fast,
    /// The kubelet's own defaults (`syncFrequency: 1m`, `Watch`): what a cluster left alone runs.
    /// Only the two lines above are left out; the rest of the node's config stays as it is.
    /// Only the benchmark (`benches/edit_to_running.rs`) restarts a node into it.
    #[allow(dead_code)]
    Default,
}

impl KubeletSync {
    /// The KubeletConfiguration lines this setting adds (none: the kubelet's defaults).
    fn config(self) -> &'static str {
        match self {
            KubeletSync::Fast => {
                "syncFrequency: 1s\nconfigMapAndSecretChangeDetectionStrategy: Watch\n"
            }
            KubeletSync::Default => "",
        }
    }
}

pub struct Node {
    pub cluster: &'static Cluster,
    pub dir: PathBuf,
    /// The image names imported, by archive stem (`confgate`, `example-component`, ...).
    pub images: std::collections::BTreeMap<String, String>,
    _containerd: Guard,
    /// containerd's `ctr` and socket, to import an image a benchmark makes.
    ctr: (PathBuf, PathBuf),
    kubelet: std::sync::Mutex<Kubelet>,
    _janitor: std::process::ChildStdin,
}

/// The running kubelet and what starts another like it.
struct Kubelet {
    /// None only while it is being restarted.
    guard: Option<Guard>,
    bin: PathBuf,
    cgroup: String,
    port: u16,
    sync: KubeletSync,
}

/// The node, started once for the test binary on the shared cluster; panics saying what is missing.
///
/// The calling test shares the node until it ends: a test that restarts the kubelet
/// ([`node_alone`]) waits for every sharing test to end and holds the others back until it ends
/// itself, because a restarted kubelet forgets its probes' results (a sidecar that started in the
/// last 10 s reads not started again until its startup probe passes again), which another test
/// would see as its pod's own state. Call it from the test's own thread (libtest gives each test
/// one, whatever `--test-threads` says): a turn taken on a thread the test waits for could wait
/// behind a test that waits for the test.
pub fn node() -> &'static Node {
    take_turn(false);
    started()
}

/// The node for a test that restarts its kubelet: no other node test runs until this one ends.
#[allow(dead_code)]
pub fn node_alone() -> &'static Node {
    take_turn(true);
    started()
}

fn started() -> &'static Node {
    static NODE_STATE: OnceLock<Result<Node, String>> = OnceLock::new();
    match NODE_STATE.get_or_init(start) {
        Ok(n) => n,
        Err(why) => panic!("the node suite cannot run: {why}"),
    }
}

/// A test's turn on the node, held by its thread until the thread ends (libtest runs each test on
/// a thread of its own, and a thread's locals are dropped as it ends, panicking or not).
enum Turn {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

fn take_turn(alone: bool) {
    static TURNS: RwLock<()> = RwLock::new(());
    thread_local! {
        static TURN: RefCell<Option<Turn>> = const { RefCell::new(None) };
    }
    TURN.with(|t| {
        let mut t = t.borrow_mut();
        match (&*t, alone) {
            (Some(Turn::Alone(_)), _) | (Some(Turn::Shared(_)), false) => {}
            (Some(Turn::Shared(_)), true) => {
                panic!("a test that restarts the kubelet takes node_alone() before node()")
            }
            (None, false) => {
                *t = Some(Turn::Shared(
                    TURNS.read().unwrap_or_else(|e| e.into_inner()),
                ))
            }
            (None, true) => {
                *t = Some(Turn::Alone(
                    TURNS.write().unwrap_or_else(|e| e.into_inner()),
                ))
            }
        }
    });
}

fn env_path(var: &str, what: &str) -> Result<PathBuf, String> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(v) => {
            let p = PathBuf::from(v);
            if p.exists() {
                Ok(p)
            } else {
                Err(format!("{var}={} does not exist", p.display()))
            }
        }
        None => Err(format!("{var} is not set ({what})")),
    }
}

fn start() -> Result<Node, String> {
    let kubelet = env_path(
        "KUBELET_BIN",
        "a kubelet, which .ci/setup builds into .ci/venv/bin",
    )?;
    let containerd = env_path("CONTAINERD_BIN", "Debian's containerd")?;
    let runc = env_path("RUNC_BIN", "Debian's runc")?;
    let images = env_path("CONFGATE_IMAGES", "the dir scripts/build-images.sh writes")?;
    let cluster = server::cluster();
    let dir = cluster.dir.join("node");
    std::fs::create_dir_all(dir.join("manifests")).map_err(|e| e.to_string())?;
    // Only one node runs at a time on a machine (the suites take a lock), so any other node's cgroups
    // are what a run that was killed before its janitor finished left behind.
    sweep_stale_cgroups();
    let cgroup = format!("confgate-node-{}", fastrand::u32(..));
    for h in HIERARCHIES {
        let d = Path::new("/sys/fs/cgroup").join(h).join(&cgroup);
        std::fs::create_dir_all(&d).map_err(|e| format!("cgroup {}: {e}", d.display()))?;
        if *h == "cpuset" {
            // A new cpuset has no CPUs or memory nodes until given its parent's.
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = std::fs::read_to_string(Path::new("/sys/fs/cgroup/cpuset").join(f))
                    .map_err(|e| e.to_string())?;
                std::fs::write(d.join(f), v.trim()).map_err(|e| format!("{f}: {e}"))?;
            }
        }
    }
    let janitor = janitor(&dir, &cgroup)?;

    let sock = dir.join("containerd.sock");
    let d = dir.display();
    let config = format!(
        r#"version = 2
root = "{d}/containerd-root"
state = "{d}/containerd-state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{d}/containerd-ttrpc.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni-bin"
    conf_dir = "{d}/cni-conf"
"#,
        sock = sock.display(),
        pause = image_name(&images, "pause")?,
        runc = runc.display(),
    );
    std::fs::write(dir.join("containerd.toml"), config).map_err(|e| e.to_string())?;
    let containerd_guard = server::server(
        &dir,
        &cluster.setpriv,
        &containerd,
        &[format!("--config={d}/containerd.toml")],
        "containerd.log",
    )?;
    let ctr = containerd.with_file_name("ctr");
    let end = Instant::now() + Duration::from_secs(30);
    while !sock.exists() {
        if Instant::now() > end {
            return Err(format!(
                "containerd made no socket; its log ends:\n{}",
                server::log_tail(&dir.join("containerd.log"))
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut names = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(&images).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "tar") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            import(&ctr, &sock, &path)?;
            names.insert(stem.clone(), image_name(&images, &stem)?);
        }
    }

    // Debian's Prometheus, the real component a refused config is rolled back in: its binary and the
    // libraries `ldd` names, as an image made with the project's own image writer.
    let prometheus = dir.join("prometheus.tar");
    host_image(
        &prometheus,
        "localhost/confgate-tests/prometheus:debian",
        "/usr/bin/prometheus",
    )?;
    import(&ctr, &sock, &prometheus)?;
    names.insert(
        "prometheus".into(),
        "localhost/confgate-tests/prometheus:debian".into(),
    );

    // kube-scheduler for the static pod, built from the same tree (static, CGO_ENABLED=0).
    if let Ok(bin) = env_path(
        "KUBE_SCHEDULER_BIN",
        "kube-scheduler, which .ci/setup builds into .ci/venv/bin",
    ) {
        let archive = dir.join("kube-scheduler.tar");
        let name = "localhost/confgate-tests/kube-scheduler:node";
        let file = format!("{}=/usr/local/bin/kube-scheduler", bin.display());
        oci_image(&archive, name, "/usr/local/bin/kube-scheduler", &[file])?;
        import(&ctr, &sock, &archive)?;
        names.insert("kube-scheduler".into(), name.into());
    }

    // kube-apiserver for the static pod whose config files are gated, the test bed's own build.
    if let Ok(bin) = env_path(
        "KUBE_APISERVER_BIN",
        "kube-apiserver from the Kubernetes tree",
    ) {
        let archive = dir.join("kube-apiserver.tar");
        let name = "localhost/confgate-tests/kube-apiserver:node";
        let file = format!("{}=/usr/local/bin/kube-apiserver", bin.display());
        oci_image(&archive, name, "/usr/local/bin/kube-apiserver", &[file])?;
        import(&ctr, &sock, &archive)?;
        names.insert("kube-apiserver".into(), name.into());
    }

    let port = fastrand::u16(20_000..30_000);
    let kubeconfig = dir.join("kubelet.kubeconfig");
    std::fs::copy(&cluster.admin, &kubeconfig).map_err(|e| e.to_string())?;
    let kubelet_guard = start_kubelet(cluster, &dir, &kubelet, &cgroup, port, KubeletSync::Fast)?;
    let end = Instant::now() + REGISTER_DEADLINE;
    loop {
        let out = cluster
            .kubectl()
            .args(["get", "node", NODE, "-o", "name"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            break;
        }
        if Instant::now() > end {
            return Err(format!(
                "the kubelet did not register; its log ends:\n{}",
                server::log_tail(&dir.join("kubelet.log"))
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    // The kubelet serves on 127.0.0.1 only (`address`): that is the node's address, for every type the
    // API server may prefer.
    let addresses = json!({"status": {"addresses": [
        {"type": "InternalIP", "address": "127.0.0.1"},
        {"type": "Hostname", "address": "127.0.0.1"},
    ]}});
    let out = cluster
        .kubectl()
        .args([
            "patch",
            "node",
            NODE,
            "--subresource=status",
            "--type=merge",
            "-p",
        ])
        .arg(addresses.to_string())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "kubectl patch node: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(Node {
        cluster,
        dir,
        images: names,
        _containerd: containerd_guard,
        ctr: (ctr, sock),
        kubelet: std::sync::Mutex::new(Kubelet {
            guard: Some(kubelet_guard),
            bin: kubelet,
            cgroup,
            port,
            sync: KubeletSync::Fast,
        }),
        _janitor: janitor,
    })
}

/// Writes the kubelet's config for `sync` and starts it; the caller waits for it to be of use.
fn start_kubelet(
    cluster: &Cluster,
    dir: &Path,
    kubelet: &Path,
    cgroup: &str,
    port: u16,
    sync: KubeletSync,
) -> Result<Guard, String> {
    let d = dir.display();
    let sock = dir.join("containerd.sock");
    let kubelet_config = format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup}
staticPodPath: {d}/manifests
fileCheckFrequency: 1s
{sync}address: 127.0.0.1
port: {port}
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
failSwapOn: false
podLogsDir: {d}/pod-logs
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
makeIPTablesUtilChains: false
localStorageCapacityIsolation: false
nodeStatusUpdateFrequency: 2s
shutdownGracePeriod: 0s
resolvConf: ''
",
        sync = sync.config(),
    );
    std::fs::write(dir.join("kubelet.yaml"), kubelet_config).map_err(|e| e.to_string())?;
    let args: Vec<String> = vec![
        format!("--config={d}/kubelet.yaml"),
        format!("--kubeconfig={d}/kubelet.kubeconfig"),
        format!("--container-runtime-endpoint=unix://{}", sock.display()),
        format!("--root-dir={d}/kubelet-root"),
        format!("--cert-dir={d}/kubelet-pki"),
        format!("--hostname-override={NODE}"),
        // The node's addresses are set once below and left alone: the kubelet refuses a loopback
        // `--node-ip`, and the API server dials the node (`kubectl logs`, `exec`, `port-forward`) at
        // the address it registered, here a name no DNS resolves.
        "--cloud-provider=external".into(),
        "--v=1".into(),
    ];
    server::server(dir, &cluster.setpriv, kubelet, &args, "kubelet.log")
}

/// `ctr images import` of one archive into the CRI's namespace.
fn import(ctr: &Path, sock: &Path, archive: &Path) -> Result<(), String> {
    let out = Command::new(ctr)
        .arg("--address")
        .arg(sock)
        .args(["-n", "k8s.io", "images", "import"])
        .arg(archive)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ctr: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ctr images import {}: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// An image of a program installed on this machine, with the shared libraries it loads.
fn host_image(out: &Path, name: &str, program: &str) -> Result<(), String> {
    let ldd = Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|e| format!("ldd: {e}"))?;
    let mut files = vec![format!("{program}={program}")];
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` or `/lib64/ld-linux-x86-64.so.2 (0x...)`
        let path = line
            .split_whitespace()
            .find(|w| w.starts_with('/'))
            .map(str::to_owned);
        if let Some(path) = path {
            files.push(format!("{path}={path}"));
        }
    }
    oci_image(out, name, program, &files)
}

/// `scripts/oci-image.py`: an image of `files` (`SRC=/DEST`) whose entrypoint is `entrypoint`.
fn oci_image(out: &Path, name: &str, entrypoint: &str, files: &[String]) -> Result<(), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/oci-image.py");
    let result = Command::new("python3")
        .arg(script)
        .arg("--out")
        .arg(out)
        .args(["--name", name, "--entrypoint", entrypoint])
        .args(["--env", "PATH=/usr/local/bin:/usr/bin:/bin"])
        .args(files)
        .output()
        .map_err(|e| format!("oci-image.py: {e}"))?;
    if !result.status.success() {
        return Err(format!(
            "oci-image.py: {}",
            String::from_utf8_lossy(&result.stderr)
        ));
    }
    Ok(())
}

/// The name an image archive was tagged with (its index's `io.containerd.image.name`).
fn image_name(images: &Path, stem: &str) -> Result<String, String> {
    let path = images.join(format!("{stem}.tar"));
    let mut archive = tar_index(&path)?;
    archive["manifests"][0]["annotations"]["io.containerd.image.name"]
        .take()
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: no image name in index.json", path.display()))
}

/// `index.json` of an image archive, read with `tar`.
fn tar_index(path: &Path) -> Result<Value, String> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(path)
        .arg("index.json")
        .output()
        .map_err(|e| format!("tar: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{}: {e}", path.display()))
}

/// Kills whatever still runs in an earlier node's cgroups and removes them, deepest first. A cgroup
/// still busy after that is left, and named on stderr: the next run tries again.
fn sweep_stale_cgroups() {
    let pids = Path::new("/sys/fs/cgroup/pids");
    let Ok(entries) = std::fs::read_dir(pids) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("confgate-node-") {
            continue;
        }
        // Every mounted hierarchy (the kubelet makes its cgroups in more than it is told about), each
        // once (some are links to a shared mount).
        let mut hierarchies: Vec<_> = std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|h| std::fs::canonicalize(h.path()).ok())
            .collect();
        hierarchies.sort();
        hierarchies.dedup();
        let mut dirs = Vec::new();
        for h in &hierarchies {
            collect_dirs(&h.join(&name), &mut dirs);
        }
        for d in &dirs {
            for pid in std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        // Deepest first: a cgroup with children cannot be removed.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        let busy = dirs
            .iter()
            .filter(|d| std::fs::remove_dir(d).is_err())
            .count();
        if busy > 0 {
            eprintln!("node: {busy} cgroups of an earlier run ({name}) could not be removed yet");
        }
    }
}

fn collect_dirs(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    into.push(dir.to_path_buf());
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_dirs(&e.path(), into);
        }
    }
}

/// Kills every process in the pod cgroup `pod{uid}` under the node's cgroup and waits until none is
/// left (a pod's containers are its cgroup's processes; their shims are not, and stay to reap them).
fn kill_pod_processes(cgroup: &str, uid: &str) -> Result<(), String> {
    let mut dirs = Vec::new();
    collect_dirs(&Path::new("/sys/fs/cgroup/pids").join(cgroup), &mut dirs);
    let pod = format!("pod{uid}");
    let dirs: Vec<_> = dirs
        .into_iter()
        .filter(|d| d.components().any(|c| c.as_os_str() == pod.as_str()))
        .collect();
    if dirs.is_empty() {
        return Err(format!("no cgroup {pod} under {cgroup}"));
    }
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let pids: Vec<i32> = dirs
            .iter()
            .flat_map(|d| {
                std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        if pids.is_empty() {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!(
                "{pod}: processes {pids:?} outlived SIGKILL for 30 s"
            ));
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // Polling, not synchronising: the next look at the cgroup, with a deadline.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills what runs in the node's cgroups, and their shims, once the test process is gone (its end of
/// the pipe closes with it).
fn janitor(dir: &Path, cgroup: &str) -> Result<std::process::ChildStdin, String> {
    // The shims' pattern is built from two pieces: spelled out whole, it would be in this script's own
    // command line, and `pkill -f` would kill the janitor before it did anything else.
    let script = r#"cat >/dev/null
shim=containerd-shim-runc
pkill -KILL -f "$shim-v2 .*$1" 2>/dev/null
for i in 1 2 3; do
  for f in $(find /sys/fs/cgroup/pids/"$2" -name cgroup.procs 2>/dev/null); do
    for p in $(cat "$f"); do kill -KILL "$p" 2>/dev/null; done
  done
  sleep 1
done
for h in /sys/fs/cgroup/*/"$2"; do find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null; done
umount -R "$1" 2>/dev/null
for m in $(grep -o " $1[^ ]*" /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null; done
"#;
    let mut child = Command::new("sh")
        .args(["-c", script, "node-janitor"])
        .arg(dir)
        .arg(cgroup)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("janitor: {e}"))?;
    Ok(child.stdin.take().expect("piped stdin"))
}

impl Node {
    /// Restarts the kubelet with `sync` and waits until it reports the node again. Pods it runs keep
    /// running (their containers belong to containerd's shims); pods made after this are synced at the
    /// new frequency. For the benchmark that compares the two (`benches/edit_to_running.rs`).
    #[allow(dead_code)]
    pub fn restart_kubelet(&self, sync: KubeletSync) -> Result<(), String> {
        let mut k = self.kubelet.lock().unwrap_or_else(|e| e.into_inner());
        if k.sync == sync {
            return Ok(());
        }
        self.restart_locked(&mut k, sync, None)
    }

    /// What a node's power loss does to one pod: the kubelet stops, every process of the pod whose
    /// UID is `uid` (a static pod's is its config hash) is killed, and the kubelet starts again, so
    /// the pod's containers are created anew from nothing but what is on the node's disk. Other
    /// pods keep running, but the new kubelet probes them afresh, so the caller takes the node
    /// with [`node_alone`].
    #[allow(dead_code)]
    pub fn power_cycle(&self, uid: &str) -> Result<(), String> {
        let mut k = self.kubelet.lock().unwrap_or_else(|e| e.into_inner());
        let sync = k.sync;
        self.restart_locked(&mut k, sync, Some(uid))
    }

    fn restart_locked(
        &self,
        k: &mut Kubelet,
        sync: KubeletSync,
        kill_pod: Option<&str>,
    ) -> Result<(), String> {
        // The old one is gone (killed and waited for) before the new one binds its port.
        drop(k.guard.take());
        if let Some(uid) = kill_pod {
            kill_pod_processes(&k.cgroup, uid)?;
        }
        let restarted = jiff::Timestamp::now();
        k.guard = Some(start_kubelet(
            self.cluster,
            &self.dir,
            &k.bin,
            &k.cgroup,
            k.port,
            sync,
        )?);
        k.sync = sync;
        // The node's Lease renewed by the new kubelet: a time past its start. (The node's status is
        // written only when it changes or every few minutes, so its heartbeat says nothing here.)
        let end = Instant::now() + REGISTER_DEADLINE;
        loop {
            let out = self
                .cluster
                .kubectl()
                .args(["get", "lease", "-n", "kube-node-lease", NODE])
                .args(["-o", "jsonpath={.spec.renewTime}"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| e.to_string())?;
            let renewed = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<jiff::Timestamp>()
                .ok();
            if renewed.is_some_and(|r| r > restarted) {
                return Ok(());
            }
            if Instant::now() > end {
                return Err(format!(
                    "the restarted kubelet did not renew the node's Lease; its log ends:\n{}",
                    server::log_tail(&self.dir.join("kubelet.log"))
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Imports an image of the static binary `bin` as `name`, run as `entrypoint`.
    #[allow(dead_code)]
    pub fn static_image(&self, name: &str, bin: &Path, entrypoint: &str) -> Result<(), String> {
        let archive = self
            .dir
            .join(format!("{}.tar", name.rsplit('/').next().unwrap_or(name)));
        let file = format!("{}={entrypoint}", bin.display());
        oci_image(&archive, name, entrypoint, &[file])?;
        import(&self.ctr.0, &self.ctr.1, &archive)
    }

    /// The image named for archive `stem`.
    pub fn image(&self, stem: &str) -> &str {
        self.images
            .get(stem)
            .unwrap_or_else(|| panic!("no {stem}.tar among the images"))
    }

    /// A namespace with what a controller-manager would have made: the `default` ServiceAccount and
    /// the `kube-root-ca.crt` ConfigMap (and `openshift-service-ca.crt`) that a token volume reads.
    pub fn namespace(&self, ns: &str, labels: &[(&str, &str)]) {
        let c = self.cluster;
        let ca = std::fs::read_to_string(&c.ca).unwrap();
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let items = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": ns},
             "data": {"ca.crt": ca}},
            // openshift/kubernetes' ServiceAccount admission also projects this one into an
            // automounted token volume (its service CA); the kubelet waits for it.
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "openshift-service-ca.crt", "namespace": ns},
             "data": {"service-ca.crt": ca}},
        ]});
        c.kubectl_ok(
            &[
                "apply",
                "--server-side",
                "--field-manager=confgate-tests",
                "-f",
                "-",
            ],
            &items.to_string(),
        );
    }

    /// `kubectl ARGS` as the admin; its stdout, or a panic with its stderr.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.cluster.kubectl_ok(args, "")
    }

    /// `kubectl apply -f -` of `object`.
    pub fn apply(&self, object: &Value) {
        self.cluster
            .kubectl_ok(&["apply", "-f", "-"], &object.to_string());
    }

    /// The pod as JSON.
    pub fn pod(&self, ns: &str, name: &str) -> Value {
        serde_json::from_str(&self.kubectl(&["get", "pod", "-n", ns, name, "-o", "json"])).unwrap()
    }

    /// Waits up to `deadline` for the pod to satisfy `pred`; the pod's last JSON in the panic.
    pub fn wait_pod(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        deadline: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let end = Instant::now() + deadline;
        loop {
            let pod = self.pod(ns, name);
            if pred(&pod) {
                return pod;
            }
            if Instant::now() > end {
                panic!(
                    "timed out after {deadline:?} waiting for {what}; the pod's status: {}\nkubelet log ends:\n{}",
                    serde_json::to_string_pretty(&pod["status"]).unwrap(),
                    server::log_tail(&self.dir.join("kubelet.log"))
                );
            }
            // Polling, not synchronising: the next look at a condition with a deadline.
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A loopback port for a hostNetwork container: pods share the node's network, so each pod's
    /// listeners get ports of their own (a collision shows as a container that cannot bind). Ports are
    /// handed out in turn from a random start, never twice in one run (random draws from the range
    /// collided often enough to fail a run of the whole suite), each free when handed out.
    pub fn port(&self) -> u16 {
        use std::sync::atomic::{AtomicU16, Ordering};
        const LOW: u16 = 30_000;
        const SPAN: u16 = 2_000;
        static START: OnceLock<u16> = OnceLock::new();
        static NEXT: AtomicU16 = AtomicU16::new(0);
        let start = *START.get_or_init(|| fastrand::u16(..SPAN));
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            assert!(
                n < SPAN,
                "every node port in {LOW}..{} was handed out",
                LOW + SPAN
            );
            let port = LOW + (start + n) % SPAN;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
}

/// A container's status in a pod, by name, among init and app containers.
pub fn container<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| pod["status"][k].as_array())
        .flatten()
        .find(|c| c["name"] == name)
}

/// The pod's condition `type_`'s status ("True"/"False"), if set.
pub fn condition<'a>(pod: &'a Value, type_: &str) -> Option<&'a Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

pub fn condition_is(pod: &Value, type_: &str, status: &str) -> bool {
    condition(pod, type_).is_some_and(|c| c["status"] == status)
}

pub fn running(pod: &Value, name: &str) -> bool {
    container(pod, name).is_some_and(|c| c["state"]["running"].is_object())
}

/// The janitor outlives the test process and does all of its job: it kills what is left in its
/// cgroup and the node's shims, and removes the cgroup. (It once matched its own command line and
/// killed itself first, leaving every pod's processes running after the suite.)
#[test]
#[ignore = "needs root and cgroup v1's pids hierarchy (docs/development.md)"]
fn the_janitor_kills_what_is_left_and_removes_the_cgroup() {
    use std::os::unix::process::CommandExt as _;
    let cgroup = format!("confgate-janitor-test-{}", fastrand::u32(..));
    let root = Path::new("/sys/fs/cgroup/pids").join(&cgroup);
    let leaf = root.join("kubepods/pod");
    std::fs::create_dir_all(&leaf).expect("a pids cgroup (root, cgroup v1)");
    let dir = tempfile::tempdir().expect("tempdir");
    let node_dir = dir.path().join("node");
    // What a pod leaves: a process in the node's cgroup; and a shim named after the node's dir.
    // Neither holds the test's output open: a process left holding it keeps whatever reads the
    // suite's output (`cargo test | tee`) waiting until it ends.
    let mut left = Command::new("sleep")
        .arg("600")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sleep");
    std::fs::write(leaf.join("cgroup.procs"), left.id().to_string()).expect("join the cgroup");
    // A group of its own, so that its `sleep`, which the janitor does not look for, ends with it.
    let mut shim = Command::new("sh")
        .args(["-c", "sleep 600; :", "containerd-shim-runc-v2", "-address"])
        .arg(&node_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("a stand-in shim");
    let group = nix::unistd::Pid::from_raw(-(shim.id() as i32));
    let stdin = janitor(&node_dir, &cgroup).expect("janitor");
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut gone = (false, false);
    while Instant::now() < deadline && !(gone.0 && gone.1 && !root.exists()) {
        gone.0 = gone.0 || left.try_wait().expect("wait").is_some();
        gone.1 = gone.1 || shim.try_wait().expect("wait").is_some();
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = left.kill();
    let _ = shim.kill();
    let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
    let _ = left.wait();
    let _ = shim.wait();
    assert!(gone.0, "the process left in the cgroup was not killed");
    assert!(gone.1, "the node's shim was not killed");
    assert!(!root.exists(), "{} was not removed", root.display());
}
