//! CloneSet validation (the validating webhook).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{CloneSet, CloneSetUpdateStrategyType};
use kruise_api::appspub::InPlaceUpdateStrategy;
use kruise_api::intstr::{self, Rounding};
use kruise_api::pod::Pod;
use kruise_runtime::Cache;
use kruise_runtime::webhook::HandlerError;
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, required};
use kruise_workload::admission;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

/// What validation needs to know about existing Pods (for `podsToDelete`).
pub trait PodLookup {
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
}

/// Pods by name, in the CloneSet's namespace.
impl PodLookup for BTreeMap<String, Arc<Pod>> {
    fn pod(&self, _namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.get(name).cloned()
    }
}

/// The Pods [`validate`] looks up: those `podsToDelete` names and `old` did not, read
/// from the cache, or from the API server while the cache is still listing (`/readyz`
/// does not wait for it: [`kruise_runtime::Readiness::only_controller_waits_for`]).
pub(super) async fn pods_to_delete(
    cache: &Cache<Pod>,
    client: Option<&kube::Client>,
    cs: &CloneSet,
    old: Option<&CloneSet>,
) -> Result<BTreeMap<String, Arc<Pod>>, HandlerError> {
    let ns = cs.namespace().unwrap_or_default();
    let named_before: BTreeSet<&String> = old
        .map(|o| o.spec.scale_strategy.pods_to_delete.iter().collect())
        .unwrap_or_default();
    let mut found = BTreeMap::new();
    for name in &cs.spec.scale_strategy.pods_to_delete {
        if named_before.contains(name) || found.contains_key(name) {
            continue;
        }
        let pod = match client {
            Some(client) => cache
                .get_or_fetch(client, &ns, name)
                .await
                .map_err(|e| HandlerError::Internal(format!("get pod {ns}/{name}: {e}")))?,
            None => cache.store().get(&ObjectRef::new(name).within(&ns)),
        };
        if let Some(pod) = pod {
            found.insert(name.clone(), pod);
        }
    }
    Ok(found)
}

