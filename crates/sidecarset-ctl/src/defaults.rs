//! SidecarSet defaulting (the mutating webhook), applied to the object's JSON so fields
//! our types do not know survive. Containers get the core Pod container defaults because
//! the CRD stores them schemaless: without this, `busybox` would be stored without
//! `imagePullPolicy: Always` and the hash would change the day the apiserver's pod
//! defaulting fills it in on the Pod.

use kruise_api::apps_v1alpha1::SidecarSetSpec;
use kruise_workload::pod_defaults::{container_defaults, keep_pull_policies, volume_defaults};
use serde_json::{Map, Value, json};

/// The defaulted object (idempotent: defaulting a defaulted object changes nothing).
pub fn with_defaults(object: &Value) -> Value {
    with_defaults_from(object, None)
}

/// The spec as the mutating webhook would have stored it (the spec itself when it does
/// not survive a JSON round trip, which a typed spec always does).
pub fn defaulted_spec(spec: &SidecarSetSpec) -> SidecarSetSpec {
    let Ok(raw) = serde_json::to_value(spec) else {
        return spec.clone();
    };
    let defaulted = with_defaults(&json!({ "spec": raw }));
    serde_json::from_value(defaulted["spec"].clone()).unwrap_or_else(|_| spec.clone())
}

/// Defaulting on UPDATE: a container that names no `imagePullPolicy` keeps the one the
/// stored object has for it. The pull policy is the one default that depends on the
/// image (`busybox` → Always, `busybox:1.35.0` → IfNotPresent); re-deriving it would turn
/// an image bump sent with `kubectl apply` (which replaces the whole list) into a
/// non-image change, and the Pods could no longer be upgraded in place. A Pod's pull
/// policy cannot change in place anyway.
pub fn with_defaults_from(object: &Value, old: Option<&Value>) -> Value {
    let mut obj = object.clone();
    if let Some(old) = old {
        keep_pull_policies(&mut obj, old, &["/spec/containers", "/spec/initContainers"]);
    }
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return obj;
    };
    let strategy = spec
        .entry("updateStrategy")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(strategy) = strategy {
        strategy.entry("type").or_insert(json!("RollingUpdate"));
        strategy.entry("maxUnavailable").or_insert(json!(1));
        strategy.entry("partition").or_insert(json!(0));
    }
    for (list, policy) in [
        ("containers", "BeforeAppContainer"),
        ("initContainers", "AfterAppContainer"),
    ] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                sidecar_defaults(c, policy);
            }
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in volumes.iter_mut().filter_map(Value::as_object_mut) {
            volume_defaults(v);
        }
    }
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    if let Some(patches) = spec
        .get_mut("patchPodMetadata")
        .and_then(Value::as_array_mut)
    {
        for p in patches.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("patchPolicy").or_insert(json!("Retain"));
        }
    }
    obj
}

