//! `DaemonSet` (`apps.kruise.io/v1alpha1`, Advanced DaemonSet): one Pod per eligible node
//! like `apps/v1` DaemonSet, plus node-selector-scoped and partitioned rollout, pause,
//! surge, in-place image update, a burst limit and a preDelete hook.

use k8s_openapi::api::apps::v1::DaemonSetCondition;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::Lifecycle;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "DaemonSet",
    plural = "daemonsets",
    singular = "daemonset",
    shortname = "daemon",
    shortname = "ads",
    namespaced,
    status = "DaemonSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Advanced DaemonSet: apps/v1 DaemonSet plus partitioned, node-selected, paused, surging and in-place rollout.",
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".status.desiredNumberScheduled",
        description = "The desired number of pods."
    ),
    printcolumn(
        name = "CURRENT",
        type_ = "integer",
        json_path = ".status.currentNumberScheduled",
        description = "The current number of pods."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.numberReady",
        description = "The ready number of pods."
    ),
    printcolumn(
        name = "UP-TO-DATE",
        type_ = "integer",
        json_path = ".status.updatedNumberScheduled",
        description = "The updated number of pods."
    ),
    printcolumn(
        name = "AVAILABLE",
        type_ = "integer",
        json_path = ".status.numberAvailable",
        description = "The available number of pods."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    ),
    printcolumn(
        name = "CONTAINERS",
        type_ = "string",
        json_path = ".spec.template.spec.containers[*].name",
        description = "The containers of currently advanced daemonset.",
        priority = 1
    ),
    printcolumn(
        name = "IMAGES",
        type_ = "string",
        json_path = ".spec.template.spec.containers[*].image",
        description = "The images of currently advanced daemonset.",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {
    /// Label query over Pods; must match the template's labels. Immutable.
    pub selector: LabelSelector,
    /// The Pod run on every eligible node.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// How Pods are replaced when the template changes.
    #[serde(default, skip_serializing_if = "DaemonSetUpdateStrategy::is_empty")]
    pub update_strategy: DaemonSetUpdateStrategy,
    /// Seconds a new Pod must be ready before it counts as available.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub min_ready_seconds: i32,
    /// Maximum Pods created or deleted per sync (number or percent of desired). Defaults to 250.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_replicas: Option<IntOrString>,
    /// ControllerRevisions to keep. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Lifecycle hooks; only `preDelete` is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
}

impl DaemonSetSpec {
    /// Default of `burstReplicas`.
    pub const DEFAULT_BURST_REPLICAS: i32 = 250;
    /// Default of `revisionHistoryLimit`.
    pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

    /// `burstReplicas`, defaulting to 250.
    pub fn burst_replicas(&self) -> IntOrString {
        self.burst_replicas
            .clone()
            .unwrap_or(IntOrString::Int(Self::DEFAULT_BURST_REPLICAS))
    }

    /// `revisionHistoryLimit`, defaulting to 10.
    pub fn revision_history_limit(&self) -> i32 {
        self.revision_history_limit
            .unwrap_or(Self::DEFAULT_REVISION_HISTORY_LIMIT)
    }
}

// Enum types carry plain comments, not `///`: kube hoists an optional enum's own schema
// into the field, so a type-level doc would replace the field's CRD description.
// `updateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DaemonSetUpdateStrategyType {
    /// Replace Pods node by node.
    #[default]
    RollingUpdate,
    /// Only Pods deleted by the user are replaced.
    OnDelete,
}

// `updateStrategy.rollingUpdate.rollingUpdateType`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RollingUpdateType {
    /// Delete the old Pod, then create the new one (or surge, when maxSurge is set).
    #[default]
    Standard,
    /// Update the images in place when possible, recreate otherwise.
    InPlaceIfPossible,
    /// Deprecated: Standard with maxSurge 1 and maxUnavailable 0.
    Surging,
}

/// `updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetUpdateStrategy {
    /// `RollingUpdate` or `OnDelete`. Defaults to RollingUpdate.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<DaemonSetUpdateStrategyType>,
    /// Parameters of a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDaemonSet>,
}

