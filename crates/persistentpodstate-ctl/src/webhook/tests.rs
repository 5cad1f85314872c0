use std::sync::Arc;

use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde_json::{Value, json};

use super::*;

fn review(
    resource: (&str, &str, &str, &str),
    operation: &str,
    object: Value,
    old: Value,
) -> AdmissionRequest<DynamicObject> {
    let (group, version, kind, plural) = resource;
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "u-1",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
            "namespace": "echoserver",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        }
    }))
    .unwrap();
    review.try_into().unwrap()
}

const PPS: (&str, &str, &str, &str) = (
    "apps.kruise.io",
    "v1alpha1",
    "PersistentPodState",
    "persistentpodstates",
);
const POD: (&str, &str, &str, &str) = ("", "v1", "Pod", "pods");

/// The PPS of OpenKruise v1.2 release notes (`echoserver`) named `name`, with `spec` merged over
/// it.
fn pps_json(name: &str, spec: Value) -> Value {
    let mut base = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "PersistentPodState",
        "metadata": {"name": name, "namespace": "echoserver"},
        "spec": {
            "targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "echoserver"},
            "requiredPersistentTopology": {"nodeTopologyKeys": ["failure-domain.beta.kubernetes.io/zone"]},
            "preferredPersistentTopology": [{"weight": 100, "preference": {"nodeTopologyKeys": ["kubernetes.io/hostname"]}}]
        }
    });
    json_patch::merge(&mut base, &json!({ "spec": spec }));
    base
}

fn stored(v: Value) -> Arc<PersistentPodState> {
    Arc::new(serde_json::from_value(v).unwrap())
}

fn denial(resp: &AdmissionResponse) -> Option<String> {
    (!resp.allowed).then(|| resp.result.message.clone())
}

#[test]
fn the_echoserver_pps_is_admitted() {
    let resp = review_pps(
        review(
            PPS,
            "CREATE",
            pps_json("echoserver", json!({})),
            Value::Null,
        ),
        &[],
    )
    .unwrap();
    assert_eq!(denial(&resp), None);
}

#[test]
fn rejections_carry_the_spec_messages() {
    let cases = [
        (
            json!({"targetRef": {"apiVersion": "", "kind": "StatefulSet", "name": "echoserver"}}),
            "empty TargetReference is not valid for PersistentPodState.",
        ),
        (
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "echoserver"}}),
            "TargetReference.Kind must be StatefulSet or in PPS_Watch_Custom_Workload_WhiteList",
        ),
        (
            json!({"requiredPersistentTopology": null, "preferredPersistentTopology": null}),
            "TopologyConstraint and TopologyPreference cannot be empty at the same time",
        ),
        (
            json!({"preferredPersistentTopology": [{"weight": 0, "preference": {"nodeTopologyKeys": ["k"]}}]}),
            "spec.preferredPersistentTopology[0].weight: Invalid value: 0: must be in the range 1-100",
        ),
        (
            json!({"preferredPersistentTopology": [{"weight": 101, "preference": {"nodeTopologyKeys": ["k"]}}]}),
            "spec.preferredPersistentTopology[0].weight: Invalid value: 101",
        ),
    ];
    for (spec, message) in cases {
        let resp = review_pps(
            review(PPS, "CREATE", pps_json("p", spec.clone()), Value::Null),
            &[],
        )
        .unwrap();
        let got = denial(&resp).unwrap_or_else(|| panic!("{spec} admitted"));
        assert!(got.contains(message), "{got:?} lacks {message:?}");
        assert_eq!(resp.result.code, 422);
    }
}

#[test]
fn target_ref_is_immutable_and_unique_per_workload() {
    let old = pps_json("p", json!({}));
    let new = pps_json("p", json!({"targetRef": {"name": "other"}}));
    let resp = review_pps(review(PPS, "UPDATE", new, old.clone()), &[]).unwrap();
    assert!(
        denial(&resp)
            .unwrap()
            .contains("spec.targetRef: Forbidden: targetRef cannot be modified")
    );

    // Another PPS on the same workload, even through the other served version.
    let other = stored(pps_json(
        "first",
        json!({"targetRef": {"apiVersion": "apps.kruise.io/v1alpha1"}}),
    ));
    let resp = review_pps(
        review(PPS, "CREATE", pps_json("second", json!({})), Value::Null),
        std::slice::from_ref(&other),
    )
    .unwrap();
    assert!(
        denial(&resp)
            .unwrap()
            .contains("targetReference is in conflict with other PersistentPodState first")
    );
    // Itself, a different kind group, and a metadata-only update are fine.
    let itself = stored(pps_json("second", json!({})));
    assert_eq!(
        denial(
            &review_pps(
                review(PPS, "CREATE", pps_json("second", json!({})), Value::Null),
                &[itself]
            )
            .unwrap()
        ),
        None
    );
    let apps = pps_json("second", json!({"targetRef": {"apiVersion": "apps/v1"}}));
    assert_eq!(
        denial(
            &review_pps(
                review(PPS, "CREATE", apps, Value::Null),
                std::slice::from_ref(&other)
            )
            .unwrap()
        ),
        None
    );
    let mut relabelled = pps_json("second", json!({}));
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(
        denial(
            &review_pps(
                review(PPS, "UPDATE", relabelled, pps_json("second", json!({}))),
                &[other]
            )
            .unwrap()
        ),
        None
    );
}

