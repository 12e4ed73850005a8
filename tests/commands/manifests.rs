//! The manifests under `manifests/` checked with the real parsers, so the examples cannot drift from the
//! binary: every confgate container's arguments and probe commands go through `Cli::try_parse_from`,
//! every pod's `confgate.io/*` annotations through `Settings::with_annotations`, and each sample ConfigMap
//! through the verdict the pod's settings give it. The wiring (volumes, ports, process namespace) and
//! restricted Pod Security are checked too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser as _;
use confgate::annotations::Annotations;
use confgate::cli::{Cli, Command, PathArgs};
use confgate::settings::Raw;
use confgate::settings::{Reload, Settings};
use confgate::snapshot::Observed;
use confgate::verdict::Verdict;
use serde_json::Value;

const IMAGE: &str = "localhost/confgate/confgate:";
const BINARY: &str = "/confgate";
const UID: i64 = 65532;

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// Every resource file, without kustomization.yaml (not a Kubernetes resource).
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(yaml_files(&p));
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml")
            && p.file_name().is_some_and(|n| n != "kustomization.yaml")
        {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// One example directory: its workloads and ConfigMaps.
struct Example {
    name: String,
    docs: Vec<Value>,
}

fn examples() -> Vec<Example> {
    let mut by_dir: BTreeMap<PathBuf, Vec<Value>> = BTreeMap::new();
    for f in yaml_files(&manifests_dir()) {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs = documents(&text);
        assert!(!docs.is_empty(), "{} holds no document", f.display());
        by_dir
            .entry(f.parent().unwrap().to_path_buf())
            .or_default()
            .extend(docs);
    }
    // A directory built from a kustomize Component is checked as kustomize builds it.
    for (dir, docs) in by_dir.iter_mut() {
        let k = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap_or_default();
        if k.lines().any(|l| l.starts_with("components:")) {
            *docs = documents(&crate::common::kustomize(dir));
        }
    }
    by_dir
        .into_iter()
        // Pod examples only: manifests/rbac holds Roles, validated by schema alone.
        .filter(|(_, docs)| {
            docs.iter()
                .any(|d| matches!(str_of(d, "kind"), Some("Deployment" | "DaemonSet")))
        })
        .map(|(dir, docs)| Example {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            docs,
        })
        .collect()
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn seq(v: Option<&Value>) -> impl Iterator<Item = &Value> {
    v.and_then(Value::as_array).into_iter().flatten()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    seq(v)
        .map(|x| match x {
            Value::String(s) => s.clone(),
            other => panic!("expected a string, found {other:?}"),
        })
        .collect()
}

/// The pod template of a workload, or the pod itself.
fn pod_template(doc: &Value) -> Option<&Value> {
    match str_of(doc, "kind")? {
        "Pod" => Some(doc),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            doc.get("spec")?.get("template")
        }
        "CronJob" => doc
            .get("spec")?
            .get("jobTemplate")?
            .get("spec")?
            .get("template"),
        _ => None,
    }
}

/// ConfigMaps by name, as the kubelet would project them.
fn configmaps(docs: &[Value]) -> BTreeMap<String, Observed> {
    docs.iter()
        .filter(|d| str_of(d, "kind") == Some("ConfigMap"))
        .map(|d| {
            let name = d["metadata"]["name"].as_str().unwrap().to_owned();
            let text = serde_json::to_string(d).unwrap();
            let mut found = confgate::check::manifests(&name, &text).unwrap();
            assert_eq!(found.len(), 1);
            (name, found.remove(0).1)
        })
        .collect()
}

/// What a check of one pod found.
#[derive(Default)]
struct Report {
    confgate_containers: usize,
    problems: Vec<String>,
}

impl Report {
    fn problem(&mut self, what: String) {
        self.problems.push(what);
    }
}

/// Checks every workload in `docs`; ConfigMaps in `docs` are judged by the settings of the pods mounting them.
fn check_docs(docs: &[Value]) -> Report {
    let cms = configmaps(docs);
    let mut report = Report::default();
    for doc in docs {
        if let Some(template) = pod_template(doc) {
            let name = doc["metadata"]["name"].as_str().unwrap_or("<unnamed>");
            // A node's own component (kube-proxy in kube-system) runs privileged on the host's
            // network by its nature: restricted Pod Security is asked of confgate's container only.
            let node_component = doc["metadata"]["namespace"] == "kube-system";
            check_pod(name, template, &cms, node_component, &mut report);
        }
    }
    report
}

fn check_pod(
    workload: &str,
    template: &Value,
    cms: &BTreeMap<String, Observed>,
    node_component: bool,
    report: &mut Report,
) {
    let spec = &template["spec"];
    let annotations: Annotations = template
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let (k, Some(v)) = (k.as_str(), v.as_str()) else {
                panic!("{workload}: annotation {k:?} must be a string (quote it)")
            };
            (k.to_owned(), v.to_owned())
        })
        .collect();
    check_pod_security(workload, spec, node_component, report);

    let init: Vec<&Value> = seq(spec.get("initContainers")).collect();
    let regular: Vec<&Value> = seq(spec.get("containers")).collect();
    let all: Vec<&Value> = init.iter().chain(regular.iter()).copied().collect();
    for (c, is_init) in init
        .iter()
        .map(|c| (*c, true))
        .chain(regular.iter().map(|c| (*c, false)))
    {
        let cname = str_of(c, "name").unwrap_or("<unnamed>");
        let at = format!("{workload}/{cname}");
        if !str_of(c, "image").is_some_and(|i| i.starts_with(IMAGE)) {
            continue;
        }
        report.confgate_containers += 1;
        let Some((paths, gate, listen_port, running)) = parse_confgate(&at, c, report) else {
            continue;
        };
        let base = match Settings::from_raw(&gate) {
            Ok(s) => s,
            Err(e) => {
                report.problem(format!("{at}: bad settings in args: {e}"));
                continue;
            }
        };
        let resolved = Settings::with_annotations(&base, &base, &annotations);
        for p in &resolved.problems {
            report.problem(format!("{at}: pod annotation problem: {p}"));
        }
        let settings = resolved.settings;
        if settings.accepts.is_none() {
            report.problem(format!(
                "{at}: no accepted range (annotation confgate.io/accepts or --accepts); never ready"
            ));
        }
        check_mounts(&at, spec, c, &paths, &annotations, cms, &settings, report);
        check_probes(&at, c, listen_port, running, is_init, report);
        if running {
            check_reload(&at, spec, &all, &settings, report);
        }
        check_resources(&at, c, report);
    }
}

