//! Whole rounds: scaling before updating, refresh alongside scaling, and the cases
//! that span both.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1beta1::{
    PodManagementPolicyType, PodUpdateStrategyType, StatefulSetUpdateStrategyType,
};
use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleState};
use kruise_api::keys;
use kruise_workload::testing::add_readiness_gate;

use super::fixtures::*;
use super::*;

fn round(f: &Fixture) -> Plan<'_> {
    plan(&f.world())
}

fn web(replicas: i32, max_unavailable: i32) -> Fixture {
    let mut f = Fixture::new(replicas);
    f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
    rolling(&mut f).max_unavailable = Some(IntOrString::Int(max_unavailable));
    f
}

#[test]
fn scenario_2_parallel_create_makes_every_pod_at_once() {
    let f = web(5, 3);
    assert_eq!(
        summary(&round(&f)),
        [
            "create web-0",
            "create web-1",
            "create web-2",
            "create web-3",
            "create web-4"
        ]
    );
}

#[test]
fn scaling_comes_first_and_the_update_waits_for_a_quiet_round() {
    let mut f = web(4, 3);
    f.add_pods(&[0, 1, 2], Rev::Current, Ready::Yes);
    // Scale-out to 4 first; nothing is updated in that round.
    assert_eq!(summary(&round(&f)), ["create web-3"]);
    f.add_pods(&[3], Rev::Update, Ready::Yes);
    assert_eq!(
        summary(&round(&f)),
        ["delete web-2", "delete web-1", "delete web-0"]
    );
}

#[test]
fn scenario_7_in_place_update_of_three_pods_at_once() {
    let mut f = web(5, 3);
    rolling(&mut f).pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
    f.add_pods(&[0, 1, 2, 3, 4], Rev::Current, Ready::Yes);
    assert_eq!(
        summary(&round(&f)),
        ["inplace web-4", "inplace web-3", "inplace web-2"]
    );
}

#[test]
fn scenario_9_paused_still_scales() {
    let mut f = web(4, 1);
    rolling(&mut f).paused = true;
    f.add_pods(&[0, 1, 2], Rev::Current, Ready::Yes);
    // New Pods take the update revision (partition 0) even while paused.
    assert_eq!(created_revisions(&round(&f)), [("web-3", "web-new")]);
    f.add_pods(&[3], Rev::Update, Ready::Yes);
    assert!(round(&f).actions.is_empty());
}

#[test]
fn on_delete_waits_for_the_user_and_recreates_at_the_update_revision() {
    let mut f = Fixture::new(2);
    f.sts.spec.update_strategy.type_ = Some(StatefulSetUpdateStrategyType::OnDelete);
    f.sts.spec.update_strategy.rolling_update = None;
    f.add_pods(&[0, 1], Rev::Current, Ready::Yes);
    assert!(round(&f).actions.is_empty(), "template change does nothing");
    f.pods.retain(|p| pod_name(p) != "web-1");
    assert_eq!(created_revisions(&round(&f)), [("web-1", "web-new")]);
}

#[test]
fn a_set_being_deleted_plans_nothing() {
    let mut f = Fixture::new(3);
    f.sts.metadata.deletion_timestamp = Some(Time(f.now));
    assert!(round(&f).actions.is_empty());
}

#[test]
fn refresh_runs_alongside_scaling_and_holds_the_update() {
    let mut f = Fixture::new(3);
    f.add_pods(&[0], Rev::Current, Ready::Yes);
    f.add_pods(&[1], Rev::Update, Ready::Yes);
    f.set_state(1, "PreparingNormal");
    // web-1 moves to Normal in the same round web-2 is created; no update.
    assert_eq!(summary(&round(&f)), ["create web-2", "lifecycle web-1"]);
    f.set_state(1, "Normal");
    f.add_pods(&[2], Rev::Update, Ready::Yes);
    f.set_state(2, "PreparingNormal");
    assert_eq!(summary(&round(&f)), ["lifecycle web-2"]);
    f.set_state(2, "Normal");
    assert_eq!(summary(&round(&f)), ["delete web-0"]);
}

#[test]
fn ordered_ready_new_pod_gets_its_kruise_pod_ready_condition_while_scaling_waits() {
    // The KruisePodReady gate keeps a new Pod NotReady until the condition is written;
    // scaling waits on that Pod, so the refresh must not wait for the update phase.
    let mut f = Fixture::new(2);
    f.add_pods(&[0], Rev::Update, Ready::No);
    add_readiness_gate(f.pod_mut(0), keys::KRUISE_POD_READY);
    assert_eq!(summary(&round(&f)), ["refresh web-0"]);
}

#[test]
fn ordered_ready_in_place_hook_with_mark_not_ready_does_not_deadlock() {
    // The hook made web-1 NotReady in PreparingUpdate: scaling halts on it, yet the
    // update may still carry on with that very Pod once the hook lets go.
    let mut f = Fixture::new(2);
    rolling(&mut f).pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
    f.sts.spec.lifecycle = Some(Lifecycle {
        in_place_update: Some(LifecycleHook {
            finalizers_handler: vec!["example.com/hook".into()],
            mark_pod_not_ready: true,
            ..Default::default()
        }),
        ..Default::default()
    });
    f.add_pods(&[0], Rev::Current, Ready::Yes);
    f.add_pods(&[1], Rev::Current, Ready::No);
    f.set_state(1, "PreparingUpdate");
    f.pod_mut(1).metadata.finalizers = Some(vec!["example.com/hook".into()]);
    assert!(round(&f).actions.is_empty(), "held by the hook");
    // The hook lets go: updated in place although scaling is waiting on web-1.
    f.pod_mut(1).metadata.finalizers = None;
    assert_eq!(summary(&round(&f)), ["inplace web-1"]);
}

#[test]
fn specified_delete_then_recreate_at_the_current_revision_below_partition() {
    let mut f = web(6, 3);
    let r = rolling(&mut f);
    r.partition = Some(3);
    r.pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
    f.add_pods(&[0, 1, 2, 3, 4, 5], Rev::Current, Ready::Yes);
    f.mark_specified_delete(0);
    assert_eq!(
        summary(&round(&f)),
        ["delete web-0", "inplace web-5", "inplace web-4"]
    );
    f.pods.retain(|p| pod_name(p) != "web-0");
    assert_eq!(created_revisions(&round(&f)), [("web-0", "web-old")]);
}

#[test]
fn lifecycle_normal_pods_are_created_without_hooks() {
    let f = Fixture::new(1);
    let plan = round(&f);
    let Action::Create { pod, .. } = &plan.actions[0] else {
        panic!("{:?}", plan.actions)
    };
    assert_eq!(kruise_lifecycle::state(pod), Some(LifecycleState::Normal));
}
