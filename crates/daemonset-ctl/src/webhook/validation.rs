//! Validation, with upstream's field paths and messages (apps/v1 DaemonSet
//! validation plus Kruise's `pkg/webhook/daemonset/validating`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{DaemonSet, DaemonSetSpec};
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, not_supported, required};
use kruise_workload::admission;
use kube::ResourceExt;
use serde::Serialize;
use serde_json::Value;

/// The message of a forbidden spec change.
pub const FORBIDDEN_UPDATE: &str = "updates to daemonset spec for fields other than 'burstReplicas', 'template', 'lifecycle', 'updateStrategy', 'minReadySeconds' and 'revisionHistoryLimit' are forbidden";

const PERCENT: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
const NON_NEGATIVE: &str = "must be greater than or equal to 0";
const NOT_MORE_THAN_100: &str = "must not be greater than 100%";
const RU: &str = "spec.updateStrategy.rollingUpdate";

/// Upstream's rules (`openkruise/kruise v1.9.0
/// pkg/webhook/daemonset/validating/daemonset_validation.go`) as field errors (HTTP 422 when any), on the objects as JSON (enum
/// values are read from there, so a value our types cannot hold is reported the
/// upstream way). `Err` when an object does not decode for another reason.
pub fn validate_json(raw_new: &Value, raw_old: Option<&Value>) -> Result<Vec<FieldError>, String> {
    let mut errors = enum_errors(raw_new);
    if !errors.is_empty() {
        return Ok(errors);
    }
    let new: DaemonSet =
        serde_json::from_value(raw_new.clone()).map_err(|e| format!("object: {e}"))?;
    let old = raw_old
        .map(|o| serde_json::from_value::<DaemonSet>(o.clone()))
        .transpose()
        .map_err(|e| format!("oldObject: {e}"))?;
    errors.extend(validate(&new, old.as_ref(), raw_new));
    Ok(errors)
}

/// [`validate_json`] on decoded objects (`raw_new` for the template's restartPolicy).
pub fn validate(new: &DaemonSet, old: Option<&DaemonSet>, raw_new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &new.spec;

    // 1. Name, selector and template labels.
    errors.extend(admission::workload_name_errors(&new.name_any()));
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref());
    errors.extend(admission::selector_errors(
        &spec.selector,
        labels,
        "daemonset",
    ));

    // 2. Template, minReadySeconds, revisionHistoryLimit.
    if let Some(template) = raw_new.pointer("/spec/template") {
        errors.extend(admission::long_running_template_errors(
            template,
            "DaemonSet",
        ));
    }
    if spec.min_ready_seconds < 0 {
        errors.push(invalid(
            "spec.minReadySeconds",
            spec.min_ready_seconds,
            NON_NEGATIVE,
        ));
    }
    if let Some(limit) = spec.revision_history_limit.filter(|l| *l < 0) {
        errors.push(invalid("spec.revisionHistoryLimit", limit, NON_NEGATIVE));
    }
    if let Some(burst) = &spec.burst_replicas {
        int_or_percent_errors(burst, "spec.burstReplicas", &mut errors);
    }

    // 3–6. Update strategy.
    update_strategy_errors(raw_new, spec, &mut errors);

    // 7. Lifecycle: only preDelete.
    if spec
        .lifecycle
        .as_ref()
        .is_some_and(|l| l.in_place_update.is_some())
    {
        errors.push(forbidden(
            "spec.lifecycle.inPlaceUpdate",
            "inPlaceUpdate hook has not supported yet",
        ));
    }

    // 8. Update: only some fields may change.
    if let Some(old) = old
        && frozen(&new.spec) != frozen(&old.spec)
    {
        errors.push(forbidden("spec", FORBIDDEN_UPDATE));
    }
    errors
}

/// The spec with every field an UPDATE may change cleared (the selector stays).
fn frozen(spec: &DaemonSetSpec) -> DaemonSetSpec {
    let selector = &spec.selector;
    DaemonSetSpec {
        selector: LabelSelector {
            match_labels: selector.match_labels.clone().filter(|m| !m.is_empty()),
            match_expressions: selector.match_expressions.clone().filter(|m| !m.is_empty()),
        },
        ..Default::default()
    }
}

