//! The core, end to end through the real binary: every verdict, every policy, live settings, bad input.

use crate::common;

use common::*;
use std::process::Command;

/// Accepted configs are promoted; every kind of rejection keeps the last accepted one and says why.
#[test]
fn every_verdict_through_a_kubelet_volume() {
    let d = Dirs::new();
    write_version(&d.watch(), "2.4.1");
    let g = Gate::start(
        &d,
        &["--accepts", ">=2.4.0, <3.0.0", "--require", "version"],
    );
    let s = g.wait_active("2.4.1");
    assert_eq!(s["ready"], true);
    assert_eq!(s["stale"], false);
    assert_eq!(s["accepts"], ">=2.4.0, <3.0.0");
    let sha = s["active"]["sha256"].as_str().unwrap().to_owned();
    assert!(sha.starts_with("sha256:") && sha.len() == 71);
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "2.4.1");

    type Files<'a> = &'a [(&'a str, &'a [u8])];
    let cases: [(Files, Option<&str>, &str, &str); 6] = [
        (
            &[("version", b"3.0.0")],
            Some("3.0.0"),
            "too-new",
            "newer than",
        ),
        (
            &[("version", b"2.3.0")],
            Some("2.3.0"),
            "too-old",
            "older than",
        ),
        (
            &[("version", b"2.5.0-rc.1")],
            Some("2.5.0-rc.1"),
            "out-of-range",
            "pre-release",
        ),
        (
            &[("version", b"two")],
            Some("two"),
            "invalid",
            "not a semantic version",
        ),
        (
            &[("other", b"2.4.2")],
            None,
            "invalid",
            "required key version is absent",
        ),
        (&[], None, "missing", "holds no keys"),
    ];
    for (files, version, verdict, reason) in cases {
        kubelet_write(&d.watch(), files);
        let s = g.wait_candidate(version, verdict);
        let r = s["candidate"]["reason"].as_str().unwrap();
        assert!(r.contains(reason), "{verdict}: {r}");
        assert_eq!(s["ready"], true, "hold keeps it ready");
        assert_eq!(s["stale"], true);
        assert_eq!(s["active"]["version"], "2.4.1");
        assert_eq!(s["active"]["sha256"], sha.as_str());
        assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "2.4.1");
    }
    write_version(&d.watch(), "2.9.0");
    g.wait_active("2.9.0");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "2.9.0");
    let metrics = get(g.port, "/metrics").unwrap().1;
    for v in ["too-new", "too-old", "out-of-range", "missing"] {
        assert!(
            metrics.contains(&format!("confgate_candidates_total{{verdict=\"{v}\"}} 1")),
            "{v}\n{metrics}"
        );
    }
    assert!(metrics.contains("confgate_candidates_total{verdict=\"invalid\"} 2"));
    assert!(metrics.contains("confgate_promotions_total 2"));
}

/// `unready` drops readiness while a newer config is rejected; the promoted dir still keeps the old one.
#[test]
fn unready_policy() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &["--accepts", "^1", "--on-incompatible", "unready"]);
    g.wait_active("1.0.0");
    write_version(&d.watch(), "2.0.0");
    let s = g.wait_candidate(Some("2.0.0"), "too-new");
    assert_eq!(s["ready"], false);
    let (code, body) = get(g.port, "/readyz").unwrap();
    assert_eq!(code, 503);
    assert!(
        body.contains("2.0.0 is too-new") && body.contains("holding 1.0.0"),
        "{body}"
    );
    assert_eq!(
        get(g.port, "/startupz").unwrap().0,
        200,
        "start-up is a latch"
    );
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "1.0.0");
    write_version(&d.watch(), "1.1.0");
    let s = g.wait_active("1.1.0");
    assert_eq!(s["ready"], true);
}

