//! Property tests over random nodes, taints, Pods and strategies.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;

use super::fixtures::*;
use super::nodes::target_node;
use super::{Action, Layout};

/// Per node: taint (0 none, 1 NoSchedule, 2 NoExecute), Pod (0 none, 1 old, 2 new),
/// Ready, in the update selector.
type NodeSetup = (u8, u8, bool, bool);

fn fixture(nodes: &[NodeSetup]) -> Fixture {
    let mut f = Fixture::new(nodes.len());
    for (i, (taint, pod, ready, selected)) in nodes.iter().enumerate() {
        match taint {
            1 => f.taint(i, "t", "NoSchedule"),
            2 => f.taint(i, "t", "NoExecute"),
            _ => {}
        }
        let ready = if *ready { Ready::Yes } else { Ready::No };
        match pod {
            1 => {
                f.add_pod(i, Rev::Current, ready);
            }
            2 => {
                f.add_pod(i, Rev::Update, ready);
            }
            _ => {}
        }
        if *selected {
            f.label_node(i, "canary", "true");
        }
    }
    f
}

proptest! {
    #[test]
    fn managing_creates_only_where_a_pod_should_run_and_is_missing(
        nodes in prop::collection::vec((0u8..3, 0u8..3, any::<bool>(), any::<bool>()), 0..12),
        burst in 1i32..6,
    ) {
        let mut f = fixture(&nodes);
        f.ds.spec.burst_replicas = Some(IntOrString::Int(burst));
        let world = f.world();
        let layout = Layout::of(&world);
        let plan = super::plan(&world);
        let mut created = BTreeSet::new();
        for a in &plan.actions {
            if let Action::Create { pod, .. } = a {
                let node = target_node(pod).unwrap().to_string();
                let state = layout.nodes.iter().find(|n| n.name == node).unwrap();
                prop_assert!(state.eligibility.should_run);
                prop_assert!(state.pods.is_empty());
                prop_assert!(created.insert(node), "two Pods on one node");
            }
        }
        prop_assert!(created.len() <= burst as usize);
    }

    #[test]
    fn without_surge_available_pods_go_only_within_max_unavailable(
        nodes in prop::collection::vec((Just(0u8), 1u8..3, any::<bool>(), any::<bool>()), 1..12),
        max_unavailable in 1i32..5,
        partition in 0i32..12,
        use_selector in any::<bool>(),
    ) {
        let mut f = fixture(&nodes);
        f.max_unavailable(max_unavailable);
        f.rolling().partition = Some(IntOrString::Int(partition));
        if use_selector {
            f.rolling().selector = Some(LabelSelector {
                match_labels: Some([("canary".to_string(), "true".to_string())].into()),
                match_expressions: None,
            });
        }
        let world = f.world();
        let plan = super::plan(&world);
        let unavailable_now = nodes.iter().filter(|(_, pod, ready, _)| *pod == 2 && !ready).count() as i32;
        let mut available_replaced = 0;
        for a in &plan.actions {
            let Action::Delete { pod, .. } = a else { continue };
            prop_assert!(!world.is_updated(pod), "only old Pods are replaced");
            let i: usize = target_node(pod).unwrap().trim_start_matches("node-").parse().unwrap();
            if use_selector {
                prop_assert!(nodes[i].3, "a node outside the selector");
            }
            if nodes[i].2 {
                available_replaced += 1;
            }
        }
        prop_assert!(available_replaced <= (max_unavailable - unavailable_now).max(0));
        // Never more nodes at (or moving to) the new revision than nodes − partition,
        // unless they already were.
        let updated_before = nodes.iter().filter(|n| n.1 == 2).count() as i32;
        let moving = plan.actions.len() as i32;
        prop_assert!(moving == 0 || updated_before + moving <= (nodes.len() as i32 - partition).max(0));
    }

    #[test]
    fn with_surge_at_most_max_surge_new_pods_wait_beside_available_old_ones(
        nodes in prop::collection::vec((Just(0u8), Just(1u8), Just(true), any::<bool>()), 1..12),
        max_surge in 1i32..5,
    ) {
        let mut f = fixture(&nodes);
        f.max_surge(max_surge);
        let plan = super::plan(&f.world());
        let is_create = |a: &&Action| matches!(a, Action::Create { .. });
        let creates = plan.actions.iter().filter(is_create).count();
        prop_assert_eq!(creates, (max_surge as usize).min(nodes.len()));
        let only_creates = plan.actions.iter().all(|a| matches!(a, Action::Create { .. }));
        prop_assert!(only_creates);
    }
}
