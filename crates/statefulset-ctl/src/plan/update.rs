//! Refreshing Pods, and the rolling update: which Pods to update this round,
//! in what order, and how (in place or by recreating).

use std::collections::{BTreeMap, BTreeSet};

use kruise_api::apps_v1beta1::{PodUpdateStrategyType, StatefulSetUpdateStrategyType};
use kruise_api::intstr::{self, NotAPercentage, Rounding};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_workload::update::{InPlaceUpdate, refresh_pod, update_in_place};
use serde_json::{Map, Value, json};

use super::ordinals::Replicas;
use super::resize;
use super::scale::delete_pod;
use super::{
    Action, Plan, World, has_label, is_finished, is_preparing_delete, is_terminating, label,
    pod_name, wait_until_available,
};

/// Every round, on every Pod of the set that scaling left alone (`touched`): continue
/// in-place updates (grace period, container batches, `InPlaceUpdateReady`), add a
/// missing `KruisePodReady` condition, restore identity labels, and move lifecycle
/// states along (as upstream `refreshPodState`, in `openkruise/kruise v1.9.0
/// pkg/controller/statefulset/stateful_set_control.go` and CloneSet's
/// `cloneset_update.go`). The rolling update waits for a round where none of this writes
/// anything.
pub fn refresh_pods<'a>(
    world: &World<'a>,
    replicas: &Replicas<'a>,
    touched: &BTreeSet<String>,
) -> Plan<'a> {
    let mut plan = Plan::default();
    let lifecycle = world.lifecycle();
    for (ordinal, pod) in replicas.all_pods() {
        if plan.round_is_full() {
            break;
        }
        if is_terminating(pod) || is_finished(pod) || touched.contains(pod_name(pod)) {
            continue;
        }
        let identity = || {
            missing_identity(world, pod, ordinal)
                .map(|labels| json!({"metadata": {"labels": labels}}))
        };
        let at_update_revision = world.is_update_revision(pod);
        refresh_pod(
            &mut plan,
            pod,
            lifecycle,
            at_update_revision,
            world.now,
            identity,
        );
    }
    plan
}

/// The identity labels (upstream `identityMatches`) the Pod lacks or has wrong, if any: an adopted Pod
/// or one whose labels were edited.
fn missing_identity(world: &World, pod: &Pod, ordinal: i32) -> Option<Map<String, Value>> {
    let mut want = vec![(keys::STATEFULSET_POD_NAME, pod_name(pod).to_string())];
    if world.options.pod_index_label {
        want.push((keys::POD_INDEX, ordinal.to_string()));
    }
    let labels: Map<String, Value> = want
        .into_iter()
        .filter(|(k, v)| label(pod, k) != Some(v.as_str()))
        .map(|(k, v)| (k.to_string(), Value::String(v)))
        .collect();
    (!labels.is_empty()).then_some(labels)
}

/// `rollingUpdate.maxUnavailable` scaled on replicas rounding down, at
/// least 1 (default 1).
pub fn max_unavailable(world: &World) -> Result<i32, NotAPercentage> {
    let value = world.sts.spec.update_strategy.max_unavailable();
    Ok(intstr::scaled_value(&value, world.replicas(), Rounding::Down)?.max(1))
}

