use super::*;
use proptest::prelude::*;

/// The example request of OpenKruise v0.9.0 release notes.
fn sample_request() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
        "metadata": {"name": "xxx", "namespace": "pod-namespace"},
        "spec": {
            "podName": "pod-name",
            "containers": [{"name": "app"}, {"name": "sidecar"}],
            "strategy": {
                "failurePolicy": "Fail", "orderedRecreate": false,
                "terminationGracePeriodSeconds": 30, "unreadyGracePeriodSeconds": 3,
                "minStartedSeconds": 10
            },
            "activeDeadlineSeconds": 300, "ttlSecondsAfterFinished": 1800
        }
    })
}

fn minimal() -> Value {
    json!({
        "metadata": {"name": "xxx", "namespace": "pod-namespace"},
        "spec": {"podName": "pod-name", "containers": [{"name": "app"}]}
    })
}

fn the_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "pod-name", "namespace": "pod-namespace", "uid": "4a1b2c3d"},
        "spec": {
            "nodeName": "node1",
            "terminationGracePeriodSeconds": 45,
            "containers": [
                {"name": "app", "image": "app:1",
                 "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 1"]}}}},
                {"name": "sidecar", "image": "sidecar:1",
                 "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                 "lifecycle": {"preStop": {"httpGet": {"path": "/shutdown", "port": "http"}}}},
                {"name": "late", "image": "late:1"}
            ]
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "app", "image": "app:1", "imageID": "", "ready": true, "restartCount": 0,
                 "containerID": "containerd://abc"},
                {"name": "sidecar", "image": "sidecar:1", "imageID": "", "ready": true, "restartCount": 2,
                 "containerID": "containerd://def"},
                {"name": "late", "image": "late:1", "imageID": "", "ready": false, "restartCount": 0}
            ]
        }
    }))
    .unwrap()
}

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn only_error(object: &Value, pod: Option<&Pod>) -> String {
    let errors = admit_create(object, pod).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors[0].to_string()
}

#[test]
fn sample_request_is_stamped_from_its_pod() {
    let out = admit_create(&sample_request(), Some(&the_pod())).unwrap();
    let labels = &out["metadata"]["labels"];
    assert_eq!(labels[keys::CRR_NODE_NAME], "node1");
    assert_eq!(labels[keys::CRR_POD_UID], "4a1b2c3d");
    assert_eq!(labels[keys::CRR_ACTIVE], "true");
    let app = &out["spec"]["containers"][0];
    assert_eq!(
        app["preStop"],
        json!({"exec": {"command": ["/bin/sh", "-c", "sleep 1"]}})
    );
    assert!(app.get("ports").is_none(), "ports only for httpGet");
    assert_eq!(
        app["statusContext"],
        json!({"containerID": "containerd://abc", "restartCount": 0})
    );
    let sidecar = &out["spec"]["containers"][1];
    assert_eq!(sidecar["preStop"]["httpGet"]["port"], "http");
    assert_eq!(sidecar["ports"][0]["containerPort"], 8080);
    assert_eq!(sidecar["statusContext"]["restartCount"], 2);
    // The user's strategy is kept as given.
    assert_eq!(out["spec"]["strategy"]["terminationGracePeriodSeconds"], 30);
    // The stamped request decodes into our types.
    let typed: kruise_api::apps_v1alpha1::ContainerRecreateRequest =
        serde_json::from_value(out).unwrap();
    assert_eq!(typed.spec.containers.len(), 2);
}

#[test]
fn minimal_request_gets_the_defaults() {
    let out = admit_create(&minimal(), Some(&the_pod())).unwrap();
    assert_eq!(out["spec"]["strategy"]["failurePolicy"], "Fail");
    assert_eq!(out["spec"]["strategy"]["terminationGracePeriodSeconds"], 45);
    assert!(out["spec"]["strategy"].get("orderedRecreate").is_none());
}

#[test]
fn every_spec_rule_has_the_upstream_message_and_names_the_field() {
    let mut o = minimal();
    o["spec"]["podName"] = json!("");
    assert_eq!(
        only_error(&o, None),
        "spec.podName: Required value: podName can not be empty"
    );
    let mut o = minimal();
    o["spec"]["containers"] = json!([]);
    assert_eq!(
        only_error(&o, None),
        "spec.containers: Required value: containers list can not be null"
    );
    let mut o = minimal();
    o["spec"]["activeDeadlineSeconds"] = json!(2);
    assert_eq!(
        only_error(&o, None),
        "spec.activeDeadlineSeconds: Invalid value: 2: activeDeadlineSeconds can not be less than 3s"
    );
    let mut o = minimal();
    o["spec"]["strategy"] = json!({"terminationGracePeriodSeconds": -1});
    assert!(only_error(&o, None).contains(
        "spec.strategy.terminationGracePeriodSeconds: Invalid value: -1: terminationGracePeriodSeconds must be non-negative integer"
    ));
    let mut o = minimal();
    o["spec"]["strategy"] = json!({"unreadyGracePeriodSeconds": -5});
    assert!(
        only_error(&o, None).contains("unreadyGracePeriodSeconds must be non-negative integer")
    );
    let mut o = minimal();
    o["spec"]["strategy"] = json!({"failurePolicy": "Retry"});
    assert_eq!(
        only_error(&o, None),
        "spec.strategy.failurePolicy: Invalid value: unknown failurePolicy Retry"
    );
    let mut o = minimal();
    o["spec"]["containers"] = json!([{"name": "app"}, {"name": "app"}]);
    assert_eq!(
        only_error(&o, None),
        "spec.containers[1].name: Invalid value: can not recreate app multi times"
    );
    for field in ["preStop", "ports", "statusContext"] {
        let mut o = minimal();
        o["spec"]["containers"][0][field] = json!({});
        assert_eq!(
            only_error(&o, Some(&the_pod())),
            "spec.containers[0]: Forbidden: preStop, ports, statusContext in container are ready-only fields"
        );
    }
}

