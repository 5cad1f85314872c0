//! Refreshing Pods, and the rolling update: which nodes are candidates
//! (`rollingUpdate.selector`, `partition`), which of their Pods are replaced this round
//! (maxUnavailable, or maxSurge), and how (deleted, in place, or surged).

use std::collections::{BTreeMap, BTreeSet};

use kruise_api::apps_v1alpha1::RollingUpdateType;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_workload::update::{InPlace, InPlaceUpdate, refresh_pod, update_in_place};

use super::pods::new_pod;
use super::{
    Action, Layout, NodeState, Plan, Warning, World, delete_pod, is_available, is_finished,
    is_preparing_delete, is_terminating, pod_name, surged_long_enough, wait_until_available,
};
use crate::events;

/// Every round, on every Pod managing left alone (`touched`): continue in-place
/// updates (`InPlaceUpdateReady`, grace), add a missing `KruisePodReady` condition and
/// move lifecycle states along (upstream `refreshUpdateStates`). Also asks to look again when a Ready Pod
/// becomes available (`minReadySeconds`).
pub fn refresh_pods<'a>(world: &World<'a>, touched: &BTreeSet<String>) -> Plan<'a> {
    let mut plan = Plan::default();
    let lifecycle = world.lifecycle();
    for pod in &world.pods {
        if plan.round_is_full() {
            break;
        }
        if is_terminating(pod) || is_finished(pod) || touched.contains(pod_name(pod)) {
            continue;
        }
        if let Some(wait) = wait_until_available(pod, world.min_ready_seconds(), world.now) {
            plan.requeue(wait);
        }
        refresh_pod(
            &mut plan,
            pod,
            lifecycle,
            world.is_updated(pod),
            world.now,
            || None,
        );
    }
    plan
}

/// The new and the old Pod on a node, ignoring terminating ones; `None` when there are
/// several of either (managing cleans that up; upstream `findUpdatedPodsOnNode`).
pub fn updated_and_old<'a>(
    world: &World,
    pods: &[&'a Pod],
) -> Option<(Option<&'a Pod>, Option<&'a Pod>)> {
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().copied().filter(|p| !is_terminating(p)) {
        let slot = if world.is_updated(pod) {
            &mut new
        } else {
            &mut old
        };
        if slot.replace(pod).is_some() {
            return None;
        }
    }
    Some((new, old))
}

/// The candidate nodes (upstream `filterDaemonPodsToUpdate`, `openkruise/kruise v1.9.0
/// pkg/controller/daemonset/daemonset_update.go`), existing and with Pods, sorted by name and walked
/// from the last: nodes already updated (or with several Pods), nodes whose old Pod
/// is gone or pre-deleting, then the nodes `rollingUpdate.selector` matches (all
/// others without a selector); only the first `nodes − partition`. With
/// `DaemonSetPruneIneligibleNodes`, only nodes that should run the daemon.
pub fn nodes_to_update<'l, 'a>(
    world: &World<'a>,
    layout: &'l Layout<'a>,
) -> Vec<&'l NodeState<'a>> {
    let prune = world.options.prune_ineligible_nodes;
    let with_pods: Vec<&NodeState<'a>> = layout
        .nodes
        .iter()
        .filter(|n| !n.pods.is_empty() && (!prune || n.eligibility.should_run))
        .collect();
    let selector = world
        .ds
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.selector.as_ref());
    let (mut updated, mut updating, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for node in with_pods.iter().rev().copied() {
        match updated_and_old(world, &node.pods) {
            None | Some((Some(_), _)) => updated.push(node),
            Some((None, old)) if old.is_none_or(is_preparing_delete) => updating.push(node),
            Some(_) => {
                let labels = node.node.metadata.labels.clone().unwrap_or_default();
                let selected = selector.is_none_or(|s| {
                    kruise_ordering::selector::matches(s, &labels).unwrap_or(false)
                });
                if selected {
                    rest.push(node);
                }
            }
        }
    }
    let partition = world.partition(world_desired(layout)).unwrap_or(0);
    let max_update = (with_pods.len() as i32 - partition).max(0) as usize;
    let mut sorted = updated;
    sorted.append(&mut updating);
    sorted.append(&mut rest);
    sorted.truncate(max_update);
    sorted
}

fn world_desired(layout: &Layout) -> i32 {
    layout.desired()
}

/// Plans this round's rolling update (only called when managing and refreshing changed
/// nothing): nothing for OnDelete or while paused.
pub fn plan_update<'a>(world: &World<'a>, layout: &Layout<'a>) -> Plan<'a> {
    let mut plan = Plan::default();
    if !world.is_rolling_update() || world.ds.spec.update_strategy.paused() {
        return plan;
    }
    let (max_surge, max_unavailable) = match world.surge_and_unavailable(layout.desired()) {
        Ok(v) => v,
        Err(e) => {
            plan.errors.push(format!("invalid rollingUpdate: {e}"));
            return plan;
        }
    };
    let candidates = nodes_to_update(world, layout);
    if max_surge == 0 {
        without_surge(world, &candidates, max_unavailable, &mut plan);
    } else {
        with_surge(world, &candidates, max_surge, &mut plan);
    }
    plan
}

