//! The pure part of the Advanced DaemonSet controller: given the DaemonSet, the nodes,
//! its Pods and revisions and the time, decide what to do this round. No client, no
//! clock, no randomness. Most tests live here.
//!
//! A round ([`plan`]) is, as upstream:
//! 1. [`manage::plan_manage`] (also while paused or OnDelete): one Pod per node that
//!    should run it, none where it should not, failed and pre-deleting Pods removed,
//!    duplicates (beyond one old and one new while surging) removed, at most
//!    `burstReplicas` creations and deletions;
//! 2. [`update::refresh_pods`]: continue in-place updates and lifecycle transitions on
//!    every Pod managing left alone;
//! 3. only if neither changed anything, [`update::plan_update`]: the rolling update over
//!    the candidate nodes (`rollingUpdate.selector`, `partition`), without surge
//!    (delete or in place, within maxUnavailable) or with it (new Pod first).
//!
//! [`status::compute_status`] derives the status.

pub mod manage;
pub mod nodes;
pub mod pods;
pub mod status;
pub mod update;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{DaemonSet, DaemonSetUpdateStrategyType, RollingUpdateType};
use kruise_api::appspub::{Lifecycle, LifecycleState};
use kruise_api::intstr::{self, NotAPercentage, Rounding};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_workload::revision;

pub use kruise_workload::action::{Action, Plan, Warning};
pub use nodes::{Eligibility, eligibility, target_node};
pub use status::compute_status;

/// Feature gates that change the plan. `Default` is all off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `InPlaceUpdateEnvFromMetadata`.
    pub in_place: kruise_inplace::DiffOptions,
    /// `DaemonSetPruneIneligibleNodes`: the rolling update leaves out the nodes that
    /// should no longer run the daemon (e.g. a narrowed node affinity), so their Pods,
    /// which managing deletes, do not count in maxUnavailable (upstream
    /// `pruneNodesAndOrphanedPods`, pkg/controller/daemonset/daemonset_node_filter.go).
    pub prune_ineligible_nodes: bool,
}

/// Everything the plan looks at.
pub struct World<'a> {
    pub ds: &'a DaemonSet,
    /// Every node in the cluster (pruned: name, labels, taints).
    pub nodes: Vec<&'a Node>,
    /// Every Pod owned by the DaemonSet and matching its selector, including
    /// terminating and finished ones.
    pub pods: Vec<&'a Pod>,
    /// The revision of the current template.
    pub update_revision: &'a ControllerRevision,
    /// Every revision of the DaemonSet (to find the one a Pod was created from).
    pub revisions: Vec<&'a ControllerRevision>,
    pub options: Options,
    pub now: Timestamp,
    /// Nodes whose failed Pod may not be deleted before the given time (the per-node
    /// backoff the caller keeps: 1 s, doubling, at most 15 min, as upstream's `failedPodsBackoff`).
    pub failed_backoff: BTreeMap<String, Timestamp>,
}

/// One node and the daemon Pods on it (or meant for it).
#[derive(Clone, Debug)]
pub struct NodeState<'a> {
    pub name: &'a str,
    pub node: &'a Node,
    pub eligibility: Eligibility,
    pub pods: Vec<&'a Pod>,
}

/// The nodes, sorted by name, with their Pods; and the Pods whose node does not exist.
#[derive(Clone, Debug)]
pub struct Layout<'a> {
    pub nodes: Vec<NodeState<'a>>,
    pub orphans: Vec<&'a Pod>,
}

impl<'a> Layout<'a> {
    pub fn of(world: &World<'a>) -> Self {
        let template = world.ds.spec.template.spec.clone().unwrap_or_default();
        let mut by_node: BTreeMap<&str, Vec<&'a Pod>> = BTreeMap::new();
        let mut orphans = Vec::new();
        let names: std::collections::BTreeSet<&str> =
            world.nodes.iter().map(|n| node_name(n)).collect();
        for pod in &world.pods {
            match target_node(pod).filter(|n| names.contains(n)) {
                Some(node) => by_node.entry(node).or_default().push(*pod),
                None => orphans.push(*pod),
            }
        }
        let mut nodes: Vec<NodeState<'a>> = world
            .nodes
            .iter()
            .map(|node| {
                let name = node_name(node);
                NodeState {
                    name,
                    node,
                    eligibility: eligibility(&template, node),
                    pods: by_node.remove(name).unwrap_or_default(),
                }
            })
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(b.name));
        Layout { nodes, orphans }
    }

    /// `desiredNumberScheduled`: nodes that should run the Pod.
    pub fn desired(&self) -> i32 {
        self.nodes
            .iter()
            .filter(|n| n.eligibility.should_run)
            .count() as i32
    }
}

