//! AdvancedCronJob admission (openkruise/kruise v1.9.0 pkg/webhook/advancedcronjob/mutating and
//! pkg/webhook/advancedcronjob/validating/advancedcronjob_create_update_handler.go): defaulting
//! (mutating) and validation, on the object's JSON.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kruise_runtime::webhook::config;
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, required};
use kruise_runtime::webhook::{
    AdmissionResponse, HandlerError, Operation, Route, defaulting, deny_invalid, dynamic,
    json_objects,
};
use kruise_workload::{admission, pod_defaults};
use serde_json::{Value, json};

use crate::plan::schedule::{self, Schedule, TZ_IN_BOTH};

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-advancedcronjob";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-advancedcronjob";

pub const EMPTY_SCHEDULE: &str = "schedule cannot be empty, please provide valid cron schedule.";
pub const NO_TEMPLATE: &str = "spec must have one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided";
pub const SEVERAL_TEMPLATES: &str = "spec can have only one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided";
pub const FORBIDDEN_UPDATE: &str = "updates to advancedcronjob spec for fields other than 'schedule', 'concurrencyPolicy', 'successfulJobsHistoryLimit', 'failedJobsHistoryLimit', 'startingDeadlineSeconds', 'timeZone' and 'paused' are forbidden";
const RESTART_POLICY: &str = "pod restartPolicy can only be Never or OnFailure";
const NON_NEGATIVE: &str = "must be greater than or equal to 0";

/// The spec fields an UPDATE may change (upstream's `validateAdvancedCronJobUpdate`).
const MUTABLE: [&str; 7] = [
    "schedule",
    "concurrencyPolicy",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "startingDeadlineSeconds",
    "timeZone",
    "paused",
];

/// Defaulting (as `SetDefaultsAdvancedCronJob` in openkruise/kruise v1.9.0
/// apis/apps/defaults/v1beta1.go): `concurrencyPolicy: Allow`, `paused: false`, history limits 3
/// and 1; the chosen template's Pod template gets the core defaults unless `template_defaults` is
/// false (gate `TemplateNoDefaults`): on CREATE, and on UPDATE when the stored template was
/// defaulted, so that re-applying an unchanged manifest (which leaves the defaults out) does not
/// look like a change of the immutable template.
pub fn with_defaults_for(object: &Value, old: Option<&Value>, template_defaults: bool) -> Value {
    let mut obj = object.clone();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return obj;
    };
    for (key, value) in [
        ("concurrencyPolicy", json!("Allow")),
        ("paused", json!(false)),
        ("successfulJobsHistoryLimit", json!(3)),
        ("failedJobsHistoryLimit", json!(1)),
    ] {
        if spec.get(key).is_none_or(|v| v.is_null() || v == "") {
            spec.insert(key.into(), value);
        }
    }
    if !template_defaults {
        return obj;
    }
    for pointer in [
        "/spec/template/jobTemplate/spec/template",
        "/spec/template/broadcastJobTemplate/spec/template",
    ] {
        let stored = old.and_then(|o| o.pointer(pointer));
        let stored_defaulted = stored.is_none_or(|t| {
            let mut defaulted = t.clone();
            pod_defaults::template_defaults(&mut defaulted);
            &defaulted == t
        });
        if !stored_defaulted {
            continue;
        }
        if let Some(old) = old {
            let containers = format!("{pointer}/spec/containers");
            let init = format!("{pointer}/spec/initContainers");
            pod_defaults::keep_pull_policies(&mut obj, old, &[&containers, &init]);
        }
        if let Some(t) = obj.pointer_mut(pointer) {
            pod_defaults::template_defaults(t);
        }
    }
    obj
}

/// Validation (JSON, as upstream's `validateAdvancedCronJob` and `validateAdvancedCronJobUpdate`),
/// as field errors: the object, and on UPDATE (`old` set) the fields that may not change.
pub fn validate(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    errors.extend(admission::job_name_errors(name, "AdvancedCronJob"));
    let Some(spec) = object.get("spec") else {
        errors.push(required("spec", ""));
        return errors;
    };
    errors.extend(schedule_errors(spec));
    for field in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        if let Some(v) = spec
            .get(field)
            .filter(|v| v.as_i64().is_some_and(|n| n < 0))
        {
            errors.push(invalid(format!("spec.{field}"), v, NON_NEGATIVE));
        }
    }
    errors.extend(template_errors(spec));
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        let frozen = |s: &Value| {
            let mut s = s.clone();
            if let Some(m) = s.as_object_mut() {
                for key in MUTABLE {
                    m.remove(key);
                }
            }
            s
        };
        if frozen(spec) != frozen(old_spec) {
            errors.push(forbidden("spec", FORBIDDEN_UPDATE));
        }
    }
    errors
}

