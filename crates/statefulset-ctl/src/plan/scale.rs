//! Creating, recreating and deleting Pods so the live ordinals have Pods and
//! the condemned ones have none.
//!
//! `OrderedReady` (monotonic) walks the live ordinals ascending and stops at the first
//! Pod it creates or that is not yet Running and Ready for `minReadySeconds`; scale-in
//! then removes one condemned Pod at a time, highest ordinal first. `Parallel` (burst)
//! does everything at once, creation bounded only by `scaleStrategy.maxUnavailable`.
//! Stopping (“halting”) plans nothing; the rolling update still runs in such a round,
//! bounded by its own unavailable budget, so a Pod held by a lifecycle hook or mid
//! in-place update can finish.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps_v1beta1::StatefulSetUpdateStrategyType;
use kruise_api::appspub::LifecycleState;
use kruise_api::intstr::{self, NotAPercentage, Rounding};
use kruise_api::keys;
use kruise_api::pod::Pod;

use super::ordinals::{Replicas, Slot};
use super::pods::{has_stale_claim, missing_claims, new_pod, retention_patches};
use super::{
    Action, Plan, World, has_label, is_finished, is_healthy, is_pending, is_preparing_delete,
    is_terminating, pod_name, wait_until_available,
};

/// Plans this round's scaling: settle Pods held in `PreparingDelete`, walk the live
/// ordinals (create missing Pods, replace failed ones, restore claims, apply the
/// retention policy), then delete condemned Pods.
pub fn plan_scale<'a>(world: &World<'a>, replicas: &Replicas<'a>) -> Plan<'a> {
    let mut plan = Plan::default();
    settle_preparing_delete(world, replicas, &mut plan);
    let going: BTreeSet<String> = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::Delete { .. }))
        .map(|a| a.object_name().to_string())
        .collect();
    let monotonic = !world.is_parallel();
    let budget = match scale_budget(world) {
        Ok(b) => b,
        Err(e) => {
            plan.errors
                .push(format!("invalid scaleStrategy.maxUnavailable: {e}"));
            None
        }
    };
    if scale_out(world, replicas, &going, monotonic, budget, &mut plan) == Walk::Halted {
        return plan;
    }
    scale_in(world, replicas, &going, monotonic, &mut plan);
    plan
}

/// How a walk over the Pods ended: done, or stopped by OrderedReady.
#[derive(PartialEq, Eq)]
enum Walk {
    Done,
    Halted,
}

/// Upstream `getScaleMaxUnavailable`: `scaleStrategy.maxUnavailable` scaled on replicas rounding down, at
/// least 1; `None` (unlimited) when unset.
pub fn scale_budget(world: &World) -> Result<Option<i32>, NotAPercentage> {
    world
        .sts
        .spec
        .scale_strategy
        .as_ref()
        .and_then(|s| s.max_unavailable.as_ref())
        .map(|v| Ok(intstr::scaled_value(v, world.replicas(), Rounding::Down)?.max(1)))
        .transpose()
}

/// Pods in `PreparingDelete`. A live Pod nothing wants gone any more (scaled
/// back up, not specified for deletion, not due for a recreate) returns to service when
/// the hooks allow it (as upstream CloneSet's `managePreparingDelete`,
/// `openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/cloneset_scale.go`); any other whose preDelete hook has let go
/// is deleted.
fn settle_preparing_delete<'a>(world: &World<'a>, replicas: &Replicas<'a>, plan: &mut Plan<'a>) {
    let lifecycle = world.lifecycle();
    for (_, pod) in replicas.all_pods() {
        if !is_preparing_delete(pod) || is_terminating(pod) {
            continue;
        }
        if let Some(slot) = replicas.slot_of(pod)
            && !has_label(pod, keys::SPECIFIED_DELETE)
            && kept_by_update(world, slot, pod)
            && kruise_lifecycle::can_cancel_deletion(lifecycle)
        {
            let to = if kruise_lifecycle::pre_normal_satisfied(pod, lifecycle) {
                LifecycleState::Normal
            } else {
                LifecycleState::PreparingNormal
            };
            if let Some(transition) = kruise_lifecycle::transition(pod, to, lifecycle, world.now) {
                plan.actions.push(Action::Lifecycle { pod, transition });
            }
            continue;
        }
        if !kruise_lifecycle::pre_delete_holds(pod, lifecycle) {
            plan.actions.push(Action::Delete {
                pod,
                pvcs: Vec::new(),
            });
        }
    }
}

