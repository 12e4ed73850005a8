//! Hostile and broken inputs against the real binary on real files: for each, confgate keeps running,
//! keeps the accepted config promoted, and says why in `/status`.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Gate, Volume};

const DEADLINE: Duration = Duration::from_secs(15);

struct Setup {
    _tmp: tempfile::TempDir,
    vol: Volume,
    promoted: PathBuf,
    cg: Gate,
}

/// A running confgate that has accepted and promoted version 1.0.0 from a kubelet volume.
fn start(extra: &[&str], files: &[(&str, &[u8])]) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let promoted = tmp.path().join("promoted");
    start_in(tmp, promoted, extra, files)
}

fn start_in(
    tmp: tempfile::TempDir,
    promoted: PathBuf,
    extra: &[&str],
    files: &[(&str, &[u8])],
) -> Setup {
    let vol = Volume::new(tmp.path().join("incoming"));
    vol.write(files).unwrap();
    let watch = vol.dir.to_str().unwrap().to_owned();
    let ann = tmp.path().join("podinfo/annotations");
    let mut args = vec![
        "--watch",
        &watch,
        "--promote-to",
        promoted.to_str().unwrap(),
        "--annotations",
        ann.to_str().unwrap(),
        "--accepts",
        "^1",
    ];
    args.extend_from_slice(extra);
    let mut cg = Gate::spawn(&args, &tmp.path().join("confgate.log"));
    cg.deadline = DEADLINE;
    cg.wait_status("1.0.0 accepted", |s| {
        common::active_version(s) == Some("1.0.0") && s["ready"] == true
    });
    Setup {
        _tmp: tmp,
        vol,
        promoted,
        cg,
    }
}

impl Setup {
    /// Waits for the newest snapshot to be judged `verdict` with a reason containing `why`, then checks
    /// that confgate runs, 1.0.0 is still active and promoted, and the top-level reason says so.
    fn held(&mut self, verdict: &str, why: &str) -> serde_json::Value {
        let s = self.cg.wait_status(&format!("{verdict}: {why}"), |s| {
            s["candidate"]["verdict"] == verdict
                && s["candidate"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains(why))
        });
        assert!(self.cg.alive(), "confgate exited: {}", self.cg.log_text());
        assert_eq!(common::active_version(&s), Some("1.0.0"), "{s}");
        assert_eq!(s["stale"], true, "{s}");
        let reason = s["reason"].as_str().unwrap();
        assert!(
            reason.contains(why) && reason.contains("holding 1.0.0"),
            "{reason}"
        );
        let on_disk = confgate::snapshot::read(&self.promoted)
            .hash()
            .map(|h| h.to_string());
        assert_eq!(
            on_disk.as_deref(),
            s["active"]["sha256"].as_str(),
            "the promoted dir still holds 1.0.0"
        );
        assert_eq!(common::leftovers(&self.promoted), Vec::<String>::new());
        s
    }

    /// After a hostile input, a good config is still taken.
    fn recovers(&self) {
        self.recovers_with(&[("version", b"1.1.0")]);
    }

    fn recovers_with(&self, files: &[(&str, &[u8])]) {
        self.vol.write(files).unwrap();
        self.cg.wait_status("1.1.0 accepted", |s| {
            common::active_version(s) == Some("1.1.0") && s["candidate"].is_null()
        });
        let on_disk = confgate::snapshot::read(&self.promoted);
        assert_eq!(on_disk.hash(), Some(hash_of(files)));
    }
}

fn hash_of(files: &[(&str, &[u8])]) -> confgate::snapshot::ContentHash {
    confgate::snapshot::ContentHash::of(files.iter().copied())
}

#[test]
fn non_utf8_version_is_invalid_and_held() {
    let mut t = start(&[], &[("version", b"1.0.0")]);
    t.vol.write(&[("version", b"1.\xff\xfe.0")]).unwrap();
    t.held("invalid", "key version is not UTF-8 text");
    t.recovers();
}

