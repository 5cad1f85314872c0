//! The PPS a StatefulSet's annotations ask for (as `autoGeneratePersistentPodState` in
//! openkruise/kruise v1.9.0 pkg/controller/persistentpodstate/persistent_pod_state_controller.go),
//! and what to do about the one that exists.

use std::collections::BTreeMap;

use kruise_api::apps_v1alpha1::persistentpodstate::{
    NodeTopologyTerm, PersistentPodAnnotation, PersistentPodStateSpec, PreferredTopologyTerm,
};
use kruise_api::apps_v1alpha1::workloadspread::TargetReference;
use kruise_api::keys;

/// The weight of the one preferred term generated from the annotation.
pub const GENERATED_PREFERRED_WEIGHT: i32 = 100;

/// What the annotations ask for.
#[derive(Clone, Debug, PartialEq)]
pub enum Generated {
    /// A PPS with this spec.
    Spec(PersistentPodStateSpec),
    /// No PPS: auto-generate is absent or not `"true"`.
    None,
    /// Auto-generate is `"true"` but neither topology annotation has a key: nothing is
    /// created, and an existing generated PPS is left as it is (as OpenKruise does).
    Incomplete,
}

/// A comma-separated annotation as keys: trimmed, empty items dropped.
fn keys_of(annotations: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    annotations
        .get(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The spec the StatefulSet `target` with `annotations` asks for: required keys as
/// `requiredPersistentTopology`, preferred keys as one term of weight 100, annotation
/// keys as `persistentPodAnnotations`.
pub fn generated_spec(
    annotations: &BTreeMap<String, String>,
    target: TargetReference,
) -> Generated {
    if annotations.get(keys::PPS_AUTO_GENERATE).map(String::as_str) != Some("true") {
        return Generated::None;
    }
    let required = keys_of(annotations, keys::PPS_REQUIRED_TOPOLOGY);
    let preferred = keys_of(annotations, keys::PPS_PREFERRED_TOPOLOGY);
    if required.is_empty() && preferred.is_empty() {
        return Generated::Incomplete;
    }
    Generated::Spec(PersistentPodStateSpec {
        target_ref: target,
        required_persistent_topology: (!required.is_empty()).then_some(NodeTopologyTerm {
            node_topology_keys: required,
        }),
        preferred_persistent_topology: if preferred.is_empty() {
            Vec::new()
        } else {
            vec![PreferredTopologyTerm {
                weight: GENERATED_PREFERRED_WEIGHT,
                preference: NodeTopologyTerm {
                    node_topology_keys: preferred,
                },
            }]
        },
        persistent_pod_annotations: keys_of(annotations, keys::PPS_PERSISTENT_POD_ANNOTATIONS)
            .into_iter()
            .map(|key| PersistentPodAnnotation { key })
            .collect(),
        persistent_pod_state_retention_policy: None,
    })
}

/// The existing PPS of the StatefulSet's name, as the decision needs it.
#[derive(Clone, Copy, Debug)]
pub struct Existing<'a> {
    pub spec: &'a PersistentPodStateSpec,
    /// Controller-owned by this StatefulSet (its UID).
    pub owned: bool,
    pub deleting: bool,
}

/// What to write.
#[derive(Clone, Debug, PartialEq)]
pub enum AutogenAction {
    Create(PersistentPodStateSpec),
    UpdateSpec(PersistentPodStateSpec),
    Delete,
    /// Nothing: up to date, not ours, or being deleted.
    Nothing,
}

/// Create when asked and missing; update the spec of ours when it differs; delete ours
/// when no longer asked for. A PPS of the same name that this StatefulSet does not
/// control (a user's explicit one) is never touched.
///
/// The annotations own only the fields they express: `persistentPodStateRetentionPolicy`
/// has no annotation, so the value a user set on the generated PPS is kept (OpenKruise
/// rewrites the generated spec only when an annotation changes, so a user's
/// `WhenDeleted` survives there too; its e2e suite sets it and then scales down).
pub fn autogen_action(wanted: Generated, existing: Option<Existing>) -> AutogenAction {
    match (wanted, existing) {
        (_, Some(e)) if e.deleting || !e.owned => AutogenAction::Nothing,
        (Generated::Spec(spec), None) => AutogenAction::Create(spec),
        (Generated::Spec(mut spec), Some(e)) => {
            spec.persistent_pod_state_retention_policy =
                e.spec.persistent_pod_state_retention_policy;
            if *e.spec == spec {
                AutogenAction::Nothing
            } else {
                AutogenAction::UpdateSpec(spec)
            }
        }
        (Generated::None, Some(_)) => AutogenAction::Delete,
        _ => AutogenAction::Nothing,
    }
}
