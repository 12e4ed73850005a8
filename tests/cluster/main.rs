//! confgate against a real kube-apiserver and etcd on loopback: the shipped manifests and `inject`'s
//! output under server-side dry-run, the generated admission policies type-checked and enforced by the
//! API server, API mode (`run --source configmap:...`, Events, the pod condition, `status`) under
//! the least-privilege RBAC of `manifests/rbac`, and volume mode reporting to its pod under the Role
//! of `manifests/native-sidecar/rbac.yaml`.
//!
//! The servers come from `ETCD_BIN` and `KUBE_APISERVER_BIN`, which no package ships: every test is
//! `#[ignore = "needs …"]`, so `cargo test` lists them as ignored; run with `--ignored` (CI does where
//! the binaries are) each fails with the reason when one is missing, never passes by skipping. One API
//! server serves every test of this binary (`server::cluster`); each test works in namespaces of its own.
//! `frozen` needs no server but root (a loop mount held by `fsfreeze`); `.ci/run` runs it on its own.
#![cfg(all(feature = "api", feature = "policy"))]

#[path = "../common/mod.rs"]
mod common;

mod api_mode;
mod chart;
mod frozen;
mod inject_policy;
mod known_good;
mod manifests;
mod node;
mod own_pod;
mod policy;
mod policy_record;
mod restart;
mod rollout;
mod secret;
mod server;
mod sidecar;
mod volume_mode;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use server::Cluster;

impl Cluster {
    /// `kubectl` as the admin, with a discovery cache inside the cluster's dir.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig")
            .arg(&self.admin)
            .arg("--cache-dir")
            .arg(self.dir.join("kubectl-cache"));
        cmd
    }

    /// Runs `kubectl ARGS` as the admin with `stdin` as its input.
    pub fn kubectl_with(&self, args: &[&str], stdin: &str) -> Output {
        let mut cmd = self.kubectl();
        cmd.args(args);
        common::output_with_stdin(cmd, stdin)
    }

    /// Runs `kubectl ARGS` as the admin and returns its stdout; panics with its stderr on failure.
    pub fn kubectl_ok(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_with(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Creates the namespaces (server-side apply: no error when one exists already).
    pub fn namespaces(&self, names: &[&str]) {
        let items: Vec<serde_json::Value> = names
            .iter()
            .map(|n| serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
            .collect();
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        self.kubectl_ok(
            &[
                "apply",
                "--server-side",
                "--field-manager=confgate-tests",
                "-f",
                "-",
            ],
            &list.to_string(),
        );
    }

    /// [`confgate`] through `setpriv --pdeathsig KILL`: a long-running confgate dies with the test
    /// thread that started it, even when the test process is killed before the guard's drop runs.
    pub fn confgate_tied(&self) -> Command {
        let mut cmd = Command::new(&self.setpriv);
        cmd.args(["--pdeathsig", "KILL", "--", common::BIN]);
        clean(cmd)
    }

    /// A kubeconfig at `path` authenticating with `token`.
    pub fn kubeconfig(&self, path: &Path, token: &str, namespace: &str) {
        server::write_kubeconfig(path, &self.server, &self.ca, token, namespace);
    }

    /// A kubeconfig at `path` whose `tokenFile` (beside it, `.token`) holds `text` as it is.
    pub fn kubeconfig_with_token_file(&self, path: &Path, text: &str, namespace: &str) {
        let file = path.with_extension("token");
        std::fs::write(&file, text).unwrap();
        let credential = format!("tokenFile: {}", file.display());
        server::write_kubeconfig_for(path, &self.server, &self.ca, &credential, namespace);
    }
}

/// The confgate binary with no gate setting or kubeconfig inherited from the environment.
pub fn confgate() -> Command {
    clean(Command::new(common::BIN))
}

fn clean(mut cmd: Command) -> Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CONFGATE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null());
    cmd
}
