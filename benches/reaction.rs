//! Benchmark of the release binary: reaction latency to kubelet-style updates, memory, idle CPU and
//! wake-ups, start-up time and binary size. Run with `cargo bench --bench reaction` (add `-- --quick` for
//! the short version CI runs; `-- --help` lists the flags). Prints a table and writes JSON.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/floor.rs"]
mod floor;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Gate, Sink, Volume};
use serde_json::json;

/// The binary measured: `CONFGATE_BIN`, else the one cargo built with this benchmark.
fn bin() -> String {
    std::env::var("CONFGATE_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| common::BIN.to_owned())
}

/// `BIN run ARGS`, logging to `log` at its default level; returns once it has bound its port.
fn spawn_gate(bin: &str, args: &[&str], log: &Path) -> Gate {
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("run").args(args).env_remove("CONFGATE_LOG");
    Gate::from_command(cmd, log)
}

/// How tokio names its blocking pool's threads: `tokio-rt-worker`, or an older tokio's
/// `tokio-runtime-worker` as `comm` cuts it.
const POOL_THREAD: &str = "tokio-r";

/// `snapshot::MAX_BYTES`: the ConfigMap size limit, counted over all values.
const MAX_BYTES: usize = 1024 * 1024;

struct Opts {
    quick: bool,
    iterations: usize,
    big_iterations: usize,
    updates: usize,
    idle: Duration,
    starts: usize,
    /// `confgate probe ready` runs against the running sidecar.
    probes: usize,
    /// Side-by-side rounds, and updates per round for each contestant.
    rounds: usize,
    per_round: usize,
    /// The pause before each side-by-side update (0: back to back).
    gap: Duration,
    /// Only the side-by-side rounds (for comparing builds quickly): no other figure, no JSON.
    side_only: bool,
    /// Where the promoted dirs go (confgate's, the copy floor's, a baseline's), when not beside the
    /// incoming volumes in the temporary dir: `/dev/shm` is the shipped deployment, a ConfigMap
    /// volume on the node's disk and the promoted dir an `emptyDir` on tmpfs.
    promoted_in: Option<PathBuf>,
    json: PathBuf,
}

fn usage() -> ! {
    eprintln!(
        "usage: cargo bench --bench reaction -- [--quick] [--iterations N] [--big-iterations N] \
         [--updates N] [--idle-secs N] [--starts N] [--probes N] [--rounds N] [--per-round N] [--gap-ms N] [--side-only] [--promoted-in DIR] [--json PATH]"
    );
    std::process::exit(64)
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, dir, port] = args.as_slice()
        && flag == floor::FLAG
    {
        floor::main(
            Path::new(dir),
            port.parse().unwrap_or_else(|_| usage()),
            None,
        );
    }
    if let [flag, out, dir, port] = args.as_slice()
        && flag == floor::COPY_FLAG
    {
        let port = port.parse().unwrap_or_else(|_| usage());
        floor::main(Path::new(dir), port, Some(Path::new(out)));
    }
    if let [flag, bin, port, n] = args.as_slice()
        && flag == PROBE_RUNNER
    {
        let num = |v: &str| v.parse().unwrap_or_else(|_| usage());
        probe_runner(bin, num(port) as u16, num(n));
    }
    let quick = args.iter().any(|a| a == "--quick");
    let target_dir = Path::new(common::BIN)
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    let mut o = Opts {
        quick,
        iterations: if quick { 100 } else { 1000 },
        big_iterations: if quick { 20 } else { 200 },
        updates: if quick { 1000 } else { 10_000 },
        idle: Duration::from_secs(if quick { 5 } else { 60 }),
        starts: if quick { 5 } else { 20 },
        probes: if quick { 10 } else { 100 },
        rounds: if quick { 4 } else { 10 },
        per_round: if quick { 10 } else { 30 },
        side_only: false,
        gap: Duration::ZERO,
        promoted_in: None,
        json: target_dir.join("confgate-bench.json"),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = || -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage())
        };
        match a.as_str() {
            "--quick" | "--bench" => {}
            "--iterations" => o.iterations = num(),
            "--big-iterations" => o.big_iterations = num(),
            "--updates" => o.updates = num(),
            "--idle-secs" => o.idle = Duration::from_secs(num() as u64),
            "--starts" => o.starts = num(),
            "--probes" => o.probes = num(),
            "--rounds" => o.rounds = num(),
            "--per-round" => o.per_round = num(),
            "--side-only" => o.side_only = true,
            "--gap-ms" => o.gap = Duration::from_millis(num() as u64),
            "--promoted-in" => {
                o.promoted_in = Some(it.next().map(PathBuf::from).unwrap_or_else(|| usage()))
            }
            "--json" => o.json = it.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            _ => usage(),
        }
    }
    o
}

/// Median, min and max of a sample, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Stats {
    median: f64,
    p90: f64,
    p99: f64,
    min: f64,
    max: f64,
    n: usize,
}

fn stats(mut xs: Vec<Duration>) -> Stats {
    xs.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let n = xs.len();
    let median = if n % 2 == 1 {
        ms(xs[n / 2])
    } else {
        (ms(xs[n / 2 - 1]) + ms(xs[n / 2])) / 2.0
    };
    Stats {
        median,
        p90: ms(xs[(n * 9 / 10).min(n - 1)]),
        p99: ms(xs[(n * 99 / 100).min(n - 1)]),
        min: ms(xs[0]),
        max: ms(xs[n - 1]),
        n,
    }
}

