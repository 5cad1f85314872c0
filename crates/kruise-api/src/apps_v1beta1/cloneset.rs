//! `CloneSet` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): the same workload
//! as [`crate::apps_v1alpha1::CloneSet`], with the update strategy split like `apps/v1`
//! StatefulSet's (`type: RollingUpdate|OnDelete` + `rollingUpdate.podUpdatePolicy`),
//! `enablePVCReuse` instead of `disablePVCReuse`, and `excludePreparingDelete` as a field.
//!
//! Objects are stored as v1alpha1, which the controller reads; v1beta1 exists for
//! clients, converted by `cloneset-ctl`'s conversion webhook ([`crate::conversion`]).
//! These types give the v1beta1 schema of the CRD and typed access for clients.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::CloneSetStatus;
use crate::appspub::{
    InPlaceUpdateStrategy, Lifecycle, UpdatePriorityStrategy, UpdateScatterStrategy,
};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "CloneSet",
    plural = "clonesets",
    singular = "cloneset",
    shortname = "clone",
    namespaced,
    status = "CloneSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "CloneSet manages interchangeable Pods directly, with in-place update, partition and lifecycle hooks.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetSpec {
    /// Desired number of Pods. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over Pods; must match the template's labels.
    pub selector: LabelSelector,
    /// The Pod template.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// One PVC per template per Pod, sharing the Pod's instance id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    #[serde(default)]
    pub scale_strategy: CloneSetScaleStrategy,
    #[serde(default)]
    pub update_strategy: CloneSetUpdateStrategy,
    /// ControllerRevisions to keep. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Seconds a new Pod must be ready before it counts as available.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub min_ready_seconds: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// Seconds a rollout may take before `Progressing` turns False. Unset: no condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    /// Names of Pods to delete; pruned by the controller once they are gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_to_delete: Vec<String>,
    /// Limits how many new Pods may be unavailable while scaling out. Unset: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Reuse the PVCs of Pods that went away (false: fresh PVCs for every new Pod).
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        rename = "enablePVCReuse"
    )]
    pub enable_pvc_reuse: bool,
    /// Pods in PreparingDelete do not count toward replicas when scaling.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclude_preparing_delete: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CloneSetUpdateStrategyType {
    /// Update Pods as `rollingUpdate` says.
    #[default]
    RollingUpdate,
    /// Never update a Pod; deleted Pods come back at the new revision.
    OnDelete,
}

/// How `RollingUpdate` updates one Pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CloneSetPodUpdatePolicy {
    /// Delete the Pod and create a new one.
    #[default]
    ReCreate,
    /// In place when only images/metadata changed, recreate otherwise.
    InPlaceIfPossible,
    /// In place only; other changes are rejected.
    InPlaceOnly,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<CloneSetUpdateStrategyType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateCloneSetStrategy>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateCloneSetStrategy {
    /// Number or percent of Pods kept at the old revision. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Maximum Pods unavailable during the update. Defaults to 20%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Pods that may be created above `replicas` during the update. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// How a Pod is updated: `ReCreate` (default), `InPlaceIfPossible`, `InPlaceOnly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<CloneSetPodUpdatePolicy>,
    /// Stop updating Pods (scaling still works).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: UpdateScatterStrategy,
    /// In-place update timing and the image pre-download settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
}
