//! v1alpha1 ⇄ v1beta1 of PodUnavailableBudget (`policy.kruise.io`). The shapes are the
//! same but for three v1beta1 spec fields (OpenKruise ≥ 1.9); two of them are what
//! v1alpha1 keeps in annotations, which pub-ctl and the workload controllers read:
//!
//! | v1alpha1 annotation | v1beta1 spec |
//! |---|---|
//! | `kruise.io/pub-protect-operations` (`DELETE,EVICT`) | `protectOperations` |
//! | `pub.kruise.io/protect-total-replicas` (`5`) | `protectTotalReplicas` |
//!
//! As in OpenKruise's conversion (`apis/policy/v1alpha1/podunavailablebudget_conversion.go`)
//! the annotations stay on the v1beta1 object, and a v1beta1 object converted back has
//! them set from its fields, or removed when the fields are. Where that conversion fails
//! (an annotation that does not parse) or loses information (`ignoredPodSelector` has no
//! v1alpha1 form) these functions do not: an annotation that does not parse stays an
//! annotation and sets no field, and `ignoredPodSelector` travels in
//! [`IGNORED_POD_SELECTOR_ANNOTATION`] on the stored v1alpha1 object.

use serde_json::{Map, Value, json};

use super::{metadata_get, metadata_map, metadata_set, spec_of};
use crate::keys;
use crate::policy_v1alpha1::PubOperation;

pub const POLICY_V1ALPHA1: &str = "policy.kruise.io/v1alpha1";
pub const POLICY_V1BETA1: &str = "policy.kruise.io/v1beta1";

/// Where a v1beta1 `spec.ignoredPodSelector` (JSON) is kept on the stored v1alpha1 object,
/// so that reading it back at v1beta1 returns it. Ours: v1alpha1 has no such field.
pub const IGNORED_POD_SELECTOR_ANNOTATION: &str = "policy.kruise.io/v1beta1-ignored-pod-selector";

/// Converts a PodUnavailableBudget (JSON, either version) to `desired`
/// (`policy.kruise.io/<version>`).
pub fn convert_podunavailablebudget(object: Value, desired: &str) -> Result<Value, String> {
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match (from.as_str(), desired) {
        (f, d) if f == d => Ok(object),
        (POLICY_V1ALPHA1, POLICY_V1BETA1) => Ok(podunavailablebudget_to_v1beta1(object)),
        (POLICY_V1BETA1, POLICY_V1ALPHA1) => Ok(podunavailablebudget_to_v1alpha1(object)),
        (f, d) => Err(format!("cannot convert from {f:?} to {d:?}")),
    }
}

/// The operations an annotation value names, as v1beta1 lists them; `None` when it does
/// not parse (then it is no field, only an annotation).
fn operations(value: &str) -> Option<Vec<PubOperation>> {
    PubOperation::parse_list(value).filter(|ops| !ops.is_empty())
}

/// The total an annotation value names, as v1beta1 accepts it (at least 1).
fn total_replicas(value: &str) -> Option<i32> {
    value.trim().parse::<i32>().ok().filter(|n| *n >= 1)
}

/// v1alpha1 PodUnavailableBudget → v1beta1.
pub fn podunavailablebudget_to_v1beta1(mut object: Value) -> Value {
    object["apiVersion"] = json!(POLICY_V1BETA1);
    let ops = metadata_get(&object, "annotations", keys::PUB_PROTECT_OPERATIONS)
        .as_deref()
        .and_then(operations);
    let total = metadata_get(&object, "annotations", keys::PUB_PROTECT_TOTAL_REPLICAS)
        .as_deref()
        .and_then(total_replicas);
    let ignored = metadata_map(&mut object, "annotations").and_then(|annotations| {
        let raw = annotations.get(IGNORED_POD_SELECTOR_ANNOTATION)?.as_str()?;
        let selector = serde_json::from_str::<Value>(raw)
            .ok()
            .filter(Value::is_object)?;
        annotations.remove(IGNORED_POD_SELECTOR_ANNOTATION);
        Some(selector)
    });
    drop_empty_annotations(&mut object);
    if ops.is_none() && total.is_none() && ignored.is_none() {
        return object;
    }
    if !object.get("spec").is_some_and(Value::is_object) {
        object["spec"] = json!({});
    }
    let Some(spec) = spec_of(&mut object) else {
        return object;
    };
    if let Some(ops) = ops {
        spec.insert("protectOperations".into(), json!(ops));
    }
    if let Some(total) = total {
        spec.insert("protectTotalReplicas".into(), json!(total));
    }
    if let Some(ignored) = ignored {
        spec.insert("ignoredPodSelector".into(), ignored);
    }
    object
}

