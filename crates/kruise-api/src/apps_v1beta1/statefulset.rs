//! `StatefulSet` (`apps.kruise.io/v1beta1`, Advanced StatefulSet): a drop-in superset of
//! `apps/v1` StatefulSet with parallel rolling update bounded by `maxUnavailable`, in-place
//! update, paused rollout, reserved ordinals, a scale-out budget and lifecycle hooks.

use std::ops::RangeInclusive;

use k8s_openapi::api::apps::v1::StatefulSetCondition;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::{InPlaceUpdateStrategy, Lifecycle, UpdatePriorityStrategy};

/// Upper bound of `updateStrategy.rollingUpdate.minReadySeconds`.
pub const MAX_MIN_READY_SECONDS: i32 = 300;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "StatefulSet",
    plural = "statefulsets",
    singular = "statefulset",
    shortname = "sts",
    shortname = "asts",
    namespaced,
    status = "StatefulSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Advanced StatefulSet: apps/v1 StatefulSet plus parallel and in-place rolling update, reserved ordinals and lifecycle hooks.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "The desired number of pods."
    ),
    printcolumn(
        name = "CURRENT",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "The number of currently all pods."
    ),
    printcolumn(
        name = "UPDATED",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "The number of pods updated."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "The number of pods ready."
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
        description = "The containers of currently advanced statefulset.",
        priority = 1
    ),
    printcolumn(
        name = "IMAGES",
        type_ = "string",
        json_path = ".spec.template.spec.containers[*].image",
        description = "The images of currently advanced statefulset.",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetSpec {
    /// Desired number of Pods. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over Pods; must match the template's labels.
    pub selector: LabelSelector,
    /// The Pod template; every Pod gets it plus a stable identity.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// Claims each Pod gets, named `<template>-<set>-<ordinal>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    /// When PVCs follow changes of `volumeClaimTemplates` (gate StatefulSetAutoResizePVCGate).
    #[serde(default, skip_serializing_if = "VolumeClaimUpdateStrategy::is_empty")]
    pub volume_claim_update_strategy: VolumeClaimUpdateStrategy,
    /// Name of the headless Service governing Pod hostnames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// `OrderedReady` (one at a time, in order) or `Parallel`. Defaults to OrderedReady.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_management_policy: Option<PodManagementPolicyType>,
    /// How Pods are replaced when the template changes.
    #[serde(default, skip_serializing_if = "StatefulSetUpdateStrategy::is_empty")]
    pub update_strategy: StatefulSetUpdateStrategy,
    /// ControllerRevisions to keep. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Ordinals that get no Pod: integers or `"start-end"` ranges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserve_ordinals: Vec<IntOrString>,
    /// Lifecycle hooks for pre-delete, in-place update and pre-normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// How Pods are created while scaling out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<StatefulSetScaleStrategy>,
    /// Whether PVCs are deleted with the set or when it scales in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_retention_policy:
        Option<StatefulSetPersistentVolumeClaimRetentionPolicy>,
    /// First ordinal of the set (gate StatefulSetStartOrdinal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinals: Option<StatefulSetOrdinals>,
}

impl StatefulSetSpec {
    /// Default of `revisionHistoryLimit`.
    pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

    /// `replicas`, defaulting to 1.
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    /// `podManagementPolicy`, defaulting to `OrderedReady`.
    pub fn pod_management_policy(&self) -> PodManagementPolicyType {
        self.pod_management_policy.unwrap_or_default()
    }

    /// `revisionHistoryLimit`, defaulting to 10.
    pub fn revision_history_limit(&self) -> i32 {
        self.revision_history_limit
            .unwrap_or(Self::DEFAULT_REVISION_HISTORY_LIMIT)
    }

    /// `ordinals.start`, defaulting to 0.
    pub fn ordinals_start(&self) -> i32 {
        self.ordinals.as_ref().map_or(0, |o| o.start)
    }

    /// The valid entries of `reserveOrdinals` as inclusive ranges (invalid ones are skipped;
    /// admission rejects them).
    pub fn reserved_ordinal_ranges(&self) -> Vec<RangeInclusive<i32>> {
        self.reserve_ordinals
            .iter()
            .filter_map(|r| parse_reserve_ordinal(r).ok())
            .collect()
    }

    /// Whether `ordinal` is listed in `reserveOrdinals` (directly or through a range).
    pub fn is_reserved(&self, ordinal: i32) -> bool {
        self.reserve_ordinals
            .iter()
            .filter_map(|r| parse_reserve_ordinal(r).ok())
            .any(|range| range.contains(&ordinal))
    }

    /// The ordinals that should have a Pod: the first `replicas` integers from
    /// `ordinals.start` that are not reserved, ascending.
    pub fn live_ordinals(&self) -> Vec<i32> {
        let want = usize::try_from(self.replicas()).unwrap_or(0);
        let ranges = self.reserved_ordinal_ranges();
        let mut out = Vec::with_capacity(want);
        let mut ordinal = self.ordinals_start().max(0);
        while out.len() < want {
            match ranges.iter().find(|r| r.contains(&ordinal)) {
                // Jump over a whole reserved range at once.
                Some(range) => match range.end().checked_add(1) {
                    Some(next) => ordinal = next,
                    None => break,
                },
                None => {
                    out.push(ordinal);
                    match ordinal.checked_add(1) {
                        Some(next) => ordinal = next,
                        None => break,
                    }
                }
            }
        }
        out
    }
}

/// An entry of `reserveOrdinals` that is neither a non-negative integer nor a `"a-b"` range
/// with `a <= b`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidReserveOrdinal {
    #[error("reserve ordinal is negative: {0}")]
    Negative(i32),
    #[error("reserve ordinal is not a valid range: {0}")]
    NotARange(String),
}

