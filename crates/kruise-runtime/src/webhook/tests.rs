//! Server tests: request handling through the router (no TLS), then the TLS server with
//! rotation on tiny lifetimes.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tower::ServiceExt;

use super::certs::test_support::{connect, peer_cert, serial_and_not_before};
use super::*;
use crate::settings::Settings;

fn review(uid: &str, operation: &str, object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": null,
            "dryRun": false,
        }
    }))
    .unwrap()
}

fn pod(labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    })
}

/// Denies pods labelled `deny: "true"`, labels the others.
fn pod_policy() -> Handler {
    typed(|req: AdmissionRequest<Pod>| async move {
        let pod = req.object.clone().unwrap_or_default();
        let labels = pod.metadata.labels.unwrap_or_default();
        if labels.get("deny").map(String::as_str) == Some("true") {
            return Ok(AdmissionResponse::from(&req).deny("pods labelled deny=true are refused"));
        }
        if labels.is_empty() {
            return AdmissionResponse::from(&req)
                .with_patch(add_label("seen", "yes"))
                .map_err(|e| HandlerError::Internal(e.to_string()));
        }
        Ok(AdmissionResponse::from(&req))
    })
}

fn add_label(key: &str, value: &str) -> json_patch::Patch {
    serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/labels", "value": {key: value}}
    ]))
    .unwrap()
}

fn app(metrics: &Metrics, options: &Options, on_failure: OnFailure, handler: Handler) -> Router {
    router(
        vec![Route::new("/validate", "test", handler).on_failure(on_failure)],
        metrics,
        options,
        false,
    )
}

#[tokio::test]
async fn with_a_client_ca_an_admission_request_needs_a_certified_connection() {
    let metrics = Metrics::new();
    let app = router(
        vec![Route::new("/validate", "test", pod_policy())],
        &metrics,
        &Options::default(),
        true,
    );
    let send = |certified: bool| {
        let mut request = Request::post("/validate")
            .header("content-type", "application/json")
            .body(Body::from(review(
                "u-c",
                "CREATE",
                pod(json!({"deny": "true"})),
            )))
            .unwrap();
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(tls::Peer {
                addr: ([10, 0, 0, 9], 40000).into(),
                certified,
            }));
        app.clone().oneshot(request)
    };
    let forged = send(false).await.unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    let body = axum::body::to_bytes(forged.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("KRUISE_WEBHOOK_CLIENT_CA"));
    assert_eq!(
        metrics
            .webhook_errors
            .with_label_values(&["test", "unauthenticated"])
            .get(),
        1
    );
    // The apiserver's own call: handled (and here denied by the policy, as it should be).
    let real = send(true).await.unwrap();
    assert_eq!(real.status(), StatusCode::OK);
    let body = axum::body::to_bytes(real.into_body(), usize::MAX)
        .await
        .unwrap();
    assert_eq!(
        response_of(&String::from_utf8_lossy(&body))["allowed"],
        false
    );
}

