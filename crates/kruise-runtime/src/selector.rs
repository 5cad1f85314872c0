//! When two label selectors count as overlapping for OpenKruise's admission checks. Two
//! rules exist upstream (openkruise/kruise v1.9.0 pkg/util/selector.go), each used by one
//! webhook, and both are heuristics rather than exact set intersection. A drop-in
//! replacement has to refuse exactly what upstream refuses, so both are kept as written
//! there:
//!
//! - [`overlapping`] (`IsSelectorOverlapping`): SidecarSets whose Pod and namespace
//!   selectors overlap must not inject the same container, volume or annotation names.
//! - [`loosely_overlapping`] (`IsSelectorLooseOverlap`): a PodUnavailableBudget's selector
//!   must not loosely overlap another's in its namespace.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// `IsSelectorOverlapping`: overlapping unless either selector is disjoint from the other
/// by the one-sided reading of `isDisjoint` (below).
pub fn overlapping(a: &LabelSelector, b: &LabelSelector) -> bool {
    !(disjoint(a, b) || disjoint(b, a))
}

/// The values `first` allows per key: `matchLabels` and `In` add theirs, `Exists` allows
/// any value (`None`); `NotIn` and `DoesNotExist` constrain nothing here.
fn allowed_values(first: &LabelSelector) -> BTreeMap<&str, Option<Vec<&str>>> {
    let mut allowed: BTreeMap<&str, Option<Vec<&str>>> = BTreeMap::new();
    for (key, value) in first.match_labels.iter().flatten() {
        allowed.insert(key, Some(vec![value]));
    }
    for r in first.match_expressions.iter().flatten() {
        match r.operator.as_str() {
            // Appended to what matchLabels or an earlier `In` gave (an `In` without values
            // names nothing); after `Exists` the key allows every value already.
            "In" if r.values.as_ref().is_some_and(|v| !v.is_empty()) => {
                if let Some(values) = allowed.entry(&r.key).or_insert_with(|| Some(Vec::new())) {
                    values.extend(r.values.iter().flatten().map(String::as_str));
                }
            }
            "Exists" => {
                allowed.insert(&r.key, None);
            }
            _ => {}
        }
    }
    allowed
}

/// `isDisjoint(first, second)`: some requirement of `second` can never hold together with
/// what `first` allows for its key. One-sided: an `Exists` of `second` on a key `first`
/// does not name counts as disjoint, as upstream reads it.
fn disjoint(first: &LabelSelector, second: &LabelSelector) -> bool {
    let allowed = allowed_values(first);
    let allows = |key: &str, value: &str| match allowed.get(key) {
        None | Some(None) => true,
        Some(Some(values)) => values.contains(&value),
    };
    if second
        .match_labels
        .iter()
        .flatten()
        .any(|(key, value)| !allows(key, value))
    {
        return true;
    }
    second.match_expressions.iter().flatten().any(|r| {
        let values: Vec<&str> = r.values.iter().flatten().map(String::as_str).collect();
        let named = allowed.get(r.key.as_str());
        match r.operator.as_str() {
            "In" => matches!(named, Some(Some(a)) if !a.iter().any(|v| values.contains(v))),
            // NotIn excluding every value first allows (`Exists` counts as the value "ALL").
            "NotIn" => match named {
                Some(Some(a)) => a.iter().all(|v| values.contains(v)),
                Some(None) => values.contains(&"ALL"),
                None => false,
            },
            "Exists" => named.is_none(),
            "DoesNotExist" => named.is_some(),
            _ => false,
        }
    })
}

/// `IsSelectorLooseOverlap`: both selectors constrain exactly the same keys, and on each
/// key their requirements can meet (`matchLabels` read as `In`; a key's `matchLabels`
/// entry replaces an expression on it, the last expression on a key wins).
pub fn loosely_overlapping(a: &LabelSelector, b: &LabelSelector) -> bool {
    let (ea, eb) = (requirements_by_key(a), requirements_by_key(b));
    ea.len() == eb.len()
        && ea.iter().all(|(key, x)| {
            eb.get(key)
                .is_some_and(|y| requirements_meet(x, y) && requirements_meet(y, x))
        })
}

fn requirements_by_key(s: &LabelSelector) -> BTreeMap<&str, LabelSelectorRequirement> {
    let mut out: BTreeMap<&str, LabelSelectorRequirement> = s
        .match_expressions
        .iter()
        .flatten()
        .map(|r| (r.key.as_str(), r.clone()))
        .collect();
    for (key, value) in s.match_labels.iter().flatten() {
        out.insert(
            key,
            LabelSelectorRequirement {
                key: key.clone(),
                operator: "In".into(),
                values: Some(vec![value.clone()]),
            },
        );
    }
    out
}