/// Parses one `reserveOrdinals` entry: `3` → `3..=3`, `"5-7"` → `5..=7`.
pub fn parse_reserve_ordinal(
    value: &IntOrString,
) -> Result<RangeInclusive<i32>, InvalidReserveOrdinal> {
    match value {
        IntOrString::Int(n) if *n >= 0 => Ok(*n..=*n),
        IntOrString::Int(n) => Err(InvalidReserveOrdinal::Negative(*n)),
        IntOrString::String(s) => {
            let invalid = || InvalidReserveOrdinal::NotARange(s.clone());
            let (start, end) = s.split_once('-').ok_or_else(invalid)?;
            let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
            if !digits(start) || !digits(end) {
                return Err(invalid());
            }
            let start: i32 = start.parse().map_err(|_| invalid())?;
            let end: i32 = end.parse().map_err(|_| invalid())?;
            if start > end {
                return Err(invalid());
            }
            Ok(start..=end)
        }
    }
}

// Enum types carry plain comments, not `///`: kube hoists an optional enum's own schema
// into the field, so a type-level doc would replace the field's CRD description.
// `podManagementPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PodManagementPolicyType {
    /// Create Pods in ordinal order, each after its predecessor is Running and Ready.
    #[default]
    OrderedReady,
    /// Create and delete Pods all at once.
    Parallel,
}

// `updateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum StatefulSetUpdateStrategyType {
    /// Replace Pods automatically, highest ordinal first.
    #[default]
    RollingUpdate,
    /// Only Pods deleted by the user are recreated at the new revision.
    OnDelete,
}

/// `updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetUpdateStrategy {
    /// `RollingUpdate` or `OnDelete`. Defaults to RollingUpdate.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<StatefulSetUpdateStrategyType>,
    /// Parameters of a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateStatefulSetStrategy>,
}

impl StatefulSetUpdateStrategy {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `type`, defaulting to `RollingUpdate`.
    pub fn strategy_type(&self) -> StatefulSetUpdateStrategyType {
        self.type_.unwrap_or_default()
    }

    /// `rollingUpdate.partition`, defaulting to 0.
    pub fn partition(&self) -> i32 {
        self.rolling_update
            .as_ref()
            .and_then(|r| r.partition)
            .unwrap_or(0)
    }

    /// `rollingUpdate.maxUnavailable`, defaulting to 1.
    pub fn max_unavailable(&self) -> IntOrString {
        self.rolling_update
            .as_ref()
            .and_then(|r| r.max_unavailable.clone())
            .unwrap_or(IntOrString::Int(1))
    }

    /// `rollingUpdate.podUpdatePolicy`, defaulting to `ReCreate`.
    pub fn pod_update_policy(&self) -> PodUpdateStrategyType {
        self.rolling_update
            .as_ref()
            .and_then(|r| r.pod_update_policy)
            .unwrap_or_default()
    }

    /// `rollingUpdate.paused`.
    pub fn paused(&self) -> bool {
        self.rolling_update.as_ref().is_some_and(|r| r.paused)
    }