#[test]
fn one_byte_over_the_size_limit_is_invalid_and_held() {
    let mut t = start(&[], &[("version", b"1.0.0")]);
    let limit = confgate::snapshot::MAX_BYTES as usize;
    let blob = vec![b'x'; limit - 5 + 1];
    t.vol
        .write(&[("version", b"1.2.0"), ("blob", &blob)])
        .unwrap();
    t.held("invalid", "over the ConfigMap size limit of 1048576 bytes");
    // Exactly at the limit is a ConfigMap the API server admits, so it is accepted.
    t.vol
        .write(&[("version", b"1.2.0"), ("blob", &blob[1..])])
        .unwrap();
    t.cg.wait_status("1.2.0 at the limit accepted", |s| {
        common::active_version(s) == Some("1.2.0")
    });
}

#[test]
fn deeply_nested_yaml_is_invalid_and_held() {
    let ok = b"version: 1.0.0\n".as_slice();
    let mut t = start(
        &["--version-from", "yaml:app.yaml#/version"],
        &[("app.yaml", ok)],
    );
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    t.vol.write(&[("app.yaml", deep.as_bytes())]).unwrap();
    t.held("invalid", "key app.yaml is not valid YAML");
    let deep_maps = "a:\n".to_owned()
        + &(1..1000)
            .map(|i| format!("{}a:\n", " ".repeat(i)))
            .collect::<String>();
    t.vol.write(&[("app.yaml", deep_maps.as_bytes())]).unwrap();
    t.held("invalid", "key app.yaml is not valid YAML");
}

#[test]
fn yaml_alias_bomb_is_invalid_and_held() {
    let mut t = start(
        &["--version-from", "yaml:app.yaml#/version"],
        &[("app.yaml", b"version: 1.0.0\n")],
    );
    // Nine levels of nine aliases: a billion expanded nodes from under 1 KiB.
    let mut bomb = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        bomb.push_str(&format!("{n}: &{n} [{refs}]\n", n = w[1]));
    }
    bomb.push_str("version: 2.0.0\n");
    t.vol.write(&[("app.yaml", bomb.as_bytes())]).unwrap();
    t.held("invalid", "key app.yaml is not valid YAML");
    let rss = common::status_kb(t.cg.pid(), "VmHWM");
    assert!(rss < 64 * 1024, "peak RSS {rss} KiB after the alias bomb");
    t.recovers_with(&[("app.yaml", b"version: 1.1.0\n")]);
}

#[test]
fn huge_numbers_are_invalid_and_held() {
    let mut t = start(&[], &[("version", b"1.0.0")]);
    t.vol
        .write(&[("version", b"18446744073709551616.0.0")])
        .unwrap();
    t.held("invalid", "version \"18446744073709551616.0.0\"");
    let long = "9".repeat(100_000);
    t.vol.write(&[("version", long.as_bytes())]).unwrap();
    // Not echoed: 100 kB in every probe answer and log line would bury the reason.
    let s = t.held(
        "invalid",
        "the version at file:version is 100000 bytes long",
    );
    assert!(s.to_string().len() < 4096, "{}", s.to_string().len());
    t.recovers();
}

#[test]
fn huge_json_numbers_are_invalid_and_held() {
    let mut t = start(
        &["--version-from", "json:app.json#/version"],
        &[("app.json", b"{\"version\": \"1.0.0\"}")],
    );
    t.vol
        .write(&[("app.json", b"{\"version\": 1e400}")])
        .unwrap();
    t.held("invalid", "key app.json is not valid JSON");
    t.vol
        .write(&[("app.json", b"{\"version\": 18446744073709551616}")])
        .unwrap();
    t.held("invalid", "not a string or whole number");
}

