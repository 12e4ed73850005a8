//! `confgate inject` and the kustomize Component through the real binary and the real tools:
//! `kubernetes-validate --strict` on what they print, `kubectl kustomize` for the Component.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

/// A bare component: its ConfigMap mounted directly, the settings as annotations, no sidecar yet. Also a
/// Service and a workload without confgate.io/accepts, which must pass through untouched.
const BARE: &str = r#"# the component's config
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  config.yaml: |
    schemaVersion: 2.4.1
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        confgate.io/accepts: ">=2.4.0, <3.0.0"
        confgate.io/version-from: "yaml:config.yaml#/schemaVersion"
    spec:
      initContainers:
        - name: migrate
          image: example/web:1
          volumeMounts:
            - {name: config, mountPath: /etc/web}
      containers:
        - name: web
          image: example/web:1
          volumeMounts:
            - {name: config, mountPath: /etc/web}
            - {name: cache, mountPath: /cache}
      volumes:
        - name: config
          configMap: {name: web-config}
        - name: cache
          emptyDir: {}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          annotations:
            confgate.io/accepts: "^2.4"
        spec:
          restartPolicy: OnFailure
          containers:
            - name: report
              image: example/report:1
              volumeMounts:
                - {name: settings, mountPath: /etc/report}
          volumes:
            - name: settings
              configMap: {name: web-config}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: other
spec:
  selector:
    matchLabels: {app: other}
  template:
    metadata:
      labels: {app: other}
    spec:
      containers:
        - name: other
          image: example/other:1
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
    - port: 80
"#;

/// Runs `confgate inject ARGS` with `stdin`; returns (exit code, stdout, stderr).
fn inject(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut cmd = Command::new(common::BIN);
    cmd.arg("inject").args(args);
    let out = common::output_with_stdin(cmd, stdin);
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The `name` of each entry of a list (volumes, containers).
fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect()
}

fn docs(yaml: &str) -> Vec<Value> {
    confgate::inject::documents("test", yaml).unwrap()
}

