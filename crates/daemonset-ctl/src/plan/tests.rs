//! Plan tests: node eligibility, managing, rolling update, status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{DaemonSetUpdateStrategyType, RollingUpdateType};
use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleState};
use kruise_api::keys;
use kruise_workload::testing::{assert_starts_in_place, set_label};

use super::fixtures::*;
use super::nodes::target_node;
use super::{Action, Layout, compute_status};

fn creates(f: &Fixture) -> Vec<String> {
    summary(&f.plan())
        .into_iter()
        .filter(|s| s.starts_with("create"))
        .collect()
}

#[test]
fn one_pod_per_eligible_node_scheduled_through_the_scheduler() {
    let mut f = Fixture::new(3);
    f.taint(2, "dedicated", "NoSchedule");
    let plan = f.plan();
    assert_eq!(summary(&plan), ["create node-0", "create node-1"]);
    let Action::Create { pod, revision, .. } = &plan.actions[0] else {
        panic!()
    };
    assert_eq!(revision, "new");
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("nginx-"));
    assert_eq!(pod.metadata.name, None);
    assert_eq!(
        pod.metadata.labels.as_ref().unwrap()[keys::CONTROLLER_REVISION_HASH],
        "new"
    );
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name, None, "bound by the scheduler");
    let term = &spec
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms[0];
    let field = &term.match_fields.as_ref().unwrap()[0];
    assert_eq!(
        (field.key.as_str(), field.operator.as_str()),
        ("metadata.name", "In")
    );
    assert_eq!(field.values.as_deref(), Some(&["node-0".to_string()][..]));
    let tolerations: Vec<_> = spec
        .tolerations
        .iter()
        .flatten()
        .map(|t| t.key.clone().unwrap_or_default())
        .collect();
    assert!(tolerations.contains(&"node.kubernetes.io/not-ready".to_string()));
    assert!(tolerations.contains(&"node.kubernetes.io/unschedulable".to_string()));
    assert!(spec.readiness_gates.is_none(), "Standard: no gate");
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("DaemonSet", Some(true))
    );
}

#[test]
fn template_node_selector_and_node_name_pick_nodes() {
    let mut f = Fixture::new(3);
    f.label_node(1, "disk", "ssd");
    f.ds.spec.template.spec.as_mut().unwrap().node_selector =
        Some([("disk".to_string(), "ssd".to_string())].into());
    assert_eq!(creates(&f), ["create node-1"]);
    f.ds.spec.template.spec.as_mut().unwrap().node_selector = None;
    f.ds.spec.template.spec.as_mut().unwrap().node_name = Some("node-2".into());
    assert_eq!(creates(&f), ["create node-2"]);
}

#[test]
fn no_schedule_keeps_an_existing_pod_and_no_execute_evicts_it() {
    let mut f = Fixture::new(2);
    f.add_pods_everywhere(Rev::Update);
    f.taint(0, "dedicated", "NoSchedule");
    assert!(f.plan().actions.is_empty(), "{:?}", summary(&f.plan()));
    f.taint(1, "dedicated", "NoExecute");
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(1))]);
    let layout = Layout::of(&f.world());
    let s = compute_status(&f.world(), &layout, &Default::default(), None);
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_misscheduled
        ),
        (0, 0, 2)
    );
}

#[test]
fn pods_of_nodes_that_are_gone_and_duplicates_are_deleted() {
    let mut f = Fixture::new(3);
    f.add_pods_everywhere(Rev::Update);
    let extra = f.add_pod(1, Rev::Update, Ready::Yes);
    f.nodes.remove(2);
    let mut got = summary(&f.plan());
    got.sort();
    let mut want = vec![
        format!("delete {}", f.pod_name(extra)),
        format!("delete {}", f.pod_name(2)),
    ];
    want.sort();
    assert_eq!(
        got, want,
        "the newest duplicate goes, and the Pod of node-2"
    );
}

