//! `metav1.LabelSelector` matching, for `weightPriority[].matchSelector`.
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
}