/// `kubernetes-validate --strict` against Kubernetes 1.33, the first with native sidecars GA.
fn validate(yaml: &str) {
    let kv = common::tool("kubernetes-validate");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(kv)
        .args(["--strict", "--quiet", "-k", "1.33.0"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubernetes-validate --strict refused:\n{}{}\n{yaml}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kind_name(d: &Value) -> (String, String) {
    (
        d["kind"].as_str().unwrap_or_default().to_owned(),
        d["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| kind_name(d) == (kind.to_owned(), name.to_owned()))
        .unwrap_or_else(|| panic!("no {kind}/{name}"))
}

#[test]
fn inject_adds_the_native_sidecar_and_repoints_the_mounts() {
    let (code, out, err) = inject(&[], BARE);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("deployment/web injected"), "{err}");
    assert!(err.contains("cronjob/report injected"), "{err}");
    assert!(err.contains("deployment/other skipped"), "{err}");
    let got = docs(&out);
    assert_eq!(
        got.len(),
        9,
        "every document is printed, with what reporting needs"
    );
    let before = docs(BARE);
    assert_eq!(
        find(&got, "ConfigMap", "web-config"),
        &before[0],
        "the ConfigMap passes through"
    );
    assert_eq!(
        find(&got, "Deployment", "other"),
        &before[3],
        "a workload without confgate.io/accepts passes through"
    );
    assert_eq!(
        find(&got, "Service", "web"),
        &before[4],
        "the Service passes through"
    );
    let own: Vec<(String, String)> = got
        .iter()
        .map(kind_name)
        .filter(|(_, n)| !matches!(n.as_str(), "confgate-reporter" | "confgate-own-pod"))
        .collect();
    let theirs: Vec<(String, String)> = before.iter().map(kind_name).collect();
    assert_eq!(own, theirs, "the input's documents keep their order");

    let spec = &find(&got, "Deployment", "web")["spec"]["template"]["spec"];
    let init = spec["initContainers"].as_array().unwrap();
    assert_eq!(init[0]["name"], "confgate", "the sidecar runs first");
    assert_eq!(init[0]["restartPolicy"], "Always");
    assert_eq!(
        init[0]["startupProbe"]["exec"]["command"],
        serde_json::json!(["/confgate", "probe", "startup"])
    );
    assert_eq!(
        init[0]["readinessProbe"]["exec"]["command"],
        serde_json::json!(["/confgate", "probe", "ready"])
    );
    let sc = &init[0]["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert!(init[0]["resources"]["limits"]["memory"].is_string());
    // The sidecar alone mounts the ConfigMap; the component and the other init container read the
    // promoted copy at their old path.
    assert_eq!(init[0]["volumeMounts"][0]["name"], "config");
    for c in [&init[1], &spec["containers"][0]] {
        let m = &c["volumeMounts"][0];
        assert_eq!(
            (m["name"].as_str(), m["mountPath"].as_str()),
            (Some("confgate-active"), Some("/etc/web"))
        );
        assert_eq!(m["readOnly"], true);
    }
    assert_eq!(
        spec["containers"][0]["volumeMounts"][1]["name"], "cache",
        "other mounts untouched"
    );
    let volumes = names(&spec["volumes"]);
    assert_eq!(
        volumes,
        [
            "config",
            "cache",
            "confgate-active",
            "confgate-podinfo",
            "confgate-token"
        ]
    );
    assert_eq!(spec["volumes"][0]["configMap"]["optional"], true);
    // The promoted dir on tmpfs, bounded (docs/deploying.md says why).
    assert_eq!(
        spec["volumes"][2]["emptyDir"],
        serde_json::json!({"medium": "Memory", "sizeLimit": "4Mi"})
    );
    assert_eq!(
        spec["volumes"][3]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.annotations"
    );

    let cron = &find(&got, "CronJob", "report")["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(cron["initContainers"][0]["name"], "confgate");
    assert_eq!(
        cron["containers"][0]["volumeMounts"][0]["name"],
        "confgate-active"
    );
    validate(&out);
}

#[test]
fn inject_twice_changes_nothing() {
    let (_, once, _) = inject(&[], BARE);
    let (code, twice, err) = inject(&["-"], &once);
    assert_eq!(code, 0, "{err}");
    assert_eq!(once, twice);
    assert!(
        err.contains("deployment/web skipped: already has a confgate container"),
        "{err}"
    );
}

#[test]
fn inject_reads_files_and_takes_the_image() {
    // Manifests from a file, and the image chosen on the command line.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bare.yaml");
    std::fs::write(&file, BARE).unwrap();
    let (code, out, err) = inject(
        &[
            "--image",
            "registry.example/confgate:dev",
            file.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let got = docs(&out);
    assert_eq!(
        find(&got, "Deployment", "web")["spec"]["template"]["spec"]["initContainers"][0]["image"],
        "registry.example/confgate:dev"
    );
    validate(&out);
}

#[test]
fn inject_refuses_what_it_cannot_gate() {
    let two = BARE.replace(
        "        - name: cache\n          emptyDir: {}\n",
        "        - name: cache\n          configMap: {name: cache}\n",
    );
    let (code, out, err) = inject(&[], &two);
    assert_eq!(code, 64);
    assert!(out.is_empty(), "nothing printed on failure: {out}");
    assert!(
        err.contains("deployment/web: several ConfigMap volumes (config, cache); name the one to gate with --volume"),
        "{err}"
    );
    // --volume names the volume in every workload of the stream.
    let two = two
        .replace("{name: settings,", "{name: config,")
        .replace("- name: settings", "- name: config");
    let (code, out, err) = inject(&["--volume", "config"], &two);
    assert_eq!(code, 0, "{err}");
    let got = docs(&out);
    let spec = &find(&got, "Deployment", "web")["spec"]["template"]["spec"];
    assert_eq!(
        spec["initContainers"][0]["volumeMounts"][0]["name"],
        "config"
    );
    assert_eq!(spec["containers"][0]["volumeMounts"][1]["name"], "cache");

    let sub = BARE.replace(
        "            - {name: config, mountPath: /etc/web}\n            - {name: cache",
        "            - {name: config, mountPath: /etc/web/config.yaml, subPath: config.yaml}\n            - {name: cache",
    );
    let (code, _, err) = inject(&[], &sub);
    assert_eq!(code, 64);
    assert!(
        err.contains("mounted with subPath, which the kubelet never updates"),
        "{err}"
    );

    let (code, _, err) = inject(&[], "kind: [unclosed");
    assert_eq!(code, 64);
    assert!(
        err.contains("standard input: not valid YAML or JSON"),
        "{err}"
    );
}

/// Streams past 1024 documents are injected; past the documented limit the message names it.
#[test]
fn inject_reads_large_streams_up_to_the_documented_limit() {
    // 1100 documents, past the parser's default of 1024.
    let n = 220;
    let stream = vec![BARE; n].join("---\n");
    let (code, out, err) = inject(&[], &stream);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        docs(&out).len(),
        5 * n + 4,
        "with one policy, its binding, one Role and one RoleBinding"
    );
    let limit = 100_000;
    let (code, out, err) = inject(&[], &"---\n{}\n".repeat(limit + 1));
    assert_eq!((code, out.as_str()), (64, ""));
    assert_eq!(
        err,
        format!(
            "confgate: standard input: more than {limit} documents; check and inject read at most {limit} documents per input (split the stream into several inputs)\n"
        )
    );
}

/// A `configMap:` that is not a mapping is refused by name (exit 64), whatever it is instead.
#[test]
fn inject_refuses_a_config_map_field_that_is_not_a_mapping() {
    for (value, shape) in [
        ("web-config", "a string"),
        ("42", "a number"),
        ("[web-config]", "a list"),
        ("true", "a boolean"),
        ("null", "null"),
    ] {
        let bad = BARE.replace(
            "configMap: {name: web-config}\n        - name: cache",
            &format!("configMap: {value}\n        - name: cache"),
        );
        assert_ne!(bad, BARE);
        let (code, out, err) = inject(&[], &bad);
        assert_eq!(code, 64, "{value}: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains(&format!(
                "deployment/web: volume config: configMap is {shape}, not a mapping"
            )),
            "{value}: {err}"
        );
    }
}

/// No shape of a workload makes inject panic: every node of the annotated Deployment, in turn,
/// replaced by a value of each other type, gives an injection or an error.
#[test]
fn no_field_of_another_type_makes_inject_panic() {
    fn paths(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    out.push(p.clone());
                    paths(x, p, out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    let p = format!("{at}/{i}");
                    out.push(p.clone());
                    paths(x, p, out);
                }
            }
            _ => {}
        }
    }
    let web = docs(BARE)[1].clone();
    let mut all = Vec::new();
    paths(&web, String::new(), &mut all);
    assert!(all.len() > 40, "{}", all.len());
    let replacements = [
        Value::Null,
        json!("x"),
        json!(9797),
        json!(true),
        json!([1]),
        json!({"a": 1}),
    ];
    let mut outcomes = [0usize; 2];
    for path in &all {
        for r in &replacements {
            let mut doc = web.clone();
            *doc.pointer_mut(path).unwrap() = r.clone();
            let got = std::panic::catch_unwind(|| {
                let mut docs = vec![doc.clone()];
                confgate::inject::inject_all(&mut docs, &Default::default())
                    .map(|_| confgate::inject::render(&docs).unwrap())
            });
            match got {
                Ok(r) => outcomes[usize::from(r.is_ok())] += 1,
                Err(_) => panic!("inject panicked with {path} = {r}"),
            }
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

/// Another container's port 9797 would make the sidecar fail with `Address already in use`: confgate
/// moves to the next port no container declares, says so, and its probes follow it (the exec probes
/// read `CONFGATE_LISTEN`, the liveness probe the port's name).
#[test]
fn inject_moves_confgate_off_a_port_another_container_uses() {
    let taken = BARE.replace(
        "        - name: web\n          image: example/web:1\n",
        "        - name: web\n          image: example/web:1\n          ports:\n            - {containerPort: 9797}\n            - {containerPort: 9798, name: admin}\n",
    );
    let taken = taken.replace(
        "        - name: migrate\n          image: example/web:1\n",
        "        - name: migrate\n          image: example/web:1\n          ports: [{containerPort: 9799}]\n",
    );
    let (code, yaml, err) = inject(&[], &taken);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("port 9797 is container web's, so confgate listens on 9800 (CONFGATE_LISTEN)"),
        "{err}"
    );
    let got = docs(&yaml);
    let sidecar = &find(&got, "Deployment", "web")["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(
        sidecar["ports"],
        json!([{"name": "confgate", "containerPort": 9800}])
    );
    assert_eq!(
        sidecar["env"][0],
        json!({"name": "CONFGATE_LISTEN", "value": "[::]:9800"})
    );
    // Every probe is exec, so each reads CONFGATE_LISTEN like `run` does.
    assert_eq!(
        sidecar["livenessProbe"]["exec"]["command"],
        json!(["/confgate", "probe", "live"])
    );
    // The exec probe, run with the container's environment, asks the moved port.
    let probe = sidecar["startupProbe"]["exec"]["command"]
        .as_array()
        .unwrap();
    assert_eq!(probe[0], "/confgate");
    let args: Vec<&str> = probe[1..].iter().map(|a| a.as_str().unwrap()).collect();
    let out = Command::new(common::BIN)
        .args(&args)
        .args(["--timeout", "2s"])
        .env_remove("CONFGATE_PROBE_ADDR")
        .env(
            "CONFGATE_LISTEN",
            sidecar["env"][0]["value"].as_str().unwrap(),
        )
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("http://127.0.0.1:9800/startupz"), "{said}");
    // The CronJob's pod declares no port: the default, and no environment.
    let cron = &find(&got, "CronJob", "report")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        ["initContainers"][0];
    assert_eq!(cron["ports"][0]["containerPort"], 9797);
    assert!(!env_names(cron).contains(&"CONFGATE_LISTEN"), "{cron}");
    validate(&yaml);
}

/// The Component, built the way users build it, gives the same sidecar and passes strict validation.
#[test]
fn the_component_builds_and_validates() {
    let kubectl = common::tool("kubectl");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/component-example");
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    let got = docs(&yaml);
    let spec = &find(&got, "Deployment", "component-kustomized")["spec"]["template"]["spec"];
    let sidecar = &spec["initContainers"][0];
    assert_eq!(sidecar["name"], "confgate");
    assert_eq!(sidecar["restartPolicy"], "Always");
    assert_eq!(
        sidecar["startupProbe"]["exec"]["command"],
        serde_json::json!(["/confgate", "probe", "startup"])
    );
    // The same sidecar as inject's, but for the volume it mounts the ConfigMap from.
    let (_, injected, _) = inject(&[], BARE);
    let mut theirs =
        find(&docs(&injected), "Deployment", "web")["spec"]["template"]["spec"]["initContainers"]
            [0]
        .clone();
    theirs["volumeMounts"][0]["name"] = "confgate-incoming".into();
    assert_eq!(*sidecar, theirs);
    let volumes = names(&spec["volumes"]);
    assert_eq!(
        volumes,
        [
            "confgate-incoming",
            "confgate-active",
            "confgate-podinfo",
            "confgate-token"
        ]
    );
    // Its Role, bound to the ServiceAccount the workload runs as by the Component's convention.
    assert_eq!(spec["serviceAccountName"], "confgate");
    let binding = find(&got, "RoleBinding", "confgate-reporter");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "confgate"}])
    );
    find(&got, "Role", "confgate-reporter");
    assert_eq!(
        spec["volumes"][0]["configMap"]["name"],
        "component-kustomized-config"
    );
    assert_eq!(spec["volumes"][0]["configMap"]["optional"], true);
    validate(&yaml);
}

