//! Conversion between `apps.kruise.io/v1alpha1` (stored, what the controllers read) and
//! `apps.kruise.io/v1beta1` (served) for the kinds whose shapes differ: CloneSet,
//! SidecarSet and Advanced DaemonSet here; ResourceDistribution, PersistentPodState,
//! WorkloadSpread and UnitedDeployment (renamed fields, a restructured status) in
//! `renamed`; ContainerRecreateRequest (annotations that v1beta1 shows in its status)
//! in `crr`; PodUnavailableBudget (`policy.kruise.io`: annotations that v1beta1 shows
//! as spec fields) in [`podunavailablebudget`]. The controllers serve these functions as
//! CRD conversion webhooks.
//!
//! They work on JSON, so fields neither version models pass through; only labels and
//! annotations of `metadata` change (the apiserver refuses any other metadata change).
//! A v1alpha1 object converted to v1beta1 and back is the object itself, up to what
//! v1alpha1 defaulting writes anyway (an absent update strategy type becomes
//! `ReCreate`, empty strategy objects are dropped). Where OpenKruise 1.9 loses
//! information (v1beta1 `excludePreparingDelete`, the `rollingUpdate` settings of an
//! OnDelete CloneSet, the `imagePreDownload*` fields of a v1alpha1 CloneSet) these
//! functions keep it: in the label v1alpha1 reads it from, and in the v1alpha1 fields.

use serde_json::{Map, Value, json};

use crate::keys;

pub const V1ALPHA1: &str = "apps.kruise.io/v1alpha1";
pub const V1BETA1: &str = "apps.kruise.io/v1beta1";

/// Where each converting controller serves its conversion route; the CRDs name the same
/// paths ([`webhook_conversion`]).
pub mod path {
    pub const CLONESET: &str = "/convert-cloneset";
    pub const SIDECARSET: &str = "/convert-sidecarset";
    pub const DAEMONSET: &str = "/convert-daemonset";
    pub const CONTAINERRECREATEREQUEST: &str = "/convert-containerrecreaterequest";
    pub const PERSISTENTPODSTATE: &str = "/convert-persistentpodstate";
    pub const RESOURCEDISTRIBUTION: &str = "/convert-resourcedistribution";
    pub const UNITEDDEPLOYMENT: &str = "/convert-uniteddeployment";
    pub const WORKLOADSPREAD: &str = "/convert-workloadspread";
    pub const PODUNAVAILABLEBUDGET: &str = "/convert-podunavailablebudget";
}

/// The namespace the kustomize overlays install into (the Helm chart rewrites the CRDs'
/// conversion Service namespace to its `installation.namespace`).
pub const WEBHOOK_NAMESPACE: &str = "kruise-system";

/// The webhook Service of the controller that converts `kind`: `<kind>-webhook`, in lower
/// case, as kustomize/controllers/*/services.yaml and the chart name them.
pub fn webhook_service(kind: &str) -> String {
    format!("{}-webhook", kind.to_ascii_lowercase())
}

/// `spec.conversion` as shipped for a kind converted by webhook: the controller's
/// Service on port 443 at `/convert-<kind>`; the controller fills in the caBundle (or,
/// run outside the cluster, its URL) when it registers.
pub fn webhook_conversion(
    kind: &str,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, ServiceReference, WebhookClientConfig, WebhookConversion,
    };
    CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: WEBHOOK_NAMESPACE.into(),
                    name: webhook_service(kind),
                    path: Some(format!("/convert-{}", kind.to_ascii_lowercase())),
                    port: Some(443),
                }),
                ..Default::default()
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    }
}

/// The label every namespace carries with its own name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The image pre-download fields of `inPlaceUpdateStrategy` (both versions) and the
/// v1alpha1 annotations that give the same settings.
const PRE_DOWNLOAD: [(&str, &str); 3] = [
    (
        "imagePreDownloadParallelism",
        keys::IMAGE_PREDOWNLOAD_PARALLELISM,
    ),
    (
        "imagePreDownloadTimeoutSeconds",
        keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS,
    ),
    (
        "imagePreDownloadMinUpdatedReadyPods",
        keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS,
    ),
];

/// Converts a CloneSet (JSON, either version) to `desired` (`apps.kruise.io/<version>`).
pub fn convert_cloneset(object: Value, desired: &str) -> Result<Value, String> {
    convert(object, desired, cloneset_to_v1beta1, cloneset_to_v1alpha1)
}

/// Converts a SidecarSet (JSON, either version) to `desired`.
pub fn convert_sidecarset(object: Value, desired: &str) -> Result<Value, String> {
    convert(
        object,
        desired,
        sidecarset_to_v1beta1,
        sidecarset_to_v1alpha1,
    )
}

