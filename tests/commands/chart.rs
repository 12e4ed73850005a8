//! The Helm chart `charts/confgate` with the real Helm v4: it lints, renders manifests
//! `kubernetes-validate --strict` accepts, renders the policies `confgate inject --policy` and
//! `confgate policy` print and the alert rules `docs/endpoints.md` shows; a component chart including
//! its sidecar templates (`tests/fixtures/component-chart`) renders the pod `confgate inject` makes; and
//! `confgate inject` works as Helm's post-renderer, installed as the plugin in `helm-plugin/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("charts/confgate")
}

/// Helm with its config, data and cache in `home`, so no plugin or repository of the machine's
/// user takes part, and the plugins it installs stay in the test's dir.
fn helm_in(home: &Path) -> Command {
    let mut cmd = Command::new(common::helm());
    cmd.env_remove("HELM_PLUGINS")
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("HELM_CACHE_HOME", home.join("cache"));
    cmd
}

/// Runs `cmd`; its standard output, or a failure of the test with its standard error.
fn ok(mut cmd: Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `helm template RELEASE CHART -n NS ARGS`.
fn template(home: &Path, chart: &Path, ns: &str, args: &[&str]) -> String {
    let mut cmd = helm_in(home);
    cmd.args(["template", "confgate"])
        .arg(chart)
        .args(["--namespace", ns])
        .args(args);
    ok(cmd)
}

fn docs(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The documents by kind and name.
fn by_name(docs: &[Value]) -> BTreeMap<(String, String), Value> {
    docs.iter()
        .map(|d| {
            let k = d["kind"].as_str().unwrap_or_default().to_owned();
            let n = d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            ((k, n), d.clone())
        })
        .collect()
}

/// `confgate ARGS`'s standard output.
fn confgate(args: &[&str]) -> String {
    let mut cmd = common::confgate_alone();
    cmd.args(args);
    ok(cmd)
}

/// `kubernetes-validate --strict` against Kubernetes 1.36, the first serving
/// MutatingAdmissionPolicy as v1. The Prometheus Operator's kinds have no schema there (a warning);
/// they are compared with the shipped ones instead.
fn validate(yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(common::tool("kubernetes-validate"))
        .args(["--strict", "--quiet", "-k", "1.36.0"])
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

/// Every optional part on.
const ALL: &[&str] = &[
    "--set",
    "podMonitor.enabled=true,alertRules.enabled=true",
    "--set",
    "statusReader.enabled=true,statusReader.configMap=webhook-config",
];

#[test]
fn the_chart_lints() {
    let home = tempfile::tempdir().unwrap();
    for values in [&[][..], ALL] {
        let mut cmd = helm_in(home.path());
        cmd.args(["lint", "--strict"]).arg(chart()).args(values);
        let out = ok(cmd);
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
}

// The chart's ConfigMap policy is `confgate policy`'s output: a build with the `policy` feature.
#[cfg(feature = "policy")]
#[test]
fn the_chart_renders_valid_manifests() {
    let home = tempfile::tempdir().unwrap();
    let policy = home.path().join("policy.yaml");
    std::fs::write(
        &policy,
        confgate(&[
            "policy",
            "--namespace",
            "webhook-system",
            "--name",
            "webhook-config",
            "--accepts",
            ">=2.4.0, <3.0.0",
        ]),
    )
    .unwrap();
    let file = format!("configMapPolicies.webhook={}", policy.display());
    let mut args = ALL.to_vec();
    args.extend(["--set-file", &file]);
    let yaml = template(home.path(), &chart(), "confgate-system", &args);
    let kinds: Vec<(String, String)> = by_name(&docs(&yaml)).into_keys().collect();
    let want = [
        ("MutatingAdmissionPolicy", "confgate-inject"),
        ("MutatingAdmissionPolicyBinding", "confgate-inject"),
        ("PodMonitor", "confgate"),
        ("PrometheusRule", "confgate"),
        ("Role", "confgate-status-reader"),
        ("RoleBinding", "confgate-status-reader"),
        ("ValidatingAdmissionPolicy", "confgate-own-pod"),
        (
            "ValidatingAdmissionPolicy",
            "confgate.webhook-system.webhook-config",
        ),
        ("ValidatingAdmissionPolicyBinding", "confgate-own-pod"),
        (
            "ValidatingAdmissionPolicyBinding",
            "confgate.webhook-system.webhook-config",
        ),
    ]
    .map(|(k, n)| (k.to_owned(), n.to_owned()));
    assert_eq!(kinds, want);
    validate(&yaml);
}

/// The policies rendered are what `confgate inject --policy` prints, for the default image and
/// release namespace and for an image and own namespace of the user's.
#[test]
fn the_chart_renders_the_policies_inject_policy_prints() {
    let home = tempfile::tempdir().unwrap();
    let default_image = format!("localhost/confgate/confgate:{}", env!("CARGO_PKG_VERSION"));
    let digest = format!(
        "registry.example.com/platform/confgate@sha256:{}",
        "ab".repeat(32)
    );
    let cases: [(&str, &[&str], &str, &str); 3] = [
        ("confgate-system", &[], &default_image, "confgate-system"),
        (
            "platform",
            &[
                "--set",
                "image.repository=registry.example.com:5000/platform/confgate,image.tag=1.2.3",
            ],
            "registry.example.com:5000/platform/confgate:1.2.3",
            "platform",
        ),
        (
            "platform",
            &[
                "--set",
                "image.repository=registry.example.com/platform/confgate",
                "--set",
                &format!("image.digest=sha256:{}", "ab".repeat(32)),
                "--set",
                "injectionPolicy.ownNamespace=gates",
            ],
            &digest,
            "gates",
        ),
    ];
    for (ns, args, image, own) in cases {
        let chart = by_name(&docs(&template(home.path(), &chart(), ns, args)));
        let cli = by_name(&docs(&confgate(&[
            "inject",
            "--policy",
            "--image",
            image,
            "--own-namespace",
            own,
        ])));
        assert_eq!(
            chart.keys().collect::<Vec<_>>(),
            cli.keys().collect::<Vec<_>>(),
            "{image}"
        );
        for (key, want) in &cli {
            assert!(
                chart[key] == *want,
                "{key:?} differs from inject --policy --image {image} --own-namespace {own}:\n{}\n\
                 (scripts/chart-policies.sh writes the chart's policy templates)",
                serde_json::to_string_pretty(&chart[key]).unwrap()
            );
        }
    }
    // Each part can be left out.
    let none = template(
        home.path(),
        &chart(),
        "confgate-system",
        &[
            "--set",
            "injectionPolicy.enabled=false,ownPodPolicy.enabled=false",
        ],
    );
    assert!(docs(&none).is_empty(), "{none}");
}

// The chart's ConfigMap policy is `confgate policy`'s output: a build with the `policy` feature.
#[cfg(feature = "policy")]
#[test]
fn the_chart_writes_a_config_map_policy_as_confgate_policy_prints_it() {
    let home = tempfile::tempdir().unwrap();
    let printed = confgate(&[
        "policy",
        "--namespace",
        "webhook-system",
        "--name",
        "webhook-config",
        "--accepts",
        ">=2.4.0, <3.0.0",
    ]);
    let file = home.path().join("policy.yaml");
    std::fs::write(&file, &printed).unwrap();
    let yaml = template(
        home.path(),
        &chart(),
        "confgate-system",
        &[
            "--set",
            "injectionPolicy.enabled=false,ownPodPolicy.enabled=false",
            "--set-file",
            &format!("configMapPolicies.webhook={}", file.display()),
        ],
    );
    assert_eq!(docs(&yaml), docs(&printed));

    // Anything else is refused, naming the value.
    std::fs::write(&file, "apiVersion: v1\nkind: ConfigMap\n").unwrap();
    let mut cmd = helm_in(home.path());
    cmd.args(["template", "confgate"]).arg(chart()).args([
        "--set-file",
        &format!("configMapPolicies.webhook={}", file.display()),
    ]);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("configMapPolicies.webhook holds no ValidatingAdmissionPolicy"),
        "{err}"
    );
}

/// The PodMonitor is `manifests/monitoring`'s; the alert rules are those `docs/endpoints.md` shows
/// (which `tests/commands/alerts.rs` runs in a real Prometheus).
#[test]
fn the_chart_monitors_and_alerts_as_the_shipped_manifests_do() {
    let home = tempfile::tempdir().unwrap();
    let got = by_name(&docs(&template(
        home.path(),
        &chart(),
        "monitoring",
        &[
            "--set",
            "injectionPolicy.enabled=false,ownPodPolicy.enabled=false",
            "--set",
            "podMonitor.enabled=true,alertRules.enabled=true,podMonitor.labels.release=kube-prometheus-stack",
        ],
    )));
    let shipped = docs(
        &std::fs::read_to_string(root().join("manifests/monitoring/podmonitor.yaml")).unwrap(),
    );
    let mut monitor = got[&("PodMonitor".to_owned(), "confgate".to_owned())].clone();
    assert_eq!(monitor["metadata"]["namespace"], "monitoring");
    monitor["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    assert_eq!(monitor, shipped[0]);

    let rules = &got[&("PrometheusRule".to_owned(), "confgate".to_owned())];
    let documented: Value = serde_saphyr::from_str(&crate::alerts::rules()).unwrap();
    assert_eq!(rules["spec"], documented);
}

/// The chart's and the crate's versions agree, and the default image is a `localhost/` name pulled
/// only if absent, which no registry serves.
#[test]
fn the_chart_defaults_to_an_image_no_registry_serves() {
    let meta: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap())
            .unwrap();
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart().join("values.yaml")).unwrap())
            .unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(meta["version"], version);
    assert_eq!(meta["appVersion"], version);
    assert_eq!(values["image"]["tag"], version);
    assert_eq!(values["image"]["repository"], "localhost/confgate/confgate");
    assert_eq!(values["image"]["pullPolicy"], "IfNotPresent");
    let plugin: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("helm-plugin/plugin.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(plugin["version"], version);

    // What is no image reference never reaches the policy's CEL.
    let home = tempfile::tempdir().unwrap();
    let mut cmd = helm_in(home.path());
    cmd.args(["template", "confgate"])
        .arg(chart())
        .args(["--set", "image.tag=1\" || true"]);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is not an image reference"),
        "{err}"
    );
}

/// `tests/fixtures/component-chart` with `charts/confgate` as its subchart, in a temporary dir.
pub fn component_chart(dir: &Path) -> PathBuf {
    let to = dir.join("component");
    copy_dir(&root().join("tests/fixtures/component-chart"), &to);
    copy_dir(&chart(), &to.join("charts/confgate"));
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A document of `docs` by kind and name.
fn find(docs: &[Value], kind: &str, name: &str) -> Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
        .clone()
}

/// The component chart's pod, sidecar from the templates, is the pod `confgate inject` makes of the
/// same chart rendered without it, but for the image pull policy the templates set (inject leaves
/// Kubernetes' default, the same for a tagged image); with the Role and binding inject adds.
#[test]
fn a_component_chart_with_the_sidecar_template_renders_inject_s_pod() {
    let home = tempfile::tempdir().unwrap();
    let chart = component_chart(home.path());
    let rendered = template(home.path(), &chart, "apps", &[]);
    validate(&rendered);
    let ours = docs(&rendered);
    let bare = template(home.path(), &chart, "apps", &["--set", "withSidecar=false"]);
    let mut cmd = common::confgate_alone();
    cmd.arg("inject");
    let out = common::output_with_stdin(cmd, &bare);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let injected = docs(&String::from_utf8(out.stdout).unwrap());

    let mut pod = find(&ours, "Deployment", "confgate");
    let sidecar = &mut pod["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(sidecar["imagePullPolicy"], "IfNotPresent");
    sidecar.as_object_mut().unwrap().remove("imagePullPolicy");
    let want = find(&injected, "Deployment", "confgate");
    assert!(
        pod == want,
        "the template's pod:\n{}\ninject's:\n{}",
        serde_json::to_string_pretty(&pod).unwrap(),
        serde_json::to_string_pretty(&want).unwrap()
    );
    for kind in ["Role", "RoleBinding"] {
        assert_eq!(
            find(&ours, kind, "confgate-reporter"),
            find(&injected, kind, "confgate-reporter"),
            "{kind}"
        );
    }
    // The cluster-wide parts come from confgate's own release: the component's has none of them.
    let kinds: Vec<&str> = ours.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert!(
        !kinds.iter().any(|k| k.contains("AdmissionPolicy")),
        "{kinds:?}"
    );

    // Without reporting: no token, no pod identity, still a valid pod.
    let quiet = template(
        home.path(),
        &chart,
        "apps",
        &["--set", "confgate.sidecar.podReport=false"],
    );
    validate(&quiet);
    let pod = find(&docs(&quiet), "Deployment", "confgate");
    let spec = &pod["spec"]["template"]["spec"];
    assert!(spec["initContainers"][0].get("env").is_none(), "{spec}");
    assert!(
        !spec["volumes"].to_string().contains("confgate-token"),
        "{spec}"
    );
}

/// `confgate inject` as Helm 4's post-renderer: the plugin of `helm-plugin/` installed, Helm pipes
/// the rendered manifests through `confgate inject` (no arguments), and with `--post-renderer-args`
/// through inject's flags.
#[test]
fn inject_is_a_helm_post_renderer() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = helm_in(home.path());
    cmd.args(["plugin", "install"])
        .arg(root().join("helm-plugin"));
    ok(cmd);
    let mut cmd = helm_in(home.path());
    cmd.args(["plugin", "list"]);
    let list = ok(cmd);
    assert!(
        list.lines()
            .any(|l| l.starts_with("confgate-inject") && l.contains("postrenderer/v1")),
        "{list}"
    );
    let chart = component_chart(home.path());
    // The plugin runs `confgate` from PATH: this build's.
    let bin = Path::new(common::BIN).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let render = |extra: &[&str]| {
        let mut cmd = helm_in(home.path());
        cmd.env("PATH", &path)
            .args(["template", "web"])
            .arg(&chart)
            .args(["--namespace", "apps", "--set", "withSidecar=false"])
            .args(["--post-renderer", "confgate-inject"])
            .args(extra);
        docs(&ok(cmd))
    };
    let mut cmd = helm_in(home.path());
    cmd.args(["template", "web"]).arg(&chart).args([
        "--namespace",
        "apps",
        "--set",
        "withSidecar=false",
    ]);
    let bare = ok(cmd);
    let mut cmd = common::confgate_alone();
    cmd.arg("inject");
    let out = common::output_with_stdin(cmd, &bare);
    assert!(out.status.success());
    let post = by_name(&render(&[]));
    let want = find(
        &docs(&String::from_utf8(out.stdout).unwrap()),
        "Deployment",
        "web",
    );
    assert_eq!(post[&("Deployment".to_owned(), "web".to_owned())], want);
    assert!(post.contains_key(&("Role".to_owned(), "confgate-reporter".to_owned())));

    let image = "registry.example.com/platform/confgate:1.2.3";
    let flag = format!("--post-renderer-args=--image={image}");
    let post = by_name(&render(&[&flag]));
    let pod = &post[&("Deployment".to_owned(), "web".to_owned())];
    assert_eq!(
        pod["spec"]["template"]["spec"]["initContainers"][0]["image"],
        json!(image)
    );
}

/// Whether any mapping in `v` has the key `key`.
fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(key) || m.values().any(|v| has_key(v, key)),
        Value::Array(a) => a.iter().any(|v| has_key(v, key)),
        _ => false,
    }
}