/// Workloads of every kind `inject` handles, as their owners write them for the Component: labelled, the
/// ConfigMap as volume `confgate-incoming`.
const LABELLED: &str = r#"apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
  labels: {confgate.io/inject: enabled}
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {confgate.io/accepts: "^2.4"}
        spec:
          restartPolicy: OnFailure
          containers:
            - name: report
              image: example/report:1
              volumeMounts: [{name: confgate-active, mountPath: /etc/report, readOnly: true}]
          volumes:
            - name: confgate-incoming
              configMap: {name: report-config}
---
apiVersion: v1
kind: Pod
metadata:
  name: once
  labels: {confgate.io/inject: enabled}
  annotations: {confgate.io/accepts: "^2.4"}
spec:
  containers:
    - name: once
      image: example/once:1
      volumeMounts: [{name: confgate-active, mountPath: /etc/once, readOnly: true}]
  volumes:
    - name: confgate-incoming
      configMap: {name: once-config}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: rs
  labels: {confgate.io/inject: enabled}
spec:
  selector:
    matchLabels: {app: rs}
  template:
    metadata:
      labels: {app: rs}
      annotations: {confgate.io/accepts: "^2.4"}
    spec:
      containers:
        - name: rs
          image: example/rs:1
          volumeMounts: [{name: confgate-active, mountPath: /etc/rs, readOnly: true}]
      volumes:
        - name: confgate-incoming
          configMap: {name: rs-config}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: unlabelled
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: c
              image: example/c:1
