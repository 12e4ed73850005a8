//! Workloads in a manifest stream whose pods carry `confgate.io/` annotations, and the ConfigMaps their
//! confgate reads: what `confgate check` judges with each workload's own settings. Pure.
//!
//! Which ConfigMap a pod's confgate reads:
//! - a pod with a confgate container (an init or regular container named `confgate` or `confgate-…`,
//!   as the shipped manifests and `confgate inject` name it): the ConfigMap volumes (and the ConfigMap
//!   sources of projected volumes) mounted into those containers, or, in API mode, the ConfigMap named by
//!   `--source configmap:NS/NAME` (argument, `CONFGATE_SOURCE` or the `confgate.io/source` annotation);
//! - a pod without one (not injected yet): its only ConfigMap volume, the one `confgate inject` would
//!   gate; with several, none is judged and a warning says why.
//!
//! A projected volume with a `serviceAccountToken` source holds API credentials, not a config: it is
//! never read as one (its ConfigMap is `kube-root-ca.crt`).
//!
//! A volume's ConfigMap is in the pod's namespace, so only a ConfigMap of that namespace (both absent,
//! or equal as written) is matched.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::annotations::Annotations;

pub(crate) mod volumes;
use crate::settings::ANN_SOURCE;

const PREFIX: &str = "confgate.io/";
const SIDECAR: &str = "confgate";

/// A workload whose pods carry `confgate.io/` annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Workload {
    /// `kind/name` in lower case, as `kubectl` names it: `deployment/component`.
    pub id: String,
    pub namespace: Option<String>,
    /// The pod template's `confgate.io/` annotations.
    pub annotations: Annotations,
    /// The ConfigMaps its confgate reads.
    pub mounts: Vec<Mount>,
    /// What `check` should tell on standard error: subPath mounts, ConfigMaps it cannot tell apart.
    pub warnings: Vec<String>,
}

/// One ConfigMap a workload's confgate reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub namespace: Option<String>,
    pub name: String,
    /// The pod volume it comes through; `None` for the API source.
    pub volume: Option<String>,
}

impl Mount {
    /// `namespace/name`, or the name alone when the manifest gives no namespace.
    pub(crate) fn id(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }

    /// Whether a ConfigMap with this namespace and name is this one.
    pub(crate) fn is(&self, namespace: Option<&str>, name: &str) -> bool {
        self.namespace.as_deref() == namespace && self.name == name
    }
}

/// Every annotated workload in `docs`, recursing into `kind: List` and top-level sequences.
pub(crate) fn collect(docs: &[Value]) -> Vec<Workload> {
    let mut out = Vec::new();
    for d in docs {
        walk(d, &mut out);
    }
    out
}

fn walk(v: &Value, out: &mut Vec<Workload>) {
    if let Some(items) = v.as_array() {
        items.iter().for_each(|i| walk(i, out));
        return;
    }
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.ends_with("List") {
        if let Some(items) = v.get("items").and_then(Value::as_array) {
            items.iter().for_each(|i| walk(i, out));
        }
        return;
    }
    out.extend(workload(v));
}

/// The workload `doc` describes, when it is one and its pods carry `confgate.io/` annotations.
pub(crate) fn workload(doc: &Value) -> Option<Workload> {
    let kind = doc.get("kind").and_then(Value::as_str)?;
    let template = match kind {
        "Pod" => doc,
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            doc.pointer("/spec/template")?
        }
        "CronJob" => doc.pointer("/spec/jobTemplate/spec/template")?,
        _ => return None,
    };
    let annotations: Annotations = template
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)?
        .iter()
        .filter(|(k, _)| k.starts_with(PREFIX))
        .map(|(k, v)| {
            // A number or boolean written unquoted reaches the pod as its text.
            let text = v
                .as_str()
                .map_or_else(|| v.to_string(), ToString::to_string);
            (k.clone(), text)
        })
        .collect();
    if annotations.is_empty() {
        return None;
    }
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    let mut w = Workload {
        id: format!("{}/{name}", kind.to_lowercase()),
        namespace: doc
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned),
        annotations,
        mounts: Vec::new(),
        warnings: Vec::new(),
    };
    let spec = template.get("spec").unwrap_or(&Value::Null);
    gated(&mut w, spec);
    Some(w)
}

