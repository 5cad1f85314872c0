//! Subset arithmetic and the webhook's decisions (openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go): a subset's cap
//! against the workload's replicas, the statuses a Pod's version is counted in, which
//! subset a new Pod goes to and the status that records it, and the record of a
//! deletion. Pure: the caller brings the newest WorkloadSpread, the time and any
//! generated id, and writes the returned status with its resourceVersion.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{
    WorkloadSpread, WorkloadSpreadStatus, WorkloadSpreadSubset, WorkloadSpreadSubsetStatus,
};
use kruise_api::intstr::{Amount, Rounding};
use kruise_api::keys;

use super::target::TargetKind;

/// The subset's cap against the workload's `replicas`: an integer as is, a percentage
/// rounded up; `None` when unset (no cap). A value that is neither (admission refuses
/// it) caps nothing: the controller never acts on a spec it cannot read.
pub fn max_replicas(subset: &WorkloadSpreadSubset, replicas: i32) -> Option<i32> {
    let amount = Amount::parse(subset.max_replicas.as_ref()?).ok()?;
    Some(amount.scale(replicas.max(0), Rounding::Up).max(0))
}

/// A subset's status before any Pod: nothing in it, room for its whole cap.
pub fn initial_status(subset: &WorkloadSpreadSubset, replicas: i32) -> WorkloadSpreadSubsetStatus {
    WorkloadSpreadSubsetStatus {
        name: subset.name.clone(),
        missing_replicas: max_replicas(subset, replicas).unwrap_or(-1),
        ..Default::default()
    }
}

/// The subset's `Schedulable` condition is False (Adaptive moved Pods away from it).
pub fn is_unschedulable(status: &WorkloadSpreadSubsetStatus) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == keys::SUBSET_CONDITION_SCHEDULABLE && c.status == "False")
}

/// One status per spec subset, in spec order: the stored one of that name, or the
/// initial one for a subset the controller has not reported yet (a new WorkloadSpread,
/// a subset just added).
pub fn aligned(
    subsets: &[WorkloadSpreadSubset],
    stored: &[WorkloadSpreadSubsetStatus],
    replicas: i32,
) -> Vec<WorkloadSpreadSubsetStatus> {
    subsets
        .iter()
        .map(|s| {
            stored
                .iter()
                .find(|st| st.name == s.name)
                .cloned()
                .unwrap_or_else(|| initial_status(s, replicas))
        })
        .collect()
}

/// The stored statuses a Pod of `version` is counted in: its version's for a versioned
/// workload, the overall ones otherwise.
fn stored_for<'a>(
    status: &'a WorkloadSpreadStatus,
    kind: TargetKind,
    version: &str,
) -> &'a [WorkloadSpreadSubsetStatus] {
    if kind.versioned() {
        status
            .versioned_subset_statuses
            .get(version)
            .map_or(&[], Vec::as_slice)
    } else {
        &status.subset_statuses
    }
}

/// `status` with the statuses of `version` replaced by `statuses`.
fn store_for(
    status: &mut WorkloadSpreadStatus,
    kind: TargetKind,
    version: &str,
    statuses: Vec<WorkloadSpreadSubsetStatus>,
) {
    if kind.versioned() {
        status
            .versioned_subset_statuses
            .insert(version.to_string(), statuses);
    } else {
        status.subset_statuses = statuses;
    }
}

/// Where a new Pod goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// Index of the subset in the spec.
    pub subset: usize,
    /// The key recorded in `creatingPods` when it is not the Pod's name (a Pod created
    /// with only `generateName`): goes into the annotation's `uid`.
    pub generated_uid: Option<String>,
    /// The status to write before admitting the Pod; `None` when nothing is recorded
    /// (the subset has no cap, or the Pod is recorded already).
    pub status: Option<WorkloadSpreadStatus>,
}

/// What the webhook knows of the Pod being created.
#[derive(Clone, Debug)]
pub struct NewPod<'a> {
    /// Empty when the Pod has only `generateName`.
    pub name: &'a str,
    pub version: &'a str,
    /// The key to record the Pod under when it has no name.
    pub generated_uid: &'a str,
}

/// Every cap reads as an integer or a percentage (admission guarantees it; a spec that
/// got in while the webhook was down may not).
pub fn caps_understood(subsets: &[WorkloadSpreadSubset]) -> bool {
    subsets.iter().all(|s| {
        s.max_replicas
            .as_ref()
            .is_none_or(|m| Amount::parse(m).is_ok())
    })
}

