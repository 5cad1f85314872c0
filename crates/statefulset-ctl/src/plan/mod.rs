//! The pure part of the Advanced StatefulSet controller: given the set, its Pods, PVCs
//! and revisions and the time, decide what to do this round. No client, no clock, no
//! randomness. Most tests live here.
//!
//! A round ([`plan`]) is, as upstream (`updateStatefulSet` in `openkruise/kruise v1.9.0
//! pkg/controller/statefulset/stateful_set_control.go`) and CloneSet:
//! 1. [`scale::plan_scale`]: settle Pods held in `PreparingDelete`, create missing live
//!    Pods, recreate failed ones, enforce PVC retention and delete condemned Pods;
//! 2. [`update::refresh_pods`]: continue in-place updates and lifecycle transitions and
//!    fix identity labels, on every Pod scaling did not touch;
//! 3. only if neither changed anything, [`update::plan_update`]: the rolling update.
//!    Scaling and updating in the same round would act on counts the other just
//!    invalidated.
//!
//! A Pod's place in the set comes from [`ordinals::Replicas`]: one slot per live
//! ordinal and the condemned Pods. [`status::compute_status`] derives the
//! status and [`predownload::plan_predownload`] the image pre-download of a rollout.

pub mod ordinals;
pub mod pods;
pub mod predownload;
pub mod resize;
pub mod scale;
pub mod status;
pub mod update;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kruise_api::apps_v1beta1::{PodManagementPolicyType, StatefulSet};
use kruise_api::appspub::{Lifecycle, LifecycleState};
use kruise_api::pod::Pod;
use kruise_workload::revision;

pub use kruise_workload::action::{Action, Plan, Warning};
pub use ordinals::{Replicas, Slot, live_ordinals, ordinal_of, pod_name_for};
pub use pods::{claim_name, claims_for, new_pod};
pub use status::{PhaseErrors, compute_status};

/// Feature gates and flags that change the plan. `Default` is all off; the caller sets
/// the gates that default to on (`StatefulSetAutoDeletePVC`, `PodIndexLabel`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `InPlaceUpdateEnvFromMetadata`.
    pub in_place: kruise_inplace::DiffOptions,
    /// `StatefulSetStartOrdinal`: honour `spec.ordinals.start`.
    pub start_ordinal: bool,
    /// `StatefulSetAutoDeletePVC`: honour `persistentVolumeClaimRetentionPolicy`.
    pub auto_delete_pvc: bool,
    /// `PodIndexLabel`: label Pods `apps.kubernetes.io/pod-index`.
    pub pod_index_label: bool,
    /// `PreDownloadImageForInPlaceUpdate` (acted on by the caller).
    pub predownload: bool,
    /// `StatefulSetAutoResizePVCGate`: honour `volumeClaimUpdateStrategy`.
    pub auto_resize_pvc: bool,
}

/// Everything the plan looks at.
pub struct World<'a> {
    pub sts: &'a StatefulSet,
    /// Every Pod owned by the set and matching its selector, including terminating
    /// and Failed/Succeeded ones.
    pub pods: Vec<&'a Pod>,
    /// PVCs in the namespace named `<template>-<set>-<ordinal>` for the set's claim
    /// templates.
    pub pvcs: Vec<&'a PersistentVolumeClaim>,
    /// The cluster's StorageClasses, when PVC resize needs them (else empty).
    pub storage_classes: Vec<&'a StorageClass>,
    pub current_revision: &'a ControllerRevision,
    pub update_revision: &'a ControllerRevision,
    /// Every revision of the set (to find the one a Pod was created from).
    pub revisions: Vec<&'a ControllerRevision>,
    pub options: Options,
    pub now: Timestamp,
}

impl<'a> World<'a> {
    pub fn name(&self) -> &'a str {
        self.sts.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &'a str {
        self.sts.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// `spec.replicas` (default 1).
    pub fn replicas(&self) -> i32 {
        self.sts.spec.replicas()
    }

