//! `controller.kubernetes.io/pod-deletion-cost` per subset (openkruise/kruise v1.9.0 pkg/controller/workloadspread/update_pod_deletion_cost.go), so the
//! workload's own scale-in removes Pods from the least-preferred subsets first. Pure.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_ordering::predicates;

/// Sorts Pods so the one a scale-in should lose first comes first (Kubernetes'
/// `ActivePods` order): unscheduled, Pending before Unknown before Running, not ready,
/// ready for a shorter time, more restarts, newer; then by name so the order is total.
pub fn sort_active(pods: &mut [&Pod]) {
    pods.sort_by_cached_key(|p| {
        (
            predicates::is_scheduled(p),
            predicates::phase_rank(p),
            predicates::is_ready(p),
            Reverse(predicates::ready_since(p)),
            Reverse(predicates::restart_count(p)),
            Reverse(predicates::created_at(p)),
            predicates::name(p).to_string(),
        )
    });
}

/// The cost of every Pod of one version, by name. With `n` subsets and subset `i`
/// (reversed for an old version, so that its Pods leave the preferred subsets first):
/// Pods within the cap get `100·(n−i)`, the surplus beyond it (the first in
/// [`sort_active`] order) `−100·(i+1)`, Pods in no subset `−100·(n+1)`.
pub fn deletion_costs(
    members: &[Vec<&Pod>],
    fake: &[&Pod],
    maxes: &[Option<i32>],
    old_version: bool,
) -> BTreeMap<String, i32> {
    let n = members.len() as i32;
    let mut costs = BTreeMap::new();
    for (i, pods) in members.iter().enumerate() {
        let rank = if old_version {
            n - 1 - i as i32
        } else {
            i as i32
        };
        let mut pods = pods.clone();
        sort_active(&mut pods);
        let surplus = match maxes.get(i).copied().flatten() {
            Some(max) => pods.len().saturating_sub(usize::try_from(max).unwrap_or(0)),
            None => 0,
        };
        for (j, pod) in pods.iter().enumerate() {
            let cost = if j < surplus {
                -100 * (rank + 1)
            } else {
                100 * (n - rank)
            };
            costs.insert(predicates::name(pod).to_string(), cost);
        }
    }
    for pod in fake {
        costs.insert(predicates::name(pod).to_string(), -100 * (n + 1));
    }
    costs
}

/// The annotation to write on `pod` for `cost`: `None` when it already says so. A
/// missing annotation counts as 0, and "0" is never written where there is none.
pub fn cost_change(pod: &Pod, cost: i32) -> Option<String> {
    let current = predicates::annotation(pod, kruise_api::keys::POD_DELETION_COST);
    match current {
        None if cost == 0 => None,
        Some(v) if v == cost.to_string() => None,
        _ => Some(cost.to_string()),
    }
}
