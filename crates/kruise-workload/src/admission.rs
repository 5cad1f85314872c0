//! What the workload admission webhooks (CloneSet, Advanced StatefulSet, Advanced
//! DaemonSet, the job kinds) share: `priorityStrategy` validation, object-name syntax,
//! selectors, job Pod templates. (Deletion protection is `protection-ctl`'s.)

use std::collections::BTreeMap;

use kruise_api::appspub::UpdatePriorityStrategy;
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, not_supported, required};

/// The errors of an update `priorityStrategy` found at `path` (e.g.
/// `spec.updateStrategy.priorityStrategy`): weight and order terms are exclusive,
/// weights are 0–100 with a non-empty, usable selector, order keys are non-empty.
pub fn priority_strategy_errors(priority: &UpdatePriorityStrategy, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !priority.weight_priority.is_empty() && !priority.order_priority.is_empty() {
        errors.push(invalid(
            path,
            "",
            "only one of weightPriority and orderPriority can be used",
        ));
    }
    for (i, w) in priority.weight_priority.iter().enumerate() {
        let term = format!("{path}.weightPriority[{i}]");
        if !(0..=100).contains(&w.weight) {
            errors.push(invalid(
                format!("{term}.weight"),
                w.weight,
                "weight must be valid number in the range 1-100",
            ));
        }
        let empty = w
            .match_selector
            .match_labels
            .as_ref()
            .is_none_or(|m| m.is_empty())
            && w.match_selector
                .match_expressions
                .as_ref()
                .is_none_or(|m| m.is_empty());
        if empty {
            errors.push(required(
                format!("{term}.matchSelector"),
                "selector can not be empty",
            ));
        } else if let Err(e) =
            kruise_ordering::selector::matches(&w.match_selector, &BTreeMap::new())
        {
            errors.push(invalid(
                format!("{term}.matchSelector"),
                "",
                format!("invalid selector {e:?}"),
            ));
        }
    }
    for (i, o) in priority.order_priority.iter().enumerate() {
        if o.ordered_key.is_empty() {
            errors.push(required(
                format!("{path}.orderPriority[{i}].orderedKey"),
                "order key can not be empty",
            ));
        }
    }
    errors
}

/// Whether `name` is a lowercase RFC 1123 subdomain (what most object names must be).
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && part.as_bytes()[0].is_ascii_alphanumeric()
                && part.as_bytes()[part.len() - 1].is_ascii_alphanumeric()
        })
}

/// The name rules of the job kinds (BroadcastJob, AdvancedCronJob): `^[a-zA-Z0-9-]+$`
/// (`<kind> name must consist of alphanumeric characters or '-'`), at most 63
/// characters.
pub fn job_name_errors(name: &str, kind: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        errors.push(invalid(
            "metadata.name",
            format!("{name:?}"),
            format!("{kind} name must consist of alphanumeric characters or '-'"),
        ));
    }
    if name.len() > 63 {
        errors.push(invalid(
            "metadata.name",
            format!("{name:?}"),
            "must be no more than 63 characters",
        ));
    }
    errors
}

