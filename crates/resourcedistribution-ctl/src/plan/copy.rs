//! One distributed copy: what it must look like (upstream's `makeResourceObject` and
//! `mergeMetadata`, openkruise/kruise v1.9.0 pkg/controller/resourcedistribution/utils.go), whether
//! an existing object is ours and in sync, and the object an update writes.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kruise_api::keys;
use serde_json::{Map, Value, json};

/// The source of the copies: one ResourceDistribution's identity and `spec.resource`.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    /// The RD's name (annotation `kruise.io/resourcedistribution.resource.from`).
    pub rd_name: String,
    pub rd_uid: String,
    /// `spec.resource` as written.
    pub resource: Value,
}

/// What an existing object in a target namespace is to this RD.
#[derive(Clone, Debug, PartialEq)]
pub enum Existing {
    /// Not controlled by this RD: left untouched, reported as `ConflictOccurred`.
    Conflict,
    /// Ours, and its content matches the source.
    InSync,
    /// Ours, with different content: write this object (PUT, with its resourceVersion).
    Update(Value),
}

impl Source {
    pub fn kind(&self) -> &str {
        self.resource
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn api_version(&self) -> &str {
        self.resource
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The name every copy has.
    pub fn name(&self) -> &str {
        self.resource
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `kruise.io/resourcedistribution.resource.hashcode`: sha256 hex of `spec.resource`
    /// (serde_json writes object keys sorted, so equal resources hash equal).
    pub fn hashcode(&self) -> String {
        let bytes = serde_json::to_vec(&self.resource).unwrap_or_default();
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The copy to create in `namespace`: the source's content and its name, labels,
    /// annotations and finalizers, plus the RD's annotations, the managed-by label and a
    /// controller ownerReference to the RD (deleting the RD collects every copy).
    pub fn desired(&self, namespace: &str) -> Value {
        let mut object = self.resource.clone();
        let source_meta = self.resource.get("metadata").cloned().unwrap_or(json!({}));
        let string_map = |key: &str| -> Map<String, Value> {
            source_meta
                .get(key)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let mut labels = string_map("labels");
        labels.insert(
            crate::labels::MANAGED_BY_UID.into(),
            Value::String(self.rd_uid.clone()),
        );
        let mut annotations = string_map("annotations");
        annotations.insert(
            keys::RD_RESOURCE_FROM.into(),
            Value::String(self.rd_name.clone()),
        );
        annotations.insert(
            keys::RD_RESOURCE_HASHCODE.into(),
            Value::String(self.hashcode()),
        );
        let mut metadata = Map::new();
        metadata.insert("name".into(), Value::String(self.name().to_string()));
        metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        metadata.insert("labels".into(), Value::Object(labels));
        metadata.insert("annotations".into(), Value::Object(annotations));
        if let Some(finalizers) = source_meta.get("finalizers").filter(|f| f.is_array()) {
            metadata.insert("finalizers".into(), finalizers.clone());
        }
        metadata.insert("ownerReferences".into(), json!([self.owner_reference()]));
        object["metadata"] = Value::Object(metadata);
        if let Some(o) = object.as_object_mut() {
            o.remove("status");
        }
        object
    }

    fn owner_reference(&self) -> Value {
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "ResourceDistribution",
            "name": self.rd_name,
            "uid": self.rd_uid,
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }

    /// Whether `existing` (an object of the source's kind and name, as JSON) is ours and in sync,
    /// ours and stale, or someone else's. Only the content counts (everything but metadata and
    /// status, as upstream's `needToUpdate`); a copy that lacks the managed-by label is updated
    /// too, so the controller's label-selected watch sees it from then on.
    pub fn judge(&self, existing: &Value) -> Existing {
        if controller_uid(existing).as_deref() != Some(self.rd_uid.as_str()) {
            return Existing::Conflict;
        }
        let labelled = existing
            .pointer("/metadata/labels")
            .and_then(|l| l.get(crate::labels::MANAGED_BY_UID))
            .and_then(Value::as_str)
            == Some(self.rd_uid.as_str());
        if labelled && content(self.kind(), &self.resource) == content(self.kind(), existing) {
            return Existing::InSync;
        }
        Existing::Update(self.updated(existing))
    }

    /// The update of an owned copy: the desired object, with the existing labels,
    /// annotations and finalizers merged in (ours win), the existing ownerReferences
    /// kept beside ours, and the existing resourceVersion (an optimistic write).
    #[allow(
        clippy::expect_used,
        reason = "`desired` always builds metadata.labels and metadata.annotations as objects"
    )]
    pub fn updated(&self, existing: &Value) -> Value {
        let namespace = existing
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut object = self.desired(namespace);
        let meta = &mut object["metadata"];
        for key in ["labels", "annotations"] {
            if let Some(old) = existing
                .pointer(&format!("/metadata/{key}"))
                .and_then(Value::as_object)
            {
                let merged = meta[key]
                    .as_object_mut()
                    .expect("desired has labels and annotations");
                for (k, v) in old {
                    merged.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        let old_finalizers: Vec<Value> = existing
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !old_finalizers.is_empty() {
            let mut finalizers = meta
                .get("finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for f in old_finalizers {
                if !finalizers.contains(&f) {
                    finalizers.push(f);
                }
            }
            meta["finalizers"] = Value::Array(finalizers);
        }
        let others: Vec<Value> = existing
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|o| o.get("uid").and_then(Value::as_str) != Some(self.rd_uid.as_str()))
            .cloned()
            .collect();
        if let Some(owners) = meta["ownerReferences"].as_array_mut() {
            owners.extend(others);
        }
        if let Some(rv) = existing.pointer("/metadata/resourceVersion") {
            meta["resourceVersion"] = rv.clone();
        }
        object
    }
}

/// The UID of the object's controller owner.
pub fn controller_uid(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|o| o.get("uid"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What a copy holds, as the apiserver stores it: the object without apiVersion, kind,
/// metadata and status, read through the typed Secret or ConfigMap so that the source's
/// `stringData` compares equal to the `data` the apiserver made of it, base64 compares
/// by value, Secret `type` defaults to Opaque and empty maps count as absent. An object
/// that does not read as its kind compares as written.
pub fn content(kind: &str, object: &Value) -> Value {
    let normalized = match kind {
        "Secret" => serde_json::from_value::<Secret>(object.clone())
            .ok()
            .and_then(|s| serde_json::to_value(normalize_secret(s)).ok()),
        "ConfigMap" => serde_json::from_value::<ConfigMap>(object.clone())
            .ok()
            .and_then(|c| serde_json::to_value(normalize_configmap(c)).ok()),
        _ => None,
    };
    let mut content = normalized.unwrap_or_else(|| object.clone());
    if let Some(o) = content.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata", "status"] {
            o.remove(key);
        }
    }
    content
}

fn normalize_secret(mut s: Secret) -> Secret {
    if let Some(string_data) = s.string_data.take() {
        let data = s.data.get_or_insert_with(BTreeMap::new);
        for (k, v) in string_data {
            data.insert(k, ByteString(v.into_bytes()));
        }
    }
    if s.data.as_ref().is_some_and(BTreeMap::is_empty) {
        s.data = None;
    }
    if s.type_.as_deref().is_none_or(str::is_empty) {
        s.type_ = Some("Opaque".into());
    }
    s
}

fn normalize_configmap(mut c: ConfigMap) -> ConfigMap {
    if c.data.as_ref().is_some_and(BTreeMap::is_empty) {
        c.data = None;
    }
    if c.binary_data.as_ref().is_some_and(BTreeMap::is_empty) {
        c.binary_data = None;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn source() -> Source {
        Source {
            rd_name: "rd-secret".into(),
            rd_uid: "uid-1".into(),
            resource: json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "app-token", "namespace": "ignored", "labels": {"app": "demo"}},
                "type": "Opaque",
                "data": {"token": "ZGVtby10b2tlbg=="},
            }),
        }
    }

    #[test]
    fn the_copy_carries_the_rd_annotations_label_and_controller_owner() {
        let s = source();
        let copy = s.desired("ns-1");
        assert_eq!(copy["metadata"]["name"], "app-token");
        assert_eq!(copy["metadata"]["namespace"], "ns-1");
        assert_eq!(copy["metadata"]["labels"]["app"], "demo");
        assert_eq!(
            copy["metadata"]["labels"][crate::labels::MANAGED_BY_UID],
            "uid-1"
        );
        let annotations = &copy["metadata"]["annotations"];
        assert_eq!(annotations[keys::RD_RESOURCE_FROM], "rd-secret");
        let hash = annotations[keys::RD_RESOURCE_HASHCODE].as_str().unwrap();
        assert_eq!(hash.len(), 64);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(controller_uid(&copy).as_deref(), Some("uid-1"));
        assert_eq!(copy["data"]["token"], "ZGVtby10b2tlbg==");
    }

    #[test]
    fn the_hashcode_follows_the_resource() {
        let a = source();
        let mut b = source();
        b.resource["data"]["token"] = json!("b3RoZXI=");
        assert_ne!(a.hashcode(), b.hashcode());
        assert_eq!(a.hashcode(), source().hashcode());
    }

    #[test]
    fn an_object_we_do_not_control_is_a_conflict() {
        let s = source();
        let mut foreign = s.desired("ns-3");
        foreign["metadata"]["ownerReferences"] = json!([]);
        assert_eq!(s.judge(&foreign), Existing::Conflict);
        foreign["metadata"]["ownerReferences"] =
            json!([{"uid": "uid-1", "controller": false, "kind": "ResourceDistribution"}]);
        assert_eq!(s.judge(&foreign), Existing::Conflict);
    }

    /// Only metadata differs → no update.
    #[test]
    fn metadata_differences_need_no_update() {
        let s = source();
        let mut copy = s.desired("ns-1");
        copy["metadata"]["labels"]["extra"] = json!("x");
        copy["metadata"]["annotations"]["note"] = json!("y");
        copy["metadata"]["resourceVersion"] = json!("12");
        assert_eq!(s.judge(&copy), Existing::InSync);
    }

    /// A changed data field → update, keeping foreign labels and annotations.
    #[test]
    fn a_changed_data_field_is_restored_keeping_foreign_metadata() {
        let s = source();
        let mut copy = s.desired("ns-1");
        copy["data"]["token"] = json!("ZWRpdGVk");
        copy["metadata"]["labels"]["app"] = json!("overridden");
        copy["metadata"]["labels"]["team"] = json!("blue");
        copy["metadata"]["annotations"]["note"] = json!("keep me");
        copy["metadata"]["finalizers"] = json!(["example.com/keep"]);
        copy["metadata"]["ownerReferences"]
            .as_array_mut()
            .unwrap()
            .push(json!({"uid": "other", "kind": "Thing", "name": "t", "apiVersion": "x/v1"}));
        copy["metadata"]["resourceVersion"] = json!("42");
        let Existing::Update(updated) = s.judge(&copy) else {
            panic!("expected an update");
        };
        assert_eq!(updated["data"]["token"], "ZGVtby10b2tlbg==");
        let meta = &updated["metadata"];
        assert_eq!(meta["labels"]["app"], "demo", "the RD's own label wins");
        assert_eq!(meta["labels"]["team"], "blue");
        assert_eq!(meta["annotations"]["note"], "keep me");
        assert_eq!(meta["finalizers"], json!(["example.com/keep"]));
        assert_eq!(meta["ownerReferences"].as_array().unwrap().len(), 2);
        assert_eq!(meta["resourceVersion"], "42");
    }

    #[test]
    fn string_data_and_default_type_compare_as_the_apiserver_stores_them() {
        let s = Source {
            resource: json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "app-token"},
                "stringData": {"token": "demo-token"},
            }),
            ..source()
        };
        let mut stored = s.desired("ns-1");
        let stored_obj = stored.as_object_mut().unwrap();
        stored_obj.remove("stringData");
        stored_obj.insert("data".into(), json!({"token": "ZGVtby10b2tlbg=="}));
        stored_obj.insert("type".into(), json!("Opaque"));
        assert_eq!(s.judge(&stored), Existing::InSync);
    }

    #[test]
    fn an_unlabelled_copy_of_ours_is_rewritten_with_the_label() {
        let s = source();
        let mut copy = s.desired("ns-1");
        copy["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove(crate::labels::MANAGED_BY_UID);
        let Existing::Update(updated) = s.judge(&copy) else {
            panic!("expected an update");
        };
        assert_eq!(
            updated["metadata"]["labels"][crate::labels::MANAGED_BY_UID],
            "uid-1"
        );
    }

    #[test]
    fn configmap_empty_maps_count_as_absent() {
        let a =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
        let b = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(content("ConfigMap", &a), content("ConfigMap", &b));
        let c = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
        assert_ne!(content("ConfigMap", &b), content("ConfigMap", &c));
    }
}
