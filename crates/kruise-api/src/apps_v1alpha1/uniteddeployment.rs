//! `UnitedDeployment` (`apps.kruise.io/v1alpha1`): one workload per topology subset (zone,
//! node pool) built from a single template, with the total replicas split across subsets
//! and rollouts driven by per-subset manual partitions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DeploymentSpec, StatefulSetSpec};
use k8s_openapi::api::core::v1::{NodeSelectorTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::cloneset::CloneSetSpec;

/// Seconds a Pod may stay pending before its subset is marked unschedulable (Adaptive).
pub const DEFAULT_RESCHEDULE_CRITICAL_SECONDS: i32 = 30;
/// Seconds a subset stays unschedulable before it is tried again (Adaptive).
pub const DEFAULT_UNSCHEDULABLE_DURATION_SECONDS: i32 = 300;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
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

/// The subset workload template; exactly one field is set. Each is boxed: the four
/// workload specs inline make a UnitedDeployment too big for a 2 MiB thread stack while
/// it is decoded in a debug build.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubsetTemplate {
    /// Subsets are `apps/v1` StatefulSets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateful_set_template: Option<Box<StatefulSetTemplateSpec>>,
    /// Subsets are Advanced StatefulSets (`apps.kruise.io/v1beta1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced_stateful_set_template: Option<Box<AdvancedStatefulSetTemplateSpec>>,
    /// Subsets are CloneSets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_set_template: Option<Box<CloneSetTemplateSpec>>,
    /// Subsets are `apps/v1` Deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<Box<DeploymentTemplateSpec>>,
}

impl SubsetTemplate {
    pub fn is_empty(&self) -> bool {
        self.template_count() == 0
    }

    /// How many of the four templates are set (valid: exactly 1).
    pub fn template_count(&self) -> usize {
        usize::from(self.stateful_set_template.is_some())
            + usize::from(self.advanced_stateful_set_template.is_some())
            + usize::from(self.clone_set_template.is_some())
            + usize::from(self.deployment_template.is_some())
    }
}

/// Template of `apps/v1` StatefulSet subsets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatefulSetTemplateSpec {
    /// Labels and annotations of the subset workloads.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// The StatefulSet spec; replicas and selector are set per subset.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub spec: StatefulSetSpec,
}

/// Template of Advanced StatefulSet subsets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdvancedStatefulSetTemplateSpec {
    /// Labels and annotations of the subset workloads.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// The Advanced StatefulSet spec; replicas, selector and partition are set per subset.
    #[serde(deserialize_with = "workload_spec")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub spec: crate::apps_v1beta1::StatefulSetSpec,
}

/// Template of CloneSet subsets, in either of two shapes: `spec` as a v1alpha1
/// CloneSetSpec (ours, and OpenKruise up to 1.8), or as a v1beta1 CloneSetSpec, which is
/// how OpenKruise v1.9.0 types it in both UnitedDeployment versions
/// (apis/apps/v1alpha1/uniteddeployment_types.go `CloneSetTemplateSpec`). Which shape a
/// template is in: [`is_v1beta1_cloneset_spec`].
///
/// `metadata` and `spec` are always the v1alpha1 reading. A v1beta1-shaped template is
/// converted to it as a CloneSet would be ([`crate::conversion::convert_cloneset`]) and
/// is also kept as written in [`CloneSetTemplateSpec::v1beta1`]: serializing gives that
/// back unchanged, so a stored template is never rewritten into the other shape, and
/// the subset CloneSets are built from it as `apps.kruise.io/v1beta1` objects.
#[derive(Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CloneSetTemplateSpec {
    /// Labels and annotations of the subset workloads.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// The CloneSet spec; replicas, selector and partition are set per subset.
    #[serde(deserialize_with = "workload_spec")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub spec: CloneSetSpec,
    /// The whole template (`metadata` and `spec`) as written, when it is v1beta1-shaped;
    /// `None` for a v1alpha1-shaped one. While it is set it is what serializes: a change
    /// to `metadata` or `spec` alone is not written.
    #[schemars(skip)]
    pub v1beta1: Option<serde_json::Value>,
}