pub fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

impl<'a> World<'a> {
    pub fn name(&self) -> &'a str {
        self.ds.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &'a str {
        self.ds.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// The current template's hash (`daemonSetHash`, the Pods' `controller-revision-hash`).
    pub fn hash(&self) -> &'a str {
        revision::short_hash(revision::name_of(self.update_revision))
    }

    pub fn lifecycle(&self) -> Option<&'a Lifecycle> {
        self.ds.spec.lifecycle.as_ref()
    }

    pub fn min_ready_seconds(&self) -> i32 {
        self.ds.spec.min_ready_seconds
    }

    pub fn rolling_update_type(&self) -> RollingUpdateType {
        self.ds.spec.update_strategy.rolling_update_type()
    }

    pub fn is_rolling_update(&self) -> bool {
        self.ds.spec.update_strategy.strategy_type() == DaemonSetUpdateStrategyType::RollingUpdate
    }

    /// The deprecated `deprecated.daemonset.template.generation` annotation.
    pub fn template_generation(&self) -> Option<&'a str> {
        self.ds
            .metadata
            .annotations
            .as_ref()?
            .get(keys::DEPRECATED_DAEMONSET_TEMPLATE_GENERATION)
            .map(String::as_str)
    }

    /// At the current hash, or at the deprecated template generation.
    pub fn is_updated(&self, pod: &Pod) -> bool {
        revision::pod_at(pod, self.hash())
            || self.template_generation().is_some_and(|g| {
                kruise_ordering::predicates::label(pod, keys::POD_TEMPLATE_GENERATION) == Some(g)
            })
    }

    /// The revision a Pod was created from, by its `controller-revision-hash` label.
    pub fn revision_of(&self, pod: &Pod) -> Option<&'a ControllerRevision> {
        revision::revision_of(&self.revisions, pod)
    }

    /// Upstream `surgeCount`/`unavailableCount`: maxSurge and maxUnavailable on `desired` nodes, rounding up; unset
    /// both means 0 and 1 (the deprecated `Surging` type: 1 and 0); both 0 with Pods
    /// to run means maxUnavailable 1.
    pub fn surge_and_unavailable(&self, desired: i32) -> Result<(i32, i32), NotAPercentage> {
        let rolling = self.ds.spec.update_strategy.rolling_update.as_ref();
        let surging = self.rolling_update_type() == RollingUpdateType::Surging;
        let (surge, unavailable) = (
            rolling.and_then(|r| r.max_surge.clone()),
            rolling.and_then(|r| r.max_unavailable.clone()),
        );
        let (surge, unavailable) = match (surge, unavailable) {
            (None, None) if surging => (IntOrString::Int(1), IntOrString::Int(0)),
            (None, None) => (IntOrString::Int(0), IntOrString::Int(1)),
            (s, u) => (
                s.unwrap_or(IntOrString::Int(if surging { 1 } else { 0 })),
                u.unwrap_or(IntOrString::Int(0)),
            ),
        };
        let surge = intstr::scaled_value(&surge, desired, Rounding::Up)?.max(0);
        let mut unavailable = intstr::scaled_value(&unavailable, desired, Rounding::Up)?.max(0);
        if surge == 0 && unavailable == 0 && desired > 0 {
            unavailable = 1;
        }
        Ok((surge, unavailable))
    }

    /// Whether the rollout creates the new Pod before deleting the old one (a non-zero
    /// maxSurge, or the deprecated `Surging` type).
    pub fn surges(&self) -> bool {
        if !self.is_rolling_update() {
            return false;
        }
        let rolling = self.ds.spec.update_strategy.rolling_update.as_ref();
        match rolling.and_then(|r| r.max_surge.as_ref()) {
            Some(IntOrString::Int(n)) => *n > 0,
            Some(IntOrString::String(s)) => s.trim_end_matches('%').parse::<i64>().unwrap_or(0) > 0,
            None => self.rolling_update_type() == RollingUpdateType::Surging,
        }
    }

    /// `partition` as a node count (a percent of `desired`, rounding down).
    pub fn partition(&self, desired: i32) -> Result<i32, NotAPercentage> {
        let rolling = self.ds.spec.update_strategy.rolling_update.as_ref();
        match rolling.and_then(|r| r.partition.as_ref()) {
            None => Ok(0),
            Some(p) => Ok(intstr::scaled_value(p, desired, Rounding::Down)?.max(0)),
        }
    }

    /// `burstReplicas` (upstream `getBurstReplicas`): a percent of `desired` rounding
    /// down, at least 1.
    pub fn burst(&self, desired: i32) -> i32 {
        intstr::scaled_value(&self.ds.spec.burst_replicas(), desired, Rounding::Down)
            .unwrap_or(kruise_api::apps_v1alpha1::DaemonSetSpec::DEFAULT_BURST_REPLICAS)
            .max(1)
    }
}

