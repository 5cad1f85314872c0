//! Advanced StatefulSet admission (`openkruise/kruise v1.9.0 pkg/webhook/statefulset`): defaulting (mutating) and validation,
//! served on the shared webhook server. Deletion protection (upstream
//! `pkg/webhook/util/deletionprotection/deletion_protection.go`) is
//! `protection-ctl`'s: it owns every DELETE of a protected object.
//!
//! One pair of routes serves both versions: the apiserver sends an object in the
//! version its request used (`v1alpha1` or `v1beta1`), and the two have the same shape,
//! so defaulting works on the JSON and validation decodes either as `StatefulSet`.
//!
//! Both webhooks use `failurePolicy: Fail`: they only see StatefulSet objects, so an
//! outage blocks StatefulSet changes (which the controller could not act on anyway)
//! and never Pod creation.

mod defaults;
mod validation;
pub mod vct;

use kruise_runtime::webhook::config;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::{
    AdmissionResponse, HandlerError, Operation, Route, defaulting, deny_invalid, dynamic,
    json_objects,
};
use serde_json::Value;

pub use defaults::{defaults_patch, spec_defaults, with_defaults, with_defaults_for};
pub use validation::{FORBIDDEN_UPDATE, in_place_only_denied, validate, validate_json};

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1beta1-statefulset";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1beta1-statefulset";

/// What validation answers for a CREATE or UPDATE: `None` to admit, or the response
/// to deny with (422: the aggregated field errors, or upstream's plain `InPlaceOnly`
/// message once the fields are valid).
pub fn review(raw_new: &Value, raw_old: Option<&Value>) -> Result<Option<Rejection>, String> {
    let errors = validate_json(raw_new, raw_old)?;
    if !errors.is_empty() {
        return Ok(Some(Rejection::Invalid(errors)));
    }
    Ok(raw_old
        .and_then(|old| in_place_only_denied(raw_new, old))
        .map(Rejection::Message))
}

/// Why a CREATE or UPDATE is refused (both HTTP 422).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    Invalid(Vec<kruise_runtime::webhook::FieldError>),
    Message(String),
}

/// The webhook routes: defaulting and validation. `template_defaults` is false under the
/// `TemplateNoDefaults` gate; `resize` is a client under `StatefulSetAutoResizePVCGate`,
/// to read the StorageClasses a claim template change is checked against ([`vct`]).
pub fn routes(template_defaults: bool, resize: Option<kube::Client>) -> Vec<Route> {
    let resize_gate = resize.is_some();
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-statefulset",
        defaulting(move |object, old| {
            let defaulted = with_defaults_for(object, old, template_defaults);
            if resize_gate {
                defaults::with_resize_default(defaulted)
            } else {
                defaulted
            }
        }),
    );
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-statefulset",
        dynamic(move |req| {
            let resize = resize.clone();
            async move {
                let response = AdmissionResponse::from(&req);
                let (raw_new, raw_old) = json_objects(&req)?;
                match req.operation {
                    Operation::Create | Operation::Update => {
                        let Some(raw_new) = raw_new else {
                            return Ok(response);
                        };
                        let old = raw_old.filter(|_| req.operation == Operation::Update);
                        Ok(
                            match review(&raw_new, old.as_ref()).map_err(HandlerError::Decode)? {
                                None => match (&resize, &old) {
                                    (Some(client), Some(old)) => {
                                        let errors = claim_template_errors(client, &raw_new, old)
                                            .await
                                            .map_err(HandlerError::Decode)?;
                                        if errors.is_empty() {
                                            response
                                        } else {
                                            deny_invalid(response, &errors)
                                        }
                                    }
                                    _ => response,
                                },
                                Some(Rejection::Invalid(errors)) => deny_invalid(response, &errors),
                                Some(Rejection::Message(message)) => {
                                    let mut denied = response.deny(message);
                                    denied.result.code = 422;
                                    denied
                                }
                            },
                        )
                    }
                    // Not registered for DELETE (protection-ctl's) nor CONNECT.
                    Operation::Delete | Operation::Connect => Ok(response),
                }
            }
        }),
    );
    vec![mutate, validate_route]
}

/// [`vct::errors`] of an UPDATE, reading the StorageClasses only when there is a
/// claim template change to judge.
async fn claim_template_errors(
    client: &kube::Client,
    raw_new: &Value,
    raw_old: &Value,
) -> Result<Vec<kruise_runtime::webhook::FieldError>, String> {
    let decode = |v: &Value| {
        serde_json::from_value::<kruise_api::apps_v1beta1::StatefulSet>(v.clone())
            .map_err(|e| e.to_string())
    };
    let (new, old) = (decode(raw_new)?, decode(raw_old)?);
    if !vct::needs_check(&new, &old) {
        return Ok(Vec::new());
    }
    let api: kube::Api<k8s_openapi::api::storage::v1::StorageClass> =
        kube::Api::all(client.clone());
    let classes = api
        .list(&Default::default())
        .await
        .map_err(|e| format!("can not list storage class: {e}"))?;
    Ok(vct::errors(&new, &old, &classes.items))
}

/// The configurations, named for the scope: cluster-wide, or (for tests and namespaced
/// installs) one namespace. Both served versions are covered.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    config::KindAdmission {
        kind: "statefulset",
        plural: "statefulsets",
        versions: &["v1alpha1", "v1beta1"],
        validate: (VALIDATE_PATH, &["CREATE", "UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE", "UPDATE"]),
    }
    .configurations(watch_namespace)
}

#[cfg(test)]
mod tests;