/// Plans this round's rolling update (only called when scaling and refreshing changed
/// nothing).
pub fn plan_update<'a>(world: &World<'a>, replicas: &Replicas<'a>) -> Plan<'a> {
    let mut plan = Plan::default();
    let strategy = &world.sts.spec.update_strategy;
    if strategy.strategy_type() == StatefulSetUpdateStrategyType::OnDelete || strategy.paused() {
        return plan;
    }
    let max_unavailable = match max_unavailable(world) {
        Ok(m) => m as usize,
        Err(e) => {
            plan.errors
                .push(format!("invalid rollingUpdate.maxUnavailable: {e}"));
            return plan;
        }
    };
    let mut unavailable = unavailable_pods(world, replicas, &mut plan);
    let specified = specified_deletes(
        world,
        replicas,
        max_unavailable,
        &mut unavailable,
        &mut plan,
    );

    let resizing = resize::enabled(world);
    for index in update_order(world, replicas) {
        let Some(pod) = replicas.live[index].pod else {
            continue;
        };
        // A Pod whose claims are smaller than the templates is not done.
        let claims_match = !resizing || resize::claims_compatible(world, pod);
        if world.is_update_revision(pod) && claims_match {
            continue;
        }
        let name = pod_name(pod);
        // An available Pod may only start once the budget has room.
        if unavailable.len() >= max_unavailable && !unavailable.contains(name) {
            break;
        }
        if resizing {
            // Resize first; the Pod itself is updated once the resize completed.
            if !claims_match {
                let (patches, error) = resize::resize_claims(world, pod);
                plan.actions.extend(patches);
                if let Some(e) = error {
                    plan.errors.push(e);
                    break;
                }
                // The caches show the new requests next round at the earliest.
                unavailable.insert(name);
                plan.requeue(resize::RESIZE_POLL);
                continue;
            }
            if !resize::claims_completed(world, pod) {
                unavailable.insert(name);
                plan.requeue(resize::RESIZE_POLL);
                continue;
            }
            if world.is_update_revision(pod) {
                continue;
            }
        }
        if specified.contains(name) || is_terminating(pod) {
            continue;
        }
        match update_pod(world, pod) {
            Ok(action) => plan.actions.extend(action),
            Err(e) => {
                plan.errors.push(e);
                break;
            }
        }
        unavailable.insert(name);
    }
    plan
}

/// The live Pods that count against maxUnavailable: unhealthy (terminating,
/// lifecycle not Normal, not Running and Ready), mid in-place update, or not yet ready
/// for `minReadySeconds` (the plan looks again when they will be).
fn unavailable_pods<'a>(
    world: &World<'a>,
    replicas: &Replicas<'a>,
    plan: &mut Plan<'a>,
) -> BTreeSet<&'a str> {
    let min_ready = world.min_ready_seconds();
    let resizing = resize::enabled(world);
    replicas
        .live_pods()
        .filter(|pod| {
            let unavailable = is_terminating(pod)
                || !kruise_inplace::is_update_completed(pod)
                || !kruise_ordering::predicates::is_available(pod, min_ready, world.now)
                || (resizing && !resize::claims_ready(world, pod));
            if unavailable && let Some(wait) = wait_until_available(pod, min_ready, world.now) {
                plan.requeue(wait);
            }
            if resizing && !resize::claims_ready(world, pod) {
                plan.requeue(resize::RESIZE_POLL);
            }
            unavailable
        })
        .map(|p| p.metadata.name.as_deref().unwrap_or_default())
        .collect()
}

/// Upstream `handleSpecifiedDeletedPods`: Pods labelled `apps.kruise.io/specified-delete` go first, highest
/// ordinal down, partition or not; an available one only while the unavailable set has
/// room. Returns the Pods taken (deleted, held in PreparingDelete, or already going).
fn specified_deletes<'a>(
    world: &World<'a>,
    replicas: &Replicas<'a>,
    max_unavailable: usize,
    unavailable: &mut BTreeSet<&'a str>,
    plan: &mut Plan<'a>,
) -> BTreeSet<&'a str> {
    let mut taken = BTreeSet::new();
    for pod in replicas.live_pods().rev() {
        if !has_label(pod, keys::SPECIFIED_DELETE) {
            continue;
        }
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if unavailable.len() >= max_unavailable && !unavailable.contains(name) {
            continue;
        }
        taken.insert(name);
        if !is_terminating(pod) {
            plan.actions.extend(delete_pod(world, pod));
        }
        unavailable.insert(name);
    }
    taken
}

