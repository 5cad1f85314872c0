//! A Pod patch guarded by what the decision read, not by the whole Pod's
//! resourceVersion.
//!
//! An in-place update writes `InPlaceUpdateReady=False` to `pods/status` and then the new
//! images. The kubelet answers the condition within milliseconds (`Ready=False`), while
//! the image patch still waits in the client's rate limiter: a patch carrying the
//! resourceVersion of our own status write then fails with 409 almost every time (0.8 to
//! 1 conflict per Pod in `make bench-compare`), costing a GET and a second patch.
//!
//! The decision never depended on the Pod's status, only on the metadata and containers
//! the patch rewrites. So the merge patch is turned into a JSON Patch (RFC 6902) whose
//! `test` operations check exactly those: the Pod's UID, the current value of every
//! label and annotation it replaces or removes, and the name and image of every
//! container whose image it changes. A status write in between no longer matters; a
//! concurrent change of anything the patch touches still fails the whole patch (the
//! apiserver answers 422 and the controller decides again).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, TestOperation};
use kruise_api::pod::Pod;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The JSON Patch equivalent of `merge` (a strategic-merge or merge patch of a Pod that
/// carries `metadata.resourceVersion` as its guard, sets or removes labels and
/// annotations and sets container images by name) guarded as the module says; `None`
/// when `merge` holds anything else or asks for no guard (sent as it is then).
pub fn guarded_json_patch(pod: &Pod, merge: &Value) -> Option<Patch> {
    let top = merge.as_object()?;
    if top.keys().any(|k| k != "metadata" && k != "spec") {
        return None;
    }
    top.get("metadata")?.get("resourceVersion")?;
    let mut ops = vec![test(
        &["metadata", "uid"],
        Value::String(pod.metadata.uid.clone()?),
    )];
    if let Some(metadata) = top.get("metadata") {
        let metadata = metadata.as_object()?;
        for (field, changes) in metadata {
            let current = match field.as_str() {
                "resourceVersion" => continue,
                "labels" => pod.metadata.labels.as_ref(),
                "annotations" => pod.metadata.annotations.as_ref(),
                _ => return None,
            };
            ops.extend(map_ops(field, current, changes.as_object()?)?);
        }
    }
    if let Some(spec) = top.get("spec") {
        let spec = spec.as_object()?;
        if spec.keys().any(|k| k != "containers") {
            return None;
        }
        let containers = &pod.spec.as_ref()?.containers;
        for change in spec.get("containers")?.as_array()? {
            let change = change.as_object()?;
            if change.keys().any(|k| k != "name" && k != "image") {
                return None;
            }
            let name = change.get("name")?.as_str()?;
            let image = change.get("image")?.as_str()?;
            let (index, container) = containers
                .iter()
                .enumerate()
                .find(|(_, c)| c.name == name)?;
            let index = index.to_string();
            let at = |leaf: &str| ["spec", "containers", index.as_str(), leaf].map(String::from);
            ops.push(test(&at("name"), Value::String(name.to_string())));
            match &container.image {
                Some(old) => ops.push(test(&at("image"), Value::String(old.clone()))),
                None => return None,
            }
            ops.push(add(&at("image"), Value::String(image.to_string())));
        }
    }
    Some(Patch(ops))
}

/// Operations for one string map (`labels`, `annotations`): a key that exists is tested
/// and then replaced or removed; a new key is added (nothing to test); removing an
/// absent key is nothing. A map the Pod does not have yet (an Advanced DaemonSet's Pods
/// have no annotations until their first in-place update) is tested to be still absent
/// and added whole.
fn map_ops(
    field: &str,
    current: Option<&BTreeMap<String, String>>,
    changes: &Map<String, Value>,
) -> Option<Vec<PatchOperation>> {
    if changes.is_empty() {
        return Some(Vec::new());
    }
    let Some(current) = current else {
        return absent_map_ops(field, changes);
    };
    let mut ops = Vec::new();
    for (key, value) in changes {
        let path = ["metadata", field, key.as_str()];
        if let Some(old) = current.get(key) {
            ops.push(test(&path, Value::String(old.clone())));
        }
        match value {
            Value::String(_) => ops.push(add(&path, value.clone())),
            Value::Null if current.contains_key(key) => {
                ops.push(PatchOperation::Remove(RemoveOperation {
                    path: pointer(&path),
                }))
            }
            Value::Null => {}
            _ => return None,
        }
    }
    Some(ops)
}

/// `changes` to a map the Pod does not have: `test` that it is still absent, then `add`
/// the set keys as the whole map (removals of keys of an absent map are nothing).
/// The apiserver's JSON Patch (github.com/evanphx/json-patch, as Kubernetes vendors it)
/// passes a `test` of `null` at a member that does not exist, as RFC 6902 leaves open;
/// a map added meanwhile fails it.
fn absent_map_ops(field: &str, changes: &Map<String, Value>) -> Option<Vec<PatchOperation>> {
    let mut set = Map::new();
    for (key, value) in changes {
        match value {
            Value::String(_) => {
                set.insert(key.clone(), value.clone());
            }
            Value::Null => {}
            _ => return None,
        }
    }
    if set.is_empty() {
        return Some(Vec::new());
    }
    let path = ["metadata", field];
    Some(vec![
        test(&path, Value::Null),
        add(&path, Value::Object(set)),
    ])
}

fn pointer<S: AsRef<str>>(tokens: &[S]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().map(AsRef::as_ref))
}

