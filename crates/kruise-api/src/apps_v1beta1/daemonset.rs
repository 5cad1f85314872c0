//! `DaemonSet` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): the v1alpha1
//! Advanced DaemonSet with `scaleStrategy.partitionedScaling` as a field instead of the
//! `daemonset.kruise.io/progressive-create-pod` annotation, `status.updateRevision`
//! instead of `status.daemonSetHash`, and no deprecated `Surging` rolling update type.
//!
//! Objects are stored as v1alpha1, which the controller reads; `daemonset-ctl`'s
//! conversion webhook ([`crate::conversion`]) serves v1beta1 to clients. These types give
//! the v1beta1 schema of the CRD and typed access for clients.

use k8s_openapi::api::apps::v1::DaemonSetCondition;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::DaemonSetUpdateStrategy;
use crate::appspub::Lifecycle;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "DaemonSet",
    plural = "daemonsets",
    singular = "daemonset",
    shortname = "daemon",
    shortname = "ads",
    namespaced,
    status = "DaemonSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Advanced DaemonSet: apps/v1 DaemonSet plus partitioned, node-selected, paused, surging and in-place rollout."
)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {
    /// Label query over Pods; must match the template's labels. Immutable.
    pub selector: LabelSelector,
    /// The Pod every eligible node runs.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// How Pods are replaced when the template changes.
    #[serde(default)]
    pub update_strategy: DaemonSetUpdateStrategy,
    /// Seconds a new Pod must be Ready to count as available. Defaults to 0.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub min_ready_seconds: i32,
    /// Maximum Pods created or deleted per round (number or percent). Defaults to 250.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_replicas: Option<IntOrString>,
    /// Old revisions kept. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Lifecycle hooks (`preDelete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// How Pods are created on nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<DaemonSetScaleStrategy>,
}

/// `scaleStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetScaleStrategy {
    /// Pods created on new nodes obey `rollingUpdate.partition` too (v1alpha1: the
    /// `daemonset.kruise.io/progressive-create-pod: "true"` annotation).
    #[serde(default)]
    pub partitioned_scaling: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetStatus {
    /// Nodes that should run the Pod and run at least one.
    #[serde(default)]
    pub current_number_scheduled: i32,
    /// Nodes that run the Pod but should not.
    #[serde(default)]
    pub number_misscheduled: i32,
    /// Nodes that should run the Pod.
    #[serde(default)]
    pub desired_number_scheduled: i32,
    /// Nodes that should run the Pod and have it Ready.
    #[serde(default)]
    pub number_ready: i32,
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub observed_generation: i64,
    /// Nodes running a Pod at the current revision.
    #[serde(default)]
    pub updated_number_scheduled: i32,
    /// Nodes that should run the Pod and have it available.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub number_available: i32,
    /// Nodes that should run the Pod and have none available.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub number_unavailable: i32,
    /// Hash collisions seen when naming ControllerRevisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Latest observations of the DaemonSet's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DaemonSetCondition>,
    /// The current revision's `controller-revision-hash` (v1alpha1: `daemonSetHash`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
}