/// What a pod volume holds, as far as ConfigMaps go.
struct Volume {
    /// The ConfigMaps it projects, in order.
    configmaps: Vec<String>,
    /// Those of them it projects only some keys of (`items`).
    with_items: Vec<String>,
    /// All its projected sources (ConfigMaps, Secrets, the downward API, tokens).
    sources: usize,
}

fn volumes(spec: &Value) -> BTreeMap<String, Volume> {
    let mut out = BTreeMap::new();
    for v in seq(spec.get("volumes")) {
        let Some(name) = v.get("name").and_then(Value::as_str) else {
            continue;
        };
        let (cms, sources): (Vec<&Value>, usize) = if let Some(cm) = v.get("configMap") {
            (vec![cm], 1)
        } else if let Some(p) = v.get("projected") {
            let sources: Vec<&Value> = seq(p.get("sources")).collect();
            // The API credentials (as the ServiceAccount admission plugin adds them, or a token
            // mounted into one container): its ConfigMap is the cluster's CA, never a config.
            if sources
                .iter()
                .any(|s| s.get("serviceAccountToken").is_some())
            {
                continue;
            }
            let n = sources.len();
            (
                sources
                    .into_iter()
                    .filter_map(|s| s.get("configMap"))
                    .collect(),
                n,
            )
        } else {
            continue;
        };
        let named = |c: &&Value| str_at(c, "name");
        let vol = Volume {
            configmaps: cms.iter().filter_map(named).collect(),
            with_items: cms
                .iter()
                .filter(|c| seq(c.get("items")).next().is_some())
                .filter_map(named)
                .collect(),
            sources,
        };
        if !vol.configmaps.is_empty() {
            out.insert(name.to_owned(), vol);
        }
    }
    out
}

fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    seq(spec.get("initContainers")).chain(seq(spec.get("containers")))
}

fn is_sidecar(c: &Value) -> bool {
    c.get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| n == SIDECAR || n.starts_with("confgate-"))
}

fn gated(w: &mut Workload, spec: &Value) {
    let vols = volumes(spec);
    for c in containers(spec) {
        let cname = c.get("name").and_then(Value::as_str).unwrap_or("<unnamed>");
        for m in seq(c.get("volumeMounts")) {
            let Some(vname) = m.get("name").and_then(Value::as_str) else {
                continue;
            };
            let Some(vol) = vols.get(vname) else { continue };
            let sub = ["subPath", "subPathExpr"].into_iter().any(|k| {
                m.get(k)
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
            });
            if sub {
                w.warnings.push(format!(
                    "{}: container {cname} mounts volume {vname} (ConfigMap {}) with subPath; the kubelet \
                     never updates a subPath mount, so changes to the ConfigMap never reach that container \
                     (nor confgate, when it reads it): mount the whole volume",
                    w.id,
                    vol.configmaps.join(", ")
                ));
            }
        }
    }
    let sidecars: Vec<&Value> = containers(spec).filter(|c| is_sidecar(c)).collect();
    if sidecars.is_empty() {
        // The volume `confgate inject` would gate, chosen by the same function, and nothing when it
        // would refuse.
        let Some(spec) = spec.as_object() else {
            return;
        };
        match volumes::choose(spec, None) {
            Ok(one) if vols.contains_key(&one) => add_volume(w, &vols, &one),
            Ok(_) => {}
            Err(why) => w.warnings.push(format!(
                "{}: its pods run no confgate container, and confgate inject would not gate a volume: \
                 {why}; nothing judged for it",
                w.id
            )),
        }
        return;
    }
    if let Some(source) = api_source(&w.annotations, &sidecars)
        && let Some(target) = source.strip_prefix("configmap:")
    {
        let (ns, name) = match target.split_once('/') {
            Some((ns, name)) => (Some(ns.to_owned()), name),
            None => (w.namespace.clone(), target),
        };
        w.mounts.push(Mount {
            namespace: ns,
            name: name.to_owned(),
            volume: None,
        });
        return;
    }
    for c in &sidecars {
        for m in seq(c.get("volumeMounts")) {
            if let Some(vname) = m.get("name").and_then(Value::as_str)
                && vols.contains_key(vname)
            {
                add_volume(w, &vols, vname);
            }
        }
    }
    if w.mounts.is_empty() {
        w.warnings.push(format!(
            "{}: its confgate container mounts no ConfigMap volume and has no --source configmap:NS/NAME; \
             nothing to judge for it",
            w.id
        ));
    }
}