async fn post(app: &Router, body: Vec<u8>) -> (StatusCode, String) {
    let response = app
        .clone()
        .oneshot(
            Request::post("/validate")
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn response_of(body: &str) -> Value {
    let review: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{body}");
    assert_eq!(review["kind"], "AdmissionReview", "{body}");
    review["response"].clone()
}

/// A request as the apiserver sends it, with `oldObject`.
fn request(operation: &str, object: Value, old: Value) -> AdmissionRequest<DynamicObject> {
    let mut body: Value = serde_json::from_slice(&review("u-m", operation, object)).unwrap();
    body["request"]["oldObject"] = old;
    let review: kube::core::admission::AdmissionReview<DynamicObject> =
        serde_json::from_value(body).unwrap();
    review.try_into().unwrap()
}

#[test]
fn mutate_json_patches_to_the_defaulted_object_and_passes_old_only_on_update() {
    // Labels the object with whether the stored object was passed.
    let defaulted = |object: &Value, old: Option<&Value>| {
        let mut d = object.clone();
        d["metadata"]["labels"]["old"] = json!(old.is_some().to_string());
        d
    };
    let patch_of = |response: AdmissionResponse| -> Value {
        assert!(response.allowed);
        serde_json::from_slice(&response.patch.expect("a patch")).unwrap()
    };
    let stored = pod(json!({"a": "b"}));
    let create = request("CREATE", pod(json!({"a": "b"})), stored.clone());
    let (object, old) = json_objects(&create).unwrap();
    assert_eq!(
        (object.unwrap(), old.unwrap()),
        (pod(json!({"a": "b"})), stored.clone())
    );
    assert_eq!(
        patch_of(mutate_json(&create, defaulted).unwrap()),
        json!([{"op": "add", "path": "/metadata/labels/old", "value": "false"}])
    );
    let update = request("UPDATE", pod(json!({"a": "b"})), stored);
    assert_eq!(
        patch_of(mutate_json(&update, defaulted).unwrap()),
        json!([{"op": "add", "path": "/metadata/labels/old", "value": "true"}])
    );
    let unchanged = mutate_json(&update, |object, _| object.clone()).unwrap();
    assert!(unchanged.allowed && unchanged.patch.is_none());
    let deleted = request("DELETE", Value::Null, pod(json!({})));
    let response = mutate_json(&deleted, defaulted).unwrap();
    assert!(response.allowed && response.patch.is_none());
}

#[test]
fn validating_denies_with_field_errors_on_create_and_update_only() {
    // Refuses a Pod labelled bad=yes; says whether the stored object came along.
    let validate = |object: &Value, old: Option<&Value>| {
        if object.pointer("/metadata/labels/undecodable").is_some() {
            return Err("object: not a Pod".to_string());
        }
        let mut errors = Vec::new();
        if object.pointer("/metadata/labels/bad") == Some(&json!("yes")) {
            errors.push(field::invalid(
                "metadata.labels.bad",
                "\"yes\"",
                "must not be yes",
            ));
        }
        if old.is_some() {
            errors.push(field::forbidden("spec", "old was passed"));
        }
        Ok(errors)
    };
    let create = |labels: Value| request("CREATE", pod(labels), pod(json!({})));
    let allowed = validate_json(&create(json!({"a": "b"})), validate).unwrap();
    assert!(allowed.allowed, "{allowed:?}");
    let denied = validate_json(&create(json!({"bad": "yes"})), validate).unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.result.code, 422);
    assert!(
        denied
            .result
            .message
            .contains("metadata.labels.bad: Invalid value: \"yes\": must not be yes"),
        "{}",
        denied.result.message
    );
    // The stored object is passed on UPDATE only.
    let update = request("UPDATE", pod(json!({})), pod(json!({})));
    let denied = validate_json(&update, validate).unwrap();
    assert!(
        denied.result.message.contains("old was passed"),
        "{denied:?}"
    );
    // DELETE is not judged here; an object that does not decode is the route's failure.
    let deleted = request("DELETE", Value::Null, pod(json!({"bad": "yes"})));
    assert!(validate_json(&deleted, validate).unwrap().allowed);
    assert!(matches!(
        validate_json(&create(json!({"undecodable": "x"})), validate),
        Err(HandlerError::Decode(m)) if m == "object: not a Pod"
    ));
}

#[tokio::test]
async fn malformed_bodies_get_400_not_a_panic() {
    let metrics = Metrics::new();
    let app = app(&metrics, &Options::default(), OnFailure::Deny, pod_policy());
    let bodies: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"not json".to_vec(),
        b"{}".to_vec(),
        b"[]".to_vec(),
        b"null".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x01],
        br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#.to_vec(),
        br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":5}}"#
            .to_vec(),
        br#"{"kind":"Pod","apiVersion":"v1","request":{"uid":"x","operation":"BOOM"}}"#.to_vec(),
    ];
    let count = bodies.len();
    for body in bodies {
        let shown = String::from_utf8_lossy(&body).into_owned();
        let (status, text) = post(&app, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{shown:?} → {text}");
        assert!(!text.is_empty(), "a 400 says why");
    }
    let metrics = metrics.render();
    assert!(
        metrics.contains(&format!(
            "kruise_webhook_errors_total{{kind=\"malformed\",webhook=\"test\"}} {count}"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("decision=\"error\",operation=\"UNKNOWN\",webhook=\"test\""));
}

#[tokio::test]
async fn a_review_that_names_its_uid_is_answered_with_it() {
    let metrics = Metrics::new();
    let body = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1","operation":"EXPLODE"}}"#;

    let deny = app(&metrics, &Options::default(), OnFailure::Deny, pod_policy());
    let (status, text) = post(&deny, body.to_vec()).await;
    assert_eq!(status, StatusCode::OK);
    let response = response_of(&text);
    assert_eq!(response["uid"], "u-1");
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("test: malformed AdmissionReview"),
        "{message}"
    );

    let allow = app(
        &metrics,
        &Options::default(),
        OnFailure::Allow,
        pod_policy(),
    );
    let response = response_of(&post(&allow, body.to_vec()).await.1);
    assert_eq!(response["uid"], "u-1");
    assert_eq!(response["allowed"], true);
    assert!(
        response["warnings"][0]
            .as_str()
            .unwrap()
            .contains("admitted without this check")
    );
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    let metrics = Metrics::new();
    let options = Options {
        body_limit: 1024,
        ..Options::default()
    };
    let app = app(&metrics, &options, OnFailure::Deny, pod_policy());
    let big = review("u-big", "CREATE", pod(json!({"filler": "x".repeat(4096)})));
    let (status, _) = post(&app, big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        metrics
            .render()
            .contains("kruise_webhook_errors_total{kind=\"too_large\",webhook=\"test\"} 1")
    );
}

#[tokio::test]
async fn a_body_that_never_finishes_is_cut_off_with_408() {
    use futures::StreamExt;
    let metrics = Metrics::new();
    let options = Options {
        request_timeout: Duration::from_millis(200),
        ..Options::default()
    };
    let app = app(&metrics, &options, OnFailure::Deny, pod_policy());
    // One chunk, then silence: a slow or stuck client.
    let first: Result<Bytes, std::io::Error> = Ok(Bytes::from_static(b"{\"kind\":"));
    let body =
        Body::from_stream(futures::stream::iter(vec![first]).chain(futures::stream::pending()));
    let request = Request::post("/validate")
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let started = std::time::Instant::now();
    let response = tokio::time::timeout(Duration::from_secs(5), app.oneshot(request))
        .await
        .expect("answered, not hung")
        .unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        metrics
            .render()
            .contains("kruise_webhook_errors_total{kind=\"deadline\",webhook=\"test\"} 1")
    );
}

