//! UnitedDeployment admission (openkruise/kruise v1.9.0 pkg/webhook/uniteddeployment/mutating and
//! pkg/webhook/uniteddeployment/validating/uniteddeployment_validation.go): defaulting (mutating),
//! validation and deletion protection.
//!
//! The subset workloads' Pod templates are not defaulted here: each workload kind's own
//! webhook defaults them when the controller writes the workload, and leaving the UD's
//! template as written keeps its revision hash what the user wrote.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::UnitedDeployment;
use kruise_api::keys;
use kruise_runtime::webhook::config;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::field::{
    FieldError, forbidden, invalid, invalid_detail, not_supported, required,
};
use kruise_runtime::webhook::validating;
use kruise_runtime::webhook::{Route, defaulting};
use kruise_workload::admission;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::plan::allocation::{AllocationError, parse_subset_replicas};
use crate::plan::workload::WorkloadKind;

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-uniteddeployment";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-uniteddeployment";

pub const TEMPLATE_REPLICAS_UNUSED: &str = "replicas in template will not be used";
pub const TEMPLATE_PARTITION_UNUSED: &str = "partition in template will not be used";
pub const ADAPTIVE_FORBIDS_REPLICAS: &str =
    "subset.Replicas is not allowed when scheduleStrategy is Adaptive";
pub const MIN_MAX_NEEDS_REPLICAS: &str =
    "spec.replicas is required when subsets use minReplicas/maxReplicas";
pub const ONE_MAX_EMPTY: &str = "at least one subset's maxReplicas must be empty";
pub const NODE_SELECTOR_IMMUTABLE: &str = "may not be changed in an update";
pub const STATEFULSET_TEMPLATE_UPDATE: &str = "updates to statefulSetTemplate spec for fields other than 'template', and 'updateStrategy' are forbidden";
pub const RESERVE_ONLY_STATELESS: &str =
    "reserveUnschedulablePods is only supported for deploymentTemplate and cloneSetTemplate";

