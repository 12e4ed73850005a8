//! The GitOps health recipes on pod objects shaped as the cluster suite's pods (the conditions and
//! the facts annotation confgate writes, beside the kubelet's own): the Flux CEL health check
//! (`manifests/flux`) evaluated with the `cel` crate as Flux's kustomize-controller evaluates it, and
//! the Argo CD Lua check (`manifests/rollout/argocd-health.yaml`) run by a real Lua 5.4. Both give each
//! pod the same health, and neither reads a condition's message.

use std::path::{Path, PathBuf};

use kube_cel::KubeCelExt as _;
use kube_cel::cel::{Context, Program, Value};
use serde_json::Value as Json;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: &str) -> Json {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let mut docs = confgate::inject::documents(path, &text).unwrap();
    assert_eq!(docs.len(), 1, "{path}");
    docs.remove(0)
}

/// The fixtures and the health each recipe must give: (file, Flux, Argo CD).
const PODS: &[(&str, &str, &str)] = &[
    ("current", "Current", "Healthy"),
    ("candidate-running", "Current", "Healthy"),
    ("holding-too-new", "Failed", "Degraded"),
    ("blocked-start", "Failed", "Degraded"),
    ("candidate-held", "Failed", "Degraded"),
    ("reload-failing", "Failed", "Degraded"),
    ("rejected-by-component", "Failed", "Degraded"),
    ("spreading", "InProgress", "Progressing"),
    ("not-reported-yet", "InProgress", "Progressing"),
    ("pending", "InProgress", "Progressing"),
    ("failed", "Failed", "Degraded"),
    ("not-gated-ready", "Current", "Healthy"),
    ("not-gated-unready", "InProgress", "Progressing"),
];

fn fixture(name: &str) -> Json {
    let path: PathBuf = root()
        .join("tests/fixtures/pods")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A pod whose confgate conditions carry another message: a check that reads the message would
/// change its answer.
fn with_other_messages(mut pod: Json) -> Json {
    if let Some(cs) = pod["status"]["conditions"].as_array_mut() {
        for c in cs {
            if c["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("confgate.io/"))
            {
                c["message"] = Json::from("; rollout 25% candidate held version 9.9.9 - too-new");
            }
        }
    }
    pod
}

/// Flux's order: `inProgress` when given and true, else `failed`, else `current`, else InProgress.
/// The object's top-level fields are the expressions' variables.
fn flux_health(check: &Json, pod: &Json) -> String {
    // Flux's environment has the Kubernetes libraries too; these expressions need only CEL's own.
    let mut ctx = Context::default().with_all();
    for (k, v) in pod.as_object().unwrap() {
        ctx.add_variable(k.as_str(), v.clone()).unwrap();
    }
    let eval = |field: &str| -> Option<bool> {
        let expr = check[field].as_str()?;
        let program = Program::compile(expr).unwrap_or_else(|e| panic!("{field}: {e}"));
        match program.execute(&ctx) {
            Ok(Value::Bool(b)) => Some(b),
            other => panic!("{field} on {}: {other:?}", pod["metadata"]["name"]),
        }
    };
    if eval("inProgress") == Some(true) {
        "InProgress"
    } else if eval("failed") == Some(true) {
        "Failed"
    } else if eval("current") == Some(true) {
        "Current"
    } else {
        "InProgress"
    }
    .to_owned()
}

fn pod_check() -> Json {
    let flux = yaml("manifests/flux/flux-kustomization.yaml");
    assert_eq!(flux["apiVersion"], "kustomize.toolkit.fluxcd.io/v1");
    let checks = flux["spec"]["healthCheckExprs"].as_array().unwrap();
    let pod = checks
        .iter()
        .find(|c| c["apiVersion"] == "v1" && c["kind"] == "Pod")
        .expect("a check for Pods");
    pod.clone()
}

#[test]
fn the_flux_cel_check_waits_for_every_gated_pod_to_run_its_config() {
    let check = pod_check();
    for (name, flux, _) in PODS {
        let pod = fixture(name);
        assert_eq!(&flux_health(&check, &pod), flux, "{name}");
        assert_eq!(
            &flux_health(&check, &with_other_messages(pod)),
            flux,
            "{name}"
        );
    }
}

/// Runs the Argo CD check as Argo CD does: the object as the global `obj`, the chunk's returned table
/// the health.
fn argocd_health(lua: &mlua::Lua, script: &str, pod: &Json) -> (String, String) {
    use mlua::LuaSerdeExt as _;
    lua.globals()
        .set("obj", lua.to_value(pod).unwrap())
        .unwrap();
    let hs: mlua::Table = lua
        .load(script)
        .call(())
        .unwrap_or_else(|e| panic!("{}: {e}", pod["metadata"]["name"]));
    (hs.get("status").unwrap(), hs.get("message").unwrap())
}

#[test]
fn the_argocd_lua_check_gives_the_same_health_and_leaves_other_pods_to_theirs() {
    let cm = yaml("manifests/rollout/argocd-health.yaml");
    let script = cm["data"]["resource.customizations.health._Pod"]
        .as_str()
        .unwrap()
        .to_owned();
    let lua = mlua::Lua::new();
    for (name, _, argo) in PODS {
        let pod = fixture(name);
        let (status, message) = argocd_health(&lua, &script, &pod);
        assert_eq!(&status, argo, "{name}: {message}");
        let (status, _) = argocd_health(&lua, &script, &with_other_messages(pod));
        assert_eq!(&status, argo, "{name} with another message");
    }
}

/// The fixtures are pods as confgate reports on them: the two condition types, each with a reason
/// confgate gives, and the facts annotation in the form `confgate status` reads.
#[cfg(feature = "api")]
#[test]
fn the_fixtures_carry_what_confgate_writes() {
    for (name, _, _) in PODS {
        let pod = fixture(name);
        let gated = pod["metadata"]["annotations"]["confgate.io/accepts"].is_string();
        let ours: Vec<&Json> = pod["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("confgate.io/"))
            })
            .collect();
        if ours.is_empty() {
            continue;
        }
        assert!(gated, "{name}");
        let types: Vec<&str> = ours.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [confgate::api::CONDITION_TYPE, confgate::api::CURRENT_TYPE],
            "{name}"
        );
        let facts = pod["metadata"]["annotations"][confgate::api::condition::FACTS_ANNOTATION]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no facts"));
        let facts = confgate::api::condition::Facts::from_json(facts)
            .unwrap_or_else(|| panic!("{name}: facts"));
        // The message is the facts in prose, as confgate words it.
        for c in &ours {
            assert_eq!(
                c["message"].as_str(),
                Some(facts.to_string().as_str()),
                "{name}"
            );
        }
    }
}
