//! WorkloadSpread validation (openkruise/kruise v1.9.0 pkg/webhook/workloadspread/validating/workloadspread_validation.go), with upstream's messages. Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod, Toleration};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{WorkloadSpread, WorkloadSpreadSubset};
use kruise_api::intstr::Amount;
use kruise_api::keys;
use kruise_runtime::webhook::field::{
    FieldError, forbidden, invalid, invalid_detail, not_supported, required,
};
use serde_json::json;

use crate::plan::custom::Allowlist;
use crate::plan::target::TargetKind;

/// The longest a subset may stay unschedulable before it recovers, minus a margin: the
/// bound on the sum of the rescheduling waits over the subsets (openkruise/kruise v1.9.0 pkg/webhook/workloadspread/validating/workloadspread_validation.go).
const RESCHEDULE_BUDGET_SECONDS: i32 = 300 - 5;

/// Adaptive messages (not quoted by the spec; worded like upstream's).
pub const MSG_ADAPTIVE_NEEDS_TYPE: &str =
    "adaptive is only allowed when scheduleStrategy.type is Adaptive";
pub const MSG_ADAPTIVE_LAST_SUBSET: &str =
    "the last subset must not specify maxReplicas when scheduleStrategy.type is Adaptive";

/// Every problem with `ws` (`old` on UPDATE), against the other WorkloadSpreads of the
/// namespace.
/// `allowlist` holds the custom kinds of `kruise-configuration` (read only for a target
/// that is not built in).
pub fn validate(
    ws: &WorkloadSpread,
    old: Option<&WorkloadSpread>,
    others: &[&WorkloadSpread],
    allowlist: &Allowlist,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &ws.spec;
    let r = &spec.target_ref;
    let kind = TargetKind::resolve(r, allowlist);
    if let Some(selector) = spec
        .target_filter
        .as_ref()
        .and_then(|f| f.selector.as_ref())
        && let Err(e) = kruise_ordering::selector::matches(selector, &Default::default())
    {
        errors.push(invalid_detail(
            "spec.targetFilter",
            format!("invalid label selector: {e:?}"),
        ));
    }
    if r.api_version.is_empty() || r.kind.is_empty() || r.name.is_empty() {
        errors.push(required("spec.targetRef", keys::WS_MSG_NO_TARGET_REF));
    } else if kind.is_none() {
        errors.push(invalid(
            "spec.targetRef",
            format!("{:?}", format!("{}/{}", r.api_version, r.kind)),
            keys::WS_MSG_KIND_NOT_PERMITTED,
        ));
    }
    if let Some(old) = old
        && old.spec.target_ref != *r
    {
        errors.push(forbidden(
            "spec.targetRef",
            keys::WS_MSG_TARGET_REF_IMMUTABLE,
        ));
    }
    if !r.name.is_empty()
        && let Some(other) = others.iter().find(|o| {
            o.metadata.name != ws.metadata.name
                && o.metadata.namespace == ws.metadata.namespace
                && TargetKind::refers_to(&o.spec.target_ref, &r.api_version, &r.kind, &r.name)
        })
    {
        errors.push(invalid(
            "spec.targetRef",
            format!("{:?}", r.name),
            format!(
                "{}{}",
                keys::WS_MSG_TARGET_REF_CONFLICT,
                other.metadata.name.as_deref().unwrap_or_default()
            ),
        ));
    }
    validate_subsets(&spec.subsets, kind, &mut errors);
    validate_strategy(ws, &mut errors);
    errors
}

fn validate_subsets(
    subsets: &[WorkloadSpreadSubset],
    kind: Option<TargetKind>,
    errors: &mut Vec<FieldError>,
) {
    if subsets.is_empty() {
        errors.push(required("spec.subsets", keys::WS_MSG_NO_SUBSETS));
        return;
    }
    let mut names = BTreeSet::new();
    let mut types = BTreeSet::new();
    let mut percent_sum = 0.0;
    for (i, subset) in subsets.iter().enumerate() {
        let path = format!("spec.subsets[{i}]");
        if subset.name.is_empty() {
            errors.push(required(format!("{path}.name"), "subset name is required"));
        } else if !names.insert(subset.name.as_str()) {
            errors.push(invalid(
                format!("{path}.name"),
                format!("{:?}", subset.name),
                format!("{}{}", keys::MSG_DUPLICATED_SUBSET_NAME, subset.name),
            ));
        }
        if let Some(term) = &subset.required_node_selector_term {
            validate_term(term, &format!("{path}.requiredNodeSelectorTerm"), errors);
        }
        for (j, p) in subset.preferred_node_selector_terms.iter().enumerate() {
            let p_path = format!("{path}.preferredNodeSelectorTerms[{j}]");
            if !(1..=100).contains(&p.weight) {
                errors.push(invalid(
                    format!("{p_path}.weight"),
                    p.weight,
                    "must be in the range 1-100",
                ));
            }
            validate_term(&p.preference, &format!("{p_path}.preference"), errors);
        }
        for (j, t) in subset.tolerations.iter().enumerate() {
            validate_toleration(t, &format!("{path}.tolerations[{j}]"), errors);
        }
        if let Some(patch) = &subset.patch {
            validate_patch(patch, &format!("{path}.patch"), errors);
        }
        if let Some(max) = &subset.max_replicas {
            match Amount::parse(max) {
                Err(_) => errors.push(invalid(
                    format!("{path}.maxReplicas"),
                    match max {
                        IntOrString::Int(n) => n.to_string(),
                        IntOrString::String(s) => format!("{s:?}"),
                    },
                    "must be an integer or a percentage",
                )),
                Ok(amount) => {
                    types.insert(amount.is_percent());
                    match amount {
                        Amount::Absolute(n) if n < 0 => errors.push(invalid(
                            format!("{path}.maxReplicas"),
                            n,
                            "must be greater than or equal to 0",
                        )),
                        Amount::Percent(p) if !(0.0..=100.0).contains(&p) => errors.push(invalid(
                            format!("{path}.maxReplicas"),
                            format!("\"{p}%\""),
                            "must be between 0% and 100%",
                        )),
                        Amount::Percent(p) => percent_sum += p,
                        Amount::Absolute(_) => {}
                    }
                }
            }
        }
    }
    if types.len() > 1 {
        errors.push(invalid_detail(
            "spec.subsets",
            keys::WS_MSG_MAX_REPLICAS_MIXED,
        ));
        return;
    }
    if types.contains(&true) {
        if kind.is_some_and(TargetKind::is_statefulset) {
            errors.push(invalid_detail(
                "spec.subsets",
                keys::WS_MSG_MAX_REPLICAS_INT_FOR_STS,
            ));
        }
        let last_unlimited = subsets.last().is_some_and(|s| s.max_replicas.is_none());
        if percent_sum > 100.0 {
            errors.push(invalid_detail(
                "spec.subsets",
                keys::WS_MSG_PERCENT_EXCEEDS_100,
            ));
        } else if !last_unlimited && (percent_sum - 100.0).abs() > 1e-9 {
            errors.push(invalid_detail("spec.subsets", keys::WS_MSG_PERCENT_NOT_100));
        }
    }
}

