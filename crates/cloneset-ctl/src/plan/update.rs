//! Spec 4.6: refreshing Pods and choosing which Pods to update, in what order, and how.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType;
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_inplace::PodWrites;
use kruise_lifecycle::{InPlaceUpdateGate, RefreshInput};
use kruise_ordering::update::{UpdateOrderContext, sort_for_update_among};
use kruise_workload::revision::{self, same_revision};
use serde_json::{Value, json};

use super::diffs::diffs;
use super::{Action, Plan, World, has_label, pod_name, revision_label};

/// Plans this round's update (only called when scaling changed nothing).
pub fn plan_update<'a>(world: &World<'a>) -> Plan<'a> {
    let mut plan = refresh_pods(world);
    if plan.changes_something() {
        return plan;
    }
    let strategy = &world.cs.spec.update_strategy;
    if strategy.paused {
        return plan;
    }
    let d = match diffs(world, false) {
        Ok(d) => d,
        Err(e) => {
            plan.errors.push(format!("invalid update strategy: {e}"));
            return plan;
        }
    };
    if d.update == 0 {
        return plan;
    }
    let target = if d.update > 0 {
        world.update_revision
    } else {
        world.current_revision
    };
    let target_name = target.metadata.name.clone().unwrap_or_default();

    // Candidates: Pods not at the target (for a rollback: Pods at updateRevision).
    let mut candidates: Vec<&'a Pod> = world
        .pods
        .iter()
        .copied()
        .filter(|p| {
            let waiting = if d.update > 0 {
                !world.is_update_revision(p)
            } else {
                world.is_update_revision(p)
            };
            waiting
                && kruise_lifecycle::state(p) != Some(LifecycleState::PreparingDelete)
                && kruise_inplace::pending_grace(p).is_none()
        })
        .collect();
    // Scatter density is judged against every Pod of the CloneSet, not only the candidates.
    sort_for_update_among(
        &mut candidates,
        &world.pods,
        &UpdateOrderContext {
            now: world.now,
            priority: strategy.priority_strategy.as_ref(),
            scatter: &strategy.scatter_strategy,
            preparing_update_first: true,
        },
    );

    // Limit by |update| and by maxUnavailable (spec 4.6.7).
    candidates.truncate(d.update.unsigned_abs() as usize);
    let mut unavailable_total = 0;
    let mut unavailable_at_target = 0;
    for p in &world.pods {
        if !world.is_available(p) {
            unavailable_total += 1;
            if revision_label(p).is_some_and(|l| same_revision(l, &target_name)) {
                unavailable_at_target += 1;
            }
        }
    }
    let mut accepted = Vec::new();
    for pod in candidates {
        if unavailable_at_target + accepted.len() as i32 >= d.update_max_unavailable {
            break;
        }
        if world.is_available(pod) {
            if unavailable_total >= d.update_max_unavailable {
                break;
            }
            unavailable_total += 1;
        }
        accepted.push(pod);
    }

    for pod in accepted {
        match update_pod(world, pod, target, &target_name) {
            Ok(Some(action)) => plan.actions.push(action),
            Ok(None) => {}
            Err(e) => plan.errors.push(e),
        }
    }
    plan
}

