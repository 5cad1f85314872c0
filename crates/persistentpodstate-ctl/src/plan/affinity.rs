//! The node affinity a re-created Pod gets from its recorded state (as `createNodeAffinity` in
//! openkruise/kruise v1.9.0 pkg/webhook/pod/mutating/persistent_pod_state.go).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, Pod, PreferredSchedulingTerm,
};
use kruise_api::apps_v1alpha1::persistentpodstate::{PersistentPodStateSpec, PodState};
use kruise_api::keys;

/// What one Pod gets: required node labels and weighted preferences.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Injection {
    /// `spec.nodeSelector` entries (winning over the Pod's own for the same key).
    pub node_selector: BTreeMap<String, String>,
    /// Appended to `preferredDuringSchedulingIgnoredDuringExecution`.
    pub preferred: Vec<PreferredSchedulingTerm>,
}

/// The injection for a Pod whose recorded state is `state`, or `None` when the state has
/// no topology labels or none of them is asked for.
///
/// - each required key present in the state: `nodeSelector[key] = value`;
/// - each preferred term with at least one of its keys present: a term of its weight with
///   `{key In [value]}` per present key. A term with none present is left out: an empty
///   preference matches every node and would only add the weight everywhere.
pub fn injection(spec: &PersistentPodStateSpec, state: &PodState) -> Option<Injection> {
    if state.node_topology_labels.is_empty() {
        return None;
    }
    let recorded = |key: &String| {
        state
            .node_topology_labels
            .get(key)
            .map(|value| (key.clone(), value.clone()))
    };
    let node_selector: BTreeMap<String, String> = spec
        .required_persistent_topology
        .iter()
        .flat_map(|t| &t.node_topology_keys)
        .filter_map(recorded)
        .collect();
    let preferred: Vec<PreferredSchedulingTerm> = spec
        .preferred_persistent_topology
        .iter()
        .filter_map(|term| {
            let expressions: Vec<NodeSelectorRequirement> = term
                .preference
                .node_topology_keys
                .iter()
                .filter_map(recorded)
                .map(|(key, value)| NodeSelectorRequirement {
                    key,
                    operator: "In".into(),
                    values: Some(vec![value]),
                })
                .collect();
            (!expressions.is_empty()).then_some(PreferredSchedulingTerm {
                weight: term.weight,
                preference: NodeSelectorTerm {
                    match_expressions: Some(expressions),
                    match_fields: None,
                },
            })
        })
        .collect();
    (!node_selector.is_empty() || !preferred.is_empty()).then_some(Injection {
        node_selector,
        preferred,
    })
}

/// Applies `injection` from PPS `pps_name` to `pod`: the node selector merged (the
/// PPS's value wins), the preferences appended after the Pod's own, and the annotation
/// `kruise.io/injected-persistent-pod-state=<pps_name>`.
pub fn apply(pod: &mut Pod, pps_name: &str, injection: &Injection) {
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(keys::PPS_INJECTED.to_string(), pps_name.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    if !injection.node_selector.is_empty() {
        spec.node_selector
            .get_or_insert_with(BTreeMap::new)
            .extend(injection.node_selector.clone());
    }
    if !injection.preferred.is_empty() {
        spec.affinity
            .get_or_insert_with(Affinity::default)
            .node_affinity
            .get_or_insert_with(NodeAffinity::default)
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .extend(injection.preferred.clone());
    }
}