/// Defaulting (as `SetDefaultsUnitedDeploymentV1beta1` in openkruise/kruise v1.9.0
/// apis/apps/defaults/v1beta1.go): `revisionHistoryLimit: 10`, `updateStrategy.type: Manual`,
/// `scheduleStrategy.type: Fixed`; when a subset sets minReplicas or maxReplicas and none sets
/// replicas, every unset minReplicas becomes 0.
pub fn with_defaults(object: &Value) -> Value {
    let mut obj = object.clone();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return obj;
    };
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(s) = strategy.as_object_mut() {
        s.entry("type").or_insert(json!("Manual"));
    }
    let topology = spec.entry("topology").or_insert_with(|| json!({}));
    let Some(topology) = topology.as_object_mut() else {
        return obj;
    };
    let schedule = topology
        .entry("scheduleStrategy")
        .or_insert_with(|| json!({}));
    if let Some(s) = schedule.as_object_mut() {
        s.entry("type").or_insert(json!("Fixed"));
    }
    if let Some(subsets) = topology.get_mut("subsets").and_then(Value::as_array_mut) {
        let set = |s: &Value, key: &str| s.get(key).is_some_and(|v| !v.is_null());
        let min_max = subsets
            .iter()
            .any(|s| set(s, "minReplicas") || set(s, "maxReplicas"));
        let any_replicas = subsets.iter().any(|s| set(s, "replicas"));
        if min_max && !any_replicas {
            for s in subsets.iter_mut().filter_map(Value::as_object_mut) {
                if s.get("minReplicas").is_none_or(Value::is_null) {
                    s.insert("minReplicas".into(), json!(0));
                }
            }
        }
    }
    obj
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Validation (as upstream's `validateUnitedDeploymentV1beta1` and
/// `ValidateUnitedDeploymentUpdateV1beta1`), as field errors; `old` on UPDATE.
pub fn validate(ud: &UnitedDeployment, old: Option<&UnitedDeployment>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    errors.extend(admission::workload_name_errors(&ud.name_any()));
    let spec = &ud.spec;
    if let Some(r) = spec.replicas.filter(|r| *r < 0) {
        errors.push(invalid(
            "spec.replicas",
            r,
            "must be greater than or equal to 0",
        ));
    }
    errors.extend(template_errors(ud));
    errors.extend(subset_errors(ud));
    if let Some(old) = old {
        errors.extend(update_errors(ud, old));
    }
    errors
}

fn template_errors(ud: &UnitedDeployment) -> Vec<FieldError> {
    let spec = &ud.spec;
    let mut errors = Vec::new();
    match spec.template.template_count() {
        0 => {
            errors.push(invalid_template(keys::UD_MSG_NO_TEMPLATE));
            return errors;
        }
        1 => {}
        _ => {
            errors.push(invalid_template(keys::UD_MSG_MULTIPLE_TEMPLATES));
            return errors;
        }
    }
    let Some(kind) = WorkloadKind::of(&spec.template) else {
        errors.push(invalid_template(keys::UD_MSG_NO_TEMPLATE));
        return errors;
    };
    let template = serde_json::to_value(&spec.template).unwrap_or_default();
    let template = &template[kind.template_key()];
    let path = format!("spec.template.{}.spec", kind.template_key());
    let labels: Option<BTreeMap<String, String>> = template
        .pointer("/spec/template/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok());
    let mut selector_errors =
        admission::selector_errors(&spec.selector, labels.as_ref(), "UnitedDeployment");
    for e in &mut selector_errors {
        // The shared check names a workload's paths; the UD's template is one level down.
        let renamed = e.to_string().starts_with("spec.template.metadata.labels");
        if renamed {
            *e = invalid(
                format!("{path}.template.metadata.labels"),
                json!(labels).to_string(),
                keys::UD_MSG_SELECTOR_MISMATCH,
            );
        }
    }
    errors.extend(selector_errors);
    if let Some(r) = template.pointer("/spec/replicas").filter(|v| !v.is_null()) {
        errors.push(invalid(
            format!("{path}.replicas"),
            r,
            TEMPLATE_REPLICAS_UNUSED,
        ));
    }
    let partition_pointer = match kind {
        WorkloadKind::CloneSet => Some("/spec/updateStrategy/partition"),
        WorkloadKind::StatefulSet
        | WorkloadKind::AdvancedStatefulSet
        | WorkloadKind::CloneSetV1beta1 => Some("/spec/updateStrategy/rollingUpdate/partition"),
        WorkloadKind::Deployment => None,
    };
    if let Some((pointer, p)) = partition_pointer
        .and_then(|pointer| template.pointer(pointer).map(|p| (pointer, p)))
        .filter(|(_, v)| !v.is_null())
    {
        let field = pointer.replace('/', ".");
        errors.push(invalid(
            format!("spec.template.{}{field}", kind.template_key()),
            p,
            TEMPLATE_PARTITION_UNUSED,
        ));
    }
    if spec
        .topology
        .schedule_strategy
        .should_reserve_unschedulable_pods()
        && !matches!(
            kind,
            WorkloadKind::Deployment | WorkloadKind::CloneSet | WorkloadKind::CloneSetV1beta1
        )
    {
        errors.push(forbidden(
            "spec.topology.scheduleStrategy.adaptive.reserveUnschedulablePods",
            RESERVE_ONLY_STATELESS,
        ));
    }
    if kind == WorkloadKind::CloneSetV1beta1
        && let Some(spec) = template.get("spec")
    {
        errors.extend(v1beta1_cloneset_errors(spec, &path));
    }
    errors
}

/// A v1beta1-shaped CloneSet template: its strategy enums named as v1beta1 spells them
/// (openkruise/kruise v1.9.0 apis/apps/v1beta1/cloneset_types.go), then the whole spec
/// read as a v1beta1 CloneSetSpec. Decoding the UnitedDeployment only read it as the
/// v1alpha1 CloneSetSpec it converts to, which maps an unknown `podUpdatePolicy` to
/// `ReCreate` and takes any `enablePVCReuse` that is not `true` for false.
fn v1beta1_cloneset_errors(spec: &Value, path: &str) -> Vec<FieldError> {
    const TYPES: [&str; 2] = ["OnDelete", "RollingUpdate"];
    const POLICIES: [&str; 3] = ["InPlaceIfPossible", "InPlaceOnly", "ReCreate"];
    let supported = |values: &[&str]| {
        let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    let mut errors = Vec::new();
    for (pointer, field, values) in [
        ("/updateStrategy/type", "updateStrategy.type", &TYPES[..]),
        (
            "/updateStrategy/rollingUpdate/podUpdatePolicy",
            "updateStrategy.rollingUpdate.podUpdatePolicy",
            &POLICIES[..],
        ),
    ] {
        if let Some(v) = spec.pointer(pointer).filter(|v| !v.is_null())
            && !v.as_str().is_some_and(|s| values.contains(&s))
        {
            errors.push(not_supported(
                format!("{path}.{field}"),
                v,
                supported(values),
            ));
        }
    }
    if errors.is_empty() {
        let mut typed = spec.clone();
        if let Some(map) = typed.as_object_mut() {
            // The controller sets the selector; the pod template is checked elsewhere.
            for key in ["selector", "template"] {
                map.entry(key).or_insert_with(|| json!({}));
            }
        }
        if let Err(e) =
            serde_json::from_value::<kruise_api::apps_v1beta1::cloneset::CloneSetSpec>(typed)
        {
            errors.push(invalid_detail(
                path,
                format!("not a v1beta1 CloneSetSpec: {e}"),
            ));
        }
    }
    errors
}

fn invalid_template(message: &str) -> FieldError {
    invalid("spec.template", "{}", message)
}

fn subset_errors(ud: &UnitedDeployment) -> Vec<FieldError> {
    let spec = &ud.spec;
    let subsets = &spec.topology.subsets;
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, s) in subsets.iter().enumerate() {
        let path = format!("spec.topology.subsets[{i}]");
        if !is_dns_label(&s.name) {
            errors.push(invalid(
                format!("{path}.name"),
                &s.name,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            ));
        } else if !names.insert(s.name.as_str()) {
            errors.push(invalid(
                format!("{path}.name"),
                &s.name,
                format!("{}{}", keys::MSG_DUPLICATED_SUBSET_NAME, s.name),
            ));
        }
        if s.replicas.is_some() && (s.min_replicas.is_some() || s.max_replicas.is_some()) {
            errors.push(invalid(
                format!("{path}.replicas"),
                int_or_string(s.replicas.as_ref()),
                keys::UD_MSG_REPLICAS_MIN_MAX_EXCLUSIVE,
            ));
        }
        if s.replicas.is_some() && spec.topology.schedule_strategy.is_adaptive() {
            errors.push(forbidden(
                format!("{path}.replicas"),
                ADAPTIVE_FORBIDS_REPLICAS,
            ));
        }
        for (field, value) in [
            ("replicas", &s.replicas),
            ("minReplicas", &s.min_replicas),
            ("maxReplicas", &s.max_replicas),
        ] {
            if let Some(v) = value
                && let Err(e) = parse_subset_replicas(Some(spec.replicas.unwrap_or(0)), v)
            {
                errors.push(invalid(
                    format!("{path}.{field}"),
                    int_or_string(Some(v)),
                    e.to_string(),
                ));
            }
        }
        if let (Some(min), Some(max)) = (&s.min_replicas, &s.max_replicas) {
            let total = Some(spec.replicas.unwrap_or(0));
            if let (Ok(min), Ok(max)) = (
                parse_subset_replicas(total, min),
                parse_subset_replicas(total, max),
            ) && min > max
            {
                errors.push(invalid(
                    format!("{path}.maxReplicas"),
                    max,
                    AllocationError::MinAboveMax(i).to_string(),
                ));
            }
        }
    }
    if let Some(partitions) = spec
        .update_strategy
        .manual_update
        .as_ref()
        .map(|m| &m.partitions)
    {
        for (name, p) in partitions {
            if !subsets.iter().any(|s| &s.name == name) {
                errors.push(invalid(
                    "spec.updateStrategy.manualUpdate.partitions",
                    name,
                    format!("subset {name} does not exist"),
                ));
            }
            if *p < 0 {
                errors.push(invalid(
                    format!("spec.updateStrategy.manualUpdate.partitions[{name}]"),
                    p,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    if !errors.is_empty() {
        return errors;
    }
    if crate::plan::allocation::uses_min_max(spec) {
        if spec.replicas.is_none() {
            errors.push(required("spec.replicas", MIN_MAX_NEEDS_REPLICAS));
        }
        if !subsets.is_empty() && subsets.iter().all(|s| s.max_replicas.is_some()) {
            errors.push(invalid_detail_at("spec.topology.subsets", ONE_MAX_EMPTY));
        }
    } else if let Err(e) = crate::plan::allocation::allocate(spec, &BTreeMap::new()) {
        errors.push(invalid_detail_at("spec.topology.subsets", &e.to_string()));
    }
    errors
}

fn invalid_detail_at(path: &str, detail: &str) -> FieldError {
    kruise_runtime::webhook::field::invalid_detail(path, detail)
}

fn int_or_string(v: Option<&IntOrString>) -> String {
    match v {
        Some(IntOrString::Int(n)) => n.to_string(),
        Some(IntOrString::String(s)) => format!("{s:?}"),
        None => "null".into(),
    }
}

fn update_errors(ud: &UnitedDeployment, old: &UnitedDeployment) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, s) in ud.spec.topology.subsets.iter().enumerate() {
        let Some(before) = old.spec.topology.subsets.iter().find(|o| o.name == s.name) else {
            continue;
        };
        let path = format!("spec.topology.subsets[{i}]");
        if s.node_selector_term != before.node_selector_term {
            errors.push(forbidden(
                format!("{path}.nodeSelectorTerm"),
                NODE_SELECTOR_IMMUTABLE,
            ));
        }
        if s.tolerations != before.tolerations {
            errors.push(forbidden(
                format!("{path}.tolerations"),
                NODE_SELECTOR_IMMUTABLE,
            ));
        }
    }
    let frozen = |t: &Value| {
        let mut t = t.get("spec").cloned().unwrap_or_default();
        if let Some(m) = t.as_object_mut() {
            m.remove("template");
            m.remove("updateStrategy");
        }
        t
    };
    let (new, before) = (
        serde_json::to_value(&ud.spec.template).unwrap_or_default(),
        serde_json::to_value(&old.spec.template).unwrap_or_default(),
    );
    for key in ["statefulSetTemplate", "advancedStatefulSetTemplate"] {
        if let (Some(n), Some(b)) = (new.get(key), before.get(key))
            && frozen(n) != frozen(b)
        {
            errors.push(forbidden(
                format!("spec.template.{key}"),
                STATEFULSET_TEMPLATE_UPDATE.replace("statefulSetTemplate", key),
            ));
        }
    }
    errors
}

/// The webhook routes: defaulting, and validation. Deletion protection of a UnitedDeployment
/// is protection-ctl's (one implementation for every kind).
pub fn routes() -> Vec<Route> {
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-uniteddeployment",
        defaulting(|object, _old| with_defaults(object)),
    );
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-uniteddeployment",
        validating(|object, old| {
            let decode = |v: &Value| {
                <UnitedDeployment as serde::Deserialize>::deserialize(v).map_err(|e| e.to_string())
            };
            let old = old.map(decode).transpose()?;
            Ok(validate(&decode(object)?, old.as_ref()))
        }),
    );
    vec![mutate, validate_route, conversion_route()]
}

/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::UNITEDDEPLOYMENT;

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-uniteddeployment",
        "uniteddeployments.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_uniteddeployment),
    )
}

/// The configurations, named for the scope: cluster-wide, or one namespace.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    config::KindAdmission {
        kind: "uniteddeployment",
        plural: "uniteddeployments",
        versions: &["v1alpha1"],
        validate: (VALIDATE_PATH, &["CREATE", "UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE", "UPDATE"]),
    }
    .configurations(watch_namespace)
}

#[cfg(test)]
mod tests;
