//! In-place vertical scaling (gate `InPlaceWorkloadVerticalScaling`): a template change that
//! only replaces container cpu/memory requests or limits goes in place, through the Pod
//! `resize` subresource (Kubernetes 1.32+; in-place Pod resize is on by default from 1.33).
//!
//! What qualifies and when it is done mirror openkruise/kruise v1.9.0
//! pkg/util/inplaceupdate/inplace_update_vertical.go (`NativeVerticalUpdate`): only
//! `replace` of `cpu`/`memory` under `resources.limits`/`resources.requests` (adding or
//! removing a resource recreates the Pod), never a change of the Pod's QoS class, and the
//! update is complete once every container reports (`status.containerStatuses[].resources`)
//! the resources of its spec.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_api::pod::Pod;
use serde_json::{Value, json};

/// The resources that can change in place (the kubelet resizes only these).
pub const RESIZABLE: [&str; 2] = ["cpu", "memory"];
const SECTIONS: [&str; 2] = ["limits", "requests"];

/// Container name -> the requests/limits that change.
pub type ResourceChanges = BTreeMap<String, ResourceRequirements>;

/// Blanks, in both specs, every `containers[i].resources.{limits,requests}.{cpu,memory}`
/// present in both, and returns the new values of those that differ (by container name).
/// What is left differing afterwards (a resource added or removed, another resource, a
/// container renamed) is not a resize.
pub(crate) fn mask_resizes(old_spec: &mut Value, new_spec: &mut Value) -> ResourceChanges {
    let mut changes = ResourceChanges::new();
    let (Some(old_cs), Some(new_cs)) = (
        old_spec.get_mut("containers").and_then(Value::as_array_mut),
        new_spec.get_mut("containers").and_then(Value::as_array_mut),
    ) else {
        return changes;
    };
    for (old_c, new_c) in old_cs.iter_mut().zip(new_cs.iter_mut()) {
        let name = new_c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        for section in SECTIONS {
            for resource in RESIZABLE {
                let pointer = format!("/resources/{section}/{resource}");
                let (Some(old_v), Some(new_v)) = (
                    old_c.pointer(&pointer).cloned(),
                    new_c.pointer(&pointer).cloned(),
                ) else {
                    continue;
                };
                if old_v != new_v {
                    let value = Quantity(new_v.as_str().unwrap_or_default().to_string());
                    let entry = changes.entry(name.clone()).or_default();
                    let target = if section == "limits" {
                        entry.limits.get_or_insert_with(Default::default)
                    } else {
                        entry.requests.get_or_insert_with(Default::default)
                    };
                    target.insert(resource.to_string(), value);
                }
                for c in [&mut *old_c, &mut *new_c] {
                    if let Some(v) = c.pointer_mut(&pointer) {
                        *v = Value::Null;
                    }
                }
            }
        }
    }
    changes
}

/// A Pod's QoS class from its (template) spec, as Kubernetes computes it
/// (`k8s.io/kubernetes/pkg/apis/core/v1/helper/qos.GetPodQOS`, container resources only):
/// `BestEffort` without any cpu/memory request or limit, `Guaranteed` when every container
/// has cpu and memory limits and the requests equal the limits, else `Burstable`.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten();
    let mut requests: BTreeMap<&str, f64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, f64> = BTreeMap::new();
    let mut guaranteed = true;
    for c in containers {
        let amount = |section: &str, r: &str| {
            c.pointer(&format!("/resources/{section}/{r}"))
                .and_then(Value::as_str)
                .and_then(|q| kruise_api::quantity::parse(q).ok())
                .filter(|v| *v != 0.0)
        };
        let mut limited = 0;
        for r in RESIZABLE {
            if let Some(v) = amount("requests", r) {
                *requests.entry(r).or_default() += v;
            }
            if let Some(v) = amount("limits", r) {
                *limits.entry(r).or_default() += v;
                limited += 1;
            }
        }
        if limited < RESIZABLE.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    // Requests left out default to the limits.
    if guaranteed
        && requests
            .iter()
            .all(|(r, v)| limits.get(r).is_some_and(|l| (l - v).abs() < 1e-9))
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// The strategic-merge patch for `pods/resize` that gives the containers in `changes`
/// their new requests/limits (only the values that differ from the Pod's spec), or `None`
/// when the Pod already has them.
pub fn resize_patch(pod: &Pod, changes: &ResourceChanges) -> Option<Value> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let mut patched = Vec::new();
    for c in containers {
        let Some(change) = changes.get(&c.name) else {
            continue;
        };
        let current = c.resources.as_deref();
        let mut resources = serde_json::Map::new();
        for (section, wanted, have) in [
            ("limits", change.limits.as_ref(), current.map(|r| &r.limits)),
            (
                "requests",
                change.requests.as_ref(),
                current.map(|r| &r.requests),
            ),
        ] {
            let differing: serde_json::Map<String, Value> = wanted
                .into_iter()
                .flatten()
                .filter(|(r, _)| RESIZABLE.contains(&r.as_str()))
                .filter(|(r, q)| !have.and_then(|h| h.get(r)).is_some_and(|h| same(h, &q.0)))
                .map(|(r, q)| (r.clone(), json!(q.0)))
                .collect();
            if !differing.is_empty() {
                resources.insert(section.into(), Value::Object(differing));
            }
        }
        if !resources.is_empty() {
            patched.push(json!({"name": c.name, "resources": resources}));
        }
    }
    (!patched.is_empty()).then(|| json!({"spec": {"containers": patched}}))
}

