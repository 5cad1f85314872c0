//! Which nodes (upstream `nodeShouldRunDaemonPod`, `openkruise/kruise v1.9.0
//! pkg/controller/daemonset/daemonset_util.go`) should run the daemon Pod and the tolerations every
//! daemon Pod gets. Placement itself (nodeName, nodeSelector, required node affinity,
//! toleration matching, the per-node `matchFields metadata.name` term) is
//! `kruise_ordering::nodes`, shared with BroadcastJob.

use k8s_openapi::api::core::v1::{Node, PodSpec, Toleration};
use kruise_ordering::nodes::{fits, tolerated};

pub use kruise_ordering::nodes::{assigned_node as target_node, bind_to_node};

/// `NoSchedule`, `NoExecute`: the taint effects that keep a daemon Pod off a node.
const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";

/// What a node means to the daemon (upstream `NodeShouldRunDaemonPod`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eligibility {
    /// A Pod should be created here if there is none.
    pub should_run: bool,
    /// An existing Pod may stay (an untolerated `NoSchedule` taint only keeps new ones off).
    pub should_continue_running: bool,
}

impl Eligibility {
    const NONE: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: false,
    };
}

/// Upstream `Predicates`: `nodeName`, nodeSelector and required node affinity must match; an
/// untolerated `NoSchedule`/`NoExecute` taint stops new Pods, an untolerated
/// `NoExecute` one evicts existing Pods too. Tolerations include the daemon defaults.
pub fn eligibility(template: &PodSpec, node: &Node) -> Eligibility {
    // Placement apart from taints: `fits` with a toleration of everything.
    let untainted = PodSpec {
        tolerations: Some(vec![Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]),
        ..template.clone()
    };
    if !fits(&untainted, node) {
        return Eligibility::NONE;
    }
    let tolerations = with_daemon_tolerations(template);
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let untolerated = |effect: &str| {
        taints
            .iter()
            .any(|t| t.effect == effect && !tolerated(&tolerations, t))
    };
    let no_execute = untolerated(NO_EXECUTE);
    Eligibility {
        should_run: !no_execute && !untolerated(NO_SCHEDULE),
        should_continue_running: !no_execute,
    }
}

/// The template's tolerations plus the daemon defaults, added where no
/// toleration with the same key, operator and effect exists.
pub fn with_daemon_tolerations(template: &PodSpec) -> Vec<Toleration> {
    let mut tolerations = template.tolerations.clone().unwrap_or_default();
    let host_network = template.host_network == Some(true);
    let defaults = [
        ("node.kubernetes.io/not-ready", NO_EXECUTE),
        ("node.kubernetes.io/unreachable", NO_EXECUTE),
        ("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
        ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
        ("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
        ("node.kubernetes.io/unschedulable", NO_SCHEDULE),
    ];
    let network = host_network.then_some(("node.kubernetes.io/network-unavailable", NO_SCHEDULE));
    for (key, effect) in defaults.into_iter().chain(network) {
        let present = tolerations.iter().any(|t| {
            t.key.as_deref() == Some(key)
                && t.operator.as_deref() == Some("Exists")
                && t.effect.as_deref() == Some(effect)
        });
        if !present {
            tolerations.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Default::default()
            });
        }
    }
    tolerations
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec,
        Taint,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kruise_api::pod::Pod;

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, e)| Taint {
                            key: k.to_string(),
                            effect: e.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    const RUN: Eligibility = Eligibility {
        should_run: true,
        should_continue_running: true,
    };
    const KEEP: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: true,
    };

    #[test]
    fn node_name_and_selector_must_match() {
        let mut spec = PodSpec::default();
        let n = node("n1", &[("disk", "ssd")], &[]);
        assert_eq!(eligibility(&spec, &n), RUN);
        spec.node_name = Some("n2".into());
        assert_eq!(eligibility(&spec, &n), Eligibility::NONE);
        spec.node_name = Some("n1".into());
        assert_eq!(eligibility(&spec, &n), RUN);
        spec.node_selector = Some([("disk".to_string(), "hdd".to_string())].into());
        assert_eq!(eligibility(&spec, &n), Eligibility::NONE);
        spec.node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
        assert_eq!(eligibility(&spec, &n), RUN);
    }

    #[test]
    fn required_affinity_terms_are_ored_and_fields_name_the_node() {
        let n = node("n1", &[("zone", "a"), ("cores", "8")], &[]);
        let req = |key: &str, op: &str, values: &[&str]| NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        };
        let spec_with = |terms: Vec<NodeSelectorTerm>| PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let exprs = |r: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
            match_expressions: Some(r),
            match_fields: None,
        };
        let fields = |r: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(r),
        };
        let ok = |terms| eligibility(&spec_with(terms), &n) == RUN;
        assert!(ok(vec![exprs(vec![req("zone", "In", &["a", "b"])])]));
        assert!(!ok(vec![exprs(vec![req("zone", "NotIn", &["a"])])]));
        assert!(ok(vec![
            exprs(vec![req("zone", "In", &["b"])]),
            exprs(vec![req("cores", "Gt", &["4"])])
        ]));
        assert!(!ok(vec![exprs(vec![req("cores", "Lt", &["4"])])]));
        assert!(ok(vec![fields(vec![req("metadata.name", "In", &["n1"])])]));
        assert!(!ok(vec![fields(vec![req("metadata.name", "In", &["n2"])])]));
        assert!(!ok(vec![]), "no terms match nothing");
    }

    #[test]
    fn taints_split_should_run_from_should_continue_running() {
        let spec = PodSpec::default();
        assert_eq!(
            eligibility(&spec, &node("n", &[], &[("dedicated", "NoSchedule")])),
            KEEP
        );
        assert_eq!(
            eligibility(&spec, &node("n", &[], &[("dedicated", "NoExecute")])),
            Eligibility::NONE
        );
        assert_eq!(
            eligibility(&spec, &node("n", &[], &[("soft", "PreferNoSchedule")])),
            RUN
        );
        // The daemon defaults tolerate these.
        for (key, effect) in [
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ] {
            assert_eq!(
                eligibility(&spec, &node("n", &[], &[(key, effect)])),
                RUN,
                "{key}"
            );
        }
        // ... but not network-unavailable unless hostNetwork.
        let net = node(
            "n",
            &[],
            &[("node.kubernetes.io/network-unavailable", "NoSchedule")],
        );
        assert_eq!(eligibility(&spec, &net), KEEP);
        let host = PodSpec {
            host_network: Some(true),
            ..Default::default()
        };
        assert_eq!(eligibility(&host, &net), RUN);
        // A template toleration.
        let tolerant = PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert_eq!(
            eligibility(&tolerant, &node("n", &[], &[("dedicated", "NoExecute")])),
            RUN
        );
    }

    #[test]
    fn pods_are_pinned_by_a_match_fields_term_and_found_by_it() {
        let mut spec = PodSpec::default();
        bind_to_node(&mut spec, "node-3");
        let pod = Pod {
            spec: Some((&spec).into()),
            ..Default::default()
        };
        assert_eq!(target_node(&pod), Some("node-3"));
        let mut bound = pod.clone();
        bound.spec.as_mut().unwrap().node_name = Some("node-4".into());
        assert_eq!(target_node(&bound), Some("node-4"));
        assert_eq!(target_node(&Pod::default()), None);
    }
}
