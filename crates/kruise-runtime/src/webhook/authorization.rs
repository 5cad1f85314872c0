//! Authorization webhooks: a `SubjectAccessReview` (authorization.k8s.io/v1) in, its
//! status out.
//!
//! The apiserver calls an authorization webhook when its `--authorization-config` chains
//! one (a kubeconfig names the URL and the CA; it is not registered through the API like
//! admission). A controller serves one with [`super::Route::authorization`] on its webhook
//! server, beside its admission routes, and decides with a plain function of the review's
//! spec: most decisions are pure; one that needs the world reads a cache (never the API:
//! the apiserver waits for the answer on the request path).
//!
//! An answer is one of three ([`Verdict`]): allow, deny (stop the chain: no later
//! authorizer is asked) or no opinion (the next authorizer decides; the last one's "no
//! opinion" is a refusal).

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authorization::v1::{SubjectAccessReviewSpec, SubjectAccessReviewStatus};
use serde_json::json;

use crate::metrics::Metrics;

/// What an authorization webhook answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed, with the reason (shown in the audit log).
    Allow(String),
    /// Denied, with the reason: the client sees it in its 403; no later authorizer is
    /// asked.
    Deny(String),
    /// Not this webhook's to decide: the next authorizer is asked.
    NoOpinion,
}

impl Verdict {
    /// The review's status for this verdict.
    pub fn status(&self) -> SubjectAccessReviewStatus {
        match self {
            Verdict::Allow(reason) => SubjectAccessReviewStatus {
                allowed: true,
                reason: Some(reason.clone()),
                ..Default::default()
            },
            Verdict::Deny(reason) => SubjectAccessReviewStatus {
                allowed: false,
                denied: Some(true),
                reason: Some(reason.clone()),
                ..Default::default()
            },
            Verdict::NoOpinion => SubjectAccessReviewStatus::default(),
        }
    }

    /// The `decision` label of `kruise_webhook_request_duration_seconds`.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Allow(_) => "allowed",
            Verdict::Deny(_) => "denied",
            Verdict::NoOpinion => "no_opinion",
        }
    }
}

/// Decides one review. Called on the apiserver's request path: answer from memory.
pub type Authorizer = Arc<dyn Fn(&SubjectAccessReviewSpec) -> Verdict + Send + Sync>;

pub(crate) struct AuthorizationCtx {
    pub(crate) name: &'static str,
    pub(crate) authorize: Authorizer,
    pub(crate) metrics: Metrics,
}

/// Answers one `SubjectAccessReview`.
pub(crate) async fn handle(
    ctx: Arc<AuthorizationCtx>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let (response, decision) = answer(&ctx, body);
    ctx.metrics
        .webhook_duration
        .with_label_values(&[ctx.name, "AUTHORIZE", decision])
        .observe(started.elapsed().as_secs_f64());
    if matches!(decision, "decode" | "too_large") {
        ctx.metrics
            .webhook_errors
            .with_label_values(&[ctx.name, decision])
            .inc();
    }
    response
}

fn answer(ctx: &AuthorizationCtx, body: Result<Bytes, BytesRejection>) -> (Response, &'static str) {
    let review = match super::review_json(body, "SubjectAccessReview") {
        Ok(review) => review,
        Err(answer) => return *answer,
    };
    let spec: SubjectAccessReviewSpec = match serde_json::from_value(review["spec"].clone()) {
        Ok(spec) => spec,
        Err(e) => return super::bad_review(format!("SubjectAccessReview spec: {e}")),
    };
    let verdict = (ctx.authorize)(&spec);
    if let Verdict::Deny(reason) = &verdict {
        tracing::debug!(webhook = ctx.name, user = ?spec.user, attributes = ?spec.resource_attributes, %reason, "denied");
    }
    let reply = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "status": verdict.status(),
    });
    (Json(reply).into_response(), verdict.label())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use serde_json::Value;

    fn ctx(verdict: Verdict) -> AuthorizationCtx {
        AuthorizationCtx {
            name: "test",
            authorize: Arc::new(move |_| verdict.clone()),
            metrics: Metrics::default(),
        }
    }

    async fn body_json(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn answers_each_verdict_as_the_apiserver_reads_it() {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "u", "resourceAttributes": {"verb": "list", "resource": "pods"}}
        });
        let body = Bytes::from(review.to_string());
        for (verdict, status) in [
            (
                Verdict::Allow("ok".into()),
                json!({"allowed": true, "reason": "ok"}),
            ),
            (
                Verdict::Deny("no".into()),
                json!({"allowed": false, "denied": true, "reason": "no"}),
            ),
            (Verdict::NoOpinion, json!({"allowed": false})),
        ] {
            let (response, decision) = answer(&ctx(verdict.clone()), Ok(body.clone()));
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(decision, verdict.label());
            let reply = body_json(response).await;
            assert_eq!(reply["kind"], "SubjectAccessReview");
            assert_eq!(reply["status"], status, "{verdict:?}");
        }
    }

    #[tokio::test]
    async fn garbage_is_a_400_so_the_failure_policy_decides() {
        let (response, decision) = answer(&ctx(Verdict::NoOpinion), Ok(Bytes::from("{")));
        assert_eq!(
            (response.status(), decision),
            (StatusCode::BAD_REQUEST, "decode")
        );
        let (response, _) = answer(
            &ctx(Verdict::NoOpinion),
            Ok(Bytes::from(r#"{"spec": {"user": 3}}"#)),
        );
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }
}
