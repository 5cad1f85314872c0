//! PUB validation (openkruise/kruise v1.9.0 pkg/webhook/podunavailablebudget/validating/pub_create_update_handler.go). Pure: the webhook passes the object, the old object on
//! update and the other PUBs of the namespace.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::intstr::{self, Amount};
use kruise_api::keys;
use kruise_api::policy_v1alpha1::{PodUnavailableBudget, PubOperation};
use kruise_runtime::webhook::field::{self, FieldError};

use crate::matching::{self, WorkloadRef};

/// The denial when both PUB gates are off: PUBs would protect nothing.
pub const GATES_OFF_MSG: &str = "feature PodUnavailableBudget is invalid, please open via feature-gate(PodUnavailableBudgetDeleteGate, PodUnavailableBudgetUpdateGate)";

/// Every problem with `pub_` (empty: valid).
pub fn validate(
    pub_: &PodUnavailableBudget,
    old: Option<&PodUnavailableBudget>,
    others: &[PodUnavailableBudget],
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &pub_.spec;
    match (&spec.selector, &spec.target_ref) {
        (None, None) => errors.push(field::invalid_detail("spec", keys::PUB_MSG_NO_SELECTOR)),
        (Some(_), Some(_)) => errors.push(field::invalid_detail(
            "spec",
            keys::PUB_MSG_SELECTOR_AND_TARGET_REF,
        )),
        (None, Some(target)) => {
            if target.api_version.is_empty() || target.kind.is_empty() || target.name.is_empty() {
                errors.push(field::invalid_detail(
                    "spec.targetRef",
                    keys::PUB_MSG_EMPTY_TARGET_REF,
                ));
            } else if matching::group_of(&target.api_version).is_none() {
                errors.push(field::invalid(
                    "spec.targetRef.apiVersion",
                    &target.api_version,
                    "must be <group>/<version> or <version>",
                ));
            }
        }
        (Some(selector), None) => {
            let invalid =
                kruise_ordering::selector::matches(selector, &Default::default()).is_err();
            if invalid || matching::is_empty_selector(selector) {
                errors.push(field::invalid_detail(
                    "spec.selector",
                    keys::PUB_MSG_EMPTY_SELECTOR,
                ));
            }
        }
    }
    match (&spec.max_unavailable, &spec.min_available) {
        (None, None) => errors.push(field::invalid_detail("spec", keys::PUB_MSG_NO_BUDGET)),
        (Some(_), Some(_)) => errors.push(field::invalid_detail(
            "spec",
            keys::PUB_MSG_BUDGET_EXCLUSIVE,
        )),
        (Some(v), None) => errors.extend(budget_value("spec.maxUnavailable", v)),
        (None, Some(v)) => errors.extend(budget_value("spec.minAvailable", v)),
    }
    errors.extend(annotations(pub_));
    if let Some(old) = old
        && (old.spec.selector != spec.selector || old.spec.target_ref != spec.target_ref)
    {
        errors.push(field::forbidden("spec", keys::PUB_MSG_IMMUTABLE));
    }
    errors.extend(conflicts(pub_, others));
    errors
}