#[test]
fn symlink_pointing_outside_the_watched_dir_is_invalid_and_held() {
    let mut t = start(&[], &[("version", b"1.0.0")]);
    t.vol
        .write_with(&[("version", b"1.3.0")], |ts| {
            std::os::unix::fs::symlink("/etc/passwd", ts.join("passwd"))
        })
        .unwrap();
    t.held("invalid", "key passwd is a symlink to /etc/passwd, outside");
    t.vol
        .write_with(&[], |ts| {
            std::os::unix::fs::symlink("../../../../../../etc/hostname", ts.join("version"))
        })
        .unwrap();
    t.held("invalid", "outside the watched directory");
    t.recovers();
}

/// Root reads a mode-000 file anyway, so an unreadable key is made with things no reader can get
/// bytes from: a FIFO and a dangling symlink. As another user, a mode-000 file is tried too.
#[test]
fn unreadable_keys_are_invalid_and_held() {
    let mut t = start(&[], &[("version", b"1.0.0")]);
    t.vol
        .write_with(&[("version", b"1.4.0")], |ts| {
            nix::unistd::mkfifo(&ts.join("pipe"), nix::sys::stat::Mode::S_IRWXU)
                .map_err(std::io::Error::from)
        })
        .unwrap();
    t.held("invalid", "key pipe is not a regular file");
    t.vol
        .write_with(&[("version", b"1.4.1")], |ts| {
            std::os::unix::fs::symlink("nowhere", ts.join("dangling"))
        })
        .unwrap();
    t.held("invalid", "key dangling is a symlink to a missing target");
    if euid() == 0 {
        println!("mode-000 file not tried: running as root, which reads it anyway");
    } else {
        t.vol
            .write_with(&[("version", b"1.4.2")], |ts| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::write(ts.join("secret"), "x")?;
                std::fs::set_permissions(ts.join("secret"), std::fs::Permissions::from_mode(0o000))
            })
            .unwrap();
        t.held("invalid", "Permission denied");
    }
    t.recovers();
}

/// Each line of `/readyz?verbose` is a check line or its trailer, and none is the forged one.
fn assert_no_forged_line(cg: &Gate, forged: &str) {
    let (_, body) = common::get(cg.port, "/readyz?verbose").unwrap();
    for line in body.lines() {
        assert!(
            line.starts_with("[+]")
                || line.starts_with("[-]")
                || line.starts_with("[!]")
                || line.starts_with("readyz check")
                || line.starts_with("observe mode"),
            "a line no check made: {line:?} in {body}"
        );
        assert!(!line.starts_with(forged), "a forged line: {body}");
    }
    let probe = std::process::Command::new(common::BIN)
        .args(["probe", "ready", "--timeout", "5s", "--addr"])
        .arg(format!("127.0.0.1:{}", cg.port))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&probe.stdout).into_owned()
        + &String::from_utf8_lossy(&probe.stderr);
    assert_eq!(out.trim_end().lines().count(), 1, "{out}");
}

/// A file name with a newline (a git tree may hold one, a ConfigMap key cannot) is escaped wherever
/// it is shown, so it cannot add a passing check line to `/readyz?verbose` or the exec probe's line:
/// named by the read (a FIFO) and in a list of the keys present (an absent required key).
#[test]
fn a_file_name_with_a_newline_forges_no_check_line() {
    let forged = "[+]config ok: forged";
    let name = format!("pipe\n{forged}");
    let mut t = start(
        &["--require", "needed"],
        &[("version", b"1.0.0"), ("needed", b"x")],
    );
    t.vol
        .write_with(&[("version", b"1.4.0"), ("needed", b"x")], |ts| {
            nix::unistd::mkfifo(&ts.join(&name), nix::sys::stat::Mode::S_IRWXU)
                .map_err(std::io::Error::from)
        })
        .unwrap();
    let s = t.held(
        "invalid",
        &format!("key pipe\\n{forged} is not a regular file"),
    );
    assert!(!s.to_string().contains(&name), "{s}");
    assert_no_forged_line(&t.cg, forged);
    let file = format!("file\n{forged}");
    t.vol
        .write(&[("version", b"1.4.1"), (file.as_str(), b"x")])
        .unwrap();
    t.held("invalid", &format!("file\\n{forged}"));
    assert_no_forged_line(&t.cg, forged);
    let log = t.cg.log_text();
    assert!(!log.contains(&name) && !log.contains(&file), "{log}");
    t.recovers_with(&[("version", b"1.1.0"), ("needed", b"x")]);
}

