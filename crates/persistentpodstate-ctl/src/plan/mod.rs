//! The pure part of PersistentPodState (openkruise/kruise v1.9.0
//! pkg/controller/persistentpodstate/persistent_pod_state_controller.go and
//! pkg/webhook/pod/mutating/persistent_pod_state.go): which states a PPS records and keeps
//! ([`next_status`]), which PPS a StatefulSet's annotations ask for ([`generated_spec`],
//! [`autogen_action`]), and the affinity a re-created Pod gets ([`injection`]).
//! No client, no clock: `reconcile.rs` and the webhook read the caches and call these.

pub mod affinity;
pub mod autogen;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::persistentpodstate::{
    PersistentPodStateRetentionPolicyType, PersistentPodStateSpec, PersistentPodStateStatus,
    PodState,
};
use kruise_api::apps_v1alpha1::workloadspread::TargetReference;
use kruise_ordering::predicates;

pub use affinity::{Injection, injection};
pub use autogen::{AutogenAction, Generated, autogen_action, generated_spec};

/// `apps` (apps/v1 StatefulSet).
pub const APPS_GROUP: &str = "apps";
/// `apps.kruise.io` (Advanced StatefulSet).
pub const KRUISE_GROUP: &str = "apps.kruise.io";
/// The only kind a PPS may target.
pub const STATEFULSET_KIND: &str = "StatefulSet";

pub use kruise_runtime::meta::group_of;

/// Which StatefulSet a target reference names, if it names one at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// `apps/v1` StatefulSet.
    Apps,
    /// `apps.kruise.io` StatefulSet (v1alpha1 or v1beta1: the same objects).
    Advanced,
}

/// The StatefulSet kind of `apiVersion`/`kind`, or `None` for anything else.
pub fn target_kind(api_version: &str, kind: &str) -> Option<TargetKind> {
    if kind != STATEFULSET_KIND {
        return None;
    }
    match group_of(api_version) {
        APPS_GROUP => Some(TargetKind::Apps),
        KRUISE_GROUP => Some(TargetKind::Advanced),
        _ => None,
    }
}

/// Two references name the same workload: group, kind and name equal (the version may
/// differ: `apps.kruise.io/v1alpha1` and `/v1beta1` are the same StatefulSets).
pub fn same_target(a: &TargetReference, b: &TargetReference) -> bool {
    group_of(&a.api_version) == group_of(&b.api_version) && a.kind == b.kind && a.name == b.name
}

/// What the retention decision reads of the target StatefulSet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// `spec.replicas` (defaulted: 1).
    pub replicas: i32,
    /// `spec.ordinals.start` (0 unless set).
    pub start: i32,
    /// `reserveOrdinals` as ranges (Advanced StatefulSet only).
    pub reserved: Vec<RangeInclusive<i32>>,
}

impl Target {
    /// Whether `ordinal` is one of the ordinals that should have a Pod: the first
    /// `replicas` ordinals from `start`, counted while skipping the reserved ones.
    pub fn holds(&self, ordinal: i32) -> bool {
        if ordinal < self.start || self.is_reserved(ordinal) {
            return false;
        }
        // Live ordinals below this one: every ordinal in [start, ordinal) that is not
        // reserved (ranges merged first, so an ordinal reserved twice counts once).
        let below = i64::from(ordinal) - i64::from(self.start);
        let reserved_below: i64 = merged(&self.reserved)
            .iter()
            .map(|r| {
                let lo = (*r.start()).max(self.start);
                let hi = (*r.end()).min(ordinal - 1);
                (i64::from(hi) - i64::from(lo) + 1).max(0)
            })
            .sum();
        below - reserved_below < i64::from(self.replicas)
    }

    fn is_reserved(&self, ordinal: i32) -> bool {
        self.reserved.iter().any(|r| r.contains(&ordinal))
    }
}

/// Overlapping or adjacent ranges merged, ascending.
fn merged(ranges: &[RangeInclusive<i32>]) -> Vec<RangeInclusive<i32>> {
    let mut sorted: Vec<_> = ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
    sorted.sort_by_key(|r| *r.start());
    let mut out: Vec<RangeInclusive<i32>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if i64::from(*r.start()) <= i64::from(*last.end()) + 1 => {
                if r.end() > last.end() {
                    *last = *last.start()..=*r.end();
                }
            }
            _ => out.push(r),
        }
    }
    out
}

/// The ordinal of a StatefulSet Pod name: the number after the last `-`.
pub fn ordinal_of(pod_name: &str) -> Option<i32> {
    let (_, n) = pod_name.rsplit_once('-')?;
    n.parse().ok()
}