/// Whether every container reports the cpu/memory requests and limits of its spec
/// (`status.containerStatuses[].resources`, what the kubelet has actuated).
pub fn resized(pod: &Pod) -> bool {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    if statuses.len() != containers.len() {
        return false;
    }
    containers.iter().all(|c| {
        let Some(status) = statuses.iter().find(|s| s.name == c.name) else {
            return false;
        };
        let Some(actual) = status.resources.as_deref() else {
            return false;
        };
        let spec = c.resources.as_deref().cloned().unwrap_or_default();
        [
            (&spec.limits, &actual.limits),
            (&spec.requests, &actual.requests),
        ]
        .into_iter()
        .all(|(want, have)| {
            RESIZABLE.iter().all(|r| match (want.get(r), have.get(r)) {
                (None, None) => true,
                (Some(w), Some(h)) => same(w, h),
                _ => false,
            })
        })
    })
}

/// Whether a resize of `changes` restarts a container (its `resizePolicy` says
/// `RestartContainer` for a resource that changes): only then does the update take the
/// Pod out of service (`InPlaceUpdateReady=False`), as upstream's
/// `defaultCheckPodNeedsBeUnready` (openkruise/kruise v1.9.0
/// pkg/util/inplaceupdate/inplace_update_defaults.go).
pub fn restarts_a_container(pod: &Pod, changes: &ResourceChanges) -> bool {
    pod.spec.iter().flat_map(|s| s.containers.iter()).any(|c| {
        let Some(change) = changes.get(&c.name) else {
            return false;
        };
        let touches = |r: &str| {
            [change.limits.as_ref(), change.requests.as_ref()]
                .into_iter()
                .flatten()
                .any(|m| m.contains_key(r))
        };
        c.resize_policy
            .iter()
            .flatten()
            .any(|p| p.restart_policy == "RestartContainer" && touches(&p.resource_name))
    })
}