/// The live indices to walk (upstream `sortPodsToUpdate`, `stateful_update_utils.go`). Ordered: from the highest down to
/// `partition` (counting Pods, not ordinals). Unordered: terminating and updated Pods
/// first (they use up the `replicas - partition` allowance), then the others by
/// `priorityStrategy`, highest ordinal first among equals.
pub fn update_order(world: &World, replicas: &Replicas) -> Vec<usize> {
    let strategy = &world.sts.spec.update_strategy;
    let partition = usize::try_from(strategy.partition()).unwrap_or(0);
    let max_update = usize::try_from(world.replicas())
        .unwrap_or(0)
        .saturating_sub(partition);
    let unordered = strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.unordered_update.as_ref());
    let Some(unordered) = unordered else {
        return (partition..replicas.live.len()).rev().collect();
    };
    let (mut first, mut waiting): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for slot in replicas.live.iter().rev() {
        let Some(pod) = slot.pod else { continue };
        if is_terminating(pod) || world.is_update_revision(pod) {
            first.push(slot.index);
        } else {
            waiting.push(slot.index);
        }
    }
    if let Some(priority) = &unordered.priority_strategy {
        let mut pods: Vec<&Pod> = waiting
            .iter()
            .filter_map(|&i| replicas.live[i].pod)
            .collect();
        let index: BTreeMap<&str, usize> = waiting
            .iter()
            .filter_map(|&i| Some((pod_name(replicas.live[i].pod?), i)))
            .collect();
        kruise_ordering::update::sort_by_priority(&mut pods, priority);
        waiting = pods.iter().map(|p| index[pod_name(p)]).collect();
    }
    first.extend(waiting);
    first.truncate(max_update);
    first
}

