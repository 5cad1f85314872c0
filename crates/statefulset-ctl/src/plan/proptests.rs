//! Properties of the plan over generated sets.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1beta1::{
    PodManagementPolicyType, StatefulSetOrdinals, StatefulSetScaleStrategy,
};
use proptest::prelude::*;

use super::fixtures::*;
use super::ordinals::Replicas;
use super::*;

/// What a live ordinal holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Missing,
    Ready,
    NotReady,
    Terminating,
    Failed,
}

fn state() -> impl Strategy<Value = State> {
    prop_oneof![
        3 => Just(State::Missing),
        4 => Just(State::Ready),
        2 => Just(State::NotReady),
        1 => Just(State::Terminating),
        1 => Just(State::Failed),
    ]
}

/// Adds Pods for ordinals `0..states.len()` as described.
fn populate(f: &mut Fixture, states: &[State], rev: impl Fn(usize) -> Rev) {
    for (i, s) in states.iter().enumerate() {
        let ordinal = i as i32;
        let ready = if *s == State::NotReady {
            Ready::No
        } else {
            Ready::Yes
        };
        match s {
            State::Missing => continue,
            _ => f.add_pods(&[ordinal], rev(i), ready),
        }
        match s {
            State::Terminating => f.set_terminating(ordinal),
            State::Failed => f.set_phase(ordinal, "Failed"),
            _ => {}
        }
    }
}

fn count(plan: &Plan, kind: &str) -> usize {
    plan.actions.iter().filter(|a| a.kind() == kind).count()
}

proptest! {
    #[test]
    fn live_ordinals_are_the_first_free_ones(
        replicas in 0..50i32,
        reserved in proptest::collection::vec(0..60i32, 0..10),
        start in 0..5i32,
        gate: bool,
    ) {
        let mut f = Fixture::new(replicas);
        f.sts.spec.reserve_ordinals = reserved.iter().map(|&r| IntOrString::Int(r)).collect();
        f.sts.spec.ordinals = Some(StatefulSetOrdinals { start });
        f.options.start_ordinal = gate;
        let live = f.world().live_ordinals();
        let first = if gate { start } else { 0 };
        prop_assert_eq!(live.len(), replicas as usize);
        prop_assert!(live.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(live.iter().all(|o| *o >= first && !reserved.contains(o)));
        // No free ordinal below the highest live one is skipped.
        if let Some(&max) = live.last() {
            let free = (first..=max).filter(|o| !reserved.contains(o)).count();
            prop_assert_eq!(free, live.len());
        }
    }

    #[test]
    fn scale_out_never_exceeds_the_budget(
        states in proptest::collection::vec(state(), 1..30),
        budget in 1..8i32,
    ) {
        let mut f = Fixture::new(states.len() as i32);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        f.sts.spec.scale_strategy = Some(StatefulSetScaleStrategy {
            max_unavailable: Some(IntOrString::Int(budget)),
        });
        populate(&mut f, &states, |_| Rev::Update);
        let world = f.world();
        let plan = scale::plan_scale(&world, &Replicas::of(&world));
        let missing = states.iter().filter(|s| **s == State::Missing).count() as i32;
        let unavailable = states
            .iter()
            .filter(|s| !matches!(s, State::Missing | State::Ready))
            .count() as i32;
        let creates = count(&plan, "create") as i32;
        prop_assert_eq!(creates, missing.min((budget - unavailable).max(0)));
        prop_assert!(unavailable + creates <= budget.max(unavailable));
        // Failed Pods are deleted whatever the budget.
        let failed = states.iter().filter(|s| **s == State::Failed).count();
        prop_assert_eq!(count(&plan, "delete"), failed);
    }

    #[test]
    fn ordered_ready_acts_on_one_pod_after_healthy_predecessors(
        states in proptest::collection::vec(state(), 1..10),
        extra in 0..3usize,
    ) {
        let live = states.len() - extra.min(states.len() - 1);
        let mut f = Fixture::new(live as i32);
        populate(&mut f, &states, |_| Rev::Update);
        let world = f.world();
        let plan = scale::plan_scale(&world, &Replicas::of(&world));
        prop_assert!(plan.actions.len() <= 1, "{:?}", summary(&plan));
        if let Some(action) = plan.actions.first() {
            let ordinal = ordinal_of("web", action.object_name()).unwrap() as usize;
            // Every live Pod below it exists, is Running and Ready and not terminating.
            prop_assert!(states[..ordinal.min(live)].iter().all(|s| *s == State::Ready));
            if ordinal >= live {
                // Scale-in only once every live Pod is healthy.
                prop_assert!(states[..live].iter().all(|s| *s == State::Ready));
                prop_assert_eq!(action.kind(), "delete");
            }
        }
    }

    #[test]
    fn rolling_update_respects_partition_and_max_unavailable(
        pods in proptest::collection::vec((any::<bool>(), any::<bool>()), 1..12),
        max_unavailable in 1..6i32,
        partition in 0..12i32,
    ) {
        // (updated, ready) per ordinal.
        let mut f = Fixture::new(pods.len() as i32);
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        let r = rolling(&mut f);
        r.max_unavailable = Some(IntOrString::Int(max_unavailable));
        r.partition = Some(partition);
        for (i, (updated, ready)) in pods.iter().enumerate() {
            let rev = if *updated { Rev::Update } else { Rev::Current };
            f.add_pods(&[i as i32], rev, if *ready { Ready::Yes } else { Ready::No });
        }
        let world = f.world();
        let plan = update::plan_update(&world, &Replicas::of(&world));
        let touched: Vec<usize> = plan
            .actions
            .iter()
            .map(|a| ordinal_of("web", a.object_name()).unwrap() as usize)
            .collect();
        let before = pods.iter().filter(|(_, ready)| !ready).count();
        let newly_unavailable = touched.iter().filter(|&&i| pods[i].1).count();
        let m = max_unavailable as usize;
        prop_assert!(before + newly_unavailable <= m.max(before));
        for &i in &touched {
            prop_assert!(!pods[i].0, "only outdated Pods are updated");
            prop_assert!(i as i32 >= partition, "nothing below the partition");
        }
        // Progress: with room in the budget, some outdated Pod above the partition moves.
        let outdated_above = (0..pods.len()).any(|i| i as i32 >= partition && !pods[i].0);
        if before < m && outdated_above {
            prop_assert!(!touched.is_empty());
        }
    }

    #[test]
    fn plans_do_not_depend_on_the_order_pods_are_listed(
        states in proptest::collection::vec(state(), 1..10),
        old in proptest::collection::vec(any::<bool>(), 10),
        parallel: bool,
    ) {
        let mut f = Fixture::new(states.len() as i32);
        if parallel {
            f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
            rolling(&mut f).max_unavailable = Some(IntOrString::Int(3));
        }
        populate(&mut f, &states, |i| if old[i] { Rev::Current } else { Rev::Update });
        let forward = summary(&plan(&f.world()));
        f.pods.reverse();
        prop_assert_eq!(forward, summary(&plan(&f.world())));
    }
}
