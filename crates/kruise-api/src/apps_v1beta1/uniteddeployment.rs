//! `UnitedDeployment` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): the
//! v1alpha1 spec unchanged; in the status, v1alpha1's `subsetReplicas` map and
//! `updateStatus` become `subsetStatuses[].replicas` / `.partition` and
//! `updatedRevision`.
//!
//! Objects are stored as v1alpha1, which the controller reads; `uniteddeployment-ctl`'s
//! conversion webhook ([`crate::conversion`]) serves v1beta1 to clients.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::{
    SubsetTemplate, Topology, UnitedDeploymentCondition, UnitedDeploymentSubsetStatus,
    UnitedDeploymentUpdateStrategy,
};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "UnitedDeployment",
    plural = "uniteddeployments",
    singular = "uniteddeployment",
    shortname = "ud",
    namespaced,
    status = "UnitedDeploymentStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "UnitedDeployment manages one workload per topology subset from a single template and splits the replicas across them.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentSpec {
    /// Total desired Pods over all subsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over the Pods; must match the template's labels.
    pub selector: LabelSelector,
    /// The workload every subset is built from (exactly one kind).
    #[serde(default, skip_serializing_if = "SubsetTemplate::is_empty")]
    pub template: SubsetTemplate,
    /// The subsets and how Pods move between them.
    #[serde(default, skip_serializing_if = "Topology::is_empty")]
    pub topology: Topology,
    /// How a template change is rolled out to the subsets.
    #[serde(
        default,
        skip_serializing_if = "UnitedDeploymentUpdateStrategy::is_empty"
    )]
    pub update_strategy: UnitedDeploymentUpdateStrategy,
    /// ControllerRevisions to keep. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentStatus {
    /// The UnitedDeployment generation this status was computed from.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub observed_generation: i64,
    /// Ready Pods over all subsets.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub ready_replicas: i32,
    /// Pods over all subsets, reserved Pods excluded.
    #[serde(default)]
    pub replicas: i32,
    /// Pods at the updated revision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Pending Pods kept in unschedulable subsets (reserveUnschedulablePods).
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub reserved_pods: i32,
    /// Ready Pods at the updated revision.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub updated_ready_replicas: i32,
    /// Hash collision counter for naming ControllerRevisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// The revision all Pods were at before the current rollout.
    #[serde(default)]
    pub current_revision: String,
    /// The revision being rolled out (v1alpha1: `updateStatus.updatedRevision`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub updated_revision: String,
    /// Status of each subset: its replicas (v1alpha1: `subsetReplicas`) and partition
    /// (v1alpha1: `updateStatus.currentPartitions`) among others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subset_statuses: Vec<UnitedDeploymentSubsetStatus>,
    /// `SubsetProvisioned`, `SubsetUpdated`, `SubsetFailure`, `UnitedDeploymentUpdated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<UnitedDeploymentCondition>,
    /// The selector in string form, for the scale subresource (e.g. `app=sample`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}