#[test]
fn failed_pods_are_deleted_with_a_warning() {
    let mut f = Fixture::new(1);
    let i = f.add_pod(0, Rev::Update, Ready::No);
    f.pods[i].status.as_mut().unwrap().phase = Some("Failed".into());
    let plan = f.plan();
    assert_eq!(summary(&plan), [format!("delete {}", f.pod_name(i))]);
    assert_eq!(plan.warnings[0].reason, "FailedDaemonPod");
    assert_eq!(
        plan.warnings[0].message,
        format!(
            "Found failed daemon pod default/{} on node node-0, will try to kill it",
            f.pod_name(i)
        )
    );
}

#[test]
fn failed_pods_wait_out_their_node_backoff() {
    let mut f = Fixture::new(1);
    let i = f.add_pod(0, Rev::Update, Ready::No);
    f.pods[i].status.as_mut().unwrap().phase = Some("Failed".into());
    f.failed_backoff
        .insert(node_name(0), f.now + jiff::SignedDuration::from_secs(4));
    let plan = f.plan();
    assert!(plan.actions.is_empty(), "{:?}", summary(&plan));
    assert!(plan.warnings.is_empty());
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(4)));
    f.now += jiff::SignedDuration::from_secs(4);
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(i))]);
}

#[test]
fn burst_replicas_caps_creations_per_round() {
    let mut f = Fixture::new(5);
    f.ds.spec.burst_replicas = Some(IntOrString::Int(2));
    assert_eq!(creates(&f), ["create node-0", "create node-1"]);
    f.ds.spec.burst_replicas = Some(IntOrString::String("60%".into()));
    assert_eq!(creates(&f).len(), 3, "60% of 5 rounded down");
}

#[test]
fn progressive_creation_follows_the_partition() {
    let mut f = Fixture::new(10);
    f.ds.metadata.annotations = Some(
        [(
            keys::DAEMONSET_PROGRESSIVE_CREATE_POD.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let count = |f: &mut Fixture, p: i32| {
        f.rolling().partition = Some(IntOrString::Int(p));
        creates(f)
    };
    assert!(count(&mut f, 10).is_empty());
    assert_eq!(count(&mut f, 9), ["create node-0"]);
    assert_eq!(
        count(&mut f, 5),
        [
            "create node-0",
            "create node-1",
            "create node-2",
            "create node-3",
            "create node-4"
        ]
    );
    // Names in string order: node-10 before node-5.
    let mut g = Fixture::new(0);
    g.ds.metadata.annotations = f.ds.metadata.annotations.clone();
    g.nodes = vec![node("node-5", &[]), node("node-10", &[])];
    assert_eq!(count(&mut g, 1), ["create node-10"]);
    // Without the annotation every missing Pod is created.
    f.ds.metadata.annotations = None;
    assert_eq!(count(&mut f, 9).len(), 10);
}

#[test]
fn empty_selector_only_warns() {
    let mut f = Fixture::new(2);
    f.ds.spec.selector = LabelSelector::default();
    let plan = f.plan();
    assert!(plan.actions.is_empty());
    assert_eq!(plan.warnings[0].reason, "SelectingAll");
    assert_eq!(
        plan.warnings[0].message,
        "This DaemonSet is selecting all pods. A non-empty selector is required."
    );
}

#[test]
fn standard_rolling_update_deletes_one_old_pod_at_a_time_from_the_last_node() {
    let mut f = Fixture::new(3);
    f.add_pods_everywhere(Rev::Current);
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(2))]);
    // An updated Pod that is not yet available uses up maxUnavailable 1.
    f.pods[2] = f.pods[2].clone();
    set_label(&mut f.pods[2], keys::CONTROLLER_REVISION_HASH, "new");
    f.min_ready(10);
    f.set_ready_since(2, 5);
    let plan = f.plan();
    assert!(plan.actions.is_empty(), "{:?}", summary(&plan));
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(5)));
    // Once it is, the next one goes.
    f.set_ready_since(2, 10);
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(1))]);
}

