//! Injecting one workload: the annotations checked, the pod template found, the sidecar added and the
//! component's mounts rewired.

use crate::settings::{Reload, Settings};
use crate::verdict::fix::ANN_VALIDATE;
use crate::workloads::volumes::shape;
use serde_json::{Map, Value, json};

use super::model::*;
use super::parts::*;

pub(super) fn inject_doc(
    doc: &mut Value,
    opts: &Options,
    stream: &mut Stream,
    out: &mut Vec<Outcome>,
) -> Result<(), Error> {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if kind == "List" {
        if let Some(items) = doc.get_mut("items").and_then(Value::as_array_mut) {
            for i in items {
                inject_doc(i, opts, stream, out)?;
            }
        }
        return Ok(());
    }
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("(unnamed)");
    let workload = format!("{}/{name}", kind.to_lowercase());
    let namespace = doc
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(template) = pod_template(doc, &kind) else {
        return Ok(());
    };
    let annotations = template.pointer("/metadata/annotations");
    let settings = check_annotations(annotations).map_err(|problem| Error::Workload {
        workload: workload.clone(),
        problem,
    })?;
    let accepts = annotations.and_then(|a| a.get(ACCEPTS)).is_some();
    let volume_hint = annotations
        .and_then(|a| a.get(VOLUME_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if !accepts {
        out.push(Outcome {
            workload,
            injected: false,
            why: format!("no {ACCEPTS} annotation on its pods"),
        });
        return Ok(());
    }
    let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) else {
        return Err(Error::Workload {
            workload,
            problem: Problem::NoSpec,
        });
    };
    // The pod's own choice of volume, as the admission policy reads it, when --volume names none.
    let named;
    let opts = match (&opts.volume, &volume_hint) {
        (None, Some(v)) => {
            named = Options {
                volume: Some(v.clone()),
                ..opts.clone()
            };
            &named
        }
        _ => opts,
    };
    let o = inject_pod(spec, opts, &settings, stream).map_err(|problem| Error::Workload {
        workload: workload.clone(),
        problem,
    })?;
    if let Some(account) = o.as_ref().and_then(|i| i.account.as_ref()) {
        if let Some(cm) = gated_config_map(spec, opts) {
            stream
                .records
                .entry(namespace.clone())
                .or_default()
                .insert(crate::known_good::record_name(&cm));
        }
        stream
            .reporters
            .entry(namespace)
            .or_default()
            .insert(account.clone());
    }
    out.push(Outcome {
        workload,
        injected: o.is_some(),
        why: o.map_or_else(|| format!("already has a {CONTAINER} container"), |i| i.why),
    });
    Ok(())
}

/// The pod's `confgate.io/` annotations, checked as the sidecar will read them (and as `check` does): a
/// misspelled or bad one would leave the injected sidecar never ready, or a typo in `accepts` skip the
/// workload in silence.
pub(super) fn check_annotations(annotations: Option<&Value>) -> Result<Settings, Problem> {
    let mut defaults = Settings::default();
    let Some(map) = annotations.and_then(Value::as_object) else {
        return Ok(defaults);
    };
    let mut ours = crate::annotations::Annotations::new();
    for (k, v) in map.iter().filter(|(k, _)| k.starts_with("confgate.io/")) {
        let Some(v) = v.as_str() else {
            return Err(Problem::NotAString {
                key: k.clone(),
                shape: shape(v),
            });
        };
        ours.insert(k.clone(), v.to_owned());
    }
    // The checker a template's annotation names is written by the manifest's author, who writes
    // the container spec too: it becomes the sidecar's own (`CONFGATE_VALIDATE`), which a later patch
    // of the pod's annotation may only pick or turn off.
    if let Some(Ok(v)) = ours.get(ANN_VALIDATE).map(|v| v.parse()) {
        defaults.validate = v;
    }
    let resolved = Settings::with_annotations(&defaults, &defaults, &ours);
    if resolved.problems.is_empty() {
        Ok(resolved.settings)
    } else {
        Err(Problem::Annotations(resolved.problems))
    }
}

/// Whether `image` is an image reference the kubelet can pull: `[HOST[:PORT]/]PATH[:TAG][@DIGEST]`, as
/// the distribution reference grammar has it. The pod would otherwise be accepted and never start.
pub(crate) fn check_image(image: &str) -> Result<(), BadImage> {
    if image.is_empty() {
        return Err(BadImage::Empty);
    }
    if let Some(c) = image.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(BadImage::Holds(c));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let (alg, hex) = d.split_once(':').ok_or(BadImage::DigestForm)?;
        let alg_ok = !alg.is_empty()
            && alg.split(['+', '.', '_', '-']).all(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            });
        if !alg_ok
            || hex.len() < 32
            || !hex
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "=_-".contains(c))
        {
            return Err(BadImage::Digest(d.to_owned()));
        }
    }
    // A tag follows the last `:` that comes after the last `/` (a colon before it is a port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag {
        let ok = (1..=128).contains(&t.len())
            && t.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !ok {
            return Err(BadImage::Tag(t.to_owned()));
        }
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    // The first part is a registry when it looks like a host: a dot, a port, or localhost.
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        let host = parts.remove(0);
        let (h, port) = host
            .split_once(':')
            .map_or((host, None), |(h, p)| (h, Some(p)));
        let host_ok = !h.is_empty()
            && h.split('.').all(|l| {
                !l.is_empty()
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        if !host_ok || port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
        {
            return Err(BadImage::Registry(host.to_owned()));
        }
    }
    for p in &parts {
        // Lower-case letters and digits, separated by one `.` or `_`, two `_`, or any number of `-`.
        let ok = !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.ends_with(|c: char| c.is_ascii_alphanumeric())
            && !p.contains("..")
            && !p.contains("._")
            && !p.contains("_.")
            && !p.contains("___");
        if !ok {
            return Err(BadImage::NamePart((*p).to_owned()));
        }
    }
    Ok(())
}