fn sidecar_defaults(c: &mut Map<String, Value>, inject_policy: &str) {
    c.entry("podInjectPolicy").or_insert(json!(inject_policy));
    if let Some(s) = c
        .entry("upgradeStrategy")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        s.entry("upgradeType").or_insert(json!("ColdUpgrade"));
    }
    if let Some(s) = c
        .entry("shareVolumePolicy")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        s.entry("type").or_insert(json!("disabled"));
    }
    container_defaults(c);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_sidecar_gets_core_container_defaults() {
        let obj = json!({"spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "containers": [{"name": "sidecar1", "image": "busybox", "command": ["sleep", "999d"],
                            "ports": [{"containerPort": 80}],
                            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            "volumes": [{"name": "log-volume", "emptyDir": {}}, {"name": "bare"}]
        }});
        let d = with_defaults(&obj);
        let c = &d["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["podInjectPolicy"], "BeforeAppContainer");
        assert_eq!(c["upgradeStrategy"]["upgradeType"], "ColdUpgrade");
        assert_eq!(c["shareVolumePolicy"]["type"], "disabled");
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "maxUnavailable": 1, "partition": 0})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["volumes"][1]["emptyDir"], json!({}));
        assert_eq!(with_defaults(&d), d, "idempotent");
    }

    #[test]
    fn an_update_keeps_the_stored_pull_policy() {
        let old =
            with_defaults(&json!({"spec": {"containers": [{"name": "a", "image": "busybox"}]}}));
        assert_eq!(old["spec"]["containers"][0]["imagePullPolicy"], "Always");
        let applied = json!({"spec": {"containers": [{"name": "a", "image": "busybox:1.35.0"}, {"name": "b", "image": "busybox:1.35.0"}]}});
        let d = with_defaults_from(&applied, Some(&old));
        assert_eq!(
            d["spec"]["containers"][0]["imagePullPolicy"], "Always",
            "kept"
        );
        assert_eq!(
            d["spec"]["containers"][1]["imagePullPolicy"], "IfNotPresent",
            "new container: derived"
        );
        let explicit = json!({"spec": {"containers": [{"name": "a", "image": "busybox:1.35.0", "imagePullPolicy": "Never"}]}});
        assert_eq!(
            with_defaults_from(&explicit, Some(&old))["spec"]["containers"][0]["imagePullPolicy"],
            "Never"
        );
        // Hence an image bump keeps the image-less hash.
        let before: kruise_api::apps_v1alpha1::SidecarSetSpec =
            serde_json::from_value(old["spec"].clone()).unwrap();
        let after: kruise_api::apps_v1alpha1::SidecarSetSpec = serde_json::from_value(
            with_defaults_from(
                &json!({"spec": {"containers": [{"name": "a", "image": "busybox:1.35.0"}]}}),
                Some(&old),
            )["spec"]
                .clone(),
        )
        .unwrap();
        assert_eq!(
            crate::hash::hashes(&before).without_image,
            crate::hash::hashes(&after).without_image
        );
    }

    /// A SidecarSet stored while no webhook ran (created before the controller, or
    /// before the apiserver saw its configuration), then bumped with a merge patch that
    /// replaces the container list: the image-less hash the Pods carry must hold, or the
    /// Pods could never be upgraded in place.
    #[test]
    fn a_spec_stored_without_defaults_still_upgrades_in_place() {
        let stored = json!({"metadata": {"name": "s"}, "spec": {"containers": [{"name": "a", "image": "busybox", "command": ["sleep", "999d"]}]}});
        let ss: kruise_api::apps_v1alpha1::SidecarSet =
            serde_json::from_value(stored.clone()).unwrap();
        let injected = crate::hash::hashes_of(&ss);
        let bumped = json!({"metadata": {"name": "s"}, "spec": {"containers": [{"name": "a", "image": "busybox:1.35.0", "command": ["sleep", "999d"]}]}});
        let after: kruise_api::apps_v1alpha1::SidecarSetSpec =
            serde_json::from_value(with_defaults_from(&bumped, Some(&stored))["spec"].clone())
                .unwrap();
        assert_eq!(
            d_policy(&with_defaults_from(&bumped, Some(&stored))),
            "Always",
            "derived from the stored image"
        );
        let now = crate::hash::hashes(&after);
        assert_eq!(injected.without_image, now.without_image);
        assert_ne!(injected.hash, now.hash);
    }

    fn d_policy(v: &Value) -> &str {
        v["spec"]["containers"][0]["imagePullPolicy"]
            .as_str()
            .unwrap_or_default()
    }

    #[test]
    fn defaulted_spec_is_what_the_webhook_stores() {
        let raw = json!({"spec": {"containers": [{"name": "a", "image": "busybox"}]}});
        let spec: SidecarSetSpec = serde_json::from_value(raw["spec"].clone()).unwrap();
        let webhook: SidecarSetSpec =
            serde_json::from_value(with_defaults(&raw)["spec"].clone()).unwrap();
        assert_eq!(defaulted_spec(&spec), webhook);
        assert_eq!(defaulted_spec(&webhook), webhook, "idempotent");
    }

    #[test]
    fn explicit_values_are_kept() {
        let obj = json!({"spec": {"containers": [{"name": "a", "image": "x", "imagePullPolicy": "Never", "podInjectPolicy": "AfterAppContainer"}],
                                  "updateStrategy": {"type": "NotUpdate", "maxUnavailable": "20%"}}});
        let d = with_defaults(&obj);
        assert_eq!(d["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(
            d["spec"]["containers"][0]["podInjectPolicy"],
            "AfterAppContainer"
        );
        assert_eq!(d["spec"]["updateStrategy"]["type"], "NotUpdate");
        assert_eq!(d["spec"]["updateStrategy"]["maxUnavailable"], "20%");
        assert_eq!(
            d["spec"]["initContainers"],
            Value::Null,
            "absent lists stay absent"
        );
    }
}
