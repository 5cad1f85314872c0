//! One Pod per node (upstream `podsShouldBeOnNode`, `openkruise/kruise v1.9.0
//! pkg/controller/daemonset/daemonset_controller.go`) that should run it, none elsewhere (every sync, also
//! while paused or OnDelete).

use std::cmp::Ordering;

use kruise_api::pod::Pod;
use kruise_ordering::predicates;

use super::pods::new_pod;
use super::{
    Action, Layout, NodeState, Plan, Warning, World, delete_pod, is_preparing_delete,
    is_terminating, surged_long_enough,
};
use crate::events;

/// What managing the nodes decides: Pods to create (on these nodes) and to delete.
#[derive(Debug, Default)]
pub struct Decision<'a> {
    pub create_on: Vec<&'a str>,
    pub delete: Vec<&'a Pod>,
    pub warnings: Vec<Warning>,
    /// When a failed Pod's deletion backoff ends.
    pub requeue_after: Option<std::time::Duration>,
}

/// Upstream `podsShouldBeOnNode` per node, and the Pods whose node is gone (also
/// bound ones: no kubelet reports for a node that no longer exists).
pub fn decide<'a>(world: &World<'a>, layout: &Layout<'a>) -> Decision<'a> {
    let mut d = Decision::default();
    let surge = world.surges();
    for node in &layout.nodes {
        node_decision(world, node, surge, &mut d);
    }
    d.delete
        .extend(layout.orphans.iter().filter(|p| !is_terminating(p)));
    d
}

fn node_decision<'a>(world: &World<'a>, node: &NodeState<'a>, surge: bool, d: &mut Decision<'a>) {
    let live: Vec<&'a Pod> = node
        .pods
        .iter()
        .copied()
        .filter(|p| !is_terminating(p))
        .collect();
    let Some(_) = node.pods.first() else {
        if node.eligibility.should_run {
            d.create_on.push(node.name);
        }
        return;
    };
    if !node.eligibility.should_continue_running {
        d.delete.extend(live);
        return;
    }
    let mut running = Vec::new();
    for pod in live {
        if predicates::phase(pod) == "Failed" {
            // Per-node exponential backoff: not in a hot create/delete loop.
            if let Some(until) = world.failed_backoff.get(node.name)
                && *until > world.now
            {
                let wait = until.duration_since(world.now).unsigned_abs();
                d.requeue_after = kruise_workload::min_duration(d.requeue_after, Some(wait));
                continue;
            }
            d.warnings.push(Warning {
                reason: events::FAILED_DAEMON_POD,
                message: events::failed_daemon_pod(
                    world.namespace(),
                    predicates::name(pod),
                    node.name,
                ),
            });
            d.delete.push(pod);
        } else if is_preparing_delete(pod) {
            d.delete.push(pod);
        } else {
            running.push(pod);
        }
    }
    running.sort_by(|a, b| oldest_first(a, b));
    if !surge {
        // Keep the oldest, delete the rest.
        d.delete.extend(running.into_iter().skip(1));
        return;
    }
    // While surging: at most one new and one old Pod; the old one goes once the new
    // one has been available long enough, or at once if it is not Ready.
    let (mut newest, mut oldest) = (None, None);
    for pod in running {
        let slot = if world.is_updated(pod) {
            &mut newest
        } else {
            &mut oldest
        };
        if slot.is_none() {
            *slot = Some(pod);
        } else {
            d.delete.push(pod);
        }
    }
    if let (Some(new), Some(old)) = (newest, oldest) {
        let replaced = surged_long_enough(world, new);
        if let Err(wait) = replaced {
            d.requeue_after = kruise_workload::min_duration(d.requeue_after, wait);
        }
        if !predicates::is_ready(old) || replaced.is_ok() {
            d.delete.push(old);
        }
    }
}

/// Upstream `podByCreationTimestampAndPhase`: scheduled first, then the oldest, then by
/// name.
pub fn oldest_first(a: &Pod, b: &Pod) -> Ordering {
    let scheduled = |p: &Pod| !predicates::is_scheduled(p);
    scheduled(a)
        .cmp(&scheduled(b))
        .then_with(|| predicates::created_at(a).cmp(&predicates::created_at(b)))
        .then_with(|| predicates::name(a).cmp(predicates::name(b)))
}

/// The plan of [`decide`]: creations (in node-name order) and deletions, each capped at
/// `burstReplicas`; with `partition` and the `progressive-create-pod` annotation, at
/// most `desired − updated − partition` creations (upstream `GetNodesNeedingPods`).
pub fn plan_manage<'a>(world: &World<'a>, layout: &Layout<'a>) -> Plan<'a> {
    let mut plan = Plan::default();
    let d = decide(world, layout);
    plan.warnings = d.warnings;
    plan.requeue_after = d.requeue_after;
    let desired = layout.desired();
    let burst = world.burst(desired) as usize;
    let mut create_on = d.create_on;
    if progressive_create(world) {
        let partition = world.partition(desired).unwrap_or(0);
        let updated = world
            .pods
            .iter()
            .filter(|p| !is_terminating(p) && world.is_updated(p))
            .count() as i32;
        create_on.truncate((desired - updated - partition).max(0) as usize);
    }
    create_on.truncate(burst);
    for node in create_on {
        plan.actions.push(Action::Create {
            pod: Box::new(new_pod(world, node)),
            pvcs: Vec::new(),
            revision: world.hash().to_string(),
        });
    }
    let mut deleted = 0;
    for pod in d.delete {
        if deleted >= burst {
            break;
        }
        if let Some(action) = delete_pod(world, pod) {
            deleted += 1;
            plan.actions.push(action);
        }
    }
    plan
}

/// `partition` ≠ 0 and annotation `daemonset.kruise.io/progressive-create-pod: "true"`.
fn progressive_create(world: &World) -> bool {
    let annotated = world
        .ds
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(kruise_api::keys::DAEMONSET_PROGRESSIVE_CREATE_POD))
        .is_some_and(|v| v == "true");
    let partitioned = world
        .ds
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.partition.as_ref())
        .is_some_and(|p| *p != k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0));
    annotated && partitioned
}
