use super::*;
use serde_json::json;

/// A Pod as the apiserver returns it for a CloneSet (kwok node), trimmed to what differs.
fn whole() -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "cs-abcde", "namespace": "default", "uid": "u1", "resourceVersion": "7",
            "labels": {"app": "cs", "controller-revision-hash": "cs-1"},
            "annotations": {"a": "b"},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                                  "name": "cs", "uid": "o1", "controller": true}]
        },
        "spec": {
            "containers": [{
                "name": "main", "image": "nginx:1",
                "env": [{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}}],
                "resources": {"requests": {"cpu": "100m"}},
                "ports": [{"containerPort": 80}],
                "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]
            }],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "nodeName": "kwok-node-0",
            "hostname": "cs-abcde",
            "readinessGates": [{"conditionType": "KruisePodReady"}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{
                "name": "main", "image": "nginx:1", "imageID": "docker.io/nginx@sha256:1",
                "containerID": "containerd://c1", "ready": true, "restartCount": 2, "started": true,
                "state": {"running": {"startedAt": "2026-11-26T10:00:00Z"}}
            }],
            "podIP": "10.0.0.1",
            "startTime": "2026-11-26T10:00:00Z"
        }
    })
}

#[test]
fn the_view_decodes_what_the_plans_read_and_skips_the_rest() {
    let pod: Pod = serde_json::from_value(whole()).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("cs-abcde"));
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("kwok-node-0"));
    assert_eq!(spec.hostname.as_deref(), Some("cs-abcde"));
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1"));
    assert_eq!(spec.containers[0].env.as_ref().unwrap()[0].name, "V");
    let status = pod.status.as_ref().unwrap();
    let main = &status.container_statuses.as_ref().unwrap()[0];
    assert_eq!(main.image_id, "docker.io/nginx@sha256:1");
    assert_eq!(main.container_id.as_deref(), Some("containerd://c1"));
    assert_eq!(main.restart_count, 2);
    assert!(main.state.as_ref().unwrap().running.is_some());
    // What no plan reads is not there to write back: the view serializes without it.
    let back = serde_json::to_value(&pod).unwrap();
    assert!(back["spec"].get("volumes").is_none());
    assert!(back["spec"]["containers"][0].get("ports").is_none());
    assert!(back["spec"]["containers"][0].get("livenessProbe").is_none());
    // Resources stay, for a resize in place (`InPlaceWorkloadVerticalScaling`).
    assert_eq!(
        back["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "100m"}})
    );
    assert_eq!(
        spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .get("cpu"),
        Some("100m")
    );
    assert!(back["status"].get("podIP").is_none());
}

#[test]
fn the_view_of_a_whole_pod_equals_the_view_decoded() {
    let whole: k8s_openapi::api::core::v1::Pod = serde_json::from_value(whole()).unwrap();
    let decoded: Pod = serde_json::from_value(super::tests::whole()).unwrap();
    assert_eq!(Pod::from(&whole), decoded);
}

#[test]
fn the_view_round_trips_through_json() {
    let pod: Pod = serde_json::from_value(whole()).unwrap();
    let again: Pod = serde_json::from_value(serde_json::to_value(&pod).unwrap()).unwrap();
    assert_eq!(again, pod);
}

#[test]
fn both_pod_types_read_alike_through_pod_view() {
    fn read(p: &impl PodView) -> (Option<&str>, Option<&str>, usize, usize, Vec<i32>) {
        (
            p.phase(),
            p.node_name(),
            p.conditions().len(),
            p.readiness_gates().len(),
            p.restart_counts().collect(),
        )
    }
    let whole: k8s_openapi::api::core::v1::Pod = serde_json::from_value(whole()).unwrap();
    let view = Pod::from(&whole);
    assert_eq!(read(&whole), read(&view));
    assert_eq!(read(&&view), read(&std::sync::Arc::new(view.clone())));
    let images: Vec<_> = view.container_images().unwrap().collect();
    assert_eq!(images, vec![("main", Some("nginx:1"))]);
    assert_eq!(
        view.status_images().collect::<Vec<_>>(),
        vec![("main", "nginx:1")]
    );
    assert!(Pod::default().container_images().is_none());
}

#[test]
fn the_view_is_a_namespaced_core_v1_resource() {
    use kube::Resource;
    assert_eq!(Pod::kind(&()), "Pod");
    assert_eq!(Pod::api_version(&()), "v1");
    assert_eq!(Pod::plural(&()), "pods");
    assert_eq!(
        Pod::url_path(&(), Some("ns")),
        k8s_openapi::api::core::v1::Pod::url_path(&(), Some("ns"))
    );
}
