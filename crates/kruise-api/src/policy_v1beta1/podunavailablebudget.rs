//! `PodUnavailableBudget` as `policy.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): the
//! v1alpha1 kind with typed fields for what v1alpha1 keeps in annotations
//! (`protectOperations` for `kruise.io/pub-protect-operations`, `protectTotalReplicas`
//! for `pub.kruise.io/protect-total-replicas`) and an `ignoredPodSelector`.
//!
//! Objects are stored as v1alpha1, which pub-ctl and the workload controllers read;
//! pub-ctl's conversion webhook ([`crate::conversion::podunavailablebudget`]) serves v1beta1 to clients.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy_v1alpha1::{PodUnavailableBudgetStatus, PubOperation, TargetReference};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.kruise.io",
    version = "v1beta1",
    kind = "PodUnavailableBudget",
    plural = "podunavailablebudgets",
    singular = "podunavailablebudget",
    shortname = "pub",
    namespaced,
    status = "PodUnavailableBudgetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PodUnavailableBudget limits how many Pods of an application voluntary deletion, eviction and update may make unavailable."
)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetSpec {
    /// Label query over the protected Pods; exclusive with targetRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The workload (any kind with a scale subresource) whose Pods are protected; exclusive with selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetReference>,
    /// Most Pods (number or percent of the total) that may be unavailable; exclusive with minAvailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Fewest Pods (number or percent of the total) that must stay available; exclusive with maxUnavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// The operations this PUB protects against; empty: DELETE, UPDATE and EVICT
    /// (v1alpha1: the `kruise.io/pub-protect-operations` annotation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect_operations: Vec<PubOperation>,
    /// The expected replicas when the Pods have no workload with a scale subresource
    /// (v1alpha1: the `pub.kruise.io/protect-total-replicas` annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub protect_total_replicas: Option<i32>,
    /// Pods this selector matches are never protected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_pod_selector: Option<LabelSelector>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_v1beta1_fields_round_trip() {
        let original = serde_json::json!({
            "apiVersion": "policy.kruise.io/v1beta1",
            "kind": "PodUnavailableBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web"},
                "maxUnavailable": "25%",
                "protectOperations": ["DELETE", "EVICT"],
                "protectTotalReplicas": 5,
                "ignoredPodSelector": {"matchLabels": {"pub.kruise.io/ignore": "true"}}
            }
        });
        let pub_: PodUnavailableBudget = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(
            pub_.spec.protect_operations,
            [PubOperation::Delete, PubOperation::Evict]
        );
        assert_eq!(pub_.spec.protect_total_replicas, Some(5));
        assert_eq!(serde_json::to_value(&pub_).unwrap(), original);
    }
}
