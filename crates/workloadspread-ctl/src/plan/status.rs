//! The controller's subset statuses (openkruise/kruise v1.9.0 pkg/controller/workloadspread/workloadspread_controller.go): Pods counted per subset, the records
//! the webhook left (`creatingPods` kept 30 s until the Pod is seen, `deletingPods` 15 s
//! until the Pod is gone), and the room left. Pure.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{WorkloadSpreadSubsetCondition, WorkloadSpreadSubsetStatus};
use kruise_ordering::predicates;

/// How long a creation record waits for its Pod.
pub const CREATE_RECORD_TTL: SignedDuration = SignedDuration::from_secs(30);
/// How long a deletion record waits for its Pod to go.
pub const DELETE_RECORD_TTL: SignedDuration = SignedDuration::from_secs(15);

/// A record that expired without the change it announced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expired {
    /// `CreatePodFailed`: (subset, record key).
    Create(String, String),
    /// `DeletePodFailed`: (subset, Pod).
    Delete(String, String),
}

/// What the statuses of one version are computed from.
pub struct Counting<'a> {
    pub names: &'a [String],
    /// Each subset's cap, resolved.
    pub maxes: &'a [Option<i32>],
    /// The stored statuses, aligned with the subsets (their records are read).
    pub previous: &'a [WorkloadSpreadSubsetStatus],
    /// Active Pods per subset.
    pub members: &'a [Vec<&'a Pod>],
    /// Names and generated ids of every Pod of the workload the cache shows: a creation
    /// record whose Pod is seen is done.
    pub seen: &'a BTreeSet<String>,
    /// Names of the workload's active Pods: a deletion record whose Pod is not among
    /// them is done.
    pub active: &'a BTreeSet<String>,
    pub conditions: &'a [Vec<WorkloadSpreadSubsetCondition>],
    pub now: Timestamp,
}

/// The statuses, the expired records and when the next record expires.
pub fn subset_statuses(
    c: &Counting,
) -> (
    Vec<WorkloadSpreadSubsetStatus>,
    Vec<Expired>,
    Option<Timestamp>,
) {
    let mut expired = Vec::new();
    let mut next: Option<Timestamp> = None;
    let mut soonest = |t: Timestamp| next = Some(next.map_or(t, |n: Timestamp| n.min(t)));
    let mut out = Vec::with_capacity(c.names.len());
    for (i, name) in c.names.iter().enumerate() {
        let prev = c.previous.get(i);
        let mut creating = BTreeMap::new();
        for (key, at) in prev.map(|p| &p.creating_pods).into_iter().flatten() {
            if c.seen.contains(key) {
                continue;
            }
            let due = at.0 + CREATE_RECORD_TTL;
            if due <= c.now {
                expired.push(Expired::Create(name.clone(), key.clone()));
            } else {
                soonest(due);
                creating.insert(key.clone(), at.clone());
            }
        }
        let mut deleting = BTreeMap::new();
        for (pod, at) in prev.map(|p| &p.deleting_pods).into_iter().flatten() {
            if !c.active.contains(pod) {
                continue;
            }
            let due = at.0 + DELETE_RECORD_TTL;
            if due <= c.now {
                expired.push(Expired::Delete(name.clone(), pod.clone()));
            } else {
                soonest(due);
                deleting.insert(pod.clone(), at.clone());
            }
        }
        let replicas = c.members.get(i).map_or(0, Vec::len) as i32;
        let missing = match c.maxes.get(i).copied().flatten() {
            None => -1,
            Some(max) => (max - replicas - creating.len() as i32 + deleting.len() as i32)
                .clamp(0, max.max(0)),
        };
        out.push(WorkloadSpreadSubsetStatus {
            name: name.clone(),
            replicas,
            conditions: c.conditions.get(i).cloned().unwrap_or_default(),
            missing_replicas: missing,
            creating_pods: creating,
            deleting_pods: deleting,
        });
    }
    (out, expired, next)
}

/// No Pod and no record: a version that can be dropped.
pub fn is_empty(statuses: &[WorkloadSpreadSubsetStatus]) -> bool {
    statuses
        .iter()
        .all(|s| s.replicas == 0 && s.creating_pods.is_empty() && s.deleting_pods.is_empty())
}

/// The keys a creation record of `pod` may have: its name and the generated id in its
/// annotation.
pub fn seen_keys(pod: &Pod, matched_uid: Option<&str>) -> impl Iterator<Item = String> {
    std::iter::once(predicates::name(pod).to_string())
        .chain(matched_uid.filter(|u| !u.is_empty()).map(str::to_string))
}

/// A Time for a status.
pub fn time(t: Timestamp) -> Time {
    Time(t)
}
