//! Plan tests: subset choice, caps, records, costs, Adaptive, node matching, injection.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    InjectWorkloadSpread, WorkloadSpread, WorkloadSpreadSpec, WorkloadSpreadStatus,
    WorkloadSpreadSubset, WorkloadSpreadSubsetStatus,
};
use kruise_api::keys;
use proptest::prelude::*;
use serde_json::json;

use super::subset::{NewPod, max_replicas, place, place_by_ordinal, record_deletion};
use super::target::TargetKind;
use super::*;

fn now() -> Timestamp {
    kruise_workload::testing::now()
}

fn zone_subset(name: &str, zone: &str, max: Option<IntOrString>) -> WorkloadSpreadSubset {
    serde_json::from_value(json!({
        "name": name,
        "requiredNodeSelectorTerm": {"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]},
        "maxReplicas": max,
    }))
    .unwrap()
}

fn ws(subsets: Vec<WorkloadSpreadSubset>) -> WorkloadSpread {
    let mut ws = WorkloadSpread::new(
        "ws-demo",
        WorkloadSpreadSpec {
            target_ref: kruise_api::apps_v1alpha1::TargetReference {
                api_version: "apps.kruise.io/v1alpha1".into(),
                kind: "CloneSet".into(),
                name: "cs-demo".into(),
            },
            subsets,
            ..Default::default()
        },
    );
    ws.metadata.namespace = Some("ns".into());
    ws.metadata.generation = Some(1);
    ws
}

/// Scenario D2's WorkloadSpread: zone-a capped at 2, zone-b unlimited.
fn d2() -> WorkloadSpread {
    ws(vec![
        zone_subset("zone-a", "zone-a", Some(IntOrString::Int(2))),
        zone_subset("zone-b", "zone-b", None),
    ])
}

fn new_pod<'a>(name: &'a str) -> NewPod<'a> {
    NewPod {
        name,
        version: keys::WS_VERSION_IGNORED,
        generated_uid: "gen-1",
    }
}

/// Places `count` named Pods one after the other, feeding each written status into the
/// next decision; returns the subset names.
fn place_all(ws: &mut WorkloadSpread, replicas: i32, count: usize) -> Vec<Option<String>> {
    (0..count)
        .map(|i| {
            let name = format!("p{i}");
            let placed = place(
                ws,
                TargetKind::CloneSet,
                replicas,
                &new_pod(&name),
                Time(now()),
            )?;
            if let Some(status) = placed.status {
                ws.status = Some(status);
            }
            Some(ws.spec.subsets[placed.subset].name.clone())
        })
        .collect()
}

/// A Running, Ready Pod of the WorkloadSpread, in `subset` (None: unannotated), on `node`.
fn pod(name: &str, subset: Option<&str>, node: &str, ready: bool) -> Pod {
    let mut annotations = serde_json::Map::new();
    if let Some(s) = subset {
        annotations.insert(
            keys::WS_MATCHED.into(),
            json!(format!(r#"{{"name":"ws-demo","subset":"{s}"}}"#)),
        );
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "annotations": annotations, "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": if ready { "Running" } else { "Pending" }, "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" },
             "lastTransitionTime": "2024-05-01T10:00:00Z"}]}
    }))
    .unwrap()
}

/// A Pod the scheduler could not place, unschedulable since `since`.
fn stuck_pod(name: &str, subset: &str, since: Timestamp) -> Pod {
    let mut p = pod(name, Some(subset), "", false);
    p.status.as_mut().unwrap().conditions = Some(vec![
        serde_json::from_value(json!({
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "lastTransitionTime": Time(since)}))
        .unwrap(),
    ]);
    p
}

fn node(name: &str, zone: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {"topology.kubernetes.io/zone": zone}}}))
    .unwrap()
}

fn plan_of(
    ws: &WorkloadSpread,
    replicas: i32,
    pods: &[Pod],
    nodes: &[Node],
    at: Timestamp,
) -> Plan {
    let nodes: BTreeMap<String, &Node> = nodes
        .iter()
        .map(|n| (n.metadata.name.clone().unwrap(), n))
        .collect();
    plan(&World {
        ws,
        kind: TargetKind::CloneSet,
        replicas,
        latest_version: None,
        pods: pods.iter().collect(),
        nodes: &nodes,
        now: at,
    })
}