/// As in openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go: the subset of a new Pod of a workload with `replicas`, and the status
/// that records it. `None`: no subset has room (or a cap does not read); the Pod is
/// created unchanged.
pub fn place(
    ws: &WorkloadSpread,
    kind: TargetKind,
    replicas: i32,
    pod: &NewPod,
    now: Time,
) -> Option<Placement> {
    let subsets = &ws.spec.subsets;
    if !caps_understood(subsets) {
        return None;
    }
    if let [only] = subsets.as_slice()
        && only.max_replicas.is_none()
    {
        return Some(Placement {
            subset: 0,
            generated_uid: None,
            status: None,
        });
    }
    let current = ws.status.clone().unwrap_or_default();
    if kind.is_statefulset() {
        let statuses = aligned(subsets, &current.subset_statuses, replicas);
        let ordinal = super::target::ordinal(pod.name)?;
        return place_by_ordinal(subsets, &statuses, replicas, ordinal).map(|subset| Placement {
            subset,
            generated_uid: None,
            status: None,
        });
    }
    let mut statuses = aligned(subsets, stored_for(&current, kind, pod.version), replicas);
    if !pod.name.is_empty()
        && let Some(i) = statuses
            .iter()
            .position(|s| s.creating_pods.contains_key(pod.name))
    {
        // Recorded already: a reinvocation, or a retried create of the same Pod.
        return Some(Placement {
            subset: i,
            generated_uid: None,
            status: None,
        });
    }
    let i = statuses.iter().position(|s| {
        !is_unschedulable(s) && (s.missing_replicas > 0 || s.missing_replicas == -1)
    })?;
    if statuses[i].missing_replicas == -1 {
        return Some(Placement {
            subset: i,
            generated_uid: None,
            status: None,
        });
    }
    let (key, generated_uid) = if pod.name.is_empty() {
        (
            pod.generated_uid.to_string(),
            Some(pod.generated_uid.to_string()),
        )
    } else {
        (pod.name.to_string(), None)
    };
    statuses[i].creating_pods.insert(key, now);
    statuses[i].missing_replicas -= 1;
    let mut next = current;
    store_for(&mut next, kind, pod.version, statuses);
    Some(Placement {
        subset: i,
        generated_uid,
        status: Some(next),
    })
}

/// A StatefulSet Pod's subset by its ordinal against the running sum of the subsets'
/// caps, skipping unschedulable subsets; a subset without a cap takes every ordinal
/// from there on.
pub fn place_by_ordinal(
    subsets: &[WorkloadSpreadSubset],
    statuses: &[WorkloadSpreadSubsetStatus],
    replicas: i32,
    ordinal: i32,
) -> Option<usize> {
    let mut end: i64 = 0;
    for (i, subset) in subsets.iter().enumerate() {
        if statuses.get(i).is_some_and(is_unschedulable) {
            continue;
        }
        match max_replicas(subset, replicas) {
            None => return Some(i),
            Some(max) => {
                end += i64::from(max);
                if i64::from(ordinal) < end {
                    return Some(i);
                }
            }
        }
    }
    None
}

/// As in openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go: the status recording that `pod` (of `version`, in subset `subset_name`)
/// is being deleted: `deletingPods[pod]`, and one more missing replica when the subset
/// has a cap. `None` when there is nothing to record (no such subset, recorded already,
/// or a StatefulSet, whose placement does not count).
pub fn record_deletion(
    ws: &WorkloadSpread,
    kind: TargetKind,
    replicas: i32,
    subset_name: &str,
    pod: &str,
    version: &str,
    now: Time,
) -> Option<WorkloadSpreadStatus> {
    if kind.is_statefulset() || pod.is_empty() {
        return None;
    }
    let subsets = &ws.spec.subsets;
    let current = ws.status.clone().unwrap_or_default();
    let mut statuses = aligned(subsets, stored_for(&current, kind, version), replicas);
    let i = subsets.iter().position(|s| s.name == subset_name)?;
    let status = &mut statuses[i];
    if status.deleting_pods.contains_key(pod) {
        return None;
    }
    status.deleting_pods.insert(pod.to_string(), now);
    if status.missing_replicas >= 0 {
        let max = max_replicas(&subsets[i], replicas).unwrap_or(i32::MAX);
        status.missing_replicas = (status.missing_replicas + 1).min(max);
    }
    let mut next = current;
    store_for(&mut next, kind, version, statuses);
    Some(next)
}