impl DaemonSetUpdateStrategy {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `type`, defaulting to `RollingUpdate`.
    pub fn strategy_type(&self) -> DaemonSetUpdateStrategyType {
        self.type_.unwrap_or_default()
    }

    /// `rollingUpdate.rollingUpdateType`, defaulting to `Standard`.
    pub fn rolling_update_type(&self) -> RollingUpdateType {
        self.rolling_update
            .as_ref()
            .and_then(|r| r.rolling_update_type)
            .unwrap_or_default()
    }

    /// `rollingUpdate.paused`, defaulting to false.
    pub fn paused(&self) -> bool {
        self.rolling_update
            .as_ref()
            .and_then(|r| r.paused)
            .unwrap_or(false)
    }
}

/// `updateStrategy.rollingUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDaemonSet {
    /// `Standard`, `InPlaceIfPossible` or the deprecated `Surging`. Defaults to Standard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update_type: Option<RollingUpdateType>,
    /// Maximum nodes whose Pod may be unavailable during the update (rounded up). Defaults to 1 when maxSurge is unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Maximum nodes running a new Pod beside the old one during the update (rounded up). Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Label query over node labels: only matching nodes are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Number or percent of nodes that keep the old revision. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Stop updating Pods (Pods are still created and deleted per node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
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
    /// The current revision's `controller-revision-hash`.
    #[serde(default)]
    pub daemon_set_hash: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    const NGINX: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata:
  name: nginx
  namespace: default
spec:
  burstReplicas: 250
  minReadySeconds: 5
  revisionHistoryLimit: 10
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      rollingUpdateType: Standard
      maxUnavailable: 1
      maxSurge: 0
      partition: 10
      paused: true
      selector:
        matchLabels:
          kubernetes.io/hostname: node1
  lifecycle:
    preDelete:
      labelsHandler:
        example.com/unready-blocker: "true"
      markPodNotReady: true
  selector:
    matchLabels:
      k8s-app: nginx
  template:
    metadata:
      labels:
        k8s-app: nginx
    spec:
      containers:
      - image: nginx:1.7.9
        name: nginx
        ports:
        - name: http
          containerPort: 80
status:
  currentNumberScheduled: 2
  numberMisscheduled: 0
  desiredNumberScheduled: 2
  numberReady: 2
  observedGeneration: 1
  updatedNumberScheduled: 2
  numberAvailable: 2
  daemonSetHash: 7d5c6b7f8