"#;

/// The Component covers every kind `inject` covers, CronJobs and bare Pods included, with the same
/// sidecar; a workload without the label is left alone.
#[test]
fn the_component_covers_every_kind_inject_does() {
    let kubectl = common::tool("kubectl");
    // kustomize takes a component by a relative path only: a copy of it beside the workloads.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("component")).unwrap();
    std::fs::create_dir(dir.path().join("own-pod")).unwrap();
    for f in [
        "component/kustomization.yaml",
        "component/rbac.yaml",
        "own-pod/kustomization.yaml",
        "own-pod/policy.yaml",
    ] {
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("manifests")
                .join(f),
            dir.path().join(f),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("workloads.yaml"), LABELLED).unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [workloads.yaml]\ncomponents: [component]\n",
    )
    .unwrap();
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    let got = docs(&yaml);
    // inject's sidecar, for the volume the Component's convention names.
    let (_, injected, _) = inject(&[], BARE);
    let mut theirs =
        find(&docs(&injected), "Deployment", "web")["spec"]["template"]["spec"]["initContainers"]
            [0]
        .clone();
    theirs["volumeMounts"][0]["name"] = "confgate-incoming".into();
    let specs = [
        &find(&got, "CronJob", "report")["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        &find(&got, "Pod", "once")["spec"],
        &find(&got, "ReplicaSet", "rs")["spec"]["template"]["spec"],
    ];
    for spec in specs {
        assert_eq!(spec["initContainers"][0], theirs, "{spec}");
        assert_eq!(
            names(&spec["volumes"]),
            [
                "confgate-incoming",
                "confgate-active",
                "confgate-podinfo",
                "confgate-token"
            ]
        );
        assert_eq!(spec["volumes"][0]["configMap"]["optional"], true);
    }
    // Not labelled: untouched, and no pod template grafted onto the CronJob's spec.
    let unlabelled = &find(&got, "CronJob", "unlabelled")["spec"];
    assert!(unlabelled.get("template").is_none(), "{unlabelled}");
    assert!(
        unlabelled["jobTemplate"]["spec"]["template"]["spec"]
            .get("initContainers")
            .is_none()
    );
    let report = &find(&got, "CronJob", "report")["spec"];
    assert!(report.get("template").is_none(), "{report}");
    validate(&yaml);
}

/// A misspelled or bad `confgate.io/` annotation is refused as `check` refuses it (exit 64, naming the
/// workload and the annotation), not passed to a sidecar that would never be ready; a typo in the
/// `accepts` annotation itself does not skip the workload in silence.
#[test]
fn inject_refuses_bad_and_unknown_annotations_as_check_does() {
    let typo = BARE.replace(
        "        confgate.io/version-from:",
        "        confgate.io/relaod: \"http://127.0.0.1:8080/reload\"\n        confgate.io/version-from:",
    );
    let (code, out, err) = inject(&[], &typo);
    assert_eq!(code, 64, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("deployment/web") && err.contains("unknown annotation confgate.io/relaod"),
        "{err}"
    );
    // check says the same of the same stream.
    let mut cmd = Command::new(common::BIN);
    cmd.args(["check", "-"]);
    let checked = common::output_with_stdin(cmd, &typo);
    assert_eq!(checked.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&checked.stderr).contains("confgate.io/relaod"));

    let missing_s = BARE.replace(
        "confgate.io/accepts: \">=2.4.0",
        "confgate.io/accept: \">=2.4.0",
    );
    let (code, _, err) = inject(&[], &missing_s);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("unknown annotation confgate.io/accept;"),
        "{err}"
    );

    let bad = BARE.replace("\">=2.4.0, <3.0.0\"", "\"not a range\"");
    let (code, _, err) = inject(&[], &bad);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("deployment/web") && err.contains("confgate.io/accepts"),
        "{err}"
    );
}