fn counts(status: &WorkloadSpreadStatus) -> Vec<(String, i32, i32)> {
    status
        .subset_statuses
        .iter()
        .map(|s| (s.name.clone(), s.replicas, s.missing_replicas))
        .collect()
}

fn costs(plan: &Plan) -> BTreeMap<String, String> {
    plan.patches
        .iter()
        .filter_map(|p| {
            Some((
                p.name.clone(),
                p.annotations.get(keys::POD_DELETION_COST)?.clone(),
            ))
        })
        .collect()
}

#[test]
fn caps_resolve_against_the_workload_rounding_up() {
    let s = |max: IntOrString| zone_subset("a", "a", Some(max));
    assert_eq!(max_replicas(&s(IntOrString::Int(2)), 10), Some(2));
    assert_eq!(
        max_replicas(&s(IntOrString::String("80%".into())), 5),
        Some(4)
    );
    assert_eq!(
        max_replicas(&s(IntOrString::String("30%".into())), 5),
        Some(2)
    );
    assert_eq!(
        max_replicas(&s(IntOrString::String("100%".into())), 5),
        Some(5)
    );
    assert_eq!(max_replicas(&zone_subset("a", "a", None), 5), None);
    // Unreadable (admission refuses it): no cap, never a reason to act.
    assert_eq!(
        max_replicas(&s(IntOrString::String("lots".into())), 5),
        None
    );
}

#[test]
fn d2_first_two_pods_go_to_zone_a_the_third_to_zone_b_without_a_record() {
    let mut ws = d2();
    let placed = place_all(&mut ws, 3, 3);
    assert_eq!(
        placed,
        [
            Some("zone-a".into()),
            Some("zone-a".into()),
            Some("zone-b".into())
        ]
    );
    let status = ws.status.unwrap();
    assert_eq!(status.subset_statuses[0].missing_replicas, 0);
    assert_eq!(
        status.subset_statuses[0]
            .creating_pods
            .keys()
            .collect::<Vec<_>>(),
        ["p0", "p1"]
    );
    // zone-b has no cap: the third Pod wrote nothing there.
    assert!(status.subset_statuses[1].creating_pods.is_empty());
    assert_eq!(status.subset_statuses[1].missing_replicas, -1);
}

#[test]
fn a_single_unlimited_subset_is_used_without_a_status_write() {
    let ws = ws(vec![zone_subset("only", "zone-a", None)]);
    let placed = place(&ws, TargetKind::CloneSet, 3, &new_pod("p"), Time(now())).unwrap();
    assert_eq!((placed.subset, placed.status), (0, None));
}

