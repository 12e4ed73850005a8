//! A mounted Secret volume (`--content secret`): promoted and held as a ConfigMap would be, while no
//! surface (`/status`, `/metrics`, the probe endpoints, `confgate probe`, logs) shows a value or the
//! plain `sha256:` of the content, which a short value would let anyone brute-force.

use crate::common;

use common::*;
use confgate::snapshot::ContentHash;
use std::process::Command;

/// Low-entropy values, the kind a plain hash gives away.
const OLD: &str = "pin-4821";
const NEW: &str = "pin-9307";

/// Every surface a reader of the pod (not of the Secret) meets, as one text.
fn surfaces(g: &Gate) -> String {
    let mut all = String::new();
    for path in [
        "/status",
        "/metrics",
        "/readyz?verbose",
        "/livez?verbose",
        "/startupz?verbose",
    ] {
        let (_, body) = get(g.port, path).unwrap();
        all.push_str(&body);
    }
    let addr = format!("127.0.0.1:{}", g.port);
    for kind in ["ready", "startup", "live"] {
        let out = Command::new(BIN)
            .args(["probe", kind, "--addr", &addr])
            .output()
            .unwrap();
        all.push_str(&String::from_utf8_lossy(&out.stdout));
        all.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    all.push_str(&g.log_text());
    all
}

fn plain(files: &[(&str, &[u8])]) -> String {
    ContentHash::of(files.iter().copied()).to_string()
}

/// Neither a value nor the plain hash (whole, or the 12 digits log lines use) is in `text`.
fn assert_hidden(text: &str, contents: &[&[(&str, &[u8])]]) {
    for value in [OLD, NEW] {
        assert!(!text.contains(value), "the value {value} is shown:\n{text}");
    }
    for files in contents {
        let full = plain(files);
        let hex = full.strip_prefix("sha256:").unwrap();
        assert!(
            !text.contains(hex),
            "the plain hash {full} is shown:\n{text}"
        );
        assert!(
            !text.contains(&hex[..12]),
            "the plain hash's prefix {} is shown:\n{text}",
            &hex[..12]
        );
    }
}

#[test]
fn a_secret_volume_is_gated_and_its_hash_is_sealed() {
    let d = Dirs::new();
    let sink = Sink::start(false);
    let old: &[(&str, &[u8])] = &[("version", b"2.4.1"), ("token", OLD.as_bytes())];
    let new: &[(&str, &[u8])] = &[("version", b"3.0.0"), ("token", NEW.as_bytes())];
    kubelet_write(&d.watch(), old);
    let g = Gate::start(
        &d,
        &[
            "--content",
            "secret",
            "--accepts",
            "^2",
            "--reload",
            &sink.url(),
        ],
    );
    let s = g.wait_active("2.4.1");
    let promoted = read_promoted(&d.promoted()).unwrap();
    assert_eq!(promoted["token"], OLD, "the Secret is promoted as it is");
    let sealed = s["active"]["sha256"].as_str().unwrap().to_owned();
    assert!(sealed.starts_with("hmac-sha256:"), "{s}");

    // A too-new one is held, a reload of something else than the promoted config is never asked.
    kubelet_write(&d.watch(), new);
    let s = g.wait_candidate(Some("3.0.0"), "too-new");
    assert_eq!(read_promoted(&d.promoted()).unwrap()["token"], OLD);
    assert_eq!(
        s["active"]["sha256"],
        sealed.as_str(),
        "stable in the process"
    );
    let candidate = s["candidate"]["sha256"].as_str().unwrap();
    assert!(
        candidate.starts_with("hmac-sha256:") && candidate != sealed,
        "{s}"
    );

    assert_hidden(&surfaces(&g), &[old, new]);
}

/// Without `--content secret` the hash is the documented plain one: sealing is for Secrets only, and
/// the check above would see a plain hash if sealing were off.
#[test]
fn config_content_keeps_the_plain_hash() {
    let d = Dirs::new();
    let files: &[(&str, &[u8])] = &[("version", b"2.4.1"), ("token", OLD.as_bytes())];
    kubelet_write(&d.watch(), files);
    let g = Gate::start(&d, &["--accepts", "^2"]);
    let s = g.wait_active("2.4.1");
    assert_eq!(s["active"]["sha256"], plain(files).as_str());
}

/// A version key that holds a credential (a mis-pointed `--version-from`) is `invalid`, and in a Secret
/// its value is never shown, though it is written with a version's characters (outside a Secret such a
/// value is echoed, to be fixed).
#[test]
fn a_secret_s_version_key_that_is_no_version_is_never_echoed() {
    let d = Dirs::new();
    let pin = "hunter2-PIN-4711";
    kubelet_write(&d.watch(), &[("pin", b"2.4.1")]);
    let g = Gate::start(
        &d,
        &[
            "--content",
            "secret",
            "--accepts",
            "^2",
            "--version-from",
            "file:pin",
        ],
    );
    g.wait_active("2.4.1");
    kubelet_write(&d.watch(), &[("pin", pin.as_bytes())]);
    let s = g.wait_candidate(None, "invalid");
    let reason = s["candidate"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("not shown: the content is a Secret's"),
        "{reason}"
    );
    let all = surfaces(&g);
    assert!(!all.contains(pin), "the value is shown:\n{all}");
    assert!(
        !all.contains("hunter2"),
        "part of the value is shown:\n{all}"
    );
}
