//! The scale steps (as `Scale` in openkruise/kruise v1.9.0
//! pkg/controller/cloneset/sync/cloneset_scale.go). Each step that changes something ends the
//! phase.

use std::collections::{BTreeMap, BTreeSet};

use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_ordering::deletion::{DeletionContext, sort_for_deletion};
use kruise_workload::WRITES_PER_ROUND;

use super::diffs::diffs;
use super::pods::{instance_ids, new_pod};
use super::{Action, Plan, Warning, World, label, pod_name};

pub const REASON_SCALE_UP_LIMITED: &str = "ScaleUpLimited";

/// Plans this round's scaling. `fresh_ids` supplies new instance ids (random in production).
pub fn plan_scale<'a>(world: &World<'a>, fresh_ids: &mut dyn Iterator<Item = String>) -> Plan<'a> {
    let mut plan = Plan::default();
    let lifecycle = world.lifecycle();
    let pre_deleting: Vec<&'a Pod> = world
        .pods
        .iter()
        .copied()
        .filter(|p| kruise_lifecycle::state(p) == Some(LifecycleState::PreparingDelete))
        .collect();
    let specified: Vec<&'a Pod> = world
        .pods
        .iter()
        .copied()
        .filter(|p| world.is_specified_delete(p))
        .collect();
    let planned: BTreeSet<&str> = pre_deleting
        .iter()
        .chain(&specified)
        .map(|p| pod_name(*p))
        .collect();

    // 1. Cancel deletions no longer needed (replicas went up while Pods were held).
    if kruise_lifecycle::can_cancel_deletion(lifecycle) {
        let mut wanted = world.replicas() - world.pods.len() as i32 + planned.len() as i32;
        for pod in &pre_deleting {
            if wanted <= 0 {
                break;
            }
            if world.is_specified_delete(pod) {
                continue;
            }
            if let Some(t) = kruise_lifecycle::transition(
                pod,
                LifecycleState::PreparingNormal,
                lifecycle,
                world.now,
            ) {
                plan.actions.push(Action::Lifecycle { pod, transition: t });
            }
            wanted -= 1;
        }
        if plan.changes_something() {
            return plan;
        }
    }

    let d = match diffs(world, true) {
        Ok(d) => d,
        Err(e) => {
            plan.errors
                .push(format!("invalid scale or update strategy: {e}"));
            return plan;
        }
    };

    // 2-3. Scale out, limited by scaleStrategy.maxUnavailable.
    if d.scale_up > d.scale_up_limit {
        plan.warnings.push(Warning {
            reason: REASON_SCALE_UP_LIMITED,
            message: format!(
                "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: {}",
                d.scale_up_limit
            ),
        });
    }
    if d.scale_up > 0 {
        // A round's worth at a time (each new Pod is held until the round ends); the
        // next round, at once, creates more.
        let allowed = d.scale_up_limit.max(0) as usize;
        let n = allowed.min(WRITES_PER_ROUND);
        if n < allowed {
            plan.requeue(std::time::Duration::ZERO);
        }
        let from_current = (d.scale_up_old.max(0) as usize).min(n);
        for (i, id) in instance_ids(world, n, fresh_ids).into_iter().enumerate() {
            let revision = if i < from_current {
                world.current_revision
            } else {
                world.update_revision
            };
            match new_pod(world, revision, &id) {
                Ok((pod, pvcs)) => plan.actions.push(Action::Create {
                    pod: Box::new(pod),
                    pvcs,
                    revision: revision.metadata.name.clone().unwrap_or_default(),
                }),
                Err(e) => plan.errors.push(e),
            }
        }
        return plan;
    }

    // 4. Delete Pods whose preDelete hook has let go.
    for pod in &pre_deleting {
        if !kruise_lifecycle::pre_delete_holds(pod, lifecycle) {
            plan.actions.push(delete(world, pod));
        }
    }
    if plan.changes_something() {
        return plan;
    }

    // 5. Specified deletes: unready ones at once, ready ones within the budget.
    let mut ready_budget = d.delete_ready_limit;
    let to_delete: Vec<&'a Pod> = specified
        .iter()
        .copied()
        .filter(|p| kruise_lifecycle::state(p) != Some(LifecycleState::PreparingDelete))
        .collect();
    let (new, old): (Vec<&'a Pod>, Vec<&'a Pod>) = to_delete
        .into_iter()
        .partition(|p| world.is_update_revision(p));
    for pod in new.into_iter().chain(old) {
        if take_budget(world, pod, &mut ready_budget) {
            plan.actions.push(delete(world, pod));
        }
    }
    if plan.changes_something() {
        return plan;
    }

    // 6. Scale in, old revision first, each group in deletion order.
    if d.scale_down > 0 && planned.is_empty() {
        let (mut new, mut old): (Vec<&'a Pod>, Vec<&'a Pod>) = world
            .pods
            .iter()
            .copied()
            .partition(|p| world.is_update_revision(p));
        let node_labels = BTreeMap::new();
        let spread = world
            .cs
            .spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.clone())
            .unwrap_or_default();
        let ctx = DeletionContext {
            now: world.now,
            min_ready_seconds: world.cs.spec.min_ready_seconds,
            siblings: &world.pods,
            spread: &spread,
            node_labels: &node_labels,
        };
        sort_for_deletion(&mut old, &ctx);
        sort_for_deletion(&mut new, &ctx);
        let total = d.scale_down as usize;
        let from_old = (d.scale_down_old.max(0) as usize).min(total).min(old.len());
        let chosen = old
            .into_iter()
            .take(from_old)
            .chain(new.into_iter().take(total - from_old));
        for pod in chosen {
            if take_budget(world, pod, &mut ready_budget) {
                plan.actions.push(delete(world, pod));
            }
        }
    }
    plan
}

