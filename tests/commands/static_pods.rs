//! Static control-plane pods over a kubeadm cluster's life: the `--patches` recipe applied to the
//! manifest kubeadm writes, with the strategic merge kubeadm applies (`kubectl patch --local --type
//! strategic` runs the same apimachinery strategicpatch code over the Pod's schema), before and after an
//! upgrade; the hold a restart keeps; and the `check` commands the recipe documents, run as written.

use crate::common;

use clap::Parser as _;
use common::*;
use confgate::annotations::Annotations;
use confgate::cli::{Cli, Command as Cmd};
use confgate::settings::{OnIncompatible, Raw, Settings};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// kubeadm's manifest (a fixture shaped as kubeadm 1.36 writes it) with `image` set, patched by the
/// recipe's file for that target as kubeadm patches it.
fn patched(target: &str, fixture: &Value) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = tmp.path().join(format!("{target}.json"));
    std::fs::write(&manifest, serde_json::to_string(fixture).unwrap()).unwrap();
    let patch = repo().join(format!(
        "manifests/static-pod/patches/{target}+strategic.yaml"
    ));
    let out = Command::new(tool("kubectl"))
        .args([
            "patch",
            "--local",
            "--type",
            "strategic",
            "-o",
            "json",
            "-f",
        ])
        .arg(&manifest)
        .arg("--patch-file")
        .arg(&patch)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl patch {}: {}",
        patch.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fixture(target: &str) -> Value {
    let text =
        std::fs::read_to_string(repo().join(format!("tests/fixtures/kubeadm/{target}.yaml")))
            .unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

/// The sidecar in a patched static pod: its arguments as the binary parses them, the pod's
/// annotations as its settings, and the hostPath its promoted dir is.
struct Sidecar {
    watch: PathBuf,
    promote_to: PathBuf,
    settings: Settings,
    promoted_host_path: String,
}

fn sidecar(pod: &Value) -> Sidecar {
    let c = named(&pod["spec"]["initContainers"], "confgate");
    assert_eq!(c["restartPolicy"], "Always", "a native sidecar: {c}");
    let mut argv = vec!["confgate".to_owned()];
    argv.extend(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let Cmd::Run(run) = cli.command else {
        panic!("{argv:?} is not run")
    };
    let ann: Annotations = pod["metadata"]["annotations"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let base = Settings::from_raw(&Raw::default()).unwrap();
    let r = Settings::with_annotations(&base, &base, &ann);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let promote_to = run.paths.promote_to.clone().expect("--promote-to");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| Path::new(m["mountPath"].as_str().unwrap()) == promote_to)
        .unwrap_or_else(|| panic!("nothing mounted at {}", promote_to.display()));
    let volume = named(&pod["spec"]["volumes"], mount["name"].as_str().unwrap());
    Sidecar {
        watch: run.paths.watch.clone(),
        promote_to,
        settings: r.settings,
        promoted_host_path: volume["hostPath"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("the promoted dir is not a hostPath: {volume}"))
            .to_owned(),
    }
}

/// The recipe's patch adds the sidecar to the manifest kubeadm writes, keeping kubeadm's command,
/// probes, mounts and seccomp profile; it adds it again to the manifest an upgrade writes (a new
/// image), and a second application changes nothing, as kubeadm re-applies patches at every upgrade.
#[test]
fn the_kubeadm_patch_adds_the_sidecar_and_keeps_it_through_an_upgrade() {
    let kubeadm = fixture("kube-scheduler");
    let pod = patched("kube-scheduler", &kubeadm);
    let spec = &pod["spec"];
    let s = sidecar(&pod);
    assert_eq!(
        s.watch,
        Path::new("/etc/kubernetes/confgate/kube-scheduler")
    );
    assert_eq!(s.promoted_host_path, "/var/lib/confgate/kube-scheduler");
    assert_eq!(
        s.settings.accepts.as_ref().map(|a| a.text()),
        Some("kubescheduler.config.k8s.io/v1")
    );
    assert_eq!(
        s.settings.version_from.to_string(),
        "yaml:config.yaml#/apiVersion"
    );
    assert_eq!(s.settings.on_incompatible, OnIncompatible::Unready);
    assert_eq!(spec["shareProcessNamespace"], true);
    assert_eq!(spec["securityContext"]["runAsUser"], 65532);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "kubeadm's seccomp profile stays"
    );

    let sched = named(&spec["containers"], "kube-scheduler");
    let kubeadm_sched = named(&kubeadm["spec"]["containers"], "kube-scheduler");
    for kept in ["command", "livenessProbe", "startupProbe", "image"] {
        assert_eq!(sched[kept], kubeadm_sched[kept], "{kept}");
    }
    // The scheduler reads the promoted copy, read-only, where --config points.
    let config_flag = sched["command"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a.as_str().unwrap().strip_prefix("--config="))
        .expect("--config from ClusterConfiguration's extraArgs");
    assert_eq!(Path::new(config_flag).parent().unwrap(), s.promote_to);
    let mount = sched["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| Path::new(m["mountPath"].as_str().unwrap()) == s.promote_to)
        .expect("the promoted dir mounted in kube-scheduler");
    assert_eq!(mount["readOnly"], true);
    assert_eq!(
        named(&spec["volumes"], "kubeconfig")["hostPath"]["path"],
        "/etc/kubernetes/scheduler.conf"
    );
    assert!(
        sched["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "kubeconfig"),
        "kubeadm's kubeconfig mount stays: {sched}"
    );

    // kubeadm upgrade apply v1.37: a new manifest, the same patches.
    let mut upgraded = kubeadm.clone();
    upgraded["spec"]["containers"][0]["image"] = json!("registry.k8s.io/kube-scheduler:v1.37.0");
    let after = patched("kube-scheduler", &upgraded);
    assert_eq!(
        named(&after["spec"]["containers"], "kube-scheduler")["image"],
        "registry.k8s.io/kube-scheduler:v1.37.0"
    );
    let mut expected = pod.clone();
    expected["spec"]["containers"][0]["image"] = json!("registry.k8s.io/kube-scheduler:v1.37.0");
    assert_eq!(
        after, expected,
        "the upgraded manifest is patched as the first one was"
    );
    assert_eq!(
        patched("kube-scheduler", &pod),
        pod,
        "patching twice changes nothing"
    );
}

/// kube-apiserver's patch gates its admission configuration and audit policy together, each by its
/// own apiVersion: the files kubeadm's flags name are in the promoted dir, mounted read-only; the
/// apiserver keeps kubeadm's command, mounts and UID (root: the reload is none), the sidecar runs as
/// 65532; an upgrade's manifest is patched alike.
#[test]
fn the_kubeadm_patch_gates_the_apiserver_config_files_together() {
    let kubeadm = fixture("kube-apiserver");
    let pod = patched("kube-apiserver", &kubeadm);
    let s = sidecar(&pod);
    assert_eq!(
        s.watch,
        Path::new("/etc/kubernetes/confgate/kube-apiserver")
    );
    assert_eq!(s.promoted_host_path, "/var/lib/confgate/kube-apiserver");
    assert_eq!(s.settings.version_from.to_string(), "yaml:*#/apiVersion");
    assert_eq!(s.settings.on_incompatible, OnIncompatible::Unready);
    assert_eq!(s.settings.reload.to_string(), "none");
    let spec = &pod["spec"];
    let api = named(&spec["containers"], "kube-apiserver");
    let kubeadm_api = named(&kubeadm["spec"]["containers"], "kube-apiserver");
    for kept in [
        "command",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "image",
    ] {
        assert_eq!(api[kept], kubeadm_api[kept], "{kept}");
    }
    for flag in ["--admission-control-config-file=", "--audit-policy-file="] {
        let file = api["command"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|a| a.as_str().unwrap().strip_prefix(flag))
            .unwrap_or_else(|| panic!("{flag} from ClusterConfiguration's extraArgs"));
        assert_eq!(Path::new(file).parent().unwrap(), s.promote_to, "{flag}");
        let staged = repo()
            .join("manifests/static-pod/kube-apiserver")
            .join(Path::new(file).file_name().unwrap());
        assert!(staged.is_file(), "{} has an example", staged.display());
    }
    let mounts = api["volumeMounts"].as_array().unwrap();
    let promoted = mounts
        .iter()
        .find(|m| Path::new(m["mountPath"].as_str().unwrap()) == s.promote_to)
        .expect("the promoted dir mounted in kube-apiserver");
    assert_eq!(promoted["readOnly"], true);
    for m in kubeadm_api["volumeMounts"].as_array().unwrap() {
        assert!(mounts.contains(m), "kubeadm's mount {m} stays");
    }
    assert!(
        api.get("securityContext").is_none(),
        "kube-apiserver runs as kubeadm runs it"
    );
    let gate = named(&spec["initContainers"], "confgate");
    assert_eq!(gate["securityContext"]["runAsUser"], 65532);
    assert_eq!(gate["securityContext"]["runAsNonRoot"], true);
    let mut upgraded = kubeadm.clone();
    upgraded["spec"]["containers"][0]["image"] = json!("registry.k8s.io/kube-apiserver:v1.37.0");
    let mut expected = pod.clone();
    expected["spec"]["containers"][0]["image"] = json!("registry.k8s.io/kube-apiserver:v1.37.0");
    assert_eq!(patched("kube-apiserver", &upgraded), expected);
}

/// A restarted static pod (a reboot, a new pod after an upgrade) keeps its config: the promoted dir is
/// a hostPath, and confgate adopts the config it promoted before while a staged config it does not
/// serve is held, so the component starts on the accepted one; with on-incompatible unready the hold
/// makes the pod unready, which `kubectl get pods` shows without credentials.
#[test]
fn a_restarted_static_pod_keeps_its_accepted_config_and_shows_the_hold() {
    let d = Dirs::new();
    // A plain staged dir, written as an admin writes it, as a hostPath.
    let staged = d.watch();
    std::fs::create_dir_all(&staged).unwrap();
    let config = |v: &str| format!("apiVersion: {v}\nkind: KubeSchedulerConfiguration\n");
    let write = |v: &str| {
        let tmp = staged.join(".config.yaml.new");
        std::fs::write(&tmp, config(v)).unwrap();
        std::fs::rename(&tmp, staged.join("config.yaml")).unwrap();
    };
    let args = [
        "--accepts",
        "kubescheduler.config.k8s.io/v1",
        "--version-from",
        "yaml:config.yaml#/apiVersion",
        "--on-incompatible",
        "unready",
    ];
    let v1 = "kubescheduler.config.k8s.io/v1";
    write(v1);
    let g = Gate::start(&d, &args);
    g.wait_active(v1);
    drop(g);

    // While the pod is down, the staged config is edited to a version the scheduler does not serve.
    write("kubescheduler.config.k8s.io/v1beta3");
    let g = Gate::start(&d, &args);
    let s = g.wait_candidate(Some("kubescheduler.config.k8s.io/v1beta3"), "too-old");
    assert_eq!(
        s["active"]["version"], v1,
        "the accepted config is adopted: {s}"
    );
    assert_eq!(s["ready"], false, "the hold makes the pod unready: {s}");
    assert!(
        read_promoted(&d.promoted()).unwrap()["config.yaml"]
            .starts_with(&format!("apiVersion: {v1}\n"))
    );
    let (startup, _) = get(g.port, "/startupz").unwrap();
    assert_eq!(
        startup, 200,
        "the component may start on the adopted config"
    );
    let (ready, why) = get(g.port, "/readyz").unwrap();
    assert_eq!(ready, 503, "{why}");
    assert!(
        why.contains("kubescheduler.config.k8s.io/v1beta3 is too-old"),
        "{why}"
    );
}

/// Every `confgate check` command the static-pod recipe documents (in its files and in the docs) runs
/// as written, from the repository's root, and passes.
#[test]
fn the_documented_static_pod_checks_run_as_written() {
    let mut commands = Vec::new();
    for doc in [
        "manifests/static-pod/kube-scheduler/config.yaml",
        "manifests/static-pod/kube-apiserver/admission.yaml",
        "docs/static-pods.md",
        "docs/control-plane.md",
        "README.md",
    ] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        for line in text.lines() {
            let line = line.trim_start_matches(['#', ' ', '$']);
            if line.starts_with("confgate check") && line.contains("manifests/static-pod") {
                commands.push((doc, line.to_owned()));
            }
        }
    }
    assert!(commands.len() >= 3, "{commands:?}");
    for (doc, line) in commands {
        let out = Command::new("sh")
            .arg("-c")
            .arg(line.replacen("confgate", BIN, 1))
            .current_dir(repo())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{doc}: {line}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("accepted "));
    }
}