fn euid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn watched_dir_that_disappears_and_returns_is_missing_then_followed() {
    let mut t = start(&[], &[("version", b"1.0.0")]);
    std::fs::remove_dir_all(&t.vol.dir).unwrap();
    t.held("missing", "does not exist");
    // The dir comes back (a new inode): the watch is set up again and the config there is taken.
    let vol = Volume::new(t.vol.dir.clone());
    vol.write(&[("version", b"1.5.0")]).unwrap();
    t.cg.wait_status("1.5.0 from the returned dir", |s| {
        common::active_version(s) == Some("1.5.0") && s["candidate"].is_null()
    });
    // And it is watched, not just polled: a further update is seen.
    vol.write(&[("version", b"1.6.0")]).unwrap();
    t.cg.wait_status("1.6.0", |s| common::active_version(s) == Some("1.6.0"));
}

/// Unmounts on drop, lazily, so a failed assertion leaves no mount behind.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
#[ignore = "needs root: mounts a 64 KiB tmpfs"]
fn full_disk_on_the_promoted_dir_keeps_the_previous_config() {
    let tmp = tempfile::tempdir().unwrap();
    let promoted = tmp.path().join("promoted");
    std::fs::create_dir(&promoted).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&promoted)
        .output();
    match mounted {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "cannot mount a small tmpfs (run as root): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("cannot run mount: {e}"),
    }
    let _mount = Mount(promoted.clone());
    let mut t = start_in(tmp, promoted, &[], &[("version", b"1.0.0")]);
    let blob = vec![b'x'; 200 * 1024];
    t.vol
        .write(&[("version", b"1.7.0"), ("blob", &blob)])
        .unwrap();
    let s = t.cg.wait_status("promotion failure reported", |s| {
        s["reason"]
            .as_str()
            .is_some_and(|r| r.contains("promotion failed, previous config kept"))
    });
    let reason = s["reason"].as_str().unwrap();
    assert!(reason.contains("No space left on device"), "{reason}");
    assert_eq!(s["ready"], false, "{s}");
    assert_eq!(common::active_version(&s), Some("1.0.0"), "{s}");
    assert!(t.cg.alive());
    assert_eq!(
        std::fs::read_to_string(t.promoted.join("version")).unwrap(),
        "1.0.0"
    );
    assert_eq!(common::leftovers(&t.promoted), Vec::<String>::new());
    // Once a config fits again it is promoted.
    t.recovers();
}

/// The shipped manifests' memory limit for the sidecar (`resources.limits.memory: 16Mi`).
const MEMORY_LIMIT_KIB: u64 = 16 * 1024;
/// The release build's peak RSS over the whole benchmark run (9.7 MiB before the default build lost
/// CEL; docs/performance.md: 8.9 MiB since, so this keeps the larger, the `-policy` build's). The test
/// binary is a debug build, 20 MiB larger in file-backed pages alone, so what is measured here is
/// the growth a hostile config causes, and the release peak plus that growth must fit the limit.
const RELEASE_PEAK_KIB: u64 = 9_933;

/// A running confgate with variants (`config.v*.yaml -> config.yaml`, version at `/version`) and
/// `extra` settings, that has accepted `first`.
fn variants_gate(
    tmp: &tempfile::TempDir,
    first: &[(String, Vec<u8>)],
    extra: &[&str],
) -> (Volume, Gate) {
    let (vol, cg) = spawn_variants(tmp, first, extra);
    cg.wait_status("the first config accepted", |s| s["ready"] == true);
    (vol, cg)
}