#[test]
fn old_pods_that_are_not_available_are_all_replaced_at_once() {
    let mut f = Fixture::new(3);
    for i in 0..3 {
        f.add_pod(i, Rev::Current, Ready::No);
    }
    assert_eq!(summary(&f.plan()).len(), 3);
}

#[test]
fn paused_and_on_delete_do_not_roll() {
    let mut f = Fixture::new(2);
    f.add_pods_everywhere(Rev::Current);
    f.rolling().paused = Some(true);
    assert!(f.plan().actions.is_empty());
    f.rolling().paused = None;
    f.ds.spec.update_strategy.type_ = Some(DaemonSetUpdateStrategyType::OnDelete);
    assert!(f.plan().actions.is_empty());
    // Managing still happens while paused.
    f.rolling().paused = Some(true);
    f.nodes.push(node("node-9", &[]));
    assert_eq!(summary(&f.plan()), ["create node-9"]);
}

#[test]
fn rolling_update_selector_limits_the_update_to_matching_nodes() {
    let mut f = Fixture::new(3);
    f.add_pods_everywhere(Rev::Current);
    f.max_unavailable(3);
    f.rolling().selector = Some(LabelSelector {
        match_labels: Some([("kubernetes.io/hostname".to_string(), "node-0".to_string())].into()),
        match_expressions: None,
    });
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(0))]);
}

#[test]
fn partition_keeps_nodes_at_the_old_revision() {
    let mut f = Fixture::new(3);
    f.add_pods_everywhere(Rev::Current);
    f.max_unavailable(3);
    f.rolling().partition = Some(IntOrString::Int(2));
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(2))]);
    // 50% of 3 rounds down: 1 kept, 2 updated.
    f.rolling().partition = Some(IntOrString::String("50%".into()));
    assert_eq!(
        summary(&f.plan()),
        [
            format!("delete {}", f.pod_name(2)),
            format!("delete {}", f.pod_name(1))
        ]
    );
    // A partition as large as the nodes updates nothing.
    f.rolling().partition = Some(IntOrString::Int(10));
    assert!(f.plan().actions.is_empty());
}

#[test]
fn selector_and_partition_walk_from_the_last_node_with_updated_ones_first() {
    // Nodes n1…n4 (node-0…node-3), node-1 already updated.
    let mut f = Fixture::new(4);
    for i in 0..4 {
        let rev = if i == 1 { Rev::Update } else { Rev::Current };
        f.add_pod(i, rev, Ready::Yes);
    }
    f.max_unavailable(4);
    let select = |f: &mut Fixture, nodes: &[&str]| {
        f.rolling().selector = Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "kubernetes.io/hostname".into(),
                    operator: "In".into(),
                    values: Some(nodes.iter().map(|n| n.to_string()).collect()),
                },
            ]),
        });
    };
    select(&mut f, &["node-2"]);
    f.rolling().partition = Some(IntOrString::Int(1));
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(2))]);
    select(&mut f, &["node-0", "node-2", "node-3"]);
    f.rolling().partition = Some(IntOrString::Int(2));
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(3))]);
}

#[test]
fn template_changed_back_replaces_nothing() {
    let mut f = Fixture::new(2);
    f.add_pods_everywhere(Rev::Update);
    assert!(f.plan().actions.is_empty());
}