/// Whether the rolling update leaves this live Pod as it is.
fn kept_by_update(world: &World, slot: &Slot, pod: &Pod) -> bool {
    let strategy = &world.sts.spec.update_strategy;
    let ordered = strategy
        .rolling_update
        .as_ref()
        .is_none_or(|r| r.unordered_update.is_none());
    strategy.strategy_type() == StatefulSetUpdateStrategyType::OnDelete
        || world.is_update_revision(pod)
        || (ordered && (slot.index as i64) < i64::from(strategy.partition()))
}

/// The live ordinals, ascending. Burst creation is bounded by the scale
/// budget: what `budget` allows minus the live Pods already unavailable (terminating,
/// failed, or not yet Running and Ready for `minReadySeconds`). Counting them all
/// before creating, rather than as the walk meets them as upstream does, keeps the
/// spec's effect — at most `budget` unavailable Pods — even when the missing ordinals
/// lie below unavailable ones.
fn scale_out<'a>(
    world: &World<'a>,
    replicas: &Replicas<'a>,
    going: &BTreeSet<String>,
    monotonic: bool,
    budget: Option<i32>,
    plan: &mut Plan<'a>,
) -> Walk {
    let revisions = new_pod_revisions(world, replicas);
    let min_ready = world.min_ready_seconds();
    let unavailable = |pod: &Pod| {
        is_terminating(pod)
            || going.contains(pod_name(pod))
            || is_finished(pod)
            || !kruise_ordering::predicates::is_running_and_available(pod, min_ready, world.now)
    };
    let mut creatable =
        budget.map(|m| m - replicas.live_pods().filter(|p| unavailable(p)).count() as i32);
    for slot in &replicas.live {
        let Some(pod) = slot.pod else {
            if creatable.is_some_and(|n| n <= 0) {
                continue;
            }
            if has_stale_claim(world, slot.ordinal) {
                if monotonic {
                    return Walk::Halted;
                }
                continue;
            }
            let revision = revisions[slot.index];
            plan.actions.push(Action::Create {
                pod: Box::new(new_pod(
                    world.sts,
                    revision,
                    slot.ordinal,
                    &world.options,
                    world.now,
                )),
                pvcs: missing_claims(world, slot.ordinal),
                revision: revision.metadata.name.clone().unwrap_or_default(),
            });
            if monotonic {
                return Walk::Halted;
            }
            if let Some(n) = creatable.as_mut() {
                *n -= 1;
            }
            continue;
        };
        if is_terminating(pod) || going.contains(pod_name(pod)) {
            if monotonic {
                return Walk::Halted;
            }
            continue;
        }
        // Evicted or completed: delete now, recreated next round once it is gone.
        if is_finished(pod) {
            plan.actions.push(Action::Delete {
                pod,
                pvcs: Vec::new(),
            });
            if monotonic {
                return Walk::Halted;
            }
            continue;
        }
        // A Pending Pod whose claim was deleted would never start: create it again.
        if is_pending(pod) {
            for pvc in missing_claims(world, slot.ordinal) {
                plan.actions.push(Action::CreatePvc {
                    pvc: Box::new(pvc),
                    pod: pod_name(pod).to_string(),
                });
            }
        }
        if unavailable(pod) {
            if let Some(wait) = wait_until_available(pod, min_ready, world.now) {
                plan.requeue(wait);
            }
            if monotonic {
                return Walk::Halted;
            }
        }
        plan.actions
            .extend(retention_patches(world, pod, slot.ordinal, false));
    }
    Walk::Done
}

