//! `metav1.LabelSelector` matching, for `weightPriority[].matchSelector` and a
//! workload's Pods, and its string form (status `labelSelector`, list calls).
//!
//! Kept here (rather than pulling in a client crate) because the ordering crate is pure
//! and only needs the four set-based operators.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Why a selector cannot be used. Upstream skips such a weight term
/// (`ValidatedLabelSelectorAsSelector` fails), and so do we.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvalidSelector {
    UnknownOperator(String),
    /// `In`/`NotIn` with no values.
    ValuesRequired(String),
    /// `Exists`/`DoesNotExist` with values.
    ValuesForbidden(String),
}

/// Whether `labels` satisfy `selector`. An empty selector matches everything, as
/// `LabelSelectorAsSelector` does. Label key/value syntax is not re-validated here;
/// admission already rejects malformed keys.
pub fn matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, InvalidSelector> {
    let mut all = true;
    // Validate every requirement before answering, so an invalid selector is reported
    // as such even when an earlier requirement already fails to match.
    for requirement in selector.match_expressions.iter().flatten() {
        all &= requirement_matches(requirement, labels)?;
    }
    let labels_match = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    Ok(all && labels_match)
}

fn requirement_matches(
    requirement: &LabelSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Result<bool, InvalidSelector> {
    let key = &requirement.key;
    let values = requirement.values.as_deref().unwrap_or_default();
    let value = labels.get(key);
    match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => Err(InvalidSelector::ValuesRequired(key.clone())),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            Err(InvalidSelector::ValuesForbidden(key.clone()))
        }
        "In" => Ok(value.is_some_and(|v| values.contains(v))),
        // NotIn also matches Pods without the key (Kubernetes semantics).
        "NotIn" => Ok(value.is_none_or(|v| !values.contains(v))),
        "Exists" => Ok(value.is_some()),
        "DoesNotExist" => Ok(value.is_none()),
        other => Err(InvalidSelector::UnknownOperator(other.to_owned())),
    }
}

/// A selector in its string form, as `kubectl` and the scale subresource show it:
/// `app=nginx,tier in (a,b)` (keys sorted, as `labels.Selector.String()`).
pub fn format_selector(selector: &LabelSelector) -> String {
    let mut parts: Vec<(String, String)> = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        parts.push((k.clone(), format!("{k}={v}")));
    }
    for e in selector.match_expressions.iter().flatten() {
        let mut values = e.values.clone().unwrap_or_default();
        values.sort();
        let text = match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({})", e.key, values.join(",")),
        };
        parts.push((e.key.clone(), text));
    }
    parts.sort();
    parts
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn selector(
        match_labels: &[(&str, &str)],
        exprs: Vec<LabelSelectorRequirement>,
    ) -> LabelSelector {
        LabelSelector {
            match_labels: (!match_labels.is_empty()).then(|| labels(match_labels)),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert_eq!(matches(&LabelSelector::default(), &labels(&[])), Ok(true));
        assert_eq!(
            matches(&LabelSelector::default(), &labels(&[("a", "b")])),
            Ok(true)
        );
    }

    #[test]
    fn match_labels_need_every_pair() {
        let s = selector(&[("a", "1"), ("b", "2")], vec![]);
        assert_eq!(
            matches(&s, &labels(&[("a", "1"), ("b", "2"), ("c", "3")])),
            Ok(true)
        );
        assert_eq!(matches(&s, &labels(&[("a", "1")])), Ok(false));
        assert_eq!(matches(&s, &labels(&[("a", "1"), ("b", "3")])), Ok(false));
    }

    #[test]
    fn set_operators() {
        let l = labels(&[("tier", "web")]);
        let check = |e| matches(&selector(&[], vec![e]), &l);
        assert_eq!(check(expr("tier", "In", &["web", "db"])), Ok(true));
        assert_eq!(check(expr("tier", "In", &["db"])), Ok(false));
        assert_eq!(check(expr("zone", "In", &["a"])), Ok(false));
        assert_eq!(check(expr("tier", "NotIn", &["db"])), Ok(true));
        assert_eq!(check(expr("tier", "NotIn", &["web"])), Ok(false));
        assert_eq!(check(expr("zone", "NotIn", &["a"])), Ok(true));
        assert_eq!(check(expr("tier", "Exists", &[])), Ok(true));
        assert_eq!(check(expr("zone", "Exists", &[])), Ok(false));
        assert_eq!(check(expr("zone", "DoesNotExist", &[])), Ok(true));
        assert_eq!(check(expr("tier", "DoesNotExist", &[])), Ok(false));
    }

    #[test]
    fn invalid_requirements_are_errors() {
        let l = labels(&[]);
        let check = |e| matches(&selector(&[], vec![e]), &l);
        assert!(check(expr("a", "In", &[])).is_err());
        assert!(check(expr("a", "NotIn", &[])).is_err());
        assert!(check(expr("a", "Exists", &["x"])).is_err());
        assert!(check(expr("a", "Gt", &["1"])).is_err());
        // Invalid even when another part already fails to match.
        let s = selector(&[("x", "y")], vec![expr("a", "Bogus", &[])]);
        assert!(matches(&s, &l).is_err());
    }

    #[test]
    fn selector_string_form() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}, {"key": "d", "operator": "Exists"}]
        }))
        .unwrap();
        assert_eq!(format_selector(&sel), "a=1,b=2,c in (x,y),d");
    }

    #[test]
    fn selector_string_form_does_not_exist() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}, {"key": "d", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(format_selector(&sel), "a=1,b=2,c in (x,y),!d");
    }
}
