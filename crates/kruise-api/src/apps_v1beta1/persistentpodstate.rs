//! `PersistentPodState` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9): the
//! v1alpha1 kind with `keys` for `nodeTopologyKeys` in both topology terms.
//!
//! Objects are stored as v1alpha1, which the controller reads; `persistentpodstate-ctl`'s
//! conversion webhook ([`crate::conversion`]) serves v1beta1 to clients.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::{
    PersistentPodAnnotation, PersistentPodStateRetentionPolicyType, PersistentPodStateStatus,
    TargetReference,
};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "PersistentPodState",
    plural = "persistentpodstates",
    singular = "persistentpodstate",
    namespaced,
    status = "PersistentPodStateStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PersistentPodState keeps the node topology of a StatefulSet's Pods so that re-created Pods return to the same node or zone."
)]
#[serde(rename_all = "camelCase")]
pub struct PersistentPodStateSpec {
    /// The StatefulSet (`apps` or `apps.kruise.io`) or allowlisted workload whose Pods are recorded; immutable.
    pub target_ref: TargetReference,
    /// Pod annotations to record in the state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persistent_pod_annotations: Vec<PersistentPodAnnotation>,
    /// Node label keys whose recorded values a re-created Pod must match (injected as nodeSelector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_persistent_topology: Option<NodeTopologyTerm>,
    /// Node label keys whose recorded values a re-created Pod prefers, with weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_persistent_topology: Vec<PreferredTopologyTerm>,
    /// When recorded states are dropped: `WhenScaled` (default) or `WhenDeleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_pod_state_retention_policy: Option<PersistentPodStateRetentionPolicyType>,
}

/// A weighted preference for the recorded values of some node labels.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferredTopologyTerm {
    /// Weight of the preferred node affinity term, 1-100.
    pub weight: i32,
    /// The node label keys this preference covers.
    pub preference: NodeTopologyTerm,
}

/// A set of node label keys (v1alpha1: `nodeTopologyKeys`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTopologyTerm {
    /// Node label keys, e.g. `kubernetes.io/hostname`, `topology.kubernetes.io/zone`.
    pub keys: Vec<String>,
}
