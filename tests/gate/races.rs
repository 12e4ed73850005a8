//! Reads racing the kubelet: a snapshot is always a whole version, even while the kubelet swaps `..data`
//! and removes the old timestamped dir under the read.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use confgate::snapshot::{self, Observed};

/// A ConfigMap with `items` mapped to nested paths: keys in sub-directories, listed after top-level ones.
fn payload(version: u32) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![("version".to_owned(), format!("{version}.0.0").into_bytes())];
    for dir in ["conf/a", "conf/b", "z/deep/er"] {
        for i in 0..12 {
            files.push((format!("{dir}/k{i}"), format!("{version}").into_bytes()));
        }
    }
    files
}

#[test]
fn a_read_overlapping_a_slow_removal_is_never_partial() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let vol = common::Volume::new(&dir);
    let write = |v: u32, slow: bool| {
        let owned = payload(v);
        let files: Vec<(&str, &[u8])> = owned
            .iter()
            .map(|(k, b)| (k.as_str(), b.as_slice()))
            .collect();
        if slow {
            vol.write_removing_slowly(&files, Duration::from_micros(200))
                .unwrap();
        } else {
            vol.write(&files).unwrap();
        }
    };
    write(0, false);
    let keys: BTreeSet<String> = payload(0).into_iter().map(|(k, _)| k).collect();

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (dir, done, keys) = (dir.clone(), done.clone(), keys.clone());
        std::thread::spawn(move || {
            let (mut reads, mut whole, mut partial) = (0u32, 0u32, Vec::new());
            while !done.load(Ordering::Relaxed) {
                reads += 1;
                match snapshot::read(&dir) {
                    Observed::Config(s) => {
                        let got: BTreeSet<String> = s.files().keys().cloned().collect();
                        let versions: BTreeSet<&[u8]> = s
                            .files()
                            .iter()
                            .filter(|(k, _)| *k != "version")
                            .map(|(_, v)| v.as_slice())
                            .collect();
                        if got == keys && versions.len() == 1 {
                            whole += 1;
                        } else {
                            partial.push(keys.difference(&got).count());
                        }
                    }
                    // Bounded retries may run out under this churn; that is reported, never promoted.
                    Observed::Broken(why) => {
                        assert!(why.to_string().contains("changing too fast"), "{why}")
                    }
                    Observed::Missing(why) => {
                        panic!("a volume always holding keys read as missing: {why}")
                    }
                }
            }
            (reads, whole, partial)
        })
    };
    let end = Instant::now() + Duration::from_secs(3);
    let mut v = 1;
    while Instant::now() < end {
        write(v, true);
        v += 1;
    }
    done.store(true, Ordering::Relaxed);
    let (reads, whole, partial) = reader.join().unwrap();
    eprintln!(
        "{v} swaps, {reads} reads, {whole} whole, {} partial",
        partial.len()
    );
    assert!(
        partial.is_empty(),
        "{} of {reads} reads were partial (keys missing: {partial:?})",
        partial.len()
    );
    assert!(whole > 20, "only {whole} whole reads of {reads}");
}