fn add_volume(w: &mut Workload, vols: &BTreeMap<String, Volume>, vname: &str) {
    let vol = &vols[vname];
    if vol.sources > 1 {
        w.warnings.push(format!(
            "{}: volume {vname} projects {} sources into one directory; confgate reads them together, \
             check judges each ConfigMap ({}) alone",
            w.id,
            vol.sources,
            vol.configmaps.join(", ")
        ));
    }
    if !vol.with_items.is_empty() {
        w.warnings.push(format!(
            "{}: volume {vname} projects only some keys (items) of ConfigMap {}; confgate sees those \
             keys alone, check judges and hashes every key of it",
            w.id,
            vol.with_items.join(", ")
        ));
    }
    for cm in &vol.configmaps {
        let m = Mount {
            namespace: w.namespace.clone(),
            name: cm.clone(),
            volume: Some(vname.to_owned()),
        };
        if !w
            .mounts
            .iter()
            .any(|x| x.is(m.namespace.as_deref(), &m.name))
        {
            w.mounts.push(m);
        }
    }
}

/// The source the sidecar would use: the annotation over the flag over the environment, as at start.
fn api_source(ann: &Annotations, sidecars: &[&Value]) -> Option<String> {
    if let Some(s) = ann.get(ANN_SOURCE) {
        return Some(s.trim().to_owned());
    }
    for c in sidecars {
        let args: Vec<&str> = seq(c.get("args"))
            .chain(seq(c.get("command")))
            .filter_map(Value::as_str)
            .collect();
        for (i, a) in args.iter().enumerate() {
            if let Some(v) = a.strip_prefix("--source=") {
                return Some(v.to_owned());
            }
            if *a == "--source" {
                return args.get(i + 1).map(|v| (*v).to_owned());
            }
        }
        for e in seq(c.get("env")) {
            if str_at(e, "name").as_deref() == Some("CONFGATE_SOURCE")
                && let Some(v) = str_at(e, "value")
            {
                return Some(v);
            }
        }
    }
    None
}

fn seq(v: Option<&Value>) -> impl Iterator<Item = &Value> {
    v.and_then(Value::as_array).into_iter().flatten()
}

