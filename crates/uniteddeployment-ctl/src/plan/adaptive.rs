//! The Adaptive schedule strategy (openkruise/kruise v1.9.0
//! pkg/controller/uniteddeployment/allocator.go `adaptiveAllocator`, and
//! `calculateSubsetsStatusForDefaultAdaptiveStrategy` in uniteddeployment_controller.go): which
//! subsets are unschedulable this round, and the `Schedulable` condition each subset reports. Pure.
//!
//! A subset with a Pod the scheduler has found no node for during
//! `rescheduleCriticalSeconds` (default 30) turns `Schedulable=False` (reason
//! `reschedule`); the allocation then holds it at its ready replicas, so its pending
//! Pods are scaled away and their replicas go to the next subsets. After
//! `unschedulableDuration` (default 300) it turns True again (reason `recover`) and takes
//! replicas as before; a Pod still stuck there marks it again at once, so a subset whose
//! pending Pods persist never recovers. Subsets without a workload yet are schedulable.
//! With `reserveUnschedulablePods` the pending Pods are kept instead: see [`super::reserve`].

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{UnitedDeployment, UnitedDeploymentSubsetCondition};
use kruise_api::keys;
use kruise_ordering::predicates;

use super::Observed;
use super::condition::set;
pub use super::condition::{REASON_RECOVER, REASON_RESCHEDULE};
use super::reserve::{ReservedLabel, SubsetReservation};

/// Default `rescheduleCriticalSeconds`.
pub const DEFAULT_RESCHEDULE_CRITICAL_SECONDS: i32 = 30;
/// Default `unschedulableDuration`.
pub const DEFAULT_UNSCHEDULABLE_SECONDS: i32 = 300;

/// What the Adaptive strategy decided this round.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedulability {
    /// Subsets held at their ready replicas this round.
    pub unschedulable: BTreeSet<String>,
    /// The `Schedulable` condition of each subset that has one.
    pub conditions: BTreeMap<String, UnitedDeploymentSubsetCondition>,
    /// When to look again: a pending Pod reaching the critical time, or a subset's
    /// recovery (with reservation: a reserved Pod Ready long enough to be released).
    pub next_check: Option<Timestamp>,
    /// With `reserveUnschedulablePods`: each subset with a workload, its reserved Pods.
    pub reservations: BTreeMap<String, SubsetReservation>,
    /// With `reserveUnschedulablePods`: the Pods whose reserved label is written.
    pub labels: Vec<ReservedLabel>,
}

fn seconds(value: Option<i32>, default: i32) -> SignedDuration {
    SignedDuration::from_secs(i64::from(value.unwrap_or(default).max(0)))
}

