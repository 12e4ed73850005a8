//! The watches as the kubelet, git-sync and editors write: what wakes the loop, and what does not.

use super::*;

/// The next change, or a failure after 5 s (a lost watch would otherwise hang the test).
async fn next(s: &mut Source) -> Changes {
    tokio::time::timeout(Duration::from_secs(5), s.changed())
        .await
        .expect("no change within 5 s")
}

/// A new dir `v` watched alone, past the first full look. The temporary dir goes with the first
/// value.
async fn watching_v() -> (tempfile::TempDir, PathBuf, Source) {
    let root = tempfile::tempdir().unwrap();
    let v = root.path().join("v");
    std::fs::create_dir(&v).unwrap();
    let mut s = Source::new(&v, None).unwrap();
    assert_eq!(
        s.changed().await,
        Changes::ALL,
        "the first watch looks at everything"
    );
    (root, v, s)
}

/// A file written and not yet closed is open for writing until its close; an editor's leftover
/// is neither tracked nor a plain edit.
#[tokio::test]
async fn a_file_is_open_for_writing_until_its_close_and_leftovers_are_no_edits() {
    use std::io::Write;
    let (_root, v, mut s) = watching_v().await;
    let mut f = std::fs::File::create(v.join("config.yaml")).unwrap();
    f.write_all(b"half").unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), async {
        while s.writing().is_none() {
            s.changed().await;
        }
    })
    .await;
    assert!(seen.is_ok(), "the write was not seen");
    assert_eq!(s.writing().unwrap().0, "config.yaml");
    drop(f);
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while s.writing().is_some() {
            s.changed().await;
        }
    })
    .await;
    assert!(closed.is_ok(), "the close was not seen");
    // A leftover's write is neither an edit nor a file being written; the file after it is.
    let mut swap = std::fs::File::create(v.join(".config.yaml.swp")).unwrap();
    swap.write_all(b"swap").unwrap();
    std::fs::write(v.join("after"), "x").unwrap();
    assert!(next(&mut s).await.contains(Changes::PLAIN));
    assert_eq!(
        s.writing(),
        None,
        "the swap file, still open, is not tracked"
    );
    drop(swap);
}

/// A file written in `v` is seen as a plain edit within 5 s.
async fn sees_a_write_in(s: &mut Source, v: &Path) {
    std::fs::write(v.join("app.yaml"), "x").unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), async {
        while !s.changed().await.contains(Changes::PLAIN) {}
    })
    .await;
    assert!(seen.is_ok(), "a write in the new dir was never seen");
}

/// How many events the kernel queues before it drops them.
fn queue_max() -> usize {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(16384)
}

/// The kubelet's swap, in the order it writes, on real dirs: only the `..data` rename is a change,
/// and the annotations file's own swap is one of the annotations.
#[tokio::test]
async fn the_kubelet_sequence_wakes_for_the_data_rename_only() {
    let root = tempfile::tempdir().unwrap();
    let (v, pi) = (root.path().join("v"), root.path().join("pi"));
    std::fs::create_dir_all(&v).unwrap();
    std::fs::create_dir_all(&pi).unwrap();
    let mut s = Source::new(&v, Some(&pi.join("annotations"))).unwrap();
    assert_eq!(
        s.changed().await,
        Changes::ALL,
        "the first watch looks at everything"
    );

    let ts = v.join("..2026_11_29_22_37_35.1");
    std::fs::create_dir(&ts).unwrap();
    std::fs::write(ts.join("app.yaml"), "x").unwrap();
    std::os::unix::fs::symlink("..2026_11_29_22_37_35.1", v.join("..data_tmp")).unwrap();
    std::fs::rename(v.join("..data_tmp"), v.join("..data")).unwrap();
    assert_eq!(s.changed().await, Changes::CONFIG);

    std::fs::write(v.join("app.yaml"), "plain").unwrap();
    assert_eq!(s.changed().await, Changes::PLAIN);
    assert!(s.since_plain_event() < Duration::from_secs(60));

    std::fs::write(pi.join("other"), "x").unwrap();
    std::fs::write(pi.join("annotations"), "a=\"b\"").unwrap();
    assert_eq!(s.changed().await, Changes::ANNOTATIONS);

    // Reading is not a change: a no-op sync opens every file.
    std::fs::read(v.join("app.yaml")).unwrap();
    std::fs::write(pi.join("annotations"), "a=\"c\"").unwrap();
    assert_eq!(s.changed().await, Changes::ANNOTATIONS);
    assert_eq!(s.take_errors(), 0);
}

#[tokio::test]
async fn a_removed_and_recreated_dir_is_watched_again() {
    let (_root, v, mut s) = watching_v().await;
    std::fs::remove_dir(&v).unwrap();
    assert!(s.changed().await.contains(Changes::CONFIG));
    assert!(!s.ensure_watches(), "a missing dir is not watched");
    std::fs::create_dir(&v).unwrap();
    assert!(s.ensure_watches());
    assert_eq!(s.changed().await, Changes::ALL);
    std::fs::write(v.join("app.yaml"), "x").unwrap();
    assert_eq!(s.changed().await, Changes::PLAIN);
}

