//! The Adaptive strategy (openkruise/kruise v1.9.0 pkg/controller/workloadspread/reschedule.go): a Pod that cannot be scheduled in its subset for
//! `rescheduleCriticalSeconds` marks the subset `Schedulable=False` and is deleted, so
//! its workload re-creates it and the webhook puts it in a later subset; the subset
//! takes Pods again 300 s later. The last subset is always schedulable. Pure.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{WorkloadSpreadSubsetCondition, WorkloadSpreadSubsetStatus};
use kruise_api::keys;
use kruise_ordering::predicates;

/// How long a subset stays unschedulable.
pub const RECOVER_AFTER: SignedDuration = SignedDuration::from_secs(300);
/// Reason of the False condition.
pub const REASON_UNSCHEDULABLE: &str = "PodUnschedulable";

/// The Pods stuck for `critical` or longer in any subset but the last, with their
/// subset, and when the next Pod still waiting will be.
pub fn stuck<'a>(
    members: &[Vec<&'a Pod>],
    critical: SignedDuration,
    now: Timestamp,
) -> (Vec<(usize, &'a Pod)>, Option<Timestamp>) {
    let mut out = Vec::new();
    let mut next: Option<Timestamp> = None;
    let last = members.len().saturating_sub(1);
    for (i, pods) in members.iter().enumerate().take(last) {
        for pod in pods {
            let Some(since) = predicates::unschedulable_since(pod) else {
                continue;
            };
            let due = since + critical;
            if due <= now {
                out.push((i, *pod));
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
    }
    (out, next)
}

fn condition(
    status: &str,
    reason: &str,
    message: &str,
    at: Timestamp,
) -> WorkloadSpreadSubsetCondition {
    WorkloadSpreadSubsetCondition {
        type_: keys::SUBSET_CONDITION_SCHEDULABLE.to_string(),
        status: status.to_string(),
        last_transition_time: Some(Time(at)),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: None,
    }
}

/// The subsets' conditions after this round.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conditions {
    /// One list per subset, in spec order.
    pub per_subset: Vec<Vec<WorkloadSpreadSubsetCondition>>,
    /// Subsets that became schedulable again (event `RecoverSchedulable`).
    pub recovered: Vec<usize>,
    /// When the next unschedulable subset recovers.
    pub next: Option<Timestamp>,
}

/// The `Schedulable` condition of each subset. `previous` is aligned with the subsets;
/// `stuck` holds the subsets where a Pod was found stuck this round. Without the
/// Adaptive strategy subsets carry no condition (a subset left False by an earlier
/// Adaptive spec takes Pods again).
pub fn conditions(
    previous: &[WorkloadSpreadSubsetStatus],
    stuck: &[usize],
    adaptive: bool,
    now: Timestamp,
) -> Conditions {
    let n = previous.len();
    let mut out = Conditions {
        per_subset: vec![Vec::new(); n],
        ..Default::default()
    };
    if !adaptive {
        return out;
    }
    for (i, status) in previous.iter().enumerate() {
        let prev = status
            .conditions
            .iter()
            .find(|c| c.type_ == keys::SUBSET_CONDITION_SCHEDULABLE);
        let keep_or = |s: &str, reason: &str, message: &str| match prev {
            Some(c) if c.status == s => c.clone(),
            _ => condition(s, reason, message, now),
        };
        let c = if i + 1 == n {
            keep_or("True", "", "")
        } else if stuck.contains(&i) {
            keep_or(
                "False",
                REASON_UNSCHEDULABLE,
                "a Pod of this subset could not be scheduled within rescheduleCriticalSeconds",
            )
        } else {
            match prev {
                Some(c) if c.status == "False" => {
                    let since = c.last_transition_time.as_ref().map_or(now, |t| t.0);
                    let due = since + RECOVER_AFTER;
                    if due <= now {
                        out.recovered.push(i);
                        condition("True", "", "", now)
                    } else {
                        out.next = Some(out.next.map_or(due, |n| n.min(due)));
                        c.clone()
                    }
                }
                _ => keep_or("True", "", ""),
            }
        };
        out.per_subset[i] = vec![c];
    }
    out
}
