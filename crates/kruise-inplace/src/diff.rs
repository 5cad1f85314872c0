//! What changed between two revisions, and whether it can go in place.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Label/annotation changes: `Some(v)` sets, `None` removes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataChanges {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, Option<String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, Option<String>>,
}

impl MetadataChanges {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// An in-place update: what to change on a Pod to move it to `revision`. Serialized into
/// the `apps.kruise.io/inplace-update-grace` annotation while a grace period runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSpec {
    /// The target revision name (e.g. `cs-demo-7cb9c88699`).
    pub revision: String,
    /// Container name -> new image.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_images: BTreeMap<String, String>,
    /// Containers whose env reads changed labels/annotations (restarted by the node agent),
    /// with the metadata they read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_ref_metadata: BTreeMap<String, ObjectMeta>,
    /// Container name -> the cpu/memory requests and limits that change in place
    /// (`InPlaceWorkloadVerticalScaling`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_resources: crate::resources::ResourceChanges,
    #[serde(default, skip_serializing_if = "MetadataChanges::is_empty")]
    pub metadata: MetadataChanges,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_env_from_metadata: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grace_seconds: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl UpdateSpec {
    /// Only resources change: no image, no container restarted for its env (upstream's
    /// `VerticalUpdateOnly`).
    pub fn vertical_update_only(&self) -> bool {
        !self.container_resources.is_empty()
            && self.container_images.is_empty()
            && !self.update_env_from_metadata
    }
}

/// The gates that widen what goes in place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiffOptions {
    /// `InPlaceUpdateEnvFromMetadata`: a changed label/annotation read by a container's
    /// env (`fieldRef: metadata.labels['k']`) marks that container for a restart instead
    /// of disqualifying the update.
    pub env_from_metadata: bool,
    /// `InPlaceWorkloadVerticalScaling`: replaced cpu/memory requests and limits resize
    /// the containers (`pods/resize`) instead of recreating the Pod, unless the Pod's QoS
    /// class changes.
    pub vertical_scaling: bool,
}

/// Why a change cannot go in place.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotInPlace(pub String);

/// Decides whether moving from `old_data` to `new_data` (revision data,
/// `{"spec":{"template":…}}`) can go in place, and what it changes.
///
/// `options` says which gates widen what qualifies ([`DiffOptions`]).
pub fn diff(
    old_data: &Value,
    new_data: &Value,
    new_revision: &str,
    options: DiffOptions,
) -> Result<UpdateSpec, NotInPlace> {
    let env_from_metadata = options.env_from_metadata;
    let old_t = template(old_data);
    let new_t = template(new_data);
    let mut spec = UpdateSpec {
        revision: new_revision.to_string(),
        ..Default::default()
    };

    // Metadata: any change goes in place.
    spec.metadata = MetadataChanges {
        labels: map_changes(
            old_t.pointer("/metadata/labels"),
            new_t.pointer("/metadata/labels"),
        ),
        annotations: map_changes(
            old_t.pointer("/metadata/annotations"),
            new_t.pointer("/metadata/annotations"),
        ),
    };

    // Spec: equal once container images are set aside.
    let old_spec = old_t.get("spec").cloned().unwrap_or(Value::Null);
    let new_spec = new_t.get("spec").cloned().unwrap_or(Value::Null);
    let (mut old_masked, _) = mask_images(&old_spec);
    let (mut new_masked, new_images) = mask_images(&new_spec);
    if options.vertical_scaling {
        spec.container_resources = crate::resources::mask_resizes(&mut old_masked, &mut new_masked);
    }
    if old_masked != new_masked {
        let op = json_patch::diff(&old_masked, &new_masked)
            .0
            .into_iter()
            .next()
            .map(|op| format!("{} /spec/template/spec{}", op_name(&op), op_path(&op)))
            .unwrap_or_else(|| "a change".into());
        return Err(NotInPlace(format!("{op} can not be updated in place")));
    }
    if !spec.container_resources.is_empty() {
        let (from, to) = (
            crate::resources::qos_class(&old_spec),
            crate::resources::qos_class(&new_spec),
        );
        if from != to {
            return Err(NotInPlace(format!(
                "the Pod QoS class changes from {from} to {to}: resources can not be resized in place"
            )));
        }
    }
    let (_, old_images) = mask_images(&old_spec);
    for (name, image) in &new_images {
        if old_images.get(name) != Some(image) {
            spec.container_images.insert(name.clone(), image.clone());
        }
    }

    // Containers whose env reads changed metadata.
    if env_from_metadata && !spec.metadata.is_empty() {
        for container in new_spec
            .get("containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let refs = env_metadata_refs(container);
            let mut meta = ObjectMeta::default();
            for (kind, key) in refs {
                let change = match kind {
                    MetaKind::Label => spec.metadata.labels.get(&key),
                    MetaKind::Annotation => spec.metadata.annotations.get(&key),
                };
                if let Some(Some(value)) = change {
                    let target = match kind {
                        MetaKind::Label => meta.labels.get_or_insert_with(Default::default),
                        MetaKind::Annotation => {
                            meta.annotations.get_or_insert_with(Default::default)
                        }
                    };
                    target.insert(key, value.clone());
                }
            }
            if meta.labels.is_some() || meta.annotations.is_some() {
                spec.container_ref_metadata.insert(name.to_string(), meta);
                spec.update_env_from_metadata = true;
            }
        }
    }
    Ok(spec)
}