/// Converts an Advanced DaemonSet (JSON, either version) to `desired`.
pub fn convert_daemonset(object: Value, desired: &str) -> Result<Value, String> {
    convert(object, desired, daemonset_to_v1beta1, daemonset_to_v1alpha1)
}

fn convert(
    object: Value,
    desired: &str,
    to_beta: fn(Value) -> Value,
    to_alpha: fn(Value) -> Value,
) -> Result<Value, String> {
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match (from.as_str(), desired) {
        (f, d) if f == d => Ok(object),
        (V1ALPHA1, V1BETA1) => Ok(to_beta(object)),
        (V1BETA1, V1ALPHA1) => Ok(to_alpha(object)),
        (f, d) => Err(format!("cannot convert from {f:?} to {d:?}")),
    }
}

fn metadata_map<'a>(object: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    object
        .get_mut("metadata")?
        .get_mut(key)
        .and_then(Value::as_object_mut)
}

fn metadata_get(object: &Value, key: &str, name: &str) -> Option<String> {
    object
        .get("metadata")?
        .get(key)?
        .get(name)?
        .as_str()
        .map(str::to_string)
}

fn metadata_set(object: &mut Value, key: &str, name: &str, value: &str) {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    let meta = &mut object["metadata"];
    if !meta.get(key).is_some_and(Value::is_object) {
        meta[key] = json!({});
    }
    meta[key][name] = json!(value);
}

fn metadata_remove(object: &mut Value, key: &str, name: &str) {
    if let Some(map) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut(key))
        .and_then(Value::as_object_mut)
    {
        map.remove(name);
    }
}

/// Removes `key` from `map` as an object (absent or not an object: empty).
fn take_object(map: &mut Map<String, Value>, key: &str) -> Map<String, Value> {
    match map.remove(key) {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    }
}

fn spec_of(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object.get_mut("spec").and_then(Value::as_object_mut)
}

/// v1alpha1 CloneSet → v1beta1.
pub fn cloneset_to_v1beta1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1BETA1);
    let exclude = metadata_get(
        &object,
        "labels",
        keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE,
    )
    .is_some_and(|v| v == "true");
    let annotated = pre_download_annotations(&object);
    let Some(spec) = spec_of(&mut object) else {
        return object;
    };

    let mut scale = take_object(spec, "scaleStrategy");
    let disable = scale
        .remove("disablePVCReuse")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    if !disable {
        scale.insert("enablePVCReuse".into(), json!(true));
    }
    if exclude {
        scale.insert("excludePreparingDelete".into(), json!(true));
    }
    if !scale.is_empty() {
        spec.insert("scaleStrategy".into(), Value::Object(scale));
    }

    let mut rolling = take_object(spec, "updateStrategy");
    let alpha_type = rolling.remove("type");
    let mut strategy = Map::new();
    match alpha_type.as_ref().and_then(Value::as_str) {
        Some("OnDelete") => {
            strategy.insert("type".into(), json!("OnDelete"));
        }
        other => {
            let policy = pod_update_policy(other);
            strategy.insert("type".into(), json!("RollingUpdate"));
            rolling.insert("podUpdatePolicy".into(), json!(policy));
        }
    }
    // An annotation shows as its field (as in OpenKruise's conversion), unless the
    // v1alpha1 field is set: that one wins, in the controller too.
    if annotated.iter().any(Option::is_some) {
        let mut in_place = take_object(&mut rolling, "inPlaceUpdateStrategy");
        for ((field, _), value) in PRE_DOWNLOAD.iter().zip(annotated) {
            if let Some(value) = value {
                in_place.entry(*field).or_insert(value);
            }
        }
        rolling.insert("inPlaceUpdateStrategy".into(), Value::Object(in_place));
    }
    if !rolling.is_empty() {
        strategy.insert("rollingUpdate".into(), Value::Object(rolling));
    }
    spec.insert("updateStrategy".into(), Value::Object(strategy));
    object
}

/// The in-place policies both versions name alike; anything else is ReCreate (as in
/// OpenKruise's conversion).
fn pod_update_policy(value: Option<&str>) -> &'static str {
    match value {
        Some("InPlaceIfPossible") => "InPlaceIfPossible",
        Some("InPlaceOnly") => "InPlaceOnly",
        _ => "ReCreate",
    }
}

/// An IntOrString from its annotation form (`"2"` → 2, `"50%"` → "50%").
fn int_or_string(s: &str) -> Value {
    s.parse::<i64>().map_or_else(|_| json!(s), |n| json!(n))
}