/// One reconcile round (see the module docs).
pub fn plan<'a>(world: &World<'a>) -> Plan<'a> {
    let mut plan = Plan::default();
    if world.ds.metadata.deletion_timestamp.is_some() {
        return plan;
    }
    let selector = &world.ds.spec.selector;
    if selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|m| m.is_empty())
    {
        plan.warnings.push(Warning {
            reason: crate::events::SELECTING_ALL,
            message: crate::events::SELECTING_ALL_MESSAGE.into(),
        });
        return plan;
    }
    let layout = Layout::of(world);
    plan.append(manage::plan_manage(world, &layout));
    let touched = plan
        .actions
        .iter()
        .map(|a| a.object_name().to_string())
        .collect();
    plan.append(update::refresh_pods(world, &touched));
    if plan.changes_something() {
        return plan;
    }
    plan.append(update::plan_update(world, &layout));
    plan
}

pub use kruise_ordering::predicates::{is_finished, is_terminating, name as pod_name};

/// In lifecycle state `PreparingDelete`.
pub fn is_preparing_delete(pod: &Pod) -> bool {
    kruise_lifecycle::state(pod) == Some(LifecycleState::PreparingDelete)
}

/// Available (upstream `isDaemonPodAvailable`): lifecycle Normal, Ready for `minReadySeconds`, and
/// `InPlaceUpdateReady` not pending.
pub fn is_available(world: &World, pod: &Pod) -> bool {
    kruise_ordering::predicates::is_available(pod, world.min_ready_seconds(), world.now)
}

/// Whether a surged (updated) Pod has been available long enough for the old Pod of its
/// node to go: Ready for `minReadySeconds`, plus one second when that is set.
/// `lastTransitionTime` is written in whole seconds, so a Pod became Ready up to a second
/// after it says; deleting the old Pod at exactly `lastTransitionTime + minReadySeconds`
/// could leave the node served by a Pod ready for less than `minReadySeconds`.
/// (Upstream gets the same margin by requeueing a full `minReadySeconds` after it sees
/// the Pod Ready.) `Err` holds how long until it has, if it is Ready at all.
pub fn surged_long_enough(world: &World, new: &Pod) -> Result<(), Option<Duration>> {
    let min_ready = match world.min_ready_seconds() {
        0 => 0,
        seconds => seconds.saturating_add(1),
    };
    if kruise_ordering::predicates::is_available(new, min_ready, world.now) {
        return Ok(());
    }
    Err(wait_until_available(new, min_ready, world.now))
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

/// Deleting a Pod: a preDelete hook that holds it moves it to
/// `PreparingDelete` first and keeps it there (`None`) until the hook lets go.
pub fn delete_pod<'a>(world: &World<'a>, pod: &'a Pod) -> Option<Action<'a>> {
    kruise_workload::update::delete_or_hold(pod, world.lifecycle(), world.now)
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
