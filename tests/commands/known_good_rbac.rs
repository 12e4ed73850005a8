//! The rights the known-good record needs, as every Role under `manifests/` ships them: on
//! ConfigMaps, `get` and `patch` on the record by name (`resourceNames`, nothing else named in the same
//! rule), and `create` alone without a name (a create names no object in its URL); no Role reads,
//! lists, watches, updates or deletes every ConfigMap of its namespace. `inject`'s Role is checked
//! rule by rule in `inject`. The sidecar's writes are exactly these (a create, then a merge patch
//! carrying the resourceVersion read): `tests/cluster/known_good.rs` runs it under the shipped Role and
//! finds nothing refused.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_shipped_roles_give_the_record_get_and_patch_by_name_and_create_alone() {
    let mut files = Vec::new();
    yaml_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests"),
        &mut files,
    );
    let mut records = Vec::new();
    let mut creates = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_default();
        for d in docs.iter().filter(|d| d["kind"] == "Role") {
            let role = format!("{} Role/{}", f.display(), d["metadata"]["name"]);
            for rule in d["rules"].as_array().into_iter().flatten() {
                if !strings(&rule["resources"]).contains(&"configmaps".to_owned()) {
                    continue;
                }
                let names = strings(&rule["resourceNames"]);
                let verbs = strings(&rule["verbs"]);
                if names.iter().any(|n| n.ends_with(".confgate-known-good")) {
                    assert!(
                        names.iter().all(|n| n.ends_with(".confgate-known-good")),
                        "{role}: the record's rule names only records: {names:?}"
                    );
                    assert_eq!(verbs, ["get", "patch"], "{role}: {names:?}");
                    records.push(role.clone());
                } else if names.is_empty() {
                    assert_eq!(
                        verbs,
                        ["create"],
                        "{role}: a rule on every ConfigMap of the namespace"
                    );
                    creates += 1;
                }
            }
        }
    }
    // The API-mode Role and the volume-mode one both carry the record's rules.
    for shipped in [
        "manifests/rbac/sidecar.yaml",
        "manifests/native-sidecar/rbac.yaml",
    ] {
        assert!(
            records.iter().any(|r| r.contains(shipped)),
            "{shipped} has no rule for the record: {records:?}"
        );
    }
    assert!(creates >= 2, "{creates}");
}
