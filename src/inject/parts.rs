//! The parts of an injected pod: the checker's volume, what a signal reload needs, the token volume,
//! the sidecar's port, the gated volume and the sidecar container itself.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::model::*;

/// Where the checker `confgate.io/validate` runs comes from, for confgate's container.
#[derive(Debug)]
pub(super) struct CheckerVolume {
    pub(super) volume: String,
    /// The dir another container mounts it at, a prefix of the checker's path; confgate mounts it there.
    pub(super) mount_path: String,
    /// How many init containers confgate must start after: up to the last one that writes the volume.
    pub(super) after: usize,
    pub(super) feeders: Vec<String>,
}

/// The volume holding the checker of `validate`, as the pod's other containers mount it (the longest
/// mount path that is a dir of the program's path), and the init containers that write it (regular
/// ones that mount it writable), which confgate must follow. An image volume, a PVC or a hostPath has
/// no writer: confgate mounts it and stays first.
pub(super) fn checker_volume(
    spec: &Map<String, Value>,
    validate: &crate::settings::Validate,
    config: &str,
) -> Result<Option<CheckerVolume>, Problem> {
    let crate::settings::Validate::Exec { program, .. } = validate else {
        return Ok(None);
    };
    let containers = |k: &str| {
        spec.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (init, regular) = (containers("initContainers"), containers("containers"));
    let mounts = |c: &Value| -> Vec<(String, String, bool)> {
        c.get("volumeMounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| {
                Some((
                    m.get("name")?.as_str()?.to_owned(),
                    m.get("mountPath")?
                        .as_str()?
                        .trim_end_matches('/')
                        .to_owned(),
                    m.get("readOnly").and_then(Value::as_bool) == Some(true),
                ))
            })
            .collect()
    };
    let found = init
        .iter()
        .chain(&regular)
        .flat_map(mounts)
        .filter(|(_, path, _)| !path.is_empty() && program.starts_with(&format!("{path}/")))
        .max_by_key(|(_, path, _)| path.len());
    let Some((volume, mount_path, _)) = found else {
        return Err(Problem::NoCheckerVolume {
            program: program.clone(),
        });
    };
    let name = |c: &Value| {
        c.get("name")
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)")
            .to_owned()
    };
    let mut after = 0;
    let mut feeders = Vec::new();
    for (i, c) in init.iter().enumerate() {
        let sidecar = c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
        if !sidecar && mounts(c).iter().any(|(v, _, ro)| *v == volume && !ro) {
            after = i + 1;
            feeders.push(name(c));
        }
    }
    // Whatever reads the config must come after confgate, so after the last feeder.
    if let Some(reader) = init[..after]
        .iter()
        .find(|c| mounts(c).iter().any(|(v, _, _)| v == config))
    {
        return Err(Problem::ReadsConfigBeforeChecker {
            container: name(reader),
            feeder: feeders.last().cloned().unwrap_or_default(),
            volume,
        });
    }
    Ok(Some(CheckerVolume {
        volume,
        mount_path,
        after,
        feeders,
    }))
}

/// What a `signal:SIGNAL:PROCESS` reload needs of the pod: `shareProcessNamespace: true` (set here
/// unless the pod refuses it; without it confgate sees no other process and no reload can reach the
/// component) and confgate running as the component's user (the restricted profile gives it no
/// `CAP_KILL`). The user, when every regular container declares the same one, is returned for
/// confgate's container; otherwise a note says what to set.
pub(super) fn signal_needs(
    spec: &mut Map<String, Value>,
    process: &str,
    notes: &mut Vec<String>,
) -> Result<Option<(u64, u64)>, Problem> {
    match spec.get("shareProcessNamespace") {
        Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            return Err(Problem::NoSharedProcesses(process.to_owned()));
        }
        _ => {
            spec.insert("shareProcessNamespace".into(), true.into());
            notes.push(format!(
                "shareProcessNamespace: true, so the signal reaches {process} (every container now \
                 sees the pod's processes)"
            ));
        }
    }
    let pod = spec.get("securityContext").cloned().unwrap_or(Value::Null);
    let id = |c: &Value, k: &str| {
        c.pointer(&format!("/securityContext/{k}"))
            .or_else(|| pod.get(k))
            .and_then(Value::as_u64)
    };
    let users: BTreeSet<Option<(u64, Option<u64>)>> = spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| id(c, "runAsUser").map(|u| (u, id(c, "runAsGroup"))))
        .collect();
    match users.into_iter().collect::<Vec<_>>()[..] {
        [Some((0, _))] => Err(Problem::Root(process.to_owned())),
        [Some((uid, gid))] => {
            if uid != UID {
                notes.push(format!(
                    "confgate runs as user {uid}, the component's, so that it may signal {process}"
                ));
            }
            Ok(Some((uid, gid.unwrap_or(UID))))
        }
        _ => {
            notes.push(format!(
                "confgate runs as user {UID}: {process} must run as the same user for the signal to \
                 reach it (set runAsUser on the pod)"
            ));
            Ok(None)
        }
    }
}

/// The ServiceAccount token as `automountServiceAccountToken` would mount it (the kubelet rotates it),
/// for the confgate container alone.
pub(super) fn token_volume() -> Value {
    json!({"projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [
            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
        ]}},
    ]}})
}

