//! Validation, with upstream's field paths and messages
//! (`pkg/webhook/statefulset/validating/statefulset_validation.go`).
//!
//! Values are shown the way the apiserver shows them: numbers as is, strings quoted,
//! anything else as JSON.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1beta1::{
    InvalidReserveOrdinal, PodManagementPolicyType, PodUpdateStrategyType, StatefulSet,
    StatefulSetSpec, StatefulSetUpdateStrategyType, parse_reserve_ordinal,
};
use kruise_api::keys;
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, not_supported, required};
use kruise_workload::admission;
use kube::ResourceExt;
use serde::Serialize;
use serde_json::Value;

/// The message of a forbidden spec change (upstream's text, quotes and all).
pub const FORBIDDEN_UPDATE: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'reserveOrdinals', 'lifecycle', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy', `volumeClaimTemplates`, `VolumeClaimUpdateStrategy` and 'updateStrategy' are forbidden";

const PERCENT: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%', or '93%', regex used for validation is '[0-9]+%')";
const NON_NEGATIVE: &str = "must be greater than or equal to 0";
const PARALLEL_ONLY: &str = "can only work with Parallel PodManagementPolicyType";

/// Upstream's `validateStatefulSet` and `ValidateStatefulSetUpdate` rules as field errors (HTTP 422 when any): the object (CREATE), and on
/// UPDATE (`old` set) the fields that may not change. `raw_new`/`raw_old` are the same
/// objects as JSON (enum values are read from there, so a value our types cannot hold
/// is still reported the upstream way by [`validate_json`]).
///
/// The `InPlaceOnly` template rule is not a field error upstream but a plain 422
/// message: see [`in_place_only_denied`].
pub fn validate(
    new: &StatefulSet,
    old: Option<&StatefulSet>,
    raw_new: &Value,
    _raw_old: Option<&Value>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &new.spec;
    let parallel = spec.pod_management_policy == Some(PodManagementPolicyType::Parallel);

    // 1. Name.
    errors.extend(admission::workload_name_errors(&new.name_any()));

    // 1. podManagementPolicy (also reported by `enum_errors` when our type cannot hold it).
    if spec.pod_management_policy.is_none() {
        errors.push(required("spec.podManagementPolicy", ""));
    }

    // 8. reserveOrdinals.
    reserve_ordinal_errors(spec, &mut errors);

    // 5. scaleStrategy.maxUnavailable.
    if let Some(v) = spec
        .scale_strategy
        .as_ref()
        .and_then(|s| s.max_unavailable.as_ref())
    {
        max_unavailable_errors(
            v,
            parallel,
            "spec.scaleStrategy.maxUnavailable",
            &mut errors,
        );
    }

    // 3–7. updateStrategy.
    update_strategy_errors(spec, parallel, &mut errors);

    // 9. Retention policy values, from the JSON.
    errors.extend(enum_errors(raw_new).into_iter().filter(|e| {
        e.path
            .starts_with("spec.persistentVolumeClaimRetentionPolicy")
    }));

    // 1. replicas.
    let replicas = spec.replicas();
    if replicas < 0 {
        errors.push(invalid("spec.replicas", replicas, NON_NEGATIVE));
    }

    // 2. Selector and template.
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref());
    errors.extend(admission::selector_errors(
        &spec.selector,
        labels,
        "statefulset",
    ));
    if let Some(template) = raw_new.pointer("/spec/template") {
        errors.extend(admission::long_running_template_errors(
            template,
            "StatefulSet",
        ));
    }

    // 10. Update: only some fields may change.
    if let Some(old) = old
        && frozen(&new.spec) != frozen(&old.spec)
    {
        errors.push(forbidden("spec", FORBIDDEN_UPDATE));
    }
    errors
}

/// [`validate`] on the objects as JSON (what the webhook receives, in either served
/// version). An enum value our types cannot hold, or a missing `selector`/`template`,
/// is reported as upstream reports it rather than as a decoding failure. `Err` when
/// an object does not decode for another reason.
pub fn validate_json(raw_new: &Value, raw_old: Option<&Value>) -> Result<Vec<FieldError>, String> {
    let new = serde_json::from_value::<StatefulSet>(raw_new.clone());
    let old = raw_old
        .map(|o| serde_json::from_value::<StatefulSet>(o.clone()))
        .transpose();
    match (new, old) {
        (Ok(new), Ok(old)) => Ok(validate(&new, old.as_ref(), raw_new, raw_old)),
        (Err(e), _) => {
            let errors = enum_errors(raw_new);
            if errors.is_empty() {
                Err(format!("object: {e}"))
            } else {
                Ok(errors)
            }
        }
        (_, Err(e)) => Err(format!("oldObject: {e}")),
    }
}

