//! The Adaptive strategy with `reserveUnschedulablePods` (OpenKruise's reservation
//! mode): which Pods are reserved this round, the label each must carry, and the
//! `Schedulable` condition of each subset. Pure.
//!
//! A Pod is *reserved* when it cannot do its work where it is, and the subset keeps it
//! instead of scaling it away:
//! - a Pod of the update revision the scheduler has found no node for, still pending
//!   `rescheduleCriticalSeconds` (default 30) after its creation;
//! - a Pod of an older revision once the UD's update has lasted that long (the update
//!   started when `UnitedDeploymentUpdated` turned False);
//! - any Pod created while its subset reports `Schedulable=False` (a subset that has
//!   reserved Pods, a subset just recovered and scaled up, or one added to a UD that
//!   already had subsets): it has to prove itself first.
//!
//! A reserved Pod stays reserved until it runs the update revision and has been Ready
//! for `unschedulableDuration` (default 300). Every Pod of the subsets carries the label
//! `apps.kruise.io/united-deployment-reserved-pod` (`"true"` or `"false"`); a subset with
//! reserved Pods is unschedulable (`Schedulable=False`, reason `reschedule`, "reserved
//! pods found") and the allocation ([`super::allocation::allocate_reserving`]) gives
//! their replicas to the next subsets as temporary replacements, which go once the
//! reserved Pods run. Only subsets with a workload are judged; Pods being deleted are
//! not counted.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::UnitedDeployment;
use kruise_api::keys;
use kruise_ordering::predicates;

use super::condition::{REASON_RESCHEDULE, set};
use super::{Observed, Schedulability};

/// Reason of the `Schedulable=False` condition a subset added to a UD that already had
/// subsets starts with (OpenKruise's wording).
pub const REASON_CREATED: &str = "created";
/// Message of the condition while the subset has reserved Pods.
pub const MESSAGE_RESERVED: &str = "reserved pods found";
/// Message of the condition once it has none.
pub const MESSAGE_NONE_RESERVED: &str = "no reserved pods";
/// Message of the condition of a subset that just recovered and is given more replicas.
pub const MESSAGE_RECOVERED_SCALED_UP: &str = "subset just recovered scaled up";
/// Message of the condition of a subset added to a UD that already had subsets.
pub const MESSAGE_CREATED: &str = "newly-created subsets in reservation strategy";

/// What the reservation decided for one subset that has a workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubsetReservation {
    /// Pods reserved this round.
    pub reserved: i32,
    /// The subset reported `Schedulable=False` before this round.
    pub marked: bool,
    /// Pods of an older revision reserved because the update took too long (they widen
    /// the workload's maxUnavailable so the update can replace them).
    pub update_timeouts: i32,
}

/// A Pod whose reserved label must change (or be set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservedLabel {
    pub pod: String,
    pub reserved: bool,
}

impl ReservedLabel {
    /// The label's value.
    pub fn value(&self) -> &'static str {
        if self.reserved { "true" } else { "false" }
    }
}

/// The Pod's reserved label: `Some(true)` for `"true"`, `Some(false)` for any other
/// value, `None` when it has none.
pub fn reserved_label(pod: &Pod) -> Option<bool> {
    predicates::label(pod, keys::UD_RESERVED_POD).map(|v| v == "true")
}

fn seconds(secs: i32) -> SignedDuration {
    SignedDuration::from_secs(i64::from(secs.max(0)))
}

/// Whether one Pod is reserved now, and when to look at it again.
struct Verdict {
    reserved: bool,
    update_timeout: bool,
    check_at: Option<Timestamp>,
}

struct Clock {
    now: Timestamp,
    /// `rescheduleCriticalSeconds`.
    critical: SignedDuration,
    /// `unschedulableDuration`: how long a reserved Pod must be Ready to be released.
    settle: SignedDuration,
    /// When the update to the current revision started.
    update_started: Timestamp,
}

fn judge(pod: &Pod, marked: bool, revision: &str, clock: &Clock) -> Verdict {
    let label = reserved_label(pod);
    let current = predicates::label(pod, keys::UD_CONTROLLER_REVISION_HASH) == Some(revision);
    if marked && label.is_none() {
        // Created while its subset is on probation.
        return Verdict {
            reserved: true,
            update_timeout: false,
            check_at: None,
        };
    }
    if label == Some(true) {
        // Released once it runs the current revision and has been Ready long enough.
        let ready_since = (current && predicates::is_running_and_ready(pod))
            .then(|| predicates::ready_since(pod))
            .flatten();
        return match ready_since.map(|t| t + clock.settle) {
            Some(at) if at <= clock.now => Verdict {
                reserved: false,
                update_timeout: false,
                check_at: None,
            },
            at => Verdict {
                reserved: true,
                update_timeout: false,
                check_at: at,
            },
        };
    }
    let deadline = if current {
        // Pending without a node since its creation.
        predicates::unschedulable_since(pod)
            .map(|since| predicates::created_at(pod).unwrap_or(since) + clock.critical)
    } else {
        // Not updated yet.
        Some(clock.update_started + clock.critical)
    };
    match deadline {
        Some(at) if at <= clock.now => Verdict {
            reserved: true,
            update_timeout: !current,
            check_at: None,
        },
        at => Verdict {
            reserved: false,
            update_timeout: false,
            check_at: at,
        },
    }
}

