//! The Kubernetes API-version scheme through the real binary: a KubeSchedulerConfiguration gated on
//! a kubelet volume by the group/versions the scheduler serves, and what `check`, `policy`, `/status`,
//! `/metrics` and the probe say of it.

use crate::common;

use common::*;
use std::process::Command;

const SERVED: &str = "kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3";
const FROM: &str = "yaml:config.yaml#/apiVersion";

fn scheduler_config(api_version: &str) -> Vec<u8> {
    format!(
        "apiVersion: {api_version}\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: /etc/kubernetes/scheduler.conf\nleaderElection:\n  leaderElect: true\n"
    )
    .into_bytes()
}

/// A served apiVersion is promoted; a removed one (v1beta2, gone since 1.28), one not yet served
/// (v2) and another group's are held with the version, what is served and the fix; the probe,
/// `/status` and `/metrics` show the API version as read.
#[test]
fn a_scheduler_config_is_gated_by_the_api_versions_the_component_serves() {
    let d = Dirs::new();
    let v1 = "kubescheduler.config.k8s.io/v1";
    kubelet_write(&d.watch(), &[("config.yaml", &scheduler_config(v1))]);
    let g = Gate::start(&d, &["--accepts", SERVED, "--version-from", FROM]);
    let s = g.wait_active(v1);
    assert_eq!(s["accepts"], SERVED);
    assert!(
        read_promoted(&d.promoted()).unwrap()["config.yaml"]
            .starts_with(&format!("apiVersion: {v1}\n"))
    );

    let cases = [
        (
            "kubescheduler.config.k8s.io/v1beta2",
            "too-old",
            format!(
                "version kubescheduler.config.k8s.io/v1beta2 is older than {SERVED} serves; update the ConfigMap to an API version in {SERVED}, or add kubescheduler.config.k8s.io/v1beta2 to confgate.io/accepts if the component still serves it"
            ),
        ),
        (
            "kubescheduler.config.k8s.io/v2",
            "too-new",
            format!(
                "version kubescheduler.config.k8s.io/v2 is newer than {SERVED} serves; roll the ConfigMap back"
            ),
        ),
        (
            "kubelet.config.k8s.io/v1beta1",
            "out-of-range",
            format!(
                "version kubelet.config.k8s.io/v1beta1 is of group kubelet.config.k8s.io, which {SERVED} does not name; set the ConfigMap"
            ),
        ),
    ];
    for (version, verdict, reason) in &cases {
        kubelet_write(&d.watch(), &[("config.yaml", &scheduler_config(version))]);
        let s = g.wait_candidate(Some(version), verdict);
        let r = s["candidate"]["reason"].as_str().unwrap();
        assert!(r.starts_with(reason.as_str()), "{verdict}: {r}");
        assert_eq!(s["active"]["version"], v1, "the served config stays");
        assert_eq!(s["ready"], true);
        assert!(
            read_promoted(&d.promoted()).unwrap()["config.yaml"]
                .starts_with(&format!("apiVersion: {v1}\n"))
        );
        let probe = confgate_alone()
            .args(["probe", "ready", "--addr", &format!("127.0.0.1:{}", g.port)])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&probe.stdout);
        assert_eq!(probe.status.code(), Some(0), "{said}");
        assert!(
            said.contains(&format!("holding {v1}; {version} is {verdict}")),
            "{said}"
        );
    }
    let metrics = get(g.port, "/metrics").unwrap().1;
    assert!(
        metrics.contains(&format!("confgate_active_config_info{{version=\"{v1}\",")),
        "{metrics}"
    );
    for v in ["too-new", "too-old", "out-of-range"] {
        assert!(
            metrics.contains(&format!("confgate_candidates_total{{verdict=\"{v}\"}} 1")),
            "{v}\n{metrics}"
        );
    }

    // v1beta3 is served too: promoted.
    let beta3 = "kubescheduler.config.k8s.io/v1beta3";
    kubelet_write(&d.watch(), &[("config.yaml", &scheduler_config(beta3))]);
    g.wait_active(beta3);
}

/// A value that mixes the schemes is refused: a flag exits 64 naming both parts; an annotation keeps
/// the list in force and says why.
#[test]
fn mixing_semver_and_api_versions_is_refused() {
    let out = Command::new(BIN)
        .args([
            "run",
            "--accepts",
            "kubescheduler.config.k8s.io/v1, >=2.4.0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "mixes Kubernetes API versions (kubescheduler.config.k8s.io/v1) with \">=2.4.0\""
        ),
        "{err}"
    );

    let d = Dirs::new();
    let v1 = "kubescheduler.config.k8s.io/v1";
    kubelet_write(&d.watch(), &[("config.yaml", &scheduler_config(v1))]);
    write_annotations(&d.podinfo(), &[("confgate.io/accepts", SERVED)]);
    let g = Gate::start(&d, &["--version-from", FROM]);
    g.wait_active(v1);
    write_annotations(
        &d.podinfo(),
        &[("confgate.io/accepts", "kubescheduler.config.k8s.io/v1 ^2")],
    );
    let s = g.wait_status("bad annotation reported", |s| s["checks"][0]["ok"] == false);
    assert_eq!(s["ready"], true, "the config in force is good: {s}");
    assert!(
        s["checks"][0]["message"]
            .as_str()
            .unwrap()
            .contains("mixes Kubernetes API versions"),
        "{s}"
    );
    assert_eq!(s["accepts"], SERVED, "the list in force stays");
}

/// `check` judges a directory under the API-version scheme, and `policy` refuses it, saying why.
#[test]
fn check_judges_and_policy_refuses_api_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cfg");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        scheduler_config("kubescheduler.config.k8s.io/v1beta3"),
    )
    .unwrap();
    let run = |accepts: &str| {
        confgate_alone()
            .args(["check", "--accepts", accepts, "--version-from", FROM])
            .arg(&dir)
            .output()
            .unwrap()
    };
    let ok = run(SERVED);
    let out = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{out}");
    let words = |out: &str| out.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    assert_eq!(
        words(&out),
        "accepted kubescheduler.config.k8s.io/v1beta3",
        "{out}"
    );
    let held = run("kubescheduler.config.k8s.io/v1");
    let out = String::from_utf8_lossy(&held.stdout);
    assert_eq!(held.status.code(), Some(1), "{out}");
    assert_eq!(
        words(&out),
        "too-old kubescheduler.config.k8s.io/v1beta3",
        "{out}"
    );

    if cfg!(feature = "policy") {
        let out = Command::new(BIN)
            .args([
                "policy",
                "--namespace",
                "kube-system",
                "--name",
                "scheduler",
            ])
            .args(["--accepts", SERVED, "--version-from", "file:apiVersion"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("lists Kubernetes API versions, which cannot be checked at admission"),
            "{err}"
        );
    }
}
