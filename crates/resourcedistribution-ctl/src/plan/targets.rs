//! Which namespaces get a copy (upstream's `listNamespacesForDistributor`, openkruise/kruise v1.9.0
//! pkg/controller/resourcedistribution/utils.go): with `allNamespaces` every namespace, otherwise
//! `includedNamespaces` plus the namespaces a non-empty `namespaceLabelSelector` matches;
//! `excludedNamespaces` are then removed. Every other existing namespace is *unmatched* (its owned
//! copy is removed). `kube-system` and `kube-public` are never matched, whatever selects them
//! (OpenKruise ≥ 1.9).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps_v1alpha1::ResourceDistributionTargets;
pub use kruise_ordering::selector::InvalidSelector;

/// A namespace as the plan needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Being deleted: no copy can be created there.
    pub terminating: bool,
}

/// The target set of one ResourceDistribution against the namespaces that exist.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Matched namespaces, existing or not (a listed namespace may be missing).
    pub matched: BTreeSet<String>,
    /// Existing namespaces that are not matched.
    pub unmatched: BTreeSet<String>,
}

/// Namespaces never distributed to, as in OpenKruise 1.9 (`defaultSystemNamespaces`).
pub const SYSTEM_NAMESPACES: [&str; 2] = ["kube-system", "kube-public"];

/// A selector with no requirement at all selects nothing here (upstream only applies a
/// non-empty namespaceLabelSelector), not everything.
pub fn is_empty_selector(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty())
}