/// `--image` must be an image reference the kubelet can pull.
#[test]
fn inject_refuses_an_image_that_is_no_reference() {
    for image in [
        "",
        "not a valid image!!",
        "Upper/Case:1",
        "registry.example/confgate:",
        "x@sha256:abc",
    ] {
        let (code, out, err) = inject(&["--image", image], BARE);
        assert_eq!(code, 64, "--image {image:?}: {err}");
        assert!(out.is_empty());
        assert!(err.contains("--image"), "{err}");
    }
    for image in [
        "confgate",
        "registry.example/confgate:0.1.0",
        "localhost:5000/team/confgate:v1.2_rc-1",
        "localhost/confgate/confgate@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        let (code, _, err) = inject(&["--image", image], BARE);
        assert_eq!(code, 0, "--image {image:?}: {err}");
    }
}

/// A projected volume of ConfigMaps is gated like a ConfigMap volume; one that projects a ConfigMap
/// with a source of another kind is refused, saying why.
#[test]
fn inject_gates_a_projected_config_map_volume() {
    // The Deployment's volume (the first), not the CronJob's.
    let projected = BARE.replacen(
        "        - name: config\n          configMap: {name: web-config}\n",
        "        - name: config\n          projected:\n            sources:\n              - configMap: {name: web-config}\n              - configMap: {name: web-extra}\n",
        1,
    );
    let (code, out, err) = inject(&[], &projected);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("deployment/web injected: gates volume config"),
        "{err}"
    );
    let got = docs(&out);
    let spec = &find(&got, "Deployment", "web")["spec"]["template"]["spec"];
    assert_eq!(
        spec["initContainers"][0]["volumeMounts"][0]["name"],
        "config"
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"][0]["name"],
        "confgate-active"
    );
    for s in spec["volumes"][0]["projected"]["sources"]
        .as_array()
        .unwrap()
    {
        assert_eq!(s["configMap"]["optional"], true, "{s}");
    }
    validate(&out);

    let mixed = BARE.replacen(
        "        - name: config\n          configMap: {name: web-config}\n",
        "        - name: config\n          projected:\n            sources:\n              - configMap: {name: web-config}\n              - secret: {name: web-tls}\n",
        1,
    );
    let (code, out, err) = inject(&[], &mixed);
    assert_eq!(code, 64, "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("volume config projects a ConfigMap together with secret")
            && err.contains("give the ConfigMap a volume of its own"),
        "{err}"
    );
}