/// `InPlaceOnly` (upstream `validateTemplateInPlaceOnly`): on UPDATE the diff of `template.spec` may only replace
/// container images. The message upstream answers with (HTTP 422), if not.
pub fn in_place_only_denied(raw_new: &Value, raw_old: &Value) -> Option<String> {
    let policy = raw_new
        .pointer("/spec/updateStrategy/rollingUpdate/podUpdatePolicy")
        .and_then(Value::as_str);
    if policy != Some("InPlaceOnly") {
        return None;
    }
    let spec = |v: &Value| {
        v.pointer("/spec/template/spec")
            .cloned()
            .unwrap_or(Value::Null)
    };
    let v = kruise_inplace::in_place_only_violation(&spec(raw_old), &spec(raw_new))?;
    Some(format!(
        "invalid template modified with InPlaceOnly strategy: {} {}, currently only image update is allowed for InPlaceOnly",
        v.op, v.path
    ))
}

/// The spec with every field an UPDATE may change cleared, and empty values
/// normalised (upstream compares semantically: nil and empty are equal).
fn frozen(spec: &StatefulSetSpec) -> StatefulSetSpec {
    let selector = &spec.selector;
    StatefulSetSpec {
        selector: LabelSelector {
            match_labels: selector.match_labels.clone().filter(|m| !m.is_empty()),
            match_expressions: selector.match_expressions.clone().filter(|m| !m.is_empty()),
        },
        service_name: spec.service_name.clone().filter(|s| !s.is_empty()),
        pod_management_policy: spec.pod_management_policy,
        // replicas, ordinals, template, reserveOrdinals, lifecycle, revisionHistoryLimit,
        // persistentVolumeClaimRetentionPolicy, volumeClaimTemplates,
        // volumeClaimUpdateStrategy, updateStrategy and scaleStrategy may change.
        ..Default::default()
    }
}

