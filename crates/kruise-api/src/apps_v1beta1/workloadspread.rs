//! `WorkloadSpread` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): the
//! v1alpha1 kind with subsets' `requiredNodeSelector` / `preferredNodeSelector` for
//! `requiredNodeSelectorTerm` / `preferredNodeSelectorTerms`. (Upstream's v1beta1
//! subset conditions are `metav1.Condition`, whose JSON has v1alpha1's fields; the
//! status is v1alpha1's.)
//!
//! Objects are stored as v1alpha1, which the controller reads; `workloadspread-ctl`'s
//! conversion webhook ([`crate::conversion`]) serves v1beta1 to clients.

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PreferredSchedulingTerm, Toleration};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::{
    TargetFilter, TargetReference, WorkloadSpreadScheduleStrategy, WorkloadSpreadStatus,
};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "WorkloadSpread",
    plural = "workloadspreads",
    singular = "workloadspread",
    shortname = "ws",
    namespaced,
    status = "WorkloadSpreadStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "WorkloadSpread spreads the Pods of one workload over ordered subsets of nodes, each with an optional cap."
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSpec {
    /// The workload whose Pods are spread; immutable.
    pub target_ref: TargetReference,
    /// Manage only the selected Pods of the workload, counting replicas from the listed paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_filter: Option<TargetFilter>,
    /// Subsets in order of preference; at least one.
    pub subsets: Vec<WorkloadSpreadSubset>,
    /// How Pods move between subsets when they cannot be scheduled.
    #[serde(
        default,
        skip_serializing_if = "WorkloadSpreadScheduleStrategy::is_empty"
    )]
    pub schedule_strategy: WorkloadSpreadScheduleStrategy,
}

/// One subset: a group of nodes, how many Pods it takes, and what its Pods get.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubset {
    /// Unique name of the subset within the WorkloadSpread.
    pub name: String,
    /// Node selector term every Pod of the subset must satisfy (v1alpha1: `requiredNodeSelectorTerm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_node_selector: Option<NodeSelectorTerm>,
    /// Preferred node selector terms added to the subset's Pods (v1alpha1: `preferredNodeSelectorTerms`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_node_selector: Vec<PreferredSchedulingTerm>,
    /// Tolerations added to the subset's Pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Most Pods (number or percent of the workload's replicas) in this subset; unset means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<IntOrString>,
    /// Strategic-merge patch applied to the subset's Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub patch: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A v1beta1 status as upstream's controller or a client writes it: subset conditions are
    /// `metav1.Condition`, with `observedGeneration`.
    #[test]
    fn subset_conditions_keep_their_observed_generation() {
        let condition = serde_json::json!({
            "type": "Schedulable",
            "status": "False",
            "lastTransitionTime": "2024-05-01T10:00:00Z",
            "reason": "ReschedulingTimeout",
            "message": "a Pod could not be scheduled",
            "observedGeneration": 7
        });
        let subset = serde_json::json!({
            "name": "zone-a", "replicas": 1, "missingReplicas": 1, "conditions": [condition]
        });
        let original = serde_json::json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "WorkloadSpread",
            "metadata": {"name": "ws", "namespace": "default"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "subsets": [{"name": "zone-a"}]
            },
            "status": {
                "observedGeneration": 7,
                "subsetStatuses": [subset],
                "versionedSubsetStatuses": {"5d8f": [subset]}
            }
        });
        let ws: WorkloadSpread = serde_json::from_value(original.clone()).unwrap();
        let status = ws.status.as_ref().unwrap();
        assert_eq!(
            status.subset_statuses[0].conditions[0].observed_generation,
            Some(7)
        );
        assert_eq!(
            status.versioned_subset_statuses["5d8f"][0].conditions[0].observed_generation,
            Some(7)
        );
        assert_eq!(serde_json::to_value(&ws).unwrap(), original);

        // Without it nothing is written (not a 0 upstream's schema would read as "set").
        let mut without = ws.clone();
        without.status.as_mut().unwrap().subset_statuses[0].conditions[0].observed_generation =
            None;
        let written = serde_json::to_value(&without).unwrap();
        assert!(
            written["status"]["subsetStatuses"][0]["conditions"][0]
                .get("observedGeneration")
                .is_none()
        );

        // Both served versions' schemas keep it: v1alpha1 is the stored one.
        for crd in [
            WorkloadSpread::crd(),
            crate::apps_v1alpha1::WorkloadSpread::crd(),
        ] {
            let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
            let conditions = &schema["openAPIV3Schema"]["properties"]["status"]["properties"]["subsetStatuses"]
                ["items"]["properties"]["conditions"]["items"];
            assert_eq!(
                conditions["properties"]["observedGeneration"]["type"], "integer",
                "{}",
                crd.spec.versions[0].name
            );
        }
    }
}