/// The name of each `env` entry of a container.
fn env_names(c: &Value) -> Vec<&str> {
    c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

/// An injected sidecar reports to its pod, as the native-sidecar example does: the downward-API
/// identity, a token mounted into confgate's container alone, and the ServiceAccount, Role and
/// RoleBinding (once per namespace) that `kubectl describe pod` and `confgate status` need. A pod with
/// a ServiceAccount of its own keeps it and gets the Role bound to it; `--pod-report off` adds none of
/// this.
#[test]
fn inject_makes_the_sidecar_report_to_its_pod() {
    let (code, out, err) = inject(&[], BARE);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("deployment/web injected")
            && err
                .contains("reports to its pod as the pod's own ServiceAccount default, unchanged"),
        "{err}"
    );
    for added in [
        "added ValidatingAdmissionPolicy confgate-own-pod",
        "added ValidatingAdmissionPolicyBinding confgate-own-pod",
        "added Role (the namespace applied to)/confgate-reporter",
        "; get and patch ConfigMap(s) web-config.confgate-known-good (the known-good record), and \
         create ConfigMaps, any name in the namespace (a create cannot be narrowed by name",
        "added RoleBinding (the namespace applied to)/confgate-reporter: Role confgate-reporter for \
         the pods' own ServiceAccount(s) default, unchanged",
    ] {
        assert!(err.contains(added), "{added}: {err}");
    }
    let got = docs(&out);
    let spec = &find(&got, "Deployment", "web")["spec"]["template"]["spec"];
    let sidecar = &spec["initContainers"][0];
    assert_eq!(env_names(sidecar), ["POD_NAME", "POD_NAMESPACE", "POD_UID"]);
    assert_eq!(
        sidecar["env"][2]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.uid"
    );
    // What the pod runs as is what it ran as.
    assert!(spec.get("serviceAccountName").is_none(), "{spec}");
    assert!(spec.get("automountServiceAccountToken").is_none(), "{spec}");
    assert!(!got.iter().any(|d| d["kind"] == "ServiceAccount"));
    let token = "/var/run/secrets/kubernetes.io/serviceaccount";
    let mounts = |c: &Value| -> Vec<String> {
        c["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m["mountPath"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(mounts(sidecar).iter().any(|m| m == token), "{sidecar}");
    // One set of reporting objects for both workloads of the namespace.
    let role = find(&got, "Role", "confgate-reporter");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
            {"apiGroups": ["confgate.io"], "resources": ["pods"], "verbs": ["report-own-pod-only"]},
            // The known-good record of the ConfigMap it gates, by name; its creation.
            {"apiGroups": [""], "resources": ["configmaps"],
             "resourceNames": ["web-config.confgate-known-good"], "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        ])
    );
    let binding = find(&got, "RoleBinding", "confgate-reporter");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "default"}])
    );
    find(&got, "ValidatingAdmissionPolicy", "confgate-own-pod");
    find(&got, "ValidatingAdmissionPolicyBinding", "confgate-own-pod");
    assert_eq!(got.iter().filter(|d| d["kind"] == "Role").count(), 1);
    validate(&out);

    // A pod running as its own ServiceAccount keeps it (and its token); the Role is bound to it.
    let own = BARE.replace(
        "    spec:\n      initContainers:",
        "    spec:\n      serviceAccountName: web\n      initContainers:",
    );
    let (code, out, err) = inject(&[], &own);
    assert_eq!(code, 0, "{err}");
    let got = docs(&out);
    let spec = &find(&got, "Deployment", "web")["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "web");
    assert!(spec.get("automountServiceAccountToken").is_none(), "{spec}");
    assert_eq!(
        find(&got, "RoleBinding", "confgate-reporter")["subjects"],
        json!([
            {"kind": "ServiceAccount", "name": "default"},
            {"kind": "ServiceAccount", "name": "web"},
        ]),
        "the CronJob runs as default, the Deployment as web"
    );

    // Workloads in two namespaces get the objects in each, and the policy once.
    let two = BARE.replace(
        "kind: Deployment\nmetadata:\n  name: web\n",
        "kind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n",
    );
    let (_, out, _) = inject(&[], &two);
    let got = docs(&out);
    let roles: Vec<_> = got
        .iter()
        .filter(|d| d["kind"] == "Role")
        .map(|d| d["metadata"]["namespace"].as_str())
        .collect();
    assert_eq!(roles, [None, Some("shop")]);
    assert_eq!(
        got.iter()
            .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
            .count(),
        1
    );

    let (code, out, err) = inject(&["--pod-report", "off"], BARE);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("does not report to its pod (--pod-report off)") && !err.contains("added "),
        "{err}"
    );
    let got = docs(&out);
    assert_eq!(got.len(), 5, "no reporting objects");
    let spec = &find(&got, "Deployment", "web")["spec"]["template"]["spec"];
    assert!(env_names(&spec["initContainers"][0]).is_empty());
    assert!(spec.get("serviceAccountName").is_none());
    assert!(!names(&spec["volumes"]).contains(&"confgate-token"));
}

/// A pod whose reload is a signal gets what a signal needs: `shareProcessNamespace: true` (without
/// it confgate sees no other process and the reload could never reach the component) and confgate
/// running as the component's user; a pod that forbids either is refused with the reason.
#[test]
fn inject_sets_what_a_signal_reload_needs_or_refuses() {
    let daemon = |extra: &str, user: &str| {
        format!(
            r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {{app: agent}}
  template:
    metadata:
      labels: {{app: agent}}
      annotations:
        confgate.io/accepts: "^1"
        confgate.io/reload: "signal:HUP:agent"
    spec:
{extra}      containers:
        - name: agent
          image: example/agent:1
{user}          volumeMounts: [{{name: config, mountPath: /etc/agent}}]
      volumes:
        - name: config
          configMap: {{name: agent-config}}
"#
        )
    };
    let (code, out, err) = inject(&[], &daemon("", ""));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("shareProcessNamespace: true"), "{err}");
    assert!(
        err.contains("agent must run as the same user"),
        "an undeclared user is named: {err}"
    );
    let got = docs(&out);
    let spec = &find(&got, "DaemonSet", "agent")["spec"]["template"]["spec"];
    assert_eq!(spec["shareProcessNamespace"], true);
    validate(&out);

    let user = "          securityContext: {runAsUser: 1000, runAsGroup: 2000}\n";
    let (code, out, err) = inject(&[], &daemon("", user));
    assert_eq!(code, 0, "{err}");
    let got = docs(&out);
    let sc = &find(&got, "DaemonSet", "agent")["spec"]["template"]["spec"]["initContainers"][0]["securityContext"];
    assert_eq!(
        (sc["runAsUser"].as_u64(), sc["runAsGroup"].as_u64()),
        (Some(1000), Some(2000))
    );
    assert!(err.contains("confgate runs as user 1000"), "{err}");

    let (code, out, err) = inject(&[], &daemon("      shareProcessNamespace: false\n", ""));
    assert_eq!(code, 64, "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("daemonset/agent") && err.contains("shareProcessNamespace: true"),
        "{err}"
    );
    let root = "          securityContext: {runAsUser: 0}\n";
    let (code, _, err) = inject(&[], &daemon("", root));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("run as root"), "{err}");
    // An HTTP reload needs none of it.
    let http = daemon("", "").replace("signal:HUP:agent", "http://127.0.0.1:8080/reload");
    let (code, out, err) = inject(&[], &http);
    assert_eq!(code, 0, "{err}");
    assert!(
        find(&docs(&out), "DaemonSet", "agent")["spec"]["template"]["spec"]
            .get("shareProcessNamespace")
            .is_none()
    );
}