/// The subsets' reservations for a UD with `reserveUnschedulablePods` (`kept`: each
/// subset's workload, `pods`: the UD's Pods, `revision`: the update revision).
pub fn schedulability(
    ud: &UnitedDeployment,
    kept: &BTreeMap<String, &Observed>,
    pods: &[&Pod],
    revision: &str,
    now: Timestamp,
) -> Schedulability {
    let strategy = &ud.spec.topology.schedule_strategy;
    let status = ud.status.as_ref();
    let previous = status.map(|s| s.subset_statuses.as_slice()).unwrap_or(&[]);
    let update_started = status
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == keys::UD_CONDITION_UPDATED && c.status == "False")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or(now, |t| t.0);
    let clock = Clock {
        now,
        critical: seconds(strategy.reschedule_critical_seconds()),
        settle: seconds(strategy.unschedulable_duration()),
        update_started,
    };
    let mut out = Schedulability::default();
    let mut soonest = |t: Timestamp| {
        out.next_check = Some(out.next_check.map_or(t, |n: Timestamp| n.min(t)));
    };
    let mut conditions = BTreeMap::new();
    let mut unschedulable = BTreeSet::new();
    let mut reservations = BTreeMap::new();
    let mut labels = Vec::new();
    for subset in &ud.spec.topology.subsets {
        let name = &subset.name;
        let entry = previous.iter().find(|s| &s.name == name);
        let mut condition = entry
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == keys::SUBSET_CONDITION_SCHEDULABLE)
            })
            .cloned();
        if entry.is_none() && !previous.is_empty() {
            condition = Some(set(None, "False", REASON_CREATED, MESSAGE_CREATED, now));
        }
        if !kept.contains_key(name) {
            conditions.extend(condition.map(|c| (name.clone(), c)));
            continue;
        }
        let marked = condition.as_ref().is_some_and(|c| c.status == "False");
        let mut reservation = SubsetReservation {
            marked,
            ..Default::default()
        };
        for pod in pods.iter().filter(|p| {
            predicates::is_active(p) && predicates::label(p, keys::UD_SUBSET_NAME) == Some(name)
        }) {
            let verdict = judge(pod, marked, revision, &clock);
            reservation.reserved += i32::from(verdict.reserved);
            reservation.update_timeouts += i32::from(verdict.update_timeout);
            if let Some(at) = verdict.check_at {
                soonest(at);
            }
            if reserved_label(pod) != Some(verdict.reserved) {
                labels.push(ReservedLabel {
                    pod: predicates::name(pod).to_string(),
                    reserved: verdict.reserved,
                });
            }
        }
        let c = if reservation.reserved > 0 {
            unschedulable.insert(name.clone());
            set(condition, "False", REASON_RESCHEDULE, MESSAGE_RESERVED, now)
        } else {
            set(
                condition,
                "True",
                REASON_RESCHEDULE,
                MESSAGE_NONE_RESERVED,
                now,
            )
        };
        conditions.insert(name.clone(), c);
        reservations.insert(name.clone(), reservation);
    }
    out.unschedulable = unschedulable;
    out.conditions = conditions;
    out.reservations = reservations;
    out.labels = labels;
    out
}

/// After the allocation: a subset that just recovered (no reserved Pods, but
/// `Schedulable=False` before this round) and is given more replicas than it has is
/// marked `Schedulable=False` again, so the Pods it is about to create are reserved until
/// they run and the replacements elsewhere are not scaled away before.
pub fn after_allocation(
    schedulability: &mut Schedulability,
    kept: &BTreeMap<String, &Observed>,
    allocation: &BTreeMap<String, i32>,
    now: Timestamp,
) {
    for (name, reservation) in &schedulability.reservations {
        let Some(workload) = kept.get(name) else {
            continue;
        };
        let grows = allocation.get(name).is_some_and(|&r| r > workload.replicas);
        if reservation.reserved == 0 && reservation.marked && grows {
            let c = schedulability.conditions.remove(name);
            schedulability.conditions.insert(
                name.clone(),
                set(
                    c,
                    "False",
                    REASON_RESCHEDULE,
                    MESSAGE_RECOVERED_SCALED_UP,
                    now,
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests;