/// [`variants_gate`] that returns as soon as confgate has bound its port.
fn spawn_variants(
    tmp: &tempfile::TempDir,
    first: &[(String, Vec<u8>)],
    extra: &[&str],
) -> (Volume, Gate) {
    let vol = Volume::new(tmp.path().join("incoming"));
    write(&vol, first);
    let (watch, promoted) = (tmp.path().join("incoming"), tmp.path().join("promoted"));
    let ann = tmp.path().join("podinfo/annotations");
    let mut args = vec![
        "--watch",
        watch.to_str().unwrap(),
        "--promote-to",
        promoted.to_str().unwrap(),
        "--annotations",
        ann.to_str().unwrap(),
        "--accepts",
        "^1",
        "--variants",
        "config.v*.yaml -> config.yaml",
        "--version-from",
        "yaml:config.yaml#/version",
    ];
    args.extend_from_slice(extra);
    let mut cg = Gate::spawn(&args, &tmp.path().join("confgate.log"));
    cg.deadline = Duration::from_secs(60);
    (vol, cg)
}

fn write(vol: &Volume, files: &[(String, Vec<u8>)]) {
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    vol.write(&refs).unwrap();
}

/// Variant keys `config.vNNNN.yaml` with versions 1.N.0.
fn variants(n: usize) -> impl Iterator<Item = (String, Vec<u8>)> {
    (0..n).map(|i| {
        (
            format!("config.v{i:04}.yaml"),
            format!("version: 1.{i}.0\nsetting: {i}\n").into_bytes(),
        )
    })
}

/// How much the process's peak RSS grew over `since` (KiB), checked against the memory limit.
fn assert_peak_fits(cg: &Gate, since: u64) {
    let peak = common::status_kb(cg.pid(), "VmHWM");
    let growth = peak.saturating_sub(since);
    eprintln!("RSS {since} KiB before, peak {peak} KiB: grew {growth} KiB");
    assert!(
        RELEASE_PEAK_KIB + growth < MEMORY_LIMIT_KIB,
        "peak RSS grew by {growth} KiB (from {since} to {peak}); with the release build's {RELEASE_PEAK_KIB} KiB that is over the {MEMORY_LIMIT_KIB} KiB limit"
    );
}

/// 1000 variants, 1000 other keys and a required key that is absent: every variant is invalid for the
/// same reason, which names keys. Each answer stays short, and so does memory.
#[test]
fn a_thousand_variants_and_keys_keep_every_answer_short_and_memory_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let first = [
        ("config.v1.yaml".to_owned(), b"version: 1.0.0\n".to_vec()),
        ("must-exist".to_owned(), b"x".to_vec()),
    ];
    // Unready while the newest config is rejected, so the reason is what every answer carries.
    let (vol, cg) = variants_gate(
        &tmp,
        &first,
        &["--require", "must-exist", "--on-incompatible", "unready"],
    );
    let files: Vec<(String, Vec<u8>)> = variants(1000)
        .chain((0..1000).map(|i| (format!("other-{i:04}.txt"), vec![b'o'; 100])))
        .collect();
    let size: usize = files.iter().map(|(_, v)| v.len()).sum();
    assert!(size > 120_000, "{size}");
    let before = common::status_kb(cg.pid(), "VmRSS");
    write(&vol, &files);
    let s = cg.wait_status("all variants invalid", |s| {
        s["candidate"]["verdict"] == "invalid"
    });
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("required key must-exist is absent (present: config.yaml, other-0000.txt"),
        "{reason}"
    );
    assert!(reason.contains("and 995 more"), "{reason}");
    assert!(reason.len() < 4096, "{} bytes: {reason}", reason.len());

    let (_, status) = common::get(cg.port, "/status").unwrap();
    assert!(
        status.len() < 32 * 1024,
        "/status is {} bytes",
        status.len()
    );
    let (_, verbose) = common::get(cg.port, "/readyz?verbose").unwrap();
    assert!(
        verbose.len() < 32 * 1024,
        "/readyz?verbose is {} bytes",
        verbose.len()
    );
    let (code, line) = common::get(cg.port, "/readyz").unwrap();
    assert_eq!(code, 503);
    assert!(line.len() < 4096 && line.lines().count() == 1, "{line}");
    // The exec probe prints the reason as one line.
    let probe = std::process::Command::new(common::BIN)
        .args(["probe", "ready", "--timeout", "5s", "--addr"])
        .arg(format!("127.0.0.1:{}", cg.port))
        .output()
        .unwrap();
    assert_eq!(probe.status.code(), Some(1));
    let out = String::from_utf8(probe.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.len() < 4096, "the probe printed {} bytes", out.len());

    let longest = cg.log_text().lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 8192, "a log line of {longest} bytes");
    assert_peak_fits(&cg, before);
}