/// The field value each [`PRE_DOWNLOAD`] annotation gives, in its order: parallelism any
/// text (an IntOrString), the others an integer, as OpenKruise's v1alpha1 → v1beta1
/// conversion reads them; an annotation that is absent, empty or not a number gives none.
fn pre_download_annotations(object: &Value) -> Vec<Option<Value>> {
    PRE_DOWNLOAD
        .iter()
        .map(|(field, key)| {
            let text = metadata_get(object, "annotations", key).filter(|v| !v.is_empty())?;
            match *field {
                "imagePreDownloadParallelism" => Some(int_or_string(&text)),
                _ => text.parse::<i32>().ok().map(|n| json!(n)),
            }
        })
        .collect()
}

/// v1beta1 CloneSet → v1alpha1.
pub fn cloneset_to_v1alpha1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1ALPHA1);
    let mut exclude = false;
    let annotated = pre_download_annotations(&object);
    let mut cleared: Vec<&str> = Vec::new();
    if let Some(spec) = spec_of(&mut object) {
        let mut scale = take_object(spec, "scaleStrategy");
        let enable = scale
            .remove("enablePVCReuse")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        exclude = scale
            .remove("excludePreparingDelete")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        if !enable {
            scale.insert("disablePVCReuse".into(), json!(true));
        }
        if !scale.is_empty() {
            spec.insert("scaleStrategy".into(), Value::Object(scale));
        }

        let mut strategy = take_object(spec, "updateStrategy");
        let beta_type = strategy.remove("type");
        let mut alpha = take_object(&mut strategy, "rollingUpdate");
        let policy = alpha.remove("podUpdatePolicy");
        let alpha_type = match beta_type.as_ref().and_then(Value::as_str) {
            Some("OnDelete") => "OnDelete",
            _ => pod_update_policy(policy.as_ref().and_then(Value::as_str)),
        };
        alpha.insert("type".into(), json!(alpha_type));
        let mut in_place = take_object(&mut alpha, "inPlaceUpdateStrategy");
        for ((field, key), annotated) in PRE_DOWNLOAD.iter().zip(&annotated) {
            match in_place.get(*field) {
                // What v1alpha1 → v1beta1 made of the annotation: the annotation alone
                // keeps it, as before.
                Some(value) if annotated.as_ref() == Some(value) => {
                    in_place.remove(*field);
                }
                // Stored as the v1alpha1 field, which wins over the annotation.
                Some(_) => {}
                // Cleared by a v1beta1 client: the annotation, which would show it again
                // on the next read (and the controller would follow it), goes too.
                None if annotated.is_some() => cleared.push(key),
                None => {}
            }
        }
        if !in_place.is_empty() {
            alpha.insert("inPlaceUpdateStrategy".into(), Value::Object(in_place));
        }
        // Fields v1beta1 puts beside rollingUpdate that we do not know: keep them.
        alpha.extend(strategy);
        spec.insert("updateStrategy".into(), Value::Object(alpha));
    }
    // The v1beta1 fields decide: a label or annotation left on the object from an earlier
    // v1alpha1 write (v1alpha1 → v1beta1 keeps them, as OpenKruise's conversion does) is
    // removed when its field is now false or absent, or a v1beta1 client that cleared the
    // field would see it come back through the next v1alpha1 read-modify-write.
    if exclude {
        metadata_set(
            &mut object,
            "labels",
            keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE,
            "true",
        );
    } else {
        metadata_remove(
            &mut object,
            "labels",
            keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE,
        );
    }
    for key in cleared {
        metadata_remove(&mut object, "annotations", key);
    }
    object
}

/// v1alpha1 SidecarSet → v1beta1.
pub fn sidecarset_to_v1beta1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1BETA1);
    let custom_version = metadata_map(&mut object, "labels")
        .and_then(|labels| labels.remove(keys::SIDECARSET_CUSTOM_VERSION));
    let Some(spec) = spec_of(&mut object) else {
        return object;
    };
    if let Some(Value::String(namespace)) = spec.remove("namespace")
        && !namespace.is_empty()
    {
        spec.insert(
            "namespaceSelector".into(),
            json!({"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}),
        );
    }
    if let Some(version) = custom_version {
        spec.insert("customVersion".into(), version);
    }
    object
}

/// v1beta1 SidecarSet → v1alpha1.
pub fn sidecarset_to_v1alpha1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1ALPHA1);
    let mut custom_version = None;
    if let Some(spec) = spec_of(&mut object) {
        // A selector naming exactly one namespace is v1alpha1's `namespace`.
        let single = spec.get("namespaceSelector").and_then(|s| {
            let s = s.as_object()?;
            let labels = s.get("matchLabels")?.as_object()?;
            let only_labels = s.keys().all(|k| k == "matchLabels")
                || s.get("matchExpressions")
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty);
            match (only_labels, labels.len(), labels.get(NAMESPACE_NAME_LABEL)) {
                (true, 1, Some(Value::String(ns))) if !ns.is_empty() => Some(ns.clone()),
                _ => None,
            }
        });
        if let Some(namespace) = single {
            spec.remove("namespaceSelector");
            spec.insert("namespace".into(), json!(namespace));
        }
        custom_version = spec
            .remove("customVersion")
            .and_then(|v| v.as_str().map(str::to_string))
            .filter(|v| !v.is_empty());
    }
    if let Some(version) = custom_version {
        metadata_set(
            &mut object,
            "labels",
            keys::SIDECARSET_CUSTOM_VERSION,
            &version,
        );
    }
    object
}

