use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::{
    UnitedDeploymentCondition, UnitedDeploymentStatus, UnitedDeploymentSubsetCondition,
    UnitedDeploymentSubsetStatus,
};
use serde_json::{Value, json};

use crate::plan::WorkloadKind;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_000_000 + secs).unwrap()
}

fn time(secs: i64) -> String {
    at(secs).to_string()
}

/// A reserving UD over subsets a, b (critical 10 s, settle 20 s); `statuses` are the
/// previous subset statuses: (name, Schedulable condition status if any).
fn ud(statuses: &[(&str, Option<&str>)]) -> UnitedDeployment {
    let mut ud: UnitedDeployment = serde_json::from_value(json!({
        "metadata": {"name": "ud", "namespace": "ns"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"cloneSetTemplate": {"metadata": {"labels": {"app": "a"}}, "spec": {
                "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
            }}},
            "topology": {
                "subsets": [{"name": "a"}, {"name": "b"}],
                "scheduleStrategy": {"type": "Adaptive", "adaptive": {
                    "rescheduleCriticalSeconds": 10, "unschedulableDuration": 20,
                    "reserveUnschedulablePods": true}},
            },
        }
    }))
    .unwrap();
    ud.status = Some(UnitedDeploymentStatus {
        subset_statuses: statuses
            .iter()
            .map(|(name, status)| UnitedDeploymentSubsetStatus {
                name: name.to_string(),
                conditions: status
                    .map(|s| UnitedDeploymentSubsetCondition {
                        type_: keys::SUBSET_CONDITION_SCHEDULABLE.into(),
                        status: s.into(),
                        last_transition_time: Some(Time(at(0))),
                        reason: REASON_RESCHEDULE.into(),
                        message: String::new(),
                    })
                    .into_iter()
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    ud
}

fn observed(subset: &str, replicas: i32) -> Observed {
    Observed {
        kind: WorkloadKind::CloneSet,
        meta: ObjectMeta {
            name: Some(format!("ud-{subset}")),
            labels: Some([(keys::UD_SUBSET_NAME.to_string(), subset.to_string())].into()),
            ..Default::default()
        },
        replicas,
        partition: None,
        ready_replicas: 0,
    }
}

fn kept(w: &[Observed]) -> BTreeMap<String, &Observed> {
    w.iter()
        .map(|o| (o.subset().unwrap().to_string(), o))
        .collect()
}

/// A Pod of `subset` at `revision`, created at `created`, with `label` as its reserved
/// label; `state`: "pending" (unschedulable), "running" (Ready since `ready`).
fn pod(
    name: &str,
    subset: &str,
    revision: &str,
    label: Option<&str>,
    created: i64,
    state: &str,
    ready: i64,
) -> Pod {
    let mut labels =
        json!({(keys::UD_SUBSET_NAME): subset, (keys::UD_CONTROLLER_REVISION_HASH): revision});
    if let Some(l) = label {
        labels[keys::UD_RESERVED_POD] = json!(l);
    }
    let status: Value = match state {
        "pending" => {
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "lastTransitionTime": time(created)}]})
        }
        _ => json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
            "lastTransitionTime": time(ready)}]}),
    };
    let spec = if state == "pending" {
        json!({})
    } else {
        json!({"nodeName": "n1"})
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "creationTimestamp": time(created)},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn labels(s: &Schedulability) -> Vec<(&str, bool)> {
    s.labels
        .iter()
        .map(|l| (l.pod.as_str(), l.reserved))
        .collect()
}