fn test<S: AsRef<str>>(path: &[S], value: Value) -> PatchOperation {
    PatchOperation::Test(TestOperation {
        path: pointer(path),
        value,
    })
}

/// `add` replaces a member that exists and creates one that does not.
fn add<S: AsRef<str>>(path: &[S], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(path),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "p", "uid": "u1", "resourceVersion": "7",
                "labels": {"controller-revision-hash": "a", "keep": "x"},
                "annotations": {"old/state": "s"},
            },
            "spec": {"containers": [
                {"name": "main", "image": "nginx:1"},
                {"name": "side", "image": "busybox:1"},
            ]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap()
    }

    fn apply(target: &Value, patch: &Patch) -> Result<Value, json_patch::PatchError> {
        let mut doc = target.clone();
        json_patch::patch(&mut doc, patch).map(|()| doc)
    }

    fn in_place_patch() -> Value {
        json!({
            "metadata": {
                "resourceVersion": "7",
                "labels": {"controller-revision-hash": "b", "lifecycle/state": "Updating"},
                "annotations": {"old/state": null, "new~/key": "v"},
            },
            "spec": {"containers": [{"name": "side", "image": "busybox:2"}]},
        })
    }

    #[test]
    fn applies_like_the_merge_patch_and_ignores_status_changes() {
        let patch = guarded_json_patch(&pod(), &in_place_patch()).unwrap();
        // The kubelet wrote a status in between: the guard does not look at it.
        let mut now = serde_json::to_value(pod()).unwrap();
        now["metadata"]["resourceVersion"] = json!("8");
        now["status"]["conditions"][0]["status"] = json!("False");
        let after = apply(&now, &patch).unwrap();
        assert_eq!(after["metadata"]["labels"]["controller-revision-hash"], "b");
        assert_eq!(after["metadata"]["labels"]["lifecycle/state"], "Updating");
        assert_eq!(after["metadata"]["labels"]["keep"], "x");
        assert_eq!(after["metadata"]["annotations"], json!({"new~/key": "v"}));
        assert_eq!(after["spec"]["containers"][0]["image"], "nginx:1");
        assert_eq!(after["spec"]["containers"][1]["image"], "busybox:2");
    }

    #[test]
    fn fails_when_what_the_decision_read_has_changed() {
        let patch = guarded_json_patch(&pod(), &in_place_patch()).unwrap();
        let base = serde_json::to_value(pod()).unwrap();
        let changes: [(&str, Value); 4] = [
            ("/metadata/labels/controller-revision-hash", json!("c")),
            ("/spec/containers/1/image", json!("busybox:9")),
            ("/metadata/uid", json!("u2")),
            ("/metadata/annotations/old~1state", json!("t")),
        ];
        for (path, value) in changes {
            let mut now = base.clone();
            *now.pointer_mut(path).unwrap() = value;
            assert!(apply(&now, &patch).is_err(), "{path} changed");
        }
        // The containers reordered: the name test catches it.
        let mut now = base.clone();
        now["spec"]["containers"].as_array_mut().unwrap().reverse();
        assert!(apply(&now, &patch).is_err());
    }

    #[test]
    fn anything_else_keeps_the_resource_version_guard() {
        let p = pod();
        for merge in [
            json!({"metadata": {"resourceVersion": "7", "ownerReferences": []}}),
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"containers": [{"name": "main", "image": "x", "env": []}]}}),
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"containers": [{"name": "missing", "image": "x"}]}}),
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"initContainers": []}}),
            json!({"metadata": {"resourceVersion": "7"}, "status": {}}),
            json!({"metadata": {"resourceVersion": "7", "labels": {"a": 1}}}),
            // No guard asked for: none added.
            json!({"metadata": {"labels": {"a": "b"}}}),
        ] {
            assert!(guarded_json_patch(&p, &merge).is_none(), "{merge}");
        }
        let mut bare = pod();
        bare.metadata.annotations = None;
        let adds_a_number = json!({"metadata": {"resourceVersion": "7", "annotations": {"a": 1}}});
        assert!(guarded_json_patch(&bare, &adds_a_number).is_none());
        bare.metadata.uid = None;
        let guard_only = json!({"metadata": {"resourceVersion": "7"}});
        assert!(guarded_json_patch(&bare, &guard_only).is_none());
    }

    #[test]
    fn a_map_the_pod_lacks_is_tested_absent_and_added_whole() {
        let mut bare = pod();
        bare.metadata.annotations = None;
        let merge = json!({"metadata": {"resourceVersion": "7",
            "annotations": {"a": "b", "gone": null, "c~/d": "e"}}});
        let patch = guarded_json_patch(&bare, &merge).unwrap();
        let ops = serde_json::to_value(&patch).unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/metadata/annotations", "value": null},
                {"op": "add", "path": "/metadata/annotations", "value": {"a": "b", "c~/d": "e"}},
            ])
        );
        // Only removals of an absent map: nothing to write but the UID test.
        let removes = json!({"metadata": {"resourceVersion": "7", "annotations": {"gone": null}}});
        let patch = guarded_json_patch(&bare, &removes).unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "test", "path": "/metadata/uid", "value": "u1"}])
        );
        // The map appeared meanwhile: the test of `null` fails.
        let mut now = serde_json::to_value(pod()).unwrap();
        now["metadata"]["annotations"] = json!({"x": "y"});
        let patch = guarded_json_patch(&bare, &merge).unwrap();
        assert!(apply(&now, &patch).is_err());
    }
}