#[test]
fn a_full_subset_and_an_unlimited_one_take_the_pod_without_a_record() {
    let mut ws = d2();
    ws.status = Some(WorkloadSpreadStatus {
        subset_statuses: vec![
            WorkloadSpreadSubsetStatus {
                name: "zone-a".into(),
                missing_replicas: 0,
                ..Default::default()
            },
            WorkloadSpreadSubsetStatus {
                name: "zone-b".into(),
                missing_replicas: -1,
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    let placed = place(&ws, TargetKind::CloneSet, 3, &new_pod("p"), Time(now())).unwrap();
    assert_eq!((placed.subset, placed.status), (1, None));
}

#[test]
fn a_pod_with_only_generate_name_is_recorded_under_the_generated_id() {
    let ws = d2();
    let pod = NewPod {
        name: "",
        version: keys::WS_VERSION_IGNORED,
        generated_uid: "6f1c",
    };
    let placed = place(&ws, TargetKind::CloneSet, 3, &pod, Time(now())).unwrap();
    assert_eq!(placed.generated_uid.as_deref(), Some("6f1c"));
    let status = placed.status.unwrap();
    assert!(status.subset_statuses[0].creating_pods.contains_key("6f1c"));
}

#[test]
fn unschedulable_subsets_are_skipped_and_a_recorded_pod_keeps_its_subset() {
    let mut ws = d2();
    let placed = place(&ws, TargetKind::CloneSet, 3, &new_pod("p0"), Time(now())).unwrap();
    ws.status = placed.status;
    // The same Pod again (a retried create): same subset, nothing new written.
    let again = place(&ws, TargetKind::CloneSet, 3, &new_pod("p0"), Time(now())).unwrap();
    assert_eq!((again.subset, again.status), (0, None));
    ws.status.as_mut().unwrap().subset_statuses[0].conditions =
        vec![kruise_api::apps_v1alpha1::WorkloadSpreadSubsetCondition {
            type_: keys::SUBSET_CONDITION_SCHEDULABLE.into(),
            status: "False".into(),
            ..Default::default()
        }];
    let placed = place(&ws, TargetKind::CloneSet, 3, &new_pod("p1"), Time(now())).unwrap();
    assert_eq!(placed.subset, 1);
}

#[test]
fn no_room_anywhere_leaves_the_pod_unchanged() {
    let mut ws = ws(vec![zone_subset("a", "zone-a", Some(IntOrString::Int(1)))]);
    assert_eq!(place_all(&mut ws, 2, 2), [Some("a".into()), None]);
}

#[test]
fn deployment_versions_are_counted_apart() {
    let mut ws = d2();
    ws.spec.target_ref.api_version = "apps/v1".into();
    ws.spec.target_ref.kind = "Deployment".into();
    let at = Time(now());
    for (name, version) in [("a1", "v1"), ("a2", "v1"), ("b1", "v2")] {
        let pod = NewPod {
            name,
            version,
            generated_uid: "",
        };
        let placed = place(&ws, TargetKind::Deployment, 2, &pod, at.clone()).unwrap();
        assert_eq!(
            placed.subset, 0,
            "{name}: each version has zone-a's 2 places"
        );
        ws.status = placed.status;
    }
    let status = ws.status.unwrap();
    assert_eq!(
        status.versioned_subset_statuses["v1"][0].missing_replicas,
        0
    );
    assert_eq!(
        status.versioned_subset_statuses["v2"][0].missing_replicas,
        1
    );
}

#[test]
fn statefulset_pods_are_placed_by_ordinal_skipping_unschedulable_subsets() {
    let subsets = vec![
        zone_subset("a", "zone-a", Some(IntOrString::Int(2))),
        zone_subset("b", "zone-b", Some(IntOrString::Int(1))),
        zone_subset("c", "zone-c", None),
    ];
    let statuses: Vec<_> = subsets
        .iter()
        .map(|s| subset::initial_status(s, 5))
        .collect();
    let at = |o| place_by_ordinal(&subsets, &statuses, 5, o);
    assert_eq!(
        (at(0), at(1), at(2), at(3), at(9)),
        (Some(0), Some(0), Some(1), Some(2), Some(2))
    );
    let mut blocked = statuses.clone();
    blocked[0].conditions = vec![kruise_api::apps_v1alpha1::WorkloadSpreadSubsetCondition {
        type_: keys::SUBSET_CONDITION_SCHEDULABLE.into(),
        status: "False".into(),
        ..Default::default()
    }];
    assert_eq!(place_by_ordinal(&subsets, &blocked, 5, 0), Some(1));
}

#[test]
fn a_deletion_is_recorded_once_and_frees_room() {
    let mut ws = d2();
    place_all(&mut ws, 2, 2);
    let at = Time(now());
    let status = record_deletion(
        &ws,
        TargetKind::CloneSet,
        2,
        "zone-a",
        "p0",
        keys::WS_VERSION_IGNORED,
        at.clone(),
    )
    .unwrap();
    assert_eq!(status.subset_statuses[0].missing_replicas, 1);
    assert!(status.subset_statuses[0].deleting_pods.contains_key("p0"));
    ws.status = Some(status);
    assert!(
        record_deletion(
            &ws,
            TargetKind::CloneSet,
            2,
            "zone-a",
            "p0",
            keys::WS_VERSION_IGNORED,
            at.clone()
        )
        .is_none()
    );
    // zone-b has no cap: recorded, missingReplicas stays -1.
    let status = record_deletion(
        &ws,
        TargetKind::CloneSet,
        2,
        "zone-b",
        "p9",
        keys::WS_VERSION_IGNORED,
        at,
    )
    .unwrap();
    assert_eq!(status.subset_statuses[1].missing_replicas, -1);
}

#[test]
fn d2_status_and_deletion_costs() {
    let ws = d2();
    let pods = [
        pod("a1", Some("zone-a"), "n0", true),
        pod("a2", Some("zone-a"), "n1", true),
        pod("b1", Some("zone-b"), "n2", true),
    ];
    let plan = plan_of(&ws, 3, &pods, &[], now());
    assert_eq!(
        counts(&plan.status),
        [("zone-a".into(), 2, 0), ("zone-b".into(), 1, -1)]
    );
    assert_eq!(
        costs(&plan),
        BTreeMap::from([
            ("a1".into(), "200".into()),
            ("a2".into(), "200".into()),
            ("b1".into(), "100".into())
        ])
    );
    assert_eq!(plan.status.observed_generation, 1);
    assert!(plan.deletions.is_empty() && plan.requeue_after.is_none());
}

#[test]
fn surplus_pods_are_the_unhealthy_ones_and_strays_cost_least() {
    let ws = d2();
    let mut pods = vec![
        pod("h1", Some("zone-a"), "n0", true),
        pod("h2", Some("zone-a"), "n0", true),
        pod("u1", Some("zone-a"), "n0", false),
        pod("u2", Some("zone-a"), "", false),
        pod("u3", Some("zone-a"), "n0", false),
        pod("stray", Some("gone-subset"), "n0", true),
    ];
    let mut finished = pod("done", Some("zone-a"), "n0", true);
    finished.status.as_mut().unwrap().phase = Some("Succeeded".into());
    pods.push(finished);
    let plan = plan_of(&ws, 6, &pods, &[], now());
    let c = costs(&plan);
    assert_eq!(c["h1"], "200");
    assert_eq!(c["h2"], "200");
    for u in ["u1", "u2", "u3"] {
        assert_eq!(c[u], "-100", "{u} is surplus");
    }
    assert_eq!(c["stray"], "-300");
    assert!(!c.contains_key("done"), "a finished Pod is not counted");
    assert_eq!(counts(&plan.status)[0], ("zone-a".into(), 5, 0));
}

#[test]
fn unchanged_costs_are_not_written_and_zero_is_never_added() {
    let mut p = pod("a1", Some("zone-a"), "n0", true);
    assert_eq!(cost::cost_change(&p, 0), None);
    assert_eq!(cost::cost_change(&p, 200).as_deref(), Some("200"));
    p.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(keys::POD_DELETION_COST.into(), "200".into());
    assert_eq!(cost::cost_change(&p, 200), None);
    assert_eq!(cost::cost_change(&p, 0).as_deref(), Some("0"));
}

#[test]
fn old_versions_leave_the_preferred_subsets_first() {
    let members_a = [pod("a", Some("zone-a"), "n0", true)];
    let members_b = [pod("b", Some("zone-b"), "n2", true)];
    let members = vec![members_a.iter().collect(), members_b.iter().collect()];
    let maxes = [Some(2), None];
    let new = cost::deletion_costs(&members, &[], &maxes, false);
    let old = cost::deletion_costs(&members, &[], &maxes, true);
    assert_eq!((new["a"], new["b"]), (200, 100));
    assert_eq!((old["a"], old["b"]), (100, 200));
}

#[test]
fn creation_records_last_until_the_pod_is_seen_or_30s() {
    let mut ws = d2();
    let t0 = now();
    let placed = place(&ws, TargetKind::CloneSet, 3, &new_pod("p0"), Time(t0)).unwrap();
    ws.status = placed.status;
    // Not seen yet: still counted, so zone-a has 1 place left.
    let plan = plan_of(&ws, 3, &[], &[], t0 + SignedDuration::from_secs(5));
    assert_eq!(counts(&plan.status)[0], ("zone-a".into(), 0, 1));
    assert!(
        plan.status.subset_statuses[0]
            .creating_pods
            .contains_key("p0")
    );
    let wait = plan.requeue_after.unwrap();
    assert!(wait > std::time::Duration::from_secs(24) && wait < std::time::Duration::from_secs(26));
    // Seen: the record goes, the Pod counts.
    let plan = plan_of(&ws, 3, &[pod("p0", Some("zone-a"), "n0", true)], &[], t0);
    assert_eq!(counts(&plan.status)[0], ("zone-a".into(), 1, 1));
    assert!(plan.status.subset_statuses[0].creating_pods.is_empty());
    // Never seen: after 30s the record expires, with CreatePodFailed.
    let plan = plan_of(&ws, 3, &[], &[], t0 + SignedDuration::from_secs(30));
    assert_eq!(counts(&plan.status)[0], ("zone-a".into(), 0, 2));
    assert_eq!(plan.events[0].reason, keys::EVENT_WS_CREATE_POD_FAILED);
}

#[test]
fn a_generated_id_record_clears_when_its_pod_is_seen() {
    let mut ws = d2();
    let pod_ref = NewPod {
        name: "",
        version: keys::WS_VERSION_IGNORED,
        generated_uid: "6f1c",
    };
    ws.status = place(&ws, TargetKind::CloneSet, 3, &pod_ref, Time(now()))
        .unwrap()
        .status;
    let mut p = pod("cs-demo-xk2f9", None, "n0", true);
    p.metadata.annotations = Some(BTreeMap::from([(
        keys::WS_MATCHED.into(),
        r#"{"name":"ws-demo","subset":"zone-a","uid":"6f1c"}"#.into(),
    )]));
    let plan = plan_of(&ws, 3, &[p], &[], now());
    assert_eq!(counts(&plan.status)[0], ("zone-a".into(), 1, 1));
    assert!(plan.status.subset_statuses[0].creating_pods.is_empty());
}

#[test]
fn deletion_records_last_while_the_pod_exists_up_to_15s() {
    let mut ws = d2();
    let pods = [
        pod("a1", Some("zone-a"), "n0", true),
        pod("a2", Some("zone-a"), "n0", true),
    ];
    let t0 = now();
    ws.status = Some(plan_of(&ws, 2, &pods, &[], t0).status);
    ws.status = record_deletion(
        &ws,
        TargetKind::CloneSet,
        2,
        "zone-a",
        "a1",
        keys::WS_VERSION_IGNORED,
        Time(t0),
    );
    let plan = plan_of(&ws, 2, &pods, &[], t0 + SignedDuration::from_secs(1));
    assert_eq!(
        counts(&plan.status)[0],
        ("zone-a".into(), 2, 1),
        "room for the replacement"
    );
    let plan = plan_of(&ws, 2, &pods[1..], &[], t0 + SignedDuration::from_secs(1));
    assert_eq!(counts(&plan.status)[0], ("zone-a".into(), 1, 1));
    assert!(
        plan.status.subset_statuses[0].deleting_pods.is_empty(),
        "the Pod is gone"
    );
    let plan = plan_of(&ws, 2, &pods, &[], t0 + SignedDuration::from_secs(15));
    assert_eq!(counts(&plan.status)[0], ("zone-a".into(), 2, 0));
    assert_eq!(plan.events[0].reason, keys::EVENT_WS_DELETE_POD_FAILED);
}

#[test]
fn a_cap_that_does_not_read_changes_no_pod() {
    let mut ws = adaptive(d2(), 10);
    ws.spec.subsets[0].max_replicas = Some(IntOrString::String("lots".into()));
    let t0 = now();
    let pods = [
        stuck_pod("s1", "zone-a", t0),
        pod("b1", Some("zone-b"), "n2", true),
    ];
    let plan = plan_of(&ws, 2, &pods, &[], t0 + SignedDuration::from_secs(60));
    assert!(plan.patches.is_empty() && plan.deletions.is_empty());
    assert_eq!(
        plan.events.last().unwrap().reason,
        crate::events::INVALID_SPEC
    );
    assert_eq!(counts(&plan.status)[1], ("zone-b".into(), 1, -1));
    // Nor is a new Pod placed.
    assert_eq!(
        place(&ws, TargetKind::CloneSet, 2, &new_pod("p"), Time(t0)),
        None
    );
}

#[test]
fn percent_caps_count_each_subset_against_the_workload() {
    let ws = ws(vec![
        zone_subset("a", "zone-a", Some(IntOrString::String("100%".into()))),
        zone_subset("b", "zone-b", Some(IntOrString::String("80%".into()))),
    ]);
    let pods = [
        pod("p1", Some("a"), "n0", true),
        pod("p2", Some("b"), "n2", true),
    ];
    let plan = plan_of(&ws, 5, &pods, &[], now());
    assert_eq!(
        counts(&plan.status),
        [("a".into(), 1, 4), ("b".into(), 1, 3)]
    );
}

#[test]
/// As OpenKruise (and its e2e spec "manage the pods that were created before
/// workloadspread"): a full subset still takes a Pod only its nodes match; the cap
/// shows as a surplus with a negative deletion cost.
fn unannotated_pods_are_matched_by_their_node_even_beyond_the_cap() {
    let mut ws = d2();
    ws.spec.subsets[0].patch = Some(json!({"metadata": {"labels": {"tier": "a"}}}));
    let pods = [
        pod("old1", None, "n0", true),
        pod("old2", None, "n1", true),
        pod("old3", None, "n0", true),
        pod("old4", None, "n2", true),
    ];
    let nodes = [
        node("n0", "zone-a"),
        node("n1", "zone-a"),
        node("n2", "zone-b"),
    ];
    let plan = plan_of(&ws, 4, &pods, &nodes, now());
    let subset_of = |name: &str| {
        plan.patches
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.annotations.get(keys::WS_MATCHED))
            .map(|a| {
                serde_json::from_str::<InjectWorkloadSpread>(a)
                    .unwrap()
                    .subset
            })
    };
    assert_eq!(subset_of("old1").as_deref(), Some("zone-a"));
    assert_eq!(subset_of("old2").as_deref(), Some("zone-a"));
    assert_eq!(
        subset_of("old3").as_deref(),
        Some("zone-a"),
        "zone-a is full, but zone-b does not match its node"
    );
    assert_eq!(subset_of("old4").as_deref(), Some("zone-b"));
    let old1 = plan.patches.iter().find(|p| p.name == "old1").unwrap();
    assert_eq!(old1.labels["tier"], "a");
    let costs = costs(&plan);
    let zone_a: Vec<&str> = ["old1", "old2", "old3"]
        .iter()
        .map(|p| costs[*p].as_str())
        .collect();
    assert_eq!(
        zone_a.iter().filter(|c| **c == "-100").count(),
        1,
        "{costs:?}"
    );
    assert_eq!(
        zone_a.iter().filter(|c| **c == "200").count(),
        2,
        "{costs:?}"
    );
    assert_eq!(counts(&plan.status)[0].0, "zone-a");
    assert_eq!(counts(&plan.status)[0].1, 3);
}

fn adaptive(mut ws: WorkloadSpread, seconds: i32) -> WorkloadSpread {
    ws.spec.schedule_strategy = serde_json::from_value(json!({
        "type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": seconds}}))
    .unwrap();
    ws
}

#[test]
fn adaptive_marks_the_subset_unschedulable_deletes_the_pod_and_recovers_after_300s() {
    let mut ws = adaptive(d2(), 10);
    let t0 = now();
    let waiting = [stuck_pod("s1", "zone-a", t0)];
    let plan = plan_of(&ws, 2, &waiting, &[], t0 + SignedDuration::from_secs(5));
    assert!(plan.deletions.is_empty());
    assert_eq!(plan.requeue_after.map(|d| d.as_secs()), Some(5));
    let t1 = t0 + SignedDuration::from_secs(10);
    let plan = plan_of(&ws, 2, &waiting, &[], t1);
    assert_eq!(plan.deletions, [("s1".to_string(), "uid-s1".to_string())]);
    let conditions = |p: &Plan, i: usize| p.status.subset_statuses[i].conditions[0].status.clone();
    assert_eq!(
        (conditions(&plan, 0), conditions(&plan, 1)),
        ("False".into(), "True".into())
    );
    ws.status = Some(plan.status);
    // The recovery is requeued for its very time, not a moment after: a client waiting
    // for it (OpenKruise's `reschedule subset-a` polls for 300 s) has little to spare.
    let plan = plan_of(&ws, 2, &[], &[], t1 + SignedDuration::from_millis(200_250));
    assert_eq!(conditions(&plan, 0), "False");
    assert_eq!(
        plan.requeue_after,
        Some(std::time::Duration::from_millis(99_750))
    );
    let plan = plan_of(&ws, 2, &[], &[], t1 + SignedDuration::from_secs(299));
    assert_eq!(conditions(&plan, 0), "False");
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(1)));
    let plan = plan_of(&ws, 2, &[], &[], t1 + SignedDuration::from_secs(300));
    assert_eq!(conditions(&plan, 0), "True");
    assert_eq!(plan.events[0].reason, keys::EVENT_WS_RECOVER_SCHEDULABLE);
}

