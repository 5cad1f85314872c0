//! Node predicates: whether a Pod spec fits a node (the scheduler's `NodeName`,
//! `NodeAffinity`, `TaintToleration` and `NodeUnschedulable` filters, as OpenKruise's
//! BroadcastJob `checkNodeFitness` runs them), toleration matching, and binding a Pod to
//! one node by a required `matchFields metadata.name` term (Kubernetes'
//! `ReplaceDaemonSetPodNodeNameNodeAffinity`) and reading that binding back. Pure; the
//! controllers that place Pods per node (BroadcastJob, Advanced DaemonSet) share them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use kruise_api::pod::Pod;

/// The taint `spec.unschedulable` stands for.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// What of a Pod's spec decides the nodes it may run on, from a template's spec
/// (k8s-openapi's `PodSpec`) or a cached Pod's ([`kruise_api::pod::PodSpec`]).
pub struct Placement<'a> {
    pub node_name: Option<&'a str>,
    pub node_selector: Option<&'a BTreeMap<String, String>>,
    pub affinity: Option<&'a Affinity>,
    pub tolerations: &'a [Toleration],
}

impl<'a> From<&'a PodSpec> for Placement<'a> {
    fn from(spec: &'a PodSpec) -> Self {
        Placement {
            node_name: spec.node_name.as_deref(),
            node_selector: spec.node_selector.as_ref(),
            affinity: spec.affinity.as_ref(),
            tolerations: spec.tolerations.as_deref().unwrap_or_default(),
        }
    }
}

impl<'a> From<&'a kruise_api::pod::PodSpec> for Placement<'a> {
    fn from(spec: &'a kruise_api::pod::PodSpec) -> Self {
        Placement {
            node_name: spec.node_name.as_deref(),
            node_selector: spec.node_selector.as_ref(),
            affinity: spec.affinity.as_deref(),
            tolerations: spec.tolerations.as_deref().unwrap_or_default(),
        }
    }
}

/// Whether a Pod with `spec` may run on `node`.
pub fn fits<'a>(spec: impl Into<Placement<'a>>, node: &Node) -> bool {
    let spec: Placement<'a> = spec.into();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if spec.node_name.is_some_and(|n| !n.is_empty() && n != name) {
        return false;
    }
    if !matches_selector_and_affinity(&spec, node) {
        return false;
    }
    let tolerations = spec.tolerations;
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    if taints
        .iter()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .any(|t| !tolerated(tolerations, t))
    {
        return false;
    }
    let unschedulable = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let unschedulable_taint = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    !unschedulable || tolerated(tolerations, &unschedulable_taint)
}

/// `nodeSelector` (every label equal) and the required node affinity (any term).
fn matches_selector_and_affinity(spec: &Placement, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selector_ok = spec
        .node_selector
        .iter()
        .copied()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    let required = spec
        .affinity
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(selector) => selector
            .node_selector_terms
            .iter()
            .any(|term| term_matches(term, node)),
    }
}

/// A node selector term matches `node` when it has at least one requirement and all of
/// them hold.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    expressions
        .iter()
        .all(|r| requirement_holds(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_holds(r, Some(name.as_str())))
}

fn requirement_holds(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| values.iter().all(|x| x != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|b| number(b)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// Whether one of `tolerations` tolerates `taint` (Kubernetes' `ToleratesTaint`).
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key = t.key.as_deref().unwrap_or_default();
        match t.operator.as_deref().unwrap_or("Equal") {
            "Exists" => effect_ok && (key.is_empty() || key == taint.key),
            "Equal" | "" => {
                effect_ok
                    && key == taint.key
                    && t.value.as_deref().unwrap_or_default()
                        == taint.value.as_deref().unwrap_or_default()
            }
            _ => false,
        }
    })
}

/// A Pod whose spec says where it may run: k8s-openapi's (one being created) or the
/// workload caches' view.
pub trait PlacedPod {
    fn placement(&self) -> Option<Placement<'_>>;
}

impl PlacedPod for k8s_openapi::api::core::v1::Pod {
    fn placement(&self) -> Option<Placement<'_>> {
        self.spec.as_ref().map(Placement::from)
    }
}

impl PlacedPod for Pod {
    fn placement(&self) -> Option<Placement<'_>> {
        self.spec.as_ref().map(Placement::from)
    }
}

macro_rules! placed_through {
    ($($pointer:ty),*) => {$(
        impl<T: PlacedPod + ?Sized> PlacedPod for $pointer {
            fn placement(&self) -> Option<Placement<'_>> {
                (**self).placement()
            }
        }
    )*};
}

placed_through!(&T, Box<T>);