impl CloneSetTemplateSpec {
    /// Whether the template was written in the v1beta1 CloneSetSpec shape.
    pub fn is_v1beta1(&self) -> bool {
        self.v1beta1.is_some()
    }

    /// Reads a template of either shape (see the type).
    pub fn from_value(template: serde_json::Value) -> Result<Self, String> {
        let beta = template.get("spec").is_some_and(is_v1beta1_cloneset_spec);
        if !beta {
            let typed: TypedCloneSetTemplate =
                serde_json::from_value(template).map_err(|e| format!("cloneSetTemplate: {e}"))?;
            return Ok(CloneSetTemplateSpec {
                metadata: typed.metadata,
                spec: typed.spec,
                v1beta1: None,
            });
        }
        let wrapper = serde_json::json!({
            "apiVersion": crate::conversion::V1BETA1,
            "kind": "CloneSet",
            "metadata": template.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
            "spec": template["spec"].clone(),
        });
        let alpha = crate::conversion::convert_cloneset(wrapper, crate::conversion::V1ALPHA1)?;
        let typed: TypedCloneSetTemplate = serde_json::from_value(serde_json::json!({
            "metadata": alpha["metadata"],
            "spec": alpha["spec"],
        }))
        .map_err(|e| format!("cloneSetTemplate (v1beta1 CloneSetSpec read as v1alpha1): {e}"))?;
        Ok(CloneSetTemplateSpec {
            metadata: typed.metadata,
            spec: typed.spec,
            v1beta1: Some(template),
        })
    }
}

/// Whether a `cloneSetTemplate.spec` is written in the v1beta1 CloneSetSpec shape
/// (OpenKruise v1.9.0) rather than the v1alpha1 one. It is when it names what only
/// v1beta1 has (the names [`crate::conversion::cloneset_to_v1alpha1`] converts):
/// - `updateStrategy.type: RollingUpdate` (v1alpha1's types are `ReCreate`,
///   `InPlaceIfPossible`, `InPlaceOnly` and `OnDelete`);
/// - `updateStrategy.rollingUpdate`;
/// - `scaleStrategy.enablePVCReuse` or `scaleStrategy.excludePreparingDelete`;
/// - `updateStrategy.type: OnDelete`, which both versions spell alike, unless the spec
///   also names a field only v1alpha1 has (`scaleStrategy.disablePVCReuse`, or one of
///   the rolling-update settings v1alpha1 keeps directly under `updateStrategy`):
///   OpenKruise v1.9.0 reads every template as v1beta1, so the bare type is read as
///   it does (PVC reuse then off unless `enablePVCReuse`).
///
/// Anything else, a spec without an update strategy included, is v1alpha1-shaped.
pub fn is_v1beta1_cloneset_spec(spec: &serde_json::Value) -> bool {
    let strategy = spec.get("updateStrategy");
    let strategy_type = strategy
        .and_then(|s| s.get("type"))
        .and_then(serde_json::Value::as_str);
    let scale = spec.get("scaleStrategy");
    let scale_has = |key: &str| scale.and_then(|s| s.get(key)).is_some();
    if strategy_type == Some("RollingUpdate")
        || strategy.and_then(|s| s.get("rollingUpdate")).is_some()
        || scale_has("enablePVCReuse")
        || scale_has("excludePreparingDelete")
    {
        return true;
    }
    const V1ALPHA1_STRATEGY_FIELDS: [&str; 7] = [
        "partition",
        "maxUnavailable",
        "maxSurge",
        "paused",
        "priorityStrategy",
        "scatterStrategy",
        "inPlaceUpdateStrategy",
    ];
    let names_v1alpha1_only = scale_has("disablePVCReuse")
        || V1ALPHA1_STRATEGY_FIELDS
            .iter()
            .any(|key| strategy.and_then(|s| s.get(*key)).is_some());
    strategy_type == Some("OnDelete") && !names_v1alpha1_only
}

/// The v1alpha1 reading of a CloneSet template, as serde sees it.
#[derive(Serialize, Deserialize)]
struct TypedCloneSetTemplate {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(deserialize_with = "workload_spec")]
    spec: CloneSetSpec,
}