/// Enum values and required fields read from the JSON: what would stop the object from
/// decoding, reported the upstream way.
fn enum_errors(raw: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = raw.get("spec").unwrap_or(&Value::Null);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let strategy = spec.get("updateStrategy").unwrap_or(&Value::Null);
    match strategy.get("type").map(text).as_deref() {
        None | Some("") | Some("RollingUpdate") | Some("OnDelete") => {}
        Some(other) => errors.push(not_supported(
            "spec.updateStrategy.type",
            quoted(other),
            "supported values: \"RollingUpdate\", \"OnDelete\"",
        )),
    }
    match strategy
        .pointer("/rollingUpdate/rollingUpdateType")
        .map(text)
        .as_deref()
    {
        None | Some("") | Some("Standard") | Some("InPlaceIfPossible") | Some("Surging") => {}
        Some(other) => errors.push(not_supported(
            format!("{RU}.rollingUpdateType"),
            quoted(other),
            "supported values: \"Standard\", \"Surging\", \"InPlaceIfPossible\"",
        )),
    }
    if spec.get("selector").is_none_or(Value::is_null) {
        errors.push(required("spec.selector", ""));
    }
    if spec.get("template").is_none_or(Value::is_null) {
        errors.push(required("spec.template", ""));
    }
    errors
}

fn update_strategy_errors(raw: &Value, spec: &DaemonSetSpec, errors: &mut Vec<FieldError>) {
    let strategy = &spec.update_strategy;
    let type_ = raw
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if type_ != "RollingUpdate" {
        if type_.is_empty() {
            errors.push(not_supported(
                "spec.updateStrategy.type",
                "\"\"",
                "supported values: \"RollingUpdate\", \"OnDelete\"",
            ));
        }
        return;
    }
    let Some(rolling) = &strategy.rolling_update else {
        errors.push(required(RU, ""));
        return;
    };
    let zero = IntOrString::Int(0);
    let unavailable = rolling.max_unavailable.as_ref().unwrap_or(&zero);
    let surge = rolling.max_surge.as_ref().unwrap_or(&zero);
    let path_u = format!("{RU}.maxUnavailable");
    let path_s = format!("{RU}.maxSurge");
    int_or_percent_errors(unavailable, &path_u, errors);
    int_or_percent_errors(surge, &path_s, errors);
    let (has_u, has_s) = (non_zero(unavailable), non_zero(surge));
    match (has_u, has_s) {
        (true, true) => errors.push(invalid(
            &path_s,
            json(surge),
            "may not be set when maxUnavailable is non-zero",
        )),
        (false, false) => errors.push(required(&path_u, "cannot be 0 when maxSurge is 0")),
        _ => {}
    }
    match raw
        .pointer("/spec/updateStrategy/rollingUpdate/rollingUpdateType")
        .and_then(Value::as_str)
        .unwrap_or("Standard")
    {
        "InPlaceIfPossible" if has_s => errors.push(invalid(
            &path_s,
            json(surge),
            "must be 0 for InPlaceIfPossible type",
        )),
        "Surging" if has_u => errors.push(invalid(
            &path_u,
            json(unavailable),
            "must be 0 for Surging type",
        )),
        _ => {}
    }
    if let Some(partition) = &rolling.partition {
        int_or_percent_errors(partition, &format!("{RU}.partition"), errors);
    }
    if let Some(selector) = &rolling.selector {
        errors.extend(admission::selector_expression_errors(
            selector,
            &format!("{RU}.selector"),
        ));
    }
}

/// A non-negative integer, or a valid percent no more than 100%.
fn int_or_percent_errors(value: &IntOrString, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        IntOrString::Int(n) if *n < 0 => errors.push(invalid(path, n, NON_NEGATIVE)),
        IntOrString::Int(_) => {}
        IntOrString::String(s) => match percent(s) {
            None => errors.push(invalid(path, quoted(s), PERCENT)),
            Some(p) if p > 100 => errors.push(invalid(path, quoted(s), NOT_MORE_THAN_100)),
            Some(_) => {}
        },
    }
}

/// `^[0-9]+%$` as its number.
fn percent(s: &str) -> Option<u64> {
    s.strip_suffix('%')
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
}

fn non_zero(value: &IntOrString) -> bool {
    match value {
        IntOrString::Int(n) => *n != 0,
        IntOrString::String(s) => percent(s).is_none_or(|p| p != 0),
    }
}

fn quoted(s: &str) -> String {
    Value::from(s).to_string()
}

fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}