/// Parses the container's argv and probe commands with the binary's own parser.
/// Returns the paths, gate flags, the listen port (for `run`) and whether it is `run`.
fn parse_confgate(
    at: &str,
    c: &Value,
    report: &mut Report,
) -> Option<(PathArgs, Raw, Option<u16>, bool)> {
    let command = strings(c.get("command"));
    if !(command.is_empty() || command == [BINARY]) {
        report.problem(format!(
            "{at}: command {command:?}; the image's entrypoint is {BINARY}"
        ));
    }
    for env in seq(c.get("env")) {
        if str_of(env, "name").is_some_and(|n| n.starts_with("CONFGATE_")) {
            report.problem(format!(
                "{at}: environment {env:?}: use args, so this test can check them"
            ));
        }
    }
    let argv: Vec<String> = std::iter::once("confgate".to_owned())
        .chain(strings(c.get("args")))
        .collect();
    match Cli::try_parse_from(&argv) {
        Ok(cli) => match cli.command {
            Command::Run(a) => Some((a.paths, a.gate.raw(), Some(a.listen.port()), true)),
            Command::Wait(a) => Some((a.paths, a.gate.raw(), None, false)),
            other => {
                report.problem(format!("{at}: a container must run or wait, not {other:?}"));
                None
            }
        },
        Err(e) => {
            report.problem(format!("{at}: confgate rejects args {argv:?}: {e}"));
            None
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn check_mounts(
    at: &str,
    spec: &Value,
    c: &Value,
    paths: &PathArgs,
    annotations: &Annotations,
    cms: &BTreeMap<String, Observed>,
    settings: &Settings,
    report: &mut Report,
) {
    let volume = |mount_path: &Path| -> Option<(&Value, &Value)> {
        let m = seq(c.get("volumeMounts"))
            .find(|m| str_of(m, "mountPath").map(Path::new) == Some(mount_path))?;
        let name = str_of(m, "name")?;
        let v = seq(spec.get("volumes")).find(|v| str_of(v, "name") == Some(name))?;
        Some((m, v))
    };

    // API mode: the ConfigMap is named by --source, and the pod needs its identity and an API token.
    let api_source = paths
        .source
        .as_deref()
        .and_then(|s| s.strip_prefix("configmap:"))
        .and_then(|s| s.split_once('/'));
    if api_source.is_some() {
        let env: Vec<&str> = seq(c.get("env"))
            .filter_map(|e| str_of(e, "name"))
            .collect();
        for want in ["POD_NAME", "POD_NAMESPACE"] {
            if !env.contains(&want) {
                report.problem(format!("{at}: API mode without {want} in env"));
            }
        }
        // The token: automounted, or (better: the component does not get it) a projected
        // serviceAccountToken volume mounted where the in-cluster client reads it.
        let automounted = spec
            .get("automountServiceAccountToken")
            .and_then(Value::as_bool)
            != Some(false);
        let token_volumes: Vec<&str> = seq(spec.get("volumes"))
            .filter(|v| {
                seq(v.get("projected").and_then(|p| p.get("sources")))
                    .any(|s| s.get("serviceAccountToken").is_some())
            })
            .filter_map(|v| str_of(v, "name"))
            .collect();
        let projected = seq(c.get("volumeMounts")).any(|m| {
            str_of(m, "mountPath") == Some("/var/run/secrets/kubernetes.io/serviceaccount")
                && str_of(m, "name").is_some_and(|n| token_volumes.contains(&n))
        });
        if str_of(spec, "serviceAccountName").is_none() || !(automounted || projected) {
            report.problem(format!("{at}: API mode without a ServiceAccount token"));
        }
    }
    let configmap = api_source.map(|(_, name)| name).or_else(|| {
        volume(&paths.watch)
            .filter(|(_, v)| v.get("configMap").is_some())
            .map(|(_, v)| v["configMap"]["name"].as_str().unwrap_or_default())
    });
    match configmap {
        Some(cm) => match cms.get(cm) {
            Some(obs) => {
                // Judged as pods judge it: mid-rollout, each track (pods of both are among twenty),
                // and a candidate held back on a pod is a problem of the sample too.
                for i in 0..20 {
                    let bucket = Some(confgate::rollout::Bucket::of(&format!("pod-{i}")));
                    let (choice, view) =
                        confgate::rollout::choose(obs.clone(), settings, bucket, &[]);
                    let j = match view.as_ref().and_then(|v| v.held.as_ref()) {
                        Some(h) => (h.verdict, format!("the candidate: {}", h.reason)),
                        None => (choice.judgement.verdict, choice.judgement.reason),
                    };
                    if j.0 != Verdict::Accepted {
                        report.problem(format!(
                            "{at}: the sample ConfigMap {cm} is {}: {}",
                            j.0, j.1
                        ));
                        break;
                    }
                }
            }
            None => report.problem(format!(
                "{at}: no sample ConfigMap {cm} beside the workload"
            )),
        },
        _ => report.problem(format!(
            "{at}: --watch {} is not a configMap volume mount",
            paths.watch.display()
        )),
    }

    match paths.promote_to.as_deref().map(|p| (p, volume(p))) {
        Some((p, Some((m, v)))) => {
            match v.get("emptyDir") {
                None => report.problem(format!(
                    "{at}: --promote-to {} is not an emptyDir",
                    p.display()
                )),
                // tmpfs, bounded: see docs/deploying.md (the promoted dir on tmpfs).
                Some(e) if str_of(e, "medium") != Some("Memory") || e.get("sizeLimit").is_none() => {
                    report.problem(format!(
                        "{at}: --promote-to {} is not an emptyDir with medium: Memory and a sizeLimit",
                        p.display()
                    ))
                }
                Some(_) => {}
            }
            if m.get("readOnly").and_then(Value::as_bool) == Some(true) {
                report.problem(format!(
                    "{at}: --promote-to {} is mounted read-only",
                    p.display()
                ));
            }
            let vname = str_of(m, "name").unwrap_or_default();
            let readers = seq(spec.get("containers"))
                .filter(|o| !str_of(o, "image").is_some_and(|i| i.starts_with(IMAGE)))
                .flat_map(|o| seq(o.get("volumeMounts")))
                .filter(|om| str_of(om, "name") == Some(vname))
                .collect::<Vec<_>>();
            if readers.is_empty() {
                report.problem(format!(
                    "{at}: no component mounts the promoted volume {vname}"
                ));
            }
            if readers
                .iter()
                .any(|om| om.get("readOnly").and_then(Value::as_bool) != Some(true))
            {
                report.problem(format!("{at}: a component mounts {vname} writable"));
            }
        }
        Some((p, None)) => report.problem(format!(
            "{at}: --promote-to {} is not a volume mount",
            p.display()
        )),
        None => {}
    }

    // Annotations reach confgate only through a downward-API file; without it they are silently absent.
    if annotations.keys().any(|k| k.starts_with("confgate.io/")) {
        let file = &paths.annotations;
        let (dir, base) = (
            file.parent().unwrap(),
            file.file_name().unwrap().to_str().unwrap(),
        );
        let wired = volume(dir).is_some_and(|(_, v)| {
            seq(v.get("downwardAPI").and_then(|d| d.get("items"))).any(|i| {
                str_of(i, "path") == Some(base)
                    && i.get("fieldRef").and_then(|f| str_of(f, "fieldPath"))
                        == Some("metadata.annotations")
            })
        });
        if !wired {
            report.problem(format!(
                "{at}: --annotations {} is not a downward-API file of metadata.annotations",
                file.display()
            ));
        }
    }
}

fn check_probes(
    at: &str,
    c: &Value,
    listen_port: Option<u16>,
    running: bool,
    is_init: bool,
    report: &mut Report,
) {
    let native = is_init && str_of(c, "restartPolicy") == Some("Always");
    if running && is_init && !native {
        report.problem(format!(
            "{at}: `run` as an init container needs restartPolicy: Always"
        ));
    }
    if !running && native {
        report.problem(format!(
            "{at}: `wait` must not be a restartable init container"
        ));
    }
    if !running {
        for p in ["startupProbe", "readinessProbe", "livenessProbe"] {
            if c.get(p).is_some() {
                report.problem(format!("{at}: `wait` serves no probes, but has {p}"));
            }
        }
        return;
    }
    let ports: BTreeMap<&str, i64> = seq(c.get("ports"))
        .filter_map(|p| Some((str_of(p, "name")?, p.get("containerPort")?.as_i64()?)))
        .collect();
    let expect = [
        ("startupProbe", "/startupz", native),
        ("readinessProbe", "/readyz", true),
        ("livenessProbe", "/livez", true),
    ];
    for (probe, path, required) in expect {
        let Some(p) = c.get(probe) else {
            if required {
                report.problem(format!("{at}: no {probe}"));
            }
            continue;
        };
        if let Some(h) = p.get("httpGet") {
            // The kubelet's HTTP probes come from the node, as any other client does, and share the
            // server's slots with them; exec probes connect over loopback, where slots are kept.
            report.problem(format!(
                "{at}: {probe} is httpGet; use exec `{BINARY} probe`, which reaches confgate over loopback"
            ));
            if str_of(h, "path") != Some(path) {
                report.problem(format!(
                    "{at}: {probe} must GET {path}, not {:?}",
                    h.get("path")
                ));
            }
            let port = match &h["port"] {
                Value::String(name) => ports.get(name.as_str()).copied(),
                other => other.as_i64(),
            };
            if port != listen_port.map(i64::from) {
                report.problem(format!(
                    "{at}: {probe} port {port:?} is not the --listen port {listen_port:?}"
                ));
            }
        } else if let Some(e) = p.get("exec") {
            let cmd = strings(e.get("command"));
            let ok = cmd.first().map(String::as_str) == Some(BINARY)
                && matches!(
                    Cli::try_parse_from(std::iter::once("confgate").chain(cmd.iter().skip(1).map(String::as_str))),
                    Ok(Cli { command: Command::Probe(ref a) }) if a.kind.path() == path
                );
            if !ok {
                report.problem(format!(
                    "{at}: {probe} exec {cmd:?} is not `{BINARY} probe` for {path}"
                ));
            }
        } else {
            report.problem(format!("{at}: {probe} is neither httpGet nor exec"));
        }
    }
    if let Some(p) = c.get("startupProbe") {
        let period = p.get("periodSeconds").and_then(Value::as_i64).unwrap_or(10);
        let failures = p
            .get("failureThreshold")
            .and_then(Value::as_i64)
            .unwrap_or(3);
        // A ConfigMap update can take about 90 s to reach the volume; give start-up well over that.
        if period * failures < 180 {
            report.problem(format!(
                "{at}: startupProbe allows only {}s before the kubelet restarts confgate",
                period * failures
            ));
        }
    }
}

fn check_reload(at: &str, spec: &Value, all: &[&Value], settings: &Settings, report: &mut Report) {
    match &settings.reload {
        Reload::None => {}
        Reload::Signal { .. } => {
            if spec.get("shareProcessNamespace").and_then(Value::as_bool) != Some(true) {
                report.problem(format!(
                    "{at}: reload {} needs shareProcessNamespace: true",
                    settings.reload
                ));
            }
        }
        Reload::Http(url) => {
            let port = i64::from(url.port().unwrap_or(80));
            let local = matches!(url.host(), "127.0.0.1" | "localhost");
            let served = all
                .iter()
                .filter(|c| !str_of(c, "image").is_some_and(|i| i.starts_with(IMAGE)))
                .flat_map(|c| seq(c.get("ports")))
                .any(|p| p.get("containerPort").and_then(Value::as_i64) == Some(port));
            if !(local && served) {
                report.problem(format!(
                    "{at}: reload {url} is not a port a container of this pod declares"
                ));
            }
        }
    }
}

fn check_resources(at: &str, c: &Value, report: &mut Report) {
    let r = c.get("resources");
    let get = |a: &str, b: &str| r.and_then(|r| r.get(a)).and_then(|x| x.get(b));
    for (a, b) in [
        ("requests", "cpu"),
        ("requests", "memory"),
        ("limits", "memory"),
    ] {
        if get(a, b).is_none() {
            report.problem(format!("{at}: no resources.{a}.{b}"));
        }
    }
}

/// The restricted Pod Security profile, plus the image's non-root UID.
fn check_pod_security(workload: &str, spec: &Value, node_component: bool, report: &mut Report) {
    let pod = &spec["securityContext"];
    if node_component {
        for c in seq(spec.get("initContainers")).chain(seq(spec.get("containers"))) {
            if str_of(c, "image").is_some_and(|i| i.starts_with(IMAGE)) {
                check_container_security(workload, c, report);
            }
        }
        return;
    }
    if pod["runAsNonRoot"].as_bool() != Some(true) {
        report.problem(format!(
            "{workload}: pod securityContext.runAsNonRoot is not true"
        ));
    }
    if pod["seccompProfile"]["type"].as_str() != Some("RuntimeDefault") {
        report.problem(format!(
            "{workload}: pod seccompProfile is not RuntimeDefault"
        ));
    }
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec.get(key).and_then(Value::as_bool) == Some(true) {
            report.problem(format!("{workload}: {key} is set"));
        }
    }
    for c in seq(spec.get("initContainers")).chain(seq(spec.get("containers"))) {
        check_container_security(workload, c, report);
    }
}

/// One container's securityContext as restricted Pod Security requires it.
fn check_container_security(workload: &str, c: &Value, report: &mut Report) {
    {
        let at = format!("{workload}/{}", str_of(c, "name").unwrap_or("<unnamed>"));
        let sc = &c["securityContext"];
        let checks = [
            ("runAsNonRoot", sc["runAsNonRoot"].as_bool() == Some(true)),
            ("runAsUser", sc["runAsUser"].as_i64() == Some(UID)),
            (
                "readOnlyRootFilesystem",
                sc["readOnlyRootFilesystem"].as_bool() == Some(true),
            ),
            (
                "allowPrivilegeEscalation",
                sc["allowPrivilegeEscalation"].as_bool() == Some(false),
            ),
            (
                "capabilities.drop ALL",
                strings(sc["capabilities"].get("drop")) == ["ALL"],
            ),
            (
                "no capabilities.add",
                sc["capabilities"].get("add").is_none(),
            ),
            (
                "privileged",
                sc.get("privileged").and_then(Value::as_bool) != Some(true),
            ),
            (
                "seccompProfile RuntimeDefault",
                sc["seccompProfile"]["type"].as_str() == Some("RuntimeDefault"),
            ),
        ];
        for (what, ok) in checks {
            if !ok {
                report.problem(format!(
                    "{at}: securityContext {what} not as restricted requires"
                ));
            }
        }
    }
}

/// Every example passes, and every example has confgate in it (so the checks above ran).
#[test]
fn every_manifest_is_accepted_by_the_binary() {
    let examples = examples();
    let names: Vec<&str> = examples.iter().map(|e| e.name.as_str()).collect();
    let mut expected = vec!["api-mode", "classic"];
    if examples.iter().any(|e| e.name == "component-example") {
        expected.push("component-example");
    }
    expected.extend([
        "kube-proxy",
        "native-sidecar",
        "rollout",
        "signal-reload",
        "variants",
    ]);
    assert_eq!(names, expected);
    for ex in &examples {
        let report = check_docs(&ex.docs);
        assert!(
            report.problems.is_empty(),
            "manifests/{}:\n  {}",
            ex.name,
            report.problems.join("\n  ")
        );
        assert!(
            report.confgate_containers > 0,
            "manifests/{} runs no confgate",
            ex.name
        );
    }
}

/// The patterns docs/deploying.md describes: a native sidecar with a startup probe, `wait` plus a regular
/// sidecar, and a signal reload.
#[test]
fn each_example_shows_its_pattern() {
    let examples = examples();
    let find =
        |name: &str| -> &Vec<Value> { &examples.iter().find(|e| e.name == name).unwrap().docs };
    let spec_of = |docs: &Vec<Value>| -> Value {
        docs.iter().find_map(pod_template).unwrap()["spec"].clone()
    };
    let native = spec_of(find("native-sidecar"));
    assert_eq!(
        native["initContainers"][0]["restartPolicy"].as_str(),
        Some("Always")
    );
    assert_eq!(native["initContainers"][0]["args"][0].as_str(), Some("run"));

    let classic = spec_of(find("classic"));
    assert_eq!(
        classic["initContainers"][0]["args"][0].as_str(),
        Some("wait")
    );
    assert!(seq(classic.get("containers")).any(|c| c["args"][0].as_str() == Some("run")));

    let signal = find("signal-reload");
    let tpl = signal.iter().find_map(pod_template).unwrap();
    assert_eq!(
        tpl["metadata"]["annotations"]["confgate.io/reload"].as_str(),
        Some("signal:HUP:component")
    );
    assert_eq!(tpl["spec"]["shareProcessNamespace"].as_bool(), Some(true));
}

/// Changes one pod template the way a manifest edit could.
type Mutation = fn(&mut Value);

/// The checker above is not vacuous: each kind of drift in a manifest is reported.
#[test]
fn drift_is_caught() {
    let base = examples()
        .into_iter()
        .find(|e| e.name == "native-sidecar")
        .unwrap()
        .docs;
    assert!(check_docs(&base).problems.is_empty());

    let mutations: [(&str, Mutation); 8] = [
        ("confgate rejects args", |t| {
            t["spec"]["initContainers"][0]["args"][1] = "--watch-dir".into();
        }),
        ("unknown annotation confgate.io/acepts", |t| {
            let ann = t["metadata"]["annotations"].as_object_mut().unwrap();
            let v = ann.remove("confgate.io/accepts").unwrap();
            ann.insert("confgate.io/acepts".into(), v);
        }),
        ("invalid confgate.io/version-from", |t| {
            t["metadata"]["annotations"]["confgate.io/version-from"] = "toml:config.toml".into();
        }),
        ("the sample ConfigMap component-config is too-old", |t| {
            t["metadata"]["annotations"]["confgate.io/accepts"] = ">=3.0.0".into();
        }),
        ("needs shareProcessNamespace", |t| {
            t["metadata"]["annotations"]["confgate.io/reload"] = "signal:HUP:component".into();
        }),
        ("is not `/confgate probe` for /readyz", |t| {
            t["spec"]["initContainers"][0]["readinessProbe"]["exec"]["command"][2] = "live".into();
        }),
        ("is not a downward-API file", |t| {
            t["spec"]["volumes"][2]["downwardAPI"]["items"][0]["path"] = "labels".into();
        }),
        ("readOnlyRootFilesystem not as restricted requires", |t| {
            t["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] = false.into();
        }),
    ];
    for (expected, mutate) in mutations {
        let mut docs = base.clone();
        let deployment = docs
            .iter_mut()
            .find(|d| str_of(d, "kind") == Some("Deployment"))
            .unwrap();
        mutate(&mut deployment["spec"]["template"]);
        let problems = check_docs(&docs).problems;
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "expected a problem containing {expected:?}, got {problems:#?}"
        );
    }
}