#[test]
fn the_last_subset_never_becomes_unschedulable_and_fixed_moves_nothing() {
    let t0 = now();
    let waiting = [stuck_pod("s1", "zone-b", t0)];
    let later = t0 + SignedDuration::from_secs(60);
    let plan = plan_of(&adaptive(d2(), 10), 2, &waiting, &[], later);
    assert!(plan.deletions.is_empty());
    assert_eq!(plan.status.subset_statuses[1].conditions[0].status, "True");
    let waiting = [stuck_pod("s1", "zone-a", t0)];
    let plan = plan_of(&d2(), 2, &waiting, &[], later);
    assert!(plan.deletions.is_empty());
    assert!(plan.status.subset_statuses[0].conditions.is_empty());
}

#[test]
fn injection_appends_to_every_required_term_and_a_new_priority_class_clears_priority() {
    let mut subset = zone_subset("zone-a", "zone-a", None);
    subset.tolerations =
        vec![serde_json::from_value(json!({"key": "k", "operator": "Exists"})).unwrap()];
    subset.patch =
        Some(json!({"spec": {"priorityClassName": "high"}, "metadata": {"labels": {"s": "a"}}}));
    let mut pod = json!({"metadata": {"name": "p"}, "spec": {
        "priority": 0, "priorityClassName": "low",
        "tolerations": [{"key": "x", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]},
            {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]}]}]}}},
        "containers": []}});
    let matched = InjectWorkloadSpread {
        name: "ws-demo".into(),
        subset: "zone-a".into(),
        uid: String::new(),
    };
    inject::inject(&mut pod, &subset, &matched);
    let terms = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    for term in terms.as_array().unwrap() {
        assert_eq!(
            term["matchExpressions"][1]["key"],
            "topology.kubernetes.io/zone"
        );
    }
    assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 2);
    assert_eq!(pod["spec"]["priorityClassName"], "high");
    assert!(pod["spec"].get("priority").is_none());
    assert_eq!(pod["metadata"]["labels"]["s"], "a");
    assert_eq!(
        pod["metadata"]["annotations"][keys::WS_MATCHED],
        r#"{"name":"ws-demo","subset":"zone-a"}"#
    );
    // A Pod without required terms gets the subset's as its only term.
    let mut bare = json!({"metadata": {}, "spec": {"containers": []}});
    inject::inject(&mut bare, &subset, &matched);
    let terms = &bare["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(terms.as_array().unwrap().len(), 1);
    assert!(bare["spec"].get("priority").is_none());
}

