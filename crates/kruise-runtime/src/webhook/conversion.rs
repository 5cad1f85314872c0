//! CRD conversion webhooks: `ConversionReview` in, converted objects out.
//!
//! A controller whose CRD serves two versions with different shapes (CloneSet and
//! SidecarSet: `v1alpha1` stored, `v1beta1` served) registers a conversion route with
//! [`super::Route::conversion`]. A cluster-wide instance then points the CRD's
//! `spec.conversion` at this server ([`super::WebhookServer::register_conversions`]),
//! with the same endpoint and caBundle as its admission webhooks, re-applied after every
//! CA rotation. Namespace-scoped instances serve the route but never register it: a CRD
//! has one conversion webhook for the whole cluster.
//!
//! The converter works on JSON so fields it does not know survive the trip; the
//! apiserver rejects a conversion that changes anything in `metadata` but labels and
//! annotations, so converters touch nothing else there.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::metrics::Metrics;

/// Converts one object (JSON, any served version) to `desired_api_version`
/// (`group/version`). An `Err` fails the whole review with its message.
pub type Converter = Arc<dyn Fn(Value, &str) -> Result<Value, String> + Send + Sync>;

/// The conversion side of a [`super::Route`].
#[derive(Clone)]
pub struct ConversionRoute {
    /// The CRD whose `spec.conversion` names this route (`clonesets.apps.kruise.io`).
    pub crd: &'static str,
    pub convert: Converter,
}

pub(crate) struct ConversionCtx {
    pub(crate) name: &'static str,
    pub(crate) convert: Converter,
    pub(crate) metrics: Metrics,
}

/// Answers one `ConversionReview` (apiextensions.k8s.io/v1).
pub(crate) async fn handle(
    ctx: Arc<ConversionCtx>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let (response, decision) = answer(&ctx, body);
    ctx.metrics
        .webhook_duration
        .with_label_values(&[ctx.name, "CONVERT", decision])
        .observe(started.elapsed().as_secs_f64());
    if decision != "converted" {
        ctx.metrics
            .webhook_errors
            .with_label_values(&[ctx.name, decision])
            .inc();
    }
    response
}

fn answer(ctx: &ConversionCtx, body: Result<Bytes, BytesRejection>) -> (Response, &'static str) {
    let review = match super::review_json(body, "ConversionReview") {
        Ok(review) => review,
        Err(answer) => return *answer,
    };
    let request = &review["request"];
    let (Some(uid), Some(desired)) = (
        request["uid"].as_str(),
        request["desiredAPIVersion"].as_str(),
    ) else {
        return super::bad_review(
            "ConversionReview without request.uid or request.desiredAPIVersion".into(),
        );
    };
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    let converted: Result<Vec<Value>, String> = objects
        .into_iter()
        .map(|object| (ctx.convert)(object, desired))
        .collect();
    let (result, decision) = match converted {
        Ok(objects) => (
            json!({"uid": uid, "convertedObjects": objects, "result": {"status": "Success"}}),
            "converted",
        ),
        Err(message) => {
            tracing::warn!(webhook = ctx.name, %message, desired, "conversion failed");
            (
                json!({"uid": uid, "convertedObjects": [],
                       "result": {"status": "Failure", "message": message}}),
                "failed",
            )
        }
    };
    let reply = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": result,
    });
    (Json(reply).into_response(), decision)
}

/// The server-side-apply body that points `crd` at `client_config` (its JSON has the
/// same shape for CRD conversion as for admission webhooks).
pub(crate) fn crd_conversion_patch(crd: &str, client_config: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd},
        "spec": {"conversion": {
            "strategy": "Webhook",
            "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1"]},
        }},
    })
}

/// A merge patch that swaps the live CRD's conversion endpoint to `client_config` when
/// the live one is of the other form (a `service` where ours is a `url`, or the reverse),
/// or `None` when there is nothing to drop.
pub fn replace_other_endpoint_patch(
    live: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    client_config: &Value,
) -> Option<Value> {
    let live_config = live
        .spec
        .conversion
        .as_ref()?
        .webhook
        .as_ref()?
        .client_config
        .as_ref()?;
    let ours_is_url = client_config.get("url").is_some_and(|u| !u.is_null());
    let other_is_set = if ours_is_url {
        live_config.service.is_some()
    } else {
        live_config.url.is_some()
    };
    if !other_is_set {
        return None;
    }
    let mut config = client_config.clone();
    let other = if ours_is_url { "service" } else { "url" };
    config[other] = Value::Null;
    Some(json!({"spec": {"conversion": {
        "strategy": "Webhook",
        "webhook": {"clientConfig": config, "conversionReviewVersions": ["v1"]},
    }}}))
}

