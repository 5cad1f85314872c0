//! What a subset puts into a new Pod (openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go), on the Pod's JSON so fields our
//! types do not model survive. Pure.

use kruise_api::apps_v1alpha1::{InjectWorkloadSpread, WorkloadSpreadSubset};
use kruise_api::keys;
use kruise_workload::strategic::strategic_merge;
use serde_json::{Map, Value, json};

fn object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

fn entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Value {
    map.entry(key.to_string()).or_insert(Value::Null)
}

/// Appends `items` to the array at `slot` (made an array when unset).
fn append(slot: &mut Value, items: impl IntoIterator<Item = Value>) {
    match slot {
        Value::Array(list) => list.extend(items),
        other => *other = Value::Array(items.into_iter().collect()),
    }
}

/// The subset's tolerations, preferred terms, required term and patch, and the
/// `apps.kruise.io/matched-workloadspread` annotation, put into `pod`:
/// - tolerations and preferred terms are appended;
/// - the required term becomes the only term when the Pod has none; otherwise its
///   requirements are appended to every existing term (a Pod's required terms are ORed:
///   the subset's must hold whichever term the scheduler uses);
/// - the patch is strategic-merged; a changed `priorityClassName` clears `priority`
///   (the admission plugin sets it again from the new class).
pub fn inject(pod: &mut Value, subset: &WorkloadSpreadSubset, matched: &InjectWorkloadSpread) {
    let spec = object(entry(object(pod), "spec"));
    if !subset.tolerations.is_empty() {
        append(
            entry(spec, "tolerations"),
            subset.tolerations.iter().map(to_json),
        );
    }
    if !subset.preferred_node_selector_terms.is_empty()
        || subset.required_node_selector_term.is_some()
    {
        let node_affinity = object(entry(object(entry(spec, "affinity")), "nodeAffinity"));
        if !subset.preferred_node_selector_terms.is_empty() {
            append(
                entry(
                    node_affinity,
                    "preferredDuringSchedulingIgnoredDuringExecution",
                ),
                subset.preferred_node_selector_terms.iter().map(to_json),
            );
        }
        if let Some(term) = &subset.required_node_selector_term {
            let required = object(entry(
                node_affinity,
                "requiredDuringSchedulingIgnoredDuringExecution",
            ));
            let terms = entry(required, "nodeSelectorTerms");
            match terms {
                Value::Array(existing_terms) if !existing_terms.is_empty() => {
                    for existing in existing_terms {
                        let existing = object(existing);
                        if let Some(e) = term.match_expressions.as_ref().filter(|e| !e.is_empty()) {
                            append(entry(existing, "matchExpressions"), e.iter().map(to_json));
                        }
                        if let Some(f) = term.match_fields.as_ref().filter(|f| !f.is_empty()) {
                            append(entry(existing, "matchFields"), f.iter().map(to_json));
                        }
                    }
                }
                other => *other = json!([to_json(term)]),
            }
        }
    }
    if let Some(patch) = subset.patch.as_ref().filter(|p| p.is_object()) {
        let class_before = pod["spec"].get("priorityClassName").cloned();
        strategic_merge(pod, patch, "");
        let spec = object(entry(object(pod), "spec"));
        if spec.get("priorityClassName").cloned() != class_before {
            spec.remove("priority");
        }
    }
    let annotations = object(entry(object(entry(object(pod), "metadata")), "annotations"));
    annotations.insert(
        keys::WS_MATCHED.to_string(),
        Value::String(to_json(matched).to_string()),
    );
}

#[allow(
    clippy::expect_used,
    reason = "API types and string maps always serialize: no map with non-string keys, no failing Serialize impl"
)]
fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("API types serialize")
}