proptest! {
    /// Whatever the caps and the order of arrival, sequential placements (each on the
    /// status the previous one wrote, as the webhook's resourceVersion-guarded writes
    /// serialize them) never put more Pods in a subset than its cap, and fill the
    /// subsets in preference order.
    #[test]
    fn placements_never_exceed_a_cap(
        caps in proptest::collection::vec(proptest::option::of(0i32..6), 1..5),
        pods in 0usize..30,
        replicas in 0i32..30,
    ) {
        let subsets: Vec<_> = caps
            .iter()
            .enumerate()
            .map(|(i, c)| zone_subset(&format!("s{i}"), "z", c.map(IntOrString::Int)))
            .collect();
        let mut w = ws(subsets);
        let placed = place_all(&mut w, replicas, pods);
        let mut per: BTreeMap<String, i32> = BTreeMap::new();
        for name in placed.iter().flatten() {
            *per.entry(name.clone()).or_insert(0) += 1;
        }
        for (i, cap) in caps.iter().enumerate() {
            let got = per.get(&format!("s{i}")).copied().unwrap_or(0);
            if let Some(cap) = cap {
                prop_assert!(got <= *cap, "s{i}: {got} > {cap}");
            }
        }
        // Preference order: a Pod goes to a later subset only when every earlier one is full.
        let first_unlimited = caps.iter().position(Option::is_none);
        let capacity: i32 = caps.iter().take(first_unlimited.map_or(caps.len(), |i| i + 1)).map(|c| c.unwrap_or(i32::MAX / 8)).sum();
        let expected_placed = (pods as i64).min(i64::from(capacity));
        prop_assert_eq!(placed.iter().flatten().count() as i64, expected_placed);
    }

    /// Costs follow preference: every Pod within a subset's cap costs more than every
    /// Pod of a later subset, surplus Pods cost less than any Pod within a cap, and Pods
    /// in no subset cost the least.
    #[test]
    fn deletion_costs_follow_subset_preference(
        sizes in proptest::collection::vec(0usize..5, 1..4),
        caps in proptest::collection::vec(proptest::option::of(0i32..4), 4),
        strays in 0usize..3,
    ) {
        let members_owned: Vec<Vec<Pod>> = sizes
            .iter()
            .enumerate()
            .map(|(i, n)| (0..*n).map(|j| pod(&format!("s{i}-{j}"), None, "n0", j % 2 == 0)).collect())
            .collect();
        let fake_owned: Vec<Pod> = (0..strays).map(|j| pod(&format!("x{j}"), None, "n0", true)).collect();
        let members: Vec<Vec<&Pod>> = members_owned.iter().map(|m| m.iter().collect()).collect();
        let fake: Vec<&Pod> = fake_owned.iter().collect();
        let maxes = &caps[..sizes.len()];
        let c = cost::deletion_costs(&members, &fake, maxes, false);
        let within: Vec<(usize, i32)> = c.iter().filter(|(k, v)| k.starts_with('s') && **v > 0)
            .map(|(k, v)| (k[1..].split('-').next().unwrap().parse().unwrap(), *v)).collect();
        for (i, a) in &within {
            for (j, b) in &within {
                if i < j { prop_assert!(a > b); }
            }
        }
        let lowest_within = within.iter().map(|(_, v)| *v).min().unwrap_or(i32::MAX);
        for (k, v) in &c {
            if k.starts_with('x') {
                prop_assert!(c.values().filter(|w| *w != v).all(|w| w > v));
            } else if *v < 0 {
                prop_assert!(*v < lowest_within);
            }
        }
        for (i, m) in members.iter().enumerate() {
            let surplus = m.iter().filter(|p| c[kruise_ordering::predicates::name(p)] < 0).count();
            let expected = maxes[i].map_or(0, |cap| m.len().saturating_sub(cap as usize));
            prop_assert_eq!(surplus, expected);
        }
    }
}