/// One Pod towards `target`: in place when the strategy allows and the change qualifies,
/// otherwise marked for recreation (the scale phase then deletes and replaces it).
fn update_pod<'a>(
    world: &World<'a>,
    pod: &'a Pod,
    target: &k8s_openapi::api::apps::v1::ControllerRevision,
    target_name: &str,
) -> Result<Option<Action<'a>>, String> {
    let strategy = world.cs.spec.update_strategy.strategy_type();
    if strategy.is_in_place()
        && let Some(old) = world.revision_of(pod)
        && !(world.options.recreate_on_vct_change
            && strategy != CloneSetUpdateStrategyType::InPlaceOnly
            && volume_claim_templates_changed(old, target))
    {
        let old_data = old
            .data
            .as_ref()
            .map(|d| d.0.clone())
            .unwrap_or(Value::Null);
        let new_data = target
            .data
            .as_ref()
            .map(|d| d.0.clone())
            .unwrap_or(Value::Null);
        if let Ok(mut spec) = kruise_inplace::diff(
            &old_data,
            &new_data,
            target_name,
            world.options.env_from_metadata,
        ) {
            let lifecycle = world.lifecycle();
            match kruise_lifecycle::in_place_update_gate(pod, lifecycle) {
                InPlaceUpdateGate::EnterPreparingUpdate => {
                    return Ok(kruise_lifecycle::transition(
                        pod,
                        LifecycleState::PreparingUpdate,
                        lifecycle,
                        world.now,
                    )
                    .map(|transition| Action::Lifecycle { pod, transition }));
                }
                InPlaceUpdateGate::Wait => return Ok(None),
                InPlaceUpdateGate::NotAllowed => {
                    return Err(format!(
                        "not allowed to in-place update pod {} in state {}",
                        pod_name(pod),
                        kruise_lifecycle::state(pod)
                            .map(|s| s.to_string())
                            .unwrap_or_default()
                    ));
                }
                InPlaceUpdateGate::Proceed => {}
            }
            spec.grace_seconds = world
                .cs
                .spec
                .update_strategy
                .in_place_update_strategy
                .as_ref()
                .map(|s| s.grace_period_seconds)
                .unwrap_or(0);
            let hash = revision::short_hash(target_name).to_string();
            let labels = BTreeMap::from([
                (
                    keys::CONTROLLER_REVISION_HASH.to_string(),
                    if world.options.short_hash {
                        hash.clone()
                    } else {
                        target_name.to_string()
                    },
                ),
                (keys::POD_TEMPLATE_HASH.to_string(), hash),
                (
                    keys::LIFECYCLE_STATE.to_string(),
                    LifecycleState::Updating.as_str().to_string(),
                ),
            ]);
            let annotations = BTreeMap::from([(
                keys::LIFECYCLE_TIMESTAMP.to_string(),
                kruise_lifecycle::format_timestamp(world.now),
            )]);
            let writes = kruise_inplace::start_update(pod, &spec, &labels, &annotations, world.now);
            return Ok(Some(Action::UpdateInPlace {
                pod,
                writes,
                revision: target_name.to_string(),
            }));
        }
    }
    if strategy == CloneSetUpdateStrategyType::InPlaceOnly {
        return Err(format!(
            "find Pod {} update strategy is InPlaceOnly but can not update in-place",
            pod_name(pod)
        ));
    }
    if has_label(pod, keys::SPECIFIED_DELETE) {
        return Ok(None);
    }
    Ok(Some(Action::MarkRecreate {
        pod,
        revision: target_name.to_string(),
    }))
}

/// Both revisions record a `volumeClaimTemplates` hash and they differ. A revision
/// without one (made before the hash was recorded) is taken as unchanged: no Pod is
/// recreated on a guess.
pub fn volume_claim_templates_changed(
    old: &k8s_openapi::api::apps::v1::ControllerRevision,
    new: &k8s_openapi::api::apps::v1::ControllerRevision,
) -> bool {
    let hash = |r: &k8s_openapi::api::apps::v1::ControllerRevision| {
        r.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH))
            .cloned()
    };
    matches!((hash(old), hash(new)), (Some(a), Some(b)) if a != b)
}