/// 5000 variants beside an 800 KB key they all share: each variant is judged without copying or
/// hashing the shared key, so the ConfigMap is judged in moments, and `/livez` answers meanwhile.
#[test]
fn five_thousand_variants_beside_a_large_shared_key_are_judged_in_moments() {
    let tmp = tempfile::tempdir().unwrap();
    let first = [("config.v1.yaml".to_owned(), b"version: 1.0.0\n".to_vec())];
    let (vol, cg) = variants_gate(&tmp, &first, &[]);
    let files: Vec<(String, Vec<u8>)> = variants(5000)
        .chain([("shared.bin".to_owned(), vec![b's'; 800 * 1024])])
        .collect();
    let before = common::status_kb(cg.pid(), "VmRSS");
    let t = std::time::Instant::now();
    write(&vol, &files);
    let mut slowest = Duration::ZERO;
    let s = loop {
        let asked = std::time::Instant::now();
        let live = common::get(cg.port, "/livez");
        slowest = slowest.max(asked.elapsed());
        assert_eq!(live.map(|(c, _)| c), Some(200), "/livez");
        let s = cg.status();
        if s["active"]["variant"] == "config.v4999.yaml" {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "not judged after {:?}: {s}",
            t.elapsed()
        );
    };
    eprintln!("judged in {:?}; slowest /livez {slowest:?}", t.elapsed());
    assert_eq!(common::active_version(&s), Some("1.4999.0"), "{s}");
    // Each /livez above answered 200: the server's own bound (the loop answered its ping within
    // LIVENESS_DEADLINE), which is what the kubelet sees. The wall-clock latency is a measurement,
    // printed: on a loaded machine it says more of the machine than of confgate.
    assert_peak_fits(&cg, before);
}

/// A judgement that takes long (a content rule as costly as its budget allows, failing on every
/// variant, so each is judged) runs off the decision loop: the HTTP port answers before the first
/// judgement is done, and `/livez` answers within its 500 ms all along.
#[cfg(feature = "policy")]
#[test]
fn probes_answer_while_a_long_judgement_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<(String, Vec<u8>)> = variants(10)
        .chain([("shared".to_owned(), vec![b's'; 96 * 1024])])
        .collect();
    let (_vol, cg) = spawn_variants(
        &tmp,
        &files,
        &["--rule", "data.shared.split('').size() < 0"],
    );
    let t = std::time::Instant::now();
    let (mut answered_before, mut slowest) = (false, Duration::ZERO);
    let s = loop {
        let asked = std::time::Instant::now();
        let live = common::get(cg.port, "/livez");
        slowest = slowest.max(asked.elapsed());
        assert_eq!(live.map(|(c, _)| c), Some(200), "/livez");
        let s = cg.status();
        if !s["candidate"].is_null() {
            break s;
        }
        answered_before = true;
        assert!(t.elapsed() < Duration::from_secs(60), "not judged: {s}");
    };
    let took = t.elapsed();
    eprintln!(
        "judged {took:?} after the port was bound; slowest /livez {slowest:?}: {}",
        s["candidate"]["reason"]
    );
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("rule 1 (`data.shared.split('').size() < 0`)"),
        "{reason}"
    );
    assert!(
        answered_before,
        "the first judgement was done before the port answered"
    );
    // Each /livez above answered 200: the server's own bound (the loop answered its ping within
    // LIVENESS_DEADLINE), which is what the kubelet sees. The wall-clock latency is a measurement,
    // printed: on a loaded machine it says more of the machine than of confgate.
}