    pub fn lifecycle(&self) -> Option<&'a Lifecycle> {
        self.sts.spec.lifecycle.as_ref()
    }

    /// `podManagementPolicy: Parallel` (burst) rather than OrderedReady (monotonic).
    pub fn is_parallel(&self) -> bool {
        self.sts.spec.pod_management_policy() == PodManagementPolicyType::Parallel
    }

    /// `updateStrategy.rollingUpdate.minReadySeconds`.
    pub fn min_ready_seconds(&self) -> i32 {
        self.sts.spec.update_strategy.min_ready_seconds()
    }

    pub fn update_revision_name(&self) -> &'a str {
        revision::name_of(self.update_revision)
    }

    pub fn current_revision_name(&self) -> &'a str {
        revision::name_of(self.current_revision)
    }

    pub fn is_update_revision(&self, pod: &Pod) -> bool {
        revision::pod_at(pod, self.update_revision_name())
    }

    pub fn is_current_revision(&self, pod: &Pod) -> bool {
        revision::pod_at(pod, self.current_revision_name())
    }

    /// The revision a Pod was created from, by its `controller-revision-hash` label.
    pub fn revision_of(&self, pod: &Pod) -> Option<&'a ControllerRevision> {
        revision::revision_of(&self.revisions, pod)
    }

    /// The live ordinals, honouring `ordinals.start` only under its gate.
    pub fn live_ordinals(&self) -> Vec<i32> {
        live_ordinals(self.sts, &self.options)
    }

    /// Whether StorageClass `name` allows volume expansion; `None` if it is unknown.
    pub fn allows_expansion(&self, name: &str) -> Option<bool> {
        self.storage_classes
            .iter()
            .find(|sc| sc.metadata.name.as_deref() == Some(name))
            .map(|sc| sc.allow_volume_expansion.unwrap_or(false))
    }

    /// The PVC of that name, if it exists.
    pub fn claim(&self, name: &str) -> Option<&'a PersistentVolumeClaim> {
        self.pvcs
            .iter()
            .copied()
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }
}

/// One reconcile round (see the module docs).
pub fn plan<'a>(world: &World<'a>) -> Plan<'a> {
    // A set being deleted only gets its status updated, as upstream.
    if world.sts.metadata.deletion_timestamp.is_some() {
        return Plan::default();
    }
    let replicas = Replicas::of(world);
    let mut plan = scale::plan_scale(world, &replicas);
    let touched = plan
        .actions
        .iter()
        .map(|a| a.object_name().to_string())
        .collect();
    plan.append(update::refresh_pods(world, &replicas, &touched));
    if plan.changes_something() {
        return plan;
    }
    plan.append(update::plan_update(world, &replicas));
    plan
}

pub use kruise_ordering::predicates::{
    has_label, is_finished, is_terminating, label, name as pod_name, revision_label,
};

/// Has a phase (the apiserver accepted it).
pub fn is_created(pod: &Pod) -> bool {
    !kruise_ordering::predicates::phase(pod).is_empty()
}

pub fn is_pending(pod: &Pod) -> bool {
    kruise_ordering::predicates::phase(pod) == "Pending"
}

/// Upstream `isHealthy`: Running, Ready and not terminating.
pub fn is_healthy(pod: &Pod) -> bool {
    kruise_ordering::predicates::is_running_and_ready(pod) && !is_terminating(pod)
}

/// In lifecycle state `PreparingDelete`.
pub fn is_preparing_delete(pod: &Pod) -> bool {
    kruise_lifecycle::state(pod) == Some(LifecycleState::PreparingDelete)
}

/// How long until a Running and Ready Pod has been ready for `min_ready_seconds`;
/// `None` when it already has, or is not ready at all (nothing to wait for).
pub fn wait_until_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    if min_ready_seconds <= 0 || !kruise_ordering::predicates::is_running_and_ready(pod) {
        return None;
    }
    let since = kruise_ordering::predicates::ready_since(pod)?;
    let due = since
        .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
        .ok()?;
    (due > now).then(|| due.duration_since(now).unsigned_abs())
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod resize_tests;
#[cfg(test)]
mod tests;
