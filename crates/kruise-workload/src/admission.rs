//! What the workload admission webhooks (CloneSet, Advanced StatefulSet) share: deletion
//! protection, `priorityStrategy` validation and object-name syntax.

use std::collections::BTreeMap;

use kruise_api::appspub::UpdatePriorityStrategy;
use kruise_api::keys;
use kruise_runtime::webhook::field::{FieldError, invalid, required};

/// Deletion protection (gate `ResourcesDeletionProtection`) of a workload with `labels`
/// and `replicas`: `policy.kruise.io/delete-protection=Always` always refuses,
/// `Cascading` while `replicas > 0`. The message to answer with (HTTP 403), if refused.
pub fn deletion_denied_for(labels: &BTreeMap<String, String>, replicas: i32) -> Option<String> {
    let label = labels.get(keys::DELETION_PROTECTION)?;
    match label.as_str() {
        keys::DELETION_PROTECTION_ALWAYS => Some(keys::DELETION_PROTECTION_MSG_ALWAYS.to_string()),
        keys::DELETION_PROTECTION_CASCADING => (replicas > 0).then(|| {
            format!(
                "{}replicas {replicas}>0",
                keys::DELETION_PROTECTION_MSG_CASCADING_PREFIX
            )
        }),
        _ => None,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use kruise_api::appspub::{UpdatePriorityOrderTerm, UpdatePriorityWeightTerm};

    fn labels(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(keys::DELETION_PROTECTION.to_string(), value.to_string())])
    }

    #[test]
    fn deletion_protection_always_and_cascading() {
        assert_eq!(deletion_denied_for(&BTreeMap::new(), 3), None);
        assert_eq!(
            deletion_denied_for(&labels("Always"), 0).unwrap(),
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always"
        );
        assert_eq!(
            deletion_denied_for(&labels("Cascading"), 2).unwrap(),
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and replicas 2>0"
        );
        assert_eq!(deletion_denied_for(&labels("Cascading"), 0), None);
        assert_eq!(deletion_denied_for(&labels("Sometimes"), 5), None);
    }

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