/// Observe mode promotes everything and never blocks readiness, but still reports verdicts.
#[test]
fn observe_mode() {
    let d = Dirs::new();
    write_version(&d.watch(), "9.0.0");
    let g = Gate::start(&d, &["--accepts", "^1", "--mode", "observe"]);
    let s = g.wait_status("observe promotes", |s| s["active"]["version"] == "9.0.0");
    assert_eq!(s["ready"], true);
    assert_eq!(s["active"]["verdict"], "too-new");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "9.0.0");
    assert_eq!(get(g.port, "/readyz").unwrap().0, 200);
}

/// Before any accepted config, not ready and start-up not passed, whatever the policy.
#[test]
fn nothing_accepted_yet_blocks_startup() {
    let d = Dirs::new();
    write_version(&d.watch(), "3.0.0");
    let g = Gate::start(&d, &["--accepts", "^2"]);
    g.wait_candidate(Some("3.0.0"), "too-new");
    let (code, body) = get(g.port, "/startupz").unwrap();
    assert_eq!(code, 503);
    assert!(body.contains("no accepted config yet"), "{body}");
    assert_eq!(get(g.port, "/readyz").unwrap().0, 503);
    assert!(read_promoted(&d.promoted()).is_none(), "nothing promoted");
    write_version(&d.watch(), "2.0.0");
    g.wait_active("2.0.0");
    assert_eq!(get(g.port, "/startupz").unwrap().0, 200);
}

/// No range configured at all: not ready, and the reason says how to configure one.
#[test]
fn no_range_configured() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &[]);
    let s = g.wait_candidate(Some("1.0.0"), "out-of-range");
    assert_eq!(s["ready"], false);
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .contains("no accepted range configured")
    );
}

/// A widened `confgate.io/accepts` annotation promotes a held snapshot without a restart; a bad one is
/// reported and keeps the range in force, and readiness stays with the config.
#[test]
fn live_annotations() {
    let d = Dirs::new();
    write_version(&d.watch(), "2.0.0");
    write_annotations(
        &d.podinfo(),
        &[
            ("confgate.io/accepts", "^2"),
            ("kubernetes.io/config.seen", "2026-11-29T22:31:14Z"),
        ],
    );
    let g = Gate::start(&d, &["--accepts", "^1"]);
    g.wait_active("2.0.0");
    write_version(&d.watch(), "3.1.0");
    g.wait_candidate(Some("3.1.0"), "too-new");
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", ">=2, <4")]);
    let s = g.wait_active("3.1.0");
    assert_eq!(s["accepts"], ">=2, <4");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "3.1.0");

    write_annotations(&d.podinfo(), &[("confgate.io/accepts", "three or so")]);
    let s = g.wait_status("bad annotation reported", |s| s["checks"][0]["ok"] == false);
    assert_eq!(s["ready"], true, "the config in force is good: {s}");
    let reason = s["checks"][0]["message"].as_str().unwrap();
    assert!(
        reason.contains("confgate.io/accepts \"three or so\"") && reason.contains("allowed:"),
        "{reason}"
    );
    assert_eq!(s["accepts"], ">=2, <4", "the range in force stays");
    write_version(&d.watch(), "4.0.0");
    g.wait_candidate(Some("4.0.0"), "too-new");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "3.1.0");

    // Annotation removed: the flag applies again.
    write_annotations(&d.podinfo(), &[]);
    let s = g.wait_status("flag range back", |s| s["accepts"] == "^1");
    // 3.1.0 fails ^1: no longer active, not ready, as a restart with these settings would say.
    assert_eq!(s["ready"], false, "{s}");
    assert!(s["active"].is_null(), "{s}");
}

