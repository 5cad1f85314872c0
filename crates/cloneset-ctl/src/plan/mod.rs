//! The pure part of the CloneSet controller: given the CloneSet, its Pods, PVCs and
//! revisions and the time, decide what to do. No client, no clock, no randomness (new
//! instance ids come from the caller). Most tests live here.
//!
//! A round ([`plan`]) is:
//! 1. letting go of what is no longer the CloneSet's: owned Pods that stopped matching the selector
//!    are released, and under `disablePVCReuse` the PVCs no active Pod uses are handed to their
//!    terminating Pod or deleted ([`pods::pvc_cleanup`], upstream's `cleanupPVCs`);
//! 2. [`scale::plan_scale`]; only if it changes nothing, [`update::plan_update`] (as upstream's
//!    `syncCloneSet`): scaling and updating in the same round would act on counts the other just
//!    invalidated;
//! 3. the CloneSet's own `podsToDelete`, without the names that match no Pod (upstream's
//!    `truncatePodsToDelete`).
//!
//! The upstream functions named here are in openkruise/kruise v1.9.0
//! pkg/controller/cloneset/cloneset_controller.go.
//!
//! [`status::compute_status`] derives the status (and when to look again) and
//! [`predownload::plan_predownload`] the image pre-download of a rollout.

pub mod diffs;
pub mod pods;
pub mod predownload;
pub mod scale;
pub mod status;
pub mod update;

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_ordering::predicates::is_active;
use kruise_workload::revision;

pub use status::{PhaseErrors, compute_status};

/// Feature gates and flags that change the plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `CloneSetPartitionRollback`: raising partition moves Pods back to currentRevision.
    pub partition_rollback: bool,
    /// `CloneSetShortHash`: `controller-revision-hash` holds only the hash.
    pub short_hash: bool,
    /// `InPlaceUpdateEnvFromMetadata`, `InPlaceWorkloadVerticalScaling`.
    pub in_place: kruise_inplace::DiffOptions,
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
    /// The Pods the CloneSet manages: owned, active (not terminal, not being deleted)
    /// and matching its selector ([`managed`]).
    pub pods: Vec<&'a Pod>,
    /// Every Pod the CloneSet owns, whatever its state or labels.
    pub owned: Vec<&'a Pod>,
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

    /// `available` (as `IsPodAvailable` in openkruise/kruise v1.9.0
    /// pkg/controller/cloneset/sync/cloneset_sync_utils.go): lifecycle empty or Normal, running,
    /// ready for minReadySeconds, InPlaceUpdateReady (when present) True.
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

/// The phase whose writes a round carries out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Scale,
    Update,
}

/// What one reconcile round decides (see the module docs).
#[derive(Debug)]
pub struct Round<'a> {
    /// Released Pods and cleaned-up PVCs: carried out before the phase, and a failure
    /// ends the round.
    pub cleanup: Vec<Action<'a>>,
    /// The writes, warnings and requeue of [`Round::phase`]; its `errors` are in
    /// [`Round::errors`], by phase.
    pub plan: Plan<'a>,
    /// `Scale` when scaling changes something (update then waits for the next round),
    /// else `Update`: a failure to carry out `plan` is that phase's failure.
    pub phase: Phase,
    /// What each phase could not plan (its failure condition).
    pub errors: PhaseErrors,
    /// The `scaleStrategy.podsToDelete` to write back (upstream's `truncatePodsToDelete`), when
    /// names in it match no Pod of the CloneSet.
    pub pods_to_delete: Option<Vec<String>>,
}

/// One reconcile round. `fresh_ids` supplies new instance ids (random in production).
pub fn plan<'a>(world: &World<'a>, fresh_ids: &mut dyn Iterator<Item = String>) -> Round<'a> {
    let owner_uid = world.cs.metadata.uid.as_deref().unwrap_or_default();
    let mut cleanup: Vec<Action<'a>> = pods::pvc_cleanup(world.cs, &world.owned, &world.pvcs)
        .into_iter()
        .map(|step| step.action(owner_uid))
        .collect();
    cleanup.extend(
        world
            .owned
            .iter()
            .copied()
            .filter(|p| is_active(p) && !selects(world.cs, p))
            .map(|pod| Action::Release { pod }),
    );

    let mut errors = PhaseErrors::default();
    let mut plan = scale::plan_scale(world, fresh_ids);
    errors.scale = joined(std::mem::take(&mut plan.errors));
    let phase = if plan.changes_something() {
        Phase::Scale
    } else {
        let mut update = update::plan_update(world);
        errors.update = joined(std::mem::take(&mut update.errors));
        plan.append(update);
        Phase::Update
    };
    Round {
        cleanup,
        plan,
        phase,
        errors,
        pods_to_delete: pruned_pods_to_delete(world),
    }
}

/// The update phase of a round whose scale phase changed nothing after all: every
/// deletion it planned was refused by a PodUnavailableBudget. Upstream's Scale then
/// returns "not modified" and its Update runs in the same round, so a Pod that cannot
/// become available (an image that does not pull) is still replaced while the budget
/// holds the ready Pods' deletions back. Returns the plan and its failure condition.
pub fn plan_update_after_held_scale<'a>(world: &World<'a>) -> (Plan<'a>, Option<String>) {
    let mut update = update::plan_update(world);
    let errors = joined(std::mem::take(&mut update.errors));
    (update, errors)
}

fn joined(errors: Vec<String>) -> Option<String> {
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// Whether the CloneSet's selector selects `pod` (an invalid selector selects nothing).
pub fn selects(cs: &CloneSet, pod: &Pod) -> bool {
    let none = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&none);
    kruise_ordering::selector::matches(&cs.spec.selector, labels).unwrap_or(false)
}

/// The Pods the CloneSet manages among those it owns: active and selected.
pub fn managed<'a>(cs: &CloneSet, owned: &[&'a Pod]) -> Vec<&'a Pod> {
    owned
        .iter()
        .copied()
        .filter(|p| is_active(p) && selects(cs, p))
        .collect()
}

/// `podsToDelete` without the names that match no Pod the CloneSet manages (as
/// `truncatePodsToDelete` in openkruise/kruise v1.9.0
/// pkg/controller/cloneset/cloneset_controller.go); `None` when every name still matches (nothing
/// to write).
pub fn pruned_pods_to_delete(world: &World) -> Option<Vec<String>> {
    let listed = &world.cs.spec.scale_strategy.pods_to_delete;
    let kept: Vec<String> = listed
        .iter()
        .filter(|n| {
            world
                .pods
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(n.as_str()))
        })
        .cloned()
        .collect();
    (kept.len() != listed.len()).then_some(kept)
}

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
#[cfg(test)]
mod tests;
