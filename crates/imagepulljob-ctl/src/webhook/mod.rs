//! Admission of ImagePullJob, ImageListPullJob and NodeImage (openkruise/kruise v1.9.0
//! pkg/webhook/imagepulljob/validating, pkg/webhook/imagelistpulljob/validating and
//! pkg/webhook/nodeimage/validating, each `*_create_update_handler.go`): on the objects' JSON, so a
//! value our types cannot hold is still reported, with the field's path in every message.

use std::collections::BTreeSet;

use kruise_runtime::webhook::Route;
use kruise_runtime::webhook::config;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, invalid_detail, required};
use kruise_runtime::webhook::validating;
use serde_json::Value;

use crate::plan::job::{DEFAULT_TIMEOUT_SECONDS, split_image};

pub const VALIDATE_JOB_PATH: &str = "/validate-apps-kruise-io-v1alpha1-imagepulljob";
pub const VALIDATE_LIST_PATH: &str = "/validate-apps-kruise-io-v1alpha1-imagelistpulljob";
pub const VALIDATE_NODEIMAGE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-nodeimage";

/// At most this many images in a NodeImage.
pub const MAX_NODEIMAGE_IMAGES: usize = 256;
/// At most this many images in an ImageListPullJob.
pub const MAX_LIST_IMAGES: usize = 255;

fn int(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_i64)
}

/// The rules of the template fields shared by both job kinds.
pub fn template_errors(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let selector = spec.get("selector").filter(|s| !s.is_null());
    if let Some(selector) = selector {
        let names: Vec<&str> = selector
            .get("names")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let has_labels = ["matchLabels", "matchExpressions"].iter().any(|k| {
            selector.get(*k).is_some_and(|v| {
                v.as_object().is_some_and(|o| !o.is_empty())
                    || v.as_array().is_some_and(|a| !a.is_empty())
            })
        });
        if !names.is_empty() && has_labels {
            errors.push(invalid_detail(
                "spec.selector",
                "can not set both names and labelSelector in this spec.selector",
            ));
        }
        if names.iter().collect::<BTreeSet<_>>().len() != names.len() {
            errors.push(invalid_detail(
                "spec.selector.names",
                "duplicated name in selector names",
            ));
        }
        if spec.get("podSelector").is_some_and(|p| !p.is_null()) {
            errors.push(invalid_detail(
                "spec.podSelector",
                "can not set both selector and podSelector",
            ));
        }
    }
    if let Some(p) = spec.get("parallelism").filter(|p| !p.is_null()) {
        match p {
            Value::String(s) if s.trim_end().ends_with('%') => errors.push(invalid(
                "spec.parallelism",
                s,
                "parallelism does not support percentage value",
            )),
            Value::String(s) if s.trim().parse::<i32>().is_ok_and(|n| n >= 0) => {}
            Value::Number(n)
                if n.as_i64()
                    .is_some_and(|n| (0..=i32::MAX as i64).contains(&n)) => {}
            other => errors.push(invalid(
                "spec.parallelism",
                other,
                "parallelism must be a non-negative integer",
            )),
        }
    }
    let pull = spec.get("pullPolicy");
    for field in ["timeoutSeconds", "backoffLimit"] {
        if let Some(v) = int(pull.and_then(|p| p.get(field)))
            && v < 0
        {
            errors.push(invalid(
                format!("spec.pullPolicy.{field}"),
                v,
                "must be non-negative",
            ));
        }
    }
    let completion = spec.get("completionPolicy");
    let kind = completion
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("Always");
    let deadline = int(completion.and_then(|c| c.get("activeDeadlineSeconds")));
    let ttl = int(completion.and_then(|c| c.get("ttlSecondsAfterFinished")));
    match kind {
        "Always" => {
            let timeout = int(pull.and_then(|p| p.get("timeoutSeconds")))
                .unwrap_or(DEFAULT_TIMEOUT_SECONDS as i64);
            if let Some(d) = deadline
                && d < timeout
            {
                errors.push(invalid(
                    "spec.completionPolicy.activeDeadlineSeconds",
                    d,
                    format!(
                        "completionPolicy.activeDeadlineSeconds must be greater than pullPolicy.timeoutSeconds(default {DEFAULT_TIMEOUT_SECONDS})"
                    ),
                ));
            }
            if let Some(t) = ttl
                && t < 0
            {
                errors.push(invalid(
                    "spec.completionPolicy.ttlSecondsAfterFinished",
                    t,
                    "must be non-negative",
                ));
            }
        }
        "Never" => {
            if deadline.is_some() || ttl.is_some() {
                errors.push(invalid_detail(
                    "spec.completionPolicy",
                    "activeDeadlineSeconds and ttlSecondsAfterFinished can only work with Always CompletionPolicyType",
                ));
            }
        }
        other => errors.push(invalid(
            "spec.completionPolicy.type",
            other,
            "supported values: \"Always\", \"Never\"",
        )),
    }
    if let Some(p) = spec.get("imagePullPolicy").and_then(Value::as_str)
        && !matches!(p, "Always" | "IfNotPresent")
    {
        errors.push(invalid(
            "spec.imagePullPolicy",
            p,
            "supported values: \"Always\", \"IfNotPresent\"",
        ));
    }
    errors
}

