//! The status of a ResourceDistribution (upstream's `calculateNewStatus` and `setCondition`,
//! openkruise/kruise v1.9.0 pkg/controller/resourcedistribution/utils.go): `desired`, `succeeded`,
//! `failed` and always the six conditions, True with the namespaces that failed that way or False
//! with reason `Succeeded`; a condition's lastTransitionTime moves only when its status does.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{ResourceDistributionCondition, ResourceDistributionStatus};
use kruise_api::keys;

/// Namespaces that failed, by condition type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Failures(BTreeMap<&'static str, BTreeSet<String>>);

impl Failures {
    pub fn add(&mut self, condition: &'static str, namespace: impl Into<String>) {
        self.0
            .entry(condition)
            .or_default()
            .insert(namespace.into());
    }

    pub fn of(&self, condition: &str) -> impl Iterator<Item = &str> {
        self.0
            .get(condition)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Failures worth a retry: reading, creating, updating or deleting a copy. A conflict or a
    /// missing namespace changes only when something else changes, which triggers a reconcile
    /// anyway (see [`crate::run`]).
    pub fn retryable(&self) -> Vec<(&'static str, usize)> {
        [
            keys::RD_CONDITION_GET_RESOURCE_FAILED,
            keys::RD_CONDITION_CREATE_RESOURCE_FAILED,
            keys::RD_CONDITION_UPDATE_RESOURCE_FAILED,
            keys::RD_CONDITION_DELETE_RESOURCE_FAILED,
        ]
        .into_iter()
        .filter_map(|c| self.0.get(c).map(|s| (c, s.len())))
        .filter(|(_, n)| *n > 0)
        .collect()
    }

    /// Every namespace that failed in some way.
    pub fn namespaces(&self) -> BTreeSet<&str> {
        self.0.values().flatten().map(String::as_str).collect()
    }
}

/// The status for `matched` namespaces and their `failures`, keeping the transition
/// times of conditions whose status did not change.
pub fn compute_status(
    old: Option<&ResourceDistributionStatus>,
    generation: i64,
    matched: &BTreeSet<String>,
    failures: &Failures,
    now: &Time,
) -> ResourceDistributionStatus {
    let failed_namespaces = failures.namespaces();
    let failed = matched
        .iter()
        .filter(|ns| failed_namespaces.contains(ns.as_str()))
        .count();
    let desired = i32::try_from(matched.len()).unwrap_or(i32::MAX);
    let failed = i32::try_from(failed).unwrap_or(i32::MAX);
    let conditions = keys::RD_CONDITION_TYPES
        .iter()
        .map(|&type_| {
            let namespaces: Vec<String> = failures.of(type_).map(str::to_string).collect();
            let status = if namespaces.is_empty() {
                "False"
            } else {
                "True"
            };
            let previous = old
                .into_iter()
                .flat_map(|s| s.conditions.iter())
                .find(|c| c.type_ == type_);
            let last_transition_time = match previous {
                Some(p) if p.status == status && p.last_transition_time.is_some() => {
                    p.last_transition_time.clone()
                }
                _ => Some(now.clone()),
            };
            ResourceDistributionCondition {
                type_: type_.to_string(),
                status: status.to_string(),
                last_transition_time,
                reason: if namespaces.is_empty() {
                    keys::RD_REASON_SUCCEEDED.to_string()
                } else {
                    String::new()
                },
                failed_namespaces: namespaces,
            }
        })
        .collect();
    ResourceDistributionStatus {
        desired,
        succeeded: desired - failed,
        failed,
        observed_generation: generation,
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn counts_and_six_conditions() {
        let mut failures = Failures::default();
        failures.add(keys::RD_CONDITION_CONFLICT_OCCURRED, "ns-3");
        let now = at("2026-01-01T00:00:00Z");
        let s = compute_status(None, 3, &set(&["ns-1", "ns-2", "ns-3"]), &failures, &now);
        assert_eq!((s.desired, s.succeeded, s.failed), (3, 2, 1));
        assert_eq!(s.observed_generation, 3);
        let types: Vec<_> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, keys::RD_CONDITION_TYPES);
        let conflict = &s.conditions[4];
        assert_eq!(conflict.status, "True");
        assert_eq!(conflict.failed_namespaces, ["ns-3"]);
        let missing = &s.conditions[5];
        assert_eq!(
            (missing.status.as_str(), missing.reason.as_str()),
            ("False", "Succeeded")
        );
    }

    #[test]
    fn a_delete_failure_in_an_unmatched_namespace_is_reported_but_not_counted() {
        let mut failures = Failures::default();
        failures.add(keys::RD_CONDITION_DELETE_RESOURCE_FAILED, "gone");
        let s = compute_status(
            None,
            1,
            &set(&["a"]),
            &failures,
            &at("2026-01-01T00:00:00Z"),
        );
        assert_eq!((s.desired, s.succeeded, s.failed), (1, 1, 0));
        assert_eq!(s.conditions[3].failed_namespaces, ["gone"]);
        assert_eq!(
            failures.retryable(),
            [(keys::RD_CONDITION_DELETE_RESOURCE_FAILED, 1)]
        );
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let t0 = at("2026-01-01T00:00:00Z");
        let t1 = at("2026-01-01T00:05:00Z");
        let matched = set(&["a", "b"]);
        let first = compute_status(None, 1, &matched, &Failures::default(), &t0);
        // Same outcome later: identical status, so no write is needed.
        let again = compute_status(Some(&first), 1, &matched, &Failures::default(), &t1);
        assert_eq!(first, again);
        let mut failures = Failures::default();
        failures.add(keys::RD_CONDITION_NAMESPACE_NOT_EXISTS, "b");
        let changed = compute_status(Some(&first), 1, &matched, &failures, &t1);
        assert_eq!(changed.conditions[5].last_transition_time, Some(t1.clone()));
        assert_eq!(changed.conditions[4].last_transition_time, Some(t0));
        assert!(failures.retryable().is_empty());
    }
}