    /// `rollingUpdate.minReadySeconds`, defaulting to 0.
    pub fn min_ready_seconds(&self) -> i32 {
        self.rolling_update
            .as_ref()
            .and_then(|r| r.min_ready_seconds)
            .unwrap_or(0)
    }
}

/// `updateStrategy.rollingUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateStatefulSetStrategy {
    /// Ordered: Pods with ordinal index below this keep the old revision; unordered: number of Pods kept old. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// Maximum Pods unavailable during the update (number or percent, rounded down); needs Parallel unless 1. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// `ReCreate`, `InPlaceIfPossible` or `InPlaceOnly`. Defaults to ReCreate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<PodUpdateStrategyType>,
    /// Stop updating Pods (scaling still works).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Update Pods in priority order instead of by ordinal (Parallel only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unordered_update: Option<UnorderedUpdateStrategy>,
    /// Options of in-place update, such as the grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
    /// Seconds an updated Pod must be ready before it counts as available (0-300). Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
}

/// `updateStrategy.rollingUpdate.unorderedUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnorderedUpdateStrategy {
    /// Rules that rank the Pods to update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
}

// `updateStrategy.rollingUpdate.podUpdatePolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PodUpdateStrategyType {
    /// Delete old Pods and create new ones.
    #[default]
    ReCreate,
    /// Update in place when only images/metadata changed, recreate otherwise.
    InPlaceIfPossible,
    /// Update in place only; other template changes are rejected.
    InPlaceOnly,
}

impl PodUpdateStrategyType {
    /// Whether Pods may be updated in place.
    pub fn is_in_place(self) -> bool {
        !matches!(self, PodUpdateStrategyType::ReCreate)
    }
}

/// `scaleStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetScaleStrategy {
    /// Maximum Pods unavailable while scaling out (number or percent, rounded down); Parallel only. Unset: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

// `persistentVolumeClaimRetentionPolicy.whenDeleted` / `.whenScaled`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PersistentVolumeClaimRetentionPolicyType {
    /// Keep the PVCs.
    #[default]
    Retain,
    /// Delete the PVCs.
    Delete,
}

/// `persistentVolumeClaimRetentionPolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetPersistentVolumeClaimRetentionPolicy {
    /// What happens to PVCs when the set is deleted. Defaults to Retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_deleted: Option<PersistentVolumeClaimRetentionPolicyType>,
    /// What happens to PVCs of Pods removed by scale-in. Defaults to Retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_scaled: Option<PersistentVolumeClaimRetentionPolicyType>,
}

// `volumeClaimUpdateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VolumeClaimUpdateStrategyType {
    /// Resize a Pod's PVCs when the Pod is rolled.
    OnPodRollingUpdate,
    /// Leave existing PVCs alone; new ones use the new template.
    #[default]
    OnDelete,
}

/// `volumeClaimUpdateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimUpdateStrategy {
    /// `OnPodRollingUpdate` or `OnDelete`. Defaults to OnDelete.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<VolumeClaimUpdateStrategyType>,
}

impl VolumeClaimUpdateStrategy {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// `ordinals`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetOrdinals {
    /// Index of the first replica. Defaults to 0.
    #[serde(default)]
    pub start: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetStatus {
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub observed_generation: i64,
    /// Pods created by the controller.
    #[serde(default)]
    pub replicas: i32,
    /// Pods that are Running and Ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Pods ready for `minReadySeconds` and in lifecycle state Normal.
    #[serde(default)]
    pub available_replicas: i32,
    /// Pods at currentRevision.
    #[serde(default)]
    pub current_replicas: i32,
    /// Pods at updateRevision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Pods at updateRevision that are ready.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub updated_ready_replicas: i32,
    /// Pods at updateRevision that are available.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub updated_available_replicas: i32,
    /// Revision of the Pods not yet updated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// Revision generated from the current template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Hash collisions seen when naming ControllerRevisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// `FailedCreatePod` / `FailedUpdatePod` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatefulSetCondition>,
    /// The selector in string form, for the scale subresource (e.g. `app=nginx`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
    /// How many Pods have PVCs matching each volume claim template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claims: Vec<VolumeClaimStatus>,
}

/// How far the Pods' PVCs have caught up with one volume claim template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimStatus {
    /// Name of the volume claim template.
    pub volume_claim_name: String,
    /// Pods whose PVC requests at least the template's storage.
    #[serde(default)]
    pub compatible_replicas: i32,
    /// Compatible Pods whose PVC capacity has caught up with the request.
    #[serde(default)]
    pub compatible_ready_replicas: i32,
}

