//! A whole round: letting go, scale before update, errors by phase, `podsToDelete`.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType;
use kruise_api::keys;
use kruise_workload::testing::set_label;

use super::fixtures::*;
use super::*;

fn kinds(actions: &[Action]) -> Vec<&'static str> {
    actions.iter().map(Action::kind).collect()
}

fn names(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| a.object_name().to_string())
        .collect()
}

#[test]
fn scaling_ends_the_round_before_the_update() {
    // Replicas 3, two Pods at the current revision: one Pod to create, two to update.
    let mut f = Fixture::new(3);
    f.add_pods(2, Rev::Current, Ready::Yes);
    let round = plan(&f.world(), &mut ids());
    assert_eq!(round.phase, Phase::Scale);
    assert_eq!(kinds(&round.plan.actions), ["create"]);
    assert!(round.cleanup.is_empty());

    // Once the Pod exists, scaling changes nothing and the update runs.
    f.add_pods(1, Rev::Update, Ready::Yes);
    let round = plan(&f.world(), &mut ids());
    assert_eq!(round.phase, Phase::Update);
    let update = update::plan_update(&f.world());
    assert!(!update.actions.is_empty());
    assert_eq!(kinds(&round.plan.actions), kinds(&update.actions));
    assert_eq!(names(&round.plan.actions), names(&update.actions));
}

#[test]
fn scale_warnings_without_writes_let_the_update_run() {
    // Scale-up limited to nothing (the unready Pod uses the budget): a warning, no write.
    let mut f = Fixture::new(3);
    f.cs.spec.min_ready_seconds = 60;
    f.cs.spec.scale_strategy.max_unavailable = Some(int(1));
    f.add_pods(1, Rev::Current, Ready::Yes);
    f.add_pods(1, Rev::Update, Ready::No);
    let round = plan(&f.world(), &mut ids());
    assert_eq!(round.phase, Phase::Update);
    assert_eq!(
        round.plan.warnings[0].message,
        "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: 0"
    );
    let update = update::plan_update(&f.world());
    assert_eq!(kinds(&round.plan.actions), kinds(&update.actions));
    assert_eq!(names(&round.plan.actions), names(&update.actions));
}

#[test]
fn plan_errors_are_reported_by_phase() {
    let mut f = Fixture::new(2);
    f.add_pods(2, Rev::Current, Ready::Yes);
    f.cs.spec.update_strategy.partition = Some(string("many"));
    let round = plan(&f.world(), &mut ids());
    assert_eq!(round.phase, Phase::Update);
    assert!(round.plan.errors.is_empty(), "errors are kept by phase");
    let scale = round.errors.scale.as_deref().unwrap();
    let update = round.errors.update.as_deref().unwrap();
    assert!(
        scale.starts_with("invalid scale or update strategy: "),
        "{scale}"
    );
    assert!(update.starts_with("invalid update strategy: "), "{update}");
}

#[test]
fn owned_pods_that_stop_matching_are_released_first() {
    let mut f = Fixture::new(2).settled();
    f.add_pods(2, Rev::Update, Ready::Yes);
    let mut moved = f.pod(Rev::Update, Ready::Yes);
    set_label(&mut moved, "app", "elsewhere");
    let mut gone = f.pod(Rev::Update, Ready::Yes);
    set_label(&mut gone, "app", "elsewhere");
    gone.metadata.deletion_timestamp = Some(Time(f.now));
    f.others = vec![moved.clone(), gone];

    let world = f.world();
    assert_eq!(managed(world.cs, &world.owned), world.pods);
    let round = plan(&world, &mut ids());
    assert_eq!(kinds(&round.cleanup), ["release"]);
    assert_eq!(
        names(&round.cleanup),
        [moved.metadata.name.clone().unwrap()],
        "only active Pods are released"
    );
    assert!(
        round.plan.actions.is_empty(),
        "the managed Pods are settled"
    );
}

#[test]
fn managed_pods_are_the_active_and_selected_ones() {
    let mut f = Fixture::new(3);
    let selected = f.pod(Rev::Update, Ready::Yes);
    let mut unselected = f.pod(Rev::Update, Ready::Yes);
    set_label(&mut unselected, "app", "other");
    let mut failed = f.pod(Rev::Update, Ready::Yes);
    failed.status.as_mut().unwrap().phase = Some("Failed".into());
    let owned = [&selected, &unselected, &failed];
    assert_eq!(managed(&f.cs, &owned), [&selected]);
    assert!(selects(&f.cs, &failed) && !selects(&f.cs, &unselected));
}

