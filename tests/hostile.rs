//! Hostile and broken inputs against the real binary on real files: for each, confgate keeps running,
//! keeps the accepted config promoted, and says why in `/status`.

mod common;

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
        Ok(o) => {
            println!(
                "skipped: cannot mount a small tmpfs ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            println!("skipped: cannot run mount ({e})");
            return;
        }
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