#[test]
fn in_place_if_possible_updates_images_in_place_and_warns_at_the_limit() {
    let mut f = Fixture::new(2);
    f.set_type(RollingUpdateType::InPlaceIfPossible);
    f.max_unavailable(1);
    f.add_pods_everywhere(Rev::Current);
    let plan = f.plan();
    assert_eq!(plan.actions.len(), 1);
    assert_starts_in_place(&plan.actions[0], "new", "nginx:1.9.1");
    assert_eq!(plan.actions[0].object_name(), f.pod_name(1));
    assert!(plan.warnings.is_empty());
    // While node-1's Pod is updating, node-0's waits, with upstream's warning.
    set_label(&mut f.pods[1], keys::CONTROLLER_REVISION_HASH, "new");
    f.pods[1]
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .status = "False".into();
    let plan = f.plan();
    assert!(plan.actions.is_empty(), "{:?}", summary(&plan));
    assert_eq!(plan.warnings.len(), 1);
    assert_eq!(plan.warnings[0].reason, "numUnavailable >= maxUnavailable");
    assert_eq!(
        plan.warnings[0].message,
        "default/nginx number of unavailable DaemonSet pods: 1, is equal to or exceeds allowed maximum: 1"
    );
    f.pods[1]
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .status = "True".into();
    set_label(&mut f.pods[1], keys::CONTROLLER_REVISION_HASH, "old");
    // Pods created before the switch (no InPlaceUpdateReady gate) are recreated.
    for p in &mut f.pods {
        p.spec.as_mut().unwrap().readiness_gates = None;
    }
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(1))]);
    // New Pods get the gate.
    f.pods.clear();
    let plan = f.plan();
    let Action::Create { pod, .. } = &plan.actions[0] else {
        panic!()
    };
    assert!(kruise_ordering::predicates::has_readiness_gate(
        pod,
        keys::INPLACE_UPDATE_READY
    ));
}

#[test]
fn in_place_if_possible_recreates_when_more_than_images_changed() {
    let mut f = Fixture::new(1);
    f.set_type(RollingUpdateType::InPlaceIfPossible);
    let mut template = f.ds.spec.template.clone();
    template.spec.as_mut().unwrap().containers[0].args = Some(vec!["-v".into()]);
    f.new = kruise_workload::testing::controller_revision("nginx-new", &template, 2);
    f.add_pods_everywhere(Rev::Current);
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(0))]);
}

#[test]
fn surge_creates_the_new_pod_first_and_deletes_the_old_once_available() {
    let mut f = Fixture::new(2);
    f.max_surge(1);
    f.add_pods_everywhere(Rev::Current);
    assert_eq!(summary(&f.plan()), ["create node-1"]);
    // The new Pod on node-1 is not available yet: it counts toward maxSurge.
    let new = f.add_pod(1, Rev::Update, Ready::No);
    assert!(f.plan().actions.is_empty(), "{:?}", summary(&f.plan()));
    // Available: the old one goes (managing sees one old and one new Pod).
    f.pods[new] = {
        let mut p = f.pods[new].clone();
        let c = p.status.as_mut().unwrap().conditions.as_mut().unwrap();
        c[0].status = "True".into();
        p
    };
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(1))]);
}

#[test]
fn surge_with_min_ready_seconds_keeps_the_old_pod_a_second_longer() {
    let mut f = Fixture::new(2);
    f.max_surge(1);
    f.min_ready(10);
    f.add_pods_everywhere(Rev::Current);
    f.set_ready_since(0, 100);
    f.set_ready_since(1, 100);
    let new = f.add_pod(1, Rev::Update, Ready::Yes);
    // Ready since 10 s by its whole-second lastTransitionTime: perhaps only 9.x s in
    // truth. The old Pod stays; look again when it is surely past minReadySeconds.
    f.set_ready_since(new, 10);
    let plan = f.plan();
    assert!(plan.actions.is_empty(), "{:?}", summary(&plan));
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(1)));
    f.set_ready_since(new, 11);
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(1))]);
}

#[test]
fn surging_type_without_max_surge_surges_by_one() {
    let mut f = Fixture::new(2);
    f.set_type(RollingUpdateType::Surging);
    f.add_pods_everywhere(Rev::Current);
    assert_eq!(summary(&f.plan()), ["create node-1"]);
}

#[test]
fn surge_ignores_max_surge_when_old_pods_are_not_ready() {
    let mut f = Fixture::new(3);
    f.max_surge(1);
    for i in 0..3 {
        f.add_pod(i, Rev::Current, Ready::No);
    }
    assert_eq!(creates(&f).len(), 3);
}