/// Step 1 of every update round: continue in-place updates, move lifecycle states along,
/// add missing readiness-gate conditions and `pod-template-hash` labels.
fn refresh_pods<'a>(world: &World<'a>) -> Plan<'a> {
    let mut plan = Plan::default();
    let lifecycle = world.lifecycle();
    for pod in world.pods.iter().copied() {
        let refresh = kruise_inplace::refresh(pod, revision_label(pod), world.now);
        let mut writes = refresh.writes;
        if let Some(wait) = writes.requeue_after.take() {
            plan.requeue(wait);
        }
        if kruise_lifecycle::has_kruise_pod_ready_gate(pod)
            && kruise_lifecycle::kruise_pod_ready_condition(pod).is_none()
        {
            add_condition(
                &mut writes,
                json!({"type": keys::KRUISE_POD_READY, "status": "True", "lastTransitionTime": kruise_lifecycle::format_timestamp(world.now)}),
            );
        }
        if writes.pod_patch.is_none()
            && !has_label(pod, keys::POD_TEMPLATE_HASH)
            && let Some(rev) = revision_label(pod)
        {
            writes.pod_patch = Some(
                json!({"metadata": {"labels": {keys::POD_TEMPLATE_HASH: revision::short_hash(rev)}}}),
            );
        }
        let input = RefreshInput {
            lifecycle,
            pod_at_update_revision: world.is_update_revision(pod),
            update_completed: refresh.completed,
        };
        let next_state = kruise_lifecycle::refresh_target(pod, &input)
            .and_then(|to| kruise_lifecycle::transition(pod, to, lifecycle, world.now));
        if !writes.is_empty() {
            plan.actions.push(Action::Refresh { pod, writes });
        }
        if let Some(transition) = next_state {
            plan.actions.push(Action::Lifecycle { pod, transition });
        }
    }
    plan
}

