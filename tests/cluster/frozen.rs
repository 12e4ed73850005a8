//! A promotion onto a stalled disk: the promoted dir on a loop-mounted ext4 that `fsfreeze` holds,
//! so every write into it blocks in the kernel until it is thawed. A large config's file work runs
//! on the blocking pool, so even `/livez` answers throughout; a small one's switch runs on the
//! loop's own thread, and the server, on a thread of its own, still answers every probe at once
//! (`/livez` failing until the loop is back). Needs root (a loop mount and a freeze), hence
//! `#[ignore]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{DEADLINE, Dirs, Gate, get, kubelet_write, read_promoted, status, wait_for};

/// An ext4 image loop-mounted at `at`, unmounted (and thawed first) on drop, whatever the test did.
struct Disk {
    at: PathBuf,
}

impl Disk {
    fn mount(image: &Path, at: &Path) -> Disk {
        run("truncate", &["-s", "32M", &image.display().to_string()]);
        run("mkfs.ext4", &["-q", "-F", &image.display().to_string()]);
        std::fs::create_dir_all(at).unwrap();
        run(
            "mount",
            &[
                "-o",
                "loop",
                &image.display().to_string(),
                &at.display().to_string(),
            ],
        );
        Disk {
            at: at.to_path_buf(),
        }
    }

    /// Freezes the file system until the guard is dropped (or [`Frozen::thaw`]ed).
    fn freeze(&self) -> Frozen<'_> {
        run("fsfreeze", &["--freeze", &self.at.display().to_string()]);
        Frozen(Some(self))
    }
}

/// A frozen [`Disk`], thawed on drop. Made after the gate, so dropped before it: a process with a
/// thread blocked on a frozen file system cannot be reaped until it is thawed.
struct Frozen<'a>(Option<&'a Disk>);

impl Frozen<'_> {
    fn thaw(mut self) {
        if let Some(d) = self.0.take() {
            run("fsfreeze", &["--unfreeze", &d.at.display().to_string()]);
        }
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = Command::new("fsfreeze")
                .args(["--unfreeze", &d.at.display().to_string()])
                .status();
        }
    }
}

/// Whether a thread of `pid` waits in the kernel for a frozen file system to thaw (a write's
/// `sb_start_write`, which sleeps in `percpu_rwsem_wait`).
fn waits_on_the_frozen_disk(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("wchan")).is_ok_and(|w| w.contains("rwsem")))
}

/// Whether the decision loop's thread (the process's main thread, which runs the loop's runtime)
/// waits in the kernel for a frozen file system to thaw.
fn loop_waits_on_the_frozen_disk(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/wchan"))
        .is_ok_and(|w| w.contains("rwsem"))
}

impl Drop for Disk {
    fn drop(&mut self) {
        // A frozen file system left behind would hang whatever touches it next.
        let at = self.at.display().to_string();
        // Thawed already in a passing run: the second unfreeze's complaint says nothing.
        let _ = Command::new("fsfreeze")
            .args(["--unfreeze", &at])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("umount").args(["-l", &at]).status();
    }
}

/// After the probes were answered: confgate's work still waits on the frozen disk (`waiting`, of
/// its pid), so they were answered during it, and nothing of 2.0.0 is in place; once thawed, 2.0.0
/// is promoted.
fn held_until_thawed(g: &Gate, promoted: &Path, frozen: Frozen<'_>, waiting: fn(u32) -> bool) {
    assert!(
        waiting(g.pid()),
        "the work on the disk still waits: the probes were answered during it"
    );
    assert_eq!(
        read_promoted(promoted).unwrap()["version"],
        "1.0.0",
        "nothing of 2.0.0 is in place while the disk is frozen"
    );
    frozen.thaw();
    g.wait_active("2.0.0");
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e} (this test needs root, util-linux and e2fsprogs)"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A config of 100 keys (more than the 64 a small config has, which is written on the loop): the
/// version and 99 others.
fn write_config(dir: &Path, version: &str) {
    let mut files = vec![("version".to_owned(), version.as_bytes().to_vec())];
    files.extend((0..99).map(|i| (format!("k{i:02}"), format!("{version}-{i}").into_bytes())));
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    kubelet_write(dir, &files);
}