/// A bad flag or environment value exits 64 naming the setting, the value and what is allowed.
#[test]
fn bad_flag_and_env_exit_64() {
    let out = Command::new(BIN)
        .args(["run", "--accepts", ">=banana"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--accepts (CONFGATE_ACCEPTS) \">=banana\"") && err.contains("allowed:"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args(["run"])
        .env("CONFGATE_MODE", "strict")
        .env("CONFGATE_RELOAD", "carrier-pigeon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"strict\"") && err.contains("enforce or observe"),
        "{err}"
    );
    assert!(
        err.contains("\"carrier-pigeon\"") && err.contains("signal:NAME:PROCESS"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args(["run", "--listen", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = Command::new(BIN).args(["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

/// SIGTERM stops the sidecar cleanly with exit 0.
#[test]
fn sigterm_exits_zero() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &["--accepts", "^1"]);
    g.wait_active("1.0.0");
    assert_eq!(g.stop().code(), Some(0));
}

/// A plain directory (no `..data`) is read after a quiet period; edits in place are seen.
#[test]
fn plain_directory() {
    let d = Dirs::new();
    std::fs::create_dir_all(d.watch()).unwrap();
    std::fs::write(d.watch().join("version"), "1.0.0").unwrap();
    let g = Gate::start(&d, &["--accepts", "^1"]);
    g.wait_active("1.0.0");
    std::fs::write(d.watch().join("version"), "1.2.0").unwrap();
    g.wait_active("1.2.0");
    std::fs::write(d.watch().join("version"), "2.0.0").unwrap();
    g.wait_candidate(Some("2.0.0"), "too-new");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "1.2.0");
}

/// How many promotions `/metrics` counts.
fn promotions(g: &Gate) -> u64 {
    let (_, m) = get(g.port, "/metrics").expect("/metrics");
    m.lines()
        .find_map(|l| l.strip_prefix("confgate_promotions_total "))
        .expect("confgate_promotions_total")
        .trim()
        .parse()
        .unwrap()
}

/// A file rewritten in place, as `cat new > file`, `cp` or a slow copy do: truncated, a first part
/// written (with a valid version and a document that parses), then a pause longer than the quiet
/// period and than the most a burst delays a read (the writer is slow, or descheduled), then the rest
/// and the close. The half-written file is never promoted: the file is read once it is closed, and
/// only the whole of it is promoted.
#[test]
fn a_file_written_in_place_is_never_promoted_half_written() {
    use std::io::Write;
    let d = Dirs::new();
    std::fs::create_dir_all(d.watch()).unwrap();
    let path = d.watch().join("config.yaml");
    let body = |version: &str| {
        let mut s = format!("schemaVersion: {version}\n");
        for i in 0..60 {
            s.push_str(&format!("setting{i:02}: value-{i:02}\n"));
        }
        s
    };
    std::fs::write(&path, body("2.0.0")).unwrap();
    let g = Gate::start(
        &d,
        &[
            "--accepts",
            "^2",
            "--version-from",
            "yaml:config.yaml#/schemaVersion",
        ],
    );
    g.wait_active("2.0.0");
    let before = promotions(&g);
    let full = body("2.1.0");
    // A whole line: the first part alone is a config confgate would accept.
    let cut = full[..full.len() / 5].rfind('\n').unwrap() + 1;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.write_all(&full.as_bytes()[..cut]).unwrap();
    // The writer's pause: longer than the quiet period (100 ms) and the longest a burst delays a read
    // (1 s), which is what let the first part be promoted.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    f.write_all(&full.as_bytes()[cut..]).unwrap();
    drop(f);
    wait_for("the whole file promoted", DEADLINE, || {
        read_promoted(&d.promoted())
            .filter(|p| p.get("config.yaml") == Some(&full))
            .map(|_| ())
    });
    assert_eq!(
        promotions(&g),
        before + 1,
        "only the whole file was promoted, never its first part: {}",
        g.log_text()
    );
}

/// An editor's leftovers in a plain dir (vim's `.NAME.swp` and `4913`, a `NAME~` backup, Emacs'
/// `.#NAME`) are not keys: writing them promotes nothing, and a promotion never carries them.
#[test]
fn editor_leftovers_in_a_plain_dir_are_not_keys() {
    let d = Dirs::new();
    std::fs::create_dir_all(d.watch()).unwrap();
    std::fs::write(d.watch().join("version"), "1.0.0").unwrap();
    let g = Gate::start(&d, &["--accepts", "^1"]);
    g.wait_active("1.0.0");
    let before = promotions(&g);
    for name in [".version.swp", "version~", ".#version", "4913"] {
        std::fs::write(d.watch().join(name), "1.0.0-leftover").unwrap();
    }
    std::fs::write(d.watch().join("version"), "1.1.0").unwrap();
    g.wait_active("1.1.0");
    let promoted = read_promoted(&d.promoted()).unwrap();
    assert_eq!(
        promoted.keys().collect::<Vec<_>>(),
        ["version"],
        "{promoted:?}"
    );
    assert_eq!(promotions(&g), before + 1, "the leftovers promoted nothing");
}

/// The watched dir vanishing is `missing`; when it returns, it is watched again.
#[test]
fn watched_dir_disappears_and_returns() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &["--accepts", "^1"]);
    g.wait_active("1.0.0");
    std::fs::remove_dir_all(d.watch()).unwrap();
    // Mid-removal the dir may be seen empty first ("holds no keys"); then it is gone.
    g.wait_status("missing: the dir does not exist", |s| {
        s["candidate"]["verdict"] == "missing"
            && s["candidate"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("does not exist"))
    });
    let s = g.wait_status("the watch reported lost", |s| !s["watch_error"].is_null());
    assert!(
        s["watch_error"].as_str().unwrap().contains("is absent"),
        "{s}"
    );
    write_version(&d.watch(), "1.1.0");
    g.wait_active("1.1.0");
    write_version(&d.watch(), "1.2.0");
    let s = g.wait_active("1.2.0");
    assert!(s["watch_error"].is_null(), "{s}");
}

/// The watched dir removed and made again while the loop is not looking: on ext4 the new dir can
/// have the old one's inode number, yet the old watch went with the old dir, so an edit in the new dir
/// must still be seen (well before the safety re-read).
#[test]
fn watched_dir_made_again_with_its_old_inode_number_is_watched_again() {
    use std::os::unix::fs::MetadataExt;
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let g = Gate::start(&d, &["--accepts", "^1", "--resync-interval", "1h"]);
    g.wait_active("1.0.0");
    let ino = std::fs::metadata(d.watch()).unwrap().ino();
    let pid = nix::unistd::Pid::from_raw(g.pid() as i32);
    // Stopped, the loop cannot look between the removal and the new dir.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    std::fs::remove_dir_all(d.watch()).unwrap();
    std::fs::create_dir(d.watch()).unwrap();
    // The file system chooses the number: ask again until it is the old one, where it reuses numbers.
    for _ in 0..1000 {
        if std::fs::metadata(d.watch()).unwrap().ino() == ino {
            break;
        }
        std::fs::remove_dir(d.watch()).unwrap();
        std::fs::create_dir(d.watch()).unwrap();
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    g.wait_status("missing: the new dir is empty", |s| {
        s["candidate"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("holds no files (a plain directory"))
    });
    std::fs::write(d.watch().join("version"), "1.1.0").unwrap();
    g.wait_active("1.1.0");
}

/// git-sync's layout: the watched path is a link to a checkout, and a new checkout arrives as a link
/// moved over it, the old one still there. With the periodic re-read an hour away, only a watch on the
/// link's name can see it.
#[test]
fn a_watched_link_moved_over_to_a_new_checkout_is_followed() {
    let d = Dirs::new();
    let (a, b) = (d.root.path().join("rev-a"), d.root.path().join("rev-b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    std::fs::write(a.join("version"), "1.0.0").unwrap();
    std::fs::write(b.join("version"), "1.1.0").unwrap();
    std::os::unix::fs::symlink("rev-a", d.watch()).unwrap();
    let g = Gate::start(&d, &["--accepts", "^1", "--resync-interval", "1h"]);
    g.wait_active("1.0.0");
    let tmp = d.root.path().join("incoming.tmp");
    std::os::unix::fs::symlink("rev-b", &tmp).unwrap();
    std::fs::rename(&tmp, d.watch()).unwrap();
    g.wait_active("1.1.0");
    // The new checkout is watched: an edit there is followed too.
    std::fs::write(b.join("version"), "1.2.0").unwrap();
    g.wait_active("1.2.0");
}

/// git-sync's layout with the config a dir inside the checkout (`--watch /git/current/config`): the
/// link is along the path, not its last component, and the old checkout is kept. The move is seen at
/// once, not at the periodic re-read an hour away, and the new checkout's config dir is watched.
#[test]
fn a_link_along_the_watched_path_moved_over_to_a_new_checkout_is_followed() {
    let d = Dirs::new();
    let git = d.root.path().join("git");
    let (a, b) = (git.join("rev-a/config"), git.join("rev-b/config"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("version"), "1.0.0").unwrap();
    std::fs::write(b.join("version"), "1.1.0").unwrap();
    std::os::unix::fs::symlink("rev-a", git.join("current")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--accepts", "^1", "--resync-interval", "1h"])
        .arg("--watch")
        .arg(git.join("current/config"))
        .arg("--promote-to")
        .arg(d.promoted())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"));
    let g = Gate::from_command(cmd, &d.log());
    g.wait_active("1.0.0");
    let tmp = git.join("current.tmp");
    std::os::unix::fs::symlink("rev-b", &tmp).unwrap();
    std::fs::rename(&tmp, git.join("current")).unwrap();
    g.wait_active("1.1.0");
    std::fs::write(b.join("version"), "1.2.0").unwrap();
    g.wait_active("1.2.0");
}

/// Gate-only mode (no `--promote-to`) gates readiness and copies nothing.
#[test]
fn gate_only_mode() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "--accepts", "^1"])
        .arg("--watch")
        .arg(d.watch())
        .arg("--annotations")
        .arg(d.podinfo().join("annotations"));
    let g = Gate::from_command(cmd, &d.log());
    let port = g.port;
    let s = wait_for("gate-only accepts", DEADLINE, || {
        status(port).filter(|s| s["ready"] == true)
    });
    assert_eq!(s["active"]["version"], "1.0.0");
    write_version(&d.watch(), "2.0.0");
    wait_for("stale", DEADLINE, || {
        status(port).filter(|s| s["stale"] == true)
    });
    assert!(!d.promoted().exists());
    assert!(g.stop().success());
}

/// Relative paths work as well as absolute ones (file events are matched against the watched path).
#[test]
fn relative_paths() {
    let d = Dirs::new();
    write_version(&d.watch(), "1.0.0");
    let mut cmd = Command::new(BIN);
    cmd.current_dir(d.root.path())
        .args([
            "run",
            "--accepts",
            "^1",
            "--watch",
            "incoming",
            "--promote-to",
            "active",
        ])
        .args(["--annotations", "podinfo/annotations"]);
    let g = Gate::from_command(cmd, &d.log());
    let port = g.port;
    wait_for("1.0.0 active", DEADLINE, || {
        status(port).filter(|s| s["active"]["version"] == "1.0.0")
    });
    write_version(&d.watch(), "1.1.0");
    wait_for("1.1.0 active", DEADLINE, || {
        status(port).filter(|s| s["active"]["version"] == "1.1.0")
    });
    assert_eq!(read_promoted(&d.promoted()).unwrap()["version"], "1.1.0");
    assert!(g.stop().success());
}

/// A promoted key has the mode its volume gave it whatever confgate's umask: under a umask of 077 a
/// 0755 script stays executable and a 0644 key stays readable by a component running as another user.
#[test]
fn promoted_modes_do_not_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dirs::new();
    Volume::new(d.watch())
        .write_with(&[("version", b"1.0.0"), ("run.sh", b"#!/bin/sh\n")], |ts| {
            std::fs::set_permissions(ts.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        })
        .unwrap();
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "umask 077 && exec \"$0\" \"$@\"",
        BIN,
        "run",
        "--watch",
    ])
    .arg(d.watch())
    .arg("--promote-to")
    .arg(d.promoted())
    .arg("--annotations")
    .arg(d.podinfo().join("annotations"))
    .args(["--accepts", "^1"]);
    let g = Gate::from_command(cmd, &d.log());
    g.wait_active("1.0.0");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let promoted = d.promoted();
    assert_eq!(mode(&promoted.join("run.sh")), 0o755);
    assert_eq!(mode(&promoted.join("version")), 0o644);
    assert_eq!(mode(&promoted.join("..data")), 0o755, "the timestamped dir");
}

/// The promoted dir changed behind confgate's back (the component shares it, or anyone who may write
/// it): the safety re-read compares it with what was promoted, says so (log, `/readyz?verbose`,
/// `/metrics`) and promotes the config in force again.
#[test]
fn a_promoted_dir_changed_behind_confgates_back_is_reported_and_repaired() {
    let d = Dirs::new();
    write_version(&d.watch(), "2.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--resync-interval", "1s"]);
    g.wait_active("2.0.0");
    let data = std::fs::canonicalize(d.promoted().join("..data")).unwrap();
    std::fs::write(data.join("version"), "9.9.9").unwrap();
    let s = g.wait_status("the change reported", |s| {
        s["checks"].as_array().is_some_and(|c| {
            c.iter().any(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("changed behind confgate's back"))
            })
        })
    });
    assert_eq!(
        s["ready"], true,
        "reported and repaired, not a failure: {s}"
    );
    wait_for("the promoted dir repaired", DEADLINE, || {
        read_promoted(&d.promoted())
            .filter(|p| p.get("version").map(String::as_str) == Some("2.0.0"))
            .map(|_| ())
    });
    let (_, m) = get(g.port, "/metrics").expect("/metrics");
    assert!(
        m.lines()
            .any(|l| l.starts_with("confgate_promoted_dir_repairs_total ") && !l.ends_with(" 0")),
        "{m}"
    );
    assert!(
        g.log_text()
            .contains("the promoted dir was changed behind confgate's back"),
        "{}",
        g.log_text()
    );
}