/// v1beta1 PodUnavailableBudget → v1alpha1.
pub fn podunavailablebudget_to_v1alpha1(mut object: Value) -> Value {
    object["apiVersion"] = json!(POLICY_V1ALPHA1);
    let (ops, total, ignored) = match spec_of(&mut object) {
        Some(spec) => (
            spec.remove("protectOperations"),
            spec.remove("protectTotalReplicas"),
            spec.remove("ignoredPodSelector"),
        ),
        None => (None, None, None),
    };
    // As the annotation spells a list: `DELETE,EVICT`, duplicates dropped (pub-ctl reads
    // it so), unknown names kept for pub-ctl's validation to refuse.
    let ops = ops
        .and_then(|v| v.as_array().cloned())
        .map(|items| {
            let mut names: Vec<&str> = Vec::new();
            for name in items.iter().filter_map(Value::as_str) {
                if !name.is_empty() && !names.contains(&name) {
                    names.push(name);
                }
            }
            names.join(",")
        })
        .filter(|s| !s.is_empty());
    let total = total.and_then(|v| v.as_i64()).map(|n| n.to_string());
    set_or_clear(&mut object, keys::PUB_PROTECT_OPERATIONS, ops, |v| {
        operations(v).map(|ops| join(&ops))
    });
    set_or_clear(&mut object, keys::PUB_PROTECT_TOTAL_REPLICAS, total, |v| {
        total_replicas(v).map(|n| n.to_string())
    });
    match ignored.filter(Value::is_object) {
        Some(selector) => metadata_set(
            &mut object,
            "annotations",
            IGNORED_POD_SELECTOR_ANNOTATION,
            &selector.to_string(),
        ),
        None => {
            if let Some(annotations) = metadata_map(&mut object, "annotations") {
                annotations.remove(IGNORED_POD_SELECTOR_ANNOTATION);
            }
        }
    }
    drop_empty_annotations(&mut object);
    object
}

/// Sets annotation `key` to the v1beta1 field's `value` (`as_field`: what an annotation
/// value reads as, `None` when it sets no field). An annotation that already reads as
/// the field is kept as written (`DELETE, EVICT` stays so). Without the field, removes
/// the annotation only if it would have set the field (a v1beta1 client removed it), and
/// keeps one that never was a field: v1alpha1 → v1beta1 → v1alpha1 is exact.
fn set_or_clear(
    object: &mut Value,
    key: &str,
    value: Option<String>,
    as_field: impl Fn(&str) -> Option<String>,
) {
    let current = metadata_get(object, "annotations", key);
    let current_field = current.as_deref().and_then(&as_field);
    match value {
        Some(v) if current_field.as_deref() == Some(v.as_str()) => {}
        Some(v) => metadata_set(object, "annotations", key, &v),
        None => {
            if current_field.is_some()
                && let Some(annotations) = metadata_map(object, "annotations")
            {
                annotations.remove(key);
            }
        }
    }
}