#[tokio::test]
async fn oversized_conversion_reviews_get_413_and_slow_ones_408() {
    use futures::StreamExt;
    let metrics = Metrics::new();
    let options = Options {
        body_limit: 1024,
        request_timeout: Duration::from_millis(200),
        ..Options::default()
    };
    let convert: conversion::Converter = Arc::new(|object, _| Ok(object));
    let app = router(
        vec![Route::conversion(
            "/convert",
            "conv",
            "things.test.kruise.io",
            convert,
        )],
        &metrics,
        &options,
        true,
    );
    let big = vec![b' '; 4096];
    let response = app
        .clone()
        .oneshot(Request::post("/convert").body(Body::from(big)).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        metrics
            .render()
            .contains("kruise_webhook_errors_total{kind=\"too_large\",webhook=\"conv\"} 1")
    );
    let first: Result<Bytes, std::io::Error> = Ok(Bytes::from_static(b"{"));
    let body =
        Body::from_stream(futures::stream::iter(vec![first]).chain(futures::stream::pending()));
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        app.oneshot(Request::post("/convert").body(body).unwrap()),
    )
    .await
    .expect("answered, not hung")
    .unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
}

#[tokio::test]
async fn huge_pods_within_the_limit_are_decided() {
    let metrics = Metrics::new();
    let app = app(&metrics, &Options::default(), OnFailure::Deny, pod_policy());
    let mut object = pod(json!({"deny": "true"}));
    object["metadata"]["annotations"] = json!({"big": "y".repeat(5 << 20)});
    object["spec"]["containers"] = json!(
        (0..2000)
            .map(|i| json!({"name": format!("c{i}"), "image": "busybox"}))
            .collect::<Vec<_>>()
    );
    let (status, text) = post(&app, review("u-huge", "CREATE", object)).await;
    assert_eq!(status, StatusCode::OK);
    let response = response_of(&text);
    assert_eq!(response["uid"], "u-huge");
    assert_eq!(response["allowed"], false);
}

#[tokio::test]
async fn typed_adapter_answers_decode_failures_by_policy() {
    let metrics = Metrics::new();
    let bad_pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": "not a list"},
    });
    let deny = app(&metrics, &Options::default(), OnFailure::Deny, pod_policy());
    let response = response_of(
        &post(&deny, review("u-2", "CREATE", bad_pod.clone()))
            .await
            .1,
    );
    assert_eq!(response["uid"], "u-2");
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("cannot decode object as Pod"), "{message}");
    assert_eq!(response["status"]["code"], 400);

    let allow = app(
        &metrics,
        &Options::default(),
        OnFailure::Allow,
        pod_policy(),
    );
    let response = response_of(&post(&allow, review("u-3", "CREATE", bad_pod)).await.1);
    assert_eq!(response["allowed"], true);
    assert!(
        response["warnings"][0]
            .as_str()
            .unwrap()
            .contains("cannot decode")
    );
    assert!(
        metrics
            .render()
            .contains("kruise_webhook_errors_total{kind=\"decode\",webhook=\"test\"} 2")
    );
}