fn condition(s: &Schedulability, subset: &str) -> (String, String, String) {
    let c = &s.conditions[subset];
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[test]
fn a_pod_pending_past_the_critical_time_is_reserved() {
    let ud = ud(&[("a", None), ("b", None)]);
    let w = [observed("a", 1), observed("b", 0)];
    let p = pod("a-1", "a", "rev", None, 0, "pending", 0);
    // Before the deadline: not reserved, labelled so, looked at again at the deadline.
    let early = schedulability(&ud, &kept(&w), &[&p], "rev", at(5));
    assert_eq!(labels(&early), [("a-1", false)]);
    assert!(early.unschedulable.is_empty());
    assert_eq!(early.next_check, Some(at(10)));
    assert_eq!(
        condition(&early, "a"),
        (
            "True".into(),
            REASON_RESCHEDULE.into(),
            MESSAGE_NONE_RESERVED.into()
        )
    );
    // Past it: reserved, the subset unschedulable.
    let p = pod("a-1", "a", "rev", Some("false"), 0, "pending", 0);
    let late = schedulability(&ud, &kept(&w), &[&p], "rev", at(11));
    assert_eq!(labels(&late), [("a-1", true)]);
    assert_eq!(late.unschedulable, BTreeSet::from(["a".to_string()]));
    assert_eq!(late.reservations["a"].reserved, 1);
    assert_eq!(
        condition(&late, "a"),
        (
            "False".into(),
            REASON_RESCHEDULE.into(),
            MESSAGE_RESERVED.into()
        )
    );
    assert_eq!(late.reservations["b"], SubsetReservation::default());
}

#[test]
fn a_reserved_pod_is_released_once_ready_long_enough() {
    let ud = ud(&[("a", Some("False")), ("b", Some("True"))]);
    let w = [observed("a", 1), observed("b", 1)];
    let p = pod("a-1", "a", "rev", Some("true"), 0, "running", 30);
    let settling = schedulability(&ud, &kept(&w), &[&p], "rev", at(40));
    assert!(settling.labels.is_empty());
    assert_eq!(settling.reservations["a"].reserved, 1);
    assert_eq!(settling.next_check, Some(at(50)));
    let released = schedulability(&ud, &kept(&w), &[&p], "rev", at(50));
    assert_eq!(labels(&released), [("a-1", false)]);
    assert!(released.unschedulable.is_empty());
    assert_eq!(
        condition(&released, "a"),
        (
            "True".into(),
            REASON_RESCHEDULE.into(),
            MESSAGE_NONE_RESERVED.into()
        )
    );
    // Still marked this round: the allocation holds it to what it proved it runs.
    assert!(released.reservations["a"].marked);
    // A reserved Pod of an older revision is never released, however long it runs.
    let old = pod("a-1", "a", "old", Some("true"), 0, "running", 0);
    let held = schedulability(&ud, &kept(&w), &[&old], "rev", at(500));
    assert_eq!(held.reservations["a"].reserved, 1);
}

#[test]
fn pods_created_in_a_marked_subset_start_reserved() {
    let ud = ud(&[("a", Some("False")), ("b", None)]);
    let w = [observed("a", 2), observed("b", 0)];
    let fresh = pod("a-2", "a", "rev", None, 99, "running", 99);
    let got = schedulability(&ud, &kept(&w), &[&fresh], "rev", at(100));
    assert_eq!(labels(&got), [("a-2", true)]);
    assert_eq!(got.reservations["a"].reserved, 1);
    // A Pod already labelled is judged on its own: not pending, not reserved.
    let known = pod("a-1", "a", "rev", Some("false"), 0, "running", 1);
    let got = schedulability(&ud, &kept(&w), &[&known], "rev", at(100));
    assert!(got.labels.is_empty());
    assert_eq!(got.reservations["a"].reserved, 0);
}

#[test]
fn old_revision_pods_are_reserved_when_the_update_lasts_too_long() {
    let mut ud = ud(&[("a", None), ("b", None)]);
    ud.status.as_mut().unwrap().conditions = vec![UnitedDeploymentCondition {
        type_: keys::UD_CONDITION_UPDATED.into(),
        status: "False".into(),
        last_transition_time: Some(Time(at(100))),
        reason: "Updating".into(),
        message: String::new(),
    }];
    let w = [observed("a", 1), observed("b", 0)];
    let p = pod("a-1", "a", "old", Some("false"), 0, "running", 0);
    let early = schedulability(&ud, &kept(&w), &[&p], "rev", at(105));
    assert_eq!(early.reservations["a"].reserved, 0);
    assert_eq!(early.next_check, Some(at(110)));
    let late = schedulability(&ud, &kept(&w), &[&p], "rev", at(110));
    assert_eq!(late.reservations["a"].reserved, 1);
    assert_eq!(late.reservations["a"].update_timeouts, 1);
    assert_eq!(labels(&late), [("a-1", true)]);
}

#[test]
fn a_subset_added_later_starts_unschedulable_and_terminating_pods_do_not_count() {
    let mut ud = ud(&[("a", Some("True"))]);
    let w = [observed("a", 1)];
    let got = schedulability(&ud, &kept(&w), &[], "rev", at(0));
    assert_eq!(
        condition(&got, "b"),
        (
            "False".into(),
            REASON_CREATED.into(),
            MESSAGE_CREATED.into()
        )
    );
    assert!(!got.reservations.contains_key("b"));
    // A brand-new UD (no statuses yet) has no condition for a subset without workload.
    ud.status = None;
    let got = schedulability(&ud, &kept(&w), &[], "rev", at(0));
    assert!(!got.conditions.contains_key("b"));
    let mut going = pod("a-1", "a", "rev", Some("true"), 0, "pending", 0);
    going.metadata.deletion_timestamp = Some(Time(at(1)));
    let got = schedulability(&ud, &kept(&w), &[&going], "rev", at(100));
    assert_eq!(got.reservations["a"].reserved, 0);
    assert!(got.labels.is_empty());
}

#[test]
fn a_recovered_subset_given_more_replicas_is_marked_again() {
    let ud = ud(&[("a", Some("False")), ("b", Some("True"))]);
    let w = [observed("a", 2), observed("b", 2)];
    let mut s = schedulability(&ud, &kept(&w), &[], "rev", at(100));
    assert_eq!(condition(&s, "a").0, "True");
    let grow = BTreeMap::from([("a".to_string(), 4), ("b".to_string(), 0)]);
    after_allocation(&mut s, &kept(&w), &grow, at(100));
    assert_eq!(
        condition(&s, "a"),
        (
            "False".into(),
            REASON_RESCHEDULE.into(),
            MESSAGE_RECOVERED_SCALED_UP.into()
        )
    );
    // b was not marked: untouched; nor is a subset that keeps its replicas.
    assert_eq!(condition(&s, "b").0, "True");
    let mut s = schedulability(&ud, &kept(&w), &[], "rev", at(100));
    let same = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 2)]);
    after_allocation(&mut s, &kept(&w), &same, at(100));
    assert_eq!(condition(&s, "a").0, "True");
}
