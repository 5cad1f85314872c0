//! AdvancedCronJob admission (openkruise/kruise v1.9.0 pkg/webhook/advancedcronjob/mutating and
//! pkg/webhook/advancedcronjob/validating/advancedcronjob_create_update_handler.go): defaulting
//! (mutating) and validation, on the object's JSON.

pub mod image;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_runtime::webhook::config;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::field::invalid_detail;
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, required};
use kruise_runtime::webhook::validating;
use kruise_runtime::webhook::{Route, defaulting};
use kruise_workload::{admission, pod_defaults};
use serde_json::{Value, json};

use crate::plan::schedule::{self, Schedule, TZ_IN_BOTH};

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-advancedcronjob";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-advancedcronjob";

pub const EMPTY_SCHEDULE: &str = "schedule cannot be empty, please provide valid cron schedule.";
pub const NO_TEMPLATE: &str = "spec must have one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided";
pub const SEVERAL_TEMPLATES: &str = "spec can have only one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided";
pub const FORBIDDEN_UPDATE: &str = "updates to advancedcronjob spec for fields other than 'imageListPullJobTemplate', 'schedule', 'concurrencyPolicy', 'successfulJobsHistoryLimit', 'failedJobsHistoryLimit', 'startingDeadlineSeconds', 'timeZone' and 'paused' are forbidden";
const RESTART_POLICY: &str = "pod restartPolicy can only be Never or OnFailure";
const NON_NEGATIVE: &str = "must be greater than or equal to 0";
/// Where the ImageListPullJob template's spec is.
const ILPJ_SPEC: &str = "spec.template.imageListPullJobTemplate.spec";
/// Upstream's `MaxActiveDeadLineSeconds`: a day.
pub const MAX_ACTIVE_DEADLINE_SECONDS: i64 = 3600 * 24;
/// At most this many images in the template.
pub const MAX_IMAGES: usize = 255;

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
/// apis/apps/defaults/v1beta1.go): `concurrencyPolicy: Allow` (`Replace` with an ImageListPullJob
/// template: concurrent pulls of the same images are useless), `paused: false`, history limits 3
/// and 1; an ImageListPullJob template without `completionPolicy.type` gets `Always`, a pull
/// timeout of 600 s, 3 retries and `imagePullPolicy: IfNotPresent` where unset; the chosen
/// template's Pod template gets the core defaults unless `template_defaults` is
/// false (gate `TemplateNoDefaults`): on CREATE, and on UPDATE when the stored template was
/// defaulted, so that re-applying an unchanged manifest (which leaves the defaults out) does not
/// look like a change of the immutable template.
pub fn with_defaults_for(object: &Value, old: Option<&Value>, template_defaults: bool) -> Value {
    let mut obj = object.clone();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return obj;
    };
    let ilpj = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("imageListPullJobTemplate"))
        .filter(|t| !t.is_null());
    let has_ilpj = ilpj.is_some();
    if let Some(t) = ilpj {
        imagelistpulljob_defaults(t);
    }
    let concurrency = if has_ilpj { "Replace" } else { "Allow" };
    for (key, value) in [
        ("concurrencyPolicy", json!(concurrency)),
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

/// The ImageListPullJob template's defaults, set only when its `completionPolicy.type` is unset
/// (as upstream's, which fills the rest inside that branch).
fn imagelistpulljob_defaults(template: &mut Value) {
    let Some(t) = template.as_object_mut() else {
        return;
    };
    let spec = t.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let unset = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v == "");
    let completion = spec.entry("completionPolicy").or_insert_with(|| json!({}));
    if completion.is_null() {
        *completion = json!({});
    }
    let Some(completion) = completion.as_object_mut() else {
        return;
    };
    if !unset(completion.get("type")) {
        return;
    }
    completion.insert("type".into(), json!("Always"));
    let pull = spec.entry("pullPolicy").or_insert_with(|| json!({}));
    if pull.is_null() {
        *pull = json!({});
    }
    if let Some(pull) = pull.as_object_mut() {
        for (key, value) in [("timeoutSeconds", 600), ("backoffLimit", 3)] {
            if pull.get(key).is_none_or(Value::is_null) {
                pull.insert(key.into(), json!(value));
            }
        }
    }
    if unset(spec.get("imagePullPolicy")) {
        spec.insert("imagePullPolicy".into(), json!("IfNotPresent"));
    }
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
        // An ImageListPullJob template, once there, may change (upstream compares the new
        // spec with the old one's template put back).
        let old_ilpj = old_spec
            .pointer("/template/imageListPullJobTemplate")
            .filter(|t| !t.is_null());
        let frozen = |s: &Value| {
            let mut s = s.clone();
            if let Some(m) = s.as_object_mut() {
                for key in MUTABLE {
                    m.remove(key);
                }
            }
            if let Some(old_ilpj) = old_ilpj
                && let Some(t) = s.get_mut("template").and_then(Value::as_object_mut)
            {
                t.insert("imageListPullJobTemplate".into(), old_ilpj.clone());
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

/// Exactly one template, and its Pod template (or its ImageListPullJob spec) valid (upstream's
/// `validateAdvancedCronJobSpecTemplate`).
fn template_errors(spec: &Value) -> Vec<FieldError> {
    let template = spec.get("template");
    let present = |key: &str| {
        template
            .and_then(|t| t.get(key))
            .is_some_and(|v| !v.is_null())
    };
    let mut errors = Vec::new();
    if present("imageListPullJobTemplate") {
        let policy = spec.get("concurrencyPolicy").filter(|v| !v.is_null());
        if !policy.is_some_and(|p| p == "Replace" || p == "Forbid") {
            let value = policy.and_then(Value::as_str).unwrap_or_default();
            errors.push(invalid(
                "spec.concurrencyPolicy",
                format!("{value:?}"),
                format!(
                    "concurrencyPolicy should be Replace or Forbid, but current value is: {value}"
                ),
            ));
        }
        let t = template
            .and_then(|t| t.get("imageListPullJobTemplate"))
            .cloned()
            .unwrap_or_default();
        errors.extend(imagelistpulljob_template_errors(
            t.get("spec").unwrap_or(&Value::Null),
        ));
    }
    let count = [
        "jobTemplate",
        "broadcastJobTemplate",
        "imageListPullJobTemplate",
    ]
    .into_iter()
    .filter(|key| present(key))
    .count();
    match count {
        0 => errors.push(forbidden("spec.template", NO_TEMPLATE)),
        1 => {}
        _ => errors.push(forbidden("spec.template", SEVERAL_TEMPLATES)),
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

fn int(v: Option<&Value>) -> Option<i64> {
    v.filter(|v| !v.is_null()).and_then(Value::as_i64)
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The ImageListPullJob template's spec (upstream's `validateImageListPullJobTemplateSpec`): node
/// selection, the images, and an `Always` completion policy without a TTL (the cron job's history
/// limits delete its children). Like upstream it reports the first problem only.
pub fn imagelistpulljob_template_errors(spec: &Value) -> Vec<FieldError> {
    let set = |key: &str| spec.get(key).filter(|v| !v.is_null());
    if let Some(selector) = set("selector") {
        let names = selector.get("names").filter(|v| !v.is_null());
        let labels = ["matchLabels", "matchExpressions"]
            .iter()
            .any(|k| selector.get(*k).is_some_and(|v| !v.is_null()));
        if labels && names.is_some() {
            return vec![invalid(
                format!("{ILPJ_SPEC}.selector"),
                compact(selector),
                "can not set both names and labelSelector in this spec.selector",
            )];
        }
        let errors = label_selector_errors(selector, &format!("{ILPJ_SPEC}.selector"));
        if !errors.is_empty() {
            return errors;
        }
        let list: Vec<&Value> = names
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let unique: std::collections::BTreeSet<String> = list.iter().map(|v| compact(v)).collect();
        if unique.len() != list.len() {
            return vec![invalid(
                format!("{ILPJ_SPEC}.selector.names"),
                compact(names.unwrap_or(&Value::Null)),
                "duplicated name in selector names",
            )];
        }
    }
    if let Some(pod_selector) = set("podSelector") {
        if set("selector").is_some() {
            return vec![invalid_detail(
                ILPJ_SPEC,
                "can not set both selector and podSelector",
            )];
        }
        let errors = label_selector_errors(pod_selector, &format!("{ILPJ_SPEC}.podSelector"));
        if !errors.is_empty() {
            return errors;
        }
    }
    let images_path = format!("{ILPJ_SPEC}.images");
    let raw_images = set("images").cloned().unwrap_or(Value::Array(vec![]));
    let images: Vec<&Value> = raw_images
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let shown = compact(&raw_images);
    if images.is_empty() {
        return vec![invalid(images_path, shown, "image can not be empty")];
    }
    if images.len() > MAX_IMAGES {
        return vec![invalid(
            images_path,
            format!("{} images", images.len()),
            format!("the maximum number of images cannot > {MAX_IMAGES}"),
        )];
    }
    let mut seen = std::collections::BTreeSet::new();
    if images.iter().any(|i| !seen.insert(compact(i))) {
        return vec![invalid(
            images_path,
            shown,
            "images cannot have duplicate values",
        )];
    }
    for i in &images {
        let text = i.as_str().unwrap_or_default();
        if let Some(e) = image::reference_error(text) {
            return vec![invalid(
                images_path,
                shown,
                format!("invalid image {text}: {e}"),
            )];
        }
    }
    let completion = spec.get("completionPolicy");
    let kind = completion
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let path = |field: &str| format!("{ILPJ_SPEC}.completionPolicy.{field}");
    if kind != "Always" {
        return vec![invalid(
            path("type"),
            format!("{kind:?}"),
            format!("completionPolicy should be Always, but current value is: {kind}"),
        )];
    }
    let deadline = int(completion.and_then(|c| c.get("activeDeadlineSeconds")));
    if let Some(d) = deadline.filter(|d| *d > MAX_ACTIVE_DEADLINE_SECONDS) {
        return vec![invalid(
            path("activeDeadlineSeconds"),
            d,
            format!(
                "activeDeadlineSeconds must be less than {MAX_ACTIVE_DEADLINE_SECONDS}, current value is: {d}"
            ),
        )];
    }
    let timeout = int(spec.pointer("/pullPolicy/timeoutSeconds"));
    if let (Some(d), Some(t)) = (deadline, timeout)
        && t > d
    {
        return vec![invalid(
            path("activeDeadlineSeconds"),
            d,
            format!(
                "completionPolicy.activeDeadlineSeconds must be greater than pullPolicy.timeoutSeconds({t})"
            ),
        )];
    }
    if let Some(ttl) = completion
        .and_then(|c| c.get("ttlSecondsAfterFinished"))
        .filter(|v| !v.is_null())
    {
        return vec![invalid(
            path("ttlSecondsAfterFinished"),
            ttl,
            "ttlSecondsAfterFinished is not supported in advancedCronJob",
        )];
    }
    Vec::new()
}

/// A label selector's `matchExpressions` (operators and values), as `LabelSelectorAsSelector`
/// checks them; one that does not decode is reported whole.
fn label_selector_errors(selector: &Value, path: &str) -> Vec<FieldError> {
    match serde_json::from_value::<LabelSelector>(selector.clone()) {
        Ok(s) => admission::selector_expression_errors(&s, path),
        Err(e) => vec![invalid(
            path,
            compact(selector),
            format!("invalid selector: {e}"),
        )],
    }
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
        validating(|object, old| Ok(validate(object, old))),
    );
    vec![mutate, validate_route]
}

/// The configurations, named for the scope: cluster-wide, or one namespace.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
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