/// `hostNetwork` pods share the node's ports: each injected sidecar listens on loopback only (its
/// /status and /metrics not on the node's address) at a port no other `hostNetwork` pod of the input
/// declares, and the probes follow through `CONFGATE_LISTEN`.
#[test]
fn inject_keeps_host_network_sidecars_on_loopback_and_apart() {
    let daemon = |name: &str, port: &str| {
        format!(
            r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
      annotations:
        confgate.io/accepts: "^1"
    spec:
      hostNetwork: true
      containers:
        - name: {name}
          image: example/{name}:1
{port}          volumeMounts: [{{name: config, mountPath: /etc/{name}}}]
      volumes:
        - name: config
          configMap: {{name: {name}-config}}
"#
        )
    };
    let input = format!(
        "{}---\n{}---\n{}",
        daemon("a", ""),
        daemon("b", ""),
        daemon("c", "          ports: [{containerPort: 9799}]\n")
    );
    let (code, out, err) = inject(&[], &input);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("listens on 127.0.0.1:9797 only"), "{err}");
    let got = docs(&out);
    let listen = |name: &str| {
        let c = &find(&got, "DaemonSet", name)["spec"]["template"]["spec"]["initContainers"][0];
        let env = c["env"].as_array().unwrap();
        let l = env.iter().find(|e| e["name"] == "CONFGATE_LISTEN").unwrap();
        (
            l["value"].as_str().unwrap().to_owned(),
            c["ports"][0]["containerPort"].as_u64().unwrap(),
        )
    };
    assert_eq!(listen("a"), ("127.0.0.1:9797".to_owned(), 9797));
    assert_eq!(listen("b"), ("127.0.0.1:9798".to_owned(), 9798));
    assert_eq!(
        listen("c"),
        ("127.0.0.1:9800".to_owned(), 9800),
        "9799 is c's own"
    );
    validate(&out);
    // A pod on its own network keeps the default, all addresses, no CONFGATE_LISTEN.
    let (_, out, _) = inject(
        &[],
        &daemon("a", "").replace("      hostNetwork: true\n", ""),
    );
    let got = docs(&out);
    let c = &find(&got, "DaemonSet", "a")["spec"]["template"]["spec"]["initContainers"][0];
    assert!(!env_names(c).contains(&"CONFGATE_LISTEN"), "{c}");
}

/// A first plain `kubectl apply -f` of inject's output meets what it adds before the pods that need
/// it, for every input these tests inject, bare Pods included: the own-pod policy and its binding (so
/// the rights are limited before they are granted), the Role, the RoleBinding, in that order.
#[test]
fn inject_puts_what_it_adds_before_the_pods_that_use_it() {
    let bare_pod = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: once-config}
data: {config.yaml: "schemaVersion: 2.4.1"}
---
apiVersion: v1
kind: Pod
metadata:
  name: once
  annotations: {confgate.io/accepts: "^2.4"}
spec:
  containers:
    - name: once
      image: example/once:1
      volumeMounts: [{name: config, mountPath: /etc/once}]
  volumes:
    - name: config
      configMap: {name: once-config}
"#;
    let two_namespaces = BARE.replace(
        "kind: Deployment\nmetadata:\n  name: web\n",
        "kind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n",
    );
    let in_a_namespace = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n{}",
        bare_pod.replace("  name: once\n", "  name: once\n  namespace: shop\n")
    );
    for (what, input) in [
        ("BARE", BARE.to_owned()),
        ("a bare Pod", bare_pod.to_owned()),
        ("two namespaces", two_namespaces),
        ("a Namespace, then a bare Pod in it", in_a_namespace),
        (
            "the labelled workloads",
            LABELLED
                .replace("confgate-active", "config")
                .replace("confgate-incoming", "config"),
        ),
    ] {
        let (code, out, err) = inject(&[], &input);
        assert_eq!(code, 0, "{what}: {err}");
        let got = docs(&out);
        const ADDED: [&str; 4] = [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "Role",
            "RoleBinding",
        ];
        let added: Vec<&str> = got
            .iter()
            .filter_map(|d| d["kind"].as_str())
            .filter(|k| ADDED.contains(k))
            .collect();
        assert!(added.len() >= 4, "{what}: {added:?}");
        let mut sorted = added.clone();
        sorted.sort_by_key(|k| ADDED.iter().position(|x| x == k));
        assert_eq!(added, sorted, "{what}");
        let first_own = got
            .iter()
            .position(|d| {
                !matches!(d["kind"].as_str(), Some(k) if ADDED.contains(&k) || k == "Namespace")
            })
            .unwrap();
        assert_eq!(
            first_own,
            added.len() + usize::from(got[0]["kind"] == "Namespace"),
            "{what}: what inject adds comes first: {:?}",
            got.iter().map(kind_name).collect::<Vec<_>>()
        );
        if what.starts_with("a Namespace") {
            assert_eq!(
                kind_name(&got[0]),
                ("Namespace".to_owned(), "shop".to_owned()),
                "{what}: the Namespace stays first"
            );
        }
    }
}