/// The basic Kubernetes checks of a job's Pod template (JSON) found at `path` (e.g.
/// `spec.template`): at least one container, each with a name and an image, and
/// `restartPolicy` Never or OnFailure (`restart_message` words the refusal, as each
/// controller's upstream does). A sketch of `ValidatePodTemplateSpec`, not all of it.
pub fn job_template_errors(
    template: &serde_json::Value,
    path: &str,
    restart_message: &str,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = template.get("spec");
    match spec
        .and_then(|s| s.get("restartPolicy"))
        .and_then(serde_json::Value::as_str)
    {
        Some("Never" | "OnFailure") => {}
        other => errors.push(invalid(
            format!("{path}.spec.restartPolicy"),
            format!("{:?}", other.unwrap_or_default()),
            restart_message,
        )),
    }
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(serde_json::Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if containers.is_empty() {
        errors.push(required(format!("{path}.spec.containers"), ""));
    }
    for (i, c) in containers.iter().enumerate() {
        for field in ["name", "image"] {
            if c.get(field)
                .and_then(serde_json::Value::as_str)
                .is_none_or(str::is_empty)
            {
                errors.push(required(format!("{path}.spec.containers[{i}].{field}"), ""));
            }
        }
    }
    errors
}

/// The rules a long-running workload (CloneSet, Advanced StatefulSet, Advanced DaemonSet)
/// adds to its Pod template (JSON, at `spec.template`): `restartPolicy` empty or `Always`, and
/// no `activeDeadlineSeconds` (`kind` words the refusal as each upstream webhook does, e.g.
/// "activeDeadlineSeconds in cloneset is not Supported": openkruise/kruise v1.9.0
/// pkg/webhook/cloneset/validating/cloneset_validation.go, statefulset and daemonset alike).
pub fn long_running_template_errors(template: &serde_json::Value, kind: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(policy) = template
        .pointer("/spec/restartPolicy")
        .and_then(serde_json::Value::as_str)
        && !policy.is_empty()
        && policy != "Always"
    {
        errors.push(not_supported(
            "spec.template.spec.restartPolicy",
            serde_json::Value::from(policy).to_string(),
            "supported values: \"Always\"",
        ));
    }
    if template
        .pointer("/spec/activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        errors.push(forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
    errors
}

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The name of a workload (Advanced StatefulSet, Advanced DaemonSet): required, a DNS
/// subdomain of at most 253 characters, with the apiserver's messages.
pub fn workload_name_errors(name: &str) -> Vec<FieldError> {
    let quoted = serde_json::Value::from(name).to_string();
    if name.is_empty() {
        vec![required(
            "metadata.name",
            "name or generateName is required",
        )]
    } else if name.len() > 253 {
        vec![invalid(
            "metadata.name",
            quoted,
            "must be no more than 253 characters",
        )]
    } else if !is_dns_subdomain(name) {
        vec![invalid("metadata.name", quoted, DNS1123_SUBDOMAIN)]
    } else {
        Vec::new()
    }
}

/// A workload's selector (at `spec.selector`): non-empty (`empty selector is invalid for
/// <kind>`), well-formed, and matching the template's `labels`.
pub fn selector_errors(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    template_labels: Option<&BTreeMap<String, String>>,
    kind: &str,
) -> Vec<FieldError> {
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    if selector.match_labels.as_ref().is_none_or(|m| m.is_empty()) && expressions.is_empty() {
        return vec![invalid(
            "spec.selector",
            json(selector),
            format!("empty selector is invalid for {kind}"),
        )];
    }
    let errors = selector_expression_errors(selector, "spec.selector");
    if !errors.is_empty() {
        return errors;
    }
    let empty = BTreeMap::new();
    if kruise_ordering::selector::matches(selector, template_labels.unwrap_or(&empty)) == Ok(false)
    {
        return vec![invalid(
            "spec.template.metadata.labels",
            template_labels.map_or_else(|| "null".to_string(), json),
            "`selector` does not match template `labels`",
        )];
    }
    Vec::new()
}

/// The `matchExpressions` of a label selector at `path`: operators and values.
pub fn selector_expression_errors(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    path: &str,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let path = format!("{path}.matchExpressions[{i}]");
        let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
        match e.operator.as_str() {
            "In" | "NotIn" if !has_values => errors.push(required(
                format!("{path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if has_values => errors.push(forbidden(
                format!("{path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(invalid(
                format!("{path}.operator"),
                serde_json::Value::from(other).to_string(),
                "not a valid selector operator",
            )),
        }
    }
    errors
}

/// A value as JSON, as field errors show it.
fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use kruise_api::appspub::{UpdatePriorityOrderTerm, UpdatePriorityWeightTerm};

    #[test]
    fn priority_strategy_rules() {
        let p = UpdatePriorityStrategy {
            weight_priority: vec![
                UpdatePriorityWeightTerm {
                    weight: 101,
                    match_selector: LabelSelector {
                        match_labels: Some(BTreeMap::from([("a".into(), "b".into())])),
                        ..Default::default()
                    },
                },
                UpdatePriorityWeightTerm {
                    weight: 1,
                    match_selector: LabelSelector::default(),
                },
                UpdatePriorityWeightTerm {
                    weight: 1,
                    match_selector: LabelSelector {
                        match_expressions: Some(vec![LabelSelectorRequirement {
                            key: "a".into(),
                            operator: "Near".into(),
                            values: None,
                        }]),
                        ..Default::default()
                    },
                },
            ],
            order_priority: vec![UpdatePriorityOrderTerm {
                ordered_key: String::new(),
            }],
        };
        let errs: Vec<String> = priority_strategy_errors(&p, "spec.x")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.x: Invalid value: : only one of weightPriority and orderPriority can be used",
                "spec.x.weightPriority[0].weight: Invalid value: 101: weight must be valid number in the range 1-100",
                "spec.x.weightPriority[1].matchSelector: Required value: selector can not be empty",
                "spec.x.weightPriority[2].matchSelector: Invalid value: : invalid selector UnknownOperator(\"Near\")",
                "spec.x.orderPriority[0].orderedKey: Required value: order key can not be empty",
            ]
        );
    }

    #[test]
    fn dns_subdomains() {
        assert!(is_dns_subdomain("web"));
        assert!(is_dns_subdomain("web.v1-2"));
        for bad in ["", "Web", "-web", "web-", "a..b", "a_b"] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
        assert!(!is_dns_subdomain(&"a".repeat(254)));
    }
}