fn validate_strategy(ws: &WorkloadSpread, errors: &mut Vec<FieldError>) {
    let strategy = &ws.spec.schedule_strategy;
    let Some(adaptive) = &strategy.adaptive else {
        return;
    };
    if !strategy.is_adaptive() {
        errors.push(invalid_detail(
            "spec.scheduleStrategy.adaptive",
            MSG_ADAPTIVE_NEEDS_TYPE,
        ));
        return;
    }
    let subsets = &ws.spec.subsets;
    if subsets.last().is_some_and(|s| s.max_replicas.is_some()) {
        errors.push(invalid_detail(
            format!("spec.subsets[{}].maxReplicas", subsets.len() - 1),
            MSG_ADAPTIVE_LAST_SUBSET,
        ));
    }
    if let Some(seconds) = adaptive.reschedule_critical_seconds {
        let bound = RESCHEDULE_BUDGET_SECONDS / (subsets.len() as i32 - 1).max(1);
        if !(0..=bound).contains(&seconds) {
            errors.push(invalid(
                "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds",
                seconds,
                format!("must be within [0, {bound}]"),
            ));
        }
    }
}

/// `supported values: "a", "b"`, as the apiserver words it.
fn supported(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("supported values: {}", quoted.join(", "))
}

const OPERATORS: [&str; 6] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

fn validate_requirement(
    r: &NodeSelectorRequirement,
    path: &str,
    field: bool,
    errors: &mut Vec<FieldError>,
) {
    if r.key.is_empty() {
        errors.push(required(format!("{path}.key"), ""));
    }
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => errors.push(required(
            format!("{path}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(forbidden(
            format!("{path}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 || values[0].parse::<i64>().is_err() => {
            errors.push(required(
                format!("{path}.values"),
                "must be specified single value when `operator` is 'Lt' or 'Gt'",
            ))
        }
        op if !OPERATORS.contains(&op) => errors.push(not_supported(
            format!("{path}.operator"),
            format!("{op:?}"),
            supported(&OPERATORS),
        )),
        _ => {}
    }
    if field && r.key != "metadata.name" {
        errors.push(not_supported(
            format!("{path}.key"),
            format!("{:?}", r.key),
            supported(&["metadata.name"]),
        ));
    }
}

fn validate_term(term: &NodeSelectorTerm, path: &str, errors: &mut Vec<FieldError>) {
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        validate_requirement(r, &format!("{path}.matchExpressions[{i}]"), false, errors);
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        validate_requirement(r, &format!("{path}.matchFields[{i}]"), true, errors);
    }
}

fn validate_toleration(t: &Toleration, path: &str, errors: &mut Vec<FieldError>) {
    let operator = t.operator.as_deref().unwrap_or("Equal");
    match operator {
        "Equal" => {}
        "Exists" if t.value.as_deref().is_some_and(|v| !v.is_empty()) => errors.push(invalid(
            format!("{path}.operator"),
            format!("{operator:?}"),
            "value must be empty when `operator` is 'Exists'",
        )),
        "Exists" => {}
        other => errors.push(not_supported(
            format!("{path}.operator"),
            format!("{other:?}"),
            supported(&["Equal", "Exists"]),
        )),
    }
    if t.key.as_deref().is_none_or(str::is_empty) && operator != "Exists" {
        errors.push(invalid(
            format!("{path}.operator"),
            format!("{operator:?}"),
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
    {
        errors.push(not_supported(
            format!("{path}.effect"),
            format!("{effect:?}"),
            supported(&["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        ));
    }
}

/// The patch must be an object that, merged into a Pod, still makes a Pod.
fn validate_patch(patch: &serde_json::Value, path: &str, errors: &mut Vec<FieldError>) {
    if !patch.is_object() {
        errors.push(invalid_detail(path, "patch must be a JSON object"));
        return;
    }
    let mut pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"containers": []}});
    kruise_workload::strategic::strategic_merge(&mut pod, patch, "");
    if let Err(e) = serde_json::from_value::<Pod>(pod) {
        errors.push(invalid_detail(
            path,
            format!("the patched Pod is invalid: {e}"),
        ));
    }
}