/// Non-negative, and a percentage at most 100%.
fn budget_value(path: &str, value: &IntOrString) -> Option<FieldError> {
    let shown = match value {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    match Amount::parse(value) {
        Err(_) => Some(field::invalid(
            path,
            shown,
            "must be an integer or percentage (e.g '5%')",
        )),
        Ok(Amount::Absolute(n)) if n < 0 => Some(field::invalid(
            path,
            shown,
            "must be greater than or equal to 0",
        )),
        Ok(Amount::Percent(p)) if p < 0.0 => Some(field::invalid(
            path,
            shown,
            "must be greater than or equal to 0",
        )),
        Ok(Amount::Percent(p)) if p > 100.0 => {
            Some(field::invalid(path, shown, "must not be greater than 100%"))
        }
        Ok(_) => intstr::validate(value)
            .err()
            .map(|_| field::invalid(path, "", "must be an integer or percentage (e.g '5%')")),
    }
}

fn annotations(pub_: &PodUnavailableBudget) -> Vec<FieldError> {
    let Some(annotations) = &pub_.metadata.annotations else {
        return Vec::new();
    };
    let invalid = |key: &str| {
        field::invalid_detail(
            format!("metadata.annotations[{key}]"),
            format!("annotation[{key}] is invalid"),
        )
    };
    let mut errors = Vec::new();
    if let Some(v) = annotations.get(keys::PUB_PROTECT_OPERATIONS)
        && PubOperation::parse_list(v).is_none()
    {
        errors.push(invalid(keys::PUB_PROTECT_OPERATIONS));
    }
    if let Some(v) = annotations.get(keys::PUB_PROTECT_TOTAL_REPLICAS)
        && !v.parse::<i32>().is_ok_and(|n| n >= 0)
    {
        errors.push(invalid(keys::PUB_PROTECT_TOTAL_REPLICAS));
    }
    errors
}

/// Another PUB of the namespace targeting the same workload, or with a selector that
/// may select the same Pods.
fn conflicts(pub_: &PodUnavailableBudget, others: &[PodUnavailableBudget]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for other in others {
        if other.metadata.name == pub_.metadata.name
            || other.metadata.namespace != pub_.metadata.namespace
        {
            continue;
        }
        let other_name = other.metadata.name.as_deref().unwrap_or_default();
        let same_target = match (&pub_.spec.target_ref, &other.spec.target_ref) {
            (Some(a), Some(b)) => {
                let (a, b) = (WorkloadRef::of_target(a), WorkloadRef::of_target(b));
                a.is_some() && a == b
            }
            _ => false,
        };
        if same_target {
            errors.push(field::invalid_detail(
                "spec.targetRef",
                format!("{}{other_name}", keys::PUB_MSG_TARGET_REF_CONFLICT),
            ));
        }
        if let (Some(a), Some(b)) = (&pub_.spec.selector, &other.spec.selector)
            && kruise_runtime::selector::loosely_overlapping(a, b)
        {
            errors.push(field::invalid_detail(
                "spec.selector",
                format!("{}{other_name}", keys::PUB_MSG_SELECTOR_CONFLICT),
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse(yaml: &str) -> PodUnavailableBudget {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn messages(errors: &[FieldError]) -> String {
        field::aggregate(errors)
    }

    const TARGET: &str = r#"
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: {name: web-pub, namespace: ns}
spec:
  targetRef: {apiVersion: apps.kruise.io/v1alpha1, kind: CloneSet, name: web}
  maxUnavailable: 1
"#;

    const SELECTOR: &str = r#"
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: {name: sel-pub, namespace: ns}
spec:
  selector: {matchLabels: {app: web}}
  minAvailable: 50%
"#;

    #[test]
    fn the_seed_pubs_are_valid() {
        assert!(validate(&parse(TARGET), None, &[]).is_empty());
        assert!(validate(&parse(SELECTOR), None, &[]).is_empty());
    }

    #[test]
    fn each_spec_rule_names_its_problem() {
        let cases: &[(&str, &str)] = &[
            ("spec: {maxUnavailable: 1}", keys::PUB_MSG_NO_SELECTOR),
            (
                "spec: {maxUnavailable: 1, selector: {matchLabels: {a: b}}, targetRef: {apiVersion: apps/v1, kind: Deployment, name: d}}",
                keys::PUB_MSG_SELECTOR_AND_TARGET_REF,
            ),
            (
                "spec: {maxUnavailable: 1, targetRef: {apiVersion: apps/v1, kind: Deployment}}",
                keys::PUB_MSG_EMPTY_TARGET_REF,
            ),
            (
                "spec: {maxUnavailable: 1, targetRef: {apiVersion: a/b/c, kind: D, name: d}}",
                "spec.targetRef.apiVersion",
            ),
            (
                "spec: {maxUnavailable: 1, selector: {}}",
                keys::PUB_MSG_EMPTY_SELECTOR,
            ),
            (
                "spec: {maxUnavailable: 1, selector: {matchExpressions: [{key: a, operator: Bogus}]}}",
                keys::PUB_MSG_EMPTY_SELECTOR,
            ),
            (
                "spec: {selector: {matchLabels: {a: b}}}",
                keys::PUB_MSG_NO_BUDGET,
            ),
            (
                "spec: {selector: {matchLabels: {a: b}}, maxUnavailable: 1, minAvailable: 1}",
                keys::PUB_MSG_BUDGET_EXCLUSIVE,
            ),
            (
                "spec: {selector: {matchLabels: {a: b}}, maxUnavailable: -1}",
                "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "spec: {selector: {matchLabels: {a: b}}, minAvailable: 120%}",
                "spec.minAvailable: Invalid value: 120%: must not be greater than 100%",
            ),
            (
                "spec: {selector: {matchLabels: {a: b}}, minAvailable: lots}",
                "must be an integer or percentage",
            ),
        ];
        for (spec, needle) in cases {
            let pub_ = parse(&format!("metadata: {{name: p, namespace: ns}}\n{spec}"));
            let got = messages(&validate(&pub_, None, &[]));
            assert!(got.contains(needle), "{spec}: {got}");
        }
    }

    #[test]
    fn annotations_must_parse() {
        for (key, value) in [
            (keys::PUB_PROTECT_OPERATIONS, "DELETE,REBOOT"),
            (keys::PUB_PROTECT_OPERATIONS, ""),
            (keys::PUB_PROTECT_TOTAL_REPLICAS, "many"),
            (keys::PUB_PROTECT_TOTAL_REPLICAS, "-1"),
        ] {
            let mut pub_ = parse(TARGET);
            pub_.metadata.annotations =
                Some(BTreeMap::from([(key.to_string(), value.to_string())]));
            let got = messages(&validate(&pub_, None, &[]));
            assert!(
                got.contains(&format!("annotation[{key}] is invalid")),
                "{value}: {got}"
            );
        }
        let mut ok = parse(TARGET);
        ok.metadata.annotations = Some(BTreeMap::from([
            (
                keys::PUB_PROTECT_OPERATIONS.to_string(),
                "DELETE, RESIZE".to_string(),
            ),
            (
                keys::PUB_PROTECT_TOTAL_REPLICAS.to_string(),
                "15".to_string(),
            ),
        ]));
        assert!(validate(&ok, None, &[]).is_empty());
    }

    #[test]
    fn selector_and_target_are_immutable() {
        let old = parse(TARGET);
        let mut new = old.clone();
        new.spec.max_unavailable = Some(IntOrString::Int(2));
        assert!(validate(&new, Some(&old), &[]).is_empty());
        new.spec.target_ref.as_mut().unwrap().name = "other".into();
        assert!(messages(&validate(&new, Some(&old), &[])).contains(keys::PUB_MSG_IMMUTABLE));
    }

    #[test]
    fn conflicts_with_other_pubs_of_the_namespace() {
        let mut same_target = parse(TARGET);
        same_target.metadata.name = Some("other".into());
        same_target.spec.target_ref.as_mut().unwrap().api_version = "apps.kruise.io/v1beta1".into();
        let got = messages(&validate(
            &parse(TARGET),
            None,
            std::slice::from_ref(&same_target),
        ));
        assert!(
            got.contains(
                "pub.spec.targetReference is in conflict with other PodUnavailableBudget other"
            ),
            "{got}"
        );

        let mut overlapping = parse(SELECTOR);
        overlapping.metadata.name = Some("wide".into());
        overlapping.spec.selector = Some(
            serde_saphyr::from_str("matchExpressions: [{key: app, operator: Exists}]").unwrap(),
        );
        let got = messages(&validate(
            &parse(SELECTOR),
            None,
            std::slice::from_ref(&overlapping),
        ));
        assert!(
            got.contains("pub.spec.selector is in conflict with other PodUnavailableBudget wide"),
            "{got}"
        );

        // Other namespaces and disjoint selectors never conflict.
        let mut elsewhere = overlapping.clone();
        elsewhere.metadata.namespace = Some("other-ns".into());
        let mut disjoint = parse(SELECTOR);
        disjoint.metadata.name = Some("db".into());
        disjoint.spec.selector = Some(serde_saphyr::from_str("matchLabels: {app: db}").unwrap());
        // Upstream's loose rule: selectors on different keys never conflict, although a
        // Pod could carry both labels (openkruise/kruise v1.9.0 IsSelectorLooseOverlap).
        let mut other_keys = parse(SELECTOR);
        other_keys.metadata.name = Some("tier".into());
        other_keys.spec.selector =
            Some(serde_saphyr::from_str("matchLabels: {tier: frontend}").unwrap());
        assert!(validate(&parse(SELECTOR), None, &[elsewhere, disjoint, other_keys]).is_empty());
    }
}
