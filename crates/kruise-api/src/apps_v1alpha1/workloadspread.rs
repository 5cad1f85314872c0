//! `WorkloadSpread` (`apps.kruise.io/v1alpha1`): spreads the Pods of one existing workload
//! over ordered subsets of nodes, each with an optional cap, without touching the workload.
//! Also home of [`TargetReference`], shared with `PersistentPodState`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PreferredSchedulingTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "WorkloadSpread",
    plural = "workloadspreads",
    singular = "workloadspread",
    shortname = "ws",
    namespaced,
    status = "WorkloadSpreadStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "WorkloadSpread spreads the Pods of one workload over ordered subsets of nodes, each with an optional cap.",
    printcolumn(
        name = "WorkloadName",
        type_ = "string",
        json_path = ".spec.targetRef.name"
    ),
    printcolumn(
        name = "WorkloadKind",
        type_ = "string",
        json_path = ".spec.targetRef.kind"
    ),
    printcolumn(
        name = "Adaptive",
        type_ = "boolean",
        json_path = ".spec.scheduleStrategy.type[?(@ == \"Adaptive\")]",
        description = "Whether use the adaptive reschedule strategy"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
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

/// A workload in the same namespace, identified by apiVersion, kind and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetReference {
    /// API version of the workload, e.g. `apps.kruise.io/v1beta1`.
    pub api_version: String,
    /// Kind of the workload, e.g. `StatefulSet`.
    pub kind: String,
    /// Name of the workload.
    pub name: String,
}

/// Restricts a WorkloadSpread to part of a (custom) workload's Pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetFilter {
    /// Only Pods matching this selector are managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Dot paths in the workload (e.g. `spec.tfReplicaSpecs.Worker.replicas`) whose integer values sum to the managed replicas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas_path_list: Vec<String>,
}

/// `scheduleStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WorkloadSpreadScheduleStrategyType {
    /// Pods stay in the subset they were put in.
    #[default]
    Fixed,
    /// Pods that stay unschedulable are rescheduled to later subsets.
    Adaptive,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadScheduleStrategy {
    /// `Fixed` (default) or `Adaptive`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<WorkloadSpreadScheduleStrategyType>,
    /// Parameters of the `Adaptive` strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveWorkloadSpreadStrategy>,
}

impl WorkloadSpreadScheduleStrategy {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    pub fn is_adaptive(&self) -> bool {
        self.type_ == Some(WorkloadSpreadScheduleStrategyType::Adaptive)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveWorkloadSpreadStrategy {
    /// Skip the webhook's simple check that a subset has room for the Pod.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_simulation_schedule: bool,
    /// Seconds a Pod may stay unschedulable before it is moved to a later subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_critical_seconds: Option<i32>,
}

/// One subset: a group of nodes, how many Pods it takes, and what its Pods get.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubset {
    /// Unique name of the subset within the WorkloadSpread.
    pub name: String,
    /// Node selector term every Pod of the subset must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_node_selector_term: Option<NodeSelectorTerm>,
    /// Preferred node selector terms added to the subset's Pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_node_selector_terms: Vec<PreferredSchedulingTerm>,
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

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadStatus {
    /// The WorkloadSpread generation this status was computed from.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub observed_generation: i64,
    /// Status of each subset, in spec order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subset_statuses: Vec<WorkloadSpreadSubsetStatus>,
    /// Subset statuses per Pod version (`pod-template-hash`), so a rollout's old and new Pods are counted apart.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versioned_subset_statuses: BTreeMap<String, Vec<WorkloadSpreadSubsetStatus>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubsetStatus {
    /// The subset's name.
    pub name: String,
    /// Active Pods in the subset.
    #[serde(default)]
    pub replicas: i32,
    /// Subset conditions (`Schedulable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<WorkloadSpreadSubsetCondition>,
    /// Pods the subset can still take; -1 when it has no maxReplicas.
    #[serde(default)]
    pub missing_replicas: i32,
    /// Pods the webhook put in the subset but the controller has not seen yet, with the time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub creating_pods: BTreeMap<String, Time>,
    /// Pods whose deletion the webhook admitted but the controller has not seen yet, with the time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deleting_pods: BTreeMap<String, Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubsetCondition {
    /// Condition type: `Schedulable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable detail of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The WorkloadSpread generation the condition was set from. v1beta1's conditions are
    /// `metav1.Condition`, which has this field, so a client may write it there; it is kept
    /// (in v1alpha1 too, the stored version) but never set by the controller, as upstream's
    /// sets it neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
}

/// The `apps.kruise.io/matched-workloadspread` Pod annotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InjectWorkloadSpread {
    /// Name of the WorkloadSpread.
    pub name: String,
    /// Name of the subset the Pod was put in.
    pub subset: String,
    /// Id recorded in creatingPods when the Pod had no name yet (generateName).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A WorkloadSpread with a subset patch, an adaptive strategy and a versioned status.
    const WS_YAML: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata:
  name: ws-demo
  namespace: default
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: cs-demo
  subsets:
  - name: zone-a
    requiredNodeSelectorTerm:
      matchExpressions:
      - key: topology.kubernetes.io/zone
        operator: In
        values:
        - zone-a
    preferredNodeSelectorTerms:
    - weight: 1
      preference:
        matchExpressions:
        - key: node-pool
          operator: In
          values:
          - fast
    tolerations:
    - key: dedicated
      operator: Equal
      value: zone-a
      effect: NoSchedule
    maxReplicas: 2
    patch:
      metadata:
        labels:
          subset: zone-a
        annotations:
          example.com/owner: team-a
  - name: zone-b
    requiredNodeSelectorTerm:
      matchExpressions:
      - key: topology.kubernetes.io/zone
        operator: In
        values:
        - zone-b
  scheduleStrategy:
    type: Adaptive
    adaptive:
      disableSimulationSchedule: true
      rescheduleCriticalSeconds: 30
status:
  observedGeneration: 2
  subsetStatuses:
  - name: zone-a
    replicas: 2
    missingReplicas: 0
    conditions:
    - type: Schedulable
      status: "True"
      lastTransitionTime: "2024-05-01T10:00:00Z"
    creatingPods:
      cs-demo-abcde: "2024-05-01T10:00:01Z"
  - name: zone-b
    replicas: 1
    missingReplicas: -1
    deletingPods:
      cs-demo-fghij: "2024-05-01T10:00:02Z"
  versionedSubsetStatuses:
    versionIgnored:
    - name: zone-a
      replicas: 2
      missingReplicas: 0
"#;