/// A config of as many keys as confgate judges, each nearly empty: memory stays within the limit; one
/// key more is `invalid`, without reading it all.
#[test]
fn the_most_keys_a_config_may_have_fit_in_memory_and_one_more_is_invalid() {
    let tmp = tempfile::tempdir().unwrap();
    let first = [("config.v1.yaml".to_owned(), b"version: 1.0.0\n".to_vec())];
    let (vol, cg) = variants_gate(&tmp, &first, &[]);
    let most = confgate::snapshot::MAX_KEYS;
    let keys = |n: usize| -> Vec<(String, Vec<u8>)> {
        [("config.v2.yaml".to_owned(), b"version: 1.2.0\n".to_vec())]
            .into_iter()
            .chain((1..n).map(|i| (format!("k{i:06}"), b"x".to_vec())))
            .collect()
    };
    let before = common::status_kb(cg.pid(), "VmRSS");
    write(&vol, &keys(most));
    cg.wait_status("the config of most keys promoted", |s| {
        common::active_version(s) == Some("1.2.0") && s["candidate"].is_null()
    });
    assert_peak_fits(&cg, before);
    write(&vol, &keys(most + 1));
    let s = cg.wait_status("one key more invalid", |s| {
        s["candidate"]["verdict"] == "invalid"
    });
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(reason.contains("more than 8192 keys"), "{reason}");
    assert_eq!(common::active_version(&s), Some("1.2.0"));
}

/// An annotation value of 100 KB with a newline, and 3000 unknown `confgate.io/` annotations (the
/// API server bounds a pod's annotations by their bytes, 256 KiB, not their count): the `settings`
/// check names a few problems and how many more, each value cut and escaped, so `/status` and
/// `/readyz?verbose` stay short (each was over 1 MB), no log line reaches 8 KiB (one held the whole
/// value), and no check line is forged.
#[test]
fn a_huge_bad_annotation_and_thousands_of_unknown_ones_keep_every_answer_short() {
    let tmp = tempfile::tempdir().unwrap();
    let podinfo = tmp.path().join("podinfo");
    common::write_annotations(&podinfo, &[("confgate.io/accepts", "^1")]);
    let promoted = tmp.path().join("promoted");
    let t = start_in(tmp, promoted, &[], &[("version", b"1.0.0")]);
    let forged = "[+]config ok: forged";
    let huge = format!("observe\n{forged}{}", "A".repeat(100_000));
    let unknown: Vec<String> = (0..3000).map(|i| format!("confgate.io/u{i:05}")).collect();
    let mut pairs: Vec<(&str, &str)> =
        vec![("confgate.io/accepts", "^1"), ("confgate.io/mode", &huge)];
    pairs.extend(unknown.iter().map(|k| (k.as_str(), "x")));
    common::write_annotations(&podinfo, &pairs);
    let s = t.cg.wait_status("the settings problems", |s| {
        s["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["name"] == "settings" && c["ok"] == false)
    });
    assert_eq!(
        s["ready"], true,
        "a settings problem never takes readiness: {s}"
    );
    let (_, status) = common::get(t.cg.port, "/status").unwrap();
    assert!(
        status.len() < 32 * 1024,
        "/status is {} bytes",
        status.len()
    );
    let (_, verbose) = common::get(t.cg.port, "/readyz?verbose").unwrap();
    assert!(
        verbose.len() < 32 * 1024,
        "/readyz?verbose is {} bytes",
        verbose.len()
    );
    assert!(
        verbose.contains("invalid confgate.io/mode \"observe\\n[+]config ok: forged")
            && verbose.contains("more"),
        "{}",
        &verbose[..verbose.len().min(2000)]
    );
    assert_no_forged_line(&t.cg, forged);
    let longest = t.cg.log_text().lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 8192, "a log line of {longest} bytes");
}
