//! Properties of the plan: never more than one Pod per node, never beyond parallelism,
//! completion only when every desired node has a finished Pod.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::BroadcastJobPhase;
use kruise_workload::Action;
use kruise_workload::testing::now;
use proptest::prelude::*;

use super::tests::{job, node, pod, tainted};
use super::*;

fn phase(i: u8) -> &'static str {
    ["", "Running", "Succeeded", "Failed"][usize::from(i % 4)]
}

proptest! {
    #[test]
    fn creations_respect_nodes_and_parallelism(
        nodes_n in 0usize..12,
        tainted_mask in any::<u16>(),
        pods_mask in any::<u16>(),
        phases in proptest::collection::vec(0u8..3, 12),
        par in 0i32..15,
        percent in any::<bool>(),
    ) {
        let j = job(|s| {
            s.parallelism = Some(if percent { IntOrString::String(format!("{}%", par * 7)) } else { IntOrString::Int(par) });
            s.failure_policy.type_ = Some(kruise_api::apps_v1alpha1::FailurePolicyType::Continue);
        });
        let nodes: Vec<_> = (0..nodes_n)
            .map(|i| if tainted_mask & (1 << i) != 0 { tainted(&format!("n{i}"), "x") } else { node(&format!("n{i}")) })
            .collect();
        let pods: Vec<_> = (0..nodes_n)
            .filter(|i| pods_mask & (1 << i) != 0 && tainted_mask & (1 << i) == 0)
            .map(|i| pod(&j, &format!("n{i}"), phase(phases[i])))
            .collect();
        let out = plan(&World {
            job: &j,
            pods: pods.iter().collect(),
            nodes: nodes.iter().collect(),
            now: now(),
        }, &mut (0..).map(|i| format!("x{i}")));
        let status = out.status.clone().unwrap();
        let eligible = (0..nodes_n).filter(|i| tainted_mask & (1 << i) == 0).count();
        prop_assert_eq!(status.desired as usize, eligible);
        let created: Vec<String> = out.plan.actions.iter().filter_map(|a| match a {
            Action::Create { pod, .. } => nodes::assigned_node(pod).map(str::to_string),
            _ => None,
        }).collect();
        // Never on a node that has a Pod or does not fit.
        for n in &created {
            let i: usize = n[1..].parse().unwrap();
            prop_assert!(tainted_mask & (1 << i) == 0);
            prop_assert!(pods_mask & (1 << i) == 0);
        }
        let limit = parallelism(&j, status.desired);
        let active_before = pods.iter().filter(|p| pod_state(p, 0) == PodState::Active).count() as i32;
        prop_assert!(created.len() as i32 <= (limit - active_before).max(0));
        if out.status.as_ref().unwrap().phase == Some(BroadcastJobPhase::Completed) {
            prop_assert!(eligible > 0);
            prop_assert_eq!(active_before, 0);
            prop_assert_eq!(pods.len(), eligible);
        }
    }

    #[test]
    fn to_create_is_bounded(par in -5i32..50, active in 0i32..50, waiting in 0usize..50) {
        let n = to_create(par, active, waiting);
        prop_assert!(n <= waiting);
        prop_assert!(n as i32 <= (par - active).max(0));
    }

    #[test]
    fn deadline_requeue_lands_on_the_deadline(seconds in 1i64..10_000, elapsed in 0i64..20_000) {
        let start = now();
        let at = start + jiff::SignedDuration::from_secs(elapsed);
        match deadline_left(start, seconds, at) {
            Some(left) => {
                prop_assert!(elapsed < seconds);
                prop_assert_eq!(left.as_secs() as i64, seconds - elapsed);
            }
            None => prop_assert!(elapsed >= seconds),
        }
    }
}
