//! SidecarSet defaulting (the mutating webhook), applied to the object's JSON so fields
//! our types do not know survive. Containers get the core Pod container defaults because
//! the CRD stores them schemaless: without this, `busybox` would be stored without
//! `imagePullPolicy: Always` and the hash would change the day the apiserver's pod
//! defaulting fills it in on the Pod.

use kruise_api::apps_v1alpha1::SidecarSetSpec;
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
        keep_pull_policies(&mut obj, old);
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

fn keep_pull_policies(obj: &mut Value, old: &Value) {
    for list in ["containers", "initContainers"] {
        let before: Map<String, Value> = old
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                // A stored container without a policy was written while no webhook
                // defaulted it: it has the policy its image implies.
                let policy = match c.get("imagePullPolicy") {
                    Some(p) => p.clone(),
                    None => json!(pull_policy_for(c.get("image")?.as_str()?)),
                };
                Some((c.get("name")?.as_str()?.to_string(), policy))
            })
            .collect();
        let Some(containers) = obj
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if !c.contains_key("imagePullPolicy")
                && let Some(policy) = before.get(&name)
            {
                c.insert("imagePullPolicy".into(), policy.clone());
            }
        }
    }
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

/// Kubernetes' `SetDefaults_Container` and the defaults of what a container holds.
pub fn container_defaults(c: &mut Map<String, Value>) {
    if !c.contains_key("imagePullPolicy") {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        c.insert("imagePullPolicy".into(), json!(pull_policy_for(image)));
    }
    c.entry("terminationMessagePath")
        .or_insert(json!("/dev/termination-log"));
    c.entry("terminationMessagePolicy").or_insert(json!("File"));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert(json!("TCP"));
        }
    }
    if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
        for e in env.iter_mut() {
            if let Some(field_ref) = e
                .pointer_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
            {
                field_ref.entry("apiVersion").or_insert(json!("v1"));
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            p.entry("timeoutSeconds").or_insert(json!(1));
            p.entry("periodSeconds").or_insert(json!(10));
            p.entry("successThreshold").or_insert(json!(1));
            p.entry("failureThreshold").or_insert(json!(3));
            handler_defaults(p);
        }
    }
    if let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lifecycle.get_mut(hook).and_then(Value::as_object_mut) {
                handler_defaults(h);
            }
        }
    }
}

fn handler_defaults(handler: &mut Map<String, Value>) {
    if let Some(get) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        get.entry("scheme").or_insert(json!("HTTP"));
    }
}

/// `Always` for `:latest` or an untagged image, `IfNotPresent` otherwise (a digest
/// without a tag counts as pinned).
pub fn pull_policy_for(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

/// Kubernetes' volume defaults: a source-less volume is an emptyDir; file-projecting
/// sources get mode 0644.
fn volume_defaults(v: &mut Map<String, Value>) {
    if v.len() == 1 && v.contains_key("name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
            s.entry("defaultMode").or_insert(json!(420));
        }
    }
    if let Some(h) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        h.entry("type").or_insert(json!(""));
    }
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
    fn pull_policy_follows_the_tag() {
        assert_eq!(pull_policy_for("busybox"), "Always");
        assert_eq!(pull_policy_for("busybox:latest"), "Always");
        assert_eq!(pull_policy_for("busybox:1.35.0"), "IfNotPresent");
        assert_eq!(pull_policy_for("localhost:5000/busybox"), "Always");
        assert_eq!(pull_policy_for("localhost:5000/busybox:1"), "IfNotPresent");
        assert_eq!(pull_policy_for("busybox@sha256:abc"), "IfNotPresent");
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
