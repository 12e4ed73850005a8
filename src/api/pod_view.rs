//! A pod as confgate reads it: metadata and the status conditions, nothing else.
//!
//! Deserialising k8s-openapi's full `Pod` pulls in the code for the whole `PodSpec` and `PodStatus`,
//! over 300 KB of the binary, for fields confgate never looks at. This type names the same resource
//! (`/api/v1/.../pods`), so lists and patches go where they went; unknown fields in answers are skipped.

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;

/// The parts of a pod that confgate reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodView {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<PodViewStatus>,
}

/// `status` of a pod, reduced to its conditions.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodViewStatus {
    #[serde(default)]
    pub conditions: Option<Vec<PodViewCondition>>,
}

/// One entry of `status.conditions`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodViewCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

impl PodView {
    /// The pod's conditions; none when the status has not been written.
    pub fn conditions(&self) -> &[PodViewCondition] {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
    }
}

impl Resource for PodView {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn names_the_same_resource_as_pod() {
        assert_eq!(
            PodView::url_path(&(), Some("ns")),
            Pod::url_path(&(), Some("ns"))
        );
        assert_eq!(PodView::api_version(&()), Pod::api_version(&()));
        assert_eq!(PodView::kind(&()), Pod::kind(&()));
    }

    #[test]
    fn reads_conditions_and_skips_the_rest() {
        let p: PodView = serde_json::from_value(serde_json::json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "web-0", "uid": "u"},
            "spec": {"containers": [{"name": "web", "image": "web:1"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastProbeTime": null},
                {"type": "x", "status": "False", "reason": "R", "message": "m"}
            ]}
        }))
        .unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("web-0"));
        let c = p.conditions();
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].type_.as_str(), c[0].status.as_str()),
            ("Ready", "True")
        );
        assert_eq!(c[1].reason.as_deref(), Some("R"));
        assert_eq!(c[1].message.as_deref(), Some("m"));
        let bare: PodView = serde_json::from_value(serde_json::json!({"metadata": {}})).unwrap();
        assert!(bare.conditions().is_empty());
    }
}
