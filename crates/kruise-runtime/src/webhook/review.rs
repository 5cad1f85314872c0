//! One admission request, from bytes to an answer.
//!
//! Nothing here panics on input: a body that is not an AdmissionReview gets HTTP 400 (the
//! apiserver then applies the webhook's failurePolicy), a review that names its uid but
//! cannot be decoded, a handler error, a handler panic and a handler that runs out of time
//! all get the route's [`OnFailure`] answer with the uid echoed. Every request is timed in
//! `kruise_webhook_request_duration_seconds{webhook,operation,decision}`; every failure is
//! counted in `kruise_webhook_errors_total{webhook,kind}`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, TypeMeta};
use serde::Deserialize;

use super::{Handler, OnFailure};
use crate::metrics::Metrics;

/// Longest message we put in a denial or warning: serde errors on a huge object can quote
/// a lot of it, and the apiserver shows the message to a person.
const MAX_MESSAGE: usize = 1024;

pub(crate) struct RouteCtx {
    pub(crate) name: &'static str,
    pub(crate) handler: Handler,
    pub(crate) on_failure: OnFailure,
    pub(crate) timeout: Duration,
    pub(crate) metrics: Metrics,
}

/// What happened, for the metrics.
struct Outcome {
    response: Response,
    operation: &'static str,
    decision: &'static str,
    error: Option<&'static str>,
}

pub(crate) async fn handle(ctx: Arc<RouteCtx>, body: Result<Bytes, BytesRejection>) -> Response {
    let started = Instant::now();
    let outcome = answer(&ctx, body).await;
    ctx.metrics
        .webhook_duration
        .with_label_values(&[ctx.name, outcome.operation, outcome.decision])
        .observe(started.elapsed().as_secs_f64());
    if let Some(kind) = outcome.error {
        ctx.metrics
            .webhook_errors
            .with_label_values(&[ctx.name, kind])
            .inc();
    }
    outcome.response
}

fn operation_label(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

fn review_types() -> TypeMeta {
    TypeMeta {
        api_version: "admission.k8s.io/v1".into(),
        kind: "AdmissionReview".into(),
    }
}

fn truncate(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

fn http_error(status: StatusCode, message: String, kind: &'static str) -> Outcome {
    tracing::warn!(status = status.as_u16(), kind, %message, "webhook request rejected");
    Outcome {
        response: (status, message).into_response(),
        operation: "UNKNOWN",
        decision: "error",
        error: Some(kind),
    }
}

/// The answer when the webhook cannot decide: a denial naming the problem, or an allow
/// carrying a warning to the client, as the route's [`OnFailure`] says.
pub(crate) fn failure_response(
    webhook: &str,
    on_failure: OnFailure,
    uid: String,
    types: TypeMeta,
    message: &str,
) -> AdmissionResponse {
    let message = truncate(format!("{webhook}: {message}"));
    let mut response = AdmissionResponse::invalid(&message);
    response.uid = uid;
    response.types = types;
    if on_failure == OnFailure::Allow {
        response.allowed = true;
        response.result = Default::default();
        response.warnings = Some(vec![format!("{message} (admitted without this check)")]);
    } else {
        response.result = response.result.with_code(400);
    }
    response
}

fn decision(response: &AdmissionResponse) -> &'static str {
    if !response.allowed {
        "denied"
    } else if response.patch.is_some() {
        "patched"
    } else {
        "allowed"
    }
}

/// Just enough of a review to answer it when the rest does not decode.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<ProbeRequest>,
}

#[derive(Deserialize)]
struct ProbeRequest {
    uid: String,
}

async fn answer(ctx: &RouteCtx, body: Result<Bytes, BytesRejection>) -> Outcome {
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) => {
            let status = rejection.status();
            let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "too_large"
            } else {
                "body"
            };
            return http_error(status, rejection.body_text(), kind);
        }
    };
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&bytes) {
        Ok(review) => review,
        Err(err) => {
            // A review we can attribute gets a real answer (the apiserver shows our
            // message); anything else is not an AdmissionReview at all.
            return match serde_json::from_slice::<Probe>(&bytes) {
                Ok(Probe {
                    api_version,
                    kind,
                    request: Some(ProbeRequest { uid }),
                }) if kind == "AdmissionReview" => {
                    let types = if api_version.is_empty() {
                        review_types()
                    } else {
                        TypeMeta { api_version, kind }
                    };
                    let message = format!("malformed AdmissionReview: {err}");
                    tracing::warn!(webhook = ctx.name, %uid, %message, "cannot decode admission request");
                    let response = failure_response(ctx.name, ctx.on_failure, uid, types, &message);
                    Outcome {
                        response: Json(response.into_review()).into_response(),
                        operation: "UNKNOWN",
                        decision: "error",
                        error: Some("malformed"),
                    }
                }
                _ => http_error(
                    StatusCode::BAD_REQUEST,
                    truncate(format!(
                        "expected an admission.k8s.io/v1 AdmissionReview: {err}"
                    )),
                    "malformed",
                ),
            };
        }
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(_) => {
            return http_error(
                StatusCode::BAD_REQUEST,
                "AdmissionReview has no request".into(),
                "malformed",
            );
        }
    };
    let operation = operation_label(&request.operation);
    let uid = request.uid.clone();
    let types = if request.types.api_version.is_empty() {
        review_types()
    } else {
        request.types.clone()
    };
    let run = AssertUnwindSafe((ctx.handler)(request)).catch_unwind();
    let failure = |kind: &'static str, message: String| {
        tracing::warn!(webhook = ctx.name, %uid, kind, %message, "admission handler failed");
        let response = failure_response(
            ctx.name,
            ctx.on_failure,
            uid.clone(),
            types.clone(),
            &message,
        );
        (response, Some(kind))
    };
    let (mut response, error) = match tokio::time::timeout(ctx.timeout, run).await {
        Ok(Ok(Ok(response))) => (response, None),
        Ok(Ok(Err(err))) => failure(err.metric_label(), err.to_string()),
        Ok(Err(panic)) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            failure("panic", format!("internal error: {what}"))
        }
        Err(_) => failure("timeout", format!("no decision within {:?}", ctx.timeout)),
    };
    // The apiserver drops an answer whose uid or type does not match its request; a
    // handler that built its response by hand must not make that happen.
    response.uid = uid;
    if response.types.api_version.is_empty() {
        response.types = types;
    }
    Outcome {
        operation,
        decision: if error.is_some() {
            "error"
        } else {
            decision(&response)
        },
        error,
        response: Json(response.into_review()).into_response(),
    }
}