/// [`TypedCloneSetTemplate`] borrowed, for serializing.
#[derive(Serialize)]
struct TypedCloneSetTemplateRef<'a> {
    #[serde(skip_serializing_if = "is_default_meta")]
    metadata: &'a ObjectMeta,
    spec: &'a CloneSetSpec,
}

fn is_default_meta(meta: &&ObjectMeta) -> bool {
    is_default(*meta)
}

impl Serialize for CloneSetTemplateSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.v1beta1 {
            Some(written) => written.serialize(serializer),
            None => TypedCloneSetTemplateRef {
                metadata: &self.metadata,
                spec: &self.spec,
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for CloneSetTemplateSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        CloneSetTemplateSpec::from_value(value).map_err(serde::de::Error::custom)
    }
}

/// Template of `apps/v1` Deployment subsets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeploymentTemplateSpec {
    /// Labels and annotations of the subset workloads.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// The Deployment spec; replicas and selector are set per subset.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub spec: DeploymentSpec,
}

/// Kruise workload specs require `selector` and `template`, which a UnitedDeployment template
/// may leave out (the controller fills in the selector); read them as empty instead of failing.
fn workload_spec<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let mut value = serde_json::Value::deserialize(deserializer)?;
    if let Some(map) = value.as_object_mut() {
        for key in ["selector", "template"] {
            map.entry(key)
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
        }
    }
    T::deserialize(value).map_err(serde::de::Error::custom)
}

/// `updateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UnitedDeploymentUpdateStrategyType {
    /// Each subset keeps `manualUpdate.partitions[subset]` Pods at the old revision.
    #[default]
    Manual,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentUpdateStrategy {
    /// `Manual` (the only and default type).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<UnitedDeploymentUpdateStrategyType>,
    /// Parameters of the `Manual` strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_update: Option<ManualUpdate>,
}

impl UnitedDeploymentUpdateStrategy {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// The partition requested for a subset (0 when unset).
    pub fn partition(&self, subset: &str) -> i32 {
        self.manual_update
            .as_ref()
            .and_then(|m| m.partitions.get(subset).copied())
            .unwrap_or(0)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManualUpdate {
    /// Pods per subset kept at the old revision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partitions: BTreeMap<String, i32>,
}

/// The subsets of a UnitedDeployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// One workload is provisioned per subset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<Subset>,
    /// How Pods move between subsets when they cannot be scheduled.
    #[serde(
        default,
        skip_serializing_if = "UnitedDeploymentScheduleStrategy::is_empty"
    )]
    pub schedule_strategy: UnitedDeploymentScheduleStrategy,
}

impl Topology {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// One subset: a group of nodes and how many Pods it gets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subset {
    /// DNS label, unique in the UnitedDeployment; the subset workload is named `<ud>-<subset>-`.
    pub name: String,
    /// Node selector term added to the subset's Pods; immutable.
    #[serde(default, skip_serializing_if = "is_default")]
    pub node_selector_term: NodeSelectorTerm,
    /// Tolerations added to the subset's Pods; immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Fixed Pods (number or percent of spec.replicas); exclusive with minReplicas/maxReplicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<IntOrString>,
    /// Fewest Pods (number or percent) the subset gets, filled in spec order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<IntOrString>,
    /// Most Pods (number or percent) the subset gets; unset means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<IntOrString>,
    /// Strategic-merge patch applied to the subset workload's template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub patch: Option<serde_json::Value>,
}

/// `topology.scheduleStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UnitedDeploymentScheduleStrategyType {
    /// Pods stay in the subset they were allocated to.
    #[default]
    Fixed,
    /// Replicas stuck pending in a subset are moved to other subsets.
    Adaptive,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentScheduleStrategy {
    /// `Fixed` (default) or `Adaptive`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<UnitedDeploymentScheduleStrategyType>,
    /// Parameters of the `Adaptive` strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveUnitedDeploymentStrategy>,
}

impl UnitedDeploymentScheduleStrategy {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    pub fn is_adaptive(&self) -> bool {
        self.type_ == Some(UnitedDeploymentScheduleStrategyType::Adaptive)
    }

    /// Adaptive with `reserveUnschedulablePods`.
    pub fn should_reserve_unschedulable_pods(&self) -> bool {
        self.is_adaptive()
            && self
                .adaptive
                .as_ref()
                .is_some_and(|a| a.reserve_unschedulable_pods)
    }

