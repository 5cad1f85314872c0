//! Refreshing Pods and choosing which Pods to update, in what order, and how (as `Update` in
//! openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/cloneset_update.go).

use std::collections::BTreeMap;

use kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType;
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_ordering::update::{UpdateOrderContext, sort_for_update_among};
use kruise_workload::revision::{self, same_revision};
use kruise_workload::update::{InPlaceUpdate, refresh_pod, update_in_place};
use serde_json::json;

use super::diffs::diffs;
use super::{Action, Plan, World, has_label, pod_name, revision_label};

/// Plans this round's update (only called when scaling changed nothing).
pub fn plan_update<'a>(world: &World<'a>) -> Plan<'a> {
    let mut plan = refresh_pods(world);
    if plan.changes_something() {
        return plan;
    }
    let strategy = &world.cs.spec.update_strategy;
    // OnDelete: Pods change revision only by being deleted and created anew.
    if strategy.paused || strategy.strategy_type() == CloneSetUpdateStrategyType::OnDelete {
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

    // Limit by |update| and by maxUnavailable (as `limitUpdateIndexes` in openkruise/kruise v1.9.0
    // pkg/controller/cloneset/sync/cloneset_update.go).
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
        let hash = revision::short_hash(target_name).to_string();
        let revision_hash = if world.options.short_hash {
            hash.clone()
        } else {
            target_name.to_string()
        };
        let update = InPlaceUpdate {
            from: old,
            to: target,
            to_name: target_name,
            in_place: world.options.in_place,
            lifecycle: world.lifecycle(),
            grace_seconds: world
                .cs
                .spec
                .update_strategy
                .in_place_update_strategy
                .as_ref()
                .map(|s| s.grace_period_seconds)
                .unwrap_or(0),
            labels: BTreeMap::from([
                (keys::CONTROLLER_REVISION_HASH.to_string(), revision_hash),
                (keys::POD_TEMPLATE_HASH.to_string(), hash),
            ]),
            now: world.now,
        };
        let state = || {
            kruise_lifecycle::state(pod)
                .map(|s| s.to_string())
                .unwrap_or_default()
        };
        if let Some(step) = update_in_place(pod, &update).step(pod, state) {
            return step;
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
        if plan.round_is_full() {
            break;
        }
        let template_hash = || {
            if has_label(pod, keys::POD_TEMPLATE_HASH) {
                return None;
            }
            let rev = revision_label(pod)?;
            Some(
                json!({"metadata": {"labels": {keys::POD_TEMPLATE_HASH: revision::short_hash(rev)}}}),
            )
        };
        let at_update_revision = world.is_update_revision(pod);
        refresh_pod(
            &mut plan,
            pod,
            lifecycle,
            at_update_revision,
            world.now,
            template_hash,
        );
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType as T;
    use kruise_workload::testing::{add_readiness_gate, assert_starts_in_place};

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
        assert_starts_in_place(&plan.actions[0], "cs-new", "nginx:1.7.9");
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
    fn a_refresh_of_many_pods_plans_one_round_and_asks_for_the_next_at_once() {
        let mut f = Fixture::new(150).settled();
        f.add_pods(150, Rev::Update, Ready::Yes);
        for i in 0..150 {
            f.set_state(i, "PreparingNormal");
        }
        let plan = plan_update(&f.world());
        assert_eq!(plan.actions.len(), kruise_workload::WRITES_PER_ROUND);
        assert_eq!(plan.requeue_after, Some(std::time::Duration::ZERO));
    }

    #[test]
    fn refresh_moves_scheduled_pods_to_normal_and_adds_missing_conditions() {
        let mut f = Fixture::new(1).settled();
        f.add_pods(1, Rev::Update, Ready::Yes);
        f.set_state(0, "PreparingNormal");
        add_readiness_gate(&mut f.pods[0], keys::KRUISE_POD_READY);
        let plan = plan_update(&f.world());
        // One move: the condition rides with the state change (one status write).
        let [Action::Lifecycle { transition, .. }] = &plan.actions[..] else {
            panic!("{:?}", plan.actions)
        };
        assert_eq!(transition.to, LifecycleState::Normal);
        let conditions =
            &transition.status_patch.as_ref().expect("conditions")["status"]["conditions"];
        assert_eq!(conditions[0]["type"], keys::KRUISE_POD_READY);
    }
}