/// A reason's fix names what to change in the kind of source watched: a plain directory (a hostPath,
/// as a static pod's config is) is a file on the node, never a ConfigMap, whether the config is too new,
/// invalid or gone; a Secret volume's names the Secret.
#[test]
fn a_reason_names_the_kind_of_source_it_asks_to_change() {
    let d = Dirs::new();
    let dir = d.watch();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("version"), "3.0.0").unwrap();
    let g = Gate::start(&d, &["--accepts", "^2"]);
    let plain = |s: &serde_json::Value| {
        let r = s["candidate"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!r.contains("ConfigMap"), "{r}");
        r
    };
    let r = plain(&g.wait_candidate(Some("3.0.0"), "too-new"));
    assert!(
        r.contains("roll the config file on the node (in the watched directory) back"),
        "{r}"
    );
    std::fs::write(dir.join("version"), "two").unwrap();
    let r = plain(&g.wait_candidate(Some("two"), "invalid"));
    assert!(r.contains("in the config file on the node"), "{r}");
    std::fs::remove_file(dir.join("version")).unwrap();
    let r = plain(&g.wait_candidate(None, "missing"));
    assert!(r.contains("holds no files (a plain directory"), "{r}");
    drop(g);

    let d = Dirs::new();
    write_version(&d.watch(), "3.0.0");
    let g = Gate::start(&d, &["--accepts", "^2", "--content", "secret"]);
    let secret = |s: &serde_json::Value| {
        let r = s["candidate"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!r.contains("ConfigMap") && r.contains("the Secret"), "{r}");
    };
    secret(&g.wait_candidate(Some("3.0.0"), "too-new"));
    kubelet_write(&d.watch(), &[("other", b"x")]);
    secret(&g.wait_candidate(None, "invalid"));
    kubelet_write(&d.watch(), &[]);
    secret(&g.wait_candidate(None, "missing"));
}