fn add_condition(writes: &mut PodWrites, condition: Value) {
    let patch = writes
        .status_patch
        .get_or_insert_with(|| json!({"status": {"conditions": []}}));
    if let Some(list) = patch["status"]["conditions"].as_array_mut() {
        list.push(condition);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType as T;

    fn kinds(plan: &Plan) -> Vec<&'static str> {
        plan.actions.iter().map(Action::kind).collect()
    }

    #[test]
    fn recreate_update_marks_pods_one_at_a_time() {
        let mut f = Fixture::new(4);
        f.add_pods(4, Rev::Current, Ready::Yes);
        let plan = plan_update(&f.world());
        assert_eq!(kinds(&plan), ["recreate"], "20% of 4 -> 1 at a time");
    }

    #[test]
    fn in_place_update_keeps_the_pod_and_changes_the_image() {
        let mut f = Fixture::new(4);
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceIfPossible);
        f.add_pods(4, Rev::Current, Ready::Yes);
        let plan = plan_update(&f.world());
        assert_eq!(kinds(&plan), ["inplace"]);
        match &plan.actions[0] {
            Action::UpdateInPlace {
                writes, revision, ..
            } => {
                assert_eq!(revision, "cs-new");
                let patch = writes.pod_patch.as_ref().unwrap();
                assert_eq!(patch["spec"]["containers"][0]["image"], "nginx:1.7.9");
                assert_eq!(
                    patch["metadata"]["labels"][keys::CONTROLLER_REVISION_HASH],
                    "cs-new"
                );
                assert_eq!(
                    patch["metadata"]["labels"][keys::LIFECYCLE_STATE],
                    "Updating"
                );
                assert!(
                    writes.status_patch.is_some(),
                    "InPlaceUpdateReady=False first"
                );
            }
            _ => unreachable!(),
        }
    }

    fn set_vct_hash(r: &mut k8s_openapi::api::apps::v1::ControllerRevision, hash: &str) {
        r.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH.into(),
                hash.into(),
            );
    }

    #[test]
    fn changed_volume_claim_templates_recreate_only_with_the_gate() {
        let mut f = Fixture::new(4);
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceIfPossible);
        f.add_pods(4, Rev::Current, Ready::Yes);
        set_vct_hash(&mut f.current, "small");
        set_vct_hash(&mut f.update, "large");
        assert_eq!(kinds(&plan_update(&f.world())), ["inplace"], "gate off");
        f.options.recreate_on_vct_change = true;
        assert_eq!(kinds(&plan_update(&f.world())), ["recreate"], "gate on");
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceOnly);
        assert_eq!(
            kinds(&plan_update(&f.world())),
            ["inplace"],
            "InPlaceOnly ignores the templates"
        );
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceIfPossible);
        set_vct_hash(&mut f.update, "small");
        assert_eq!(
            kinds(&plan_update(&f.world())),
            ["inplace"],
            "same templates"
        );
        f.update.metadata.annotations = None;
        assert_eq!(
            kinds(&plan_update(&f.world())),
            ["inplace"],
            "no hash recorded: not taken as a change"
        );
    }

    #[test]
    fn env_change_falls_back_to_recreate_but_not_under_in_place_only() {
        let mut f = Fixture::new(2);
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceIfPossible);
        let mut t = template("nginx:1.7.9");
        t.spec.as_mut().unwrap().containers[0].env =
            Some(vec![k8s_openapi::api::core::v1::EnvVar {
                name: "X".into(),
                value: Some("1".into()),
                ..Default::default()
            }]);
        f.update.data = Some(k8s_openapi::apimachinery::pkg::runtime::RawExtension(
            revision::revision_data(&serde_json::to_value(t).unwrap()),
        ));
        f.add_pods(2, Rev::Current, Ready::Yes);
        assert_eq!(kinds(&plan_update(&f.world())), ["recreate"]);
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceOnly);
        let plan = plan_update(&f.world());
        assert!(plan.actions.is_empty());
        assert!(
            plan.errors[0].contains("update strategy is InPlaceOnly but can not update in-place"),
            "{:?}",
            plan.errors
        );
    }

    #[test]
    fn paused_updates_nothing() {
        let mut f = Fixture::new(4);
        f.cs.spec.update_strategy.paused = true;
        f.add_pods(4, Rev::Current, Ready::Yes);
        assert!(plan_update(&f.world()).actions.is_empty());
    }

    #[test]
    fn partition_stops_the_rollout() {
        let mut f = Fixture::new(5);
        f.cs.spec.update_strategy.partition = Some(int(3));
        f.cs.spec.update_strategy.max_unavailable = Some(int(5));
        f.add_pods(5, Rev::Current, Ready::Yes);
        assert_eq!(plan_update(&f.world()).actions.len(), 2);
        f.add_pods(0, Rev::Current, Ready::Yes);
        let mut f2 = Fixture::new(5);
        f2.cs.spec.update_strategy.partition = Some(int(3));
        f2.add_pods(3, Rev::Current, Ready::Yes);
        f2.add_pods(2, Rev::Update, Ready::Yes);
        assert!(plan_update(&f2.world()).actions.is_empty());
    }

    #[test]
    fn unavailable_updated_pods_block_further_updates() {
        let mut f = Fixture::new(4);
        f.add_pods(3, Rev::Current, Ready::Yes);
        f.add_pods(1, Rev::Update, Ready::No);
        assert!(
            plan_update(&f.world()).actions.is_empty(),
            "the updated Pod must become available first"
        );
    }

    #[test]
    fn in_place_hook_enters_preparing_update_first() {
        let mut f = Fixture::new(1);
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceIfPossible);
        f.cs.spec.lifecycle = Some(kruise_api::appspub::Lifecycle {
            in_place_update: Some(kruise_api::appspub::LifecycleHook {
                finalizers_handler: vec!["f".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
        f.add_pods(1, Rev::Current, Ready::Yes);
        f.pods[0].metadata.finalizers = Some(vec!["f".into()]);
        let plan = plan_update(&f.world());
        match &plan.actions[..] {
            [Action::Lifecycle { transition, .. }] => {
                assert_eq!(transition.to, LifecycleState::PreparingUpdate)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refresh_moves_scheduled_pods_to_normal_and_adds_missing_conditions() {
        let mut f = Fixture::new(1).settled();
        f.add_pods(1, Rev::Update, Ready::Yes);
        f.set_state(0, "PreparingNormal");
        f.pods[0]
            .spec
            .as_mut()
            .unwrap()
            .readiness_gates
            .as_mut()
            .unwrap()
            .push(k8s_openapi::api::core::v1::PodReadinessGate {
                condition_type: keys::KRUISE_POD_READY.into(),
            });
        let plan = plan_update(&f.world());
        assert_eq!(kinds(&plan), ["refresh", "lifecycle"]);
    }
}
