//! Handler-only cost of one Pod injection review, measured the way the webhook server
//! runs it: the AdmissionReview body (a `test-pod` like upstream's fixture in
//! `openkruise/kruise v1.9.0 pkg/webhook/pod/mutating/sidecarset_test.go`, as the apiserver sends it:
//! defaulted, with the service-account volume) is parsed, the review decided by
//! [`sidecarset_ctl::webhook::review_pod`] against a `test-sidecarset` like upstream's, and the answer
//! serialized. A counting global allocator (stats_alloc: no unsafe code here) counts
//! allocations per review; wall time per review is averaged over many runs.
//!
//! Run `cargo test --release -p sidecarset-ctl --test injection_allocations -- --nocapture`
//! for the figures; in `cargo test` it guards the allocation count against regressions.

#![recursion_limit = "256"]
// A test: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps_v1alpha1::SidecarSet;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde_json::json;
use sidecarset_ctl::inject::Revisions;
use sidecarset_ctl::matching::NamespaceLabels;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

struct NoRevisions;
impl Revisions for NoRevisions {
    fn named(&self, _: &str) -> Option<ControllerRevision> {
        None
    }
    fn of(&self, _: &str) -> Vec<ControllerRevision> {
        Vec::new()
    }
}

struct NoNamespaces;
impl NamespaceLabels for NoNamespaces {
    fn labels_of(&self, _: &str) -> Option<BTreeMap<String, String>> {
        None
    }
}

fn seed_sidecarset() -> SidecarSet {
    let raw = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "test-sidecarset"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1},
                 "containers": [{"name": "sidecar1", "image": "busybox", "command": ["sleep", "999d"],
                                 "volumeMounts": [{"name": "log-volume", "mountPath": "/var/log"}]}],
                 "volumes": [{"name": "log-volume", "emptyDir": {}}]}});
    let mut defaulted = sidecarset_ctl::defaults::with_defaults(&raw);
    let ss: SidecarSet = serde_json::from_value(defaulted.clone()).unwrap();
    let h = sidecarset_ctl::hash::hashes(&ss.spec);
    defaulted["metadata"]["annotations"] = json!({"kruise.io/sidecarset-hash": h.hash, "kruise.io/sidecarset-hash-without-image": h.without_image});
    serde_json::from_value(defaulted).unwrap()
}

/// The review body the apiserver sends for `test-pod`.
fn review_body() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "test-pod", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "test-pod", "namespace": "default", "labels": {"app": "nginx"},
                             "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"nginx\"},\"name\":\"test-pod\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"image\":\"nginx:1.7.9\",\"name\":\"app\"}]}}\n"}},
                "spec": {
                    "containers": [{"name": "app", "image": "nginx:1.7.9", "imagePullPolicy": "IfNotPresent", "resources": {},
                                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                                    "volumeMounts": [{"name": "kube-api-access-whxz7", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]}],
                    "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
                    "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {},
                    "serviceAccount": "default", "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                    "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                                    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}],
                    "volumes": [{"name": "kube-api-access-whxz7", "projected": {"defaultMode": 420, "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}]
                },
                "status": {"phase": "Pending", "qosClass": "BestEffort"}
            },
            "oldObject": null, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    }))
    .unwrap()
}

/// One review as the server handles it: bytes in, bytes out.
fn handle(body: &[u8], sets: &[Arc<SidecarSet>], now: jiff::Timestamp) -> Vec<u8> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).unwrap();
    let req: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    let response = sidecarset_ctl::webhook::review_pod(
        req,
        sets,
        &NoNamespaces,
        &NoRevisions,
        now,
        &mut || 0.5,
    )
    .unwrap();
    assert!(response.patch.is_some(), "the seed Pod is injected");
    serde_json::to_vec(&response.into_review()).unwrap()
}

#[test]
fn allocations_and_time_per_injection_review() {
    let sets = vec![Arc::new(seed_sidecarset())];
    let body = review_body();
    let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    // Warm up (lazy statics, first-use allocations).
    for _ in 0..10 {
        handle(&body, &sets, now);
    }
    let region = Region::new(GLOBAL);
    handle(&body, &sets, now);
    let one = region.change();
    let runs = 2000;
    let started = Instant::now();
    for _ in 0..runs {
        std::hint::black_box(handle(&body, &sets, now));
    }
    let per_review = started.elapsed() / runs;
    println!(
        "injection review: {} allocations ({} bytes allocated, {} reallocations), {:?} per review ({} body bytes)",
        one.allocations,
        one.bytes_allocated,
        one.reallocations,
        per_review,
        body.len()
    );
    // A regression guard, not a target: the review decodes and re-encodes a whole Pod.
    assert!(
        one.allocations < 3000,
        "{} allocations per review",
        one.allocations
    );
}
