//! A local demo of confgate's main job that drives the real `confgate` binary, no cluster needed: a
//! kubelet-style ConfigMap volume and a downward-API annotations file in a temp dir, a tiny component that
//! reloads on POST, and a walk through a blocked start, an accepted config reaching the component, a
//! too-new config held back, a compatible update reloaded, an update the component refuses and its
//! rollback (with the `/metrics` lines and the log line that show it), and a skew-safe upgrade with schema
//! 2 and 3 side by side in one ConfigMap (variants). A failing probe is printed as `kubectl describe pod`
//! shows it.
//!
//! Run: `cargo run --example demo` (it builds the binary first when the sources are newer).

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use confgate::promote::Promoter;
use confgate::snapshot::{self, Snapshot};

const ACCEPTS: &str = ">=2.4.0, <3.0.0";
const VERSION_FROM: &str = "yaml:config.yaml#/schemaVersion";
const VARIANTS: &str = "config.v*.yaml -> config.yaml";
const ACCEPTS_V3: &str = ">=3.0.0, <4.0.0";

fn config(version: &str) -> Snapshot {
    with_greeting(version, "hello")
}

/// A config the demo component refuses when `greeting` is `refuse`.
fn with_greeting(version: &str, greeting: &str) -> Snapshot {
    let yaml = format!("schemaVersion: \"{version}\"\ngreeting: {greeting}\n");
    Snapshot::new(BTreeMap::from([(
        "config.yaml".to_owned(),
        yaml.into_bytes(),
    )]))
}

/// A ConfigMap with one variant per version, `config.vVERSION.yaml`.
fn variants(versions: &[&str]) -> Snapshot {
    Snapshot::new(
        versions
            .iter()
            .map(|v| {
                let major = v.split('.').next().unwrap_or(v);
                (
                    format!("config.v{major}.yaml"),
                    format!("schemaVersion: \"{v}\"\ngreeting: hello\n").into_bytes(),
                )
            })
            .collect(),
    )
}

/// Writes the downward-API annotations file as the kubelet would for these annotations.
fn annotations(
    podinfo: &Path,
    accepts: &str,
    reload_port: u16,
    variants: bool,
) -> std::io::Result<()> {
    let mut text = format!(
        "confgate.io/accepts=\"{accepts}\"\nconfgate.io/version-from=\"{VERSION_FROM}\"\n\
         confgate.io/reload=\"http://127.0.0.1:{reload_port}/reload\"\n"
    );
    if variants {
        text.push_str(&format!("confgate.io/variants=\"{VARIANTS}\"\n"));
    }
    let tmp = podinfo.join(".annotations.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, podinfo.join("annotations"))
}

/// The `confgate` binary of this checkout, built with the profile this example runs under; when
/// compiled into `tests/commands/demo.rs`, the one cargo built for the tests.
fn binary() -> Result<PathBuf, Box<dyn std::error::Error>> {
    if let Some(bin) = option_env!("CARGO_BIN_EXE_confgate") {
        return Ok(PathBuf::from(bin));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let exe = std::env::current_exe()?;
    // target/<profile>/examples/demo -> target/<profile>/confgate
    let profile_dir = exe.parent().and_then(Path::parent).ok_or("no target dir")?;
    let bin = profile_dir.join("confgate");
    if fresh(&bin) {
        return Ok(bin);
    }
    let mut build = Command::new(cargo);
    // With the example too, so dependencies keep the features this build gave them and nothing recompiles.
    build.args([
        "build",
        "-q",
        "--bin",
        "confgate",
        "--example",
        "demo",
        "--manifest-path",
    ]);
    build.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if set_by_cargo_run(&name) {
            build.env_remove(&*name);
        }
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    if !build.status()?.success() {
        return Err("cargo build --bin confgate failed".into());
    }
    Ok(bin)
}

/// Whether `cargo run` gave this process the variable for the package (CARGO_MANIFEST_DIR, CARGO_PKG_*,
/// OUT_DIR of the package's build script, ...). Build scripts such as ring's rerun when one of them
/// changes, so passing them on to the nested build would make it, and the next plain `cargo
/// build`/`cargo test` after it, recompile the TLS stack and all that depends on it. `CARGO` itself is
/// kept: it names the cargo to run.
pub fn set_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_MANIFEST_")
        || matches!(
            name,
            "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "OUT_DIR"
        )
}

/// Whether `bin` is newer than every source it is built from: then a re-run starts at once, without
/// asking cargo (whose nested build can take a minute to find nothing to do).
fn fresh(bin: &Path) -> bool {
    fn newest(path: &Path) -> Option<std::time::SystemTime> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_dir() {
            return meta.modified().ok();
        }
        std::fs::read_dir(path)
            .ok()?
            .flatten()
            .filter_map(|e| newest(&e.path()))
            .max()
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(built) = std::fs::metadata(bin).and_then(|m| m.modified()).ok() else {
        return false;
    };
    ["src", "Cargo.toml", "Cargo.lock"]
        .iter()
        .all(|p| newest(&root.join(p)).is_some_and(|t| t < built))
}

/// An output line without the demo's temp dir, and each 64-hex hash cut to its first 12 digits.
fn tidy(line: &str, tmp: &Path) -> String {
    let mut out = line.replace(&format!("{}/", tmp.display()), "");
    while let Some(i) = out.find("sha256:").filter(|i| {
        out[i + 7..].len() >= 64 && out[i + 7..i + 71].chars().all(|c| c.is_ascii_hexdigit())
    }) {
        out.replace_range(i + 19..i + 71, "…");
    }
    out
}

/// `confgate probe KIND`: (passed, output), as the kubelet runs it.
fn probe(bin: &Path, kind: &str, addr: &str) -> (bool, String) {
    let out = Command::new(bin)
        .args(["probe", kind, "--addr", addr])
        .output()
        .expect("run confgate probe");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    )
}