/// Condemned Pods, highest ordinal first. Monotonic: one at a time, and only a
/// Running and Ready one or the lowest-ordinal unhealthy Pod of the set (the one
/// upstream lets go so a broken Pod cannot block scale-in forever).
fn scale_in<'a>(
    world: &World<'a>,
    replicas: &Replicas<'a>,
    going: &BTreeSet<String>,
    monotonic: bool,
    plan: &mut Plan<'a>,
) {
    let first_unhealthy = replicas
        .all_pods()
        .filter(|(_, p)| !is_healthy(p))
        .map(|(ordinal, _)| ordinal)
        .min();
    for &(ordinal, pod) in &replicas.condemned {
        if is_terminating(pod) || going.contains(pod_name(pod)) {
            if monotonic {
                return;
            }
            continue;
        }
        if monotonic
            && !kruise_ordering::predicates::is_running_and_ready(pod)
            && first_unhealthy != Some(ordinal)
        {
            return;
        }
        // Hand the claims over first (whenScaled: Delete), so the garbage collector
        // removes them with the Pod; delete in a later round, once they are.
        let patches = retention_patches(world, pod, ordinal, true);
        if patches.is_empty() {
            plan.actions.extend(delete_pod(world, pod));
        } else {
            plan.actions.extend(patches);
        }
        if monotonic {
            return;
        }
    }
}

/// Deleting a Pod: a preDelete hook that holds it moves it to
/// `PreparingDelete` first and keeps it there (`None`) until the hook lets go. The
/// set's PVCs are never deleted with a Pod; the retention policy works through owners.
pub fn delete_pod<'a>(world: &World<'a>, pod: &'a Pod) -> Option<Action<'a>> {
    kruise_workload::update::delete_or_hold(pod, world.lifecycle(), world.now)
}

