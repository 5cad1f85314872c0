//! v1alpha1 ⇄ v1beta1 of the kinds OpenKruise 1.9 serves as v1beta1 with renamed
//! fields (ResourceDistribution, PersistentPodState, WorkloadSpread) or a restructured
//! status (UnitedDeployment). Everything not named here is the same JSON in both
//! versions and passes through untouched, unknown fields included.
//!
//! | kind | v1alpha1 | v1beta1 |
//! |---|---|---|
//! | ResourceDistribution | `spec.targets.namespaceLabelSelector` | `spec.targets.namespaceSelector` |
//! | | `status.conditions[].failedNamespace` | `status.conditions[].failedNamespaces` |
//! | PersistentPodState | `spec.requiredPersistentTopology.nodeTopologyKeys` | `…keys` |
//! | | `spec.preferredPersistentTopology[].preference.nodeTopologyKeys` | `…keys` |
//! | WorkloadSpread | `spec.subsets[].requiredNodeSelectorTerm` | `spec.subsets[].requiredNodeSelector` |
//! | | `spec.subsets[].preferredNodeSelectorTerms` | `spec.subsets[].preferredNodeSelector` |
//! | UnitedDeployment | `status.subsetReplicas{name: n}` | `status.subsetStatuses[name].replicas` |
//! | | `status.updateStatus.updatedRevision` | `status.updatedRevision` |
//! | | `status.updateStatus.currentPartitions{name: p}` | `status.subsetStatuses[name].partition` |
//!
//! UnitedDeployment's v1alpha1 status also has `subsetStatuses` with the same fields
//! (our controller fills them alike), so its two maps are views of that list: a status
//! our controller wrote converts both ways without loss. As in OpenKruise, a subset
//! named only in v1alpha1's maps gets an entry in `subsetStatuses`.

use serde_json::{Map, Value, json};

use super::{V1ALPHA1, V1BETA1, convert, spec_of, take_object};

/// Converts a ResourceDistribution (JSON, either version) to `desired`.
pub fn convert_resourcedistribution(object: Value, desired: &str) -> Result<Value, String> {
    convert(
        object,
        desired,
        resourcedistribution_to_v1beta1,
        resourcedistribution_to_v1alpha1,
    )
}

/// Converts a PersistentPodState (JSON, either version) to `desired`.
pub fn convert_persistentpodstate(object: Value, desired: &str) -> Result<Value, String> {
    convert(
        object,
        desired,
        persistentpodstate_to_v1beta1,
        persistentpodstate_to_v1alpha1,
    )
}

/// Converts a WorkloadSpread (JSON, either version) to `desired`.
pub fn convert_workloadspread(object: Value, desired: &str) -> Result<Value, String> {
    convert(
        object,
        desired,
        workloadspread_to_v1beta1,
        workloadspread_to_v1alpha1,
    )
}

/// Converts a UnitedDeployment (JSON, either version) to `desired`.
pub fn convert_uniteddeployment(object: Value, desired: &str) -> Result<Value, String> {
    convert(
        object,
        desired,
        uniteddeployment_to_v1beta1,
        uniteddeployment_to_v1alpha1,
    )
}

/// Moves `map[from]` to `map[to]` when present.
fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(value) = map.remove(from) {
        map.insert(to.into(), value);
    }
}

fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// Every object of the array `map[key]` (nothing when absent or not an array).
fn objects_in<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn status_of(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object.get_mut("status").and_then(Value::as_object_mut)
}

fn resourcedistribution_rename(mut object: Value, version: &str, beta: bool) -> Value {
    let (selector, failed) = if beta {
        (
            ("namespaceLabelSelector", "namespaceSelector"),
            ("failedNamespace", "failedNamespaces"),
        )
    } else {
        (
            ("namespaceSelector", "namespaceLabelSelector"),
            ("failedNamespaces", "failedNamespace"),
        )
    };
    object["apiVersion"] = json!(version);
    if let Some(targets) = spec_of(&mut object).and_then(|spec| object_at(spec, "targets")) {
        rename(targets, selector.0, selector.1);
    }
    if let Some(status) = status_of(&mut object) {
        for condition in objects_in(status, "conditions") {
            rename(condition, failed.0, failed.1);
        }
    }
    object
}

/// v1alpha1 ResourceDistribution → v1beta1.
pub fn resourcedistribution_to_v1beta1(object: Value) -> Value {
    resourcedistribution_rename(object, V1BETA1, true)
}

/// v1beta1 ResourceDistribution → v1alpha1.
pub fn resourcedistribution_to_v1alpha1(object: Value) -> Value {
    resourcedistribution_rename(object, V1ALPHA1, false)
}

fn persistentpodstate_rename(mut object: Value, version: &str, from: &str, to: &str) -> Value {
    object["apiVersion"] = json!(version);
    if let Some(spec) = spec_of(&mut object) {
        if let Some(required) = object_at(spec, "requiredPersistentTopology") {
            rename(required, from, to);
        }
        for preferred in objects_in(spec, "preferredPersistentTopology") {
            if let Some(preference) = object_at(preferred, "preference") {
                rename(preference, from, to);
            }
        }
    }
    object
}