fn image_errors(path: &str, image: Option<&Value>) -> Vec<FieldError> {
    match image.and_then(Value::as_str) {
        None | Some("") => vec![required(path, "image can not be empty")],
        Some(i) if split_image(i).is_none() => vec![invalid(path, i, "image can not be parsed")],
        Some(_) => vec![],
    }
}

/// ImagePullJob validation; `old` on UPDATE (pullSecrets are immutable).
pub fn validate_job(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let spec = object.get("spec").cloned().unwrap_or_default();
    let mut errors = image_errors("spec.image", spec.get("image"));
    errors.extend(template_errors(&spec));
    if let Some(old) = old {
        let secrets = |o: &Value| {
            o.pointer("/spec/pullSecrets")
                .cloned()
                .unwrap_or(Value::Null)
        };
        let norm = |v: Value| {
            if v == Value::Array(vec![]) {
                Value::Null
            } else {
                v
            }
        };
        if norm(secrets(object)) != norm(secrets(old)) {
            errors.push(forbidden(
                "spec.pullSecrets",
                "spec.pullSecrets is immutable",
            ));
        }
    }
    errors
}

/// ImageListPullJob validation.
pub fn validate_list(object: &Value) -> Vec<FieldError> {
    let spec = object.get("spec").cloned().unwrap_or_default();
    let mut errors = Vec::new();
    let images: Vec<&Value> = spec
        .get("images")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    if images.is_empty() {
        errors.push(required("spec.images", "images can not be empty"));
    }
    if images.len() > MAX_LIST_IMAGES {
        errors.push(invalid(
            "spec.images",
            images.len(),
            format!("the number of images can not be more than {MAX_LIST_IMAGES}"),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, image) in images.iter().enumerate() {
        errors.extend(image_errors(&format!("spec.images[{i}]"), Some(image)));
        if let Some(s) = image.as_str()
            && !seen.insert(s)
        {
            errors.push(invalid(
                format!("spec.images[{i}]"),
                s,
                "duplicated image in spec.images",
            ));
        }
    }
    errors.extend(template_errors(&spec));
    errors
}

/// NodeImage validation (`validateV1beta1` in openkruise/kruise v1.9.0
/// pkg/webhook/nodeimage/validating/nodeimage_create_update_handler.go).
pub fn validate_node_image(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(images) = object.pointer("/spec/images").and_then(Value::as_object) else {
        return errors;
    };
    if images.len() > MAX_NODEIMAGE_IMAGES {
        errors.push(invalid_detail(
            "spec.images",
            format!(
                "spec images length {} can not be more than {MAX_NODEIMAGE_IMAGES}",
                images.len()
            ),
        ));
    }
    for (name, image) in images {
        let path = format!("spec.images[{name}]");
        if name.is_empty() {
            errors.push(required("spec.images", "image name can not be empty"));
        }
        let mut tags = BTreeSet::new();
        let list = image
            .get("tags")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, tag) in list.iter().enumerate() {
            let tpath = format!("{path}.tags[{i}]");
            let t = tag.get("tag").and_then(Value::as_str).unwrap_or_default();
            if t.is_empty() {
                errors.push(required(format!("{tpath}.tag"), "tag can not be empty"));
            } else if !tags.insert(t) {
                errors.push(invalid_detail(
                    format!("{tpath}.tag"),
                    format!("duplicated tag {t} for image {name}"),
                ));
            }
            for (field, what) in [("createdAt", "createdAt"), ("pullPolicy", "pullPolicy")] {
                if tag.get(field).is_none_or(Value::is_null) {
                    errors.push(required(
                        format!("{tpath}.{field}"),
                        format!("{what} for {name}/{t} must set"),
                    ));
                }
            }
            if tag.get("pullPolicy").is_some_and(|p| !p.is_null())
                && tag
                    .pointer("/pullPolicy/ttlSecondsAfterFinished")
                    .is_none_or(Value::is_null)
            {
                errors.push(required(
                    format!("{tpath}.pullPolicy.ttlSecondsAfterFinished"),
                    format!("pullPolicy.ttlSecondsAfterFinished for {name}/{t} must set"),
                ));
            }
            if int(tag.get("version")).is_some_and(|v| v < 0) {
                errors.push(invalid(
                    format!("{tpath}.version"),
                    int(tag.get("version")).unwrap_or_default(),
                    "version must be non-negative",
                ));
            }
        }
    }
    errors
}

/// The validation routes of the three kinds.
pub fn routes() -> Vec<Route> {
    vec![
        Route::new(
            VALIDATE_JOB_PATH,
            "validate-imagepulljob",
            validating(|n, o| Ok(validate_job(n, o))),
        ),
        Route::new(
            VALIDATE_LIST_PATH,
            "validate-imagelistpulljob",
            validating(|n, _| Ok(validate_list(n))),
        ),
        Route::new(
            VALIDATE_NODEIMAGE_PATH,
            "validate-nodeimage",
            validating(|n, _| Ok(validate_node_image(n))),
        ),
    ]
}

/// The configurations, named for the scope: cluster-wide, or one namespace (where the
/// cluster-scoped NodeImage is left to the cluster-wide instance).
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let mut webhooks = vec![
        config::validating_webhook(
            "vimagepulljob.kb.io",
            VALIDATE_JOB_PATH,
            vec![config::rule(
                "apps.kruise.io",
                &["v1alpha1"],
                &["imagepulljobs"],
                &["CREATE", "UPDATE"],
                "Namespaced",
            )],
        ),
        config::validating_webhook(
            "vimagelistpulljob.kb.io",
            VALIDATE_LIST_PATH,
            vec![config::rule(
                "apps.kruise.io",
                &["v1alpha1"],
                &["imagelistpulljobs"],
                &["CREATE", "UPDATE"],
                "Namespaced",
            )],
        ),
    ];
    if watch_namespace.is_none() {
        webhooks.push(config::validating_webhook(
            "vnodeimage.kb.io",
            VALIDATE_NODEIMAGE_PATH,
            vec![config::rule(
                "apps.kruise.io",
                &["v1alpha1"],
                &["nodeimages"],
                &["CREATE", "UPDATE"],
                "Cluster",
            )],
        ));
    }
    (
        vec![config::validating_configuration(
            "kruise-imagepulljob",
            watch_namespace,
            webhooks,
        )],
        vec![],
    )
}

#[cfg(test)]
mod tests;