/// Unready Pods may always go; a ready one only while the budget lasts.
fn take_budget(world: &World, pod: &Pod, budget: &mut i32) -> bool {
    if !world.is_ready(pod) {
        return true;
    }
    if *budget > 0 {
        *budget -= 1;
        return true;
    }
    false
}

/// Deleting a Pod: a preDelete hook holds it in PreparingDelete first; otherwise it goes
/// with the PVCs sharing its instance id.
pub fn delete<'a>(world: &World<'a>, pod: &'a Pod) -> Action<'a> {
    let lifecycle = world.lifecycle();
    if kruise_lifecycle::pre_delete_holds(pod, lifecycle)
        && let Some(t) =
            kruise_lifecycle::transition(pod, LifecycleState::PreparingDelete, lifecycle, world.now)
    {
        return Action::Lifecycle { pod, transition: t };
    }
    let id = label(pod, keys::CLONESET_INSTANCE_ID);
    let pvcs = world
        .pvcs
        .iter()
        .copied()
        .filter(|c| {
            id.is_some()
                && c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(keys::CLONESET_INSTANCE_ID))
                    .map(String::as_str)
                    == id
        })
        .collect();
    Action::Delete { pod, pvcs }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use kruise_api::appspub::{Lifecycle, LifecycleHook};

    fn names(plan: &Plan) -> Vec<String> {
        plan.actions
            .iter()
            .map(|a| a.object_name().to_string())
            .collect()
    }

    fn kinds(plan: &Plan) -> Vec<&'static str> {
        plan.actions.iter().map(Action::kind).collect()
    }

    #[test]
    fn creates_missing_pods_from_the_update_revision() {
        let f = Fixture::new(3).settled();
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(names(&plan), ["cs-new00", "cs-new01", "cs-new02"]);
        assert!(plan.warnings.is_empty());
    }

    #[test]
    fn a_large_scale_up_creates_one_round_at_a_time_and_asks_for_the_next_at_once() {
        let f = Fixture::new(250).settled();
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(plan.actions.len(), kruise_workload::WRITES_PER_ROUND);
        assert!(kinds(&plan).iter().all(|k| *k == "create"));
        assert_eq!(plan.requeue_after, Some(std::time::Duration::ZERO));
        // A small one needs no next round.
        let f = Fixture::new(3).settled();
        assert_eq!(plan_scale(&f.world(), &mut ids()).requeue_after, None);
    }

    #[test]
    fn limited_scale_up_warns_with_the_limit() {
        // The rate-limited scale-out of OpenKruise's documentation (CloneSet user manual): 3
        // available Pods, replicas 5, scale maxUnavailable 1, minReadySeconds 60.
        let mut f = Fixture::new(5).settled();
        f.cs.spec.min_ready_seconds = 60;
        f.cs.spec.scale_strategy.max_unavailable = Some(int(1));
        f.add_pods(3, Rev::Update, Ready::Yes);
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(kinds(&plan), ["create"]);
        assert_eq!(
            plan.warnings[0].message,
            "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: 1"
        );
        // The new Pod is not yet ready for 60s: limit 0, nothing created, warning again.
        f.add_pods(1, Rev::Update, Ready::No);
        let plan = plan_scale(&f.world(), &mut ids());
        assert!(plan.actions.is_empty());
        assert_eq!(
            plan.warnings[0].message,
            "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: 0"
        );
    }

    #[test]
    fn pods_to_delete_with_scale_in_deletes_exactly_that_pod() {
        // OpenKruise's documentation (CloneSet user manual), podsToDelete with scale-in: 5 Pods,
        // replicas 4, podsToDelete [one].
        let mut f = Fixture::new(4).settled();
        f.add_pods(5, Rev::Update, Ready::Yes);
        let victim = f.name(2);
        f.cs.spec.scale_strategy.pods_to_delete = vec![victim.clone()];
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(kinds(&plan), ["delete"]);
        assert_eq!(names(&plan), [victim]);
    }

    #[test]
    fn pods_to_delete_alone_means_delete_and_replace() {
        let mut f = Fixture::new(3).settled();
        f.add_pods(3, Rev::Update, Ready::Yes);
        f.mark_specified_delete(0);
        // Default maxUnavailable 20% of 3 -> 1: the ready Pod may go.
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(names(&plan), [f.name(0)]);
        // After it is gone, the replacement is created.
        f.pods.remove(0);
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(kinds(&plan), ["create"]);
    }

    #[test]
    fn scale_in_prefers_old_revision_and_unready_pods() {
        let mut f = Fixture::new(3);
        f.add_pods(2, Rev::Update, Ready::Yes);
        f.add_pods(2, Rev::Current, Ready::Yes);
        f.add_pods(1, Rev::Update, Ready::No);
        let plan = plan_scale(&f.world(), &mut ids());
        // 5 -> 3: partition 0 so both deletions come from the old revision... but the
        // budget only lets one ready Pod go this round (20% of 3 -> 1, plus the surplus 2,
        // minus the unready one = 2).
        let deleted = names(&plan);
        assert_eq!(deleted.len(), 2);
        assert!(
            deleted.iter().all(|n| n == &f.name(2) || n == &f.name(3)),
            "{deleted:?}"
        );
    }

    #[test]
    fn pre_delete_hook_holds_the_pod_in_preparing_delete() {
        let mut f = Fixture::new(2).settled();
        f.cs.spec.lifecycle = Some(Lifecycle {
            pre_delete: Some(LifecycleHook {
                finalizers_handler: vec!["example.io/unready-blocker".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
        f.add_pods(3, Rev::Update, Ready::Yes);
        for p in &mut f.pods {
            p.metadata.finalizers = Some(vec!["example.io/unready-blocker".into()]);
        }
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(kinds(&plan), ["lifecycle"]);
        // Held while the finalizer is there; deleted once the user removes it.
        let held = f.name(0);
        let idx = f
            .pods
            .iter()
            .position(|p| pod_name(p) == names(&plan)[0])
            .unwrap();
        f.set_state(idx, "PreparingDelete");
        assert!(
            plan_scale(&f.world(), &mut ids()).actions.is_empty(),
            "{held} still hooked"
        );
        f.pods[idx].metadata.finalizers = None;
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(kinds(&plan), ["delete"]);
    }

    #[test]
    fn raising_replicas_cancels_a_held_deletion() {
        let mut f = Fixture::new(3).settled();
        f.cs.spec.lifecycle = Some(Lifecycle {
            pre_delete: Some(LifecycleHook {
                finalizers_handler: vec!["f".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
        f.add_pods(3, Rev::Update, Ready::Yes);
        f.pods[0].metadata.finalizers = Some(vec!["f".into()]);
        f.set_state(0, "PreparingDelete");
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(kinds(&plan), ["lifecycle"]);
        match &plan.actions[0] {
            Action::Lifecycle { transition, .. } => {
                assert_eq!(transition.to, LifecycleState::PreparingNormal)
            }
            _ => unreachable!(),
        }
        // Not with markPodNotReady.
        f.cs.spec
            .lifecycle
            .as_mut()
            .unwrap()
            .pre_delete
            .as_mut()
            .unwrap()
            .mark_pod_not_ready = true;
        let plan = plan_scale(&f.world(), &mut ids());
        assert!(plan.actions.is_empty() || kinds(&plan) != ["lifecycle"]);
    }

    #[test]
    fn deletion_takes_the_pods_pvcs() {
        let mut f = Fixture::new(1).settled();
        f.add_pods(2, Rev::Update, Ready::Yes);
        let id = f.pods[1].metadata.labels.as_ref().unwrap()[keys::CLONESET_INSTANCE_ID].clone();
        f.pvcs
            .push(k8s_openapi::api::core::v1::PersistentVolumeClaim {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(format!("data-cs-{id}")),
                    labels: Some([(keys::CLONESET_INSTANCE_ID.to_string(), id)].into()),
                    ..Default::default()
                },
                ..Default::default()
            });
        f.cs.spec.scale_strategy.pods_to_delete = vec![f.name(1)];
        let plan = plan_scale(&f.world(), &mut ids());
        match &plan.actions[0] {
            Action::Delete { pvcs, .. } => assert_eq!(pvcs.len(), 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lower_deletion_cost_goes_first() {
        let mut f = Fixture::new(2).settled();
        f.add_pods(3, Rev::Update, Ready::Yes);
        for (i, cost) in [(0, "10"), (1, "-5"), (2, "3")] {
            f.pods[i].metadata.annotations =
                Some([(keys::POD_DELETION_COST.to_string(), cost.to_string())].into());
        }
        let plan = plan_scale(&f.world(), &mut ids());
        assert_eq!(names(&plan), [f.name(1)]);
    }
}
