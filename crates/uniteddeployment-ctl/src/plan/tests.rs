//! plan(): which writes a reconcile makes, and the status it reports.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::UnitedDeployment;
use kruise_api::keys;
use serde_json::json;

use super::status::{StatusInput, compute_status};
use super::*;

fn ud(partitions: serde_json::Value, subsets: &[&str]) -> UnitedDeployment {
    let subsets: Vec<_> = subsets.iter().map(|s| json!({"name": s})).collect();
    serde_json::from_value(json!({
        "metadata": {"name": "sample-ud", "namespace": "ns", "uid": "u-1", "generation": 2},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "sample"}},
            "template": {"cloneSetTemplate": {"metadata": {"labels": {"app": "sample"}}, "spec": {
                "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
            }}},
            "topology": {"subsets": subsets},
            "updateStrategy": {"type": "Manual", "manualUpdate": {"partitions": partitions}},
        }
    }))
    .unwrap()
}

fn workload(
    kind: WorkloadKind,
    name: &str,
    subset: &str,
    revision: &str,
    replicas: i32,
) -> Observed {
    Observed {
        kind,
        meta: ObjectMeta {
            name: Some(name.into()),
            creation_timestamp: Some(Time(jiff::Timestamp::UNIX_EPOCH)),
            labels: Some(
                [
                    (keys::UD_SUBSET_NAME.to_string(), subset.to_string()),
                    (
                        keys::UD_CONTROLLER_REVISION_HASH.to_string(),
                        revision.to_string(),
                    ),
                ]
                .into(),
            ),
            ..Default::default()
        },
        replicas,
        partition: Some(0),
        ready_replicas: replicas,
    }
}

fn cs(name: &str, subset: &str, replicas: i32) -> Observed {
    workload(WorkloadKind::CloneSet, name, subset, "rev-1", replicas)
}