/// Prints a probe as `kubectl describe pod` would: nothing when it passes, the kubelet's event otherwise.
fn describe(bin: &Path, kind: &str, addr: &str) {
    let (ok, out) = probe(bin, kind, addr);
    let name = if kind == "startup" {
        "Startup"
    } else {
        "Readiness"
    };
    if ok {
        // The kubelet shows nothing for a passing probe; what an operator would ask for instead.
        println!("   $ kubectl exec POD -c confgate -- /confgate probe {kind}\n     {out}");
    } else {
        println!(
            "   kubectl describe pod: Warning  Unhealthy  kubelet  {name} probe failed: {out}"
        );
    }
}

/// Polls `f` until it holds, for at most 10 s.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The running sidecar, killed if the demo fails half-way.
struct Sidecar(Child);

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /status`, over a plain socket.
fn get_status(addr: &str) -> Option<serde_json::Value> {
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.write_all(b"GET /status HTTP/1.1\r\nhost: confgate\r\nconnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut conn, &mut text).ok()?;
    serde_json::from_str(text.split_once("\r\n\r\n")?.1).ok()
}

/// A component that rereads the promoted dir on `POST /reload` and reports the version it now runs.
fn component(active: PathBuf) -> std::io::Result<(u16, mpsc::Receiver<String>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut head = String::new();
            let mut reader = BufReader::new(&conn);
            while reader.read_line(&mut head).is_ok_and(|n| n > 2) {
                if head.ends_with("\r\n\r\n") {
                    break;
                }
            }
            let text = match snapshot::read(&active) {
                snapshot::Observed::Config(c) => {
                    String::from_utf8_lossy(&c.files()["config.yaml"]).into_owned()
                }
                _ => String::new(),
            };
            let runs = text.lines().next().unwrap_or("nothing").to_owned();
            // Like a real component, it refuses a config it cannot apply, with its own one-line reason.
            let refused = text.contains("greeting: refuse");
            let answer: &[u8] = if refused {
                b"HTTP/1.1 422 Unprocessable Entity\r\ncontent-length: 30\r\nconnection: close\r\n\r\nunknown greeting; keeping mine"
            } else {
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            };
            let _ = conn.write_all(answer);
            let _ = tx.send(if refused {
                format!("refused {runs}")
            } else {
                runs
            });
        }
    });
    Ok((port, rx))
}

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bin = binary()?;
    let tmp = tempfile::tempdir()?;
    let (incoming, active, podinfo) = (
        tmp.path().join("incoming"),
        tmp.path().join("active"),
        tmp.path().join("podinfo"),
    );
    std::fs::create_dir_all(&podinfo)?;
    let (component_port, reloads) = component(active.clone())?;
    // The downward-API file, as the kubelet writes the pod's annotations.
    annotations(&podinfo, ACCEPTS, component_port, false)?;
    // confgate's promoter follows the kubelet's AtomicWriter steps, so it doubles as the kubelet here.
    let (kubelet, _) = Promoter::open(&incoming)?;
    println!("confgate demo: the component accepts {ACCEPTS}; version from {VERSION_FROM}\n");

    println!("1. The ConfigMap already holds 3.0.0 when the pod starts");
    kubelet.promote(&config("3.0.0"))?;
    let log = tmp.path().join("confgate.log");
    let mut sidecar = Sidecar(
        Command::new(&bin)
            .args(["run", "--listen", "127.0.0.1:0", "--watch"])
            .arg(&incoming)
            .arg("--promote-to")
            .arg(&active)
            .arg("--annotations")
            .arg(podinfo.join("annotations"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?,
    );
    let mut addr = String::new();
    until("confgate to listen", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        match text.split_once("addr=") {
            Some((_, rest)) => {
                addr = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                true
            }
            None => false,
        }
    });
    until("a verdict", || {
        probe(&bin, "startup", &addr).1.contains("3.0.0")
    });
    describe(&bin, "startup", &addr);
    println!("   the component container does not start: the native sidecar has not started\n");

    println!("2. The ConfigMap is corrected to 2.4.1");
    kubelet.promote(&config("2.4.1"))?;
    until("the first promotion", || probe(&bin, "startup", &addr).0);
    describe(&bin, "startup", &addr);
    // The component had not started: it reads the promoted dir itself, so no reload is owed. The
    // start-up check's first contact (a reload POST) says it runs 2.4.1, the base of any rollback.
    println!("   the component starts and reads 2.4.1 from the promoted dir");
    let runs = reloads.recv_timeout(Duration::from_secs(10))?;
    println!(
        "   first contact: it answers a reload of `{runs}`, so 2.4.1 is applied (the rollback base)"
    );
    describe(&bin, "ready", &addr);
    println!();

    let steps = [
        (
            "3. An upgrade pushes 3.0.0 before the component is upgraded",
            "3.0.0",
            false,
        ),
        ("4. A compatible 2.5.0 arrives", "2.5.0", true),
    ];
    for (what, version, accepted) in steps {
        println!("{what}");
        kubelet.promote(&config(version))?;
        if accepted {
            let runs = reloads.recv_timeout(Duration::from_secs(10))?;
            println!("   reload reached the component: it now runs `{runs}`");
        } else {
            let mut status = serde_json::Value::Null;
            until("the hold", || {
                status = get_status(&addr).unwrap_or_default();
                status["candidate"]["version"] == version
            });
            println!(
                "   held: /status says stale {}, active {}, candidate {} {}",
                if status["stale"] == true { "yes" } else { "no" },
                status["active"]["version"].as_str().unwrap_or("-"),
                status["candidate"]["verdict"].as_str().unwrap_or("-"),
                status["candidate"]["version"].as_str().unwrap_or("-"),
            );
        }
        describe(&bin, "ready", &addr);
        println!();
    }
    refusal(&kubelet, &addr, &reloads, &log)?;
    upgrade(
        &bin,
        &addr,
        &kubelet,
        &incoming,
        &podinfo,
        component_port,
        &reloads,
    )?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sidecar.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    println!("confgate stopped on SIGTERM ({})", sidecar.0.wait()?);
    Ok(())
}

/// `GET PATH`, the body, over a plain socket.
fn get(addr: &str, path: &str) -> Option<String> {
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: confgate\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut conn, &mut text).ok()?;
    Some(text.split_once("\r\n\r\n")?.1.to_owned())
}

/// Step 5: a config confgate accepts but the component refuses, rolled back to the one it runs.
fn refusal(
    kubelet: &Promoter,
    addr: &str,
    reloads: &mpsc::Receiver<String>,
    log: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    println!("5. A compatible 2.6.0 arrives that the component cannot apply");
    kubelet.promote(&with_greeting("2.6.0", "refuse"))?;
    let refused = reloads.recv_timeout(Duration::from_secs(10))?;
    println!("   the component answers the reload of it 422 (it {refused})");
    let runs = reloads.recv_timeout(Duration::from_secs(10))?;
    let mut status = serde_json::Value::Null;
    until("the rollback reported", || {
        status = get_status(addr).unwrap_or_default();
        status["applied"]["version"] == "2.5.0" && status["candidate"]["version"] == "2.6.0"
    });
    println!(
        "   rolled back: the promoted dir holds 2.5.0 again, reloaded, and the component runs `{runs}`"
    );
    println!(
        "   /status: active {}, applied {}, candidate {} {}: {}",
        status["active"]["version"].as_str().unwrap_or("-"),
        status["applied"]["version"].as_str().unwrap_or("-"),
        status["candidate"]["verdict"].as_str().unwrap_or("-"),
        status["candidate"]["version"].as_str().unwrap_or("-"),
        status["candidate"]["reason"].as_str().unwrap_or("-"),
    );
    let metrics = get(addr, "/metrics").unwrap_or_default();
    println!("   /metrics:");
    for line in metrics.lines().filter(|l| {
        l.starts_with("confgate_applied_config_info")
            || l.starts_with("confgate_candidates_total{verdict=\"rejected-by-component\"}")
            || l.starts_with("confgate_reloads_total")
            || l.starts_with("confgate_last_reload_successful")
    }) {
        println!("     {}", tidy(line, Path::new("/nonexistent")));
    }
    println!("     (the last reload, the rollback's, was applied: the gauge is 1 again)");
    let text = std::fs::read_to_string(log).unwrap_or_default();
    if let Some(line) = text.lines().find(|l| l.contains("rolled back")) {
        // Without the timestamp.
        let line = line
            .split_once(' ')
            .map_or(line, |(_, rest)| rest.trim_start());
        println!("   log: {line}");
    }
    println!();
    Ok(())
}

/// Step 6, the upgrade procedure: v3 added beside v2, the component upgraded (its range with it), every
/// pod on v3, v2 removed; `confgate check` per range says when each step is safe.
fn upgrade(
    bin: &Path,
    addr: &str,
    kubelet: &Promoter,
    incoming: &Path,
    podinfo: &Path,
    component_port: u16,
    reloads: &mpsc::Receiver<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let active = |status: &serde_json::Value| {
        format!(
            "{} from {}",
            status["active"]["version"].as_str().unwrap_or("-"),
            status["active"]["variant"].as_str().unwrap_or("-")
        )
    };
    let check = |ranges: &[&str]| -> Result<(), Box<dyn std::error::Error>> {
        let mut cmd = Command::new(bin);
        cmd.args([
            "check",
            "--version-from",
            VERSION_FROM,
            "--variants",
            VARIANTS,
        ]);
        for r in ranges {
            cmd.args(["--accepts", r]);
        }
        let out = cmd.arg(incoming).output()?;
        let tmp = incoming.parent().unwrap_or(incoming);
        let args: Vec<String> = ranges.iter().map(|r| format!("--accepts '{r}'")).collect();
        println!(
            "   $ confgate check {} ... (exit {})",
            args.join(" "),
            out.status.code().unwrap_or(-1)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            println!("     {}", tidy(line, tmp));
        }
        Ok(())
    };
    println!(
        "6. A skew-safe upgrade to schema 3: the ConfigMap carries v2 and v3 side by side ({VARIANTS})"
    );
    annotations(podinfo, ACCEPTS, component_port, true)?;
    kubelet.promote(&variants(&["2.5.0", "3.0.0"]))?;
    let mut status = serde_json::Value::Null;
    until("variant v2 chosen", || {
        status = get_status(addr).unwrap_or_default();
        status["active"]["variant"] == "config.v2.yaml"
    });
    println!(
        "   this (old) pod runs {}, stale: {}",
        active(&status),
        if status["stale"] == true { "yes" } else { "no" }
    );
    check(&[ACCEPTS, ACCEPTS_V3])?;

    println!("   the component is upgraded: its image and confgate.io/accepts {ACCEPTS_V3}");
    annotations(podinfo, ACCEPTS_V3, component_port, true)?;
    let runs = reloads.recv_timeout(Duration::from_secs(10))?;
    until("variant v3 chosen", || {
        status = get_status(addr).unwrap_or_default();
        status["active"]["variant"] == "config.v3.yaml"
    });
    println!(
        "   one promotion and a reload: the component now runs `{runs}`, {}",
        active(&status)
    );

    println!("   every pod reports 3.x in `confgate status`: v2 is removed");
    kubelet.promote(&variants(&["3.0.0"]))?;
    until("the shrunk ConfigMap judged", || {
        status = get_status(addr).unwrap_or_default();
        status["active"]["variant"] == "config.v3.yaml" && status["candidate"].is_null()
    });
    println!(
        "   untouched: {}, stale: {}",
        active(&status),
        if status["stale"] == true { "yes" } else { "no" }
    );
    check(&[ACCEPTS, ACCEPTS_V3])?;
    println!("   (exit 1: no variant serves {ACCEPTS} any more, so no old pod may remain)\n");
    Ok(())
}