/// Errors about enum values and required fields that are read from the JSON: what
/// stops the object from decoding, reported the upstream way.
fn enum_errors(raw: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = raw.get("spec").unwrap_or(&Value::Null);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    match spec.get("podManagementPolicy").map(text).as_deref() {
        None | Some("") => errors.push(required("spec.podManagementPolicy", "")),
        Some("OrderedReady" | "Parallel") => {}
        Some(other) => errors.push(invalid(
            "spec.podManagementPolicy",
            quoted(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let strategy = spec.get("updateStrategy").unwrap_or(&Value::Null);
    match strategy.get("type").map(text).as_deref() {
        None | Some("") => errors.push(required("spec.updateStrategy", "")),
        Some("RollingUpdate") => {
            if let Some(policy) = strategy.pointer("/rollingUpdate/podUpdatePolicy").map(text) {
                match policy.as_str() {
                    "" => errors.push(required(
                        "spec.updateStrategy.rollingUpdate.podUpdatePolicy",
                        "",
                    )),
                    "ReCreate" | "InPlaceIfPossible" | "InPlaceOnly" => {}
                    other => errors.push(invalid(
                        "spec.updateStrategy.rollingUpdate.podUpdatePolicy",
                        quoted(other),
                        "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
                    )),
                }
            }
        }
        Some("OnDelete") => {}
        Some(_) => errors.push(invalid(
            "spec.updateStrategy",
            strategy.to_string(),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    if let Some(policy) = spec
        .get("persistentVolumeClaimRetentionPolicy")
        .filter(|p| !p.is_null())
    {
        for field in ["whenDeleted", "whenScaled"] {
            let value = policy.get(field).map(text).unwrap_or_default();
            if value != "Retain" && value != "Delete" {
                errors.push(not_supported(
                    format!("spec.persistentVolumeClaimRetentionPolicy.{field}"),
                    quoted(&value),
                    "supported values: \"Retain\", \"Delete\"",
                ));
            }
        }
    }
    if spec.get("selector").is_none_or(Value::is_null) {
        errors.push(required("spec.selector", ""));
    }
    if spec.get("template").is_none_or(Value::is_null) {
        errors.push(required("spec.template", ""));
    }
    errors
}

fn reserve_ordinal_errors(spec: &StatefulSetSpec, errors: &mut Vec<FieldError>) {
    for (i, entry) in spec.reserve_ordinals.iter().enumerate() {
        let detail = match parse_reserve_ordinal(entry) {
            Ok(_) => continue,
            Err(InvalidReserveOrdinal::Negative(v)) => {
                format!("{i} th reserve ordinal is negative: {v}")
            }
            Err(InvalidReserveOrdinal::NotARange(s)) => {
                format!("{i} th reserve ordinal is not a valid range: {s}")
            }
        };
        // Upstream reports these on the root path with the whole list as the value.
        errors.push(invalid("spec", json(&spec.reserve_ordinals), detail));
    }
}

fn update_strategy_errors(spec: &StatefulSetSpec, parallel: bool, errors: &mut Vec<FieldError>) {
    let strategy = &spec.update_strategy;
    let Some(strategy_type) = strategy.type_ else {
        errors.push(required("spec.updateStrategy", ""));
        return;
    };
    let Some(rolling) = &strategy.rolling_update else {
        return;
    };
    if strategy_type == StatefulSetUpdateStrategyType::OnDelete {
        errors.push(invalid(
            "spec.updateStrategy.rollingUpdate",
            json(rolling),
            "only allowed for updateStrategy 'RollingUpdate'",
        ));
        return;
    }
    const PATH: &str = "spec.updateStrategy.rollingUpdate";
    let partition = rolling.partition.unwrap_or(0);
    if partition < 0 {
        errors.push(invalid(
            format!("{PATH}.partition"),
            partition,
            NON_NEGATIVE,
        ));
    }
    let min_ready = rolling.min_ready_seconds.unwrap_or(0);
    if min_ready < 0 {
        errors.push(invalid(
            format!("{PATH}.minReadySeconds"),
            min_ready,
            NON_NEGATIVE,
        ));
    }
    if min_ready > kruise_api::apps_v1beta1::MAX_MIN_READY_SECONDS {
        errors.push(invalid(
            format!("{PATH}.minReadySeconds"),
            min_ready,
            "must be no more than 300 seconds",
        ));
    }
    match &rolling.max_unavailable {
        None => errors.push(required(format!("{PATH}.maxUnavailable"), "")),
        Some(v) => max_unavailable_errors(v, parallel, &format!("{PATH}.maxUnavailable"), errors),
    }
    match rolling.pod_update_policy {
        None => errors.push(required(format!("{PATH}.podUpdatePolicy"), "")),
        Some(PodUpdateStrategyType::ReCreate) => {}
        Some(policy) => {
            let gates = spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.readiness_gates.as_ref());
            let ready_gate = gates
                .into_iter()
                .flatten()
                .any(|g| g.condition_type == keys::INPLACE_UPDATE_READY);
            if !ready_gate {
                errors.push(invalid(
                    "spec.template.spec.readinessGates",
                    gates.map_or_else(|| "null".to_string(), json),
                    format!(
                        "must contains {} when podUpdatePolicy is {}",
                        keys::INPLACE_UPDATE_READY,
                        json(&policy).trim_matches('"')
                    ),
                ));
            }
        }
    }
    if let Some(unordered) = &rolling.unordered_update {
        if !parallel {
            errors.push(required(
                format!("{PATH}.unorderedUpdate"),
                "unorderedUpdate can only work with Parallel PodManagementPolicyType",
            ));
        }
        if let Some(priority) = &unordered.priority_strategy {
            errors.extend(admission::priority_strategy_errors(
                priority,
                &format!("{PATH}.unorderedUpdate.priorityStrategy"),
            ));
        }
    }
}

/// Upstream `validateMaxUnavailableField`: a non-negative integer or an integral
/// percentage, at least 1 when scaled on 1 rounding up, and anything but the integer 1
/// only with `Parallel`.
fn max_unavailable_errors(
    value: &IntOrString,
    parallel: bool,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    match value {
        IntOrString::String(s) if !is_valid_percent(s) => {
            errors.push(invalid(path, json(value), PERCENT));
        }
        IntOrString::Int(n) if *n < 0 => errors.push(invalid(path, n, NON_NEGATIVE)),
        _ => {}
    }
    match value_from_int_or_percent(value, 1) {
        // Upstream shows the scaled value (0 on error), not the field.
        Err(e) => errors.push(invalid(
            path,
            0,
            format!("getValueFromIntOrPercent error: {e}"),
        )),
        Ok(v) if v < 1 => errors.push(invalid(path, v, "should not be less than 1")),
        Ok(_) => {}
    }
    if !parallel && *value != IntOrString::Int(1) {
        errors.push(invalid(path, json(value), PARALLEL_ONLY));
    }
}

/// `^[0-9]+%$`.
fn is_valid_percent(s: &str) -> bool {
    s.strip_suffix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `intstr.GetValueFromIntOrPercent(value, total, roundUp=true)`, errors included
/// (only integral percentages).
fn value_from_int_or_percent(value: &IntOrString, total: i64) -> Result<i64, String> {
    match value {
        IntOrString::Int(n) => Ok(i64::from(*n)),
        IntOrString::String(s) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .into(),
                );
            };
            let percent: i64 = number.parse().map_err(|e: std::num::ParseIntError| {
                let reason = match e.kind() {
                    std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                        "value out of range"
                    }
                    _ => "invalid syntax",
                };
                format!(
                    "invalid value for IntOrString: invalid value {s:?}: strconv.Atoi: parsing {number:?}: {reason}"
                )
            })?;
            Ok((percent as f64 * total as f64 / 100.0).ceil() as i64)
        }
    }
}

fn quoted(s: &str) -> String {
    Value::from(s).to_string()
}

fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}
