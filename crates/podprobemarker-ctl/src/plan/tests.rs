use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ExecAction, Node, NodeCondition, NodeStatus, Pod, PodCondition,
    PodSpec, PodStatus, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    ContainerProbeState, NodePodProbe, NodePodProbeSpec, NodePodProbeStatus, PodContainerProbe,
    PodProbe, PodProbeMarker, PodProbeMarkerSpec, PodProbeStatus, ProbeMarkerPolicy, ProbeState,
};

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn node(name: &str, ready: bool) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn pod(ns: &str, name: &str, node: &str, app: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            labels: Some(labels(&[("app", app)])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "main".into(),
                ports: Some(vec![ContainerPort {
                    name: Some("http".into()),
                    container_port: 8080,
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some(format!("10.0.0.{}", name.len())),
            conditions: Some(vec![PodCondition {
                type_: "Initialized".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn exec_probe() -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(vec!["/bin/true".into()]),
        }),
        period_seconds: Some(5),
        ..Default::default()
    }
}

fn marker(ns: &str, name: &str, app: &str, probes: Vec<PodContainerProbe>) -> PodProbeMarker {
    PodProbeMarker {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            generation: Some(3),
            ..Default::default()
        },
        spec: PodProbeMarkerSpec {
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", app)])),
                ..Default::default()
            },
            probes,
        },
        status: None,
    }
}

fn healthy_probe() -> PodContainerProbe {
    PodContainerProbe {
        name: "healthy".into(),
        container_name: "main".into(),
        probe: exec_probe(),
        marker_policy: vec![
            ProbeMarkerPolicy {
                state: ProbeState::succeeded(),
                labels: labels(&[("nginx", "healthy")]),
                ..Default::default()
            },
            ProbeMarkerPolicy {
                state: ProbeState::failed(),
                annotations: labels(&[("controller.kubernetes.io/pod-deletion-cost", "-10")]),
                ..Default::default()
            },
        ],
        pod_condition_type: "game.kruise.io/healthy".into(),
    }
}

fn npp(name: &str, pod_probes: Vec<PodProbe>, statuses: Vec<PodProbeStatus>) -> Arc<NodePodProbe> {
    Arc::new(NodePodProbe {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("npp-{name}")),
            resource_version: Some("7".into()),
            ..Default::default()
        },
        spec: NodePodProbeSpec { pod_probes },
        status: Some(NodePodProbeStatus {
            pod_probe_statuses: statuses,
        }),
    })
}

struct Fixture {
    markers: Vec<Arc<PodProbeMarker>>,
    pods: Vec<Arc<Pod>>,
    nodes: Vec<Arc<Node>>,
    npps: Vec<Arc<NodePodProbe>>,
    scope: Option<&'static str>,
}

impl Fixture {
    fn world(&self) -> World<'_> {
        World {
            markers: &self.markers,
            pods: &self.pods,
            nodes: &self.nodes,
            node_probes: &self.npps,
            scope: self.scope,
        }
    }
}

fn fixture() -> Fixture {
    Fixture {
        markers: vec![Arc::new(marker("ns", "m", "web", vec![healthy_probe()]))],
        pods: vec![
            Arc::new(pod("ns", "web-0", "n1", "web")),
            Arc::new(pod("ns", "web-1", "n2", "web")),
            Arc::new(pod("ns", "db-0", "n1", "db")),
        ],
        nodes: vec![node("n1", true), node("n2", true)],
        npps: vec![npp("n1", vec![], vec![]), npp("n2", vec![], vec![])],
        scope: Some("ns"),
    }
}

fn spec_of(actions: &[Action], node: &str) -> Option<NodePodProbeSpec> {
    actions.iter().find_map(|a| match a {
        Action::UpdateNodeProbeSpec { name, spec, .. } if name == node => Some(spec.clone()),
        Action::CreateNodeProbe { node: n, spec } if n == node => Some(spec.clone()),
        _ => None,
    })
}

#[test]
fn each_node_lists_its_selected_pods_with_the_marker_probes() {
    let f = fixture();
    let actions = node_probes(&f.world());
    let n1 = spec_of(&actions, "n1").unwrap();
    assert_eq!(n1.pod_probes.len(), 1, "db-0 is not selected");
    let entry = &n1.pod_probes[0];
    assert_eq!(
        (entry.name.as_str(), entry.uid.as_str(), entry.ip.as_str()),
        ("web-0", "uid-web-0", "10.0.0.5")
    );
    assert_eq!(entry.probes[0].name, "m#healthy");
    assert_eq!(entry.probes[0].container_name, "main");
    assert_eq!(entry.probes[0].probe, exec_probe());
    let n2 = spec_of(&actions, "n2").unwrap();
    assert_eq!(n2.pod_probes[0].name, "web-1");
    assert!(
        actions.iter().all(|a| !matches!(a, Action::MarkPod(_))),
        "no status, no marks"
    );
}