fn str_at(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(yaml: &str) -> Vec<Value> {
        serde_saphyr::from_multiple::<Value>(yaml).unwrap()
    }

    fn one(yaml: &str) -> Workload {
        let mut all = collect(&docs(yaml));
        assert_eq!(all.len(), 1, "{all:#?}");
        all.remove(0)
    }

    fn mounts(w: &Workload) -> Vec<(Option<&str>, &str, Option<&str>)> {
        w.mounts
            .iter()
            .map(|m| (m.namespace.as_deref(), m.name.as_str(), m.volume.as_deref()))
            .collect()
    }

    const INJECTED: &str = "
kind: Deployment
metadata: {name: app, namespace: prod}
spec:
  template:
    metadata:
      annotations: {confgate.io/accepts: ^2, other.io/x: y}
    spec:
      initContainers:
      - name: confgate
        volumeMounts:
        - {name: incoming, mountPath: /etc/confgate/incoming}
        - {name: podinfo, mountPath: /etc/podinfo}
      containers:
      - name: app
        volumeMounts:
        - {name: scripts, mountPath: /scripts}
      volumes:
      - {name: incoming, configMap: {name: app-config}}
      - {name: scripts, configMap: {name: app-scripts}}
      - {name: podinfo, downwardAPI: {items: []}}
";

    #[test]
    fn the_sidecar_mounts_decide_and_only_confgate_annotations_are_kept() {
        let w = one(INJECTED);
        assert_eq!(w.id, "deployment/app");
        assert_eq!(mounts(&w), [(Some("prod"), "app-config", Some("incoming"))]);
        assert_eq!(
            w.annotations.keys().collect::<Vec<_>>(),
            ["confgate.io/accepts"]
        );
        assert!(w.warnings.is_empty(), "{:?}", w.warnings);
        assert!(w.mounts[0].is(Some("prod"), "app-config"));
        assert!(!w.mounts[0].is(Some("other"), "app-config"));
        assert!(!w.mounts[0].is(None, "app-config"));
    }

    #[test]
    fn unannotated_workloads_and_other_kinds_are_not_workloads() {
        let text = INJECTED.replace("confgate.io/accepts: ^2, ", "");
        assert!(collect(&docs(&text)).is_empty());
        assert!(collect(&docs("kind: ConfigMap\nmetadata: {name: a}\n")).is_empty());
        assert!(collect(&docs("kind: Service\nspec: {template: {metadata: {annotations: {confgate.io/accepts: ^2}}}}\n")).is_empty());
    }

    #[test]
    fn a_pod_is_its_own_template_and_lists_and_cronjobs_are_read() {
        let pod = one("
kind: Pod
metadata: {name: p, annotations: {confgate.io/accepts: ^2}}
spec:
  containers:
  - name: app
    volumeMounts: [{name: c, mountPath: /c}]
  volumes: [{name: c, configMap: {name: pc}}]
");
        assert_eq!(pod.id, "pod/p");
        assert_eq!(mounts(&pod), [(None, "pc", Some("c"))]);
        // Annotations on a Deployment's own metadata are not the pods'.
        let all = collect(&docs(
            "
kind: List
items:
- kind: Deployment
  metadata: {name: d, annotations: {confgate.io/accepts: ^2}}
  spec: {template: {spec: {volumes: [{name: c, configMap: {name: x}}]}}}
- kind: CronJob
  metadata: {name: cj}
  spec:
    jobTemplate:
      spec:
        template:
          metadata: {annotations: {confgate.io/accepts: ^3}}
          spec: {volumes: [{name: c, configMap: {name: cjc}}]}
",
        ));
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].id, "cronjob/cj");
        assert_eq!(mounts(&all[0]), [(None, "cjc", Some("c"))]);
    }

    #[test]
    fn not_injected_takes_the_only_configmap_volume_and_refuses_to_guess_between_several() {
        let w = one("
kind: Deployment
metadata: {name: app}
spec:
  template:
    metadata: {annotations: {confgate.io/accepts: ^2}}
    spec:
      containers: [{name: app}]
      volumes: [{name: a, configMap: {name: ca}}, {name: b, configMap: {name: cb}}]
");
        assert!(w.mounts.is_empty());
        assert_eq!(w.warnings.len(), 1);
        assert!(
            w.warnings[0].contains("several ConfigMap volumes (a, b)"),
            "{:?}",
            w.warnings
        );
    }

    #[test]
    fn sub_path_mounts_are_warned_about_in_any_container() {
        let text = INJECTED.replace(
            "{name: scripts, mountPath: /scripts}",
            "{name: scripts, mountPath: /scripts/run.sh, subPath: run.sh}",
        );
        let w = one(&text);
        assert_eq!(w.warnings.len(), 1, "{:?}", w.warnings);
        assert!(
            w.warnings[0].starts_with(
                "deployment/app: container app mounts volume scripts (ConfigMap app-scripts) with subPath"
            ),
            "{}",
            w.warnings[0]
        );
        // subPath on a volume that is not a ConfigMap is none of confgate's business.
        let text = INJECTED.replace(
            "{name: podinfo, mountPath: /etc/podinfo}",
            "{name: podinfo, mountPath: /etc/podinfo/a, subPath: a}",
        );
        assert!(one(&text).warnings.is_empty());
        // An empty subPath is the whole volume.
        let text = INJECTED.replace("mountPath: /scripts}", "mountPath: /scripts, subPath: ''}");
        assert!(one(&text).warnings.is_empty());
    }

    #[test]
    fn a_projected_service_account_token_is_not_a_config() {
        let text = INJECTED
            .replace(
                "- {name: podinfo, mountPath: /etc/podinfo}",
                "- {name: podinfo, mountPath: /etc/podinfo}\n        - {name: token, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}",
            )
            .replace(
                "- {name: podinfo, downwardAPI: {items: []}}",
                "- {name: podinfo, downwardAPI: {items: []}}\n      - {name: token, projected: {sources: [{serviceAccountToken: {path: token}}, {configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}}]}}",
            );
        let w = one(&text);
        assert_eq!(mounts(&w), [(Some("prod"), "app-config", Some("incoming"))]);
        assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    }

    #[test]
    fn projected_configmap_sources_are_read_and_merging_is_told() {
        let text = INJECTED.replace(
            "{name: incoming, configMap: {name: app-config}}",
            "{name: incoming, projected: {sources: [{configMap: {name: p1}}, {secret: {name: s}}, {configMap: {name: p2}}]}}",
        );
        let w = one(&text);
        assert_eq!(
            mounts(&w),
            [
                (Some("prod"), "p1", Some("incoming")),
                (Some("prod"), "p2", Some("incoming"))
            ]
        );
        assert!(
            w.warnings[0].contains("projects 3 sources"),
            "{:?}",
            w.warnings
        );
        let text = INJECTED.replace(
            "configMap: {name: app-config}",
            "configMap: {name: app-config, items: [{key: a, path: b}]}",
        );
        let w = one(&text);
        assert_eq!(mounts(&w), [(Some("prod"), "app-config", Some("incoming"))]);
        assert_eq!(w.warnings.len(), 1, "{:?}", w.warnings);
        assert!(
            w.warnings[0].contains("projects only some keys (items) of ConfigMap app-config"),
            "{:?}",
            w.warnings
        );
    }

    #[test]
    fn the_api_source_names_its_configmap_annotation_over_argument() {
        let api = "
kind: Deployment
metadata: {name: webhook, namespace: web}
spec:
  template:
    metadata: {annotations: {confgate.io/accepts: ^2}}
    spec:
      initContainers:
      - name: confgate
        args: [run, --source, configmap:other/webhook-config, --promote-to, /a]
";
        assert_eq!(mounts(&one(api)), [(Some("other"), "webhook-config", None)]);
        let eq = api.replace("--source, configmap:other/", "--source=configmap:web/");
        assert_eq!(mounts(&one(&eq)), [(Some("web"), "webhook-config", None)]);
        let ann = api.replace(
            "{confgate.io/accepts: ^2}",
            "{confgate.io/accepts: ^2, confgate.io/source: 'configmap:x/y'}",
        );
        assert_eq!(mounts(&one(&ann)), [(Some("x"), "y", None)]);
        let none = api.replace(
            "args: [run, --source, configmap:other/webhook-config, --promote-to, /a]",
            "args: [run]",
        );
        let w = one(&none);
        assert!(w.mounts.is_empty());
        assert!(
            w.warnings[0].contains("mounts no ConfigMap volume"),
            "{:?}",
            w.warnings
        );
    }
}