#[tokio::test]
async fn panics_and_timeouts_are_answered_not_dropped() {
    let metrics = Metrics::new();
    // A handler bug: the name "p" is no number.
    let panicking = dynamic(|req| async move {
        let n: u32 = req.name.parse().expect("handler bug");
        Ok(AdmissionResponse::invalid(n))
    });
    let app1 = app(&metrics, &Options::default(), OnFailure::Deny, panicking);
    let response = response_of(&post(&app1, review("u-4", "UPDATE", pod(json!({})))).await.1);
    assert_eq!(response["uid"], "u-4");
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("handler bug")
    );

    let slow = dynamic(|req| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(AdmissionResponse::from(&req))
    });
    let options = Options {
        handler_timeout: Duration::from_millis(50),
        ..Options::default()
    };
    let app2 = app(&metrics, &options, OnFailure::Allow, slow);
    let response = response_of(&post(&app2, review("u-5", "DELETE", pod(json!({})))).await.1);
    assert_eq!(response["uid"], "u-5");
    assert_eq!(response["allowed"], true);
    let text = metrics.render();
    assert!(text.contains("kruise_webhook_errors_total{kind=\"panic\",webhook=\"test\"} 1"));
    assert!(text.contains("kruise_webhook_errors_total{kind=\"timeout\",webhook=\"test\"} 1"));
    assert!(
        text.contains("decision=\"error\",operation=\"DELETE\""),
        "{text}"
    );
}

#[tokio::test]
async fn decisions_are_recorded_by_operation() {
    let metrics = Metrics::new();
    let app = app(&metrics, &Options::default(), OnFailure::Deny, pod_policy());
    let denied = response_of(
        &post(&app, review("a", "CREATE", pod(json!({"deny": "true"}))))
            .await
            .1,
    );
    assert_eq!(denied["allowed"], false);
    assert_eq!(
        denied["status"]["message"],
        "pods labelled deny=true are refused"
    );
    let patched = response_of(&post(&app, review("b", "CREATE", pod(json!({})))).await.1);
    assert_eq!(patched["patchType"], "JSONPatch");
    let allowed = response_of(
        &post(&app, review("c", "UPDATE", pod(json!({"a": "b"}))))
            .await
            .1,
    );
    assert_eq!(allowed["allowed"], true);
    assert!(allowed.get("patch").is_none());
    let text = metrics.render();
    for labels in [
        "decision=\"denied\",operation=\"CREATE\"",
        "decision=\"patched\",operation=\"CREATE\"",
        "decision=\"allowed\",operation=\"UPDATE\"",
    ] {
        assert!(
            text.contains(&format!(
                "kruise_webhook_request_duration_seconds_count{{{labels},webhook=\"test\"}} 1"
            )),
            "{labels}: {text}"
        );
    }
}

// --- the TLS server ---

async fn runtime() -> Runtime {
    runtime_with(None).await
}

async fn runtime_with(cert_dir: Option<String>) -> Runtime {
    let settings = Settings {
        webhook_cert_dir: cert_dir,
        admin_addr: ([127, 0, 0, 1], 0).into(),
        webhook_addr: ([127, 0, 0, 1], 0).into(),
        webhook_url: Some("https://127.0.0.1:0".into()),
        leader_elect: false,
        ..Default::default()
    };
    // No apiserver: nothing here registers configurations.
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    Runtime::new("webhook-test", settings, config)
        .await
        .unwrap()
}

/// One HTTP/1.1 request on an open (keep-alive) stream; returns (status, body).
async fn roundtrip<S>(stream: &mut S, path: &str, body: &[u8]) -> (u16, String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    stream.flush().await.unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).await.unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut buf = vec![0; length];
    reader.read_exact(&mut buf).await.unwrap();
    (status, String::from_utf8_lossy(&buf).into_owned())
}

fn tiny(rotation: Rotation) -> Options {
    Options {
        rotation,
        ..Options::default()
    }
}

