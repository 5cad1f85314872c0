//! Everything the controller and the webhooks decide, as pure functions of what they
//! read: [`target`] (kinds, versions), [`custom`] (allow-listed kinds, replicas by
//! path), [`subset`] (caps, the webhook's placement and
//! deletion records), [`inject`] (what a subset puts into a Pod), [`status`] (counting),
//! [`cost`] (pod-deletion-cost), [`adaptive`] (moving stuck Pods), and [`plan`], one
//! reconcile of a WorkloadSpread.

pub mod adaptive;
pub mod cost;
pub mod custom;
pub mod inject;
pub mod status;
pub mod subset;
pub mod target;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps_v1alpha1::{
    InjectWorkloadSpread, WorkloadSpread, WorkloadSpreadStatus, WorkloadSpreadSubset,
    WorkloadSpreadSubsetStatus,
};
use kruise_api::keys;
use kruise_ordering::predicates;

use self::status::{Counting, Expired};
use self::target::{TargetKind, pod_version};

/// What one reconcile reads.
pub struct World<'a> {
    pub ws: &'a WorkloadSpread,
    pub kind: TargetKind,
    /// The workload's replicas (0 when it is missing or being deleted).
    pub replicas: i32,
    /// A Deployment's newest version (its newest ReplicaSet's `pod-template-hash`):
    /// Pods of other versions leave the preferred subsets first.
    pub latest_version: Option<&'a str>,
    /// The workload's Pods the cache shows (any phase), matching `targetFilter`.
    pub pods: Vec<&'a Pod>,
    /// Nodes by name: where an unannotated Pod runs decides its subset.
    pub nodes: &'a BTreeMap<String, &'a Node>,
    pub now: Timestamp,
}

/// A metadata patch of one Pod (merge patch), guarded by its UID.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodPatch {
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// An event about the WorkloadSpread.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// What one reconcile does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub status: WorkloadSpreadStatus,
    /// Annotations (subset match, deletion cost) and labels (an existing Pod's patch).
    pub patches: Vec<PodPatch>,
    /// Pods to delete (Adaptive), by name and UID.
    pub deletions: Vec<(String, String)>,
    pub events: Vec<Event>,
    pub requeue_after: Option<Duration>,
}

/// The `apps.kruise.io/matched-workloadspread` annotation of a Pod, if it parses.
pub fn matched(pod: &Pod) -> Option<InjectWorkloadSpread> {
    serde_json::from_str(predicates::annotation(pod, keys::WS_MATCHED)?).ok()
}

/// Where an active Pod belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Membership {
    Subset(usize),
    /// Annotated for this WorkloadSpread but its subset is gone.
    Fake,
    /// Never placed by a webhook for this WorkloadSpread (created before it, while the
    /// webhook was unreachable, or annotated for another WorkloadSpread or no subset):
    /// matched by its node, as OpenKruise does (`isNotMatchedWS`; its e2e spec "manage
    /// the pods that were created before workloadspread" expects them adopted).
    Unannotated,
}

pub fn membership(pod: &Pod, ws_name: &str, subsets: &[WorkloadSpreadSubset]) -> Membership {
    match matched(pod) {
        None => Membership::Unannotated,
        Some(m) if m.name != ws_name || m.subset.is_empty() => Membership::Unannotated,
        Some(m) => subsets
            .iter()
            .position(|s| s.name == m.subset)
            .map_or(Membership::Fake, Membership::Subset),
    }
}

/// How well `node` suits `subset`: `None` when its required term does not match, else
/// the weight of its preferred terms that match.
pub fn node_score(subset: &WorkloadSpreadSubset, node: &Node) -> Option<i32> {
    if let Some(term) = &subset.required_node_selector_term
        && !kruise_ordering::nodes::term_matches(term, node)
    {
        return None;
    }
    Some(
        subset
            .preferred_node_selector_terms
            .iter()
            .filter(|p| kruise_ordering::nodes::term_matches(&p.preference, node))
            .map(|p| p.weight)
            .sum(),
    )
}