/// `isMatchExpOverlap(x, y)`.
fn requirements_meet(x: &LabelSelectorRequirement, y: &LabelSelectorRequirement) -> bool {
    let values =
        |r: &LabelSelectorRequirement| -> Vec<String> { r.values.clone().unwrap_or_default() };
    let (vx, vy) = (values(x), values(y));
    let contains_all = |a: &[String], b: &[String]| b.iter().all(|v| a.contains(v));
    match (x.operator.as_str(), y.operator.as_str()) {
        ("In", "Exists") => true,
        ("In", "In") => vy.iter().any(|v| vx.contains(v)),
        ("In", "NotIn") => !contains_all(&vy, &vx),
        ("Exists", "In" | "NotIn" | "Exists") => true,
        ("NotIn", "Exists" | "DoesNotExist" | "NotIn") => true,
        ("NotIn", "In") => !contains_all(&vx, &vy),
        ("DoesNotExist", "DoesNotExist" | "NotIn") => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn sel(v: Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }
    fn labels(k: &str, v: &str) -> LabelSelector {
        sel(json!({"matchLabels": {k: v}}))
    }
    fn expr(k: &str, op: &str, values: &[&str]) -> LabelSelector {
        sel(json!({"matchExpressions": [{"key": k, "operator": op, "values": values}]}))
    }

    /// The cases of upstream's doc comment and of its sidecarset_validating_test.go.
    #[test]
    fn overlapping_as_upstream_reads_it() {
        assert!(!overlapping(&labels("a", "b"), &labels("a", "c")));
        assert!(!overlapping(
            &expr("a", "In", &["b", "c"]),
            &expr("a", "NotIn", &["b", "c", "d"])
        ));
        assert!(overlapping(&labels("a", "b"), &labels("c", "d")));
        assert!(overlapping(
            &expr("a", "In", &["b", "c"]),
            &expr("a", "NotIn", &["b"])
        ));
        assert!(!overlapping(
            &sel(json!({"matchLabels": {"a": "b", "c": "d", "e": "f"}})),
            &sel(json!({"matchLabels": {"a": "x", "c": "d", "e": "f"}}))
        ));
        assert!(!overlapping(
            &expr("a", "Exists", &[]),
            &expr("a", "DoesNotExist", &[])
        ));
        // One-sided readings kept as upstream has them.
        assert!(!overlapping(&expr("a", "Exists", &[]), &labels("b", "c")));
        assert!(!overlapping(
            &expr("a", "Exists", &[]),
            &expr("a", "NotIn", &["x"])
        ));
        assert!(overlapping(
            &expr("a", "NotIn", &["b"]),
            &expr("a", "DoesNotExist", &[])
        ));
        assert!(overlapping(&expr("a", "Exists", &[]), &labels("a", "x")));
    }

    /// The cases of upstream's doc comment of IsSelectorLooseOverlap.
    #[test]
    fn loose_overlap_needs_the_same_keys() {
        assert!(!loosely_overlapping(&labels("a", "b"), &labels("c", "d")));
        assert!(loosely_overlapping(
            &labels("app", "web"),
            &labels("app", "web")
        ));
        assert!(!loosely_overlapping(
            &labels("app", "web"),
            &labels("app", "db")
        ));
        assert!(loosely_overlapping(
            &expr("a", "In", &["b", "c"]),
            &expr("a", "Exists", &[])
        ));
        assert!(loosely_overlapping(
            &expr("a", "In", &["b", "c"]),
            &expr("a", "In", &["c", "e"])
        ));
        assert!(loosely_overlapping(
            &expr("a", "In", &["b", "c"]),
            &expr("a", "NotIn", &["b", "e"])
        ));
        assert!(!loosely_overlapping(
            &expr("a", "In", &["b", "c"]),
            &expr("a", "NotIn", &["b", "c", "e"])
        ));
        assert!(loosely_overlapping(
            &expr("a", "NotIn", &["b", "c"]),
            &expr("a", "DoesNotExist", &[])
        ));
        assert!(loosely_overlapping(
            &expr("a", "NotIn", &["b", "c"]),
            &expr("a", "In", &["b", "e"])
        ));
        assert!(!loosely_overlapping(
            &expr("a", "NotIn", &["b", "c"]),
            &expr("a", "In", &["b"])
        ));
        assert!(!loosely_overlapping(
            &expr("a", "Exists", &[]),
            &expr("a", "DoesNotExist", &[])
        ));
        assert!(loosely_overlapping(
            &expr("a", "DoesNotExist", &[]),
            &expr("a", "DoesNotExist", &[])
        ));
        assert!(!loosely_overlapping(
            &labels("app", "web"),
            &expr("app", "DoesNotExist", &[])
        ));
        assert!(!loosely_overlapping(
            &sel(json!({"matchLabels": {"app": "web", "tier": "x"}})),
            &labels("app", "web")
        ));
    }
}
