//! The pure part of the CloneSet controller: given the CloneSet, its Pods, PVCs and
//! revisions and the time, decide what to do. No client, no clock, no randomness (new
//! instance ids come from the caller). Most tests live here.
//!
//! A reconcile runs [`scale::plan_scale`]; only if it changes nothing does
//! [`update::plan_update`] run (spec 4.1.3): scaling and updating in the same round would
//! act on counts the other just invalidated.

pub mod diffs;
pub mod pods;
pub mod predownload;
pub mod scale;
pub mod status;
pub mod update;

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_workload::revision;

/// Feature gates and flags that change the plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `CloneSetPartitionRollback`: raising partition moves Pods back to currentRevision.
    pub partition_rollback: bool,
    /// `CloneSetShortHash`: `controller-revision-hash` holds only the hash.
    pub short_hash: bool,
    /// `InPlaceUpdateEnvFromMetadata`.
    pub env_from_metadata: bool,
    /// `PreparingUpdateAsUpdate`: PreparingUpdate Pods count as updated when scaling.
    pub preparing_update_as_update: bool,
    /// Process-wide `cloneset-scaling-exclude-preparing-delete` flag.
    pub exclude_preparing_delete: bool,
    /// `PreDownloadImageForInPlaceUpdate` (with `KruiseDaemon`).
    pub predownload: bool,
    /// `RecreatePodWhenChangeVCTInCloneSetGate`: a rollout that also changed
    /// `volumeClaimTemplates` recreates Pods (with fresh PVCs) instead of updating in place.
    pub recreate_on_vct_change: bool,
}

/// Everything the plan looks at.
pub struct World<'a> {
    pub cs: &'a CloneSet,
    /// Active Pods owned by the CloneSet (not terminal, not being deleted).
    pub pods: Vec<&'a Pod>,
    /// PVCs owned by the CloneSet, not being deleted.
    pub pvcs: Vec<&'a PersistentVolumeClaim>,
    pub current_revision: &'a ControllerRevision,
    pub update_revision: &'a ControllerRevision,
    /// Every revision of the CloneSet (to find the one a Pod was created from).
    pub revisions: Vec<&'a ControllerRevision>,
    pub options: Options,
    pub now: Timestamp,
}

impl World<'_> {
    pub fn name(&self) -> &str {
        self.cs.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn update_revision_name(&self) -> &str {
        revision::name_of(self.update_revision)
    }

    pub fn current_revision_name(&self) -> &str {
        revision::name_of(self.current_revision)
    }

    pub fn replicas(&self) -> i32 {
        self.cs.spec.replicas.unwrap_or(1)
    }

    pub fn lifecycle(&self) -> Option<&kruise_api::appspub::Lifecycle> {
        self.cs.spec.lifecycle.as_ref()
    }

    /// The revision a Pod was created from, by its `controller-revision-hash` label.
    pub fn revision_of(&self, pod: &Pod) -> Option<&ControllerRevision> {
        revision::revision_of(&self.revisions, pod)
    }

    pub fn is_update_revision(&self, pod: &Pod) -> bool {
        revision::pod_at(pod, self.update_revision_name())
    }

    /// Specified for deletion: named in `podsToDelete` or labelled `apps.kruise.io/specified-delete`.
    pub fn is_specified_delete(&self, pod: &Pod) -> bool {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        has_label(pod, keys::SPECIFIED_DELETE)
            || self
                .cs
                .spec
                .scale_strategy
                .pods_to_delete
                .iter()
                .any(|n| n == name)
    }

    /// Spec 4.4 `available`: lifecycle empty or Normal, running, ready for
    /// minReadySeconds, InPlaceUpdateReady (when present) True.
    pub fn is_available(&self, pod: &Pod) -> bool {
        self.is_available_after(pod, self.cs.spec.min_ready_seconds)
    }

    /// `available` with minReadySeconds 0.
    pub fn is_ready(&self, pod: &Pod) -> bool {
        self.is_available_after(pod, 0)
    }

    fn is_available_after(&self, pod: &Pod, min_ready_seconds: i32) -> bool {
        match kruise_lifecycle::state(pod) {
            None | Some(LifecycleState::Normal) => {}
            Some(_) => return false,
        }
        kruise_ordering::predicates::is_in_place_update_not_false(pod)
            && kruise_ordering::predicates::is_available(pod, min_ready_seconds, self.now)
    }
}

pub use kruise_ordering::predicates::{has_label, label, name as pod_name, revision_label};
pub use kruise_workload::action::{Action, Plan, Warning};

/// Labels of a template as a map (empty when missing).
pub fn template_labels(cs: &CloneSet) -> BTreeMap<String, String> {
    cs.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod fixtures;