/// Upstream `rollingUpdate`: old Pods that are not available are always replaced; available
/// ones while `numUnavailable + chosen < maxUnavailable`.
fn without_surge<'a>(
    world: &World<'a>,
    candidates: &[&NodeState<'a>],
    max_unavailable: i32,
    plan: &mut Plan<'a>,
) {
    let mut num_unavailable = 0;
    let (mut replace, mut available_old) = (Vec::new(), Vec::new());
    for node in candidates {
        match updated_and_old(world, &node.pods) {
            None | Some((None, None)) | Some((Some(_), Some(_))) => num_unavailable += 1,
            Some((Some(new), None)) => {
                if !is_available(world, new) || is_preparing_delete(new) {
                    num_unavailable += 1;
                }
            }
            Some((None, Some(old))) if is_preparing_delete(old) => num_unavailable += 1,
            Some((None, Some(old))) => {
                if is_available(world, old) {
                    available_old.push(old);
                } else {
                    replace.push(old);
                }
            }
        }
    }
    let room = (max_unavailable - num_unavailable).max(0) as usize;
    // The `numUnavailable >= maxUnavailable` warning of docs/advanced-daemonset.md: an
    // available old Pod left waiting because the limit is reached.
    if available_old.len() > room
        && num_unavailable >= max_unavailable
        && world.rolling_update_type() == RollingUpdateType::InPlaceIfPossible
    {
        plan.warnings.push(Warning {
            reason: events::NUM_UNAVAILABLE,
            message: events::num_unavailable(
                world.namespace(),
                world.name(),
                num_unavailable,
                max_unavailable,
            ),
        });
    }
    replace.extend(available_old.into_iter().take(room));
    for pod in replace {
        match replace_pod(world, pod) {
            Ok(action) => plan.actions.extend(action),
            Err(e) => plan.errors.push(e),
        }
    }
}

/// In place (upstream `canPodInPlaceUpdate`) when `InPlaceIfPossible`, the Pod has the
/// `InPlaceUpdateReady` gate and only images (and metadata) changed; deleted
/// otherwise (managing recreates it).
fn replace_pod<'a>(world: &World<'a>, pod: &'a Pod) -> Result<Option<Action<'a>>, String> {
    let in_place = world.rolling_update_type() == RollingUpdateType::InPlaceIfPossible
        && kruise_ordering::predicates::has_readiness_gate(pod, keys::INPLACE_UPDATE_READY);
    if in_place && let Some(from) = world.revision_of(pod) {
        let mut labels = BTreeMap::from([(
            keys::CONTROLLER_REVISION_HASH.to_string(),
            world.hash().to_string(),
        )]);
        if let Some(generation) = world.template_generation() {
            labels.insert(keys::POD_TEMPLATE_GENERATION.into(), generation.into());
        }
        let update = InPlaceUpdate {
            from,
            to: world.update_revision,
            to_name: world.hash(),
            in_place: world.options.in_place,
            lifecycle: world.lifecycle(),
            grace_seconds: 0,
            labels,
            now: world.now,
        };
        let decision: InPlace<'a> = update_in_place(pod, &update);
        if let Some(step) = decision.step(pod, || {
            kruise_ordering::predicates::lifecycle_state_label(pod)
                .unwrap_or_default()
                .to_string()
        }) {
            return step;
        }
    }
    Ok(delete_pod(world, pod))
}

/// Surge (the `maxSurge > 0` branch of upstream `rollingUpdate`): on a candidate node with only an old Pod, a new Pod at once if the old
/// one is not available, otherwise while `numSurge < maxSurge`; the old Pod goes once
/// the new one is available for sure ([`surged_long_enough`]).
fn with_surge<'a>(
    world: &World<'a>,
    candidates: &[&NodeState<'a>],
    max_surge: i32,
    plan: &mut Plan<'a>,
) {
    let mut num_surge = 0;
    let (mut allowed, mut waiting, mut old_to_delete) = (Vec::new(), Vec::new(), Vec::new());
    for node in candidates {
        match updated_and_old(world, &node.pods) {
            None => num_surge += 1,
            Some((_, None)) => {}
            Some((None, Some(old))) => {
                if is_available(world, old) {
                    waiting.push(node.name);
                } else {
                    allowed.push(node.name);
                }
            }
            Some((Some(new), Some(old))) => match surged_long_enough(world, new) {
                Ok(()) if !is_preparing_delete(old) => old_to_delete.push(old),
                result => {
                    num_surge += 1;
                    if let Err(Some(wait)) = result {
                        plan.requeue(wait);
                    }
                }
            },
        }
    }
    let room = (max_surge - num_surge).max(0) as usize;
    allowed.extend(waiting.into_iter().take(room));
    for node in allowed {
        plan.actions.push(Action::Create {
            pod: Box::new(new_pod(world, node)),
            pvcs: Vec::new(),
            revision: world.hash().to_string(),
        });
    }
    plan.actions.extend(
        old_to_delete
            .into_iter()
            .filter_map(|pod| delete_pod(world, pod)),
    );
}