fn stats_json(s: Stats) -> serde_json::Value {
    json!({"median_ms": s.median, "p90_ms": s.p90, "p99_ms": s.p99, "min_ms": s.min, "max_ms": s.max, "n": s.n})
}

/// Builds the payload of one update from its version.
type Maker<'a> = dyn Fn(&str) -> Files + 'a;
type Files = Vec<(String, Vec<u8>)>;

fn small(version: &str) -> Vec<(String, Vec<u8>)> {
    vec![
        ("version".into(), version.as_bytes().to_vec()),
        (
            "app.yaml".into(),
            format!("schemaVersion: {version}\nlisten: :8443\nlogLevel: info\n").into_bytes(),
        ),
    ]
}

/// A config whose values add up to just under the ConfigMap limit.
fn big(version: &str, filler: &[u8]) -> Vec<(String, Vec<u8>)> {
    vec![
        ("version".into(), version.as_bytes().to_vec()),
        ("blob.txt".into(), filler.to_vec()),
    ]
}

fn write(vol: &Volume, files: &[(String, Vec<u8>)]) -> Instant {
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    vol.write(&refs).expect("volume update")
}

/// Time from the `..data` rename to the reload POST arriving at the sink, for accepted updates.
fn reload_latency(
    vol: &Volume,
    sink: &Sink,
    n: usize,
    seq: &mut u64,
    make: &Maker,
) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        *seq += 1;
        let files = make(&format!("1.0.{seq}"));
        while sink.arrivals.try_recv().is_ok() {}
        let t0 = write(vol, &files);
        let at = sink
            .arrivals
            .recv_timeout(Duration::from_secs(10))
            .expect("reload POST within 10 s");
        out.push(at.saturating_duration_since(t0));
    }
    out
}

/// Time from the rename until `/status` (or `/readyz`) reflects the new verdict. Updates alternate
/// between accepted (1.x) and too-new (2.x); with `--on-incompatible unready` readiness flips each time.
fn endpoint_latency(
    vol: &Volume,
    cg: &Gate,
    n: usize,
    seq: &mut u64,
    readyz: bool,
    make: &Maker,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut out = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        *seq += 1;
        let accepted = i % 2 == 0;
        let v = format!("{}.0.{seq}", if accepted { 1 } else { 2 });
        let files = make(&v);
        let t0 = write(vol, &files);
        let done = || -> bool {
            if readyz {
                let want = if accepted { 200 } else { 503 };
                common::get(cg.port, "/readyz").is_some_and(|(c, _)| c == want)
            } else {
                common::status(cg.port).is_some_and(|s| {
                    let at = if accepted {
                        &s["active"]["version"]
                    } else {
                        &s["candidate"]["version"]
                    };
                    at.as_str() == Some(v.as_str())
                })
            }
        };
        let deadline = t0 + Duration::from_secs(10);
        loop {
            if done() {
                if accepted { &mut out.0 } else { &mut out.1 }.push(t0.elapsed());
                break;
            }
            assert!(Instant::now() < deadline, "{v} not reflected within 10 s");
        }
    }
    out
}

fn startup(n: usize, tmp: &Path) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let base = tmp.join(format!("start{i}"));
        let vol = Volume::new(base.join("incoming"));
        write(&vol, &small("1.0.0"));
        let promote = base.join("promoted");
        let ann = base.join("podinfo/annotations");
        let t0 = Instant::now();
        let cg = spawn_gate(
            &bin(),
            &[
                "--watch",
                vol.dir.to_str().unwrap(),
                "--promote-to",
                promote.to_str().unwrap(),
                "--annotations",
                ann.to_str().unwrap(),
                "--accepts",
                "^1",
            ],
            &base.join("log"),
        );
        loop {
            if common::get(cg.port, "/readyz").is_some_and(|(c, _)| c == 200) {
                out.push(t0.elapsed());
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "not ready in 10 s");
            std::thread::sleep(Duration::from_micros(200));
        }
        let _ = cg.stop();
    }
    out
}

fn machine() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim())
        })
        .unwrap_or("unknown")
        .to_owned();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    json!({"nproc": nproc, "cpu": model, "kernel": kernel})
}

/// One config shape of the peak-memory table: the files and where the version is.
struct Shape {
    label: &'static str,
    key: &'static str,
    version_from: &'static str,
    files: Files,
}

