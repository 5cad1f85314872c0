//! Which PUB protects a Pod (openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control.go) and when two PUBs conflict (openkruise/kruise v1.9.0 pkg/webhook/podunavailablebudget/validating/pub_create_update_handler.go). Pure.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::policy_v1alpha1::{PodUnavailableBudget, TargetReference};
use kruise_ordering::selector;

/// A workload by group, kind and name (the version does not matter: the apiserver
/// serves one object under every version of its kind).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadRef {
    pub group: String,
    pub kind: String,
    pub name: String,
}

pub use kruise_runtime::meta::parse_group as group_of;

impl WorkloadRef {
    pub fn new(api_version: &str, kind: &str, name: &str) -> Option<Self> {
        Some(WorkloadRef {
            group: group_of(api_version)?.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
        })
    }

    pub fn of_target(target: &TargetReference) -> Option<Self> {
        Self::new(&target.api_version, &target.kind, &target.name)
    }
}

/// Whether `pub_` protects a Pod with `labels` whose controller owner resolves to
/// `owner` (a ReplicaSet already resolved to its Deployment).
pub fn protects_pod(
    pub_: &PodUnavailableBudget,
    labels: &BTreeMap<String, String>,
    owner: Option<&WorkloadRef>,
) -> bool {
    if let Some(target) = &pub_.spec.target_ref {
        return owner.is_some_and(|o| WorkloadRef::of_target(target).as_ref() == Some(o));
    }
    pub_.spec
        .selector
        .as_ref()
        .filter(|s| !is_empty_selector(s))
        .is_some_and(|s| selector::matches(s, labels).unwrap_or(false))
}

/// The PUB protecting the Pod: the first match by name, so every replica of the webhook
/// and the controller agree.
pub fn pub_for_pod<'a>(
    pubs: impl IntoIterator<Item = &'a PodUnavailableBudget>,
    labels: &BTreeMap<String, String>,
    owner: Option<&WorkloadRef>,
) -> Option<&'a PodUnavailableBudget> {
    let mut matching: Vec<_> = pubs
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && protects_pod(p, labels, owner))
        .collect();
    matching.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    matching.into_iter().next()
}

/// No matchLabels and no matchExpressions.
pub fn is_empty_selector(s: &LabelSelector) -> bool {
    s.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kruise_api::policy_v1alpha1::PodUnavailableBudgetSpec;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(labels(pairs)),
            ..Default::default()
        }
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: (!values.is_empty())
                    .then(|| values.iter().map(|v| v.to_string()).collect()),
            }]),
            ..Default::default()
        }
    }

    fn pub_named(name: &str, spec: PodUnavailableBudgetSpec) -> PodUnavailableBudget {
        PodUnavailableBudget {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }

    #[test]
    fn api_versions_parse_to_their_group() {
        assert_eq!(group_of("apps/v1"), Some("apps"));
        assert_eq!(group_of("v1"), Some(""));
        assert_eq!(group_of("apps.kruise.io/v1alpha1"), Some("apps.kruise.io"));
        for bad in ["", "/v1", "apps/", "a/b/c"] {
            assert_eq!(group_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_target_ref_matches_the_resolved_owner_whatever_its_version() {
        let p = pub_named(
            "p",
            PodUnavailableBudgetSpec {
                target_ref: Some(TargetReference {
                    api_version: "apps.kruise.io/v1beta1".into(),
                    kind: "StatefulSet".into(),
                    name: "web".into(),
                }),
                ..Default::default()
            },
        );
        let owner = WorkloadRef::new("apps.kruise.io/v1alpha1", "StatefulSet", "web");
        assert!(protects_pod(&p, &labels(&[]), owner.as_ref()));
        let apps = WorkloadRef::new("apps/v1", "StatefulSet", "web");
        assert!(!protects_pod(&p, &labels(&[]), apps.as_ref()));
        assert!(!protects_pod(&p, &labels(&[]), None));
    }

    #[test]
    fn the_first_pub_by_name_wins_and_empty_selectors_match_nothing() {
        let by_selector = |name: &str, s: LabelSelector| {
            pub_named(
                name,
                PodUnavailableBudgetSpec {
                    selector: Some(s),
                    ..Default::default()
                },
            )
        };
        let pubs = [
            by_selector("b", selector(&[("app", "web")])),
            by_selector("a", expr("app", "Exists", &[])),
            by_selector("0", LabelSelector::default()),
        ];
        let chosen = pub_for_pod(&pubs, &labels(&[("app", "web")]), None);
        assert_eq!(chosen.and_then(|p| p.metadata.name.as_deref()), Some("a"));
        assert!(pub_for_pod(&pubs, &labels(&[("x", "y")]), None).is_none());
    }
}