fn statefulset_pod(name: &str, owner_api_version: &str, owner: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "echoserver",
            "annotations": {"keep": "me"},
            "ownerReferences": [{"apiVersion": owner_api_version, "kind": "StatefulSet", "name": owner, "uid": "u", "controller": true}]},
        "spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "nginx"}]}
    })
}

fn pps_with_state() -> Arc<PersistentPodState> {
    let mut v = pps_json("echoserver", json!({}));
    v["status"] = json!({"observedGeneration": 1, "podStates": {"echoserver-0": {
        "nodeName": "node-1",
        "nodeTopologyLabels": {"failure-domain.beta.kubernetes.io/zone": "zone-a", "kubernetes.io/hostname": "node-1"}}}});
    stored(v)
}

fn patched(resp: &AdmissionResponse, object: &Value) -> Option<Value> {
    let patch = resp.patch.as_ref()?;
    let patch: json_patch::Patch = serde_json::from_slice(patch).unwrap();
    let mut doc = object.clone();
    json_patch::patch(&mut doc, &patch).unwrap();
    Some(doc)
}

#[test]
fn echoserver_a_recreated_pod_gets_the_selector_the_preference_and_the_annotation() {
    let pod = statefulset_pod("echoserver-0", "apps.kruise.io/v1beta1", "echoserver");
    let resp = review_pod(
        review(POD, "CREATE", pod.clone(), Value::Null),
        &[pps_with_state()],
    )
    .unwrap();
    assert!(resp.allowed);
    let out = patched(&resp, &pod).expect("a patch");
    assert_eq!(
        out["spec"]["nodeSelector"],
        json!({"disk": "ssd", "failure-domain.beta.kubernetes.io/zone": "zone-a"})
    );
    assert_eq!(
        out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
        json!([{"weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}}])
    );
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"keep": "me", "kruise.io/injected-persistent-pod-state": "echoserver"})
    );
    assert_eq!(out["spec"]["containers"], pod["spec"]["containers"]);
}

#[test]
fn pods_without_a_state_or_a_matching_pps_are_left_alone() {
    let ppss = [pps_with_state()];
    for (pod, why) in [
        (
            statefulset_pod("echoserver-1", "apps.kruise.io/v1beta1", "echoserver"),
            "no state",
        ),
        (
            statefulset_pod("echoserver-0", "apps/v1", "echoserver"),
            "another group",
        ),
        (
            statefulset_pod("echoserver-0", "apps.kruise.io/v1beta1", "web"),
            "another set",
        ),
    ] {
        let resp = review_pod(review(POD, "CREATE", pod, Value::Null), &ppss).unwrap();
        assert!(resp.allowed && resp.patch.is_none(), "{why}");
    }
    // A kind that is not a StatefulSet is never mutated, even with a PPS of that name.
    let mut pod = statefulset_pod("echoserver-0", "apps.kruise.io/v1beta1", "echoserver");
    pod["metadata"]["ownerReferences"][0]["kind"] = json!("CloneSet");
    let resp = review_pod(review(POD, "CREATE", pod.clone(), Value::Null), &ppss).unwrap();
    assert!(resp.patch.is_none());
    // Only CREATE.
    let pod = statefulset_pod("echoserver-0", "apps.kruise.io/v1beta1", "echoserver");
    let resp = review_pod(review(POD, "UPDATE", pod.clone(), pod), &ppss).unwrap();
    assert!(resp.patch.is_none());
}

#[test]
fn configurations_scope_the_pod_webhook() {
    let (v, m) = configurations(Some("e2e-x"));
    assert_eq!(
        v[0].metadata.name.as_deref(),
        Some("kruise-persistentpodstate-validating-e2e-x")
    );
    let pod_hook = &m[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(pod_hook.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(
        pod_hook.rules.as_ref().unwrap()[0].operations.as_deref(),
        Some(&["CREATE".to_string()][..])
    );
    assert_eq!(
        pod_hook.match_conditions.as_ref().unwrap()[0].expression,
        POD_MATCH_CONDITION
    );
    assert!(pod_hook.namespace_selector.is_some());
    let pps_hook = &v[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(pps_hook.failure_policy.as_deref(), Some("Fail"));
}