/// Resolves `targets` against `namespaces`. An invalid selector (admission rejects one,
/// an object stored earlier may still hold it) is an error: nothing is resolved, so the
/// caller changes no copy because of a spec it cannot read.
pub fn resolve(
    targets: &ResourceDistributionTargets,
    namespaces: &[NamespaceView],
) -> Result<Resolution, InvalidSelector> {
    let selector = &targets.namespace_label_selector;
    let use_selector = !is_empty_selector(selector);
    let mut matched = BTreeSet::new();
    for ns in namespaces {
        let selected = targets.all_namespaces
            || (use_selector && kruise_ordering::selector::matches(selector, &ns.labels)?);
        if selected {
            matched.insert(ns.name.clone());
        }
    }
    if use_selector {
        // Validate the selector even when no namespace exists to try it on.
        kruise_ordering::selector::matches(selector, &BTreeMap::new())?;
    }
    if !targets.all_namespaces {
        matched.extend(
            targets
                .included_namespaces
                .names()
                .filter(|n| !n.is_empty())
                .map(str::to_string),
        );
    }
    for excluded in targets.excluded_namespaces.names().chain(SYSTEM_NAMESPACES) {
        matched.remove(excluded);
    }
    let unmatched = namespaces
        .iter()
        .map(|ns| ns.name.clone())
        .filter(|n| !matched.contains(n))
        .collect();
    Ok(Resolution { matched, unmatched })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use kruise_api::apps_v1alpha1::{
        ResourceDistributionNamespace, ResourceDistributionTargetNamespaces,
    };
    use proptest::prelude::*;

    pub(crate) fn ns(name: &str, labels: &[(&str, &str)]) -> NamespaceView {
        NamespaceView {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            terminating: false,
        }
    }

    pub(crate) fn list(names: &[&str]) -> ResourceDistributionTargetNamespaces {
        ResourceDistributionTargetNamespaces {
            list: names
                .iter()
                .map(|n| ResourceDistributionNamespace {
                    name: n.to_string(),
                })
                .collect(),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn names(set: &BTreeSet<String>) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    /// `includedNamespaces` [ns-1] and `namespaceLabelSelector` `group: test`: ns-1 listed, ns-2
    /// labelled `group: test`, ns-3 neither.
    #[test]
    fn included_plus_selected() {
        let namespaces = [
            ns("ns-1", &[]),
            ns("ns-2", &[("group", "test")]),
            ns("ns-3", &[]),
        ];
        let targets = ResourceDistributionTargets {
            included_namespaces: list(&["ns-1"]),
            namespace_label_selector: labels(&[("group", "test")]),
            ..Default::default()
        };
        let r = resolve(&targets, &namespaces).unwrap();
        assert_eq!(names(&r.matched), ["ns-1", "ns-2"]);
        assert_eq!(names(&r.unmatched), ["ns-3"]);
    }

    #[test]
    fn excluded_wins_over_all_namespaces() {
        let namespaces = [ns("a", &[]), ns("b", &[]), ns("kube-system", &[])];
        let targets = ResourceDistributionTargets {
            all_namespaces: true,
            excluded_namespaces: list(&["b", "kube-system"]),
            ..Default::default()
        };
        let r = resolve(&targets, &namespaces).unwrap();
        assert_eq!(names(&r.matched), ["a"]);
        assert_eq!(names(&r.unmatched), ["b", "kube-system"]);
    }

    #[test]
    fn system_namespaces_are_never_matched() {
        let namespaces = [
            ns("a", &[("group", "x")]),
            ns("kube-system", &[("group", "x")]),
            ns("kube-public", &[("group", "x")]),
        ];
        for targets in [
            ResourceDistributionTargets {
                all_namespaces: true,
                ..Default::default()
            },
            ResourceDistributionTargets {
                included_namespaces: list(&["kube-system", "kube-public", "a"]),
                ..Default::default()
            },
            ResourceDistributionTargets {
                namespace_label_selector: LabelSelector {
                    match_labels: Some([("group".to_string(), "x".to_string())].into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        ] {
            let r = resolve(&targets, &namespaces).unwrap();
            assert_eq!(names(&r.matched), ["a"], "{targets:?}");
            assert_eq!(names(&r.unmatched), ["kube-public", "kube-system"]);
        }
    }

    #[test]
    fn a_listed_namespace_that_does_not_exist_is_still_matched() {
        let targets = ResourceDistributionTargets {
            included_namespaces: list(&["missing"]),
            ..Default::default()
        };
        let r = resolve(&targets, &[ns("other", &[])]).unwrap();
        assert_eq!(names(&r.matched), ["missing"]);
        assert_eq!(names(&r.unmatched), ["other"]);
    }

    #[test]
    fn an_empty_selector_selects_nothing() {
        let targets = ResourceDistributionTargets {
            namespace_label_selector: LabelSelector {
                match_labels: Some(BTreeMap::new()),
                match_expressions: Some(vec![]),
            },
            ..Default::default()
        };
        let r = resolve(&targets, &[ns("a", &[("x", "y")])]).unwrap();
        assert!(r.matched.is_empty());
    }

    #[test]
    fn an_invalid_selector_resolves_nothing() {
        let targets = ResourceDistributionTargets {
            all_namespaces: true,
            namespace_label_selector: LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "k".into(),
                    operator: "Near".into(),
                    values: None,
                }]),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(resolve(&targets, &[]).is_err());
    }

    fn arb_namespaces() -> impl Strategy<Value = Vec<NamespaceView>> {
        proptest::collection::btree_map("[a-f]", proptest::option::of("[xy]"), 0..6).prop_map(|m| {
            m.into_iter()
                .map(|(name, group)| NamespaceView {
                    name,
                    labels: group
                        .map(|g| BTreeMap::from([("group".to_string(), g)]))
                        .unwrap_or_default(),
                    terminating: false,
                })
                .collect()
        })
    }

    fn arb_targets() -> impl Strategy<Value = ResourceDistributionTargets> {
        let names = || proptest::collection::vec("[a-h]", 0..4);
        (
            any::<bool>(),
            names(),
            names(),
            proptest::option::of("[xy]"),
        )
            .prop_map(|(all, included, excluded, group)| {
                let refs =
                    |v: &Vec<String>| list(&v.iter().map(String::as_str).collect::<Vec<_>>());
                ResourceDistributionTargets {
                    all_namespaces: all,
                    included_namespaces: refs(&included),
                    excluded_namespaces: refs(&excluded),
                    namespace_label_selector: group
                        .map(|g| labels(&[("group", &g)]))
                        .unwrap_or_default(),
                }
            })
    }

    proptest! {
        /// Excluded namespaces are never matched; matched and unmatched never overlap
        /// and together cover every existing namespace.
        #[test]
        fn resolution_partitions_the_existing_namespaces(
            namespaces in arb_namespaces(),
            targets in arb_targets(),
        ) {
            let r = resolve(&targets, &namespaces).unwrap();
            for excluded in targets.excluded_namespaces.names() {
                prop_assert!(!r.matched.contains(excluded));
            }
            prop_assert!(r.matched.is_disjoint(&r.unmatched));
            for ns in &namespaces {
                prop_assert!(r.matched.contains(&ns.name) ^ r.unmatched.contains(&ns.name));
            }
        }

        /// Every matched namespace is explained by a target, and every namespace a
        /// target names (and no exclusion removes) is matched.
        #[test]
        fn matched_is_exactly_the_targets_minus_exclusions(
            namespaces in arb_namespaces(),
            targets in arb_targets(),
        ) {
            let r = resolve(&targets, &namespaces).unwrap();
            let excluded: BTreeSet<&str> = targets.excluded_namespaces.names().collect();
            let included: BTreeSet<&str> = targets.included_namespaces.names().collect();
            let wanted = targets.namespace_label_selector.match_labels.as_ref()
                .and_then(|m| m.get("group"));
            let existing: BTreeSet<&str> = namespaces.iter().map(|n| n.name.as_str()).collect();
            let mut expected = BTreeSet::new();
            for ns in &namespaces {
                let by_label = wanted.is_some_and(|g| ns.labels.get("group") == Some(g));
                if targets.all_namespaces || by_label || included.contains(ns.name.as_str()) {
                    expected.insert(ns.name.as_str());
                }
            }
            if !targets.all_namespaces {
                expected.extend(included.iter().copied());
            }
            expected.retain(|n| !excluded.contains(n));
            prop_assert_eq!(names(&r.matched), expected.iter().copied().collect::<Vec<_>>());
            // Only listed namespaces may be matched without existing.
            for n in &r.matched {
                prop_assert!(existing.contains(n.as_str()) || included.contains(n.as_str()));
            }
        }

        /// Adding a namespace never changes whether the others are matched.
        #[test]
        fn a_new_namespace_changes_only_itself(
            namespaces in arb_namespaces(),
            targets in arb_targets(),
            extra in "[g-h]",
            group in proptest::option::of("[xy]"),
        ) {
            let before = resolve(&targets, &namespaces).unwrap();
            let mut more = namespaces.clone();
            more.push(NamespaceView {
                name: extra.clone(),
                labels: group.map(|g| BTreeMap::from([("group".to_string(), g)])).unwrap_or_default(),
                terminating: false,
            });
            let after = resolve(&targets, &more).unwrap();
            let strip = |s: &BTreeSet<String>| s.iter().filter(|n| **n != extra).cloned().collect::<BTreeSet<_>>();
            prop_assert_eq!(strip(&before.matched), strip(&after.matched));
        }
    }
}