/// Everything [`next_status`] reads.
pub struct World<'a> {
    pub spec: &'a PersistentPodStateSpec,
    /// `metadata.generation` of the PPS.
    pub generation: i64,
    /// The status as stored.
    pub current: Option<&'a PersistentPodStateStatus>,
    /// The target; `None` when it is missing or being deleted.
    pub target: Option<Target>,
    /// The Pods the target controls (any state, terminating ones included).
    pub pods: Vec<&'a Pod>,
    /// Labels of the known nodes, by name.
    pub node_labels: BTreeMap<&'a str, &'a BTreeMap<String, String>>,
}

/// The node label keys recorded: the union of the required and preferred keys.
pub fn topology_keys(spec: &PersistentPodStateSpec) -> BTreeSet<&str> {
    spec.required_persistent_topology
        .iter()
        .flat_map(|t| &t.node_topology_keys)
        .chain(
            spec.preferred_persistent_topology
                .iter()
                .flat_map(|t| &t.preference.node_topology_keys),
        )
        .map(String::as_str)
        .collect()
}

/// The Pod annotation keys recorded.
pub fn annotation_keys(spec: &PersistentPodStateSpec) -> BTreeSet<&str> {
    spec.persistent_pod_annotations
        .iter()
        .map(|a| a.key.as_str())
        .collect()
}

/// A Pod is recorded once it is active, scheduled and Ready.
pub fn is_recordable(pod: &Pod) -> bool {
    predicates::is_active(pod) && predicates::is_scheduled(pod) && predicates::is_ready(pod)
}

/// The state of `pod` on a node with `node_labels`: its node, the values of the chosen
/// node labels it has, and the values of the chosen Pod annotations present.
pub fn pod_state(
    pod: &Pod,
    node_labels: &BTreeMap<String, String>,
    topology: &BTreeSet<&str>,
    annotations: &BTreeSet<&str>,
) -> PodState {
    let pick = |from: Option<&BTreeMap<String, String>>, keys: &BTreeSet<&str>| {
        keys.iter()
            .filter_map(|k| {
                from.and_then(|m| m.get(*k))
                    .map(|v| (k.to_string(), v.clone()))
            })
            .collect()
    };
    PodState {
        node_name: predicates::node_name(pod).to_string(),
        node_topology_labels: pick(Some(node_labels), topology),
        annotations: pick(pod.metadata.annotations.as_ref(), annotations),
    }
}

/// Whether a recorded state still stands for `pod`: same node, and recorded with the
/// same key sets (keys a node lacks are not recorded, so a state short of keys is
/// recomputed; the result then equals it and nothing is written).
fn is_current(
    state: &PodState,
    pod: &Pod,
    topology: &BTreeSet<&str>,
    annotations: &BTreeSet<&str>,
) -> bool {
    state.node_name == predicates::node_name(pod)
        && state
            .node_topology_labels
            .keys()
            .map(String::as_str)
            .eq(topology.iter().copied())
        && state
            .annotations
            .keys()
            .map(String::as_str)
            .eq(annotations.iter().copied())
}

/// The status the PPS should have (as upstream's `Reconcile` and `getPodState`).
///
/// - Target missing or being deleted: no states.
/// - Each recordable Pod gets its state, rewritten only when its node or the key sets
///   changed; a Pod whose node is not known yet keeps its old state (it is recorded
///   when the node shows up).
/// - `WhenScaled`: a state is dropped when its ordinal is outside the replicas (skipping
///   reserved ordinals) and its Pod is gone. `WhenDeleted`: states stay.
pub fn next_status(world: &World) -> PersistentPodStateStatus {
    let mut status = PersistentPodStateStatus {
        observed_generation: world.generation,
        pod_states: BTreeMap::new(),
    };
    let Some(target) = &world.target else {
        return status;
    };
    status.pod_states = world
        .current
        .map(|s| s.pod_states.clone())
        .unwrap_or_default();
    let topology = topology_keys(world.spec);
    let annotations = annotation_keys(world.spec);
    for pod in world.pods.iter().copied().filter(|p| is_recordable(p)) {
        let name = predicates::name(pod);
        if status
            .pod_states
            .get(name)
            .is_some_and(|s| is_current(s, pod, &topology, &annotations))
        {
            continue;
        }
        let Some(labels) = world.node_labels.get(predicates::node_name(pod)) else {
            continue;
        };
        let state = pod_state(pod, labels, &topology, &annotations);
        status.pod_states.insert(name.to_string(), state);
    }
    if world.spec.retention_policy() == PersistentPodStateRetentionPolicyType::WhenScaled {
        let existing: BTreeSet<&str> = world.pods.iter().map(predicates::name).collect();
        status.pod_states.retain(|name, _| {
            // A name without an ordinal is not a StatefulSet Pod's: never dropped here.
            let Some(ordinal) = ordinal_of(name) else {
                return true;
            };
            target.holds(ordinal) || existing.contains(name.as_str())
        });
    }
    status
}

#[cfg(test)]
mod tests;