/// confgate promoting into `promoted` (on a [`Disk`]).
fn gate(d: &Dirs, promoted: &Path) -> Gate {
    let watch = d.watch().display().to_string();
    let to = promoted.display().to_string();
    let annotations = d.podinfo().join("annotations").display().to_string();
    Gate::spawn(
        &[
            "--watch",
            &watch,
            "--promote-to",
            &to,
            "--annotations",
            &annotations,
            "--accepts",
            ">=1.0.0, <3.0.0",
        ],
        &d.log(),
    )
}

#[test]
#[ignore = "needs root: a loop-mounted ext4 held by fsfreeze (run by .ci/run where it is root)"]
fn livez_answers_while_a_promotion_waits_on_a_frozen_disk() {
    let d = Dirs::new();
    let disk = Disk::mount(&d.root.path().join("disk.img"), &d.root.path().join("disk"));
    let promoted = disk.at.join("active");
    write_config(&d.watch(), "1.0.0");
    let g = gate(&d, &promoted);
    g.wait_active("1.0.0");

    let frozen = disk.freeze();
    write_config(&d.watch(), "2.0.0");
    // The promotion of 2.0.0 (or what is left of 1.0.0's tidying before it) waits in the kernel.
    wait_for("confgate to wait on the frozen disk", DEADLINE, || {
        waits_on_the_frozen_disk(g.pid()).then_some(())
    });
    for _ in 0..20 {
        let (code, _) = get(g.port, "/livez").expect("/livez answers while the disk is frozen");
        assert_eq!(code, 200);
    }
    let (code, _) = get(g.port, "/readyz").expect("/readyz answers while the disk is frozen");
    assert_eq!(code, 200, "still serving 1.0.0");
    held_until_thawed(&g, &promoted, frozen, waits_on_the_frozen_disk);
    assert_eq!(read_promoted(&promoted).unwrap()["k42"], "2.0.0-42");
}

/// A small config after a small one is switched on the loop's own thread, which a frozen disk holds
/// in the kernel. The server has a thread of its own: `/readyz`, `/startupz`, `/status` and
/// `/metrics` answer with the status last published while the loop's thread waits, `/livez` fails
/// once the loop misses its deadline, and passes again once the disk is thawed.
#[test]
#[ignore = "needs root: a loop-mounted ext4 held by fsfreeze (run by .ci/run where it is root)"]
fn probes_answer_while_the_loops_thread_waits_on_a_frozen_disk() {
    let d = Dirs::new();
    let disk = Disk::mount(&d.root.path().join("disk.img"), &d.root.path().join("disk"));
    let promoted = disk.at.join("active");
    kubelet_write(&d.watch(), &[("version", b"1.0.0")]);
    let g = gate(&d, &promoted);
    g.wait_active("1.0.0");

    let frozen = disk.freeze();
    kubelet_write(&d.watch(), &[("version", b"2.0.0")]);
    wait_for(
        "the loop's thread to wait on the frozen disk",
        DEADLINE,
        || loop_waits_on_the_frozen_disk(g.pid()).then_some(()),
    );
    let (code, body) = get(g.port, "/readyz").expect("/readyz answers while the loop waits");
    assert_eq!((code, body.as_str()), (200, "ok\n"), "still serving 1.0.0");
    assert_eq!(get(g.port, "/startupz").expect("/startupz").0, 200);
    let s = status(g.port).expect("/status answers while the loop waits");
    assert_eq!(
        s["active"]["version"], "1.0.0",
        "the status last published: {s}"
    );
    let (code, metrics) = get(g.port, "/metrics").expect("/metrics answers while the loop waits");
    assert_eq!(code, 200);
    assert!(metrics.contains("confgate_ready 1"), "{metrics}");
    let (code, body) = get(g.port, "/livez").expect("/livez answers while the loop waits");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("the decision loop did not answer within 500 ms"),
        "{body}"
    );
    held_until_thawed(&g, &promoted, frozen, loop_waits_on_the_frozen_disk);
    wait_for("/livez to pass again", DEADLINE, || {
        get(g.port, "/livez").filter(|(c, _)| *c == 200)
    });
}