/// Two quantities name the same amount (`1` and `1000m`).
fn same(a: &str, b: &str) -> bool {
    match (
        kruise_api::quantity::parse(a),
        kruise_api::quantity::parse(b),
    ) {
        (Ok(x), Ok(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()).max(1.0),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::pod::{
        Container, ContainerStatus, PodSpec, PodStatus, ResourceList, Resources,
    };
    use proptest::prelude::*;

    fn spec(containers: Value) -> Value {
        json!({ "containers": containers })
    }

    #[test]
    fn replaced_cpu_and_memory_are_masked_and_reported() {
        let mut old = spec(json!([{"name": "app", "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "512Mi"}}}]));
        let mut new = spec(json!([{"name": "app", "resources": {
            "limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "512Mi"}}}]));
        let changes = mask_resizes(&mut old, &mut new);
        assert_eq!(old, new, "only resizes: nothing else differs");
        let app = &changes["app"];
        assert_eq!(app.limits.as_ref().unwrap()["cpu"].0, "2");
        assert_eq!(app.requests.as_ref().unwrap()["cpu"].0, "1");
        assert!(!app.limits.as_ref().unwrap().contains_key("memory"));
    }

    #[test]
    fn an_added_limit_or_another_resource_is_not_a_resize() {
        let mut old = spec(json!([{"name": "app", "resources": {"requests": {"cpu": "1"}}}]));
        let mut new = spec(json!([{"name": "app", "resources": {
            "requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]));
        mask_resizes(&mut old, &mut new);
        assert_ne!(old, new);
        let mut old =
            spec(json!([{"name": "app", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]));
        let mut new =
            spec(json!([{"name": "app", "resources": {"limits": {"ephemeral-storage": "2Gi"}}}]));
        assert!(mask_resizes(&mut old, &mut new).is_empty());
        assert_ne!(old, new);
    }

    #[test]
    fn qos_classes() {
        assert_eq!(qos_class(&spec(json!([{"name": "a"}]))), "BestEffort");
        assert_eq!(
            qos_class(&spec(
                json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}])
            )),
            "Burstable"
        );
        assert_eq!(
            qos_class(&spec(
                json!([{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}])
            )),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(json!([{"name": "a", "resources": {
                "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1Gi"}}}]))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(json!([{"name": "a", "resources": {
                "limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}]))),
            "Burstable"
        );
    }

    fn pod(spec_cpu: &str, status_cpu: Option<&str>, policy: Option<&str>) -> Pod {
        let res = |cpu: &str| Resources {
            requests: ResourceList(vec![("cpu".to_string(), cpu.to_string())]),
            ..Default::default()
        };
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    resources: Some(Box::new(res(spec_cpu))),
                    resize_policy: policy.map(|p| {
                        vec![k8s_openapi::api::core::v1::ContainerResizePolicy {
                            resource_name: "cpu".into(),
                            restart_policy: p.into(),
                        }]
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "app".into(),
                    resources: status_cpu.map(|c| Box::new(res(c))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn resized_compares_quantities_by_value() {
        assert!(resized(&pod("1", Some("1000m"), None)));
        assert!(!resized(&pod("2", Some("1"), None)));
        assert!(!resized(&pod("1", None, None)), "no status resources yet");
    }

    #[test]
    fn resize_patch_names_only_what_differs() {
        let p = pod("1", Some("1"), None);
        let mut changes = ResourceChanges::new();
        changes.insert(
            "app".into(),
            ResourceRequirements {
                requests: Some([("cpu".to_string(), Quantity("1000m".into()))].into()),
                ..Default::default()
            },
        );
        assert_eq!(resize_patch(&p, &changes), None, "1000m is 1");
        changes.get_mut("app").unwrap().requests =
            Some([("cpu".to_string(), Quantity("2".into()))].into());
        assert_eq!(
            resize_patch(&p, &changes),
            Some(
                json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "2"}}}]}})
            )
        );
    }

    #[test]
    fn only_a_restart_policy_on_a_changed_resource_restarts() {
        let mut changes = ResourceChanges::new();
        changes.insert(
            "app".into(),
            ResourceRequirements {
                requests: Some([("cpu".to_string(), Quantity("2".into()))].into()),
                ..Default::default()
            },
        );
        assert!(restarts_a_container(
            &pod("1", None, Some("RestartContainer")),
            &changes
        ));
        assert!(!restarts_a_container(
            &pod("1", None, Some("NotRequired")),
            &changes
        ));
        assert!(!restarts_a_container(&pod("1", None, None), &changes));
        changes.get_mut("app").unwrap().requests =
            Some([("memory".to_string(), Quantity("1Gi".into()))].into());
        assert!(!restarts_a_container(
            &pod("1", None, Some("RestartContainer")),
            &changes
        ));
    }

    proptest! {
        /// Masking is symmetric: after it, a spec pair that differed only in resizable
        /// values compares equal, and every reported change is a value of the new spec.
        #[test]
        fn masking_leaves_no_resize_behind(
            old_cpu in 1u32..4000, new_cpu in 1u32..4000,
            old_mem in 1u32..4096, new_mem in 1u32..4096,
        ) {
            let mk = |cpu: u32, mem: u32| spec(json!([{"name": "app", "resources": {
                "requests": {"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")}}}]));
            let (mut old, mut new) = (mk(old_cpu, old_mem), mk(new_cpu, new_mem));
            let changes = mask_resizes(&mut old, &mut new);
            prop_assert_eq!(&old, &new);
            let requests = changes.get("app").and_then(|c| c.requests.clone()).unwrap_or_default();
            prop_assert_eq!(requests.contains_key("cpu"), old_cpu != new_cpu);
            prop_assert_eq!(requests.contains_key("memory"), old_mem != new_mem);
        }
    }
}