#[test]
fn creates_one_workload_per_subset_with_the_split() {
    let ud = ud(json!({}), &["subset-a", "subset-b", "subset-c"]);
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let d = plan(&world);
    assert_eq!(d.allocation.as_ref().unwrap().values().sum::<i32>(), 6);
    let created: Vec<_> = d
        .writes
        .iter()
        .map(|w| match w {
            Write::Create { subset, object } => {
                (subset.as_str(), object["spec"]["replicas"].clone())
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        created,
        [
            ("subset-a", json!(2)),
            ("subset-b", json!(2)),
            ("subset-c", json!(2))
        ]
    );
}

#[test]
fn nothing_to_write_when_everything_matches() {
    let ud = ud(json!({}), &["subset-a", "subset-b"]);
    let (a, b) = (cs("a1", "subset-a", 3), cs("b1", "subset-b", 3));
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![&a, &b],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    assert_eq!(plan(&world).writes, []);
}

#[test]
fn scale_and_partition_are_a_small_patch() {
    let ud = ud(json!({"subset-a": 2}), &["subset-a", "subset-b"]);
    let (a, b) = (cs("a1", "subset-a", 3), cs("b1", "subset-b", 2));
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![&a, &b],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let d = plan(&world);
    assert_eq!(
        d.writes,
        [
            Write::Scale {
                subset: "subset-a".into(),
                workload: WorkloadRef {
                    kind: WorkloadKind::CloneSet,
                    name: "a1".into()
                },
                patch: json!({"spec": {"replicas": 3, "updateStrategy": {"partition": 2}}}),
            },
            Write::Scale {
                subset: "subset-b".into(),
                workload: WorkloadRef {
                    kind: WorkloadKind::CloneSet,
                    name: "b1".into()
                },
                patch: json!({"spec": {"replicas": 3, "updateStrategy": {"partition": 0}}}),
            },
        ]
    );
}

/// `ud` with its CloneSet template in the v1beta1 shape (OpenKruise v1.9).
fn v1beta1_ud(partitions: serde_json::Value, subsets: &[&str]) -> UnitedDeployment {
    let mut ud = ud(partitions, subsets);
    let mut template = serde_json::to_value(&ud.spec.template).unwrap();
    template["cloneSetTemplate"]["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}});
    ud.spec.template = serde_json::from_value(template).unwrap();
    ud
}

#[test]
fn v1beta1_template_finds_the_clone_sets_read_at_v1alpha1() {
    // The caches read every CloneSet at v1alpha1: they are kept, and written at v1beta1.
    let ud = v1beta1_ud(json!({"subset-a": 2}), &["subset-a", "subset-b"]);
    let (a, b) = (cs("a1", "subset-a", 3), cs("b1", "subset-b", 3));
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![&a, &b],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let d = plan(&world);
    assert_eq!(
        d.writes,
        [Write::Scale {
            subset: "subset-a".into(),
            workload: WorkloadRef {
                kind: WorkloadKind::CloneSetV1beta1,
                name: "a1".into()
            },
            patch: json!({"spec": {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}}}),
        }]
    );
    let world = World {
        revision: "rev-2",
        ..world
    };
    let d = plan(&world);
    assert_eq!(d.writes.len(), 2);
    for w in &d.writes {
        let Write::Replace {
            workload, object, ..
        } = w
        else {
            panic!("{w:?}")
        };
        assert_eq!(workload.kind, WorkloadKind::CloneSetV1beta1);
        assert_eq!(object["apiVersion"], "apps.kruise.io/v1beta1");
        assert_eq!(
            object["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"],
            "InPlaceIfPossible"
        );
    }
}

#[test]
fn a_new_revision_replaces_every_subset_workload() {
    let ud = ud(json!({"subset-a": 2}), &["subset-a", "subset-b"]);
    let (a, b) = (cs("a1", "subset-a", 3), cs("b1", "subset-b", 3));
    let world = World {
        ud: &ud,
        revision: "rev-2",
        workloads: vec![&a, &b],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let d = plan(&world);
    assert_eq!(d.writes.len(), 2);
    for w in &d.writes {
        let Write::Replace { object, .. } = w else {
            panic!("{w:?}")
        };
        assert_eq!(
            object["metadata"]["labels"][keys::UD_CONTROLLER_REVISION_HASH],
            "rev-2"
        );
        assert_eq!(
            object["spec"]["template"]["metadata"]["labels"][keys::UD_CONTROLLER_REVISION_HASH],
            "rev-2"
        );
    }
    let Write::Replace { object, .. } = &d.writes[0] else {
        unreachable!()
    };
    assert_eq!(object["metadata"]["name"], "a1");
    assert_eq!(object["spec"]["updateStrategy"]["partition"], 2);
}

#[test]
fn removed_subsets_duplicates_and_other_kinds_are_deleted() {
    let ud = ud(json!({}), &["subset-a"]);
    let older = cs("a1", "subset-a", 6);
    let mut newer = cs("a2", "subset-a", 6);
    newer.meta.creation_timestamp = Some(Time(jiff::Timestamp::from_second(10).unwrap()));
    let gone = cs("b1", "subset-b", 3);
    let deployment = workload(WorkloadKind::Deployment, "d1", "subset-a", "rev-1", 1);
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![&newer, &gone, &older, &deployment],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let d = plan(&world);
    let deletes: Vec<_> = d
        .writes
        .iter()
        .map(|w| match w {
            Write::Delete { workload, reason } => (workload.name.as_str(), *reason),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        deletes,
        [
            ("a2", DeleteReason::Duplicate),
            ("b1", DeleteReason::SubsetRemoved),
            ("d1", DeleteReason::OtherKind),
        ]
    );
}

#[test]
fn an_impossible_split_writes_nothing_but_reports_it() {
    let mut ud = ud(json!({}), &["subset-a", "subset-b"]);
    ud.spec.topology.subsets[0].replicas =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9));
    let a = cs("a1", "subset-a", 3);
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![&a],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let d = plan(&world);
    assert!(d.writes.is_empty());
    let kept = kept_workloads(&world);
    let status = compute_status(
        &StatusInput {
            ud: &ud,
            revision: "rev-1",
            collision_count: None,
            kept: &kept,
            pods: &[],
            failures: &[],
            now: jiff::Timestamp::UNIX_EPOCH,
        },
        &d,
    );
    let failure = status
        .conditions
        .iter()
        .find(|c| c.type_ == keys::UD_CONDITION_SUBSET_FAILURE)
        .unwrap();
    assert_eq!(
        failure.message,
        "specified subsets' replica (9) is greater than UnitedDeployment replica (6)"
    );
}

#[test]
fn status_sums_subsets_and_counts_updated_pods() {
    let ud = ud(json!({"subset-a": 1}), &["subset-a", "subset-b"]);
    let (a, b) = (cs("a1", "subset-a", 3), cs("b1", "subset-b", 3));
    let world = World {
        ud: &ud,
        revision: "rev-2",
        workloads: vec![&a, &b],
        pods: vec![],
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let d = plan(&world);
    let pod = |subset: &str, revision: &str, ready: bool| -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {keys::UD_SUBSET_NAME: subset, keys::UD_CONTROLLER_REVISION_HASH: revision}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .unwrap()
    };
    let pods = [
        pod("subset-a", "rev-1", true),
        pod("subset-a", "rev-2", true),
        pod("subset-b", "rev-2", false),
    ];
    let pods: Vec<_> = pods.iter().collect();
    let kept = kept_workloads(&world);
    let mut old = ud.clone();
    old.status = Some(kruise_api::apps_v1alpha1::UnitedDeploymentStatus {
        current_revision: "rev-1".into(),
        ..Default::default()
    });
    let status = compute_status(
        &StatusInput {
            ud: &old,
            revision: "rev-2",
            collision_count: Some(0),
            kept: &kept,
            pods: &pods,
            failures: &[],
            now: jiff::Timestamp::UNIX_EPOCH,
        },
        &d,
    );
    assert_eq!((status.replicas, status.ready_replicas), (6, 6));
    assert_eq!(
        (status.updated_replicas, status.updated_ready_replicas),
        (2, 1)
    );
    assert_eq!(status.current_revision, "rev-1");
    assert_eq!(
        status.subset_replicas,
        BTreeMap::from([("subset-a".into(), 3), ("subset-b".into(), 3)])
    );
    assert_eq!(status.subset_statuses[0].partition, 1);
    assert_eq!(
        status.update_status.as_ref().unwrap().current_partitions["subset-a"],
        1
    );
    assert_eq!(status.label_selector, "app=sample");
    assert_eq!(status.observed_generation, 2);
    let updated = status
        .conditions
        .iter()
        .find(|c| c.type_ == keys::UD_CONDITION_UPDATED)
        .unwrap();
    assert_eq!(updated.status, "False");
}

#[test]
fn adaptive_moves_a_stuck_subsets_replicas_and_reports_it() {
    let mut ud = ud(json!({}), &["subset-a", "subset-b"]);
    ud.spec.replicas = Some(3);
    ud.spec.topology.schedule_strategy = serde_json::from_value(
        json!({"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 10}}),
    )
    .unwrap();
    ud.spec.topology.subsets[0].max_replicas =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2));
    // subset-a has 2 replicas, none ready; one Pod pending unschedulable for 20 s.
    let mut a = cs("a1", "subset-a", 2);
    a.ready_replicas = 0;
    let b = cs("b1", "subset-b", 1);
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "a1-x", "labels": {"app": "sample", (keys::UD_SUBSET_NAME): "subset-a"}},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "lastTransitionTime": "1970-01-01T00:00:00Z"}]}
    }))
    .unwrap();
    let now = jiff::Timestamp::from_second(20).unwrap();
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![&a, &b],
        pods: vec![&pod],
        now,
    };
    let d = plan(&world);
    assert_eq!(
        d.allocation.as_ref().unwrap(),
        &BTreeMap::from([("subset-a".to_string(), 0), ("subset-b".to_string(), 3)])
    );
    let kept = kept_workloads(&world);
    let status = compute_status(
        &StatusInput {
            ud: &ud,
            revision: "rev-1",
            collision_count: None,
            kept: &kept,
            pods: &[&pod],
            failures: &[],
            now,
        },
        &d,
    );
    let a_status = &status.subset_statuses[0];
    assert_eq!(a_status.conditions[0].type_, "Schedulable");
    assert_eq!(a_status.conditions[0].status, "False");
    assert!(status.subset_statuses[1].conditions.is_empty());
    // Recovery is due 300 s (the default) after the transition.
    assert_eq!(
        d.schedulability.next_check,
        Some(now + jiff::SignedDuration::from_secs(300))
    );
}

