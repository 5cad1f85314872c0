//! `ResourceDistribution` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): the
//! v1alpha1 kind with `targets.namespaceSelector` for `namespaceLabelSelector` and
//! `conditions[].failedNamespaces` for `failedNamespace`.
//!
//! Objects are stored as v1alpha1, which the controller reads; `resourcedistribution-ctl`'s
//! conversion webhook ([`crate::conversion`]) serves v1beta1 to clients. These types give
//! the v1beta1 schema of the CRD and typed access for clients.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::ResourceDistributionTargetNamespaces;
use crate::apps_v1alpha1::resourcedistribution::is_empty_selector;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "ResourceDistribution",
    plural = "resourcedistributions",
    singular = "resourcedistribution",
    shortname = "distributor",
    status = "ResourceDistributionStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ResourceDistribution copies a Secret or ConfigMap into chosen namespaces and keeps the copies in sync."
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionSpec {
    /// The complete Secret or ConfigMap to distribute; its namespace is ignored.
    #[schemars(schema_with = "crate::apps_v1alpha1::resourcedistribution::embedded_resource")]
    pub resource: serde_json::Value,
    /// The namespaces to distribute to.
    pub targets: ResourceDistributionTargets,
}

/// Which namespaces get a copy: (allNamespaces ∪ includedNamespaces ∪ namespaceSelector) − excludedNamespaces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionTargets {
    /// Distribute to every namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
    /// Namespaces that never get a copy; wins over every other target.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub excluded_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces that get a copy.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub included_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces whose labels match get a copy (when the selector is not empty);
    /// v1alpha1: `namespaceLabelSelector`.
    #[serde(default, skip_serializing_if = "is_empty_selector")]
    pub namespace_selector: LabelSelector,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionStatus {
    /// Matched namespaces.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub desired: i32,
    /// Matched namespaces whose copy is in sync.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub succeeded: i32,
    /// Matched namespaces whose copy failed (desired − succeeded).
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub failed: i32,
    /// The ResourceDistribution generation this status was computed from.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub observed_generation: i64,
    /// One condition per failure type, listing the namespaces that failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ResourceDistributionCondition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionCondition {
    /// One of the six failure types, e.g. `ConflictOccurred`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` when some namespace failed this way, else `False`.
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Why the condition has its status (`Succeeded` when False).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Namespaces that failed this way (v1alpha1: `failedNamespace`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_namespaces: Vec<String>,
}