/// ext4 hands a removed dir's inode number to the next dir made: a dir removed and made again
/// before the loop looks has the (dev, inode) it had, but its watch went with the old one
/// (`IN_IGNORED`), and must be added again.
#[tokio::test]
async fn a_dir_made_again_with_its_old_inode_number_is_watched_again() {
    let (_root, v, mut s) = watching_v().await;
    std::fs::remove_dir(&v).unwrap();
    std::fs::create_dir(&v).unwrap();
    // Stands in for the reuse where the file system does not reuse inode numbers.
    let reused = dev_ino(&v);
    if s.config.dev_ino.is_some() {
        s.config.dev_ino = reused;
    }
    assert!(s.changed().await.contains(Changes::CONFIG));
    assert!(s.ensure_watches());
    sees_a_write_in(&mut s, &v).await;
}

/// git-sync's layout: the config path is a link moved over by a new one, the old target kept. The
/// path's parent is watched for the link's name, and the new target is watched once looked at.
#[tokio::test]
async fn a_config_path_link_moved_over_is_seen_and_its_new_target_watched() {
    let root = tempfile::tempdir().unwrap();
    let (a, b, cur) = (
        root.path().join("a"),
        root.path().join("b"),
        root.path().join("cur"),
    );
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let pi = root.path().join("pi");
    std::fs::create_dir(&pi).unwrap();
    std::os::unix::fs::symlink("a", &cur).unwrap();
    let mut s = Source::new(&cur, Some(&pi.join("annotations"))).unwrap();
    assert_eq!(next(&mut s).await, Changes::ALL);
    sees_a_write_in(&mut s, &cur).await;

    std::os::unix::fs::symlink("b", root.path().join("cur.tmp")).unwrap();
    std::fs::rename(root.path().join("cur.tmp"), &cur).unwrap();
    assert!(next(&mut s).await.contains(Changes::CONFIG), "the retarget");
    assert!(s.ensure_watches());
    assert_eq!(next(&mut s).await, Changes::ALL, "the new target, watched");
    // The old target is no longer the config: an edit there, then the annotations, is the
    // annotations alone (one queue, read in order).
    std::fs::write(a.join("app.yaml"), "old").unwrap();
    std::fs::write(pi.join("annotations"), "a=\"b\"").unwrap();
    assert_eq!(next(&mut s).await, Changes::ANNOTATIONS);
    sees_a_write_in(&mut s, &b).await;
    assert_eq!(s.take_errors(), 0);

    // Other names in the parent are not the config.
    std::fs::write(root.path().join("other"), "x").unwrap();
    std::fs::write(b.join("app.yaml"), "y").unwrap();
    assert_eq!(next(&mut s).await, Changes::PLAIN);

    // A plain dir moved over the link: the parent is no longer watched.
    std::fs::remove_file(&cur).unwrap();
    assert!(next(&mut s).await.contains(Changes::CONFIG));
    std::fs::create_dir(&cur).unwrap();
    assert!(s.ensure_watches());
    assert!(s.links.is_empty());
    assert_eq!(next(&mut s).await, Changes::ALL);
    sees_a_write_in(&mut s, &cur).await;
}

/// git-sync's layout with the config a dir inside the checkout (`--watch /git/current/config`):
/// the link is a dir along the path, not its last component. Its dir is watched for its name, so a
/// link moved over it is a change at once, and the new checkout's config dir is watched.
#[tokio::test]
async fn a_link_along_the_config_path_moved_over_is_seen_and_its_new_target_watched() {
    let root = tempfile::tempdir().unwrap();
    let git = root.path().join("git");
    let (a, b) = (git.join("wt-a/config"), git.join("wt-b/config"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let pi = root.path().join("pi");
    std::fs::create_dir(&pi).unwrap();
    std::os::unix::fs::symlink("wt-a", git.join("current")).unwrap();
    let config = git.join("current/config");
    let mut s = Source::new(&config, Some(&pi.join("annotations"))).unwrap();
    assert_eq!(next(&mut s).await, Changes::ALL);
    sees_a_write_in(&mut s, &config).await;

    std::os::unix::fs::symlink("wt-b", git.join("current.tmp")).unwrap();
    std::fs::rename(git.join("current.tmp"), git.join("current")).unwrap();
    assert!(next(&mut s).await.contains(Changes::CONFIG), "the retarget");
    assert!(s.ensure_watches());
    assert_eq!(next(&mut s).await, Changes::ALL, "the new target, watched");
    std::fs::write(a.join("app.yaml"), "old").unwrap();
    std::fs::write(pi.join("annotations"), "a=\"b\"").unwrap();
    assert_eq!(next(&mut s).await, Changes::ANNOTATIONS);
    sees_a_write_in(&mut s, &b).await;
    // Other names beside the link are not the config.
    std::fs::create_dir(git.join("wt-c")).unwrap();
    std::fs::write(b.join("app.yaml"), "y").unwrap();
    assert_eq!(next(&mut s).await, Changes::PLAIN);
    assert_eq!(s.take_errors(), 0);
}

/// Links are resolved as the kernel resolves them: a link's target, relative to the link's dir or
/// absolute, may hold links itself, and `..` is taken after the link it follows.
#[test]
fn every_link_met_resolving_a_path_is_found() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("real/config")).unwrap();
    std::fs::create_dir_all(r.join("sub")).unwrap();
    std::os::unix::fs::symlink("../real", r.join("sub/hop")).unwrap();
    std::os::unix::fs::symlink("sub/hop", r.join("cur")).unwrap();
    std::os::unix::fs::symlink(r.join("cur/config"), r.join("last")).unwrap();
    let names = |v: Vec<(PathBuf, OsString)>| -> Vec<(PathBuf, String)> {
        v.into_iter()
            .map(|(d, n)| (d, n.to_string_lossy().into_owned()))
            .collect()
    };
    assert_eq!(
        names(links_along(&r.join("last"))),
        [
            (r.to_path_buf(), "last".to_owned()),
            (r.to_path_buf(), "cur".to_owned()),
            (r.join("sub"), "hop".to_owned()),
        ]
    );
    assert_eq!(names(links_along(&r.join("real/config"))), []);
    // Up from where a link led, not from the link.
    assert_eq!(
        names(links_along(&r.join("sub/hop/../sub"))),
        [(r.join("sub"), "hop".to_owned())]
    );
    // A loop ends after as many links as the kernel follows.
    std::os::unix::fs::symlink("loop", r.join("loop")).unwrap();
    assert_eq!(links_along(&r.join("loop/x")).len(), 1, "deduplicated");
}