    /// `adaptive.rescheduleCriticalSeconds`, defaulted to 30.
    pub fn reschedule_critical_seconds(&self) -> i32 {
        self.adaptive
            .as_ref()
            .and_then(|a| a.reschedule_critical_seconds)
            .unwrap_or(DEFAULT_RESCHEDULE_CRITICAL_SECONDS)
    }

    /// `adaptive.unschedulableDuration`, defaulted to 300.
    pub fn unschedulable_duration(&self) -> i32 {
        self.adaptive
            .as_ref()
            .and_then(|a| a.unschedulable_duration)
            .unwrap_or(DEFAULT_UNSCHEDULABLE_DURATION_SECONDS)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveUnitedDeploymentStrategy {
    /// Seconds a Pod may stay pending before its subset is marked unschedulable. Defaults to 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_critical_seconds: Option<i32>,
    /// Seconds an unschedulable subset stays so before it is tried again. Defaults to 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable_duration: Option<i32>,
    /// Keep pending Pods of an unschedulable subset and run temporary replacements elsewhere (Deployment and CloneSet only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserve_unschedulable_pods: bool,
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
    /// Replicas allocated to each subset.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subset_replicas: BTreeMap<String, i32>,
    /// Status of each subset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subset_statuses: Vec<UnitedDeploymentSubsetStatus>,
    /// `SubsetProvisioned`, `SubsetUpdated`, `SubsetFailure`, `UnitedDeploymentUpdated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<UnitedDeploymentCondition>,
    /// Progress of the current rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_status: Option<UpdateStatus>,
    /// The selector in string form, for the scale subresource (e.g. `app=sample`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentCondition {
    /// Condition type.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStatus {
    /// The revision being rolled out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub updated_revision: String,
    /// Partition currently applied to each subset.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub current_partitions: BTreeMap<String, i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentSubsetStatus {
    /// The subset's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Target replicas of the subset.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub replicas: i32,
    /// Ready Pods in the subset.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub ready_replicas: i32,
    /// Partition applied to the subset.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub partition: i32,
    /// Reserved (pending, kept) Pods in the subset.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub reserved_pods: i32,
    /// Subset conditions (`Schedulable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<UnitedDeploymentSubsetCondition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentSubsetCondition {
    /// Condition type: `Schedulable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason of the last transition (`reschedule`, `recover`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable detail of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A UnitedDeployment with every spec and status field filled in.
    const UD_YAML: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: UnitedDeployment
metadata:
  name: sample-ud
  namespace: default
spec:
  replicas: 6
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: sample
  template:
    cloneSetTemplate:
      metadata:
        labels:
          app: sample
      spec:
        selector:
          matchLabels:
            app: sample
        template:
          metadata:
            labels:
              app: sample
          spec:
            containers:
            - name: nginx
              image: nginx:alpine
        updateStrategy:
          type: InPlaceIfPossible
  topology:
    subsets:
    - name: subset-a
      nodeSelectorTerm:
        matchExpressions:
        - key: topology.kubernetes.io/zone
          operator: In
          values:
          - zone-a
      tolerations:
      - key: dedicated
        operator: Exists
      minReplicas: 1
      maxReplicas: 50%
      patch:
        metadata:
          labels:
            subset: a
    - name: subset-b
      nodeSelectorTerm:
        matchExpressions:
        - key: topology.kubernetes.io/zone
          operator: In
          values:
          - zone-b
    scheduleStrategy:
      type: Adaptive
      adaptive:
        rescheduleCriticalSeconds: 30
        unschedulableDuration: 300
        reserveUnschedulablePods: true
  updateStrategy:
    type: Manual
    manualUpdate:
      partitions:
        subset-a: 2
status:
  observedGeneration: 3
  replicas: 6
  readyReplicas: 5
  updatedReplicas: 4
  updatedReadyReplicas: 3
  reservedPods: 1
  collisionCount: 0
  currentRevision: sample-ud-5b9c7b6d4f
  subsetReplicas:
    subset-a: 3
    subset-b: 3
  subsetStatuses:
  - name: subset-a
    replicas: 3
    readyReplicas: 2
    partition: 2
    reservedPods: 1
    conditions:
    - type: Schedulable
      status: "False"
      reason: reschedule
      lastTransitionTime: "2024-05-01T10:00:00Z"
  conditions:
  - type: SubsetProvisioned
    status: "True"
    lastTransitionTime: "2024-05-01T10:00:00Z"
  - type: SubsetUpdated
    status: "False"
    reason: Error
    message: failed to update subset-b
  updateStatus:
    updatedRevision: sample-ud-7d8f9c6b5a
    currentPartitions:
      subset-a: 2
      subset-b: 0
  labelSelector: app=sample
"#;

    #[test]
    fn united_deployment_round_trips() {
        let original: serde_json::Value = serde_saphyr::from_str(UD_YAML).unwrap();
        let ud: UnitedDeployment = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(serde_json::to_value(&ud).unwrap(), original);

        assert_eq!(ud.spec.template.template_count(), 1);
        let cs = ud.spec.template.clone_set_template.as_ref().unwrap();
        assert_eq!(
            cs.spec.template.spec.as_ref().unwrap().containers[0]
                .image
                .as_deref(),
            Some("nginx:alpine")
        );
        let subsets = &ud.spec.topology.subsets;
        assert_eq!(
            subsets[0].max_replicas,
            Some(IntOrString::String("50%".into()))
        );
        assert_eq!(
            subsets[1]
                .node_selector_term
                .match_expressions
                .as_ref()
                .unwrap()[0]
                .values,
            Some(vec!["zone-b".to_string()])
        );
        let strategy = &ud.spec.topology.schedule_strategy;
        assert!(strategy.should_reserve_unschedulable_pods());
        assert_eq!(ud.spec.update_strategy.partition("subset-a"), 2);
        assert_eq!(ud.spec.update_strategy.partition("subset-b"), 0);
        let status = ud.status.unwrap();
        assert_eq!(status.reserved_pods, 1);
        assert_eq!(status.subset_statuses[0].ready_replicas, 2);
    }

    #[test]
    fn workload_templates_round_trip() {
        let template = serde_json::json!({
            "statefulSetTemplate": {
                "metadata": {"labels": {"app": "sts"}},
                "spec": {
                    "selector": {"matchLabels": {"app": "sts"}},
                    "serviceName": "sts",
                    "template": {
                        "metadata": {"labels": {"app": "sts"}},
                        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
                    },
                    // k8s-openapi always writes a PVC's apiVersion/kind, so the input has them.
                    "volumeClaimTemplates": [{
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": {"name": "data"},
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                    }]
                }
            }
        });
        let parsed: SubsetTemplate = serde_json::from_value(template.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), template);

        let template = serde_json::json!({
            "deploymentTemplate": {
                "metadata": {"labels": {"app": "dep"}},
                "spec": {
                    "selector": {"matchLabels": {"app": "dep"}},
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                    "template": {
                        "metadata": {"labels": {"app": "dep"}},
                        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
                    }
                }
            }
        });
        let parsed: SubsetTemplate = serde_json::from_value(template.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), template);

        let template = serde_json::json!({
            "advancedStatefulSetTemplate": {
                "metadata": {"labels": {"app": "asts"}},
                "spec": {
                    "selector": {"matchLabels": {"app": "asts"}},
                    "serviceName": "asts",
                    "podManagementPolicy": "Parallel",
                    "template": {
                        "metadata": {"labels": {"app": "asts"}},
                        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
                    }
                }
            }
        });
        let parsed: SubsetTemplate = serde_json::from_value(template.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), template);
    }

    #[test]
    fn kruise_templates_without_selector_parse() {
        let template = serde_json::json!({
            "cloneSetTemplate": {
                "metadata": {"labels": {"app": "cs"}},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"app": "cs"}},
                        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
                    }
                }
            },
            "advancedStatefulSetTemplate": {
                "metadata": {"labels": {"app": "asts"}},
                "spec": {"serviceName": "asts"}
            }
        });
        let parsed: SubsetTemplate = serde_json::from_value(template).unwrap();
        assert_eq!(parsed.template_count(), 2);
        let cs = parsed.clone_set_template.unwrap();
        assert_eq!(cs.spec.selector, LabelSelector::default());
        assert_eq!(cs.metadata.labels.unwrap()["app"], "cs");
        let asts = parsed.advanced_stateful_set_template.unwrap();
        assert_eq!(asts.metadata.labels.unwrap()["app"], "asts");
    }

    /// A UnitedDeployment whose CloneSet template is an OpenKruise v1.9 (v1beta1) one, as
    /// serde_json writes it back (struct order outside the template, sorted keys inside).
    const UD_V1BETA1_TEMPLATE: &str = concat!(
        r#"{"apiVersion":"apps.kruise.io/v1alpha1","kind":"UnitedDeployment","#,
        r#""metadata":{"name":"ud","namespace":"default"},"#,
        r#""spec":{"selector":{"matchLabels":{"app":"ud"}},"template":{"cloneSetTemplate":{"#,
        r#""metadata":{"labels":{"app":"ud"}},"#,
        r#""spec":{"scaleStrategy":{"excludePreparingDelete":true},"#,
        r#""selector":{"matchLabels":{"app":"ud"}},"#,
        r#""template":{"metadata":{"labels":{"app":"ud"}},"#,
        r#""spec":{"containers":[{"image":"nginx:alpine","name":"main"}]}},"#,
        r#""updateStrategy":{"rollingUpdate":{"maxUnavailable":1,"podUpdatePolicy":"InPlaceIfPossible"},"#,
        r#""type":"RollingUpdate"}}}},"#,
        r#""topology":{"subsets":[{"name":"subset-a"}]}}}"#
    );

    #[test]
    fn v1beta1_clone_set_template_decodes_and_writes_back_unchanged() {
        let ud: UnitedDeployment = serde_json::from_str(UD_V1BETA1_TEMPLATE).unwrap();
        assert_eq!(serde_json::to_string(&ud).unwrap(), UD_V1BETA1_TEMPLATE);

        let cs = ud.spec.template.clone_set_template.as_ref().unwrap();
        assert!(cs.is_v1beta1());
        // The v1alpha1 reading, as the CloneSet conversion gives it.
        let strategy = &cs.spec.update_strategy;
        assert_eq!(
            strategy.type_,
            Some(super::super::CloneSetUpdateStrategyType::InPlaceIfPossible)
        );
        assert_eq!(strategy.max_unavailable, Some(IntOrString::Int(1)));
        assert!(cs.spec.scale_strategy.disable_pvc_reuse);
        let labels = cs.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "ud");
        assert_eq!(
            labels[crate::keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE],
            "true"
        );
        assert_eq!(
            cs.spec.template.spec.as_ref().unwrap().containers[0].name,
            "main"
        );

        // The v1beta1 UnitedDeployment holds the same template.
        let beta: crate::apps_v1beta1::uniteddeployment::UnitedDeployment =
            serde_json::from_str(UD_V1BETA1_TEMPLATE).unwrap();
        assert_eq!(beta.spec.template, ud.spec.template);
    }

    #[test]
    fn v1alpha1_clone_set_template_stays_typed() {
        let template = serde_json::json!({"cloneSetTemplate": {
            "metadata": {"labels": {"app": "cs"}},
            "spec": {
                "selector": {"matchLabels": {"app": "cs"}},
                "template": {"metadata": {"labels": {"app": "cs"}}, "spec": {"containers": []}},
                "updateStrategy": {"type": "InPlaceOnly", "maxUnavailable": 2}
            }
        }});
        let parsed: SubsetTemplate = serde_json::from_value(template.clone()).unwrap();
        let cs = parsed.clone_set_template.as_ref().unwrap();
        assert!(!cs.is_v1beta1());
        assert_eq!(
            cs.spec.update_strategy.max_unavailable,
            Some(IntOrString::Int(2))
        );
        assert_eq!(serde_json::to_value(&parsed).unwrap(), template);
        // A typed change is written.
        let mut changed = cs.as_ref().clone();
        changed.spec.min_ready_seconds = 5;
        assert_eq!(
            serde_json::to_value(&changed).unwrap()["spec"]["minReadySeconds"],
            5
        );

        let bad = serde_json::json!({"cloneSetTemplate": {"spec": {"updateStrategy": {"type": "Bogus"}}}});
        let err = serde_json::from_value::<SubsetTemplate>(bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cloneSetTemplate: unknown variant `Bogus`"),
            "{err}"
        );
    }

    #[test]
    fn v1beta1_shape_detection() {
        use serde_json::json;
        let beta = [
            json!({"updateStrategy": {"type": "RollingUpdate"}}),
            json!({"updateStrategy": {"rollingUpdate": {"partition": 1}}}),
            json!({"updateStrategy": {"type": "InPlaceIfPossible", "rollingUpdate": {}}}),
            json!({"scaleStrategy": {"enablePVCReuse": false}}),
            json!({"scaleStrategy": {"excludePreparingDelete": true}}),
            json!({"updateStrategy": {"type": "OnDelete"}}),
            json!({"updateStrategy": {"type": "OnDelete"}, "scaleStrategy": {"maxUnavailable": 1}}),
        ];
        for spec in beta {
            assert!(is_v1beta1_cloneset_spec(&spec), "{spec}");
        }
        let alpha = [
            json!({}),
            json!({"updateStrategy": {}}),
            json!({"updateStrategy": {"type": "ReCreate"}}),
            json!({"updateStrategy": {"type": "InPlaceIfPossible", "maxUnavailable": 1}}),
            json!({"scaleStrategy": {"disablePVCReuse": true}}),
            json!({"updateStrategy": {"type": "OnDelete", "maxSurge": 1}}),
            json!({"updateStrategy": {"type": "OnDelete"}, "scaleStrategy": {"disablePVCReuse": true}}),
        ];
        for spec in alpha {
            assert!(!is_v1beta1_cloneset_spec(&spec), "{spec}");
        }
        // An OnDelete v1beta1 template reads as an OnDelete v1alpha1 one without PVC reuse.
        let on_delete: CloneSetTemplateSpec = serde_json::from_value(json!({
            "spec": {"updateStrategy": {"type": "OnDelete"}}
        }))
        .unwrap();
        assert!(on_delete.is_v1beta1());
        assert_eq!(
            on_delete.spec.update_strategy.type_,
            Some(super::super::CloneSetUpdateStrategyType::OnDelete)
        );
        assert!(on_delete.spec.scale_strategy.disable_pvc_reuse);
        assert_eq!(
            serde_json::to_value(&on_delete).unwrap(),
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}})
        );
    }

    #[test]
    fn schedule_strategy_defaults_and_spellings() {
        let strategy = UnitedDeploymentScheduleStrategy::default();
        assert!(!strategy.is_adaptive());
        assert!(!strategy.should_reserve_unschedulable_pods());
        assert_eq!(strategy.reschedule_critical_seconds(), 30);
        assert_eq!(strategy.unschedulable_duration(), 300);
        for (ty, s) in [
            (UnitedDeploymentScheduleStrategyType::Fixed, "Fixed"),
            (UnitedDeploymentScheduleStrategyType::Adaptive, "Adaptive"),
        ] {
            assert_eq!(serde_json::to_value(ty).unwrap(), s);
        }
        assert_eq!(
            serde_json::to_value(UnitedDeploymentUpdateStrategyType::Manual).unwrap(),
            "Manual"
        );
    }

    #[test]
    fn always_written_status_fields() {
        assert_eq!(
            serde_json::to_value(UnitedDeploymentStatus::default()).unwrap(),
            serde_json::json!({"replicas": 0, "updatedReplicas": 0, "currentRevision": ""})
        );
    }

    #[test]
    fn crd_shape_matches_upstream() {
        let crd = UnitedDeployment::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("uniteddeployments.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["ud".to_string()]));
        let version = &crd.spec.versions[0];
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| (c.name.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            [
                ("DESIRED", ".spec.replicas"),
                ("CURRENT", ".status.replicas"),
                ("UPDATED", ".status.updatedReplicas"),
                ("READY", ".status.readyReplicas"),
                ("AGE", ".metadata.creationTimestamp"),
            ]
        );
        let subresources = version.subresources.as_ref().unwrap();
        assert!(subresources.status.is_some());
        let scale = subresources.scale.as_ref().unwrap();
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.labelSelector")
        );
    }
}