#[tokio::test]
async fn serves_reviews_over_tls_and_turns_ready() {
    let runtime = runtime().await;
    let server = WebhookServer::start(&runtime, vec![Route::new("/validate", "tls", pod_policy())])
        .await
        .unwrap();
    assert!(
        runtime.readiness.is_ready(),
        "{:?}",
        runtime.readiness.pending()
    );
    let port = server.local_addr().port();
    assert_ne!(port, 0);
    assert_eq!(server.url(), Some(format!("https://127.0.0.1:{port}")));
    assert_eq!(
        server.client_config("/validate").unwrap().url,
        Some(format!("https://127.0.0.1:{port}/validate"))
    );
    let ca = server.ca_pem().unwrap();
    let mut tls = connect(&ca, server.local_addr(), "127.0.0.1")
        .await
        .unwrap();
    let (status, body) = roundtrip(
        &mut tls,
        "/validate",
        &review("u-tls", "CREATE", pod(json!({"deny": "true"}))),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let response = response_of(&body);
    assert_eq!(response["uid"], "u-tls");
    assert_eq!(response["allowed"], false);
    let (status, _) = roundtrip(&mut tls, "/validate", b"garbage").await;
    assert_eq!(status, 400);
    let (status, _) = roundtrip(&mut tls, "/nowhere", b"{}").await;
    assert_eq!(status, 404);
    runtime.shutdown.cancel();
}

#[tokio::test]
async fn rotation_swaps_the_served_certificate_without_dropping_connections() {
    let runtime = runtime().await;
    let server = WebhookServer::start_with(
        &runtime,
        vec![Route::new("/validate", "rot", pod_policy())],
        tiny(Rotation {
            serving_validity: Duration::from_secs(3),
            rotate_at: 0.5,
            check_interval: Duration::from_millis(100),
            backdate: Duration::ZERO,
            ..Rotation::default()
        }),
    )
    .await
    .unwrap();
    let ca = server.ca_pem().unwrap();
    let mut before = connect(&ca, server.local_addr(), "127.0.0.1")
        .await
        .unwrap();
    let first = peer_cert(&before);
    assert_eq!(first, server.serving_cert_der());
    let (serial1, not_before1) = serial_and_not_before(&first);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let second = loop {
        let stream = connect(&ca, server.local_addr(), "127.0.0.1")
            .await
            .expect("a rotated certificate still verifies against the CA");
        let served = peer_cert(&stream);
        if served != first {
            break served;
        }
        assert!(tokio::time::Instant::now() < deadline, "never rotated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (serial2, not_before2) = serial_and_not_before(&second);
    assert_ne!(serial1, serial2);
    assert!(not_before2 >= not_before1, "{not_before1} → {not_before2}");
    assert_eq!(
        server.ca_pem().unwrap(),
        ca,
        "only the serving certificate rotates"
    );

    // The connection made before the swap still works.
    let (status, _) = roundtrip(
        &mut before,
        "/validate",
        &review("u-old-conn", "CREATE", pod(json!({"a": "b"}))),
    )
    .await;
    assert_eq!(status, 200);
    runtime.shutdown.cancel();
}

#[tokio::test]
async fn ca_rotation_publishes_the_new_ca_then_serves_from_it() {
    let runtime = runtime().await;
    let server = WebhookServer::start_with(
        &runtime,
        vec![Route::new("/validate", "ca", pod_policy())],
        tiny(Rotation {
            ca_validity: Duration::from_secs(4),
            serving_validity: Duration::from_secs(3600),
            rotate_at: 0.5,
            check_interval: Duration::from_millis(100),
            backdate: Duration::ZERO,
            propagation: Duration::from_millis(300),
        }),
    )
    .await
    .unwrap();
    let first_ca = server.ca_pem().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let bundle = loop {
        let bundle = server.ca_pem().unwrap();
        if bundle != first_ca {
            break bundle;
        }
        assert!(tokio::time::Instant::now() < deadline, "CA never rotated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Newest first, the previous one kept while it is valid.
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2, "{bundle}");
    assert!(bundle.ends_with(&first_ca));
    let new_ca = bundle.strip_suffix(&first_ca).unwrap().to_string();
    // With nothing registered the bundle is published at once, so the serving certificate
    // follows the new CA: it verifies with the new CA alone.
    loop {
        if let Ok(stream) = connect(&new_ca, server.local_addr(), "localhost").await {
            assert_eq!(peer_cert(&stream), server.serving_cert_der());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "serving cert never followed the CA"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    runtime.shutdown.cancel();
}

#[tokio::test]
async fn bad_routes_and_rotation_settings_fail_at_start() {
    let runtime = runtime().await;
    let err = WebhookServer::start(&runtime, vec![Route::new("validate", "x", pod_policy())])
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("must start with '/'"), "{err}");
    let err = WebhookServer::start_with(
        &runtime,
        vec![],
        tiny(Rotation {
            rotate_at: 1.5,
            ..Rotation::default()
        }),
    )
    .await
    .err()
    .unwrap();
    assert!(err.to_string().contains("rotate_at"), "{err}");
    runtime.shutdown.cancel();
}

#[tokio::test]
async fn cert_dir_files_are_served_and_reloaded_when_they_change() {
    use super::certs::{Authority, CA_FILE, CERT_FILE, KEY_FILE};
    let rotation = Rotation::default();
    let now = std::time::SystemTime::now();
    let ca = Authority::generate("cert-manager", &rotation, 1, now).unwrap();
    let dir = std::env::temp_dir().join(format!("kruise-webhook-dir-{}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |(cert, key): (String, String)| {
        std::fs::write(dir.join(CERT_FILE), cert).unwrap();
        std::fs::write(dir.join(KEY_FILE), key).unwrap();
    };
    write(ca.issue_pem(&["127.0.0.1"]));
    std::fs::write(dir.join(CA_FILE), &ca.pem).unwrap();

    let runtime = runtime_with(Some(dir.display().to_string())).await;
    let server = WebhookServer::start_with(
        &runtime,
        vec![Route::new("/validate", "dir", pod_policy())],
        tiny(Rotation {
            check_interval: Duration::from_millis(100),
            ..Rotation::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(server.ca_pem().as_deref(), Some(ca.pem.as_str()));
    let first = peer_cert(
        &connect(&ca.pem, server.local_addr(), "127.0.0.1")
            .await
            .unwrap(),
    );

    // cert-manager renews: same CA, new leaf.
    write(ca.issue_pem(&["127.0.0.1", "localhost"]));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let served = peer_cert(
            &connect(&ca.pem, server.local_addr(), "127.0.0.1")
                .await
                .unwrap(),
        );
        if served != first {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never reloaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A half-written pair (key of another certificate) is refused; the last good one serves.
    std::fs::write(
        dir.join(KEY_FILE),
        rcgen::KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        connect(&ca.pem, server.local_addr(), "localhost")
            .await
            .is_ok()
    );
    runtime.shutdown.cancel();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A cert dir from a Secret cert-manager or the user filled (the chart's `certManager` and
/// `webhookCertificate` modes): its certificate is served; with `ca.crt` that CA is the
/// caBundle registered, without it no caBundle is registered at all, so the one
/// cert-manager's CA injector (or the chart, from values) put there stays.
#[tokio::test]
async fn cert_dir_sets_the_registered_ca_bundle_or_leaves_it_alone() {
    use super::certs::{Authority, CA_FILE, CERT_FILE, KEY_FILE};
    let rotation = Rotation::default();
    let ca = Authority::generate("user-ca", &rotation, 1, std::time::SystemTime::now()).unwrap();
    for with_ca in [true, false] {
        let dir =
            std::env::temp_dir().join(format!("kruise-webhook-dir-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = ca.issue_pem(&["127.0.0.1"]);
        std::fs::write(dir.join(CERT_FILE), cert).unwrap();
        std::fs::write(dir.join(KEY_FILE), key).unwrap();
        if with_ca {
            std::fs::write(dir.join(CA_FILE), &ca.pem).unwrap();
        }
        let runtime = runtime_with(Some(dir.display().to_string())).await;
        let server = WebhookServer::start_with(
            &runtime,
            vec![Route::new("/validate", "dir", pod_policy())],
            Options::default(),
        )
        .await
        .unwrap();
        let bundle = server
            .client_config("/validate")
            .unwrap()
            .ca_bundle
            .map(|b| String::from_utf8(b.0).unwrap());
        if with_ca {
            assert_eq!(bundle.as_deref(), Some(ca.pem.as_str()));
        } else {
            assert_eq!(
                bundle, None,
                "no ca.crt: the caBundle is left to the injector"
            );
        }
        // Either way the user's certificate is what handshakes get (no generated CA).
        assert!(
            connect(&ca.pem, server.local_addr(), "127.0.0.1")
                .await
                .is_ok()
        );
        runtime.shutdown.cancel();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