/// A projected volume holding the config and the annotations file: one dir, one watch, and a swap
/// is a change of both, also once the dir was made again.
#[tokio::test]
async fn the_annotations_file_in_the_config_dir_is_one_watch_for_both() {
    let root = tempfile::tempdir().unwrap();
    let v = root.path().join("v");
    std::fs::create_dir(&v).unwrap();
    let mut s = Source::new(&v, Some(&v.join("annotations"))).unwrap();
    assert_eq!(next(&mut s).await, Changes::ALL);
    for round in 0..2 {
        std::os::unix::fs::symlink("..ts", v.join("..data_tmp")).unwrap();
        std::fs::rename(v.join("..data_tmp"), v.join("..data")).unwrap();
        assert_eq!(
            next(&mut s).await,
            Changes::CONFIG | Changes::ANNOTATIONS,
            "round {round}"
        );
        std::fs::remove_file(v.join("..data")).unwrap();
        assert_eq!(next(&mut s).await, Changes::CONFIG | Changes::ANNOTATIONS);
        std::fs::remove_dir(&v).unwrap();
        std::fs::create_dir(&v).unwrap();
        if s.config.dev_ino.is_some() {
            s.config.dev_ino = dev_ino(&v);
            s.annotations.as_mut().unwrap().0.dev_ino = dev_ino(&v);
        }
        assert!(next(&mut s).await.contains(Changes::CONFIG));
        assert!(s.ensure_watches());
        assert_eq!(next(&mut s).await, Changes::ALL);
    }
}

/// A full queue drops the `IN_IGNORED` of a removed dir too: after an overflow every watch is
/// checked again, so a dir made again with the old inode number is not left unwatched.
#[tokio::test]
async fn after_an_overflow_a_dir_made_again_is_watched_again() {
    use std::os::unix::fs::PermissionsExt;
    let (_root, v, mut s) = watching_v().await;
    let max = queue_max();
    // Two names taking turns, so the kernel cannot merge the events; the writer's own names.
    let (a, b) = (v.join("..a"), v.join("..b"));
    std::fs::write(&a, "").unwrap();
    std::fs::write(&b, "").unwrap();
    for i in 0..max {
        let mode = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(if i % 2 == 0 { &a } else { &b }, mode).unwrap();
    }
    std::fs::remove_file(&a).unwrap();
    std::fs::remove_file(&b).unwrap();
    std::fs::remove_dir(&v).unwrap();
    std::fs::create_dir(&v).unwrap();
    // Stands in for the reuse where the file system does not reuse inode numbers.
    if s.config.dev_ino.is_some() {
        s.config.dev_ino = dev_ino(&v);
    }
    assert_eq!(s.changed().await, Changes::ALL);
    assert!(s.take_errors() >= 1, "the queue did not overflow");
    assert!(s.ensure_watches());
    sees_a_write_in(&mut s, &v).await;
}

/// Events the kernel could not queue are a look at everything, and are counted as an error.
#[tokio::test]
async fn a_lost_queue_is_a_full_look_and_counted() {
    let (_root, v, mut s) = watching_v().await;
    let max = queue_max();
    // Each file is one IN_CREATE and one IN_CLOSE_WRITE: more than the queue holds. The names are
    // the writer's own (`..`), so only the overflow can make this a change.
    for i in 0..max / 2 + 1 {
        std::fs::File::create(v.join(format!("..f{i}"))).unwrap();
    }
    let seen = tokio::time::timeout(Duration::from_secs(30), s.changed()).await;
    assert_eq!(seen.ok(), Some(Changes::ALL));
    assert!(s.take_errors() >= 1);
}
