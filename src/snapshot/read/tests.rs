//! Reads of kubelet volumes and plain dirs, racing swaps, links, FIFOs and oversized files.

use super::tree::read_limited;
use super::*;

#[test]
fn plain_directory_and_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cfg");
    assert!(matches!(read(&dir), Observed::Missing(m) if m.to_string().contains("does not exist")));
    std::fs::create_dir(&dir).unwrap();
    assert!(
        matches!(read(&dir), Observed::Missing(m) if m.to_string().contains("holds no files (a plain directory"))
    );
    std::fs::write(dir.join("version"), "1.0.0").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/x"), "y").unwrap();
    let Observed::Config(s) = read(&dir) else {
        panic!()
    };
    assert_eq!(s.files().keys().collect::<Vec<_>>(), ["sub/x", "version"]);
}

#[test]
fn symlink_outside_is_broken_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cfg");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(tmp.path().join("secret"), "x").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret"), dir.join("k")).unwrap();
    match read(&dir) {
        Observed::Broken(why) => {
            assert!(why.to_string().contains("key k is a symlink"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn dangling_symlink_is_broken_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("version"), "1.0.0").unwrap();
    std::os::unix::fs::symlink("nowhere", tmp.path().join("k")).unwrap();
    match read(tmp.path()) {
        Observed::Broken(why) => {
            assert_eq!(
                why.to_string(),
                "key k is a symlink to a missing target (nowhere)"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn dangling_data_link_is_broken_at_once_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ts) = (tmp.path(), "..2024_01_01_00_00_00.1");
    let why = |what: &str| format!("{}/..data points nowhere: {ts} {what}", dir.display());
    let said = |o: Observed| match o {
        Observed::Broken(why) => why.to_string(),
        other => panic!("{other:?}"),
    };
    std::fs::write(dir.join("version"), "1.0.0").unwrap();
    std::os::unix::fs::symlink(ts, dir.join("..data")).unwrap();
    assert_eq!(said(read(dir)), why("does not exist"));
    // A timestamped name that is itself a link to nothing.
    std::os::unix::fs::symlink("..gone", dir.join(ts)).unwrap();
    assert_eq!(said(read(dir)), why("is a link to nothing"));
}

#[test]
fn oversized_is_broken_without_loading_it_all() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a"), vec![b'x'; MAX_BYTES as usize]).unwrap();
    assert!(matches!(read(tmp.path()), Observed::Config(_)));
    std::fs::write(tmp.path().join("b"), "y").unwrap();
    match read(tmp.path()) {
        Observed::Broken(why) => {
            assert!(why.to_string().contains("size limit of 1048576"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_small_read_is_the_read_of_few_regular_files_of_few_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("a"), vec![b'x'; 1000]).unwrap();
    std::fs::write(dir.join("b"), vec![b'x'; 24]).unwrap();
    assert_eq!(read_small(dir, 2, 1024), Some(read(dir)));
    assert!(matches!(read(dir), Observed::Config(_)));
    assert_eq!(read_small(dir, 1, 1024), None, "too many keys");
    assert_eq!(read_small(dir, 2, 1023), None, "too many bytes");
    // Through `..data`, as the kubelet lays it out: the timestamped dir's files count.
    let vol = dir.join("vol");
    std::fs::create_dir_all(vol.join("..ts/sub")).unwrap();
    std::fs::write(vol.join("..ts/big"), vec![b'x'; 2048]).unwrap();
    std::fs::write(vol.join("..ts/sub/x"), "y").unwrap();
    std::os::unix::fs::symlink("..ts", vol.join(DATA_LINK)).unwrap();
    std::os::unix::fs::symlink("..data/big", vol.join("big")).unwrap();
    assert_eq!(
        read_small(&vol, 8, 1024),
        None,
        "the key behind ..data is large"
    );
    assert_eq!(read_small(&vol, 1, 4096), None, "a nested key counts");
    let Some(Observed::Config(s)) = read_small(&vol, 8, 4096) else {
        panic!("{:?}", read_small(&vol, 8, 4096))
    };
    assert_eq!(Observed::Config(s), read(&vol));
    // A FIFO is refused as the full read refuses it, and without blocking on it.
    nix::unistd::mkfifo(&dir.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert_eq!(read_small(dir, 8, 1 << 20), Some(read(dir)));
    assert!(matches!(
        read(dir),
        Observed::Broken(Broken::NotRegular { .. })
    ));
}

/// Entries that are no keys (a nested dir, a link to one, a name the read skips) cost a look
/// each too: a small read stops at the first entry past its bound of keys, so a dir of many
/// empty dirs is not listed whole on the loop.
#[test]
fn a_small_read_stops_at_the_first_entry_past_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("version"), "1.0.0").unwrap();
    for i in 0..6 {
        std::fs::create_dir(dir.join(format!("empty{i}"))).unwrap();
    }
    std::os::unix::fs::symlink("empty0", dir.join("link")).unwrap();
    std::fs::write(dir.join("..skipped"), "x").unwrap();
    let Observed::Config(s) = read(dir) else {
        panic!("{:?}", read(dir))
    };
    assert_eq!(s.files().len(), 1);
    assert_eq!(read_small(dir, 8, 1024), None, "9 entries");
    assert_eq!(read_small(dir, 9, 1024), Some(read(dir)));
}

#[test]
fn fifo_is_refused_not_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&tmp.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    match read(tmp.path()) {
        Observed::Broken(why) => {
            assert!(why.to_string().contains("not a regular file"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

/// The stat's size is only a capacity: a key that grew or shrank since is read whole, and the
/// budget, not the size, bounds the read.
#[test]
fn a_key_that_changed_size_since_its_stat_is_read_whole_within_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("k");
    std::fs::write(&k, "0123456789").unwrap();
    let read =
        |stated, budget, small| read_limited(&k, stated, budget, small, false).map(|(b, _)| b);
    for stated in [None, Some(0), Some(3), Some(10), Some(4096)] {
        assert_eq!(read(stated, MAX_BYTES, None).unwrap(), b"0123456789");
    }
    assert_eq!(
        read(Some(10), 4, None).unwrap(),
        b"01234",
        "budget + 1 bytes"
    );
    assert_eq!(read(Some(3), 0, None).unwrap(), b"0");
    // Past a small bound by the open file's own stat: nothing is read.
    assert_eq!(read(Some(3), MAX_BYTES, Some(10)).unwrap(), b"0123456789");
    assert!(matches!(
        read(Some(3), MAX_BYTES, Some(9)),
        Err(Problem::Large)
    ));
}

/// A published key (in the dir `..data` named) is read as its own stat says, within the same
/// budget and small bound as any key, and a FIFO swapped in is never read.
#[test]
fn a_published_key_is_read_to_its_stated_size_within_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("k");
    std::fs::write(&k, "0123456789").unwrap();
    let read =
        |stated, budget, small| read_limited(&k, stated, budget, small, true).map(|(b, _)| b);
    for stated in [None, Some(0), Some(4096)] {
        assert_eq!(read(stated, MAX_BYTES, None).unwrap(), b"0123456789");
    }
    assert_eq!(read(None, 4, None).unwrap(), b"01234", "budget + 1 bytes");
    assert_eq!(read(None, MAX_BYTES, Some(10)).unwrap(), b"0123456789");
    assert!(matches!(
        read(None, MAX_BYTES, Some(9)),
        Err(Problem::Large)
    ));
    std::fs::write(&k, "").unwrap();
    assert_eq!(read(None, MAX_BYTES, None).unwrap(), b"");
    std::fs::remove_file(&k).unwrap();
    nix::unistd::mkfifo(&k, nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert!(matches!(read(None, MAX_BYTES, None), Err(Problem::Gone)));
}

/// A key swapped for a FIFO, a socket or a link after its type was checked: the open sees what
/// is there now, and the read starts again (so the next look names it), never an empty key, an
/// unreadable one nor a read out of the volume.
#[test]
fn a_key_swapped_after_its_stat_is_read_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (fifo, socket, link, outside) = (
        tmp.path().join("pipe"),
        tmp.path().join("socket"),
        tmp.path().join("link"),
        tmp.path().join("outside"),
    );
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    for path in [&fifo, &socket, &link] {
        match read_limited(path, Some(5), MAX_BYTES, None, false) {
            Err(Problem::Gone) => {}
            Err(e) => panic!("{path:?}: {e:?}"),
            Ok((bytes, _)) => panic!("{path:?} read as {} bytes", bytes.len()),
        }
    }
    assert_eq!(
        read_limited(&outside, Some(0), MAX_BYTES, None, false)
            .unwrap()
            .0,
        b"secret"
    );
}

/// A device or a socket bind-mounted over a key (a mount nested in the pod's volume): the
/// directory entry says regular file, and every open finds the device or is refused by the
/// socket. That is a key that is not a regular file, as its `stat` says, not a volume changing
/// too fast nor an unreadable key. Mounting needs root: `.ci/run` runs it where it is root.
#[test]
#[ignore = "needs root: bind-mounts /dev/null and a socket over a key"]
fn a_device_or_socket_mounted_over_a_key_is_not_a_regular_file() {
    /// Unmounts on drop, lazily, so a failed assertion leaves no mount behind.
    struct Mount<'a>(&'a Path);
    impl Drop for Mount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.0)
                .status();
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let (dir, key) = (tmp.path().join("cfg"), tmp.path().join("cfg/key"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("version"), "1.0.0").unwrap();
    std::fs::write(&key, "").unwrap();
    let socket = tmp.path().join("socket");
    std::os::unix::net::UnixListener::bind(&socket).unwrap();
    for over in [Path::new("/dev/null"), &socket] {
        match std::process::Command::new("mount")
            .arg("--bind")
            .arg(over)
            .arg(&key)
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!(
                "cannot bind-mount over a file (run as root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => panic!("cannot run mount: {e}"),
        }
        let _mount = Mount(&key);
        let not_regular = Observed::Broken(Broken::NotRegular { key: "key".into() });
        assert_eq!(read(&dir), not_regular, "{over:?}");
        assert_eq!(read_small(&dir, 8, 1024), Some(not_regular), "{over:?}");
    }
}

#[test]
fn data_naming_a_file_directly_or_through_a_link_is_broken() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cfg");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("..f"), "1.0.0").unwrap();
    std::os::unix::fs::symlink("..f", dir.join("..data")).unwrap();
    for (hop, want) in [("direct", "..f"), ("through a link", "..l")] {
        if hop != "direct" {
            std::os::unix::fs::symlink("..f", dir.join("..l")).unwrap();
            std::fs::remove_file(dir.join("..data")).unwrap();
            std::os::unix::fs::symlink("..l", dir.join("..data")).unwrap();
        }
        match read(&dir) {
            Observed::Broken(why) => assert!(
                why.to_string()
                    .contains(&format!("points to {want}, which is not a directory")),
                "{hop}: {why}"
            ),
            other => panic!("{hop}: {other:?}"),
        }
    }
}

#[test]
fn data_escaping_in_two_hops_is_broken() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("version"), "1.0.0").unwrap();
    let dir = tmp.path().join("cfg");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("..x")).unwrap();
    std::os::unix::fs::symlink("..x", dir.join("..data")).unwrap();
    match read(&dir) {
        Observed::Broken(why) => {
            assert!(
                why.to_string().contains("outside the watched directory"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    // One hop that stays inside is how a kubelet volume looks.
    std::fs::remove_file(dir.join("..x")).unwrap();
    std::fs::create_dir(dir.join("..x")).unwrap();
    std::fs::write(dir.join("..x/version"), "1.0.0").unwrap();
    assert!(matches!(read(&dir), Observed::Config(_)));
}

#[test]
fn modes_other_than_the_default_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    for (k, m) in [("run.sh", 0o755), ("secret", 0o400), ("plain", 0o644)] {
        std::fs::write(tmp.path().join(k), "x").unwrap();
        std::fs::set_permissions(tmp.path().join(k), std::fs::Permissions::from_mode(m)).unwrap();
    }
    let Observed::Config(s) = read(tmp.path()) else {
        panic!()
    };
    assert_eq!(s.mode("run.sh"), 0o755);
    assert_eq!(s.mode("secret"), 0o400);
    assert_eq!(s.mode("plain"), DEFAULT_MODE);
    assert_eq!(s.modes().len(), 2, "{:?}", s.modes());
    // Modes are not content: the hash is the same as for the bytes alone.
    assert_eq!(s.hash(), Snapshot::new(s.files().clone()).hash());
}
