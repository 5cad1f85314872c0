//! v1alpha1 ⇄ v1beta1 of ContainerRecreateRequest. The spec is the same JSON; v1beta1
//! (OpenKruise ≥ 1.9) shows in its status what v1alpha1 keeps in two annotations, which
//! crr-ctl writes on the stored (v1alpha1) object:
//!
//! | v1alpha1 annotation | v1beta1 status |
//! |---|---|
//! | `crr.apps.kruise.io/sync-container-statuses` (JSON list) | `containerStatusSnapshot` |
//! | `crr.apps.kruise.io/unready-acquired` (RFC 3339 time) | condition `PreRecreateGrace` True, that `lastTransitionTime` |
//!
//! As in OpenKruise's conversion, a v1beta1 object carries neither annotation (its e2e
//! suite checks they are absent), and a v1beta1 object converted back has them again.
//! An annotation that does not parse stays an annotation. Other v1beta1 conditions have
//! no v1alpha1 form and are left for the apiserver to prune.

use serde_json::{Map, Value, json};

use super::{V1ALPHA1, V1BETA1, convert, metadata_map, metadata_set};
use crate::apps_v1alpha1::ContainerRecreateRequestSyncContainerStatus;
use crate::apps_v1beta1::containerrecreaterequest::PRE_RECREATE_GRACE;
use crate::keys;

/// Converts a ContainerRecreateRequest (JSON, either version) to `desired`.
pub fn convert_containerrecreaterequest(object: Value, desired: &str) -> Result<Value, String> {
    convert(
        object,
        desired,
        containerrecreaterequest_to_v1beta1,
        containerrecreaterequest_to_v1alpha1,
    )
}

fn status_of(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("status").is_some_and(Value::is_object) {
        object["status"] = json!({});
    }
    object["status"]
        .as_object_mut()
        .unwrap_or_else(|| unreachable!("status was just made an object"))
}

/// The annotation's statuses, in crr-ctl's typed form (so they serialize back the same).
fn parse_snapshot(raw: &str) -> Option<Vec<ContainerRecreateRequestSyncContainerStatus>> {
    serde_json::from_str(raw).ok()
}

/// An RFC 3339 time, as the annotation holds and a condition's lastTransitionTime wants.
fn is_rfc3339(raw: &str) -> bool {
    serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>(json!(raw))
        .is_ok()
}

/// v1alpha1 ContainerRecreateRequest → v1beta1.
pub fn containerrecreaterequest_to_v1beta1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1BETA1);
    let Some(annotations) = metadata_map(&mut object, "annotations") else {
        return object;
    };
    let snapshot = annotations
        .get(keys::CRR_SYNC_CONTAINER_STATUSES)
        .and_then(Value::as_str)
        .and_then(parse_snapshot);
    if snapshot.is_some() {
        annotations.remove(keys::CRR_SYNC_CONTAINER_STATUSES);
    }
    let unready = annotations
        .get(keys::CRR_UNREADY_ACQUIRED)
        .and_then(Value::as_str)
        .filter(|t| is_rfc3339(t))
        .map(str::to_string);
    if unready.is_some() {
        annotations.remove(keys::CRR_UNREADY_ACQUIRED);
    }
    if annotations.is_empty()
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("annotations");
    }
    if let Some(snapshot) = snapshot.filter(|s| !s.is_empty()) {
        status_of(&mut object).insert("containerStatusSnapshot".into(), json!(snapshot));
    }
    if let Some(time) = unready {
        let condition = json!({
            "type": PRE_RECREATE_GRACE,
            "status": "True",
            "lastTransitionTime": time,
            "reason": PRE_RECREATE_GRACE,
            "message": "Pod has been forced to not-ready for unreadyGracePeriodSeconds drain",
        });
        let status = status_of(&mut object);
        match status.get_mut("conditions").and_then(Value::as_array_mut) {
            Some(conditions) => conditions.push(condition),
            None => {
                status.insert("conditions".into(), json!([condition]));
            }
        }
    }
    object
}

/// v1beta1 ContainerRecreateRequest → v1alpha1.
pub fn containerrecreaterequest_to_v1alpha1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1ALPHA1);
    let mut snapshot = None;
    let mut unready = None;
    if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
        if let Some(value) = status.remove("containerStatusSnapshot") {
            snapshot =
                serde_json::from_value::<Vec<ContainerRecreateRequestSyncContainerStatus>>(value)
                    .ok()
                    .and_then(|s| serde_json::to_string(&s).ok());
        }
        if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
            let grace = |c: &Value| {
                c.get("type").and_then(Value::as_str) == Some(PRE_RECREATE_GRACE)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            };
            unready = conditions
                .iter()
                .find(|c| grace(c))
                .and_then(|c| c.get("lastTransitionTime"))
                .and_then(Value::as_str)
                .map(str::to_string);
            conditions
                .retain(|c| c.get("type").and_then(Value::as_str) != Some(PRE_RECREATE_GRACE));
            if conditions.is_empty() {
                status.remove("conditions");
            }
        }
    }
    if let Some(raw) = snapshot {
        metadata_set(
            &mut object,
            "annotations",
            keys::CRR_SYNC_CONTAINER_STATUSES,
            &raw,
        );
    }
    if let Some(time) = unready {
        metadata_set(
            &mut object,
            "annotations",
            keys::CRR_UNREADY_ACQUIRED,
            &time,
        );
    }
    object
}