/// The subset for a Pod already running on `node` (created before the WorkloadSpread,
/// or annotated for another one), scored as OpenKruise does (`matchesSubset`): among the
/// subsets whose required term matches the node and whose tolerations, with the Pod's,
/// tolerate every taint of the node, the highest `100 × matched preferred weight + 10 ×
/// (the Pod already carries the subset's patch) + (the subset is below its cap)`; the
/// earlier subset on a tie. A full subset still takes a Pod only its nodes match: the Pod
/// is counted there (its surplus gets a negative deletion cost), not left out.
pub fn subset_for_node(
    subsets: &[WorkloadSpreadSubset],
    maxes: &[Option<i32>],
    counts: &[i32],
    node: &Node,
    pod: &Pod,
) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for (i, subset) in subsets.iter().enumerate() {
        if !tolerates_node(subset, pod, node) {
            continue;
        }
        let Some(preferred) = node_score(subset, node) else {
            continue;
        };
        let carries_patch = i64::from(carries_patch(subset, pod));
        let has_room = i64::from(maxes[i].is_none_or(|m| counts[i] < m));
        let score = i64::from(preferred) * 100 + carries_patch * 10 + has_room;
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((i, score));
        }
    }
    best.map(|(i, _)| i)
}

/// Every taint of `node` is tolerated by the Pod's tolerations or the subset's.
fn tolerates_node(subset: &WorkloadSpreadSubset, pod: &Pod, node: &Node) -> bool {
    let mut tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    tolerations.extend(subset.tolerations.iter().cloned());
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
    taints
        .unwrap_or_default()
        .iter()
        .all(|taint| kruise_ordering::nodes::tolerated(&tolerations, taint))
}

/// The Pod already looks as the subset's patch would make it. Only a patch of labels and
/// annotations is compared (annotations are ignored, as OpenKruise does: their values may
/// be equal JSON written differently); a patch of anything else never counts as carried.
fn carries_patch(subset: &WorkloadSpreadSubset, pod: &Pod) -> bool {
    let Some(patch) = subset.patch.as_ref().and_then(|p| p.as_object()) else {
        return false;
    };
    if patch.keys().any(|k| k != "metadata") {
        return false;
    }
    let (labels, _) = patch_metadata(subset);
    labels
        .iter()
        .all(|(k, v)| predicates::label(pod, k) == Some(v.as_str()))
}

/// The metadata of a subset's patch (labels and annotations), to put on an existing Pod.
pub fn patch_metadata(
    subset: &WorkloadSpreadSubset,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let read = |key: &str| -> BTreeMap<String, String> {
        subset
            .patch
            .as_ref()
            .and_then(|p| p.get("metadata"))
            .and_then(|m| m.get(key))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    };
    (read("labels"), read("annotations"))
}

fn duration_until(at: Timestamp, now: Timestamp) -> Duration {
    let d = at.duration_since(now);
    if d <= SignedDuration::ZERO {
        Duration::from_millis(100)
    } else {
        // A little after the deadline, so the record has expired when we look.
        d.unsigned_abs() + Duration::from_millis(100)
    }
}

/// When an unschedulable subset recovers: at that very time, as OpenKruise requeues it
/// (`expectReschedule.Sub(now)`). The timer starts after `now` was read, so the round it
/// starts finds the recovery due (`due <= now`); every millisecond added would come off
/// the time a client waiting for the recovery has left (it is due 300 s after the
/// condition's `lastTransitionTime`, which the apiserver keeps in whole seconds).
fn duration_exactly_until(at: Timestamp, now: Timestamp) -> Duration {
    let d = at.duration_since(now);
    if d <= SignedDuration::ZERO {
        Duration::from_millis(1)
    } else {
        d.unsigned_abs()
    }
}

