//! Pods and SidecarSets in the states the plan distinguishes, built the way the injector
//! and kwok leave them.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::SidecarSet;
use serde_json::{Value, json};

use crate::hash::{self, Hashes};
use crate::inject::{self, Candidate};

pub fn now() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

/// `test-sidecarset` at `image`, with the given update strategy.
pub fn sidecarset(image: &str, strategy: Value) -> SidecarSet {
    let mut ss: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": "test-sidecarset", "generation": 2, "resourceVersion": "777"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "updateStrategy": strategy,
                 "containers": [{"name": "sidecar1", "image": image, "command": ["sleep", "999d"]}]}
    }))
    .unwrap();
    set_hash_annotations(&mut ss);
    ss
}

pub fn hot_sidecarset(image: &str) -> SidecarSet {
    let mut ss: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": "hot", "generation": 1, "resourceVersion": "900"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                 "containers": [{"name": "sidecar", "image": image,
                    "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]}
    }))
    .unwrap();
    set_hash_annotations(&mut ss);
    ss
}

fn set_hash_annotations(ss: &mut SidecarSet) {
    let h = hash::hashes(&ss.spec);
    ss.metadata.annotations = Some(
        [
            (kruise_api::keys::SIDECARSET_HASH.to_string(), h.hash),
            (
                kruise_api::keys::SIDECARSET_HASH_WITHOUT_IMAGE.to_string(),
                h.without_image,
            ),
        ]
        .into(),
    );
}

pub fn hashes(ss: &SidecarSet) -> Hashes {
    hash::hashes_of(ss)
}

/// A Pod injected from `injected_from`, then made Running (and Ready or not) by kwok:
/// every container status matches its spec image.
pub fn pod(name: &str, injected_from: &SidecarSet, ready: bool) -> Pod {
    let base: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "nginx"},
                     "creationTimestamp": "2024-01-01T00:00:00Z", "resourceVersion": "1"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx:1.7.9"}]}
    }))
    .unwrap();
    let candidate = Candidate {
        name: injected_from.metadata.name.as_deref().unwrap(),
        spec: std::borrow::Cow::Borrowed(&injected_from.spec),
        hashes: hash::hashes_of(injected_from),
        controller_revision: String::new(),
    };
    let mut p = inject::inject(&base, &[candidate], now()).pod;
    run(&mut p, ready);
    p
}

/// kwok's pod-ready stage: statuses for every container from its spec image.
pub fn run(p: &mut Pod, ready: bool) {
    let statuses: Vec<Value> = p
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            json!({"name": c.name, "image": image, "imageID": format!("{image}@sha256:{image}"),
                   "ready": ready, "restartCount": 0})
        })
        .collect();
    p.status = Some(
        serde_json::from_value(json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
            "containerStatuses": statuses,
        }))
        .unwrap(),
    );
}

/// Applies a plan's Pod write as the apiserver (strategic merge) and kwok would.
pub fn apply(p: &Pod, images: &std::collections::BTreeMap<String, String>, patch: &Value) -> Pod {
    let mut out = p.clone();
    if let Some(annotations) = patch
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let a = out
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        for (k, v) in annotations {
            match v.as_str() {
                Some(v) => {
                    a.insert(k.clone(), v.to_string());
                }
                None => {
                    a.remove(k);
                }
            }
        }
    }
    for c in &mut out.spec.as_mut().unwrap().containers {
        if let Some(i) = images.get(&c.name) {
            c.image = Some(i.clone());
        }
    }
    out
}

/// Like [`apply`], then the kubelet restarts the changed containers (new imageID).
pub fn apply_and_restart(
    p: &Pod,
    images: &std::collections::BTreeMap<String, String>,
    patch: &Value,
) -> Pod {
    let mut out = apply(p, images, patch);
    let ready = kruise_ordering::predicates::is_ready(&out);
    run(&mut out, ready);
    out
}