/// v1alpha1 PersistentPodState → v1beta1.
pub fn persistentpodstate_to_v1beta1(object: Value) -> Value {
    persistentpodstate_rename(object, V1BETA1, "nodeTopologyKeys", "keys")
}

/// v1beta1 PersistentPodState → v1alpha1.
pub fn persistentpodstate_to_v1alpha1(object: Value) -> Value {
    persistentpodstate_rename(object, V1ALPHA1, "keys", "nodeTopologyKeys")
}

/// The subset fields WorkloadSpread renames: (v1alpha1, v1beta1).
const WORKLOADSPREAD_SUBSET_FIELDS: [(&str, &str); 2] = [
    ("requiredNodeSelectorTerm", "requiredNodeSelector"),
    ("preferredNodeSelectorTerms", "preferredNodeSelector"),
];

fn workloadspread_rename(mut object: Value, version: &str, beta: bool) -> Value {
    object["apiVersion"] = json!(version);
    if let Some(spec) = spec_of(&mut object) {
        for subset in objects_in(spec, "subsets") {
            for (alpha, b) in WORKLOADSPREAD_SUBSET_FIELDS {
                if beta {
                    rename(subset, alpha, b);
                } else {
                    rename(subset, b, alpha);
                }
            }
        }
    }
    object
}

/// v1alpha1 WorkloadSpread → v1beta1. Subset conditions need no change: v1beta1's
/// `metav1.Condition` has v1alpha1's fields (plus an optional `observedGeneration`).
pub fn workloadspread_to_v1beta1(object: Value) -> Value {
    workloadspread_rename(object, V1BETA1, true)
}

/// v1beta1 WorkloadSpread → v1alpha1.
pub fn workloadspread_to_v1alpha1(object: Value) -> Value {
    workloadspread_rename(object, V1ALPHA1, false)
}

/// The entry of `statuses` named `name`, appended when missing.
fn subset_status<'a>(statuses: &'a mut Vec<Value>, name: &str) -> &'a mut Value {
    let index = statuses
        .iter()
        .position(|s| s.get("name").and_then(Value::as_str) == Some(name));
    let index = index.unwrap_or_else(|| {
        statuses.push(json!({"name": name}));
        statuses.len() - 1
    });
    &mut statuses[index]
}

/// v1alpha1 UnitedDeployment → v1beta1: `subsetReplicas` and `updateStatus` folded into
/// `subsetStatuses` and `updatedRevision`.
pub fn uniteddeployment_to_v1beta1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1BETA1);
    let Some(status) = status_of(&mut object) else {
        return object;
    };
    let replicas = take_object(status, "subsetReplicas");
    let mut update = take_object(status, "updateStatus");
    let partitions = take_object(&mut update, "currentPartitions");
    if let Some(revision) = update.remove("updatedRevision")
        && revision.as_str().is_some_and(|r| !r.is_empty())
    {
        status.insert("updatedRevision".into(), revision);
    }
    if replicas.is_empty() && partitions.is_empty() {
        return object;
    }
    let mut statuses = match status.remove("subsetStatuses") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    for (field, values) in [("replicas", replicas), ("partition", partitions)] {
        for (name, value) in values {
            let entry = subset_status(&mut statuses, &name);
            if let Some(entry) = entry.as_object_mut() {
                entry.insert(field.into(), value);
            }
        }
    }
    status.insert("subsetStatuses".into(), Value::Array(statuses));
    object
}

/// v1beta1 UnitedDeployment → v1alpha1: `subsetStatuses[].replicas` / `.partition` and
/// `updatedRevision` also as v1alpha1's `subsetReplicas` and `updateStatus` (the list
/// stays: v1alpha1 has it too).
pub fn uniteddeployment_to_v1alpha1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1ALPHA1);
    let Some(status) = status_of(&mut object) else {
        return object;
    };
    let revision = status
        .remove("updatedRevision")
        .and_then(|r| r.as_str().map(str::to_string))
        .unwrap_or_default();
    let (mut replicas, mut partitions) = (Map::new(), Map::new());
    let statuses = status.get("subsetStatuses").and_then(Value::as_array);
    for entry in statuses.into_iter().flatten() {
        let Some(name) = entry.get("name").and_then(Value::as_str) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let number = |field: &str| entry.get(field).cloned().unwrap_or(json!(0));
        replicas.insert(name.into(), number("replicas"));
        partitions.insert(name.into(), number("partition"));
    }
    let has_statuses = statuses.is_some_and(|s| !s.is_empty());
    if !replicas.is_empty() {
        status.insert("subsetReplicas".into(), Value::Object(replicas));
    }
    if !revision.is_empty() || has_statuses {
        let mut update = Map::new();
        if !revision.is_empty() {
            update.insert("updatedRevision".into(), json!(revision));
        }
        if !partitions.is_empty() {
            update.insert("currentPartitions".into(), Value::Object(partitions));
        }
        status.insert("updateStatus".into(), Value::Object(update));
    }
    object
}
