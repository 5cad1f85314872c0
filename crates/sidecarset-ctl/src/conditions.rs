//! The Pod webhook's `matchConditions`: a CEL expression true for exactly the Pods some
//! SidecarSet could inject into (by namespace and label selector), so the apiserver does
//! not call the webhook for any other Pod. With no SidecarSets it is `false`: the webhook
//! costs nothing, and an outage of `sidecarset-ctl` blocks no Pod.
//!
//! The expression over-approximates, never under-approximates: `namespaceSelector` is
//! not visible to CEL (only the Pod is), so a SidecarSet with one counts as "any
//! namespace"; a selector we cannot translate (an unknown operator, which validation
//! rejects anyway) selects nothing, as it does at injection. Past [`MAX_EXPRESSION`]
//! bytes the condition is dropped (every Pod in scope is sent), so a huge number of
//! SidecarSets cannot produce a configuration the apiserver refuses.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps_v1alpha1::SidecarSet;

use crate::matching;

/// Name of the condition in the webhook configuration.
pub const CONDITION_NAME: &str = "matches-a-sidecarset";
/// Longest expression we register; beyond it the condition is left out.
pub const MAX_EXPRESSION: usize = 64 * 1024;

/// A CEL string literal.
fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

const LABELS: &str = "object.metadata.labels";

fn has_key(key: &str) -> String {
    format!("(has({LABELS}) && {} in {LABELS})", lit(key))
}

fn value_in(key: &str, values: &BTreeSet<&str>) -> String {
    let list: Vec<String> = values.iter().map(|v| lit(v)).collect();
    format!("{}[{}] in [{}]", LABELS, lit(key), list.join(", "))
}

/// The selector as CEL over the Pod's labels; `None` when it selects nothing (empty or
/// invalid, as at injection).
pub fn selector_expression(s: &LabelSelector) -> Option<String> {
    if matching::is_empty_selector(s)
        || kruise_ordering::selector::matches(s, &Default::default()).is_err()
    {
        return None;
    }
    let mut terms = Vec::new();
    for (k, v) in s.match_labels.iter().flatten() {
        terms.push(format!(
            "({} && {}[{}] == {})",
            has_key(k),
            LABELS,
            lit(k),
            lit(v)
        ));
    }
    for r in s.match_expressions.iter().flatten() {
        let values: BTreeSet<&str> = r.values.iter().flatten().map(String::as_str).collect();
        terms.push(match r.operator.as_str() {
            "In" => format!("({} && {})", has_key(&r.key), value_in(&r.key, &values)),
            "NotIn" => format!("(!{} || !({}))", has_key(&r.key), value_in(&r.key, &values)),
            "Exists" => has_key(&r.key),
            "DoesNotExist" => format!("!{}", has_key(&r.key)),
            _ => return None,
        });
    }
    Some(terms.join(" && "))
}

/// One SidecarSet's part: its namespace (if any) and selector. `None` when it injects
/// into nothing (paused injection, no usable selector).
pub fn sidecarset_expression(ss: &SidecarSet) -> Option<String> {
    if ss.spec.injection_strategy.paused {
        return None;
    }
    let selector = selector_expression(ss.spec.selector.as_ref()?)?;
    Some(if ss.spec.namespace.is_empty() {
        format!("({selector})")
    } else {
        format!(
            "(request.namespace == {} && {selector})",
            lit(&ss.spec.namespace)
        )
    })
}

/// The condition for a set of SidecarSets; `None` (no condition: call for every Pod) when
/// the expression would be too long.
pub fn match_condition<'a>(
    sidecarsets: impl IntoIterator<Item = &'a SidecarSet>,
) -> Option<MatchCondition> {
    // Sorted and de-duplicated, so the configuration only changes when the meaning does.
    let parts: BTreeSet<String> = sidecarsets
        .into_iter()
        .filter_map(sidecarset_expression)
        .collect();
    let expression = if parts.is_empty() {
        "false".to_string()
    } else {
        parts.into_iter().collect::<Vec<_>>().join(" || ")
    };
    (expression.len() <= MAX_EXPRESSION).then(|| MatchCondition {
        name: CONDITION_NAME.into(),
        expression,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ss(spec: serde_json::Value) -> SidecarSet {
        serde_json::from_value(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s"}, "spec": spec})).unwrap()
    }

    #[test]
    fn no_sidecarsets_means_never_call() {
        assert_eq!(match_condition([]).unwrap().expression, "false");
        let paused = ss(
            json!({"selector": {"matchLabels": {"a": "b"}}, "injectionStrategy": {"paused": true}}),
        );
        assert_eq!(match_condition([&paused]).unwrap().expression, "false");
    }

    #[test]
    fn selectors_translate_to_label_checks() {
        let s = ss(
            json!({"namespace": "team-a", "selector": {"matchLabels": {"app": "nginx"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]},
                                 {"key": "x", "operator": "NotIn", "values": ["1"]},
                                 {"key": "y", "operator": "Exists"},
                                 {"key": "z", "operator": "DoesNotExist"}]}}),
        );
        assert_eq!(
            sidecarset_expression(&s).unwrap(),
            "(request.namespace == 'team-a' && \
             ((has(object.metadata.labels) && 'app' in object.metadata.labels) && object.metadata.labels['app'] == 'nginx') && \
             ((has(object.metadata.labels) && 'tier' in object.metadata.labels) && object.metadata.labels['tier'] in ['a', 'b']) && \
             (!(has(object.metadata.labels) && 'x' in object.metadata.labels) || !(object.metadata.labels['x'] in ['1'])) && \
             (has(object.metadata.labels) && 'y' in object.metadata.labels) && \
             !(has(object.metadata.labels) && 'z' in object.metadata.labels))"
        );
    }

    #[test]
    fn sets_are_or_ed_in_a_stable_order() {
        let a = ss(json!({"selector": {"matchLabels": {"app": "a"}}}));
        let b = ss(json!({"selector": {"matchLabels": {"app": "b"}}}));
        let ab = match_condition([&a, &b]).unwrap().expression;
        assert_eq!(ab, match_condition([&b, &a]).unwrap().expression);
        assert_eq!(ab.matches(" || ").count(), 1);
        assert_eq!(
            match_condition([&a, &a.clone()])
                .unwrap()
                .expression
                .matches(" || ")
                .count(),
            0
        );
    }

    #[test]
    fn literals_are_escaped_and_unusable_selectors_dropped() {
        assert_eq!(lit("it's\\"), "'it\\'s\\\\'");
        let empty = ss(json!({"selector": {}}));
        let bad =
            ss(json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}));
        assert_eq!(match_condition([&empty, &bad]).unwrap().expression, "false");
    }

    #[test]
    fn too_long_means_no_condition() {
        let many: Vec<SidecarSet> = (0..3000)
            .map(|i| ss(json!({"selector": {"matchLabels": {"app": format!("app-{i}")}}})))
            .collect();
        assert!(match_condition(many.iter()).is_none());
    }
}