#[test]
fn spec_writes_carry_the_version_read() {
    let f = fixture();
    let actions = node_probes(&f.world());
    assert!(actions.iter().any(|a| matches!(a,
        Action::UpdateNodeProbeSpec { name, resource_version, .. } if name == "n1" && resource_version == "7")));
}

#[test]
fn an_up_to_date_list_is_not_written() {
    let mut f = fixture();
    let actions = node_probes(&f.world());
    f.npps = ["n1", "n2"]
        .iter()
        .map(|n| npp(n, spec_of(&actions, n).unwrap().pod_probes, vec![]))
        .collect();
    assert_eq!(node_probes(&f.world()), vec![]);
}

#[test]
fn a_ready_node_without_one_gets_one_and_a_not_ready_one_waits() {
    let mut f = fixture();
    f.nodes.push(node("n3", true));
    f.nodes.push(node("n4", false));
    let mut virtual_node = (*node("vk", true)).clone();
    virtual_node.metadata.labels = Some(labels(&[("type", "virtual-kubelet")]));
    f.nodes.push(Arc::new(virtual_node));
    f.pods.push(Arc::new(pod("ns", "web-2", "n3", "web")));
    let actions = node_probes(&f.world());
    let created: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateNodeProbe { node, spec } => Some((node.as_str(), spec)),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].0, "n3");
    assert_eq!(created[0].1.pod_probes[0].name, "web-2");
}

#[test]
fn the_node_probe_of_a_node_gone_or_deleting_is_deleted() {
    let mut f = fixture();
    f.nodes.retain(|n| n.metadata.name.as_deref() != Some("n2"));
    let mut deleting = (*node("n1", true)).clone();
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    f.nodes = vec![Arc::new(deleting)];
    let actions = node_probes(&f.world());
    let deleted: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteNodeProbe { name, uid } => Some((name.as_str(), uid.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [("n1", "npp-n1"), ("n2", "npp-n2")]);
}

#[test]
fn pods_not_initialized_finished_deleting_or_unscheduled_are_not_probed() {
    let mut f = fixture();
    let mut pending = pod("ns", "web-a", "n1", "web");
    pending.status.as_mut().unwrap().conditions = None;
    let mut done = pod("ns", "web-b", "n1", "web");
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let mut deleting = pod("ns", "web-c", "n1", "web");
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    f.pods = vec![Arc::new(pending), Arc::new(done), Arc::new(deleting)];
    f.nodes = vec![node("n1", true)];
    f.npps = vec![npp("n1", vec![], vec![])];
    assert_eq!(node_probes(&f.world()), vec![]);
}

#[test]
fn entries_of_pods_gone_or_of_a_marker_deleted_leave_and_others_stay_in_place() {
    let mut f = fixture();
    let stale = PodProbe {
        name: "web-9".into(),
        namespace: "ns".into(),
        uid: "uid-web-9".into(),
        ip: "1.1.1.1".into(),
        probes: vec![],
    };
    let foreign = PodProbe {
        name: "other".into(),
        namespace: "elsewhere".into(),
        uid: "uid-other".into(),
        ..Default::default()
    };
    f.npps = vec![npp("n1", vec![stale, foreign.clone()], vec![])];
    f.nodes = vec![node("n1", true)];
    let spec = spec_of(&node_probes(&f.world()), "n1").unwrap();
    let names: Vec<_> = spec.pod_probes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["other", "web-0"],
        "foreign kept in place, stale gone"
    );
    // The marker being deleted: its probes leave, and the Pod with them.
    let mut deleting = (*f.markers[0]).clone();
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    f.markers = vec![Arc::new(deleting)];
    f.npps = vec![npp("n1", spec.pod_probes.clone(), vec![])];
    let spec = spec_of(&node_probes(&f.world()), "n1").unwrap();
    assert_eq!(spec.pod_probes, vec![foreign]);
}

#[test]
fn a_cluster_wide_instance_owns_every_namespace() {
    let mut f = fixture();
    f.scope = None;
    let foreign = PodProbe {
        name: "other".into(),
        namespace: "elsewhere".into(),
        uid: "uid-other".into(),
        ..Default::default()
    };
    f.npps = vec![npp("n1", vec![foreign], vec![])];
    f.nodes = vec![node("n1", true)];
    let spec = spec_of(&node_probes(&f.world()), "n1").unwrap();
    let names: Vec<_> = spec.pod_probes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["web-0"]);
}

