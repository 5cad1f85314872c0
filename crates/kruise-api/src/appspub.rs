//! Pod-level types shared by several workloads (upstream `apis/apps/pub`): lifecycle
//! hooks, in-place update state and strategy, update priority, runtime container meta.
//! Keys and condition types that go with them live in [`crate::keys`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.lifecycle`: hooks that hold a Pod in a preparing state until the user (or
/// another controller) removes the hook's labels/finalizers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// The hook before a Pod is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_delete: Option<LifecycleHook>,
    /// The hook before a Pod is updated in place and after it has been updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update: Option<LifecycleHook>,
    /// The hook a new Pod must satisfy before it becomes `Normal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_normal: Option<LifecycleHook>,
}

/// One lifecycle hook: a Pod is "hooked" while it carries any of these labels/finalizers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHook {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels_handler: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers_handler: Vec<String>,
    /// Set the Pod NotReady (through the `KruisePodReady` condition) while the hook holds it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mark_pod_not_ready: bool,
}

/// Values of the `lifecycle.apps.kruise.io/state` Pod label.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantArray,
)]
pub enum LifecycleState {
    PreparingNormal,
    Normal,
    PreparingUpdate,
    Updating,
    Updated,
    PreparingDelete,
}

impl LifecycleState {
    pub const ALL: [LifecycleState; 6] = [
        LifecycleState::PreparingNormal,
        LifecycleState::Normal,
        LifecycleState::PreparingUpdate,
        LifecycleState::Updating,
        LifecycleState::Updated,
        LifecycleState::PreparingDelete,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

/// `inPlaceUpdateStrategy` (CloneSet, Advanced StatefulSet). The `imagePreDownload*`
/// fields tune gate `PreDownloadImageForInPlaceUpdate` as the
/// `apps.kruise.io/image-predownload-*` annotations do; a field that is set wins over its
/// annotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateStrategy {
    /// Seconds between marking the Pod not-ready and changing its images.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub grace_period_seconds: i32,
    /// Parallelism of the ImagePullJobs that pre-download the new images (a number, not a
    /// percent; 0 pauses them). Defaults to 1 (annotation
    /// `apps.kruise.io/image-predownload-parallelism`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_parallelism: Option<IntOrString>,
    /// Pull timeout of each pre-download ImagePullJob. Defaults to 300 (annotation
    /// `apps.kruise.io/image-predownload-timeout-seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_timeout_seconds: Option<i32>,
    /// Updated ready Pods required before the new images are pre-downloaded. Defaults to 0
    /// (annotation `apps.kruise.io/image-predownload-min-updated-ready-pods`, which also
    /// takes a percent of replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_min_updated_ready_pods: Option<i32>,
}

/// The `apps.kruise.io/inplace-update-state` Pod annotation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateState {
    /// The revision the Pod is being updated to.
    pub revision: String,
    /// When the in-place update started.
    pub update_timestamp: Time,
    /// Container statuses before the update, keyed by container name.
    #[serde(default)]
    pub last_container_statuses: BTreeMap<String, InPlaceUpdateContainerStatus>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_env_from_metadata: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_images: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_resources: bool,
    /// Images of containers waiting for an earlier (higher-priority) batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_images: BTreeMap<String, String>,
    /// Metadata referenced by env of containers waiting for an earlier batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_ref_metadata: BTreeMap<String, ObjectMeta>,
    /// Resources (cpu, memory) of containers waiting for an earlier batch
    /// (`InPlaceWorkloadVerticalScaling`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_resources:
        BTreeMap<String, k8s_openapi::api::core::v1::ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_check_before_next: Option<InPlaceUpdatePreCheckBeforeNext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_batches_record: Vec<InPlaceUpdateContainerBatch>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateContainerStatus {
    #[serde(rename = "imageID", default, skip_serializing_if = "String::is_empty")]
    pub image_id: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdatePreCheckBeforeNext {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers_required_ready: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateContainerBatch {
    pub timestamp: Time,
    #[serde(default)]
    pub containers: Vec<String>,
}

/// `updateStrategy.priorityStrategy`: only one of the two lists may be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityStrategy {
    /// Pods are sorted by the trailing integer of the value of `orderedKey`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_priority: Vec<UpdatePriorityOrderTerm>,
    /// Pods are sorted by the sum of the weights of the terms they match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weight_priority: Vec<UpdatePriorityWeightTerm>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityOrderTerm {
    pub ordered_key: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityWeightTerm {
    /// Weight in the range 0-100.
    pub weight: i32,
    pub match_selector: LabelSelector,
}

/// `updateStrategy.scatterStrategy`: spread Pods with `key=value` evenly through the update order.
pub type UpdateScatterStrategy = Vec<UpdateScatterTerm>;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpdateScatterTerm {
    pub key: String,
    pub value: String,
}

/// The `apps.kruise.io/runtime-containers-meta` annotation, written by the node agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerMetaSet {
    #[serde(default)]
    pub containers: Vec<RuntimeContainerMeta>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerMeta {
    pub name: String,
    #[serde(rename = "containerID", default)]
    pub container_id: String,
    #[serde(default)]
    pub restart_count: i32,
    #[serde(default)]
    pub hashes: RuntimeContainerHashes,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerHashes {
    /// Hash of the container spec as the kubelet computes it.
    #[serde(default)]
    pub plain_hash: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub plain_hash_without_resources: u64,
    /// Hash of the env values that come from Pod metadata.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub extracted_env_from_metadata_hash: u64,
}

pub(crate) fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

pub(crate) fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_state_round_trips_through_its_label_value() {
        for state in LifecycleState::ALL {
            assert_eq!(LifecycleState::parse(state.as_str()), Some(state));
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        }
        assert_eq!(LifecycleState::parse("Bogus"), None);
    }

    #[test]
    fn inplace_update_state_matches_upstream_json() {
        let json = r#"{"revision":"cs-demo-7cb9c88699","updateTimestamp":"2021-03-01T08:00:00Z","lastContainerStatuses":{"nginx":{"imageID":"docker.io/library/nginx@sha256:1"}},"updateImages":true,"containerBatchesRecord":[{"timestamp":"2021-03-01T08:00:00Z","containers":["nginx"]}]}"#;
        let state: InPlaceUpdateState = serde_json::from_str(json).unwrap();
        assert_eq!(state.revision, "cs-demo-7cb9c88699");
        assert_eq!(
            state.last_container_statuses["nginx"].image_id,
            "docker.io/library/nginx@sha256:1"
        );
        assert_eq!(serde_json::to_string(&state).unwrap(), json);
    }
}