/// Upstream's CloneSet validation (`ValidateCloneSetV1beta1` and `ValidateCloneSetUpdateV1beta1` in
/// openkruise/kruise v1.9.0 pkg/webhook/cloneset/validating/validation.go). `raw_old`/`raw_new` are
/// the objects as JSON (the InPlaceOnly diff needs every field of the template, including those our
/// types do not model).
pub fn validate(
    cs: &CloneSet,
    old: Option<&CloneSet>,
    raw_new: &Value,
    raw_old: Option<&Value>,
    pods: &dyn PodLookup,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &cs.spec;
    let replicas = spec.replicas.unwrap_or(1);

    // 1. Name and replicas.
    let name = cs.name_any();
    if !admission::is_dns_subdomain(&name) {
        errors.push(invalid("metadata.name", &name, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"));
    }
    if replicas < 0 {
        errors.push(invalid(
            "spec.replicas",
            replicas,
            "must be greater than or equal to 0",
        ));
    }

    // 2. Selector.
    validate_selector(&spec.selector, spec.template.metadata.as_ref(), &mut errors);

    // 3. Template.
    validate_template(
        raw_new.pointer("/spec/template").unwrap_or(&Value::Null),
        &mut errors,
    );

    // 5–7. Strategy values.
    let strategy = &spec.update_strategy;
    let strategy_type = strategy.strategy_type();
    let parsed = |field: &str,
                  value: Option<&IntOrString>,
                  errors: &mut Vec<FieldError>|
     -> Option<IntOrString> {
        let value = value?;
        match intstr::validate(value) {
            Ok(()) => Some(value.clone()),
            Err(e) => {
                errors.push(invalid(
                    format!("spec.updateStrategy.{field}"),
                    show(value),
                    format!("failed GetScaledValueFromIntOrPercent for {field}: {e}"),
                ));
                None
            }
        }
    };
    if let Some(p) = parsed("partition", strategy.partition.as_ref(), &mut errors)
        && intstr::scaled_value(&p, replicas, Rounding::Up).unwrap_or(0) < 0
    {
        errors.push(invalid(
            "spec.updateStrategy.partition",
            show(&p),
            "must be greater than or equal to 0",
        ));
    }
    let max_unavailable = parsed(
        "maxUnavailable",
        strategy.max_unavailable.as_ref(),
        &mut errors,
    );
    let max_surge = parsed("maxSurge", strategy.max_surge.as_ref(), &mut errors);
    if let Some(v) = &spec.scale_strategy.max_unavailable
        && let Err(e) = intstr::validate(v)
    {
        errors.push(invalid(
            "spec.scaleStrategy.maxUnavailable",
            show(v),
            format!("failed GetScaledValueFromIntOrPercent for maxUnavailable: {e}"),
        ));
    }
    let surge = max_surge
        .as_ref()
        .map(|s| intstr::scaled_value(s, replicas, Rounding::Up).unwrap_or(0))
        .unwrap_or(0);
    if let Some(set) = strategy.max_surge.as_ref().filter(|_| surge > 0)
        && strategy_type == CloneSetUpdateStrategyType::InPlaceOnly
    {
        errors.push(invalid(
            "spec.updateStrategy.maxSurge",
            show(set),
            "can not use maxSurge with strategy type InPlaceOnly",
        ));
    }
    if replicas > 0 {
        let unavailable = max_unavailable
            .as_ref()
            .map(|u| intstr::scaled_value(u, replicas, Rounding::Up).unwrap_or(0))
            .unwrap_or_else(|| {
                intstr::scaled_value(&IntOrString::String("20%".into()), replicas, Rounding::Up)
                    .unwrap_or(1)
            });
        if unavailable < 1 && surge < 1 {
            errors.push(invalid(
                "spec.updateStrategy.maxUnavailable",
                max_unavailable
                    .as_ref()
                    .map(show)
                    .unwrap_or_else(|| "20%".into()),
                "maxUnavailable and maxSurge should not both be less than 1",
            ));
        }
    }

    if let Some(in_place) = &strategy.in_place_update_strategy {
        errors.extend(pre_download_errors(in_place));
    }

    // 8. Priority and scatter.
    if let Some(priority) = &strategy.priority_strategy {
        errors.extend(admission::priority_strategy_errors(
            priority,
            "spec.updateStrategy.priorityStrategy",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, term) in strategy.scatter_strategy.iter().enumerate() {
        let path = format!("spec.updateStrategy.scatterStrategy[{i}]");
        if term.key.is_empty() {
            errors.push(required(format!("{path}.key"), "key can not be empty"));
        }
        if !seen.insert((term.key.clone(), term.value.clone())) {
            errors.push(invalid(
                &path,
                format!("{}={}", term.key, term.value),
                "duplicated key=value",
            ));
        }
    }

    // 9. podsToDelete.
    let mut names = BTreeSet::new();
    let previously: BTreeSet<&String> = old
        .map(|o| o.spec.scale_strategy.pods_to_delete.iter().collect())
        .unwrap_or_default();
    let ns = cs.namespace().unwrap_or_default();
    for (i, pod_name) in spec.scale_strategy.pods_to_delete.iter().enumerate() {
        let path = format!("spec.scaleStrategy.podsToDelete[{i}]");
        if !names.insert(pod_name) {
            errors.push(invalid(&path, pod_name, "duplicated"));
            continue;
        }
        if previously.contains(pod_name) {
            continue;
        }
        match pods.pod(&ns, pod_name) {
            None => errors.push(invalid(
                &path,
                pod_name,
                format!("find pod {pod_name} failed"),
            )),
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => errors.push(invalid(
                &path,
                pod_name,
                format!("pod {pod_name} already terminating"),
            )),
            Some(pod) => {
                let owned = pod.owner_references().iter().any(|o| {
                    o.controller == Some(true) && Some(&o.uid) == cs.metadata.uid.as_ref()
                });
                if !owned {
                    errors.push(invalid(
                        &path,
                        pod_name,
                        format!("pod {pod_name} owner is not this CloneSet"),
                    ));
                }
            }
        }
    }

    // 10. progressDeadlineSeconds.
    if let Some(d) = spec.progress_deadline_seconds {
        if d < 0 {
            errors.push(invalid(
                "spec.progressDeadlineSeconds",
                d,
                "must be greater than or equal to 0",
            ));
        } else if d != i32::MAX && d <= spec.min_ready_seconds {
            errors.push(invalid(
                "spec.progressDeadlineSeconds",
                d,
                "must be greater than minReadySeconds",
            ));
        }
    }

    // 11. Updates.
    if let (Some(old), Some(raw_old)) = (old, raw_old) {
        if old.spec.selector != spec.selector {
            errors.push(forbidden(
                "spec",
                "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden",
            ));
        }
        if strategy_type == CloneSetUpdateStrategyType::InPlaceOnly {
            let old_spec = raw_old
                .pointer("/spec/template/spec")
                .cloned()
                .unwrap_or(Value::Null);
            let new_spec = raw_new
                .pointer("/spec/template/spec")
                .cloned()
                .unwrap_or(Value::Null);
            if let Some(v) = kruise_inplace::in_place_only_violation(&old_spec, &new_spec) {
                errors.push(forbidden("spec.template.spec", v.to_string()));
            }
        }
    }
    errors
}

/// The image pre-download fields as upstream's webhook checks them (v1.9.0
/// pkg/webhook/cloneset/validating/validation.go): parallelism a whole number (no
/// percent), none of them negative.
fn pre_download_errors(in_place: &InPlaceUpdateStrategy) -> Vec<FieldError> {
    let path = |field: &str| format!("spec.updateStrategy.inPlaceUpdateStrategy.{field}");
    let mut errors = Vec::new();
    if let Some(p) = &in_place.image_pre_download_parallelism {
        let value = match p {
            IntOrString::Int(n) => Ok(i64::from(*n)),
            IntOrString::String(s) if s.ends_with('%') => {
                Err("imagePreDownloadParallelism does not support percentage value".to_string())
            }
            IntOrString::String(s) => s
                .parse::<i32>()
                .map(i64::from)
                .map_err(|e| format!("imagePreDownloadParallelism must be a valid integer: {e}")),
        };
        let problem = match value {
            Ok(n) if n < 0 => Some("imagePreDownloadParallelism must be non-negative".to_string()),
            Ok(_) => None,
            Err(e) => Some(e),
        };
        if let Some(detail) = problem {
            errors.push(invalid(
                path("imagePreDownloadParallelism"),
                show(p),
                detail,
            ));
        }
    }
    for (field, value) in [
        (
            "imagePreDownloadTimeoutSeconds",
            in_place.image_pre_download_timeout_seconds,
        ),
        (
            "imagePreDownloadMinUpdatedReadyPods",
            in_place.image_pre_download_min_updated_ready_pods,
        ),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errors.push(invalid(
                path(field),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    errors
}

fn show(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => format!("\"{s}\""),
    }
}

fn validate_selector(
    selector: &LabelSelector,
    template: Option<&ObjectMeta>,
    errors: &mut Vec<FieldError>,
) {
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|m| m.is_empty());
    if empty {
        errors.push(invalid(
            "spec.selector",
            "{}",
            "empty selector is invalid for cloneset",
        ));
        return;
    }
    let labels = template.and_then(|m| m.labels.clone()).unwrap_or_default();
    match kruise_ordering::selector::matches(selector, &labels) {
        Err(e) => errors.push(invalid(
            "spec.selector",
            "",
            format!("invalid label selector: {e:?}"),
        )),
        Ok(false) => errors.push(invalid(
            "spec.template.metadata.labels",
            format!("{labels:?}"),
            "`selector` does not match template `labels`",
        )),
        Ok(true) => {}
    }
}

/// The part of Pod template validation a CloneSet adds or that would break the controller.
fn validate_template(template: &Value, errors: &mut Vec<FieldError>) {
    let containers = template
        .pointer("/spec/containers")
        .and_then(Value::as_array);
    match containers {
        None => errors.push(required(
            "spec.template.spec.containers",
            "must have at least one container",
        )),
        Some(list) if list.is_empty() => errors.push(required(
            "spec.template.spec.containers",
            "must have at least one container",
        )),
        Some(list) => {
            let mut names = BTreeSet::new();
            for (i, c) in list.iter().enumerate() {
                match c.get("name").and_then(Value::as_str) {
                    None | Some("") => errors.push(required(
                        format!("spec.template.spec.containers[{i}].name"),
                        "name is required",
                    )),
                    Some(n) if !names.insert(n.to_string()) => errors.push(invalid(
                        format!("spec.template.spec.containers[{i}].name"),
                        format!("\"{n}\""),
                        "Duplicate value",
                    )),
                    _ => {}
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errors.push(required(
                        format!("spec.template.spec.containers[{i}].image"),
                        "image is required",
                    ));
                }
            }
        }
    }
    errors.extend(admission::long_running_template_errors(
        template, "cloneset",
    ));
}
