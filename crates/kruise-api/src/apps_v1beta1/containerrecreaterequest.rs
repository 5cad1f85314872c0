//! `ContainerRecreateRequest` as `apps.kruise.io/v1beta1` serves it (OpenKruise ≥ 1.9):
//! the v1alpha1 spec unchanged; in the status, two things v1alpha1 keeps in annotations
//! become typed fields: `containerStatusSnapshot` (v1alpha1:
//! `crr.apps.kruise.io/sync-container-statuses`, a JSON list) and the condition
//! `PreRecreateGrace` (v1alpha1: `crr.apps.kruise.io/unready-acquired`, the time the Pod
//! was made not-ready).
//!
//! Objects are stored as v1alpha1, which crr-ctl and the node agent read; crr-ctl's
//! conversion webhook ([`crate::conversion`]) serves v1beta1 to clients.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps_v1alpha1::{
    ContainerRecreateRequestContainer, ContainerRecreateRequestContainerRecreateState,
    ContainerRecreateRequestPhase, ContainerRecreateRequestStrategy,
    ContainerRecreateRequestSyncContainerStatus,
};

/// The condition type v1beta1 shows while (and after) the Pod was held not-ready for
/// `unreadyGracePeriodSeconds`.
pub const PRE_RECREATE_GRACE: &str = "PreRecreateGrace";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "ContainerRecreateRequest",
    plural = "containerrecreaterequests",
    singular = "containerrecreaterequest",
    shortname = "crr",
    namespaced,
    status = "ContainerRecreateRequestStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ContainerRecreateRequest asks the node agent to recreate containers of a running Pod in place."
)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestSpec {
    /// Name of the Pod (in the same namespace) whose containers are recreated.
    pub pod_name: String,
    /// Containers to recreate, at least one.
    pub containers: Vec<ContainerRecreateRequestContainer>,
    /// How the containers are recreated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ContainerRecreateRequestStrategy>,
    /// Seconds after creation at which the request is completed whatever its progress (at least 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion at which the request is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStatus {
    /// Pending, Recreating or Completed; unset until the agent has seen the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ContainerRecreateRequestPhase>,
    /// When the request completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Why the request is in its phase, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Progress of each container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recreate_states: Vec<ContainerRecreateRequestContainerRecreateState>,
    /// The recreated containers' statuses, synced from the Pod while Recreating.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_status_snapshot: Vec<ContainerRecreateRequestSyncContainerStatus>,
    /// `PreRecreateGrace` (True) once the Pod was made not-ready for the grace period.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