#[test]
fn named_ports_are_resolved_and_unresolvable_probes_skipped() {
    let mut f = fixture();
    let tcp = |port: IntOrString, name: &str| PodContainerProbe {
        name: name.into(),
        container_name: "main".into(),
        probe: Probe {
            tcp_socket: Some(TCPSocketAction { port, host: None }),
            ..Default::default()
        },
        pod_condition_type: format!("c/{name}"),
        marker_policy: vec![],
    };
    f.markers = vec![Arc::new(marker(
        "ns",
        "m",
        "web",
        vec![
            tcp(IntOrString::String("http".into()), "named"),
            tcp(IntOrString::String("9090".into()), "digits"),
            tcp(IntOrString::String("nope".into()), "missing"),
            tcp(IntOrString::Int(70000), "range"),
        ],
    ))];
    f.nodes = vec![node("n1", true)];
    f.npps = vec![npp("n1", vec![], vec![])];
    let spec = spec_of(&node_probes(&f.world()), "n1").unwrap();
    let probes: Vec<_> = spec.pod_probes[0]
        .probes
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.probe.tcp_socket.as_ref().unwrap().port.clone(),
            )
        })
        .collect();
    assert_eq!(
        probes,
        [
            ("m#named", IntOrString::Int(8080)),
            ("m#digits", IntOrString::Int(9090)),
            ("m#range", IntOrString::Int(70000)),
        ],
        "a number is passed as written (upstream converts names only)"
    );
}

fn state(name: &str, s: &str, message: &str) -> ContainerProbeState {
    ContainerProbeState {
        name: name.into(),
        state: ProbeState::from(s),
        message: message.into(),
        ..Default::default()
    }
}

fn status_for(pod: &str, states: Vec<ContainerProbeState>) -> PodProbeStatus {
    PodProbeStatus {
        name: pod.into(),
        namespace: "ns".into(),
        uid: format!("uid-{pod}"),
        probe_states: states,
    }
}

fn marks(f: &Fixture) -> Vec<PodMarks> {
    pod_marks(&f.world())
        .into_iter()
        .filter_map(|a| match a {
            Action::MarkPod(m) => Some(m),
            _ => None,
        })
        .collect()
}

#[test]
fn a_succeeded_probe_sets_its_labels_removes_the_failed_ones_and_sets_the_condition() {
    let mut f = fixture();
    let mut p = pod("ns", "web-0", "n1", "web");
    p.metadata.annotations = Some(labels(&[(
        "controller.kubernetes.io/pod-deletion-cost",
        "-10",
    )]));
    f.pods = vec![Arc::new(p)];
    f.npps = vec![npp(
        "n1",
        vec![],
        vec![status_for(
            "web-0",
            vec![state("m#healthy", "Succeeded", "ok")],
        )],
    )];
    let m = marks(&f);
    assert_eq!(m.len(), 1);
    assert_eq!(
        m[0].labels,
        BTreeMap::from([("nginx".into(), Some("healthy".into()))])
    );
    assert_eq!(
        m[0].annotations,
        BTreeMap::from([("controller.kubernetes.io/pod-deletion-cost".into(), None)])
    );
    assert_eq!(m[0].conditions.len(), 1);
    assert_eq!(m[0].conditions[0].type_, "game.kruise.io/healthy");
    assert_eq!(m[0].conditions[0].status, "True");
    assert_eq!(m[0].conditions[0].message.as_deref(), Some("ok"));
    let patch = m[0].patch();
    assert_eq!(patch["metadata"]["labels"]["nginx"], "healthy");
    assert!(
        patch["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"].is_null()
    );
    assert_eq!(patch["metadata"]["uid"], "uid-web-0");
    assert_eq!(patch["status"]["conditions"][0]["status"], "True");
}

#[test]
fn a_failed_probe_marks_false_and_unknown_counts_as_false() {
    let mut f = fixture();
    let mut p = pod("ns", "web-0", "n1", "web");
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("nginx".into(), "healthy".into());
    f.pods = vec![Arc::new(p)];
    f.npps = vec![npp(
        "n1",
        vec![],
        vec![status_for("web-0", vec![state("m#healthy", "Failed", "")])],
    )];
    let m = &marks(&f)[0];
    assert_eq!(m.labels, BTreeMap::from([("nginx".into(), None)]));
    assert_eq!(
        m.annotations,
        BTreeMap::from([(
            "controller.kubernetes.io/pod-deletion-cost".into(),
            Some("-10".into())
        )])
    );
    assert_eq!(m.conditions[0].status, "False");
    f.npps = vec![npp(
        "n1",
        vec![],
        vec![status_for("web-0", vec![state("m#healthy", "Unknown", "")])],
    )];
    let m = &marks(&f)[0];
    assert_eq!(m.conditions[0].status, "False");
    assert_eq!(
        m.labels,
        BTreeMap::from([("nginx".into(), None)]),
        "both policies are the other state's"
    );
}

