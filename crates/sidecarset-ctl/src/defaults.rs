//! SidecarSet defaulting (the mutating webhook), applied to the object's JSON so fields
//! our types do not know survive. Containers get the core Pod container defaults because
//! the CRD stores them schemaless: without this, `busybox` would be stored without
//! `imagePullPolicy: Always` and the hash would change the day the apiserver's pod
//! defaulting fills it in on the Pod.

use kruise_api::apps_v1alpha1::SidecarSetSpec;
use kruise_workload::pod_defaults::{keep_pull_policies, pull_policy_for, volume_defaults};
use kruise_workload::revision::quantity;
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
    if let Some(revision) = spec
        .get_mut("injectionStrategy")
        .and_then(|s| s.get_mut("revision"))
        .and_then(Value::as_object_mut)
    {
        set_if_empty(revision, "policy", json!("Always"));
    }
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

/// Upstream's sidecar container defaults (openkruise/kruise v1.9.0
/// apis/apps/defaults/v1alpha1.go `setDefaultSidecarContainer`): the core container
/// defaults, but of the probes only liveness and readiness (a startup probe is left as
/// written) and resources rounded up to 1m. They are part of what the hash covers, so
/// they follow upstream exactly; a value Go reads as empty (absent, `null`, `""`, `0`)
/// is defaulted.
fn sidecar_defaults(c: &mut Map<String, Value>, inject_policy: &str) {
    set_if_empty(c, "podInjectPolicy", json!(inject_policy));
    if let Some(s) = object_entry(c, "upgradeStrategy") {
        set_if_empty(s, "upgradeType", json!("ColdUpgrade"));
    }
    if let Some(s) = object_entry(c, "shareVolumePolicy") {
        set_if_empty(s, "type", json!("disabled"));
    }
    if is_empty(c.get("imagePullPolicy")) {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        c.insert("imagePullPolicy".into(), json!(pull_policy_for(image)));
    }
    set_if_empty(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_if_empty(c, "terminationMessagePolicy", json!("File"));
    for p in list(c, "ports") {
        set_if_empty(p, "protocol", json!("TCP"));
    }
    for t in list(c, "transferEnv") {
        if let Some(f) = t
            .get_mut("sourceContainerNameFrom")
            .and_then(|s| s.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            set_if_empty(f, "apiVersion", json!("v1"));
        }
    }
    for e in list(c, "env") {
        if let Some(f) = e
            .get_mut("valueFrom")
            .and_then(|s| s.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            set_if_empty(f, "apiVersion", json!("v1"));
        }
    }
    if let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) {
        for key in ["limits", "requests"] {
            if let Some(list) = resources.get_mut(key).and_then(Value::as_object_mut) {
                for q in list.values_mut() {
                    if let Some(rounded) = q.as_str().and_then(quantity::round_up_to_milli) {
                        *q = json!(rounded);
                    }
                }
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set_if_empty(p, "timeoutSeconds", json!(1));
            set_if_empty(p, "periodSeconds", json!(10));
            set_if_empty(p, "successThreshold", json!(1));
            set_if_empty(p, "failureThreshold", json!(3));
            http_get_defaults(p);
        }
    }
    if let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lifecycle.get_mut(hook).and_then(Value::as_object_mut) {
                http_get_defaults(h);
            }
        }
    }
}

fn http_get_defaults(handler: &mut Map<String, Value>) {
    if let Some(get) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        set_if_empty(get, "path", json!("/"));
        set_if_empty(get, "scheme", json!("HTTP"));
    }
}

/// What Go decodes to a zero value.
fn is_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(_) => false,
    }
}

fn set_if_empty(m: &mut Map<String, Value>, key: &str, value: Value) {
    if is_empty(m.get(key)) {
        m.insert(key.into(), value);
    }
}

/// The object at `key`, created when absent or `null` (a Go struct field is never nil).
fn object_entry<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let v = m.entry(key).or_insert_with(|| json!({}));
    if v.is_null() {
        *v = json!({});
    }
    v.as_object_mut()
}

fn list<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
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
