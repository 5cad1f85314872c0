//! `PersistentPodState` (`apps.kruise.io/v1alpha1`): records where each Pod of a StatefulSet
//! ran (node, chosen node labels, chosen annotations) so a re-created Pod is steered back to
//! the same node or zone.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::workloadspread::TargetReference;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
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

impl PersistentPodStateSpec {
    /// The retention policy, defaulted.
    pub fn retention_policy(&self) -> PersistentPodStateRetentionPolicyType {
        self.persistent_pod_state_retention_policy
            .unwrap_or_default()
    }
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

/// A set of node label keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTopologyTerm {
    /// Node label keys, e.g. `kubernetes.io/hostname`, `topology.kubernetes.io/zone`.
    pub node_topology_keys: Vec<String>,
}

/// A Pod annotation to record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PersistentPodAnnotation {
    /// The annotation key.
    pub key: String,
}

/// `persistentPodStateRetentionPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PersistentPodStateRetentionPolicyType {
    /// Drop a Pod's state once it is scaled away (its ordinal is beyond replicas and it is gone).
    #[default]
    WhenScaled,
    /// Keep states until the workload is deleted.
    WhenDeleted,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentPodStateStatus {
    /// The PersistentPodState generation this status was computed from.
    #[serde(default)]
    pub observed_generation: i64,
    /// Recorded state per Pod name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_states: BTreeMap<String, PodState>,
}

/// What was recorded about one Pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodState {
    /// The node the Pod ran on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// Values of the chosen node labels on that node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_topology_labels: BTreeMap<String, String>,
    /// Values of the chosen Pod annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A PersistentPodState as introduced in the OpenKruise v1.2 release notes, with a
    /// recorded state.
    const PPS_YAML: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: PersistentPodState
metadata:
  name: echoserver
  namespace: echoserver
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1beta1
    kind: StatefulSet
    name: echoserver
  requiredPersistentTopology:
    nodeTopologyKeys:
      - failure-domain.beta.kubernetes.io/zone
  preferredPersistentTopology:
    - preference:
        nodeTopologyKeys:
          - kubernetes.io/hostname
      weight: 100
  persistentPodAnnotations:
    - key: cni.projectcalico.org/podIP
  persistentPodStateRetentionPolicy: WhenDeleted
status:
  observedGeneration: 1
  podStates:
    echoserver-0:
      nodeName: node-1
      nodeTopologyLabels:
        failure-domain.beta.kubernetes.io/zone: zone-a
        kubernetes.io/hostname: node-1
      annotations:
        cni.projectcalico.org/podIP: 10.0.0.12/32
"#;

    #[test]
    fn seed_pps_round_trips() {
        let original: serde_json::Value = serde_saphyr::from_str(PPS_YAML).unwrap();
        let pps: PersistentPodState = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(serde_json::to_value(&pps).unwrap(), original);

        assert_eq!(pps.spec.target_ref.kind, "StatefulSet");
        assert_eq!(
            pps.spec
                .required_persistent_topology
                .as_ref()
                .unwrap()
                .node_topology_keys,
            ["failure-domain.beta.kubernetes.io/zone"]
        );
        assert_eq!(pps.spec.preferred_persistent_topology[0].weight, 100);
        assert_eq!(
            pps.spec.retention_policy(),
            PersistentPodStateRetentionPolicyType::WhenDeleted
        );
        let state = &pps.status.unwrap().pod_states["echoserver-0"];
        assert_eq!(state.node_name, "node-1");
        assert_eq!(
            state.node_topology_labels["kubernetes.io/hostname"],
            "node-1"
        );
    }

    #[test]
    fn retention_policy_defaults_to_when_scaled() {
        let spec: PersistentPodStateSpec = serde_json::from_value(serde_json::json!({
            "targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"},
            "requiredPersistentTopology": {"nodeTopologyKeys": ["kubernetes.io/hostname"]}
        }))
        .unwrap();
        assert_eq!(
            spec.retention_policy(),
            PersistentPodStateRetentionPolicyType::WhenScaled
        );
        for (policy, s) in [
            (
                PersistentPodStateRetentionPolicyType::WhenScaled,
                "WhenScaled",
            ),
            (
                PersistentPodStateRetentionPolicyType::WhenDeleted,
                "WhenDeleted",
            ),
        ] {
            assert_eq!(serde_json::to_value(policy).unwrap(), s);
        }
    }

    #[test]
    fn crd_shape_matches_upstream() {
        let crd = PersistentPodState::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("persistentpodstates.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert!(crd.spec.names.short_names.unwrap_or_default().is_empty());
        let version = &crd.spec.versions[0];
        assert!(
            version
                .additional_printer_columns
                .clone()
                .unwrap_or_default()
                .is_empty()
        );
        assert!(version.subresources.as_ref().unwrap().status.is_some());
    }
}