#[test]
fn pre_delete_hook_holds_the_pod_in_preparing_delete() {
    let mut f = Fixture::new(1);
    f.ds.spec.lifecycle = Some(Lifecycle {
        pre_delete: Some(LifecycleHook {
            finalizers_handler: vec!["example.com/hold".into()],
            mark_pod_not_ready: true,
            ..Default::default()
        }),
        ..Default::default()
    });
    let i = f.add_pod(0, Rev::Current, Ready::Yes);
    f.pods[i].metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let plan = f.plan();
    let [Action::Lifecycle { transition, .. }] = &plan.actions[..] else {
        panic!("{:?}", summary(&plan))
    };
    assert_eq!(transition.to, LifecycleState::PreparingDelete);
    // Held: nothing while the finalizer stays; deleted once it is gone.
    set_label(&mut f.pods[i], keys::LIFECYCLE_STATE, "PreparingDelete");
    assert!(f.plan().actions.is_empty(), "{:?}", summary(&f.plan()));
    f.pods[i].metadata.finalizers = None;
    assert_eq!(summary(&f.plan()), [format!("delete {}", f.pod_name(i))]);
    // New Pods get the KruisePodReady gate and state Normal.
    f.pods.clear();
    let plan = f.plan();
    let Action::Create { pod, .. } = &plan.actions[0] else {
        panic!()
    };
    assert!(kruise_ordering::predicates::has_readiness_gate(
        pod,
        keys::KRUISE_POD_READY
    ));
    assert_eq!(
        kruise_ordering::predicates::label(pod, keys::LIFECYCLE_STATE),
        Some("Normal")
    );
}

#[test]
fn status_counts_the_oldest_pod_per_node() {
    let mut f = Fixture::new(4);
    f.ds.metadata.generation = Some(7);
    f.add_pod(0, Rev::Update, Ready::Yes);
    f.add_pod(1, Rev::Current, Ready::Yes);
    f.add_pod(2, Rev::Update, Ready::No);
    f.taint(3, "x", "NoSchedule");
    let layout = Layout::of(&f.world());
    let s = compute_status(&f.world(), &layout, &Default::default(), Some(0));
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_ready,
            s.number_available,
            s.updated_number_scheduled,
            s.number_unavailable,
            s.number_misscheduled
        ),
        (3, 3, 2, 2, 2, 1, 0)
    );
    assert_eq!(s.daemon_set_hash, "new");
    assert_eq!(s.observed_generation, 7);
}

#[test]
fn unscheduled_pods_are_found_by_their_affinity_term() {
    let mut f = Fixture::new(1);
    let i = f.add_pod(0, Rev::Update, Ready::No);
    f.pods[i].spec.as_mut().unwrap().node_name = None;
    assert_eq!(target_node(&f.pods[i]), Some("node-0"));
    assert!(creates(&f).is_empty(), "node-0 already has its Pod");
}

#[test]
fn prune_ineligible_nodes_leaves_their_pods_out_of_max_unavailable() {
    // node-2 and node-3 no longer run the daemon (NoExecute), their Pods being deleted
    // (stuck on NotReady nodes): without the gate they take both unavailable slots.
    let mut f = Fixture::new(4);
    f.add_pods_everywhere(Rev::Current);
    f.max_unavailable(2);
    for i in [2, 3] {
        f.taint(i, "dedicated", "NoExecute");
        f.pods[i].metadata.deletion_timestamp = Some(Time(f.now));
    }
    assert!(f.plan().actions.is_empty(), "{:?}", summary(&f.plan()));
    f.options.prune_ineligible_nodes = true;
    let mut got = summary(&f.plan());
    got.sort();
    assert_eq!(
        got,
        [
            format!("delete {}", f.pod_name(0)),
            format!("delete {}", f.pod_name(1))
        ]
    );
}
