//! One sidecar in API mode against the real API server, as the tests of ConfigMap and Secret sources
//! and of restarts set it up: the shipped RBAC in a namespace of its own, a Pending pod `web-0` of the
//! ServiceAccount `confgate` (no kubelet runs), a token from the TokenRequest API written to a
//! `tokenFile` on a line of its own (ending in a newline), and `confgate run
//! --source ...` as that ServiceAccount, reporting on that pod.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

use crate::common::{Gate, poll};
use crate::server::{Cluster, client, runtime};

pub const POD: &str = "web-0";
pub const ACCEPTS: &str = ">=2.4.0, <3.0.0";
pub const VERSION_FROM: &str = "yaml:config.yaml#/schemaVersion";
/// Generous: a loaded 2-core machine, a watch, a promotion, a patch.
pub const DEADLINE: Duration = Duration::from_secs(30);
pub const COMPATIBLE: &str = "confgate.io/config-compatible";
pub const CURRENT: &str = "confgate.io/config-current";

/// A shipped manifest moved to namespace `ns`, as the RBAC's header says to do.
pub fn manifest(path: &str, ns: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap()
        .replace("webhook-system", ns)
}

/// The config file of version `version`.
pub fn config(version: &str) -> String {
    format!("schemaVersion: {version}\ngreeting: hello\n")
}

pub fn condition(pod: &Pod, type_: &str) -> Option<PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// A condition's status and reason.
pub fn said(c: &PodCondition) -> (&str, &str) {
    (c.status.as_str(), c.reason.as_deref().unwrap_or(""))
}

/// A pod a sidecar reports on, and its Events, as the admin reads them.
pub struct PodView {
    pub name: &'static str,
    pub rt: tokio::runtime::Runtime,
    /// The admin's client.
    pub admin: kube::Client,
    pods: Api<Pod>,
    events: Api<Event>,
}

impl PodView {
    pub fn new(c: &Cluster, ns: &str, name: &'static str) -> PodView {
        let rt = runtime();
        let admin = rt.block_on(client(&c.admin));
        PodView {
            name,
            rt,
            pods: Api::namespaced(admin.clone(), ns),
            events: Api::namespaced(admin.clone(), ns),
            admin,
        }
    }

    pub fn pod(&self) -> Pod {
        self.rt.block_on(self.pods.get(self.name)).unwrap()
    }

    /// The Events about the pod.
    pub fn events(&self) -> Vec<Event> {
        let list = self
            .rt
            .block_on(self.events.list(&ListParams::default()))
            .unwrap();
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(self.name))
            .collect()
    }

    /// The pod as each write since `rv` left it, in order, up to and including the first for which
    /// `until` holds (a watch from `rv`, which replays the writes made since).
    pub fn writes_since(&self, rv: &str, until: impl Fn(&Pod) -> bool) -> Vec<Pod> {
        use futures::StreamExt;
        let params = kube::api::WatchParams::default()
            .fields(&format!("metadata.name={}", self.name))
            .timeout(DEADLINE.as_secs() as u32);
        self.rt.block_on(async {
            let stream = self.pods.watch(&params, rv).await.unwrap();
            let mut stream = std::pin::pin!(stream);
            let mut seen = Vec::new();
            while let Some(ev) = stream.next().await {
                if let kube::api::WatchEvent::Modified(p) = ev.unwrap() {
                    let done = until(&p);
                    seen.push(p);
                    if done {
                        return seen;
                    }
                }
            }
            panic!("no write of {} satisfied the wait: {seen:?}", self.name)
        })
    }

    pub fn wait_event(&self, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        poll(what, DEADLINE, || {
            self.events().into_iter().find(|e| pred(e))
        })
    }
}

pub struct Sidecar {
    pub ns: String,
    pub gate: Gate,
    pub tmp: tempfile::TempDir,
    pub view: PodView,
}

impl Sidecar {
    /// Applies `manifests` (shipped files, moved to `ns`) and `objects` (JSON) in namespace `ns`,
    /// creates the pod, and runs `confgate run --source SOURCE ARGS` as the ServiceAccount.
    pub fn start(
        c: &Cluster,
        ns: &str,
        manifests: &[&str],
        objects: &[serde_json::Value],
        source: &str,
        args: &[&str],
    ) -> Sidecar {
        c.namespaces(&[ns]);
        for path in manifests {
            c.kubectl_ok(&["apply", "-f", "-"], &manifest(path, ns));
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "namespace": ns,
                         "labels": {"app.kubernetes.io/name": "webhook"}},
            "spec": {"serviceAccountName": "confgate",
                     "readinessGates": [{"conditionType": COMPATIBLE}],
                     "containers": [{"name": "webhook", "image": "example/webhook:1"}]}});
        for o in objects.iter().chain([&pod]) {
            c.kubectl_ok(&["apply", "-f", "-"], &o.to_string());
        }
        let token = c.kubectl_ok(
            &["create", "token", "confgate", "-n", ns, "--duration=1h"],
            "",
        );
        let tmp = tempfile::tempdir().unwrap();
        let kubeconfig = tmp.path().join("sidecar.kubeconfig");
        // As `echo "$(kubectl create token ...)" > FILE` writes it.
        c.kubeconfig_with_token_file(&kubeconfig, &format!("{}\n", token.trim()), ns);

        let mut cmd = c.confgate_tied();
        cmd.args(["run", "--accepts", ACCEPTS, "--version-from", VERSION_FROM])
            .args(["--source", source])
            .args(args)
            .arg("--promote-to")
            .arg(tmp.path().join("promoted"))
            .arg("--watch")
            .arg(tmp.path().join("no-volume"))
            .arg("--annotations")
            .arg(tmp.path().join("no-annotations"))
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAME", POD)
            .env("POD_NAMESPACE", ns);
        let mut gate = Gate::from_command(cmd, &tmp.path().join("confgate.log"));
        gate.deadline = DEADLINE;

        Sidecar {
            ns: ns.to_owned(),
            gate,
            tmp,
            view: PodView::new(c, ns, POD),
        }
    }

    /// A promoted file.
    pub fn promoted(&self, key: &str) -> Option<String> {
        std::fs::read_to_string(self.tmp.path().join("promoted").join(key)).ok()
    }

    /// Waits for the condition `type_` to satisfy `pred`.
    pub fn wait_condition_of(
        &self,
        what: &str,
        type_: &str,
        pred: impl Fn(&PodCondition) -> bool,
    ) -> PodCondition {
        poll(what, DEADLINE, || {
            condition(&self.view.pod(), type_).filter(|c| pred(c))
        })
    }

    /// Waits for `config-compatible` to satisfy `pred`.
    pub fn wait_condition(&self, what: &str, pred: impl Fn(&PodCondition) -> bool) -> PodCondition {
        self.wait_condition_of(what, COMPATIBLE, pred)
    }

    /// Waits for `config-compatible` and `config-current` together to satisfy `pred`.
    pub fn wait_conditions(
        &self,
        what: &str,
        pred: impl Fn(&PodCondition, &PodCondition) -> bool,
    ) -> (PodCondition, PodCondition) {
        poll(what, DEADLINE, || {
            let pod = self.view.pod();
            let both = (condition(&pod, COMPATIBLE)?, condition(&pod, CURRENT)?);
            pred(&both.0, &both.1).then_some(both)
        })
    }
}