    #[test]
    fn workloadspread_round_trips() {
        let original: serde_json::Value = serde_saphyr::from_str(WS_YAML).unwrap();
        let ws: WorkloadSpread = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(serde_json::to_value(&ws).unwrap(), original);

        assert_eq!(ws.spec.target_ref.name, "cs-demo");
        assert_eq!(ws.spec.subsets.len(), 2);
        assert_eq!(ws.spec.subsets[0].max_replicas, Some(IntOrString::Int(2)));
        assert!(ws.spec.subsets[1].max_replicas.is_none());
        assert_eq!(
            ws.spec.subsets[0].patch.as_ref().unwrap()["metadata"]["labels"]["subset"],
            "zone-a"
        );
        assert!(ws.spec.schedule_strategy.is_adaptive());
        let status = ws.status.unwrap();
        assert_eq!(status.subset_statuses[1].missing_replicas, -1);
        assert_eq!(status.versioned_subset_statuses["versionIgnored"].len(), 1);
    }

    #[test]
    fn target_filter_round_trips() {
        let json = serde_json::json!({
            "targetRef": {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "tf"},
            "targetFilter": {
                "selector": {"matchLabels": {"role": "worker"}},
                "replicasPathList": ["spec.tfReplicaSpecs.Worker.replicas"]
            },
            "subsets": [{"name": "a", "maxReplicas": "50%"}, {"name": "b"}]
        });
        let spec: WorkloadSpreadSpec = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(
            spec.target_filter.as_ref().unwrap().replicas_path_list,
            ["spec.tfReplicaSpecs.Worker.replicas"]
        );
        assert_eq!(serde_json::to_value(&spec).unwrap(), json);
    }

    #[test]
    fn zero_counters_are_always_written() {
        let status = WorkloadSpreadSubsetStatus {
            name: "zone-a".into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            serde_json::json!({"name": "zone-a", "replicas": 0, "missingReplicas": 0})
        );
    }

    #[test]
    fn schedule_strategy_spellings() {
        for (ty, s) in [
            (WorkloadSpreadScheduleStrategyType::Fixed, "Fixed"),
            (WorkloadSpreadScheduleStrategyType::Adaptive, "Adaptive"),
        ] {
            assert_eq!(serde_json::to_value(ty).unwrap(), s);
        }
        assert_eq!(
            WorkloadSpreadScheduleStrategyType::default(),
            WorkloadSpreadScheduleStrategyType::Fixed
        );
    }

    #[test]
    fn matched_annotation_matches_upstream_json() {
        let named: InjectWorkloadSpread =
            serde_json::from_str(r#"{"name":"ws-demo","subset":"zone-a"}"#).unwrap();
        assert_eq!(named.subset, "zone-a");
        assert_eq!(
            serde_json::to_string(&named).unwrap(),
            r#"{"name":"ws-demo","subset":"zone-a"}"#
        );
        let generated = InjectWorkloadSpread {
            uid: "6f1c".into(),
            ..named
        };
        assert_eq!(
            serde_json::to_string(&generated).unwrap(),
            r#"{"name":"ws-demo","subset":"zone-a","uid":"6f1c"}"#
        );
    }

    #[test]
    fn crd_shape_matches_upstream() {
        let crd = WorkloadSpread::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("workloadspreads.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["ws".to_string()]));
        let version = &crd.spec.versions[0];
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            [
                ("WorkloadName", "string", ".spec.targetRef.name"),
                ("WorkloadKind", "string", ".spec.targetRef.kind"),
                (
                    "Adaptive",
                    "boolean",
                    ".spec.scheduleStrategy.type[?(@ == \"Adaptive\")]"
                ),
                ("Age", "date", ".metadata.creationTimestamp"),
            ]
        );
        let schema = serde_json::to_value(&version.schema).unwrap();
        let patch = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["subsets"]["items"]
            ["properties"]["patch"];
        assert_eq!(patch["x-kubernetes-preserve-unknown-fields"], true);
    }
}