#[test]
fn pod_rules() {
    assert_eq!(
        only_error(&minimal(), None),
        "spec.podName: Invalid value: no found Pod named pod-name"
    );
    let mut done = the_pod();
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(
        only_error(&minimal(), Some(&done))
            .contains("not allowed to recreate containers in an inactive Pod")
    );
    let mut pending = the_pod();
    pending.spec.as_mut().unwrap().node_name = None;
    assert!(
        only_error(&minimal(), Some(&pending))
            .contains("not allowed to recreate containers in a pending Pod")
    );
    let mut o = minimal();
    o["spec"]["containers"] = json!([{"name": "nope"}]);
    assert_eq!(
        only_error(&o, Some(&the_pod())),
        "spec.containers[0].name: Invalid value: container nope not found in Pod"
    );
    let mut o = minimal();
    o["spec"]["containers"] = json!([{"name": "late"}]);
    assert!(only_error(&o, Some(&the_pod())).contains(
        "no containerID in late containerStatus, maybe the container has not been initialized"
    ));
}

#[test]
fn several_spec_errors_are_reported_together() {
    let o = json!({"spec": {"podName": "", "containers": [], "activeDeadlineSeconds": 1}});
    let m = messages(&admit_create(&o, None).unwrap_err());
    assert_eq!(m.len(), 3, "{m:?}");
}

#[test]
fn update_keeps_spec_labels_and_acquired_annotation() {
    let old = admit_create(&sample_request(), Some(&the_pod())).unwrap();
    // What the manager does: annotations, finalizers, the active label dropped.
    let mut ok = old.clone();
    ok["metadata"]["annotations"] = json!({keys::CRR_UNREADY_ACQUIRED: "2021-05-20T08:00:00Z"});
    ok["metadata"]["finalizers"] = json!([keys::CRR_UNREADY_ACQUIRED]);
    ok["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove(keys::CRR_ACTIVE);
    assert!(update_errors(&ok, &old).is_empty());

    let mut changed = old.clone();
    changed["spec"]["strategy"]["minStartedSeconds"] = json!(1);
    assert_eq!(
        messages(&update_errors(&changed, &old)),
        ["spec: Forbidden: spec of ContainerRecreateRequest is immutable"]
    );
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"][keys::CRR_POD_UID] = json!("other");
    relabelled["metadata"]["labels"][keys::CRR_NODE_NAME] = json!("other");
    assert_eq!(update_errors(&relabelled, &old).len(), 2);
    let mut reacquired = ok.clone();
    reacquired["metadata"]["annotations"][keys::CRR_UNREADY_ACQUIRED] =
        json!("2030-01-01T00:00:00Z");
    assert!(
        messages(&update_errors(&reacquired, &ok))[0]
            .contains("not allowed to update immutable annotation")
    );
}

#[test]
fn configurations_are_named_for_the_kind() {
    let (validating, mutating) = configurations(None);
    assert_eq!(
        validating[0].metadata.name.as_deref(),
        Some("kruise-containerrecreaterequest-validating")
    );
    let m = &mutating[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(m.name, "mcontainerrecreaterequest.kb.io");
    assert_eq!(
        m.rules.as_ref().unwrap()[0].operations,
        Some(vec!["CREATE".to_string()])
    );
}

proptest! {
    /// Any admitted request names a container of the Pod at most once, carries the
    /// Pod's identity, and is a fixed point: stamping it again changes nothing but the
    /// read-only fields' presence check (which then refuses it, as a user-set field).
    #[test]
    fn admitted_requests_carry_the_pods_identity(
        names in proptest::collection::vec(prop_oneof![Just("app"), Just("sidecar"), Just("nope")], 1..4),
        deadline in proptest::option::of(-5i64..20),
    ) {
        let mut o = minimal();
        o["spec"]["containers"] = json!(names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>());
        if let Some(d) = deadline {
            o["spec"]["activeDeadlineSeconds"] = json!(d);
        }
        match admit_create(&o, Some(&the_pod())) {
            Ok(out) => {
                let unique: BTreeSet<_> = names.iter().collect();
                prop_assert_eq!(unique.len(), names.len());
                prop_assert!(!names.contains(&"nope"));
                prop_assert!(deadline.is_none_or(|d| d >= MIN_DEADLINE_SECONDS));
                prop_assert_eq!(&out["metadata"]["labels"][keys::CRR_POD_UID], "4a1b2c3d");
                for c in out["spec"]["containers"].as_array().unwrap() {
                    prop_assert!(c["statusContext"]["containerID"].as_str().unwrap().starts_with("containerd://"));
                }
                prop_assert!(admit_create(&out, Some(&the_pod())).is_err());
            }
            Err(errors) => prop_assert!(!errors.is_empty()),
        }
    }
}
