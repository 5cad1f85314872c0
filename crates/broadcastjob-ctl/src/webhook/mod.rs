//! BroadcastJob admission (openkruise/kruise v1.9.0 pkg/webhook/broadcastjob/mutating and
//! pkg/webhook/broadcastjob/validating): defaulting (mutating) and validation, served on the shared
//! webhook server. Both work on the object's JSON, so fields our types do not model survive
//! defaulting and a value our types cannot hold is still reported.

use kruise_api::keys;
use kruise_runtime::webhook::config;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::field::{FieldError, invalid, required};
use kruise_runtime::webhook::validating;
use kruise_runtime::webhook::{Route, defaulting};
use kruise_workload::{admission, pod_defaults};
use serde_json::{Map, Value, json};

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-broadcastjob";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-broadcastjob";

pub const RESTART_POLICY_MESSAGE: &str = "pod restartPolicy can only be Never or OnFailure";
pub const RESERVED_LABELS_MESSAGE: &str = "\"broadcastjob-name\" and \"broadcastjob-controller-uid\" are not allowed to preset in pod labels";

/// Defaulting (as `SetDefaultsBroadcastJob` in openkruise/kruise v1.9.0
/// apis/apps/defaults/v1beta1.go): `completionPolicy.type: Always`, `parallelism: 2147483647`,
/// `failurePolicy.type: FailFast`; the Pod template's core defaults on CREATE (and on UPDATE of a
/// template stored defaulted) unless `template_defaults` is false (gate `TemplateNoDefaults`).
pub fn with_defaults_for(object: &Value, old: Option<&Value>, template_defaults: bool) -> Value {
    let mut obj = object.clone();
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec_defaults(spec);
    }
    pod_defaults::default_workload_templates(&mut obj, old, template_defaults);
    obj
}

/// The spec defaults alone (also used for an AdvancedCronJob's `broadcastJobTemplate`).
pub fn spec_defaults(spec: &mut Map<String, Value>) {
    let completion = object_entry(spec, "completionPolicy");
    if completion
        .get("type")
        .is_none_or(|t| t.is_null() || t == "")
    {
        completion.insert("type".into(), json!("Always"));
    }
    if spec.get("parallelism").is_none_or(Value::is_null) {
        spec.insert("parallelism".into(), json!(i32::MAX));
    }
    let failure = object_entry(spec, "failurePolicy");
    if failure.get("type").is_none_or(|t| t.is_null() || t == "") {
        failure.insert("type".into(), json!("FailFast"));
    }
}

#[allow(
    clippy::expect_used,
    reason = "the key holds an object: inserted on the line above when it did not"
)]
fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    if !map.get(key).is_some_and(Value::is_object) {
        map.insert(key.into(), json!({}));
    }
    map.get_mut(key)
        .and_then(Value::as_object_mut)
        .expect("object just inserted")
}

/// Validation of a BroadcastJob (JSON), as field errors (HTTP 422 when any), as
/// `validateBroadcastJob` in openkruise/kruise v1.9.0
/// pkg/webhook/broadcastjob/validating/broadcastjob_create_update_handler.go.
pub fn validate(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    errors.extend(admission::job_name_errors(name, "BroadcastJob"));
    if let Some(spec) = object.get("spec") {
        errors.extend(spec_errors(spec, "spec"));
    } else {
        errors.push(required("spec", ""));
    }
    errors
}

/// The rules of a BroadcastJob spec found at `path`.
pub fn spec_errors(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let completion = spec.get("completionPolicy");
    if completion
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        == Some("Never")
    {
        for (field, what) in [
            ("ttlSecondsAfterFinished", "ttlSecondsAfterFinished"),
            ("activeDeadlineSeconds", "activeDeadlineSeconds"),
        ] {
            if let Some(v) = completion
                .and_then(|c| c.get(field))
                .filter(|v| !v.is_null())
            {
                errors.push(invalid(
                    format!("{path}.completionPolicy.{field}"),
                    v,
                    format!("{what} can just work with Always CompletionPolicyType"),
                ));
            }
        }
    }
    if let Some(p) = spec.get("parallelism").filter(|p| !p.is_null()) {
        let ok = match p {
            Value::Number(n) => n.as_i64().is_some_and(|n| n >= 0),
            Value::String(s) => kruise_api::intstr::parse_percent(s).is_ok(),
            _ => false,
        };
        if !ok {
            errors.push(invalid(
                format!("{path}.parallelism"),
                p,
                "must be a non-negative integer or a percent string",
            ));
        }
    }
    let Some(template) = spec.get("template").filter(|t| !t.is_null()) else {
        errors.push(required(format!("{path}.template"), ""));
        return errors;
    };
    let labels = template.pointer("/metadata/labels");
    if [keys::BROADCASTJOB_NAME, keys::BROADCASTJOB_CONTROLLER_UID]
        .iter()
        .any(|k| labels.and_then(|l| l.get(*k)).is_some())
    {
        errors.push(invalid(
            format!("{path}.template.metadata.labels"),
            labels.cloned().unwrap_or_default(),
            RESERVED_LABELS_MESSAGE,
        ));
    }
    errors.extend(admission::job_template_errors(
        template,
        &format!("{path}.template"),
        RESTART_POLICY_MESSAGE,
    ));
    errors
}

/// The webhook routes: defaulting (`template_defaults` false under the
/// `TemplateNoDefaults` gate) and validation of CREATE and UPDATE.
pub fn routes(template_defaults: bool) -> Vec<Route> {
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-broadcastjob",
        defaulting(move |object, old| with_defaults_for(object, old, template_defaults)),
    );
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-broadcastjob",
        validating(|object, _old| Ok(validate(object))),
    );
    vec![mutate, validate_route]
}

/// The configurations, named for the scope: cluster-wide, or one namespace.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    config::KindAdmission {
        kind: "broadcastjob",
        plural: "broadcastjobs",
        versions: &["v1alpha1"],
        validate: (VALIDATE_PATH, &["CREATE", "UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE", "UPDATE"]),
    }
    .configurations(watch_namespace)
}

#[cfg(test)]
mod tests;