/// `schedule` and `timeZone` (upstream's `validateAdvancedCronJobSpecSchedule` and
/// `validateTimeZone`), with the parser's message.
pub fn schedule_errors(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let text = spec
        .get("schedule")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let time_zone = spec.get("timeZone").filter(|v| !v.is_null());
    if let Some(tz) = time_zone {
        let name = tz.as_str().unwrap_or_default();
        let problem = if name.is_empty() {
            Some("timeZone must be nil or non-empty string".to_string())
        } else if name == "Local" {
            Some("timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones".to_string())
        } else {
            schedule::zone(name).err()
        };
        if let Some(p) = problem {
            errors.push(invalid("spec.timeZone", tz, p));
        }
    }
    if text.trim().is_empty() {
        errors.push(invalid(
            "spec.schedule",
            format!("{text:?}"),
            EMPTY_SCHEDULE,
        ));
        return errors;
    }
    let (prefix, _) = schedule::split_zone(text);
    if prefix.is_some() && time_zone.is_some() {
        errors.push(invalid("spec.schedule", format!("{text:?}"), TZ_IN_BOTH));
    } else if let Err(e) = Schedule::parse(text, None) {
        errors.push(invalid("spec.schedule", format!("{text:?}"), e));
    }
    errors
}

/// Exactly one template, and its Pod template valid (upstream's
/// `validateAdvancedCronJobSpecTemplate`).
fn template_errors(spec: &Value) -> Vec<FieldError> {
    let template = spec.get("template");
    let present = |key: &str| {
        template
            .and_then(|t| t.get(key))
            .is_some_and(|v| !v.is_null())
    };
    let (job, bcj) = (present("jobTemplate"), present("broadcastJobTemplate"));
    let mut errors = Vec::new();
    match (job, bcj) {
        (false, false) => errors.push(forbidden("spec.template", NO_TEMPLATE)),
        (true, true) => errors.push(forbidden("spec.template", SEVERAL_TEMPLATES)),
        _ => {}
    }
    let Some(template) = template else {
        return errors;
    };
    for (key, path) in [
        ("jobTemplate", "spec.template.jobTemplate.spec.template"),
        (
            "broadcastJobTemplate",
            "spec.template.broadcastJobTemplate.spec.template",
        ),
    ] {
        if let Some(t) = template.get(key).and_then(|t| t.pointer("/spec/template")) {
            errors.extend(admission::job_template_errors(t, path, RESTART_POLICY));
        } else if present(key) {
            errors.push(required(path.to_string(), ""));
        }
    }
    errors
}

/// The webhook routes: defaulting and validation of CREATE and UPDATE.
pub fn routes(template_defaults: bool) -> Vec<Route> {
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-advancedcronjob",
        defaulting(move |object, old| with_defaults_for(object, old, template_defaults)),
    );
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-advancedcronjob",
        dynamic(|req| async move {
            let response = AdmissionResponse::from(&req);
            if !matches!(req.operation, Operation::Create | Operation::Update) {
                return Ok(response);
            }
            let (raw_new, raw_old) = json_objects(&req)?;
            let Some(raw_new) = raw_new else {
                return Err(HandlerError::Decode("no object".into()));
            };
            let old = raw_old.filter(|_| req.operation == Operation::Update);
            let errors = validate(&raw_new, old.as_ref());
            Ok(if errors.is_empty() {
                response
            } else {
                deny_invalid(response, &errors)
            })
        }),
    );
    vec![mutate, validate_route]
}

/// The configurations, named for the scope: cluster-wide, or one namespace.
pub fn configurations(
    watch_namespace: Option<&str>,
) -> (
    Vec<ValidatingWebhookConfiguration>,
    Vec<MutatingWebhookConfiguration>,
) {
    config::KindAdmission {
        kind: "advancedcronjob",
        plural: "advancedcronjobs",
        versions: &["v1alpha1"],
        validate: (VALIDATE_PATH, &["CREATE", "UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE", "UPDATE"]),
    }
    .configurations(watch_namespace)
}

#[cfg(test)]
mod tests;