fn template(data: &Value) -> Value {
    let mut t = data
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    if let Value::Object(m) = &mut t {
        m.remove("$patch");
    }
    t
}

fn map_changes(old: Option<&Value>, new: Option<&Value>) -> BTreeMap<String, Option<String>> {
    let as_map = |v: Option<&Value>| -> BTreeMap<String, String> {
        v.and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (old, new) = (as_map(old), as_map(new));
    let mut changes = BTreeMap::new();
    for (k, v) in &new {
        if old.get(k) != Some(v) {
            changes.insert(k.clone(), Some(v.clone()));
        }
    }
    for k in old.keys() {
        if !new.contains_key(k) {
            changes.insert(k.clone(), None);
        }
    }
    changes
}

/// The spec with every container image blanked, and name -> image.
fn mask_images(spec: &Value) -> (Value, BTreeMap<String, String>) {
    let mut masked = spec.clone();
    let mut images = BTreeMap::new();
    if let Some(containers) = masked.get_mut("containers").and_then(Value::as_array_mut) {
        for c in containers {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Some(image) = c.get_mut("image") {
                images.insert(name, image.as_str().unwrap_or_default().to_string());
                *image = Value::Null;
            }
        }
    }
    (masked, images)
}

enum MetaKind {
    Label,
    Annotation,
}

/// `metadata.labels['k']` / `metadata.annotations['k']` read by a container's env.
fn env_metadata_refs(container: &Value) -> Vec<(MetaKind, String)> {
    let mut refs = Vec::new();
    for env in container
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(path) = env
            .pointer("/valueFrom/fieldRef/fieldPath")
            .and_then(Value::as_str)
        else {
            continue;
        };
        let parse = |prefix: &str| {
            path.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix("']"))
                .map(str::to_string)
        };
        if let Some(key) = parse("metadata.labels['") {
            refs.push((MetaKind::Label, key));
        } else if let Some(key) = parse("metadata.annotations['") {
            refs.push((MetaKind::Annotation, key));
        }
    }
    refs
}

fn op_name(op: &json_patch::PatchOperation) -> &'static str {
    match op {
        json_patch::PatchOperation::Add(_) => "add",
        json_patch::PatchOperation::Remove(_) => "remove",
        json_patch::PatchOperation::Replace(_) => "replace",
        json_patch::PatchOperation::Move(_) => "move",
        json_patch::PatchOperation::Copy(_) => "copy",
        json_patch::PatchOperation::Test(_) => "test",
    }
}