/// The pod template of a workload kind, or the pod itself.
pub(super) fn pod_template<'a>(doc: &'a mut Value, kind: &str) -> Option<&'a mut Value> {
    match kind {
        "Pod" => Some(doc),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            doc.pointer_mut("/spec/template")
        }
        "CronJob" => doc.pointer_mut("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// One pod spec injected: what the line on standard error says, and the ServiceAccount whose
/// sidecar reports (none with `--pod-report off`).
pub(super) struct Injected {
    pub(super) why: String,
    pub(super) account: Option<String>,
}

/// Adds the sidecar to one pod spec; `Ok(None)` when it is already there.
pub(super) fn inject_pod(
    spec: &mut Map<String, Value>,
    opts: &Options,
    settings: &Settings,
    stream: &mut Stream,
) -> Result<Option<Injected>, Problem> {
    let has_sidecar = ["initContainers", "containers"].iter().any(|k| {
        spec.get(*k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))
    });
    if has_sidecar {
        return Ok(None);
    }
    let config = config_volume(spec, opts)?;
    let on_node = host_network(spec);
    let (port, taken_by) = free_port(spec, on_node.then_some(&stream.host_ports))?;
    let mut notes = Vec::new();
    let run_as = match &settings.reload {
        Reload::Signal { process, .. } => signal_needs(spec, process, &mut notes)?,
        _ => None,
    };
    let checker = checker_volume(spec, &settings.validate, &config)?;
    // The component and any other init container now read the promoted copy, at the same path.
    let mut repointed = 0;
    for k in ["initContainers", "containers"] {
        for c in spec
            .get_mut(k)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for m in c
                .get_mut("volumeMounts")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if m.get("name").and_then(Value::as_str) == Some(config.as_str()) {
                    if m.get("subPath").is_some() || m.get("subPathExpr").is_some() {
                        return Err(Problem::SubPath(config));
                    }
                    m["name"] = ACTIVE_VOLUME.into();
                    m["readOnly"] = true.into();
                    repointed += 1;
                }
            }
        }
    }
    let volumes = spec
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .expect("config_volume found the volumes");
    for v in volumes.iter_mut() {
        if v.get("name").and_then(Value::as_str) != Some(config.as_str()) {
            continue;
        }
        // A missing ConfigMap becomes the verdict "missing" instead of a pod stuck in ContainerCreating.
        if let Some(cm) = v.get_mut("configMap").and_then(Value::as_object_mut) {
            cm.insert("optional".into(), true.into());
        }
        for s in v
            .pointer_mut("/projected/sources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(cm) = s.get_mut("configMap").and_then(Value::as_object_mut) {
                cm.insert("optional".into(), true.into());
            }
        }
    }
    let mut added = vec![
        // tmpfs: a promotion costs the kernel half the time it does on the node's disk, and the
        // pages (twice the config at most, during a promotion) count against confgate's memory,
        // which its limit allows for (docs/deploying.md).
        (
            ACTIVE_VOLUME,
            json!({"emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}}),
        ),
        (
            PODINFO_VOLUME,
            json!({"downwardAPI": {"items": [
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
            ]}}),
        ),
    ];
    if opts.pod_report {
        added.push((TOKEN_VOLUME, token_volume()));
    }
    for (name, v) in added {
        volumes.retain(|x| x.get("name").and_then(Value::as_str) != Some(name));
        let mut v = v;
        v["name"] = name.into();
        volumes.push(v);
    }
    let init = spec
        .entry("initContainers")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(init) = init.as_array_mut() else {
        return Err(Problem::InitNotAList);
    };
    let listen = if on_node {
        // The node's address is every pod's: /status and /metrics stay on loopback, where the exec
        // probes reach them.
        stream.host_ports.insert(u64::from(port));
        format!("127.0.0.1:{port}")
    } else {
        format!("[::]:{port}")
    };
    let mut c = sidecar(
        &config,
        opts,
        port,
        (port != PORT || on_node).then_some(&listen),
    );
    if settings.validate != crate::settings::Validate::None {
        // Only the container spec names a program confgate runs.
        let env = c
            .as_object_mut()
            .expect("an object")
            .entry("env")
            .or_insert_with(|| json!([]));
        if let Some(env) = env.as_array_mut() {
            env.push(json!({"name": "CONFGATE_VALIDATE", "value": settings.validate.to_string()}));
        }
    }
    if let Some((uid, gid)) = run_as {
        c["securityContext"]["runAsUser"] = uid.into();
        c["securityContext"]["runAsGroup"] = gid.into();
    }
    if let Some(v) = &checker {
        c["volumeMounts"]
            .as_array_mut()
            .expect("a list")
            .push(json!({"name": v.volume, "mountPath": v.mount_path, "readOnly": true}));
        if v.after > 0 {
            notes.push(format!(
                "confgate starts after init container(s) {} (they put the checker of \
                 confgate.io/validate in volume {}, mounted read-only at {})",
                v.feeders.join(", "),
                v.volume,
                v.mount_path
            ));
        } else {
            notes.push(format!(
                "volume {} (the checker of confgate.io/validate) mounted read-only at {}",
                v.volume, v.mount_path
            ));
        }
    }
    // First, so that later init containers and the component start only with an accepted config;
    // after the init containers that copy the checker in, which a first accepted config needs (a
    // native sidecar's startup probe must pass before the next init container starts).
    init.insert(checker.as_ref().map_or(0, |v| v.after), c);
    let account = opts.pod_report.then(|| runs_as(spec));
    let token_for_confgate_only = account.is_some()
        && spec
            .get("automountServiceAccountToken")
            .and_then(Value::as_bool)
            == Some(false);
    let mut done =
        format!("gates volume {config} ({repointed} mount(s) now read the promoted copy)");
    if let Some(c) = taken_by {
        done.push_str(&format!(
            "; port {PORT} is container {c}'s, so confgate listens on {port} (CONFGATE_LISTEN)"
        ));
    }
    if on_node {
        done.push_str(&format!(
            "; the pod uses the node's network, so confgate listens on {listen} only (CONFGATE_LISTEN): \
             its /status and /metrics are not on the node's address and no PodMonitor scrapes them, \
             and port {port} is one no other hostNetwork pod of this input declares (one outside it \
             on the same node may still take it)"
        ));
    }
    for n in notes {
        done.push_str("; ");
        done.push_str(&n);
    }
    match &account {
        Some(a) => {
            done.push_str(&format!(
                "; reports to its pod as the pod's own ServiceAccount {a}, unchanged (Role {ROLE}, \
                 limited to the pod's own object by {OWN_POD_POLICY})"
            ));
            if token_for_confgate_only {
                done.push_str(&format!(
                    "; the pod mounts no token into its containers, so confgate's container alone \
                     holds {a}'s token and may do whatever {a} may: run the pod as an account with \
                     no other rights, or use --pod-report off"
                ));
            }
        }
        None => done.push_str("; does not report to its pod (--pod-report off)"),
    }
    Ok(Some(Injected { why: done, account }))
}

/// The ServiceAccount the pod runs as, which its sidecar reports as: the one it names, or `default`.
/// A pod holds one identity, so confgate's token is the pod's own; inject never changes it (a
/// workload moved to another account would lose its own rights and token).
pub(super) fn runs_as(spec: &Map<String, Value>) -> String {
    ["serviceAccountName", "serviceAccount"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_str))
        .find(|a| !a.is_empty())
        .unwrap_or(DEFAULT_ACCOUNT)
        .to_owned()
}