"#;

    fn yaml_value(s: &str) -> serde_json::Value {
        serde_saphyr::from_str(s).unwrap()
    }

    #[test]
    fn upstream_manifest_round_trips_without_losing_fields() {
        let original = yaml_value(NGINX);
        let ds: DaemonSet = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(serde_json::to_value(&ds).unwrap(), original);

        let strategy = &ds.spec.update_strategy;
        assert_eq!(
            strategy.strategy_type(),
            DaemonSetUpdateStrategyType::RollingUpdate
        );
        assert_eq!(strategy.rolling_update_type(), RollingUpdateType::Standard);
        assert!(strategy.paused());
        let ru = strategy.rolling_update.as_ref().unwrap();
        assert_eq!(ru.partition, Some(IntOrString::Int(10)));
        assert_eq!(ru.max_surge, Some(IntOrString::Int(0)));
        assert!(
            ds.spec
                .lifecycle
                .unwrap()
                .pre_delete
                .unwrap()
                .mark_pod_not_ready
        );
        assert_eq!(ds.status.unwrap().daemon_set_hash, "7d5c6b7f8");
    }

    #[test]
    fn migrated_native_manifest_gets_native_defaults() {
        let ds: DaemonSet = serde_json::from_value(yaml_value(
            r#"
apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata: {name: sample-ds}
spec:
  selector: {matchLabels: {app: sample-ds}}
  template:
    metadata: {labels: {app: sample-ds}}
    spec: {containers: [{name: main, image: nginx:alpine}]}
"#,
        ))
        .unwrap();
        let spec = &ds.spec;
        assert_eq!(spec.burst_replicas(), IntOrString::Int(250));
        assert_eq!(spec.revision_history_limit(), 10);
        assert_eq!(
            spec.update_strategy.strategy_type(),
            DaemonSetUpdateStrategyType::RollingUpdate
        );
        assert_eq!(
            spec.update_strategy.rolling_update_type(),
            RollingUpdateType::Standard
        );
        assert!(!spec.update_strategy.paused());
        let json = serde_json::to_value(&ds).unwrap();
        assert!(json["spec"].get("updateStrategy").is_none());
    }

    fn json<T: Serialize>(value: T) -> serde_json::Value {
        serde_json::to_value(value).unwrap()
    }

    #[test]
    fn enums_use_upstream_spellings() {
        assert_eq!(
            json(DaemonSetUpdateStrategyType::RollingUpdate),
            "RollingUpdate"
        );
        assert_eq!(json(DaemonSetUpdateStrategyType::OnDelete), "OnDelete");
        assert_eq!(json(RollingUpdateType::Standard), "Standard");
        assert_eq!(
            json(RollingUpdateType::InPlaceIfPossible),
            "InPlaceIfPossible"
        );
        assert_eq!(json(RollingUpdateType::Surging), "Surging");
    }

    #[test]
    fn status_counters_and_hash_are_always_serialized() {
        let json = serde_json::to_value(DaemonSetStatus::default()).unwrap();
        for key in [
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
            "updatedNumberScheduled",
        ] {
            assert_eq!(json[key], 0, "{key}");
        }
        assert_eq!(json["daemonSetHash"], "");
        assert!(json.get("numberAvailable").is_none());
        assert!(json.get("observedGeneration").is_none());
    }

    #[test]
    fn crd_matches_spec() {
        let crd = DaemonSet::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("daemonsets.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["daemon".to_string(), "ads".to_string()])
        );
        let version = &crd.spec.versions[0];
        let sub = version.subresources.as_ref().unwrap();
        assert!(sub.status.is_some());
        assert!(sub.scale.is_none());
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.json_path.as_str(), c.priority))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("DESIRED", ".status.desiredNumberScheduled", None),
                ("CURRENT", ".status.currentNumberScheduled", None),
                ("READY", ".status.numberReady", None),
                ("UP-TO-DATE", ".status.updatedNumberScheduled", None),
                ("AVAILABLE", ".status.numberAvailable", None),
                ("AGE", ".metadata.creationTimestamp", None),
                (
                    "CONTAINERS",
                    ".spec.template.spec.containers[*].name",
                    Some(1)
                ),
                ("IMAGES", ".spec.template.spec.containers[*].image", Some(1)),
            ]
        );
    }

    const EXAMPLES: [(&str, &str); 2] = [
        (
            "advanced-daemonset-nginx.yaml",
            include_str!("../../../../examples/advanced-daemonset-nginx.yaml"),
        ),
        (
            "advanced-daemonset-nginx-inplace.yaml",
            include_str!("../../../../examples/advanced-daemonset-nginx-inplace.yaml"),
        ),
    ];

    #[test]
    fn examples_parse_and_round_trip() {
        for (file, text) in EXAMPLES {
            let doc: serde_json::Value = serde_saphyr::from_str(text).unwrap();
            assert!(doc["metadata"].get("namespace").is_none(), "{file}");
            assert_eq!(doc["apiVersion"], "apps.kruise.io/v1alpha1", "{file}");
            let ds: DaemonSet = serde_json::from_value(doc.clone()).unwrap();
            assert_eq!(serde_json::to_value(&ds).unwrap(), doc, "{file}");
            let labels = ds.spec.template.metadata.as_ref().unwrap().labels.as_ref();
            for (k, v) in ds.spec.selector.match_labels.iter().flatten() {
                assert_eq!(labels.and_then(|l| l.get(k)), Some(v), "{file}");
            }
        }
    }
}