fn op_path(op: &json_patch::PatchOperation) -> String {
    match op {
        json_patch::PatchOperation::Add(o) => o.path.to_string(),
        json_patch::PatchOperation::Remove(o) => o.path.to_string(),
        json_patch::PatchOperation::Replace(o) => o.path.to_string(),
        json_patch::PatchOperation::Move(o) => o.path.to_string(),
        json_patch::PatchOperation::Copy(o) => o.path.to_string(),
        json_patch::PatchOperation::Test(o) => o.path.to_string(),
    }
}

/// A change of `template.spec` that `InPlaceOnly` does not allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InPlaceOnlyViolation {
    pub op: &'static str,
    pub path: String,
}

impl std::fmt::Display for InPlaceOnlyViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "only allowed to update images in spec for InPlaceOnly, but found {} {}",
            self.op, self.path
        )
    }
}

/// For admission of `InPlaceOnly` workloads: the JSON diff of the old and new
/// `template.spec` may only `replace /containers/<i>/image`.
pub fn in_place_only_violation(old_spec: &Value, new_spec: &Value) -> Option<InPlaceOnlyViolation> {
    json_patch::diff(old_spec, new_spec)
        .0
        .into_iter()
        .find_map(|op| {
            let path = op_path(&op);
            let is_image = matches!(op, json_patch::PatchOperation::Replace(_)) && {
                let parts: Vec<&str> = path.split('/').collect();
                parts.len() == 4
                    && parts[1] == "containers"
                    && parts[2].parse::<usize>().is_ok()
                    && parts[3] == "image"
            };
            (!is_image).then(|| InPlaceOnlyViolation {
                op: op_name(&op),
                path,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ENV: DiffOptions = DiffOptions {
        env_from_metadata: true,
        vertical_scaling: false,
    };
    const VPA: DiffOptions = DiffOptions {
        env_from_metadata: false,
        vertical_scaling: true,
    };

    fn data(labels: Value, containers: Value) -> Value {
        json!({"spec": {"template": {"$patch": "replace", "metadata": {"labels": labels}, "spec": {"containers": containers}}}})
    }

    #[test]
    fn image_change_goes_in_place() {
        let old = data(
            json!({"app": "cs"}),
            json!([{"name": "nginx", "image": "nginx:alpine"}, {"name": "side", "image": "busybox"}]),
        );
        let new = data(
            json!({"app": "cs"}),
            json!([{"name": "nginx", "image": "nginx:1.7.9"}, {"name": "side", "image": "busybox"}]),
        );
        let spec = diff(&old, &new, "cs-2", ENV).unwrap();
        assert_eq!(
            spec.container_images,
            BTreeMap::from([("nginx".to_string(), "nginx:1.7.9".to_string())])
        );
        assert!(spec.metadata.is_empty());
        assert_eq!(spec.revision, "cs-2");
    }

    #[test]
    fn metadata_change_goes_in_place() {
        let old = data(
            json!({"app": "cs", "old": "x"}),
            json!([{"name": "c", "image": "a"}]),
        );
        let new = data(
            json!({"app": "cs", "tier": "web"}),
            json!([{"name": "c", "image": "a"}]),
        );
        let spec = diff(&old, &new, "r", ENV).unwrap();
        assert!(spec.container_images.is_empty());
        assert_eq!(spec.metadata.labels.get("tier"), Some(&Some("web".into())));
        assert_eq!(spec.metadata.labels.get("old"), Some(&None));
        assert!(!spec.update_env_from_metadata);
    }

    #[test]
    fn env_or_resources_change_needs_recreate() {
        let old = data(json!({}), json!([{"name": "c", "image": "a"}]));
        for changed in [
            json!([{"name": "c", "image": "a", "env": [{"name": "X", "value": "1"}]}]),
            json!([{"name": "c", "image": "a", "resources": {"limits": {"cpu": "1"}}}]),
            json!([{"name": "c", "image": "a"}, {"name": "d", "image": "b"}]),
            json!([{"name": "renamed", "image": "a"}]),
        ] {
            let new = data(json!({}), changed.clone());
            assert!(diff(&old, &new, "r", ENV).is_err(), "{changed}");
        }
    }

    #[test]
    fn with_vertical_scaling_a_resize_goes_in_place_unless_qos_changes() {
        let c = |cpu: &str, image: &str| json!([{"name": "c", "image": image, "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": "4"}}}]);
        let old = data(json!({}), c("1", "a"));
        let new = data(json!({}), c("2", "b"));
        assert!(diff(&old, &new, "r", ENV).is_err(), "gate off: recreate");
        let spec = diff(&old, &new, "r", VPA).unwrap();
        assert_eq!(spec.container_images["c"], "b");
        assert_eq!(
            spec.container_resources["c"].requests.as_ref().unwrap()["cpu"].0,
            "2"
        );
        assert!(!spec.vertical_update_only(), "an image changes too");
        // Burstable -> Guaranteed: a new Pod.
        let guaranteed = data(
            json!({}),
            json!([{"name": "c", "image": "a", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "1Gi"}}}]),
        );
        let burstable = data(
            json!({}),
            json!([{"name": "c", "image": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "1Gi"}}}]),
        );
        let err = diff(&burstable, &guaranteed, "r", VPA).unwrap_err();
        assert!(
            err.0
                .contains("QoS class changes from Burstable to Guaranteed"),
            "{err}"
        );
        // Adding a limit is not a resize.
        let added = data(
            json!({}),
            json!([{"name": "c", "image": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4", "memory": "1Gi"}}}]),
        );
        assert!(diff(&old, &added, "r", VPA).is_err());
    }

    #[test]
    fn env_reading_changed_metadata_restarts_that_container() {
        let env = json!([{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['version']"}}}]);
        let old = data(
            json!({"version": "1"}),
            json!([{"name": "c", "image": "a", "env": env}, {"name": "d", "image": "b"}]),
        );
        let new = data(
            json!({"version": "2"}),
            json!([{"name": "c", "image": "a", "env": env}, {"name": "d", "image": "b"}]),
        );
        let spec = diff(&old, &new, "r", ENV).unwrap();
        assert!(spec.update_env_from_metadata);
        assert_eq!(
            spec.container_ref_metadata["c"].labels.as_ref().unwrap()["version"],
            "2"
        );
        assert!(!spec.container_ref_metadata.contains_key("d"));
        let spec = diff(&old, &new, "r", DiffOptions::default()).unwrap();
        assert!(
            !spec.update_env_from_metadata,
            "gate off: plain metadata update"
        );
    }

    #[test]
    fn in_place_only_allows_only_image_replacements() {
        let old = json!({"containers": [{"name": "c", "image": "a"}]});
        assert_eq!(
            in_place_only_violation(&old, &json!({"containers": [{"name": "c", "image": "b"}]})),
            None
        );
        let v = in_place_only_violation(&old, &json!({"containers": [{"name": "c", "image": "a", "env": [{"name": "X", "value": "1"}]}]})).unwrap();
        assert_eq!(
            v.to_string(),
            "only allowed to update images in spec for InPlaceOnly, but found add /containers/0/env"
        );
    }

    #[test]
    fn update_spec_serializes_compactly() {
        let spec = UpdateSpec {
            revision: "r".into(),
            container_images: BTreeMap::from([("c".into(), "i".into())]),
            grace_seconds: 10,
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&spec).unwrap(),
            r#"{"revision":"r","containerImages":{"c":"i"},"graceSeconds":10}"#
        );
    }
}