#[test]
fn a_pod_annotated_for_another_workloadspread_is_matched_by_its_node() {
    let subsets = vec![zone_subset("zone-a", "a", None)];
    let mut other = pod("cs-demo-1", None, "n0", true);
    other.metadata.annotations = Some(BTreeMap::from([(
        keys::WS_MATCHED.into(),
        r#"{"name":"fakeWS","subset":"subset-a"}"#.into(),
    )]));
    assert_eq!(
        membership(&other, "ws-demo", &subsets),
        Membership::Unannotated
    );
    let mut no_subset = pod("cs-demo-2", None, "n0", true);
    no_subset.metadata.annotations = Some(BTreeMap::from([(
        keys::WS_MATCHED.into(),
        r#"{"name":"ws-demo","subset":""}"#.into(),
    )]));
    assert_eq!(
        membership(&no_subset, "ws-demo", &subsets),
        Membership::Unannotated
    );
    // Its own annotation for a subset that is gone stays out of every subset.
    let gone = pod("cs-demo-3", Some("zone-z"), "n0", true);
    assert_eq!(membership(&gone, "ws-demo", &subsets), Membership::Fake);
    let ours = pod("cs-demo-4", Some("zone-a"), "n0", true);
    assert_eq!(
        membership(&ours, "ws-demo", &subsets),
        Membership::Subset(0)
    );
}