fn join(ops: &[PubOperation]) -> String {
    ops.iter()
        .map(|op| op.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Removes `metadata.annotations` when it is an empty map (an object that had none
/// round-trips to one that has none).
fn drop_empty_annotations(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && meta
            .get("annotations")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
    {
        meta.remove("annotations");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn alpha(annotations: Value) -> Value {
        json!({
            "apiVersion": POLICY_V1ALPHA1,
            "kind": "PodUnavailableBudget",
            "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
            "status": {"observedGeneration": 1, "unavailableAllowed": 1, "currentAvailable": 3,
                       "desiredAvailable": 2, "totalReplicas": 3}
        })
    }

    #[test]
    fn annotations_become_fields_and_stay() {
        let beta = convert_podunavailablebudget(
            alpha(json!({
                keys::PUB_PROTECT_OPERATIONS: "DELETE,EVICT",
                keys::PUB_PROTECT_TOTAL_REPLICAS: "5",
                "other": "x"
            })),
            POLICY_V1BETA1,
        )
        .unwrap();
        assert_eq!(beta["apiVersion"], POLICY_V1BETA1);
        assert_eq!(
            beta["spec"]["protectOperations"],
            json!(["DELETE", "EVICT"])
        );
        assert_eq!(beta["spec"]["protectTotalReplicas"], 5);
        assert_eq!(
            beta["metadata"]["annotations"][keys::PUB_PROTECT_OPERATIONS],
            "DELETE,EVICT"
        );
        assert_eq!(beta["status"]["totalReplicas"], 3);
    }

    #[test]
    fn a_v1beta1_object_reads_as_v1alpha1_with_annotations() {
        let beta = json!({
            "apiVersion": POLICY_V1BETA1,
            "kind": "PodUnavailableBudget",
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": "20%", "protectOperations": ["UPDATE"],
                     "protectTotalReplicas": 7,
                     "ignoredPodSelector": {"matchLabels": {"skip": "yes"}}}
        });
        let alpha = convert_podunavailablebudget(beta.clone(), POLICY_V1ALPHA1).unwrap();
        assert_eq!(
            alpha,
            json!({
                "apiVersion": POLICY_V1ALPHA1,
                "kind": "PodUnavailableBudget",
                "metadata": {"name": "web", "annotations": {
                    keys::PUB_PROTECT_OPERATIONS: "UPDATE",
                    keys::PUB_PROTECT_TOTAL_REPLICAS: "7",
                    IGNORED_POD_SELECTOR_ANNOTATION: r#"{"matchLabels":{"skip":"yes"}}"#
                }},
                "spec": {"maxUnavailable": "20%"}
            })
        );
        // And back: the v1beta1 fields again (the annotations v1alpha1 reads stay, as upstream's).
        let again = convert_podunavailablebudget(alpha, POLICY_V1BETA1).unwrap();
        assert_eq!(again["spec"], beta["spec"]);
        assert!(again["metadata"]["annotations"][IGNORED_POD_SELECTOR_ANNOTATION].is_null());
    }

    #[test]
    fn a_field_removed_at_v1beta1_removes_its_annotation() {
        let beta = convert_podunavailablebudget(
            alpha(json!({keys::PUB_PROTECT_OPERATIONS: "DELETE"})),
            POLICY_V1BETA1,
        )
        .unwrap();
        let mut edited = beta;
        edited["spec"]
            .as_object_mut()
            .unwrap()
            .remove("protectOperations");
        let alpha = convert_podunavailablebudget(edited, POLICY_V1ALPHA1).unwrap();
        assert!(alpha["metadata"].get("annotations").is_none(), "{alpha}");
    }

    #[test]
    fn an_annotation_that_does_not_parse_is_no_field_and_survives() {
        let original = alpha(json!({
            keys::PUB_PROTECT_OPERATIONS: "DELETE,REBOOT",
            keys::PUB_PROTECT_TOTAL_REPLICAS: "0"
        }));
        let beta = convert_podunavailablebudget(original.clone(), POLICY_V1BETA1).unwrap();
        assert!(beta["spec"].get("protectOperations").is_none());
        assert!(beta["spec"].get("protectTotalReplicas").is_none());
        assert_eq!(
            convert_podunavailablebudget(beta, POLICY_V1ALPHA1).unwrap(),
            original
        );
    }

    #[test]
    fn other_versions_are_refused() {
        assert!(convert_podunavailablebudget(alpha(json!({})), "policy.kruise.io/v1").is_err());
        let same = convert_podunavailablebudget(alpha(json!({})), POLICY_V1ALPHA1).unwrap();
        assert_eq!(same, alpha(json!({})));
    }

    fn annotation_value() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some(String::new())),
            Just(Some("DELETE".to_string())),
            Just(Some("EVICT,UPDATE,RESIZE".to_string())),
            Just(Some("DELETE,bogus".to_string())),
            Just(Some("DELETE, EVICT,DELETE".to_string())),
            Just(Some("05".to_string())),
            Just(Some("3".to_string())),
            Just(Some("-1".to_string())),
            "[a-z0-9,]{0,8}".prop_map(Some),
        ]
    }

    proptest! {
        /// v1alpha1 → v1beta1 → v1alpha1 is the object itself, whatever its annotations.
        #[test]
        fn v1alpha1_round_trips(
            ops in annotation_value(),
            total in annotation_value(),
            ignored in prop_oneof![Just(None), Just(Some(r#"{"matchLabels":{"a":"b"}}"#.to_string()))],
        ) {
            let mut annotations = Map::new();
            if let Some(v) = ops { annotations.insert(keys::PUB_PROTECT_OPERATIONS.into(), json!(v)); }
            if let Some(v) = total { annotations.insert(keys::PUB_PROTECT_TOTAL_REPLICAS.into(), json!(v)); }
            if let Some(v) = ignored { annotations.insert(IGNORED_POD_SELECTOR_ANNOTATION.into(), json!(v)); }
            let mut original = alpha(Value::Object(annotations.clone()));
            if annotations.is_empty() {
                original["metadata"].as_object_mut().unwrap().remove("annotations");
            }
            let beta = convert_podunavailablebudget(original.clone(), POLICY_V1BETA1).unwrap();
            let back = convert_podunavailablebudget(beta, POLICY_V1ALPHA1).unwrap();
            prop_assert_eq!(back, original);
        }
    }
}
