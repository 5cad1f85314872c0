//! The DaemonSet's status (upstream `updateDaemonSetStatus`) from its nodes and Pods.

use kruise_api::apps_v1alpha1::DaemonSetStatus;
use kruise_ordering::predicates;

use super::manage::oldest_first;
use super::{Layout, World, is_available};

/// The new status. `previous` supplies the conditions.
pub fn compute_status(
    world: &World,
    layout: &Layout,
    previous: &DaemonSetStatus,
    collision_count: Option<i32>,
) -> DaemonSetStatus {
    let mut s = DaemonSetStatus {
        observed_generation: world.ds.metadata.generation.unwrap_or_default(),
        collision_count,
        conditions: previous.conditions.clone(),
        daemon_set_hash: world.hash().to_string(),
        ..Default::default()
    };
    for node in &layout.nodes {
        let scheduled = !node.pods.is_empty();
        if !node.eligibility.should_run {
            s.number_misscheduled += i32::from(scheduled);
            continue;
        }
        s.desired_number_scheduled += 1;
        let Some(oldest) = node.pods.iter().copied().min_by(|a, b| oldest_first(a, b)) else {
            continue;
        };
        s.current_number_scheduled += 1;
        s.number_ready += i32::from(predicates::is_ready(oldest));
        s.number_available += i32::from(is_available(world, oldest));
        s.updated_number_scheduled += i32::from(world.is_updated(oldest));
    }
    s.number_unavailable = (s.desired_number_scheduled - s.number_available).max(0);
    s
}