/// One Pod to the update revision (upstream `inPlaceUpdatePod`): in place when the policy allows and the
/// revision diff qualifies (through the `inPlaceUpdate` hook as CloneSet), otherwise
/// deleted (through the `preDelete` hook) so scaling recreates it at the update
/// revision. `None` when a hook holds the Pod.
fn update_pod<'a>(world: &World<'a>, pod: &'a Pod) -> Result<Option<Action<'a>>, String> {
    let rolling = world.sts.spec.update_strategy.rolling_update.as_ref();
    let policy = world.sts.spec.update_strategy.pod_update_policy();
    let target_name = world.update_revision_name();
    // A Pod already held for deletion is past updating in place.
    if policy.is_in_place()
        && !is_preparing_delete(pod)
        && let Some(old) = world.revision_of(pod)
    {
        let update = InPlaceUpdate {
            from: old,
            to: world.update_revision,
            to_name: target_name,
            in_place: world.options.in_place,
            lifecycle: world.lifecycle(),
            grace_seconds: rolling
                .and_then(|r| r.in_place_update_strategy.as_ref())
                .map_or(0, |s| s.grace_period_seconds),
            labels: BTreeMap::from([(
                keys::CONTROLLER_REVISION_HASH.to_string(),
                target_name.to_string(),
            )]),
            now: world.now,
        };
        let state = || {
            label(pod, keys::LIFECYCLE_STATE)
                .unwrap_or_default()
                .to_string()
        };
        if let Some(step) = update_in_place(pod, &update).step(pod, state) {
            return step;
        }
    }
    if policy == PodUpdateStrategyType::InPlaceOnly {
        return Err(format!(
            "find strategy is InPlaceOnly but Pod {} can not update in-place",
            pod_name(pod)
        ));
    }
    Ok(delete_pod(world, pod))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::apps_v1beta1::{PodManagementPolicyType, UnorderedUpdateStrategy};
    use kruise_api::appspub::{
        Lifecycle, LifecycleHook, LifecycleState, UpdatePriorityStrategy, UpdatePriorityWeightTerm,
    };
    use kruise_workload::testing::{add_readiness_gate, assert_starts_in_place};

    fn update(f: &Fixture) -> Plan<'_> {
        let world = f.world();
        plan_update(&world, &Replicas::of(&world))
    }

    fn parallel(f: &mut Fixture, max_unavailable: i32) {
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        rolling(f).max_unavailable = Some(IntOrString::Int(max_unavailable));
    }

    #[test]
    fn parallel_update_takes_max_unavailable_pods_from_the_top() {
        // web, 5 replicas, maxUnavailable 3 -> web-4, 3, 2 at once.
        let mut f = Fixture::new(5);
        parallel(&mut f, 3);
        f.add_pods(&[0, 1, 2, 3, 4], Rev::Current, Ready::Yes);
        assert_eq!(
            summary(&update(&f)),
            ["delete web-4", "delete web-3", "delete web-2"]
        );
        // Recreated and not ready yet: nothing more; once web-4 is ready, web-1.
        for o in [4, 3, 2] {
            f.replace_pod(o, Rev::Update, Ready::No);
        }
        assert!(update(&f).actions.is_empty());
        f.set_ready(4, true);
        assert_eq!(summary(&update(&f)), ["delete web-1"]);
    }

    #[test]
    fn partition_limits_the_update_to_the_pods_above_it() {
        // partition 4 -> only web-4, even with maxUnavailable 3.
        let mut f = Fixture::new(5);
        parallel(&mut f, 3);
        rolling(&mut f).partition = Some(4);
        f.add_pods(&[0, 1, 2, 3, 4], Rev::Current, Ready::Yes);
        assert_eq!(summary(&update(&f)), ["delete web-4"]);
        // Released to 0 once web-4 is updated: 3, 2, 1 together.
        f.replace_pod(4, Rev::Update, Ready::Yes);
        rolling(&mut f).partition = Some(0);
        assert_eq!(
            summary(&update(&f)),
            ["delete web-3", "delete web-2", "delete web-1"]
        );
    }

    #[test]
    fn default_max_unavailable_updates_one_at_a_time() {
        // Parallel without maxUnavailable.
        let mut f = Fixture::new(3);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.add_pods(&[0, 1, 2], Rev::Current, Ready::Yes);
        assert_eq!(summary(&update(&f)), ["delete web-2"]);
        f.replace_pod(2, Rev::Update, Ready::No);
        assert!(update(&f).actions.is_empty());
        f.set_ready(2, true);
        assert_eq!(summary(&update(&f)), ["delete web-1"]);
    }

    #[test]
    fn percent_max_unavailable_rounds_down_with_a_minimum_of_one() {
        let mut f = Fixture::new(5);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        rolling(&mut f).max_unavailable = Some(IntOrString::String("50%".into()));
        assert_eq!(max_unavailable(&f.world()), Ok(2));
        rolling(&mut f).max_unavailable = Some(IntOrString::String("10%".into()));
        assert_eq!(max_unavailable(&f.world()), Ok(1));
    }

    #[test]
    fn partition_with_reserved_ordinals_counts_pods() {
        // replicas 4, reserve [1], partition 2 -> Pods 4 and 3 update.
        let mut f = Fixture::new(4);
        parallel(&mut f, 4);
        f.sts.spec.reserve_ordinals = vec![IntOrString::Int(1)];
        rolling(&mut f).partition = Some(2);
        f.add_pods(&[0, 2, 3, 4], Rev::Current, Ready::Yes);
        assert_eq!(summary(&update(&f)), ["delete web-4", "delete web-3"]);
    }

    #[test]
    fn unavailable_pods_block_available_ones_but_may_themselves_update() {
        // 3 unavailable and maxUnavailable 3: no available Pod is touched, an
        // outdated unavailable one still is.
        let mut f = Fixture::new(5);
        parallel(&mut f, 3);
        f.add_pods(&[4, 3], Rev::Current, Ready::No);
        f.add_pods(&[2], Rev::Update, Ready::No);
        f.add_pods(&[0, 1], Rev::Current, Ready::Yes);
        assert_eq!(summary(&update(&f)), ["delete web-4", "delete web-3"]);
    }

    #[test]
    fn min_ready_seconds_keeps_an_updated_pod_unavailable_and_requeues() {
        let mut f = Fixture::new(2);
        min_ready(&mut f, 30);
        f.add_pods(&[0], Rev::Current, Ready::Yes);
        f.add_pods(&[1], Rev::Update, Ready::Yes);
        f.set_ready_since(1, 5);
        let plan = update(&f);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(25)));
        f.set_ready_since(1, 30);
        assert_eq!(summary(&update(&f)), ["delete web-0"]);
    }

    #[test]
    fn paused_and_on_delete_update_nothing() {
        let mut f = Fixture::new(3);
        f.add_pods(&[0, 1, 2], Rev::Current, Ready::Yes);
        rolling(&mut f).paused = true;
        assert!(update(&f).actions.is_empty());
        rolling(&mut f).paused = false;
        f.sts.spec.update_strategy.type_ = Some(StatefulSetUpdateStrategyType::OnDelete);
        assert!(update(&f).actions.is_empty());
    }

    #[test]
    fn specified_deletes_go_first_under_max_unavailable() {
        // Pods 1,2 unready, 3,4 ready, maxUnavailable 3, all specified: 4, 2, 1
        // are deleted, 3 waits.
        let mut f = Fixture::new(5);
        parallel(&mut f, 3);
        f.add_pods(&[0, 3, 4], Rev::Update, Ready::Yes);
        f.add_pods(&[1, 2], Rev::Update, Ready::No);
        for o in [1, 2, 3, 4] {
            f.mark_specified_delete(o);
        }
        assert_eq!(
            summary(&update(&f)),
            ["delete web-4", "delete web-2", "delete web-1"]
        );
    }

    #[test]
    fn specified_delete_ignores_partition_and_the_replacement_keeps_the_old_revision() {
        // Pod 0 specified with partition 3, maxUnavailable 3, in place: Pod 0 is
        // deleted (and recreated at the current revision), 5 and 4 go in place.
        let mut f = Fixture::new(6);
        parallel(&mut f, 3);
        let r = rolling(&mut f);
        r.partition = Some(3);
        r.pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
        f.add_pods(&[0, 1, 2, 3, 4, 5], Rev::Current, Ready::Yes);
        f.mark_specified_delete(0);
        assert_eq!(
            summary(&update(&f)),
            ["delete web-0", "inplace web-5", "inplace web-4"]
        );
        f.pods.retain(|p| pod_name(p) != "web-0");
        let world = f.world();
        let revisions = super::super::scale::new_pod_revisions(&world, &Replicas::of(&world));
        assert_eq!(revisions[0].metadata.name.as_deref(), Some("web-old"));
    }

    #[test]
    fn unordered_update_follows_the_priority_strategy() {
        let mut f = Fixture::new(4);
        parallel(&mut f, 1);
        rolling(&mut f).unordered_update = Some(UnorderedUpdateStrategy {
            priority_strategy: Some(UpdatePriorityStrategy {
                weight_priority: vec![UpdatePriorityWeightTerm {
                    weight: 50,
                    match_selector: serde_json::from_value(
                        json!({"matchLabels": {"test-key": "foo"}}),
                    )
                    .unwrap(),
                }],
                ..Default::default()
            }),
        });
        f.add_pods(&[0, 1, 2, 3], Rev::Current, Ready::Yes);
        f.set_label(1, "test-key", "foo");
        assert_eq!(summary(&update(&f)), ["delete web-1"]);
        let world = f.world();
        assert_eq!(update_order(&world, &Replicas::of(&world)), [1, 3, 2, 0]);
    }

    #[test]
    fn unordered_partition_counts_updated_pods_against_the_allowance() {
        let mut f = Fixture::new(4);
        parallel(&mut f, 4);
        let r = rolling(&mut f);
        r.partition = Some(2);
        r.unordered_update = Some(UnorderedUpdateStrategy::default());
        f.add_pods(&[0, 2, 3], Rev::Current, Ready::Yes);
        f.add_pods(&[1], Rev::Update, Ready::Yes);
        // web-1 is already updated: one more, the highest.
        assert_eq!(summary(&update(&f)), ["delete web-3"]);
    }

    #[test]
    fn image_change_goes_in_place_and_env_change_recreates() {
        let mut f = Fixture::new(2);
        rolling(&mut f).pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
        f.add_pods(&[0, 1], Rev::Current, Ready::Yes);
        let plan = update(&f);
        assert_eq!(summary(&plan), ["inplace web-1"]);
        assert_starts_in_place(&plan.actions[0], "web-new", "nginx:1.7.9");

        // An env change cannot go in place.
        let mut t = template("nginx:1.7.9");
        t.spec.as_mut().unwrap().containers[0].env =
            Some(vec![k8s_openapi::api::core::v1::EnvVar {
                name: "X".into(),
                value: Some("1".into()),
                ..Default::default()
            }]);
        f.update = controller_revision_of("new", t, 2);
        assert_eq!(summary(&update(&f)), ["delete web-1"]);
        rolling(&mut f).pod_update_policy = Some(PodUpdateStrategyType::InPlaceOnly);
        let plan = update(&f);
        assert!(plan.actions.is_empty());
        assert_eq!(
            plan.errors,
            ["find strategy is InPlaceOnly but Pod web-1 can not update in-place"]
        );
    }

    #[test]
    fn in_place_grace_period_parks_the_update() {
        let mut f = Fixture::new(1);
        let r = rolling(&mut f);
        r.pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
        r.in_place_update_strategy = Some(kruise_api::appspub::InPlaceUpdateStrategy {
            grace_period_seconds: 10,
            ..Default::default()
        });
        f.add_pods(&[0], Rev::Current, Ready::Yes);
        let plan = update(&f);
        let Action::UpdateInPlace { writes, .. } = &plan.actions[0] else {
            unreachable!()
        };
        let patch = writes.pod_patch.as_ref().unwrap();
        assert!(
            patch["spec"].is_null(),
            "images change after the grace period"
        );
        assert!(patch["metadata"]["annotations"][keys::INPLACE_UPDATE_GRACE].is_string());
        assert_eq!(
            writes.requeue_after,
            Some(std::time::Duration::from_secs(10))
        );
    }

    #[test]
    fn in_place_hook_enters_preparing_update_first() {
        let mut f = Fixture::new(1);
        rolling(&mut f).pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
        f.sts.spec.lifecycle = Some(Lifecycle {
            in_place_update: Some(LifecycleHook {
                finalizers_handler: vec!["f".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
        f.add_pods(&[0], Rev::Current, Ready::Yes);
        f.pods[0].metadata.finalizers = Some(vec!["f".into()]);
        match &update(&f).actions[..] {
            [Action::Lifecycle { transition, .. }] => {
                assert_eq!(transition.to, LifecycleState::PreparingUpdate)
            }
            other => panic!("{other:?}"),
        }
        // Held while the hook's finalizer is there; updated in place once it is gone.
        f.set_state(0, "PreparingUpdate");
        assert!(update(&f).actions.is_empty());
        f.pods[0].metadata.finalizers = None;
        assert_eq!(summary(&update(&f)), ["inplace web-0"]);
    }

    #[test]
    fn recreate_goes_through_the_pre_delete_hook() {
        let mut f = Fixture::new(1);
        f.sts.spec.lifecycle = Some(Lifecycle {
            pre_delete: Some(LifecycleHook {
                finalizers_handler: vec!["f".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
        f.add_pods(&[0], Rev::Current, Ready::Yes);
        f.pods[0].metadata.finalizers = Some(vec!["f".into()]);
        match &update(&f).actions[..] {
            [Action::Lifecycle { transition, .. }] => {
                assert_eq!(transition.to, LifecycleState::PreparingDelete)
            }
            other => panic!("{other:?}"),
        }
        f.set_state(0, "PreparingDelete");
        assert!(update(&f).actions.is_empty(), "held");
    }

    fn refresh(f: &Fixture) -> Plan<'_> {
        let world = f.world();
        refresh_pods(&world, &Replicas::of(&world), &BTreeSet::new())
    }

    #[test]
    fn refresh_adds_missing_conditions_and_identity_labels() {
        let mut f = Fixture::new(1);
        f.options.pod_index_label = true;
        f.add_pods(&[0], Rev::Update, Ready::Yes);
        assert!(refresh(&f).actions.is_empty());
        add_readiness_gate(&mut f.pods[0], keys::KRUISE_POD_READY);
        f.pods[0]
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(keys::POD_INDEX);
        let plan = refresh(&f);
        let [Action::Refresh { writes, .. }] = &plan.actions[..] else {
            panic!("{:?}", plan.actions)
        };
        assert_eq!(
            writes.status_patch.as_ref().unwrap()["status"]["conditions"][0]["type"],
            keys::KRUISE_POD_READY
        );
        assert_eq!(
            writes.pod_patch.as_ref().unwrap()["metadata"]["labels"][keys::POD_INDEX],
            "0"
        );
    }

    #[test]
    fn rolled_back_preparing_update_pod_goes_back_to_normal() {
        // A Pod in PreparingUpdate whose set is rolled back to its revision.
        let mut f = Fixture::new(1);
        f.add_pods(&[0], Rev::Update, Ready::Yes);
        f.set_state(0, "PreparingUpdate");
        let plan = refresh(&f);
        match &plan.actions[..] {
            [Action::Lifecycle { transition, .. }] => {
                assert_eq!(transition.to, LifecycleState::Normal)
            }
            other => panic!("{other:?}"),
        }
    }
}