/// One reconcile of a WorkloadSpread (openkruise/kruise v1.9.0 pkg/controller/workloadspread/workloadspread_controller.go; openkruise/kruise v1.9.0 pkg/controller/workloadspread/reschedule.go).
pub fn plan(w: &World) -> Plan {
    let ws = w.ws;
    let ws_name = ws.metadata.name.as_deref().unwrap_or_default();
    let subsets = &ws.spec.subsets;
    let n = subsets.len();
    let names: Vec<String> = subsets.iter().map(|s| s.name.clone()).collect();
    let maxes: Vec<Option<i32>> = subsets
        .iter()
        .map(|s| subset::max_replicas(s, w.replicas))
        .collect();
    let previous = ws.status.clone().unwrap_or_default();
    let mut out = Plan::default();
    let mut patches: BTreeMap<String, PodPatch> = BTreeMap::new();
    let mut next: Option<Timestamp> = None;
    let mut soonest = |t: Option<Timestamp>| {
        if let Some(t) = t {
            next = Some(next.map_or(t, |n: Timestamp| n.min(t)));
        }
    };

    // Where each active Pod belongs; Pods never placed are matched by their node.
    let mut seen = BTreeSet::new();
    let mut active = BTreeSet::new();
    let mut placed: Vec<(&Pod, Option<usize>)> = Vec::new();
    let mut unannotated = Vec::new();
    for pod in &w.pods {
        seen.extend(status::seen_keys(
            pod,
            matched(pod).as_ref().map(|m| m.uid.as_str()),
        ));
        if !predicates::is_active(pod) {
            continue;
        }
        active.insert(predicates::name(pod).to_string());
        match membership(pod, ws_name, subsets) {
            Membership::Subset(i) => placed.push((pod, Some(i))),
            Membership::Fake => placed.push((pod, None)),
            Membership::Unannotated => unannotated.push(*pod),
        }
    }
    let mut counts = vec![0i32; n];
    for (_, i) in &placed {
        if let Some(i) = i {
            counts[*i] += 1;
        }
    }
    unannotated.sort_by_key(|p| predicates::name(p).to_string());
    let ignore_metadata = ws
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::WS_IGNORE_PATCH_EXISTING_PODS_METADATA))
        .is_some_and(|v| v == "true");
    for pod in unannotated {
        let node = w.nodes.get(predicates::node_name(pod));
        let chosen = node.and_then(|node| subset_for_node(subsets, &maxes, &counts, node, pod));
        if let Some(i) = chosen {
            counts[i] += 1;
            let patch = patches
                .entry(predicates::name(pod).to_string())
                .or_default();
            let annotation = InjectWorkloadSpread {
                name: ws_name.to_string(),
                subset: names[i].clone(),
                uid: String::new(),
            };
            if !ignore_metadata {
                let (labels, annotations) = patch_metadata(&subsets[i]);
                patch.labels.extend(labels);
                patch.annotations.extend(annotations);
            }
            patch.annotations.insert(
                keys::WS_MATCHED.to_string(),
                serde_json::to_value(&annotation)
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
            );
        }
        placed.push((pod, chosen));
    }

    // Adaptive: Pods stuck in a subset move on.
    fn group<'p>(n: usize, pods: &[(&'p Pod, Option<usize>)]) -> (Vec<Vec<&'p Pod>>, Vec<&'p Pod>) {
        let mut members: Vec<Vec<&Pod>> = vec![Vec::new(); n];
        let mut fake = Vec::new();
        for (pod, i) in pods {
            match i {
                Some(i) => members[*i].push(*pod),
                None => fake.push(*pod),
            }
        }
        (members, fake)
    }
    let (all_members, _) = group(n, &placed);
    let critical = ws
        .spec
        .schedule_strategy
        .adaptive
        .as_ref()
        .and_then(|a| a.reschedule_critical_seconds)
        .unwrap_or(0);
    let adaptive = ws.spec.schedule_strategy.is_adaptive() && critical > 0;
    let overall_previous = subset::aligned(subsets, &previous.subset_statuses, w.replicas);
    let mut stuck_subsets = Vec::new();
    let mut deleted = BTreeSet::new();
    if adaptive {
        let (stuck, due) = adaptive::stuck(
            &all_members,
            SignedDuration::from_secs(i64::from(critical)),
            w.now,
        );
        soonest(due);
        for (i, pod) in stuck {
            stuck_subsets.push(i);
            let name = predicates::name(pod).to_string();
            out.events.push(Event {
                warning: true,
                reason: crate::events::RESCHEDULE,
                message: crate::events::reschedule(&names[i], &name, critical),
            });
            out.deletions
                .push((name.clone(), predicates::uid(pod).to_string()));
            deleted.insert(name);
        }
    }
    let conditions = adaptive::conditions(&overall_previous, &stuck_subsets, adaptive, w.now);
    // Not through `soonest`: a recovery is requeued for its very time (below).
    let recover_at = conditions.next;
    for i in &conditions.recovered {
        out.events.push(Event {
            warning: false,
            reason: keys::EVENT_WS_RECOVER_SCHEDULABLE,
            message: crate::events::recover_schedulable(&names[*i]),
        });
    }

    // Statuses: overall, and per version for a versioned workload.
    let mut expired_all = Vec::new();
    let count = |previous: &[WorkloadSpreadSubsetStatus], members: &[Vec<&Pod>]| {
        status::subset_statuses(&Counting {
            names: &names,
            maxes: &maxes,
            previous,
            members,
            seen: &seen,
            active: &active,
            conditions: &conditions.per_subset,
            now: w.now,
        })
    };
    let (overall, expired, due) = count(&overall_previous, &all_members);
    expired_all.extend(expired);
    soonest(due);
    let mut by_version: BTreeMap<String, Vec<(&Pod, Option<usize>)>> = BTreeMap::new();
    for (pod, i) in &placed {
        by_version
            .entry(pod_version(pod, w.kind))
            .or_default()
            .push((*pod, *i));
    }
    let mut versioned = BTreeMap::new();
    if w.kind.versioned() {
        let versions: BTreeSet<String> = by_version
            .keys()
            .chain(previous.versioned_subset_statuses.keys())
            .cloned()
            .collect();
        for version in versions {
            let (members, _) = group(n, by_version.get(&version).map_or(&[][..], Vec::as_slice));
            let stored = previous
                .versioned_subset_statuses
                .get(&version)
                .map_or(&[][..], Vec::as_slice);
            let (statuses, expired, due) =
                count(&subset::aligned(subsets, stored, w.replicas), &members);
            expired_all.extend(expired);
            soonest(due);
            if !status::is_empty(&statuses) {
                versioned.insert(version, statuses);
            }
        }
    }
    for e in expired_all {
        out.events.push(match e {
            Expired::Create(subset, pod) => Event {
                warning: true,
                reason: keys::EVENT_WS_CREATE_POD_FAILED,
                message: crate::events::create_pod_failed(&subset, &pod),
            },
            Expired::Delete(subset, pod) => Event {
                warning: true,
                reason: keys::EVENT_WS_DELETE_POD_FAILED,
                message: crate::events::delete_pod_failed(&subset, &pod),
            },
        });
    }
    out.status = WorkloadSpreadStatus {
        observed_generation: ws.metadata.generation.unwrap_or_default(),
        subset_statuses: overall,
        versioned_subset_statuses: versioned,
    };

    // Deletion costs, per version.
    if w.kind.uses_deletion_cost() {
        for (version, pods) in &by_version {
            let pods: Vec<_> = pods
                .iter()
                .filter(|(p, _)| !deleted.contains(predicates::name(p)))
                .cloned()
                .collect();
            let (members, fake) = group(n, &pods);
            let old =
                w.kind == TargetKind::Deployment && w.latest_version.is_some_and(|l| l != version);
            let costs = cost::deletion_costs(&members, &fake, &maxes, old);
            for (pod, _) in &pods {
                let name = predicates::name(pod);
                if let Some(value) = costs.get(name).and_then(|c| cost::cost_change(pod, *c)) {
                    patches
                        .entry(name.to_string())
                        .or_default()
                        .annotations
                        .insert(keys::POD_DELETION_COST.to_string(), value);
                }
            }
        }
    }
    for (name, mut patch) in patches {
        if deleted.contains(&name) {
            continue;
        }
        let Some(pod) = w.pods.iter().find(|p| predicates::name(p) == name) else {
            continue;
        };
        patch.name = name;
        patch.uid = predicates::uid(pod).to_string();
        out.patches.push(patch);
    }
    out.requeue_after = [
        next.map(|t| duration_until(t, w.now)),
        recover_at.map(|t| duration_exactly_until(t, w.now)),
    ]
    .into_iter()
    .flatten()
    .min();
    if let Some(bad) = subsets
        .iter()
        .find(|s| !subset::caps_understood(std::slice::from_ref(s)))
    {
        // A cap that does not read (admission refuses it; it got in while the webhook
        // was down): count and report, but touch no Pod on a spec not understood.
        out.patches.clear();
        out.deletions.clear();
        out.events.push(Event {
            warning: true,
            reason: crate::events::INVALID_SPEC,
            message: crate::events::invalid_max_replicas(&bad.name),
        });
    }
    out
}

#[cfg(test)]
mod tests;