impl StatefulSet {
    /// The CRD as installed: `v1beta1` (storage) plus `v1alpha1` served with the same schema,
    /// so manifests of either version apply (no conversion needed, the fields are the same).
    pub fn crd_with_v1alpha1() -> CustomResourceDefinition {
        let mut crd = Self::crd();
        if let Some(beta) = crd.spec.versions.first() {
            let mut alpha = beta.clone();
            alpha.name = "v1alpha1".into();
            alpha.storage = false;
            crd.spec.versions.insert(0, alpha);
        }
        crd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEB: &str = r#"
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: web
  namespace: default
spec:
  serviceName: nginx-headless
  podManagementPolicy: Parallel
  replicas: 5
  reserveOrdinals: [1, "7-9"]
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
      maxUnavailable: 3
      partition: 4
      minReadySeconds: 10
      paused: true
      inPlaceUpdateStrategy:
        gracePeriodSeconds: 10
      unorderedUpdate:
        priorityStrategy:
          weightPriority:
          - weight: 50
            matchSelector:
              matchLabels:
                test-key: foo
  scaleStrategy:
    maxUnavailable: 10%
  persistentVolumeClaimRetentionPolicy:
    whenDeleted: Retain
    whenScaled: Delete
  volumeClaimUpdateStrategy:
    type: OnPodRollingUpdate
  ordinals:
    start: 2
  lifecycle:
    preDelete:
      finalizersHandler: [example.com/hook]
      markPodNotReady: true
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      readinessGates:
      - conditionType: InPlaceUpdateReady
      containers:
      - name: nginx
        image: nginx
        ports:
        - name: web
          containerPort: 80
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
status:
  observedGeneration: 3
  replicas: 5
  readyReplicas: 5
  availableReplicas: 5
  currentReplicas: 2
  updatedReplicas: 3
  updatedReadyReplicas: 3
  currentRevision: web-5d8c9b7f6
  updateRevision: web-84644dfc7d
  collisionCount: 0
  labelSelector: app=nginx
  conditions:
  - type: FailedCreatePod
    status: "True"
    reason: FailedCreate
    message: "StatefulPodControl failed to create Pod error: boom"
    lastTransitionTime: "2024-01-01T00:00:00Z"
  volumeClaims:
  - volumeClaimName: www
    compatibleReplicas: 5
    compatibleReadyReplicas: 4
"#;

    fn yaml_value(s: &str) -> serde_json::Value {
        serde_saphyr::from_str(s).unwrap()
    }

    #[test]
    fn upstream_manifest_round_trips_without_losing_fields() {
        let mut original = yaml_value(WEB);
        let sts: StatefulSet = serde_json::from_value(original.clone()).unwrap();
        // k8s-openapi always writes the type meta of an embedded PVC; nothing else changes.
        let pvc = &mut original["spec"]["volumeClaimTemplates"][0];
        pvc["apiVersion"] = "v1".into();
        pvc["kind"] = "PersistentVolumeClaim".into();
        assert_eq!(serde_json::to_value(&sts).unwrap(), original);

        let spec = &sts.spec;
        assert_eq!(spec.replicas(), 5);
        assert_eq!(
            spec.pod_management_policy(),
            PodManagementPolicyType::Parallel
        );
        assert_eq!(spec.update_strategy.partition(), 4);
        assert_eq!(spec.update_strategy.max_unavailable(), IntOrString::Int(3));
        assert_eq!(
            spec.update_strategy.pod_update_policy(),
            PodUpdateStrategyType::InPlaceIfPossible
        );
        assert!(spec.update_strategy.paused());
        assert_eq!(spec.update_strategy.min_ready_seconds(), 10);
        assert_eq!(spec.ordinals_start(), 2);
        let status = sts.status.unwrap();
        assert_eq!(status.update_revision, "web-84644dfc7d");
        assert_eq!(status.volume_claims[0].compatible_ready_replicas, 4);
        assert_eq!(status.conditions[0].type_, "FailedCreatePod");
    }

    #[test]
    fn migrated_native_manifest_gets_native_defaults() {
        let sts: StatefulSet = serde_json::from_value(yaml_value(
            r#"
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata: {name: sample}
spec:
  selector: {matchLabels: {app: sample}}
  template:
    metadata: {labels: {app: sample}}
    spec: {containers: [{name: main, image: nginx:alpine}]}
"#,
        ))
        .unwrap();
        let spec = &sts.spec;
        assert_eq!(spec.replicas(), 1);
        assert_eq!(
            spec.pod_management_policy(),
            PodManagementPolicyType::OrderedReady
        );
        assert_eq!(
            spec.update_strategy.strategy_type(),
            StatefulSetUpdateStrategyType::RollingUpdate
        );
        assert_eq!(spec.update_strategy.partition(), 0);
        assert_eq!(spec.update_strategy.max_unavailable(), IntOrString::Int(1));
        assert_eq!(
            spec.update_strategy.pod_update_policy(),
            PodUpdateStrategyType::ReCreate
        );
        assert!(!spec.update_strategy.paused());
        assert_eq!(spec.revision_history_limit(), 10);
        assert_eq!(spec.live_ordinals(), vec![0]);
        // Empty optional structs are not written back.
        let json = serde_json::to_value(&sts).unwrap();
        assert!(json["spec"].get("updateStrategy").is_none());
        assert!(json["spec"].get("volumeClaimUpdateStrategy").is_none());
        assert!(json.get("status").is_none());
    }

    #[test]
    fn enums_use_upstream_spellings() {
        let cases = [
            (
                serde_json::to_value(PodManagementPolicyType::OrderedReady),
                "OrderedReady",
            ),
            (
                serde_json::to_value(PodManagementPolicyType::Parallel),
                "Parallel",
            ),
            (
                serde_json::to_value(StatefulSetUpdateStrategyType::RollingUpdate),
                "RollingUpdate",
            ),
            (
                serde_json::to_value(StatefulSetUpdateStrategyType::OnDelete),
                "OnDelete",
            ),
            (
                serde_json::to_value(PodUpdateStrategyType::ReCreate),
                "ReCreate",
            ),
            (
                serde_json::to_value(PodUpdateStrategyType::InPlaceIfPossible),
                "InPlaceIfPossible",
            ),
            (
                serde_json::to_value(PodUpdateStrategyType::InPlaceOnly),
                "InPlaceOnly",
            ),
            (
                serde_json::to_value(PersistentVolumeClaimRetentionPolicyType::Retain),
                "Retain",
            ),
            (
                serde_json::to_value(PersistentVolumeClaimRetentionPolicyType::Delete),
                "Delete",
            ),
            (
                serde_json::to_value(VolumeClaimUpdateStrategyType::OnPodRollingUpdate),
                "OnPodRollingUpdate",
            ),
            (
                serde_json::to_value(VolumeClaimUpdateStrategyType::OnDelete),
                "OnDelete",
            ),
        ];
        for (value, want) in cases {
            assert_eq!(value.unwrap(), want);
        }
        assert!(PodUpdateStrategyType::InPlaceOnly.is_in_place());
        assert!(!PodUpdateStrategyType::ReCreate.is_in_place());
        assert_eq!(
            VolumeClaimUpdateStrategyType::default(),
            VolumeClaimUpdateStrategyType::OnDelete
        );
    }

    #[test]
    fn status_counters_are_always_serialized() {
        let json = serde_json::to_value(StatefulSetStatus::default()).unwrap();
        for key in [
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "currentReplicas",
            "updatedReplicas",
        ] {
            assert_eq!(json[key], 0, "{key}");
        }
        assert!(json.get("updatedReadyReplicas").is_none());
        assert!(json.get("observedGeneration").is_none());
    }

    #[test]
    fn reserve_ordinals_parse_ints_and_ranges() {
        let ok = |v: IntOrString| parse_reserve_ordinal(&v);
        assert_eq!(ok(IntOrString::Int(1)), Ok(1..=1));
        assert_eq!(ok(IntOrString::String("2-4".into())), Ok(2..=4));
        assert_eq!(ok(IntOrString::String("5-5".into())), Ok(5..=5));
        assert_eq!(
            ok(IntOrString::Int(-1)),
            Err(InvalidReserveOrdinal::Negative(-1))
        );
        for bad in ["4-2", "3", "a-b", "-1-2", "1-", "1-2-3", " 1-2"] {
            assert_eq!(
                ok(IntOrString::String(bad.into())),
                Err(InvalidReserveOrdinal::NotARange(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn live_ordinals_skip_reserved_ones() {
        let mut spec = StatefulSetSpec {
            replicas: Some(4),
            reserve_ordinals: vec![IntOrString::Int(1)],
            ..Default::default()
        };
        assert_eq!(spec.live_ordinals(), vec![0, 2, 3, 4]);
        // Reserve 3 as well, replicas unchanged: Pod 3 goes, Pod 5 comes.
        spec.reserve_ordinals.push(IntOrString::Int(3));
        assert_eq!(spec.live_ordinals(), vec![0, 2, 4, 5]);
        // ...and with replicas decremented only Pod 3 goes.
        spec.replicas = Some(3);
        assert_eq!(spec.live_ordinals(), vec![0, 2, 4]);
        assert!(spec.is_reserved(3));
        assert!(!spec.is_reserved(4));

        spec.reserve_ordinals = vec![IntOrString::String("0-2".into())];
        spec.ordinals = Some(StatefulSetOrdinals { start: 1 });
        assert_eq!(spec.live_ordinals(), vec![3, 4, 5]);
        spec.replicas = Some(0);
        assert!(spec.live_ordinals().is_empty());
    }

    #[test]
    fn crd_matches_upstream_shape() {
        let crd = StatefulSet::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("statefulsets.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["sts".to_string(), "asts".to_string()])
        );
        let version = &crd.spec.versions[0];
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.json_path.as_str(), c.priority))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("DESIRED", ".spec.replicas", None),
                ("CURRENT", ".status.replicas", None),
                ("UPDATED", ".status.updatedReplicas", None),
                ("READY", ".status.readyReplicas", None),
                ("AGE", ".metadata.creationTimestamp", None),
                (
                    "CONTAINERS",
                    ".spec.template.spec.containers[*].name",
                    Some(1)
                ),
                ("IMAGES", ".spec.template.spec.containers[*].image", Some(1)),
            ]
        );
        let sub = version.subresources.as_ref().unwrap();
        assert!(sub.status.is_some());
        let scale = sub.scale.as_ref().unwrap();
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.labelSelector")
        );

        let both = StatefulSet::crd_with_v1alpha1();
        let versions: Vec<_> = both
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(
            versions,
            vec![("v1alpha1", true, false), ("v1beta1", true, true)]
        );
    }

    const EXAMPLES: [(&str, &str); 4] = [
        (
            "advanced-statefulset-web.yaml",
            include_str!("../../../../examples/advanced-statefulset-web.yaml"),
        ),
        (
            "advanced-statefulset-web-inplace.yaml",
            include_str!("../../../../examples/advanced-statefulset-web-inplace.yaml"),
        ),
        (
            "advanced-statefulset-reserve-ordinals.yaml",
            include_str!("../../../../examples/advanced-statefulset-reserve-ordinals.yaml"),
        ),
        (
            "advanced-statefulset-scale-budget.yaml",
            include_str!("../../../../examples/advanced-statefulset-scale-budget.yaml"),
        ),
    ];

    #[test]
    fn examples_parse_round_trip_and_pass_basic_rules() {
        for (file, text) in EXAMPLES {
            let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text).unwrap();
            let mut found = 0;
            for doc in docs {
                assert!(doc["metadata"].get("namespace").is_none(), "{file}");
                if doc["kind"] != "StatefulSet" {
                    continue;
                }
                found += 1;
                assert_eq!(doc["apiVersion"], "apps.kruise.io/v1beta1", "{file}");
                let sts: StatefulSet = serde_json::from_value(doc.clone()).unwrap();
                assert_eq!(serde_json::to_value(&sts).unwrap(), doc, "{file}");
                let spec = &sts.spec;
                let parallel = spec.pod_management_policy() == PodManagementPolicyType::Parallel;
                let unavailable = spec.update_strategy.max_unavailable();
                assert!(parallel || unavailable == IntOrString::Int(1), "{file}");
                if spec.scale_strategy.is_some() {
                    assert!(parallel, "{file}");
                }
                if spec.update_strategy.pod_update_policy().is_in_place() {
                    let gates = spec
                        .template
                        .spec
                        .as_ref()
                        .and_then(|s| s.readiness_gates.as_ref())
                        .unwrap();
                    assert!(
                        gates
                            .iter()
                            .any(|g| g.condition_type == crate::keys::INPLACE_UPDATE_READY),
                        "{file}"
                    );
                }
                let labels = spec.template.metadata.as_ref().unwrap().labels.as_ref();
                for (k, v) in spec.selector.match_labels.iter().flatten() {
                    assert_eq!(labels.and_then(|l| l.get(k)), Some(v), "{file}");
                }
            }
            assert_eq!(found, 1, "{file}");
        }
    }
}
