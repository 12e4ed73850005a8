//! Which volume of a pod spec confgate gates: one function for `confgate inject` (the volume it puts
//! the sidecar on) and `confgate check` (the ConfigMap it judges for a pod not injected yet), so that
//! both pick the same volume, and refuse the same ones. Pure.
//!
//! A ConfigMap volume, or a projected volume whose every source is a ConfigMap (the sidecar reads them
//! together, as one directory), can be gated. A projected volume mixing a ConfigMap with a source of
//! another kind (a Secret, the downward API, a token) cannot: confgate would judge and promote the rest
//! as part of the config.

use serde_json::{Map, Value};

/// Why no volume of a pod spec can be gated, and what to do. Names volumes and the kinds of what
/// they hold, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unchosen {
    #[error("volumes is {0}, not a list")]
    VolumesNotAList(&'static str),
    /// `volume` is how the volume is named (`volume NAME`, or `volumes[I]` without a name).
    #[error("{volume}: a projected configMap source is {shape}, not a mapping")]
    ProjectedNotAMapping { volume: String, shape: &'static str },
    #[error(
        "{volume}: configMap is {shape}, not a mapping (expected configMap: {{name: CONFIGMAP}})"
    )]
    NotAMapping { volume: String, shape: &'static str },
    #[error(
        "volume {name} projects a ConfigMap together with {others}: confgate would judge and promote them as one config, and the component would read a copy of the rest that changes only when the config does; give the ConfigMap a volume of its own"
    )]
    Mixed { name: String, others: String },
    #[error("no ConfigMap volume named {wanted} (ConfigMap volumes: {listed})")]
    NoneNamed { wanted: String, listed: String },
    #[error(
        "no ConfigMap volume to gate; add one with the component's ConfigMap and mount it where the component reads its config"
    )]
    NoVolume,
    #[error("several ConfigMap volumes ({0}); name the one to gate with --volume")]
    Several(String),
}

/// The volumes that can be gated, and those that cannot although they project a ConfigMap.
struct Candidates<'a> {
    gateable: Vec<&'a str>,
    /// A projected volume with a ConfigMap source and a source of another kind, and why it cannot
    /// be gated.
    mixed: Vec<(&'a str, Unchosen)>,
}

/// What a JSON value is, for a message that must not show it.
pub(crate) fn shape(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A `volumes` that is not a list, or a `configMap` that is not a mapping, is refused by name: inject
/// edits both.
fn candidates(spec: &Map<String, Value>) -> Result<Candidates<'_>, Unchosen> {
    let volumes = match spec.get("volumes") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(v)) => v.as_slice(),
        Some(other) => return Err(Unchosen::VolumesNotAList(shape(other))),
    };
    let mut out = Candidates {
        gateable: Vec::new(),
        mixed: Vec::new(),
    };
    for (i, v) in volumes.iter().enumerate() {
        let name = v.get("name").and_then(Value::as_str);
        let which = || name.map_or_else(|| format!("volumes[{i}]"), |n| format!("volume {n}"));
        if let Some(sources) = v.pointer("/projected/sources").and_then(Value::as_array) {
            let kinds: Vec<&str> = sources
                .iter()
                .filter_map(|s| s.as_object()?.keys().next().map(String::as_str))
                .collect();
            if !kinds.contains(&"configMap") {
                continue;
            }
            if let Some(s) = sources
                .iter()
                .find(|s| s.get("configMap").is_some_and(|c| !c.is_object()))
            {
                return Err(Unchosen::ProjectedNotAMapping {
                    volume: which(),
                    shape: shape(&s["configMap"]),
                });
            }
            let others: Vec<&str> = kinds
                .iter()
                .copied()
                .filter(|k| *k != "configMap")
                .collect();
            if others.is_empty() {
                out.gateable.extend(name);
            } else if let Some(n) = name {
                out.mixed.push((
                    n,
                    Unchosen::Mixed {
                        name: n.to_owned(),
                        others: others.join(", "),
                    },
                ));
            }
            continue;
        }
        let Some(cm) = v.get("configMap") else {
            continue;
        };
        if !cm.is_object() {
            return Err(Unchosen::NotAMapping {
                volume: which(),
                shape: shape(cm),
            });
        }
        out.gateable.extend(name);
    }
    Ok(out)
}

/// The volume to gate: `wanted` (inject's `--volume`), or the only one that can be gated; `Err` says
/// why none can be chosen and what to do.
pub(crate) fn choose(spec: &Map<String, Value>, wanted: Option<&str>) -> Result<String, Unchosen> {
    let Candidates { gateable, mixed } = candidates(spec)?;
    if let Some(want) = wanted
        && let Some((_, why)) = mixed.iter().find(|(n, _)| *n == want)
    {
        return Err(why.clone());
    }
    if wanted.is_none()
        && gateable.is_empty()
        && let [(_, why)] = mixed.as_slice()
    {
        return Err(why.clone());
    }
    match (wanted, gateable.as_slice()) {
        (Some(want), _) if gateable.contains(&want) => Ok(want.to_owned()),
        (Some(want), _) => Err(Unchosen::NoneNamed {
            wanted: want.to_owned(),
            listed: list(&gateable),
        }),
        (None, [one]) => Ok((*one).to_owned()),
        (None, []) => Err(Unchosen::NoVolume),
        (None, _) => Err(Unchosen::Several(list(&gateable))),
    }
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// Why no volume is chosen is a cause of its own, with the message inject and check print.
    #[test]
    fn each_reason_for_no_volume_is_its_own() {
        let one =
            spec(serde_json::json!({"volumes": [{"name": "cfg", "configMap": {"name": "c"}}]}));
        assert_eq!(choose(&one, None), Ok("cfg".into()));
        let e = choose(&one, Some("other")).unwrap_err();
        assert_eq!(
            e,
            Unchosen::NoneNamed {
                wanted: "other".into(),
                listed: "cfg".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "no ConfigMap volume named other (ConfigMap volumes: cfg)"
        );
        assert_eq!(
            choose(&spec(serde_json::json!({})), None),
            Err(Unchosen::NoVolume)
        );
        assert_eq!(
            choose(&spec(serde_json::json!({"volumes": 3})), None),
            Err(Unchosen::VolumesNotAList("a number"))
        );
        let mixed = spec(
            serde_json::json!({"volumes": [{"name": "p", "projected": {"sources": [
                {"configMap": {"name": "c"}}, {"secret": {"name": "s"}}
            ]}}]}),
        );
        assert_eq!(
            choose(&mixed, None),
            Err(Unchosen::Mixed {
                name: "p".into(),
                others: "secret".into()
            })
        );
    }
}