/// docs/validate.md's layout: an init container copies the checker into an emptyDir. A native
/// sidecar's startup probe must pass before the next init container starts, and it passes only once a
/// config is accepted, which needs the checker: so confgate starts after the copy and mounts the
/// volume where the checker's path says. Where it cannot, inject refuses with the reason.
#[test]
fn inject_starts_confgate_after_the_init_container_that_copies_its_checker() {
    let prometheus = |init: &str, validate: &str| {
        format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: prometheus}}
spec:
  selector: {{matchLabels: {{app: prometheus}}}}
  template:
    metadata:
      labels: {{app: prometheus}}
      annotations:
        confgate.io/accepts: "^2"
        confgate.io/version-from: "yaml:prometheus.yml#/version"
        confgate.io/validate: "{validate}"
    spec:
      initContainers:
{init}
      containers:
        - name: prometheus
          image: quay.io/prometheus/prometheus:v2.53.0
          volumeMounts: [{{name: config, mountPath: /etc/prometheus}}]
      volumes:
        - name: config
          configMap: {{name: prometheus-config}}
        - name: validators
          emptyDir: {{sizeLimit: 200Mi}}
"#
        )
    };
    let copy = r#"        - name: copy-promtool
          image: quay.io/prometheus/prometheus:v2.53.0
          command: ["cp", "/bin/promtool", "/validators/promtool"]
          volumeMounts: [{name: validators, mountPath: /validators}]"#;
    let promtool = "exec:/validators/promtool check config {dir}/prometheus.yml";
    let (code, out, err) = inject(&[], &prometheus(copy, promtool));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("confgate starts after init container(s) copy-promtool"),
        "{err}"
    );
    let got = docs(&out);
    let spec = &find(&got, "Deployment", "prometheus")["spec"]["template"]["spec"];
    assert_eq!(
        names(&spec["initContainers"]),
        ["copy-promtool", "confgate"],
        "the copy first"
    );
    assert!(
        spec["initContainers"][1]["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "validators", "mountPath": "/validators", "readOnly": true})),
        "{}",
        spec["initContainers"][1]
    );
    // The checker the template's annotation names is the manifest author's, who writes the container
    // spec too: it is put in the sidecar's spec, where a later patch of the pod's annotations can only
    // pick it or turn it off.
    let env = spec["initContainers"][1]["env"].as_array().expect("env");
    assert!(
        env.contains(&json!({"name": "CONFGATE_VALIDATE", "value": promtool})),
        "{env:?}"
    );
    validate(&out);

    // A checker no container puts anywhere: refused, naming it.
    let (code, out, err) = inject(&[], &prometheus("        []", "exec:/opt/promtool {dir}"));
    assert_eq!((code, out.as_str()), (64, ""), "{err}");
    assert!(
        err.contains("confgate.io/validate runs /opt/promtool, but no container of the pod mounts"),
        "{err}"
    );

    // An init container that reads the config ahead of the copy: confgate cannot be both before and
    // after it.
    let reads_first = format!(
        r#"        - name: migrate
          image: example/migrate:1
          volumeMounts: [{{name: config, mountPath: /etc/prometheus}}]
{copy}"#
    );
    let (code, _, err) = inject(&[], &prometheus(&reads_first, promtool));
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains(
            "init container migrate reads the config, and runs no later than copy-promtool"
        ),
        "{err}"
    );
}

/// `inject --policy` prints the own-pod policy, then the MutatingAdmissionPolicy and its binding:
/// labelled pods only, kube-system and confgate's own namespace left alone, `failurePolicy: Fail`,
/// idempotent, and no mutation touches what the pod runs as. `tests/cluster/inject_policy.rs` runs it.
#[test]
fn inject_policy_prints_the_admission_policy() {
    let (code, out, err) = inject(&["--policy", "--own-namespace", "gates"], "");
    assert_eq!(code, 0, "{err}");
    let got = docs(&out);
    let kinds: Vec<&str> = got.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding"
        ]
    );
    let policy = &got[2]["spec"];
    assert_eq!(policy["failurePolicy"], "Fail");
    assert_eq!(policy["reinvocationPolicy"], "IfNeeded");
    let binding = &got[3]["spec"]["matchResources"];
    assert_eq!(
        binding["objectSelector"],
        json!({"matchLabels": {"confgate.io/inject": "enabled"}})
    );
    assert_eq!(
        binding["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["kube-system", "gates"])
    );
    let text = policy.to_string();
    assert!(
        !text.contains("serviceAccountName") && !text.contains("automountServiceAccountToken"),
        "what the pod runs as is never touched"
    );
    assert!(text.contains("localhost/confgate/confgate:"), "{text}");
    let (_, out, _) = inject(&["--policy", "--pod-report", "off"], "");
    assert_eq!(docs(&out).len(), 2, "no own-pod policy without reporting");
    let (code, _, err) = inject(&["--policy", "x.yaml"], "");
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("'--policy' cannot be used with"), "{err}");
}
