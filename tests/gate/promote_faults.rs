//! Promotion under a full disk: out of inodes, a promotion either goes live whole (every key link in
//! place) or fails with the previous config whole; leftovers are tidied once space returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use confgate::promote::Promoter;
use confgate::snapshot::{self, Observed, Snapshot};

/// Unmounts on drop, so a failing test leaves no mount behind.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Mounts a tmpfs with few inodes at `at`; fails the test, saying why, where it cannot.
fn small_tmpfs(at: &Path) -> Mount {
    std::fs::create_dir_all(at).unwrap();
    let out = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,nr_inodes=64", "tmpfs"])
        .arg(at)
        .output();
    match out {
        Ok(o) if o.status.success() => Mount(at.to_path_buf()),
        Ok(o) => panic!(
            "cannot mount a small tmpfs (run as root): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("cannot run mount: {e}"),
    }
}

fn snap(pairs: &[(&str, &str)]) -> Snapshot {
    Snapshot::new(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// Uses up every free inode of the file system holding `dir`, then frees `keep` of them.
fn leave_free_inodes(dir: &Path, keep: usize) -> Vec<PathBuf> {
    let mut fillers = Vec::new();
    loop {
        let p = dir.join(format!("filler{}", fillers.len()));
        match std::fs::write(&p, "") {
            Ok(()) => fillers.push(p),
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling inodes: {e}"),
        }
    }
    assert!(
        fillers.len() >= keep,
        "only {} inodes were free",
        fillers.len()
    );
    for p in fillers.drain(fillers.len() - keep..) {
        std::fs::remove_file(p).unwrap();
    }
    fillers
}

/// Every top-level key of `s` reads through its link in `dir` with the snapshot's bytes.
fn every_link_resolves(dir: &Path, s: &Snapshot) -> Result<(), String> {
    for (k, v) in s.files() {
        match std::fs::read(dir.join(k)) {
            Ok(got) if &got == v => {}
            Ok(_) => return Err(format!("{k} holds other bytes")),
            Err(e) => return Err(format!("{k}: {e}")),
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs root: mounts a tmpfs with few inodes"]
fn out_of_inodes_a_promotion_is_whole_or_not_made() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("promoted");
    let _mount = small_tmpfs(&dir);
    let (p, _) = Promoter::open(&dir).unwrap();
    let old = snap(&[("version", "1.0.0")]);
    p.promote(&old).unwrap();
    // Enough inodes for the new dir, its three files and `..data_tmp`, not for two new key links.
    let new = snap(&[("version", "2.0.0"), ("new1", "a"), ("new2", "b")]);
    let fillers = leave_free_inodes(&dir, 5);
    match p.promote(&new) {
        Ok(()) => {
            if let Err(why) = every_link_resolves(&dir, &new) {
                panic!("promotion reported OK with a key link missing: {why}");
            }
        }
        Err(e) => {
            assert!(e.to_string().contains("No space left"), "{e}");
            assert_eq!(snapshot::read(&dir), Observed::Config(old.clone()));
            every_link_resolves(&dir, &old).unwrap();
            // No link to a key only the new config has dangles beside the old one.
            assert!(std::fs::symlink_metadata(dir.join("new1")).is_err());
            assert!(std::fs::symlink_metadata(dir.join("new2")).is_err());
        }
    }
    for f in fillers {
        std::fs::remove_file(f).unwrap();
    }
    p.promote(&new).unwrap();
    every_link_resolves(&dir, &new).unwrap();
    assert!(!p.needs_tidy());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".."))
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "leftovers: {names:?}");
}