/// The JSON patch that sets `served: true` on every unserved version of `crd` (each
/// guarded by a `test` of the version's name), or `None` when all are served.
pub(crate) fn serve_all_versions_patch(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Option<json_patch::Patch> {
    let mut ops = Vec::new();
    for (i, version) in crd.spec.versions.iter().enumerate() {
        if !version.served {
            ops.push(json!({"op": "test", "path": format!("/spec/versions/{i}/name"), "value": version.name}));
            ops.push(json!({"op": "replace", "path": format!("/spec/versions/{i}/served"), "value": true}));
        }
    }
    if ops.is_empty() {
        return None;
    }
    serde_json::from_value(Value::Array(ops)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;
    use axum::http::StatusCode;

    fn ctx(convert: Converter) -> ConversionCtx {
        ConversionCtx {
            name: "test",
            convert,
            metrics: Metrics::new(),
        }
    }

    async fn body(response: Response) -> (StatusCode, Value) {
        let status = response.status();
        let bytes = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (
            status,
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned())),
        )
    }

    #[tokio::test]
    async fn converts_every_object_and_echoes_the_uid() {
        let ctx = ctx(Arc::new(|mut o: Value, v: &str| {
            o["apiVersion"] = json!(v);
            Ok(o)
        }));
        let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": "x.io/v2",
                        "objects": [{"apiVersion": "x.io/v1", "kind": "K"}, {"apiVersion": "x.io/v1", "kind": "K"}]}});
        let (response, decision) = answer(&ctx, Ok(Bytes::from(review.to_string())));
        assert_eq!(decision, "converted");
        let (status, reply) = body(response).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(reply["response"]["uid"], "u-1");
        assert_eq!(reply["response"]["result"]["status"], "Success");
        assert_eq!(
            reply["response"]["convertedObjects"][1]["apiVersion"],
            "x.io/v2"
        );
    }

    #[tokio::test]
    async fn a_failed_object_fails_the_review_with_its_message() {
        let ctx = ctx(Arc::new(|_: Value, _: &str| Err("no way".to_string())));
        let review = json!({"request": {"uid": "u-2", "desiredAPIVersion": "x.io/v2",
                                        "objects": [{}]}});
        let (response, decision) = answer(&ctx, Ok(Bytes::from(review.to_string())));
        assert_eq!(decision, "failed");
        let (_, reply) = body(response).await;
        assert_eq!(reply["response"]["result"]["status"], "Failure");
        assert_eq!(reply["response"]["result"]["message"], "no way");
    }

    #[test]
    fn unserved_versions_are_served_once_the_conversion_is_in_place() {
        let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_json::from_value(json!({
                "metadata": {"name": "xs.x.io"},
                "spec": {"group": "x.io", "scope": "Namespaced",
                         "names": {"plural": "xs", "kind": "X"},
                         "versions": [{"name": "v1alpha1", "served": true, "storage": true},
                                      {"name": "v1beta1", "served": false, "storage": false}]}
            }))
            .unwrap();
        let patch = serde_json::to_value(serve_all_versions_patch(&crd).unwrap()).unwrap();
        assert_eq!(
            patch,
            json!([{"op": "test", "path": "/spec/versions/1/name", "value": "v1beta1"},
                   {"op": "replace", "path": "/spec/versions/1/served", "value": true}])
        );
        let mut all = crd;
        all.spec.versions[1].served = true;
        assert!(serve_all_versions_patch(&all).is_none());
    }

    #[tokio::test]
    async fn garbage_is_a_bad_request() {
        let ctx = ctx(Arc::new(|o: Value, _: &str| Ok(o)));
        let (response, decision) = answer(&ctx, Ok(Bytes::from_static(b"{not json")));
        assert_eq!(decision, "decode");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }
    #[test]
    fn a_shipped_service_is_dropped_before_a_url_is_applied_and_the_reverse() {
        let crd = |config: Value| -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
            serde_json::from_value(json!({
                "metadata": {"name": "xs.x.io"},
                "spec": {"group": "x.io", "scope": "Namespaced",
                         "names": {"plural": "xs", "kind": "X"},
                         "versions": [],
                         "conversion": {"strategy": "Webhook", "webhook": {
                             "clientConfig": config, "conversionReviewVersions": ["v1"]}}}
            }))
            .unwrap()
        };
        let service = json!({"service": {"namespace": "kruise-system", "name": "x-webhook",
                                          "path": "/convert-x", "port": 443}});
        let url = json!({"url": "https://127.0.0.1:9443/convert-x", "caBundle": "Q0E="});
        let patch = replace_other_endpoint_patch(&crd(service.clone()), &url).unwrap();
        let config = &patch["spec"]["conversion"]["webhook"]["clientConfig"];
        assert_eq!(config["service"], Value::Null);
        assert_eq!(config["url"], url["url"]);
        let patch = replace_other_endpoint_patch(&crd(url.clone()), &service).unwrap();
        let config = &patch["spec"]["conversion"]["webhook"]["clientConfig"];
        assert_eq!(config["url"], Value::Null);
        assert_eq!(config["service"]["name"], "x-webhook");
        // Same form: server-side apply alone takes it over.
        assert!(replace_other_endpoint_patch(&crd(service.clone()), &service).is_none());
        assert!(replace_other_endpoint_patch(&crd(url.clone()), &url).is_none());
    }
}