/// The node a per-node Pod is bound to: `spec.nodeName`, or the single name of its required
/// `matchFields metadata.name In [...]` term (upstream `getAssignedNode`).
pub fn assigned_node(pod: &(impl PlacedPod + ?Sized)) -> Option<&str> {
    let spec = pod.placement()?;
    if let Some(n) = spec.node_name.filter(|n| !n.is_empty()) {
        return Some(n);
    }
    spec.affinity?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name" && f.operator == "In")
        .and_then(|f| f.values.as_deref())
        .filter(|v| v.len() == 1)
        .map(|v| v[0].as_str())
}

/// Binds a Pod to `node` for the default scheduler (Kubernetes'
/// `ReplaceDaemonSetPodNodeNameNodeAffinity`): the required node affinity becomes the one
/// term `matchFields metadata.name In [node]`; preferred terms are kept.
pub fn bind_to_node(spec: &mut PodSpec, node: &str) {
    use k8s_openapi::api::core::v1::{NodeAffinity, NodeSelector};
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(vec![node.to_string()]),
        }]),
        ..Default::default()
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term],
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, taints: Vec<Taint>, unschedulable: bool) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("zone".to_string(), "a".to_string())].into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(taints),
                unschedulable: Some(unschedulable),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        Toleration {
            key: Some(key.into()).filter(|k: &String| !k.is_empty()),
            operator: Some(op.into()),
            value: Some(value.into()).filter(|v: &String| !v.is_empty()),
            effect: Some(effect.into()).filter(|e: &String| !e.is_empty()),
            ..Default::default()
        }
    }

    #[test]
    fn taints_need_tolerations_and_prefer_no_schedule_does_not_count() {
        let spec = PodSpec::default();
        assert!(fits(&spec, &node("n", vec![], false)));
        assert!(fits(
            &spec,
            &node("n", vec![taint("k", "v", "PreferNoSchedule")], false)
        ));
        let tainted = node("n", vec![taint("k", "v", "NoSchedule")], false);
        assert!(!fits(&spec, &tainted));
        for t in [
            toleration("k", "Equal", "v", "NoSchedule"),
            toleration("k", "Exists", "", ""),
            toleration("", "Exists", "", ""),
        ] {
            let spec = PodSpec {
                tolerations: Some(vec![t.clone()]),
                ..Default::default()
            };
            assert!(fits(&spec, &tainted), "{t:?}");
        }
        let wrong = PodSpec {
            tolerations: Some(vec![toleration("k", "Equal", "w", "NoSchedule")]),
            ..Default::default()
        };
        assert!(!fits(&wrong, &tainted));
    }

    #[test]
    fn unschedulable_nodes_fit_only_pods_tolerating_it() {
        let cordoned = node("n", vec![], true);
        assert!(!fits(&PodSpec::default(), &cordoned));
        let spec = PodSpec {
            tolerations: Some(vec![toleration(
                UNSCHEDULABLE_TAINT,
                "Exists",
                "",
                "NoSchedule",
            )]),
            ..Default::default()
        };
        assert!(fits(&spec, &cordoned));
    }

    #[test]
    fn binding_to_a_node_replaces_the_required_terms_and_reads_back() {
        let mut spec = PodSpec {
            node_selector: Some([("zone".to_string(), "a".to_string())].into()),
            ..Default::default()
        };
        bind_to_node(&mut spec, "n1");
        assert!(fits(&spec, &node("n1", vec![], false)));
        assert!(!fits(&spec, &node("n2", vec![], false)));
        let pod = Pod {
            spec: Some(kruise_api::pod::PodSpec {
                affinity: spec.affinity.map(Box::new),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(assigned_node(&pod), Some("n1"));
        let named = Pod {
            spec: Some(kruise_api::pod::PodSpec {
                node_name: Some("n3".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(assigned_node(&named), Some("n3"));
        assert_eq!(assigned_node(&Pod::default()), None);
    }

    #[test]
    fn requirements_follow_the_operators() {
        let r = |op: &str, values: &[&str]| NodeSelectorRequirement {
            key: "k".into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        };
        assert!(requirement_holds(&r("In", &["a"]), Some("a")));
        assert!(!requirement_holds(&r("In", &["a"]), None));
        assert!(requirement_holds(&r("NotIn", &["a"]), None));
        assert!(requirement_holds(&r("Exists", &[]), Some("")));
        assert!(requirement_holds(&r("DoesNotExist", &[]), None));
        assert!(requirement_holds(&r("Gt", &["3"]), Some("4")));
        assert!(!requirement_holds(&r("Lt", &["3"]), Some("x")));
    }
}