/// Configs of just under 1 MiB in each shape the extractor must stream.
fn shapes() -> Vec<Shape> {
    let fill = |head: &str, item: &dyn Fn(usize) -> String, sep: &str, tail: &str| {
        let mut s = String::from(head);
        let mut i = 0;
        while s.len() + 64 + tail.len() < MAX_BYTES - 64 {
            if i > 0 {
                s.push_str(sep);
            }
            s.push_str(&item(i));
            i += 1;
        }
        s.push_str(tail);
        s.into_bytes()
    };
    vec![
        Shape {
            label: "block YAML, yaml:",
            key: "peak_block_yaml",
            version_from: "yaml:app.yaml#/schema/version",
            files: vec![(
                "app.yaml".into(),
                fill(
                    "schema:\n  version: 1.0.0\nitems:\n",
                    &|i| format!("  - name: item{i}\n    value: {i}\n"),
                    "",
                    "",
                ),
            )],
        },
        Shape {
            label: "flow YAML [[1,2],...], yaml:",
            key: "peak_flow_yaml",
            version_from: "yaml:app.yaml#/version",
            files: vec![(
                "app.yaml".into(),
                fill("version: 1.0.0\ndata: [", &|_| "[1,2]".into(), ",", "]\n"),
            )],
        },
        Shape {
            label: "JSON objects, json:",
            key: "peak_json",
            version_from: "json:app.json#/version",
            files: vec![(
                "app.json".into(),
                fill(
                    "{\"version\":\"1.0.0\",\"items\":[",
                    &|i| format!("{{\"name\":\"item{i}\",\"value\":{i}}}"),
                    ",",
                    "]}",
                ),
            )],
        },
        Shape {
            label: "1 MiB blob, file:",
            key: "peak_file",
            version_from: "file:version",
            files: vec![
                ("version".into(), b"1.0.0".to_vec()),
                (
                    "blob.txt".into(),
                    (0..MAX_BYTES - 64).map(|i| b'a' + (i % 26) as u8).collect(),
                ),
            ],
        },
    ]
}

/// Peak RSS (VmHWM) of a fresh sidecar that reads, judges and promotes one config of each shape.
fn peak_memory(tmp: &Path) -> Vec<(&'static str, &'static str, u64)> {
    let mut out = Vec::new();
    for (i, shape) in shapes().into_iter().enumerate() {
        let base = tmp.join(format!("peak{i}"));
        let vol = Volume::new(base.join("incoming"));
        write(&vol, &shape.files);
        let promote = base.join("promoted");
        let ann = base.join("podinfo/annotations");
        let mut cg = spawn_gate(
            &bin(),
            &[
                "--watch",
                vol.dir.to_str().unwrap(),
                "--promote-to",
                promote.to_str().unwrap(),
                "--annotations",
                ann.to_str().unwrap(),
                "--accepts",
                "^1",
                "--version-from",
                shape.version_from,
            ],
            &base.join("log"),
        );
        // CI's quick run is a debug build, which reads a 1 MiB flow-style YAML in seconds, and more on a
        // loaded machine: the default deadline is for small configs.
        cg.deadline = Duration::from_secs(120);
        cg.wait_status(shape.label, |s| {
            s["ready"] == true || s["candidate"]["verdict"].is_string()
        });
        let status = common::status(cg.port).unwrap_or_default();
        assert_eq!(
            status["active"]["version"], "1.0.0",
            "{}: {status}",
            shape.label
        );
        out.push((shape.key, shape.label, common::status_kb(cg.pid(), "VmHWM")));
        let _ = cg.stop();
    }
    out
}

/// A reloader run side by side with confgate, on its own volume and sink.
struct Rival {
    name: &'static str,
    key: &'static str,
    process: Process,
    vol: Volume,
    sink: Sink,
    seq: u64,
    /// Its binary's size, when it has one of its own.
    bytes: Option<u64>,
}

impl Rival {
    /// The physical floor ([`floor`]): inotify and a kept-alive POST, nothing else.
    fn floor(tmp: &Path) -> Rival {
        let vol = Volume::new(tmp.join("floor-incoming"));
        write(&vol, &small("1.0.0"));
        let sink = Sink::start(false);
        let child = floor::spawn(&vol.dir, sink.port, None);
        Rival {
            name: "floor",
            key: "floor",
            process: Process::Child(child),
            vol,
            sink,
            seq: 0,
            bytes: None,
        }
    }

    /// The copy floor: the floor plus the least a gate must do before it POSTs, copy the keys into
    /// a new dir and swap `..data` to it.
    fn copy_floor(tmp: &Path, promoted: &Path) -> Rival {
        let vol = Volume::new(tmp.join("copy-floor-incoming"));
        write(&vol, &small("1.0.0"));
        let sink = Sink::start(false);
        let child = floor::spawn(
            &vol.dir,
            sink.port,
            Some(&promoted.join("copy-floor-promoted")),
        );
        Rival {
            name: "copy floor",
            key: "copy_floor",
            process: Process::Child(child),
            vol,
            sink,
            seq: 0,
            bytes: None,
        }
    }

    /// Another confgate build (a baseline to compare a change with), run as the measured one is.
    fn confgate(bin: &str, tmp: &Path, promoted: &Path) -> Rival {
        let base = tmp.join("baseline");
        let vol = Volume::new(base.join("incoming"));
        write(&vol, &small("1.0.0"));
        let sink = Sink::start(false);
        let (watch, promote, ann) = (
            vol.dir.to_string_lossy().into_owned(),
            promoted
                .join("baseline-promoted")
                .to_string_lossy()
                .into_owned(),
            base.join("podinfo/annotations")
                .to_string_lossy()
                .into_owned(),
        );
        let url = sink.url();
        let gate = spawn_gate(
            bin,
            &[
                "--watch",
                &watch,
                "--promote-to",
                &promote,
                "--annotations",
                &ann,
                "--accepts",
                ">=1.0.0, <2.0.0",
                "--on-incompatible",
                "unready",
                "--reload",
                &url,
            ],
            &base.join("confgate.log"),
        );
        gate.wait_status("the baseline's first config", |s| s["ready"] == true);
        Rival {
            name: "confgate baseline",
            key: "baseline",
            process: Process::Gate(gate),
            vol,
            sink,
            seq: 0,
            bytes: std::fs::metadata(bin).map(|m| m.len()).ok(),
        }
    }