#[test]
fn disable_pvc_reuse_cleanup_is_planned_as_pvc_writes() {
    let mut f = Fixture::new(1).settled();
    f.add_pods(1, Rev::Update, Ready::Yes);
    let mut terminating = f.pod(Rev::Update, Ready::Yes);
    terminating.metadata.deletion_timestamp = Some(Time(f.now));
    let terminating_id = label(&terminating, keys::CLONESET_INSTANCE_ID)
        .unwrap()
        .to_string();
    f.others.push(terminating.clone());
    let claim = |id: &str| PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(format!("data-cs-{id}")),
            labels: Some([(keys::CLONESET_INSTANCE_ID.to_string(), id.to_string())].into()),
            resource_version: Some("7".into()),
            owner_references: Some(vec![owner_ref()]),
            ..Default::default()
        },
        ..Default::default()
    };
    let running_id = label(&f.pods[0], keys::CLONESET_INSTANCE_ID)
        .unwrap()
        .to_string();
    f.pvcs = vec![claim(&running_id), claim(&terminating_id), claim("gone")];

    assert!(
        plan(&f.world(), &mut ids()).cleanup.is_empty(),
        "PVCs are kept for reuse by default"
    );
    f.cs.spec.scale_strategy.disable_pvc_reuse = true;
    let world = f.world();
    let round = plan(&world, &mut ids());
    assert_eq!(kinds(&round.cleanup), ["patch-pvc", "delete-pvc"]);
    assert_eq!(
        names(&round.cleanup),
        [format!("data-cs-{terminating_id}"), "data-cs-gone".into()]
    );
    let Action::PatchPvc { patch, .. } = &round.cleanup[0] else {
        panic!("{:?}", round.cleanup[0]);
    };
    assert_eq!(
        patch,
        &pods::hand_to_pod_patch(&f.pvcs[1], "cs-uid", &terminating)
    );
}

#[test]
fn pods_to_delete_keeps_only_names_of_managed_pods() {
    let mut f = Fixture::new(2).settled();
    f.add_pods(2, Rev::Update, Ready::Yes);
    assert_eq!(plan(&f.world(), &mut ids()).pods_to_delete, None);

    f.cs.spec.scale_strategy.pods_to_delete = vec![f.name(0), f.name(1)];
    assert_eq!(
        pruned_pods_to_delete(&f.world()),
        None,
        "every name still matches"
    );

    f.cs.spec.scale_strategy.pods_to_delete = vec!["cs-gone".into(), f.name(1)];
    let round = plan(&f.world(), &mut ids());
    assert_eq!(round.pods_to_delete, Some(vec![f.name(1)]));

    f.cs.spec.scale_strategy.pods_to_delete = vec!["cs-gone".into()];
    assert_eq!(pruned_pods_to_delete(&f.world()), Some(vec![]));
}

#[test]
fn a_held_scale_round_goes_on_to_the_update() {
    // Recreate update, maxUnavailable 100%: the ready Pod is marked for recreation and its
    // deletion is what the scale phase plans; a PodUnavailableBudget refuses it. The
    // unready Pod (an image that does not pull) is what the update phase then marks.
    let mut f = Fixture::new(2);
    f.cs.spec.update_strategy.type_ = Some(CloneSetUpdateStrategyType::ReCreate);
    f.cs.spec.update_strategy.max_unavailable = Some(string("100%"));
    f.add_pods(1, Rev::Current, Ready::Yes);
    f.add_pods(1, Rev::Current, Ready::No);
    f.mark_specified_delete(0);
    let round = plan(&f.world(), &mut ids());
    assert_eq!(round.phase, Phase::Scale);
    assert_eq!(kinds(&round.plan.actions), ["delete"]);
    assert_eq!(names(&round.plan.actions), [f.name(0)]);

    let (update, errors) = plan_update_after_held_scale(&f.world());
    assert_eq!(errors, None);
    assert_eq!(kinds(&update.actions), ["recreate"]);
    assert_eq!(names(&update.actions), [f.name(1)]);
}