/// The subsets' schedulability for an Adaptive UD (empty for any other strategy).
/// `kept` holds each subset's workload, `pods` the UD's Pods.
pub fn schedulability(
    ud: &UnitedDeployment,
    kept: &BTreeMap<String, &Observed>,
    pods: &[&Pod],
    now: Timestamp,
) -> Schedulability {
    let strategy = &ud.spec.topology.schedule_strategy;
    let mut out = Schedulability::default();
    if !strategy.is_adaptive() {
        return out;
    }
    let adaptive = strategy.adaptive.as_ref();
    let critical = seconds(
        adaptive.and_then(|a| a.reschedule_critical_seconds),
        DEFAULT_RESCHEDULE_CRITICAL_SECONDS,
    );
    let duration = seconds(
        adaptive.and_then(|a| a.unschedulable_duration),
        DEFAULT_UNSCHEDULABLE_SECONDS,
    );
    let mut soonest = |t: Timestamp| {
        out.next_check = Some(out.next_check.map_or(t, |n: Timestamp| n.min(t)));
    };
    let previous = ud.status.as_ref().map(|s| &s.subset_statuses);
    for subset in &ud.spec.topology.subsets {
        let name = &subset.name;
        let mut condition = previous
            .and_then(|statuses| statuses.iter().find(|s| &s.name == name))
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == keys::SUBSET_CONDITION_SCHEDULABLE)
            })
            .cloned();
        if !kept.contains_key(name) {
            // A subset without a workload has nothing pending: schedulable.
            if let Some(c) = condition {
                out.conditions.insert(name.clone(), c);
            }
            continue;
        }
        let mut unschedulable = false;
        if let Some(c) = condition.as_ref().filter(|c| c.status == "False") {
            let since = c.last_transition_time.as_ref().map_or(now, |t| t.0);
            let recover_at = since + duration;
            if now < recover_at {
                unschedulable = true;
                soonest(recover_at);
            } else {
                condition = Some(set(
                    condition,
                    "True",
                    REASON_RECOVER,
                    format!(
                        "unschedulable subset recovered after {} seconds",
                        duration.as_secs()
                    ),
                    now,
                ));
            }
        }
        let mut timed_out = 0;
        for pod in pods
            .iter()
            .filter(|p| predicates::label(p, keys::UD_SUBSET_NAME) == Some(name.as_str()))
        {
            let Some(since) = predicates::unschedulable_since(pod) else {
                continue;
            };
            let due = since + critical;
            if due <= now {
                timed_out += 1;
            } else {
                soonest(due);
            }
        }
        if timed_out > 0 {
            unschedulable = true;
            let c = set(
                condition,
                "False",
                REASON_RESCHEDULE,
                "timeout pending pods found".to_string(),
                now,
            );
            if let Some(t) = &c.last_transition_time {
                soonest(t.0 + duration);
            }
            condition = Some(c);
        }
        if unschedulable {
            out.unschedulable.insert(name.clone());
        }
        if let Some(c) = condition {
            out.conditions.insert(name.clone(), c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use kruise_api::apps_v1alpha1::UnitedDeploymentSubsetStatus;
    use serde_json::json;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_000_000 + secs).unwrap()
    }

    fn ud(conditions: &[(&str, &str, &str, i64)]) -> UnitedDeployment {
        let mut ud: UnitedDeployment = serde_json::from_value(json!({
            "metadata": {"name": "ud", "namespace": "ns"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "a"}},
                "template": {"cloneSetTemplate": {"metadata": {"labels": {"app": "a"}}, "spec": {
                    "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
                }}},
                "topology": {
                    "subsets": [{"name": "a", "maxReplicas": 2}, {"name": "b"}],
                    "scheduleStrategy": {"type": "Adaptive", "adaptive": {
                        "rescheduleCriticalSeconds": 10, "unschedulableDuration": 20}},
                },
            }
        }))
        .unwrap();
        let statuses = conditions
            .iter()
            .map(|(name, status, reason, t)| UnitedDeploymentSubsetStatus {
                name: name.to_string(),
                conditions: vec![UnitedDeploymentSubsetCondition {
                    type_: keys::SUBSET_CONDITION_SCHEDULABLE.into(),
                    status: status.to_string(),
                    last_transition_time: Some(Time(at(*t))),
                    reason: reason.to_string(),
                    message: String::new(),
                }],
                ..Default::default()
            })
            .collect();
        ud.status = Some(kruise_api::apps_v1alpha1::UnitedDeploymentStatus {
            subset_statuses: statuses,
            ..Default::default()
        });
        ud
    }

    fn observed(subset: &str) -> Observed {
        Observed {
            kind: super::super::WorkloadKind::CloneSet,
            meta: ObjectMeta {
                name: Some(format!("ud-{subset}")),
                labels: Some([(keys::UD_SUBSET_NAME.to_string(), subset.to_string())].into()),
                ..Default::default()
            },
            replicas: 2,
            partition: None,
            ready_replicas: 0,
        }
    }

    fn pending(subset: &str, since: i64) -> Pod {
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some(format!("{subset}-p")),
                labels: Some([(keys::UD_SUBSET_NAME.to_string(), subset.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                last_transition_time: Some(Time(at(since))),
                ..Default::default()
            }]),
            ..Default::default()
        });
        pod
    }

    fn kept(w: &[Observed]) -> BTreeMap<String, &Observed> {
        w.iter()
            .map(|o| (o.subset().unwrap().to_string(), o))
            .collect()
    }

    #[test]
    fn a_pod_pending_past_the_critical_time_marks_its_subset() {
        let ud = ud(&[]);
        let w = [observed("a"), observed("b")];
        let pod = pending("a", 0);
        let early = schedulability(&ud, &kept(&w), &[&pod], at(5));
        assert!(early.unschedulable.is_empty());
        assert_eq!(early.next_check, Some(at(10)));
        let late = schedulability(&ud, &kept(&w), &[&pod], at(11));
        assert_eq!(late.unschedulable, BTreeSet::from(["a".to_string()]));
        let c = &late.conditions["a"];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", REASON_RESCHEDULE)
        );
        assert_eq!(c.last_transition_time, Some(Time(at(11))));
        assert_eq!(late.next_check, Some(at(31)));
    }

    #[test]
    fn an_unschedulable_subset_recovers_after_the_duration() {
        let ud = ud(&[("a", "False", REASON_RESCHEDULE, 0)]);
        let w = [observed("a"), observed("b")];
        let held = schedulability(&ud, &kept(&w), &[], at(19));
        assert_eq!(held.unschedulable, BTreeSet::from(["a".to_string()]));
        assert_eq!(held.next_check, Some(at(20)));
        let back = schedulability(&ud, &kept(&w), &[], at(20));
        assert!(back.unschedulable.is_empty());
        let c = &back.conditions["a"];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", REASON_RECOVER)
        );
    }

    #[test]
    fn a_pod_still_stuck_at_recovery_marks_the_subset_again() {
        let ud = ud(&[("a", "False", REASON_RESCHEDULE, 0)]);
        let w = [observed("a"), observed("b")];
        let pod = pending("a", 0);
        let got = schedulability(&ud, &kept(&w), &[&pod], at(25));
        assert_eq!(got.unschedulable, BTreeSet::from(["a".to_string()]));
        let c = &got.conditions["a"];
        assert_eq!(c.status, "False");
        assert_eq!(c.last_transition_time, Some(Time(at(25))));
    }

    #[test]
    fn fixed_strategy_and_subsets_without_workload_are_schedulable() {
        let mut fixed = ud(&[]);
        fixed.spec.topology.schedule_strategy.type_ = None;
        let w = [observed("a")];
        let pod = pending("a", 0);
        assert_eq!(
            schedulability(&fixed, &kept(&w), &[&pod], at(100)),
            Schedulability::default()
        );
        let adaptive = ud(&[]);
        let stray = pending("b", 0);
        let got = schedulability(&adaptive, &kept(&w), &[&stray], at(100));
        assert!(got.unschedulable.is_empty());
    }
}