/// The port confgate listens on: [`PORT`], or the next one no container of the pod declares (with the
/// container that declares [`PORT`]). Two containers of a pod share its network namespace, so a second
/// listener on a port fails with `Address already in use`; moving confgate keeps the pod's own ports as
/// they are, and its probes follow (`confgate probe` reads `CONFGATE_LISTEN`, the liveness probe the
/// port's name).
///
/// A `hostNetwork` pod shares the node's network with every other such pod on it: `on_node` holds the
/// ports the input's other `hostNetwork` pods declare (and confgate ports already chosen), which are
/// skipped too.
pub(super) fn free_port(
    spec: &Map<String, Value>,
    on_node: Option<&BTreeSet<u64>>,
) -> Result<(u16, Option<String>), Problem> {
    let taken = declared_ports(spec);
    let owner = taken
        .iter()
        .find(|(n, _)| *n == u64::from(PORT))
        .map(|(_, o)| o.clone());
    let busy = |p: u16| {
        taken.iter().any(|(n, _)| *n == u64::from(p))
            || on_node.is_some_and(|s| s.contains(&u64::from(p)))
    };
    if !busy(PORT) {
        return Ok((PORT, None));
    }
    (PORT..=u16::MAX)
        .find(|p| !busy(*p))
        .map(|p| (p, owner))
        .ok_or(Problem::NoFreePort)
}

/// The ports the pod's containers declare (`containerPort`, and `hostPort` when it differs), each with
/// its container's name.
pub(super) fn declared_ports(spec: &Map<String, Value>) -> Vec<(u64, String)> {
    let mut taken = Vec::new();
    for k in ["initContainers", "containers"] {
        for c in spec.get(k).and_then(Value::as_array).into_iter().flatten() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("(unnamed)");
            for p in c
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for f in ["containerPort", "hostPort"] {
                    if let Some(n) = p.get(f).and_then(Value::as_u64) {
                        taken.push((n, name.to_owned()));
                    }
                }
            }
        }
    }
    taken
}

/// The ConfigMap volume to gate: the one named with `--volume`, or the only one, as `check` finds it.
pub(super) fn config_volume(spec: &Map<String, Value>, opts: &Options) -> Result<String, Problem> {
    Ok(crate::workloads::volumes::choose(
        spec,
        opts.volume.as_deref(),
    )?)
}

/// The native sidecar, as in `manifests/native-sidecar/deployment.yaml`, listening on `port` (at
/// `listen`, `CONFGATE_LISTEN`, when that is not the default).
pub(super) fn sidecar(config: &str, opts: &Options, port: u16, listen: Option<&str>) -> Value {
    let probe = |kind: &str| json!({"exec": {"command": ["/confgate", "probe", kind]}});
    let mut startup = probe("startup");
    // 150 x 2 s: a ConfigMap update can take about 90 s to reach the volume.
    startup["periodSeconds"] = 2.into();
    startup["timeoutSeconds"] = 2.into();
    startup["failureThreshold"] = 150.into();
    let mut ready = probe("ready");
    ready["periodSeconds"] = 5.into();
    ready["timeoutSeconds"] = 2.into();
    // Every probe is exec, over loopback, where the server keeps slots whatever other clients hold.
    let mut live = probe("live");
    live["timeoutSeconds"] = 2.into();
    live["periodSeconds"] = 10.into();
    live["failureThreshold"] = 3.into();
    let mut c = json!({
        "name": CONTAINER,
        "image": opts.image,
        "restartPolicy": "Always",
        "args": [
            "run", "--watch", INCOMING_PATH, "--promote-to", ACTIVE_PATH,
            "--annotations", format!("{PODINFO_PATH}/annotations"), "--log-format", opts.log_format,
        ],
        "ports": [{"name": "confgate", "containerPort": port}],
        "startupProbe": startup,
        "readinessProbe": ready,
        "livenessProbe": live,
        "resources": {
            "requests": {"cpu": "5m", "memory": "10Mi"},
            "limits": {"memory": "16Mi"},
        },
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": UID,
            "runAsGroup": UID,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": config, "mountPath": INCOMING_PATH, "readOnly": true},
            {"name": ACTIVE_VOLUME, "mountPath": ACTIVE_PATH},
            {"name": PODINFO_VOLUME, "mountPath": PODINFO_PATH, "readOnly": true},
        ],
    });
    let mut env = Vec::new();
    if let Some(listen) = listen {
        // One setting for both: `run` listens on it and `confgate probe` (the exec probes) reads it.
        env.push(json!({"name": "CONFGATE_LISTEN", "value": listen}));
    }
    if opts.pod_report {
        // Which pod Events and the conditions are about (the UID spares a GET on pods).
        for (name, field) in [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
            ("POD_UID", "metadata.uid"),
        ] {
            env.push(json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": field}}}));
        }
        c["volumeMounts"]
            .as_array_mut()
            .expect("a list")
            .push(json!({"name": TOKEN_VOLUME, "mountPath": TOKEN_PATH, "readOnly": true}));
    }
    if !env.is_empty() {
        c["env"] = env.into();
    }
    c
}

pub(super) fn host_network(spec: &Map<String, Value>) -> bool {
    spec.get("hostNetwork").and_then(Value::as_bool) == Some(true)
}

/// The ConfigMap of the volume the injected sidecar gates (none for a projected volume): its
/// known-good record is named after it.
pub(super) fn gated_config_map(spec: &Map<String, Value>, opts: &Options) -> Option<String> {
    let volume = config_volume(spec, opts).ok()?;
    spec.get("volumes")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == volume.as_str())?
        .pointer("/configMap/name")?
        .as_str()
        .map(str::to_owned)
}