/// Upstream `isCurrentRevisionNeeded`: the revision each live slot's Pod would be created at (indexed like
/// `replicas.live`).
pub fn new_pod_revisions<'a>(
    world: &World<'a>,
    replicas: &Replicas<'a>,
) -> Vec<&'a ControllerRevision> {
    let strategy = &world.sts.spec.update_strategy;
    let (current, update) = (world.current_revision, world.update_revision);
    if strategy.strategy_type() == StatefulSetUpdateStrategyType::OnDelete {
        return vec![update; replicas.live.len()];
    }
    let partition = i64::from(strategy.partition());
    let unordered = strategy
        .rolling_update
        .as_ref()
        .is_some_and(|r| r.unordered_update.is_some());
    if !unordered {
        return replicas
            .live
            .iter()
            .map(|s| {
                if (s.index as i64) < partition {
                    current
                } else {
                    update
                }
            })
            .collect();
    }
    // Unordered: a new Pod stays at currentRevision while fewer than `partition` other
    // Pods are not updated, counting the Pods decided before it (upstream fills the
    // missing slots in ordinal order before creating any).
    let mut not_updated: Vec<bool> = replicas
        .live
        .iter()
        .map(|s| s.pod.is_some_and(|p| !world.is_update_revision(p)))
        .collect();
    replicas
        .live
        .iter()
        .map(|s| {
            if let Some(pod) = s.pod {
                return if world.is_update_revision(pod) {
                    update
                } else {
                    current
                };
            }
            let others = not_updated.iter().filter(|&&n| n).count() as i64;
            let at_current = others < partition;
            not_updated[s.index] = at_current;
            if at_current { current } else { update }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::apps_v1beta1::{
        PersistentVolumeClaimRetentionPolicyType as Policy, PodManagementPolicyType,
        StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetScaleStrategy,
        UnorderedUpdateStrategy,
    };
    use kruise_api::appspub::{Lifecycle, LifecycleHook};

    fn scale(f: &Fixture) -> Plan<'_> {
        let world = f.world();
        plan_scale(&world, &Replicas::of(&world))
    }

    fn budget(f: &mut Fixture, v: IntOrString) {
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.sts.spec.scale_strategy = Some(StatefulSetScaleStrategy {
            max_unavailable: Some(v),
        });
    }

    #[test]
    fn ordered_ready_creates_one_pod_at_a_time_in_order() {
        let mut f = Fixture::new(3);
        assert_eq!(summary(&scale(&f)), ["create web-0"]);
        f.add_pods(&[0], Rev::Update, Ready::No);
        assert!(scale(&f).actions.is_empty(), "waits for web-0 to be ready");
        f.set_ready(0, true);
        assert_eq!(summary(&scale(&f)), ["create web-1"]);
    }

    #[test]
    fn ordered_ready_halts_at_the_first_unhealthy_pod_and_on_terminating_ones() {
        let mut f = Fixture::new(4);
        f.add_pods(&[0, 2], Rev::Update, Ready::Yes);
        f.add_pods(&[1], Rev::Update, Ready::No);
        assert!(scale(&f).actions.is_empty());
        f.set_ready(1, true);
        assert_eq!(summary(&scale(&f)), ["create web-3"]);
        f.set_terminating(0);
        assert!(scale(&f).actions.is_empty(), "waits for web-0 to go");
    }

    #[test]
    fn failed_predecessor_is_deleted_and_recreated_without_deadlock() {
        let mut f = Fixture::new(3);
        f.add_pods(&[0, 1], Rev::Update, Ready::Yes);
        f.set_phase(0, "Failed");
        assert_eq!(summary(&scale(&f)), ["delete web-0"]);
        f.pods.remove(0);
        assert_eq!(summary(&scale(&f)), ["create web-0"]);
        // Succeeded Pods (e.g. after a node reboot) come back too, also in Parallel.
        let mut f = Fixture::new(3);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.add_pods(&[0, 1, 2], Rev::Update, Ready::Yes);
        f.set_phase(1, "Succeeded");
        assert_eq!(summary(&scale(&f)), ["delete web-1"]);
    }

    #[test]
    fn parallel_creates_every_missing_pod_even_with_unhealthy_ones() {
        let mut f = Fixture::new(5);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.add_pods(&[1], Rev::Update, Ready::No);
        assert_eq!(
            summary(&scale(&f)),
            [
                "create web-0",
                "create web-2",
                "create web-3",
                "create web-4"
            ]
        );
    }

    #[test]
    fn scale_budget_limits_parallel_creation() {
        // 0 -> 5 with scaleStrategy.maxUnavailable 2 creates exactly 2.
        let mut f = Fixture::new(5);
        budget(&mut f, IntOrString::Int(2));
        assert_eq!(summary(&scale(&f)), ["create web-0", "create web-1"]);
        f.add_pods(&[0, 1], Rev::Update, Ready::No);
        assert!(scale(&f).actions.is_empty());
        // One becomes Running and Ready: one more.
        f.set_ready(0, true);
        assert_eq!(summary(&scale(&f)), ["create web-2"]);
    }

    #[test]
    fn percent_scale_budget_rounds_down_with_a_minimum_of_one() {
        // 10% of 100 -> 10 Pods at first.
        let mut f = Fixture::new(100);
        budget(&mut f, IntOrString::String("10%".into()));
        assert_eq!(scale(&f).actions.len(), 10);
        let mut f = Fixture::new(5);
        budget(&mut f, IntOrString::String("10%".into()));
        assert_eq!(scale(&f).actions.len(), 1, "floor(0.5) -> at least 1");
    }

    #[test]
    fn min_ready_seconds_gates_scale_out_and_requeues_at_the_exact_time() {
        let mut f = Fixture::new(2);
        min_ready(&mut f, 30);
        f.add_pods(&[0], Rev::Update, Ready::Yes);
        f.set_ready_since(0, 10);
        let plan = scale(&f);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(20)));
        f.set_ready_since(0, 30);
        assert_eq!(summary(&scale(&f)), ["create web-1"]);
    }

    #[test]
    fn ordered_scale_in_deletes_the_highest_condemned_pod_one_at_a_time() {
        let mut f = Fixture::new(2);
        f.add_pods(&[0, 1, 2, 3], Rev::Update, Ready::Yes);
        assert_eq!(summary(&scale(&f)), ["delete web-3"]);
        f.set_terminating(3);
        assert!(scale(&f).actions.is_empty(), "waits for web-3 to go");
        // An unhealthy live Pod blocks scale-in.
        f.pods.retain(|p| pod_name(p) != "web-3");
        f.set_ready(0, false);
        assert!(scale(&f).actions.is_empty());
    }

    #[test]
    fn ordered_scale_in_lets_the_first_unhealthy_condemned_pod_go() {
        let mut f = Fixture::new(2);
        f.add_pods(&[0, 1, 3], Rev::Update, Ready::Yes);
        f.add_pods(&[2], Rev::Update, Ready::No);
        // web-3 is healthy: it goes first.
        assert_eq!(summary(&scale(&f)), ["delete web-3"]);
        f.pods.retain(|p| pod_name(p) != "web-3");
        assert_eq!(summary(&scale(&f)), ["delete web-2"]);
        // But an unhealthy condemned Pod above another unhealthy one waits.
        f.add_pods(&[3], Rev::Update, Ready::No);
        assert!(scale(&f).actions.is_empty());
    }

    #[test]
    fn parallel_scale_in_deletes_all_condemned_pods() {
        let mut f = Fixture::new(1);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.add_pods(&[0, 1, 2], Rev::Update, Ready::Yes);
        f.add_pods(&[3], Rev::Update, Ready::No);
        assert_eq!(
            summary(&scale(&f)),
            ["delete web-3", "delete web-2", "delete web-1"]
        );
    }

    #[test]
    fn reserving_an_ordinal_deletes_its_pod_and_creates_the_next_free_one() {
        // replicas 4, reserveOrdinals [1].
        let mut f = Fixture::new(4);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.sts.spec.reserve_ordinals = vec![IntOrString::Int(1)];
        f.add_pods(&[0, 2, 3, 4], Rev::Update, Ready::Yes);
        assert!(scale(&f).actions.is_empty());
        f.sts.spec.reserve_ordinals.push(IntOrString::Int(3));
        assert_eq!(summary(&scale(&f)), ["create web-5", "delete web-3"]);
        f.sts.spec.replicas = Some(3);
        assert_eq!(summary(&scale(&f)), ["delete web-3"]);
    }

    #[test]
    fn changing_the_start_ordinal_moves_the_pods() {
        // start 0 -> 2 with 3 replicas deletes 0,1 and creates 3,4.
        let mut f = Fixture::new(3);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.options.start_ordinal = true;
        f.add_pods(&[0, 1, 2], Rev::Update, Ready::Yes);
        f.sts.spec.ordinals = Some(kruise_api::apps_v1beta1::StatefulSetOrdinals { start: 2 });
        assert_eq!(
            summary(&scale(&f)),
            [
                "create web-3",
                "create web-4",
                "delete web-1",
                "delete web-0"
            ]
        );
    }

    fn pre_delete_hook(f: &mut Fixture) {
        f.sts.spec.lifecycle = Some(Lifecycle {
            pre_delete: Some(LifecycleHook {
                finalizers_handler: vec!["example.com/hook".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    #[test]
    fn pre_delete_hook_holds_condemned_pods_in_preparing_delete() {
        let mut f = Fixture::new(1);
        pre_delete_hook(&mut f);
        f.add_pods(&[0, 1], Rev::Update, Ready::Yes);
        f.pods[1].metadata.finalizers = Some(vec!["example.com/hook".into()]);
        let plan = scale(&f);
        match &plan.actions[..] {
            [Action::Lifecycle { transition, pod }] => {
                assert_eq!(transition.to, LifecycleState::PreparingDelete);
                assert_eq!(pod_name(pod), "web-1");
            }
            other => panic!("{other:?}"),
        }
        f.set_state(1, "PreparingDelete");
        assert!(scale(&f).actions.is_empty(), "held by the hook");
        f.pods[1].metadata.finalizers = None;
        assert_eq!(summary(&scale(&f)), ["delete web-1"]);
    }

    #[test]
    fn scaling_back_up_returns_a_held_pod_to_service() {
        let mut f = Fixture::new(2);
        pre_delete_hook(&mut f);
        f.add_pods(&[0, 1], Rev::Update, Ready::Yes);
        f.pods[1].metadata.finalizers = Some(vec!["example.com/hook".into()]);
        f.set_state(1, "PreparingDelete");
        let plan = scale(&f);
        match &plan.actions[..] {
            [Action::Lifecycle { transition, .. }] => {
                assert_eq!(transition.to, LifecycleState::Normal)
            }
            other => panic!("{other:?}"),
        }
        // Not when it is waiting for a recreate (old revision).
        let mut f2 = Fixture::new(2);
        pre_delete_hook(&mut f2);
        f2.add_pods(&[0], Rev::Update, Ready::Yes);
        f2.add_pods(&[1], Rev::Current, Ready::Yes);
        f2.pods[1].metadata.finalizers = Some(vec!["example.com/hook".into()]);
        f2.set_state(1, "PreparingDelete");
        assert!(scale(&f2).actions.is_empty());
    }

    fn with_retention(f: &mut Fixture, when_scaled: Policy) {
        f.sts.spec.persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some(Policy::Retain),
                when_scaled: Some(when_scaled),
            });
    }

    #[test]
    fn when_scaled_delete_hands_claims_to_condemned_pods_before_deleting_them() {
        // Scaling 3 -> 1 with whenScaled: Delete removes the claims of 1 and 2.
        let mut f = Fixture::new(1);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.options.auto_delete_pvc = true;
        with_claim_template(&mut f, "www");
        with_retention(&mut f, Policy::Delete);
        f.add_pods(&[0, 1, 2], Rev::Update, Ready::Yes);
        f.add_claims(&[0, 1, 2]);
        assert_eq!(
            summary(&scale(&f)),
            ["patch-pvc www-web-2", "patch-pvc www-web-1"]
        );
        let plan = scale(&f);
        let Action::PatchPvc { patch, .. } = &plan.actions[0] else {
            unreachable!()
        };
        assert_eq!(patch["metadata"]["ownerReferences"][0]["kind"], "Pod");
        assert_eq!(patch["metadata"]["ownerReferences"][0]["name"], "web-2");
        // Once handed over, the Pods go.
        f.hand_claim_to_pod(1);
        f.hand_claim_to_pod(2);
        assert_eq!(summary(&scale(&f)), ["delete web-2", "delete web-1"]);
        // Default Retain: no patches, the claims stay.
        with_retention(&mut f, Policy::Retain);
        f.pvcs
            .iter_mut()
            .for_each(|c| c.metadata.owner_references = None);
        assert_eq!(summary(&scale(&f)), ["delete web-2", "delete web-1"]);
        // Without the gate, the policy is ignored.
        with_retention(&mut f, Policy::Delete);
        f.options.auto_delete_pvc = false;
        assert_eq!(summary(&scale(&f)), ["delete web-2", "delete web-1"]);
    }

    #[test]
    fn a_stale_claim_delays_the_pod_that_would_use_it() {
        let mut f = Fixture::new(2);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        with_claim_template(&mut f, "www");
        f.add_claims(&[0]);
        f.hand_claim_to_pod(0);
        let plan = scale(&f);
        assert_eq!(summary(&plan), ["create web-1"]);
        let Action::Create { pvcs, .. } = &plan.actions[0] else {
            unreachable!()
        };
        assert_eq!(pvcs.len(), 1, "the missing claim is created with the Pod");
    }

    #[test]
    fn pending_pods_get_missing_claims_again() {
        let mut f = Fixture::new(1);
        with_claim_template(&mut f, "www");
        f.add_pods(&[0], Rev::Update, Ready::No);
        f.set_phase(0, "Pending");
        assert_eq!(summary(&scale(&f)), ["create-pvc www-web-0"]);
        f.add_claims(&[0]);
        assert!(scale(&f).actions.is_empty());
    }

    #[test]
    fn new_pods_below_the_partition_get_the_current_revision() {
        // Partition counts live Pods: replicas 4, reserve [1], partition 2 -> 0 and 2 old.
        let mut f = Fixture::new(4);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.sts.spec.reserve_ordinals = vec![IntOrString::Int(1)];
        rolling(&mut f).partition = Some(2);
        let plan = scale(&f);
        assert_eq!(
            created_revisions(&plan),
            [
                ("web-0", "web-old"),
                ("web-2", "web-old"),
                ("web-3", "web-new"),
                ("web-4", "web-new")
            ]
        );
        // OnDelete: always the update revision.
        f.sts.spec.update_strategy.type_ = Some(StatefulSetUpdateStrategyType::OnDelete);
        f.sts.spec.update_strategy.rolling_update = None;
        assert!(
            created_revisions(&scale(&f))
                .iter()
                .all(|(_, r)| *r == "web-new")
        );
    }

    #[test]
    fn unordered_partition_counts_pods_not_yet_updated() {
        let mut f = Fixture::new(4);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        let r = rolling(&mut f);
        r.partition = Some(2);
        r.unordered_update = Some(UnorderedUpdateStrategy::default());
        f.add_pods(&[3], Rev::Current, Ready::Yes);
        f.add_pods(&[1], Rev::Update, Ready::Yes);
        // web-3 is one old Pod: web-0 makes two, then web-2 is new.
        assert_eq!(
            created_revisions(&scale(&f)),
            [("web-0", "web-old"), ("web-2", "web-new")]
        );
    }
}