    /// configmap-reload, run as its README says.
    fn configmap_reload(bin: &str, tmp: &Path) -> Rival {
        let vol = Volume::new(tmp.join("peer-incoming"));
        write(&vol, &small("1.0.0"));
        let sink = Sink::start(false);
        let listen = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        let port = listen.local_addr().expect("port").port();
        drop(listen);
        let child = std::process::Command::new(bin)
            .arg(format!("--volume-dir={}", vol.dir.display()))
            .arg(format!("--webhook-url={}", sink.url()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start configmap-reload");
        // Ready when its metrics endpoint answers: it has set up its watch by then.
        let deadline = Instant::now() + Duration::from_secs(10);
        while common::get(port, "/metrics").is_none() {
            assert!(Instant::now() < deadline, "configmap-reload did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        Rival {
            name: "configmap-reload",
            key: "configmap_reload",
            process: Process::Child(child),
            vol,
            sink,
            seq: 0,
            bytes: std::fs::metadata(bin).map(|m| m.len()).ok(),
        }
    }
}

/// A rival's process: a plain child, killed when dropped, or a confgate (whose `Gate` does that).
enum Process {
    Child(std::process::Child),
    Gate(Gate),
}

impl Process {
    fn pid(&self) -> u32 {
        match self {
            Process::Child(c) => c.id(),
            Process::Gate(g) => g.pid(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Process::Child(c) = self {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The side-by-side rounds' result.
struct SideBySide {
    rounds: usize,
    per: usize,
    ours: Stats,
    rss_kib: u64,
    /// CPU time per update of the rounds, in microseconds (threads that ended meanwhile not counted).
    cpu_us: f64,
    /// Whether configmap-reload was among the rivals.
    peer: bool,
    rivals: Vec<RivalResult>,
}

struct RivalResult {
    name: &'static str,
    key: &'static str,
    stats: Stats,
    rss_kib: u64,
    cpu_us: f64,
    bytes: Option<u64>,
}

/// What one exec probe costs: wall time from spawn to exit, CPU time and the largest peak RSS.
struct ProbeCost {
    wall: Stats,
    cpu_ms: f64,
    max_rss_kib: u64,
}

/// The benchmark re-executed as a parent of nothing but probes, so that `getrusage(RUSAGE_CHILDREN)`
/// counts them alone (the benchmark itself has reaped sidecars by then).
const PROBE_RUNNER: &str = "--probe-runner";

/// Runs `confgate probe ready` `n` times against the sidecar on `port`, as the kubelet's exec probe
/// does, in a fresh process ([`probe_runner`]).
fn probe_cost(bin: &str, port: u16, n: usize) -> ProbeCost {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let out = std::process::Command::new(exe)
        .args([PROBE_RUNNER, bin, &port.to_string(), &n.to_string()])
        .output()
        .expect("run the probe runner");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "probe runner: {text}");
    let nums: Vec<u64> = text
        .split_whitespace()
        .map(|v| v.parse().expect("a number"))
        .collect();
    let [cpu_us, max_rss_kib, wall_ns @ ..] = nums.as_slice() else {
        panic!("probe runner printed {text}");
    };
    ProbeCost {
        wall: stats(wall_ns.iter().map(|ns| Duration::from_nanos(*ns)).collect()),
        cpu_ms: *cpu_us as f64 / 1e3 / n.max(1) as f64,
        max_rss_kib: *max_rss_kib,
    }
}

/// Prints the probes' CPU time (us, all of them), their largest peak RSS (KiB) and each one's wall
/// time (ns), then exits.
fn probe_runner(bin: &str, port: u16, n: usize) -> ! {
    use nix::sys::resource::{UsageWho, getrusage};
    let mut wall = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let status = std::process::Command::new(bin)
            .args(["probe", "ready", "--addr", &format!("127.0.0.1:{port}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run confgate probe");
        wall.push(t0.elapsed().as_nanos());
        assert!(status.success(), "confgate probe ready failed: {status}");
    }
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let us = |tv: nix::sys::time::TimeVal| tv.tv_sec() * 1_000_000 + tv.tv_usec();
    let walls: Vec<String> = wall.iter().map(u128::to_string).collect();
    println!(
        "{} {} {}",
        us(u.user_time()) + us(u.system_time()),
        u.max_rss(),
        walls.join(" ")
    );
    std::process::exit(0)
}

/// Side by side with the floor (and configmap-reload or another confgate build when given):
/// `o.rounds` alternating rounds of `o.per_round` updates each, 256-byte configs, `o.gap` apart.
/// `pid` is the measured confgate's; the rivals' promoted dirs go under `promoted`, as its does.
fn side_by_side(
    vol: &Volume,
    sink: &Sink,
    seq: &mut u64,
    pid: u32,
    tmp: &Path,
    promoted: &Path,
    o: &Opts,
) -> SideBySide {
    let (rounds, per, gap) = (o.rounds, o.per_round, o.gap);
    let cmp_files = |v: &str| {
        let mut f = small(v);
        let used: usize = f.iter().map(|(k, b)| k.len() + b.len()).sum();
        f.push((
            "pad.txt".into(),
            vec![b'p'; 256usize.saturating_sub(used + 7)],
        ));
        f
    };
    let env = |name: &str| std::env::var(name).ok().filter(|b| !b.is_empty());
    let peer = env("CONFIGMAP_RELOAD_BIN");
    let mut rivals = vec![Rival::floor(tmp), Rival::copy_floor(tmp, promoted)];
    if let Some(bin) = &peer {
        rivals.push(Rival::configmap_reload(bin, tmp));
    }
    if let Some(bin) = &env("CONFGATE_BASELINE_BIN") {
        rivals.push(Rival::confgate(bin, tmp, promoted));
    }
    // The pids, so a profiler can be attached to the processes during the rounds.
    eprintln!(
        "side by side with {} ({rounds} alternating rounds of {per}); pids: confgate {pid}, {}...",
        rivals
            .iter()
            .map(|r| r.name)
            .collect::<Vec<_>>()
            .join(" and "),
        rivals
            .iter()
            .map(|r| format!("{} {}", r.name, r.process.pid()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut ours = Vec::new();
    let mut theirs = vec![Vec::new(); rivals.len()];
    reload_latency(vol, sink, 5, seq, &cmp_files);
    for r in &mut rivals {
        reload_latency(&r.vol, &r.sink, 5, &mut r.seq, &cmp_files);
    }
    // With a gap, each update finds its reloader idle, as a ConfigMap update minutes after the last
    // does; without, the next update lands while confgate still answers the last (logs, tidies).
    let spaced = |vol: &Volume, sink: &Sink, seq: &mut u64| -> Vec<Duration> {
        if gap.is_zero() {
            return reload_latency(vol, sink, per, seq, &cmp_files);
        }
        (0..per)
            .flat_map(|_| {
                // A pause between samples, not a wait for anything.
                std::thread::sleep(gap);
                reload_latency(vol, sink, 1, seq, &cmp_files)
            })
            .collect()
    };
    let cpu_start = common::cpu_ns(pid);
    let rival_cpu_start: Vec<u64> = rivals
        .iter()
        .map(|r| common::cpu_ns(r.process.pid()))
        .collect();
    for _ in 0..rounds {
        ours.extend(spaced(vol, sink, seq));
        for (r, t) in rivals.iter_mut().zip(&mut theirs) {
            t.extend(spaced(&r.vol, &r.sink, &mut r.seq));
        }
    }
    let per_update = |start: u64, pid: u32, n: usize| {
        common::cpu_ns(pid).saturating_sub(start) as f64 / 1000.0 / n.max(1) as f64
    };
    SideBySide {
        rounds,
        per,
        cpu_us: per_update(cpu_start, pid, ours.len()),
        ours: stats(ours),
        rss_kib: common::status_kb(pid, "VmRSS"),
        peer: peer.is_some(),
        rivals: rivals
            .iter()
            .zip(theirs)
            .zip(rival_cpu_start)
            .map(|((r, t), start)| RivalResult {
                name: r.name,
                key: r.key,
                cpu_us: per_update(start, r.process.pid(), t.len()),
                stats: stats(t),
                rss_kib: common::status_kb(r.process.pid(), "VmRSS"),
                bytes: r.bytes,
            })
            .collect(),
    }
}

/// The side-by-side rows of the report: each rival's median, p99, RSS and size against confgate's.
fn comparison(side: &SideBySide, bin_size: u64) -> Vec<(String, String, String)> {
    let pass = |ok: bool| if ok { "ok" } else { "MISSED" };
    let mut cmp_rows = Vec::new();
    for r in &side.rivals {
        // The floor does strictly less than any reloader; configmap-reload about as little. A
        // baseline build has no target: the ratio says what a change did. The copy floor's ratio
        // says how much of confgate's time goes beyond the copy and swap any gate must make.
        let (limit, rss_limit) = match r.key {
            "floor" => (Some(1.3), None),
            "copy_floor" => (Some(1.1), None),
            "configmap_reload" => (Some(1.0), Some(0.5)),
            _ => (None, None),
        };
        for (what, a, b) in [
            ("median", side.ours.median, r.stats.median),
            ("p99", side.ours.p99, r.stats.p99),
        ] {
            cmp_rows.push((
                format!("vs {}: swap -> POST {what} of {}", r.name, side.ours.n),
                format!("{a:.3} ms vs {b:.3} ms"),
                match limit {
                    Some(l) => format!("ratio {:.2} (<= {l}: {})", a / b, pass(a <= b * l)),
                    None => format!("ratio {:.2}", a / b),
                },
            ));
        }
        cmp_rows.push((
            format!("vs {}: CPU per update", r.name),
            format!("{:.0} us vs {:.0} us", side.cpu_us, r.cpu_us),
            format!("ratio {:.2}", side.cpu_us / r.cpu_us),
        ));
        let rss_ratio = side.rss_kib as f64 / r.rss_kib as f64;
        cmp_rows.push((
            format!("vs {}: RSS after the run", r.name),
            format!("{} KiB vs {} KiB", side.rss_kib, r.rss_kib),
            match rss_limit {
                Some(l) => format!("ratio {rss_ratio:.2} (<= {l}: {})", pass(rss_ratio <= l)),
                None => format!("ratio {rss_ratio:.2}"),
            },
        ));
        if let Some(bytes) = r.bytes {
            cmp_rows.push((
                format!("vs {}: binary size", r.name),
                format!("{bin_size} vs {bytes} bytes"),
                format!("ratio {:.2}", bin_size as f64 / bytes as f64),
            ));
        }
    }
    // A baseline build against the copy floor, in the same rounds: where the change started from.
    let rival = |key: &str| side.rivals.iter().find(|r| r.key == key);
    if let (Some(base), Some(copy)) = (rival("baseline"), rival("copy_floor")) {
        for (what, a, b) in [
            ("median", base.stats.median, copy.stats.median),
            ("p99", base.stats.p99, copy.stats.p99),
        ] {
            cmp_rows.push((
                format!("{} vs copy floor: swap -> POST {what}", base.name),
                format!("{a:.3} ms vs {b:.3} ms"),
                format!("ratio {:.2}", a / b),
            ));
        }
    }
    if !side.peer {
        cmp_rows.push((
            "configmap-reload".into(),
            "skipped (set CONFIGMAP_RELOAD_BIN to its binary)".into(),
            String::new(),
        ));
    }
    cmp_rows
}

/// Prints rows of three columns, aligned.
fn print_table(rows: &[(String, String, String)]) {
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    for (a, b, c) in rows {
        println!("{a:<w0$}  {b:<w1$}  {c}");
    }
}

/// One latency line of the report.
struct Line {
    key: &'static str,
    label: &'static str,
    stats: Stats,
    /// Target for the median, in milliseconds.
    target_ms: Option<f64>,
}

fn main() {
    let o = opts();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut report = serde_json::Map::new();
    report.insert("machine".into(), machine());
    report.insert("quick".into(), json!(o.quick));
    // `cargo bench --profile dev` (CI's smoke run, reusing the test build) measures a debug binary.
    let bin = bin();
    // cargo puts debug builds under `debug/`; anything else (a release dir, a copy) counts as given.
    let release = !Path::new(&bin)
        .components()
        .any(|c| c.as_os_str() == "debug");
    report.insert("release".into(), json!(release));
    let bin_size = std::fs::metadata(&bin).expect("binary").len();
    report.insert("binary".into(), json!(bin));
    report.insert("binary_bytes".into(), json!(bin_size));
    let mut lines = Vec::new();

    let start = if o.side_only {
        None
    } else {
        eprintln!("start-up ({} runs)...", o.starts);
        Some(stats(startup(o.starts, tmp.path())))
    };

    let vol = Volume::new(tmp.path().join("incoming"));
    let promoted_tmp = o.promoted_in.as_ref().map(|d| {
        tempfile::tempdir_in(d).unwrap_or_else(|e| panic!("a dir in {}: {e}", d.display()))
    });
    let promoted_root = promoted_tmp.as_ref().map_or(tmp.path(), |t| t.path());
    report.insert(
        "promoted_in".into(),
        json!(o.promoted_in.as_ref().map(|d| d.display().to_string())),
    );
    let promote = promoted_root.join("promoted");
    let ann = tmp.path().join("podinfo/annotations");
    let sink = Sink::start(false);
    let url = sink.url();
    write(&vol, &small("1.0.0"));
    let cg = spawn_gate(
        &bin,
        &[
            "--watch",
            vol.dir.to_str().unwrap(),
            "--promote-to",
            promote.to_str().unwrap(),
            "--annotations",
            ann.to_str().unwrap(),
            "--accepts",
            ">=1.0.0, <2.0.0",
            "--on-incompatible",
            "unready",
            "--reload",
            &url,
        ],
        &tmp.path().join("confgate.log"),
    );
    let pid = cg.pid();
    cg.wait_status("first config accepted", |s| s["ready"] == true);
    let mem = |pid| {
        json!({
            "rss_kib": common::status_kb(pid, "VmRSS"),
            "rss_anon_kib": common::status_kb(pid, "RssAnon"),
            "rss_file_kib": common::status_kb(pid, "RssFile"),
        })
    };
    let mem_start = mem(pid);
    if o.side_only {
        let mut seq = 0;
        let side = side_by_side(&vol, &sink, &mut seq, pid, tmp.path(), promoted_root, &o);
        println!(
            "\nside by side, {} alternating rounds of {} updates, 256-byte configs, {} apart, promoted dirs in {}",
            side.rounds,
            side.per,
            if o.gap.is_zero() {
                "back to back".to_owned()
            } else {
                format!("{:?}", o.gap)
            },
            promoted_root.parent().unwrap_or(promoted_root).display()
        );
        print_table(&comparison(&side, bin_size));
        return;
    }

    let mut seq = 0u64;
    let filler: Vec<u8> = (0..MAX_BYTES - 64).map(|i| b'a' + (i % 26) as u8).collect();
    let make_small = |v: &str| small(v);
    let make_big = |v: &str| big(v, &filler);

    for (size, n, make) in [
        ("small", o.iterations, &make_small as &Maker),
        ("1 MiB", o.big_iterations, &make_big as &Maker),
    ] {
        eprintln!("reaction, {size} config ({n} updates)...");
        let is_small = size == "small";
        reload_latency(&vol, &sink, 10, &mut seq, make);
        let r = reload_latency(&vol, &sink, n, &mut seq, make);
        let (st_acc, st_rej) = endpoint_latency(&vol, &cg, n, &mut seq, false, make);
        let (rz_acc, rz_rej) = endpoint_latency(&vol, &cg, n, &mut seq, true, make);
        let pick = |a: &'static str, b: &'static str| if is_small { a } else { b };
        lines.push(Line {
            key: pick("small_reload", "big_reload"),
            label: pick("reload POST, small config", "reload POST, 1 MiB config"),
            stats: stats(r),
            target_ms: Some(if is_small { 1.0 } else { 5.0 }),
        });
        lines.push(Line {
            key: pick("small_status_accepted", "big_status_accepted"),
            label: pick("/status active, small", "/status active, 1 MiB"),
            stats: stats(st_acc),
            target_ms: None,
        });
        lines.push(Line {
            key: pick("small_status_rejected", "big_status_rejected"),
            label: pick("/status candidate, small", "/status candidate, 1 MiB"),
            stats: stats(st_rej),
            target_ms: None,
        });
        lines.push(Line {
            key: pick("small_readyz_200", "big_readyz_200"),
            label: pick("/readyz 503->200, small", "/readyz 503->200, 1 MiB"),
            stats: stats(rz_acc),
            target_ms: None,
        });
        lines.push(Line {
            key: pick("small_readyz_503", "big_readyz_503"),
            label: pick("/readyz 200->503, small", "/readyz 200->503, 1 MiB"),
            stats: stats(rz_rej),
            target_ms: None,
        });
    }
    let mem_after_big = mem(pid);

    eprintln!("memory over {} updates...", o.updates);
    // Back to a small config, so the churn measures growth rather than the 1 MiB buffers.
    reload_latency(&vol, &sink, 100, &mut seq, &make_small);
    let mem_before = mem(pid);
    let fds_before = common::fd_count(pid);
    let posts_before = sink.requests.load(std::sync::atomic::Ordering::Relaxed);
    lines.push(Line {
        key: "churn_reload",
        label: "reload POST during churn",
        stats: stats(reload_latency(
            &vol,
            &sink,
            o.updates,
            &mut seq,
            &make_small,
        )),
        target_ms: None,
    });
    let posts = sink.requests.load(std::sync::atomic::Ordering::Relaxed) - posts_before;
    let mem_after = mem(pid);
    let fds_after = common::fd_count(pid);
    let hwm = common::status_kb(pid, "VmHWM");
    let threads = common::thread_count(pid);
    lines.push(Line {
        key: "startup",
        label: "start-up to /readyz 200",
        stats: start.expect("measured unless --side-only"),
        target_ms: None,
    });

    eprintln!("idle for {:?}...", o.idle);
    // Let the reload worker and the last HTTP connections settle before measuring.
    cg.wait_status("last reload done", |s| {
        s["reload"]["last_result"] == "success"
    });
    std::thread::sleep(Duration::from_millis(500));
    // The blocking pool's thread ends 10 s after its last job; ending inside the window, it would hand
    // its CPU time to the process's total and show as a tick of idle CPU that no idle work spent.
    // Not waited for past 20 s: a thread that stays is then measured, not failed. Told by name, so a
    // build with more or fewer threads of its own (the server's) is measured the same way.
    let end = Instant::now() + Duration::from_secs(20);
    let pool = |pid| {
        common::thread_names(pid)
            .iter()
            .any(|n| n.starts_with(POOL_THREAD))
    };
    while pool(pid) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (cpu0, (vol0, invol0)) = (common::cpu_ticks(pid), common::ctxt_switches(pid));
    // A measurement window, not synchronisation: nothing is waited for.
    std::thread::sleep(o.idle);
    let (cpu1, (vol1, invol1)) = (common::cpu_ticks(pid), common::ctxt_switches(pid));
    let mem_idle_end = mem(pid);
    let threads_idle = common::thread_names(pid);
    let idle_cpu_ms = (cpu1 - cpu0) * 10;
    // Counted over the threads alive at each reading: a thread that ended meanwhile takes its count
    // with it, so the difference is a lower bound, and never below zero.
    let wakeups = vol1.saturating_sub(vol0);

    eprintln!("exec probes ({} runs)...", o.probes);
    let probe = probe_cost(&bin, cg.port, o.probes);
    lines.push(Line {
        key: "probe",
        label: "exec probe `probe ready`, spawn to exit",
        stats: probe.wall,
        target_ms: None,
    });

    let side = side_by_side(&vol, &sink, &mut seq, pid, tmp.path(), promoted_root, &o);
    drop(cg);

    eprintln!("peak memory for 1 MiB configs of each shape...");
    let peaks = peak_memory(tmp.path());

    let pass = |ok: bool| if ok { "ok" } else { "MISSED" };
    let kib = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap_or(0);
    let mut rows: Vec<(String, String, String)> = Vec::new();
    for l in &lines {
        let s = l.stats;
        rows.push((
            l.label.to_owned(),
            format!(
                "{:.3} ms (min {:.3}, max {:.3}, n={})",
                s.median, s.min, s.max, s.n
            ),
            l.target_ms
                .map(|t| format!("< {t} ms: {}", pass(s.median < t)))
                .unwrap_or_default(),
        ));
    }
    let mem_row = |label: &str, m: &serde_json::Value| {
        (
            label.to_owned(),
            format!(
                "{} KiB (anon {}, file {})",
                kib(m, "rss_kib"),
                kib(m, "rss_anon_kib"),
                kib(m, "rss_file_kib")
            ),
            format!("<= 5 MiB: {}", pass(kib(m, "rss_kib") <= 5 * 1024)),
        )
    };
    rows.push(mem_row("RSS at start", &mem_start));
    rows.push(mem_row("RSS after 1 MiB configs", &mem_after_big));
    rows.push(mem_row(
        &format!("RSS before {} updates", o.updates),
        &mem_before,
    ));
    rows.push(mem_row(
        &format!("RSS after {} updates", o.updates),
        &mem_after,
    ));
    rows.push(mem_row("RSS after idle", &mem_idle_end));
    rows.push((
        "RSS peak (VmHWM)".into(),
        format!("{hwm} KiB"),
        format!("<= 5 MiB: {}", pass(hwm <= 5 * 1024)),
    ));
    rows.push((
        format!("reload POSTs for {} updates", o.updates),
        posts.to_string(),
        String::new(),
    ));
    rows.push((
        "open fds before/after".into(),
        format!("{fds_before} / {fds_after}"),
        String::new(),
    ));
    rows.push((
        "threads right after the updates".into(),
        threads.to_string(),
        String::new(),
    ));
    rows.push((
        format!("threads after idle {} s", o.idle.as_secs()),
        format!("{} ({})", threads_idle.len(), threads_idle.join(", ")),
        String::new(),
    ));
    rows.push((
        format!("idle {} s: CPU", o.idle.as_secs()),
        format!("{idle_cpu_ms} ms"),
        String::new(),
    ));
    rows.push((
        format!("idle {} s: wake-ups", o.idle.as_secs()),
        format!(
            "{wakeups} voluntary, {} involuntary",
            invol1.saturating_sub(invol0)
        ),
        format!("30 s re-hash: {}", o.idle.as_secs() / 30),
    ));
    rows.push((
        "exec probe: CPU per run / peak RSS".into(),
        format!("{:.2} ms / {} KiB", probe.cpu_ms, probe.max_rss_kib),
        String::new(),
    ));
    rows.push((
        "binary size".into(),
        format!("{bin_size} bytes ({:.2} MiB)", bin_size as f64 / 1048576.0),
        format!("< 5 MiB: {}", pass(bin_size < 5 * 1024 * 1024)),
    ));

    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut peak_rows = Vec::new();
    for (_, label, kib) in &peaks {
        peak_rows.push((
            format!("peak RSS (VmHWM), {label}"),
            format!("{kib} KiB ({:.1} MiB)", mib(*kib)),
            // The image's binary (glibc static, its tunables) is measured against this; a dynamically
            // linked build also maps the whole of libc.so and is about 1 MiB above it.
            format!("<= 6 MiB: {}", pass(*kib <= 6 * 1024)),
        ));
    }
    let cmp_rows = comparison(&side, bin_size);

    let m = &report["machine"];
    println!(
        "\nconfgate bench ({}) on {} x {}, Linux {}",
        if o.quick { "quick" } else { "full" },
        m["nproc"],
        m["cpu"].as_str().unwrap_or(""),
        m["kernel"].as_str().unwrap_or("")
    );
    if !release {
        println!(
            "binary {bin}: not a release build, so these figures say only that the benchmark runs"
        );
    }
    print_table(&rows);

    for (title, table) in [
        ("peak memory, one 1 MiB config", &peak_rows),
        (
            &format!(
                "side by side, {} alternating rounds of {} updates, 256-byte configs",
                side.rounds, side.per
            ),
            &cmp_rows,
        ),
    ] {
        println!("\n{title}");
        print_table(table);
    }
    report.insert(
        "peak_memory_kib".into(),
        peaks
            .iter()
            .map(|(k, _, v)| (k.to_string(), json!(v)))
            .collect(),
    );
    let mut sbs = serde_json::Map::new();
    sbs.insert("rounds".into(), json!(side.rounds));
    sbs.insert("per_round".into(), json!(side.per));
    sbs.insert("confgate".into(), stats_json(side.ours));
    sbs.insert("rss_kib_confgate".into(), json!(side.rss_kib));
    sbs.insert("cpu_us_per_update_confgate".into(), json!(side.cpu_us));
    for r in &side.rivals {
        sbs.insert(r.key.into(), stats_json(r.stats));
        sbs.insert(format!("rss_kib_{}", r.key), json!(r.rss_kib));
        sbs.insert(format!("cpu_us_per_update_{}", r.key), json!(r.cpu_us));
        if let Some(b) = r.bytes {
            sbs.insert(format!("binary_bytes_{}", r.key), json!(b));
        }
    }
    if !side.peer {
        sbs.insert("configmap_reload".into(), json!("skipped"));
    }
    report.insert("side_by_side".into(), serde_json::Value::Object(sbs));

    let latency: serde_json::Map<String, serde_json::Value> = lines
        .iter()
        .map(|l| (l.key.to_owned(), stats_json(l.stats)))
        .collect();
    report.insert("latency".into(), serde_json::Value::Object(latency));
    report.insert(
        "memory".into(),
        json!({
            "start": mem_start,
            "after_1mib_configs": mem_after_big,
            "before_updates": mem_before,
            "after_updates": mem_after,
            "after_idle": mem_idle_end,
            "hwm_kib": hwm,
            "updates": o.updates,
            "reload_posts": posts,
            "fds_before": fds_before,
            "fds_after": fds_after,
            "threads": threads,
        }),
    );
    report.insert(
        "idle".into(),
        json!({
            "seconds": o.idle.as_secs(),
            "cpu_ms": idle_cpu_ms,
            "threads_after": threads_idle.len(),
            "thread_names_after": threads_idle,
            "voluntary_switches": wakeups,
            "involuntary_switches": invol1.saturating_sub(invol0),
        }),
    );
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(report)).expect("json");
    std::fs::write(&o.json, text).expect("write JSON report");
    println!("\nJSON: {}", o.json.display());
}