/// A value is written as one YAML scalar, never as YAML: a value holding a newline and a key
/// (`prod\n  pwned: yes`) is a string the API server refuses, not a key added to the object (a
/// label on the Role, a field of the PodMonitor's endpoint or of an alert rule, the sidecar's
/// container); the injection policy's own namespace must be a namespace's name, as it is written
/// into the binding's selector.
#[test]
fn a_value_never_adds_yaml_to_what_the_chart_renders() {
    let home = tempfile::tempdir().unwrap();
    let values = home.path().join("hostile.yaml");
    std::fs::write(
        &values,
        r#"
statusReader:
  enabled: true
  configMap: webhook-config
  namespace: "prod\n  pwned: yes"
podMonitor:
  enabled: true
  interval: "30s\n      pwned: yes"
alertRules:
  enabled: true
  heldFor: "15m\n          pwned: yes"
  reloadFailingFor: "5m\n          pwned: yes"
"#,
    )
    .unwrap();
    let rendered = template(
        home.path(),
        &chart(),
        "confgate-system",
        &["-f", values.to_str().unwrap()],
    );
    let all = docs(&rendered);
    assert!(
        all.iter().any(|d| d["kind"] == "PrometheusRule"),
        "{rendered}"
    );
    for d in &all {
        assert!(!has_key(d, "pwned"), "a value added a key:\n{rendered}");
    }
    let role = find(&all, "Role", "confgate-status-reader");
    assert_eq!(role["metadata"]["namespace"], "prod\n  pwned: yes");

    let chart = component_chart(home.path());
    let rendered = template(
        home.path(),
        &chart,
        "apps",
        &[
            "--set-json",
            r#"confgate.image.pullPolicy="IfNotPresent\n  pwned: yes""#,
        ],
    );
    let pod = find(&docs(&rendered), "Deployment", "confgate");
    assert!(!has_key(&pod, "pwned"), "a value added a key:\n{rendered}");

    let mut cmd = helm_in(home.path());
    cmd.args(["template", "confgate"]).arg(self::chart()).args([
        "--set-json",
        r#"injectionPolicy.ownNamespace="confgate-system\n        - default""#,
    ]);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is not a namespace's name"),
        "{err}{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