#[test]
fn reservation_keeps_stuck_pods_and_replaces_them_in_the_next_subset() {
    let mut ud = ud(json!({}), &["subset-a", "subset-b", "subset-c"]);
    ud.spec.replicas = Some(2);
    ud.spec.topology.schedule_strategy = serde_json::from_value(json!({"type": "Adaptive",
        "adaptive": {"rescheduleCriticalSeconds": 10, "reserveUnschedulablePods": true}}))
    .unwrap();
    ud.status = Some(kruise_api::apps_v1alpha1::UnitedDeploymentStatus {
        subset_statuses: ["subset-a", "subset-b", "subset-c"]
            .map(
                |name| kruise_api::apps_v1alpha1::UnitedDeploymentSubsetStatus {
                    name: name.into(),
                    ..Default::default()
                },
            )
            .into(),
        ..Default::default()
    });
    let mut a = cs("a1", "subset-a", 2);
    a.ready_replicas = 0;
    let (b, c) = (cs("b1", "subset-b", 0), cs("c1", "subset-c", 0));
    let pending = |name: &str| -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": "1970-01-01T00:00:00Z", "labels": {
                "app": "sample", (keys::UD_SUBSET_NAME): "subset-a",
                (keys::UD_CONTROLLER_REVISION_HASH): "rev-1"}},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "lastTransitionTime": "1970-01-01T00:00:00Z"}]}
        }))
        .unwrap()
    };
    let pods = [pending("a1-x"), pending("a1-y")];
    let now = jiff::Timestamp::from_second(10).unwrap();
    let world = World {
        ud: &ud,
        revision: "rev-1",
        workloads: vec![&a, &b, &c],
        pods: pods.iter().collect(),
        now,
    };
    let d = plan(&world);
    let labelled: Vec<_> = d
        .schedulability
        .labels
        .iter()
        .map(|l| (l.pod.as_str(), l.value()))
        .collect();
    assert_eq!(labelled, [("a1-x", "true"), ("a1-y", "true")]);
    // subset-a keeps its 2 (reserved) Pods, subset-b runs 2 replacements.
    assert_eq!(
        d.allocation.as_ref().unwrap(),
        &BTreeMap::from([
            ("subset-a".to_string(), 2),
            ("subset-b".to_string(), 2),
            ("subset-c".to_string(), 0)
        ])
    );
    // A schedulable subset's write gives back the template's maxUnavailable (none).
    assert_eq!(
        d.writes,
        [Write::Scale {
            subset: "subset-b".into(),
            workload: WorkloadRef {
                kind: WorkloadKind::CloneSet,
                name: "b1".into()
            },
            patch: json!({"spec": {"replicas": 2, "updateStrategy": {"partition": 0, "maxUnavailable": null}}}),
        }]
    );
    let kept = kept_workloads(&world);
    let pod_refs: Vec<_> = pods.iter().collect();
    let status = compute_status(
        &StatusInput {
            ud: &ud,
            revision: "rev-1",
            collision_count: None,
            kept: &kept,
            pods: &pod_refs,
            failures: &[],
            now,
        },
        &d,
    );
    assert_eq!((status.replicas, status.reserved_pods), (0, 2));
    assert_eq!(status.subset_statuses[0].reserved_pods, 2);
    assert_eq!(status.subset_statuses[0].conditions[0].status, "False");
    assert_eq!(status.subset_statuses[1].conditions[0].status, "True");
    assert_eq!(
        status.label_selector,
        format!("app=sample,{}=false", keys::UD_RESERVED_POD)
    );

    // A new template: the stuck subset's workload may lose all its Pods at once, so its
    // pending ones are replaced by Pods of the new revision.
    let labelled_pods = pods.clone().map(|mut p| {
        let labels = p.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(keys::UD_RESERVED_POD.into(), "true".into());
        p
    });
    let world = World {
        revision: "rev-2",
        pods: labelled_pods.iter().collect(),
        ..world
    };
    let d = plan(&world);
    let replaced = d
        .writes
        .iter()
        .find_map(|w| match w {
            Write::Replace { subset, object, .. } if subset == "subset-a" => Some(object),
            _ => None,
        })
        .unwrap();
    assert_eq!(replaced["spec"]["updateStrategy"]["maxUnavailable"], 2);
    let other = d
        .writes
        .iter()
        .find_map(|w| match w {
            Write::Replace { subset, object, .. } if subset == "subset-c" => Some(object),
            _ => None,
        })
        .unwrap();
    assert!(
        other["spec"]["updateStrategy"]
            .get("maxUnavailable")
            .is_none()
    );
}