#[test]
fn nothing_is_written_when_the_pod_already_shows_the_marks() {
    let mut f = fixture();
    let mut p = pod("ns", "web-0", "n1", "web");
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("nginx".into(), "healthy".into());
    p.status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(PodCondition {
            type_: "game.kruise.io/healthy".into(),
            status: "True".into(),
            message: Some("ok".into()),
            ..Default::default()
        });
    f.pods = vec![Arc::new(p)];
    f.npps = vec![npp(
        "n1",
        vec![],
        vec![status_for(
            "web-0",
            vec![state("m#healthy", "Succeeded", "ok")],
        )],
    )];
    assert_eq!(marks(&f), vec![]);
    // A new message alone rewrites the condition.
    f.npps = vec![npp(
        "n1",
        vec![],
        vec![status_for(
            "web-0",
            vec![state("m#healthy", "Succeeded", "data")],
        )],
    )];
    let m = marks(&f);
    assert_eq!(m[0].conditions[0].message.as_deref(), Some("data"));
    assert!(m[0].labels.is_empty());
}

#[test]
fn statuses_of_other_pods_nodes_uids_or_markers_are_ignored() {
    let mut f = fixture();
    f.npps = vec![
        // web-1 runs on n2, not n1.
        npp(
            "n1",
            vec![],
            vec![status_for(
                "web-1",
                vec![state("m#healthy", "Succeeded", "")],
            )],
        ),
        npp(
            "n2",
            vec![],
            vec![
                PodProbeStatus {
                    uid: "another".into(),
                    ..status_for("web-1", vec![state("m#healthy", "Succeeded", "")])
                },
                status_for("web-1", vec![state("gone#healthy", "Succeeded", "")]),
                status_for(
                    "web-1",
                    vec![state("m#nope", "Succeeded", ""), state("m#healthy", "", "")],
                ),
            ],
        ),
    ];
    assert_eq!(marks(&f), vec![]);
}

#[test]
fn the_first_probe_of_a_condition_type_wins() {
    let mut f = fixture();
    let mut second = healthy_probe();
    second.name = "second".into();
    second.marker_policy.clear();
    f.markers = vec![Arc::new(marker(
        "ns",
        "m",
        "web",
        vec![healthy_probe(), second],
    ))];
    f.npps = vec![npp(
        "n1",
        vec![],
        vec![status_for(
            "web-0",
            vec![
                state("m#healthy", "Failed", "a"),
                state("m#second", "Succeeded", "b"),
            ],
        )],
    )];
    let m = &marks(&f)[0];
    assert_eq!(m.conditions.len(), 1);
    assert_eq!(m.conditions[0].status, "False");
}

#[test]
fn marker_status_counts_probed_selected_pods_on_known_nodes() {
    let mut f = fixture();
    f.pods.push(Arc::new(pod("ns", "web-x", "ghost", "web")));
    let status = marker_status(&f.markers[0], &f.pods, &f.nodes);
    assert_eq!(status.matched_pods, 2);
    assert_eq!(status.observed_generation, 3);
}

#[test]
fn a_marker_is_listed_while_any_node_probe_names_its_probes() {
    let f = fixture();
    let listed = PodProbe {
        name: "web-0".into(),
        namespace: "ns".into(),
        uid: "uid-web-0".into(),
        probes: vec![kruise_api::apps_v1alpha1::ContainerProbe {
            name: "m#healthy".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(still_listed(
        &f.markers[0],
        &[npp("n1", vec![listed.clone()], vec![])]
    ));
    let other = kruise_api::apps_v1alpha1::ContainerProbe {
        name: "mm#healthy".into(),
        ..Default::default()
    };
    let listed = PodProbe {
        probes: vec![other],
        ..listed
    };
    assert!(!still_listed(
        &f.markers[0],
        &[npp("n1", vec![listed], vec![])]
    ));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Planning from the lists a plan wrote asks for no further NodePodProbe write.
        #[test]
        fn node_plans_settle(pods in proptest::collection::vec((0u8..3, 0u8..2, any::<bool>()), 0..8)) {
            let mut f = fixture();
            f.pods = pods
                .iter()
                .enumerate()
                .map(|(i, (n, app, init))| {
                    let mut p = pod("ns", &format!("p-{i}"), &format!("n{n}"), ["web", "db"][*app as usize]);
                    if !init {
                        p.status.as_mut().unwrap().conditions = None;
                    }
                    Arc::new(p)
                })
                .collect();
            f.nodes = vec![node("n0", true), node("n1", true), node("n2", true)];
            f.npps = vec![];
            let first = node_probes(&f.world());
            f.npps = ["n0", "n1", "n2"]
                .iter()
                .map(|n| npp(n, spec_of(&first, n).unwrap_or_default().pod_probes, vec![]))
                .collect();
            prop_assert_eq!(node_probes(&f.world()), vec![]);
        }
    }
}
