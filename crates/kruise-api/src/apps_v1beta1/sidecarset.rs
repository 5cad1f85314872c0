//! `SidecarSet` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): v1alpha1's
//! spec without `namespace` (a `namespaceSelector` on `kubernetes.io/metadata.name`
//! says the same) and with `customVersion` as a field instead of the
//! `apps.kruise.io/sidecarset-custom-version` label.
//!
//! Objects are stored as v1alpha1, which the controller reads; `sidecarset-ctl`'s
//! conversion webhook ([`crate::conversion`]) serves v1beta1 to clients.

use k8s_openapi::api::core::v1::{LocalObjectReference, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::{
    SidecarContainer, SidecarSetInjectionStrategy, SidecarSetPatchPodMetadata, SidecarSetStatus,
    SidecarSetUpdateStrategy,
};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "SidecarSet",
    plural = "sidecarsets",
    singular = "sidecarset",
    status = "SidecarSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "SidecarSet injects sidecar containers into matching Pods and upgrades them in place."
)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetSpec {
    /// Pods to inject into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Namespaces to inject into (unset: all but the excluded ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub init_containers: Vec<SidecarContainer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub containers: Vec<SidecarContainer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub volumes: Vec<Volume>,
    #[serde(default)]
    pub update_strategy: SidecarSetUpdateStrategy,
    #[serde(default)]
    pub injection_strategy: SidecarSetInjectionStrategy,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
    /// The version `injectionStrategy.revision.customVersion` refers to (v1alpha1: the
    /// `apps.kruise.io/sidecarset-custom-version` label).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub custom_version: String,
}