#[cfg(test)]
mod tests;

mod crr;
pub use crr::{
    containerrecreaterequest_to_v1alpha1, containerrecreaterequest_to_v1beta1,
    convert_containerrecreaterequest,
};

pub mod podunavailablebudget;
pub use podunavailablebudget::{
    convert_podunavailablebudget, podunavailablebudget_to_v1alpha1, podunavailablebudget_to_v1beta1,
};

mod renamed;
pub use renamed::{
    convert_persistentpodstate, convert_resourcedistribution, convert_uniteddeployment,
    convert_workloadspread, persistentpodstate_to_v1alpha1, persistentpodstate_to_v1beta1,
    resourcedistribution_to_v1alpha1, resourcedistribution_to_v1beta1,
    uniteddeployment_to_v1alpha1, uniteddeployment_to_v1beta1, workloadspread_to_v1alpha1,
    workloadspread_to_v1beta1,
};

/// Moves `status.<from>` to `status.<to>` (the same value under another name).
fn rename_status_field(object: &mut Value, from: &str, to: &str) {
    if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut)
        && let Some(value) = status.remove(from)
    {
        status.insert(to.into(), value);
    }
}

/// v1alpha1 Advanced DaemonSet → v1beta1: the `progressive-create-pod` annotation as
/// `scaleStrategy.partitionedScaling` (the annotation stays, as upstream keeps it),
/// `daemonSetHash` as `updateRevision`, and the deprecated `Surging` type as what it
/// means: `Standard` with `maxSurge` 1 and `maxUnavailable` 0 where those are unset
/// (upstream only renames it, which would turn a stored Surging DaemonSet into a
/// non-surging one for a v1beta1 client writing it back).
pub fn daemonset_to_v1beta1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1BETA1);
    let partitioned = metadata_get(
        &object,
        "annotations",
        keys::DAEMONSET_PROGRESSIVE_CREATE_POD,
    )
    .is_some_and(|v| v == "true");
    if let Some(spec) = spec_of(&mut object) {
        let rolling = spec
            .get_mut("updateStrategy")
            .and_then(|u| u.get_mut("rollingUpdate"))
            .and_then(Value::as_object_mut);
        if let Some(rolling) = rolling
            && rolling.get("rollingUpdateType").and_then(Value::as_str) == Some("Surging")
        {
            rolling.insert("rollingUpdateType".into(), json!("Standard"));
            rolling.entry("maxSurge").or_insert(json!(1));
            rolling.entry("maxUnavailable").or_insert(json!(0));
        }
        if partitioned {
            spec.insert("scaleStrategy".into(), json!({"partitionedScaling": true}));
        }
    }
    rename_status_field(&mut object, "daemonSetHash", "updateRevision");
    object
}

/// v1beta1 Advanced DaemonSet → v1alpha1: `scaleStrategy.partitionedScaling` as the
/// `progressive-create-pod` annotation (an explicit `false` removes it: the v1beta1
/// field is what the client said), `updateRevision` as `daemonSetHash`.
pub fn daemonset_to_v1alpha1(mut object: Value) -> Value {
    object["apiVersion"] = json!(V1ALPHA1);
    let partitioned = spec_of(&mut object)
        .and_then(|spec| spec.remove("scaleStrategy"))
        .map(|s| s.get("partitionedScaling").and_then(Value::as_bool) == Some(true));
    match partitioned {
        Some(true) => metadata_set(
            &mut object,
            "annotations",
            keys::DAEMONSET_PROGRESSIVE_CREATE_POD,
            "true",
        ),
        Some(false) => {
            if let Some(annotations) = metadata_map(&mut object, "annotations") {
                annotations.remove(keys::DAEMONSET_PROGRESSIVE_CREATE_POD);
            }
        }
        None => {}
    }
    rename_status_field(&mut object, "updateRevision", "daemonSetHash");
    object
}
