//! The examples of OpenKruise's documentation (CloneSet user manual) and of OpenKruise v0.9.0
//! release notes, through the public API only.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::appspub::{
    UpdatePriorityOrderTerm, UpdatePriorityStrategy, UpdatePriorityWeightTerm, UpdateScatterTerm,
};
use kruise_api::pod::Pod;

use super::pods::{PodBuilder, names, t};
use crate::{DeletionContext, UpdateOrderContext, sort_for_deletion, sort_for_update};

fn update_ctx<'a>(
    priority: Option<&'a UpdatePriorityStrategy>,
    scatter: &'a [UpdateScatterTerm],
) -> UpdateOrderContext<'a> {
    UpdateOrderContext {
        now: t(1000),
        priority,
        scatter,
        preparing_update_first: true,
    }
}

fn deletion_ctx<'a>(
    siblings: &'a [&'a Pod],
    node_labels: &'a BTreeMap<String, BTreeMap<String, String>>,
) -> DeletionContext<'a> {
    DeletionContext {
        now: t(1000),
        min_ready_seconds: 0,
        siblings,
        spread: &[],
        node_labels,
    }
}

fn running(name: &str, node: &str) -> PodBuilder {
    PodBuilder::new(name)
        .node(node)
        .phase("Running")
        .ready_since(t(100))
        .created(t(0))
}

/// OpenKruise's documentation (CloneSet user manual, "update order"): unscheduled < scheduled,
/// pending < unknown < running, not-ready < ready.
#[test]
fn documented_default_update_order() {
    let ready = running("ready", "n1").build();
    let not_ready = running("not-ready", "n1").not_ready(t(0)).build();
    let unknown = running("unknown", "n1")
        .phase("Unknown")
        .not_ready(t(0))
        .build();
    let pending = PodBuilder::new("pending")
        .node("n1")
        .phase("Pending")
        .build();
    let unscheduled = PodBuilder::new("unscheduled").phase("Pending").build();
    let mut pods = vec![&ready, &not_ready, &unknown, &pending, &unscheduled];
    sort_for_update(&mut pods, &update_ctx(None, &[]));
    assert_eq!(
        names(&pods),
        ["unscheduled", "pending", "unknown", "not-ready", "ready"]
    );
}

/// CloneSet user manual: weight `test-key=foo` 50, `test-key=bar` 30 ⇒ foo, then bar, then others.
#[test]
fn documented_weight_priority() {
    let term = |weight, value: &str| UpdatePriorityWeightTerm {
        weight,
        match_selector: LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "test-key".to_string(),
                value.to_string(),
            )])),
            match_expressions: None,
        },
    };
    let strategy = UpdatePriorityStrategy {
        order_priority: vec![],
        weight_priority: vec![term(50, "foo"), term(30, "bar")],
    };
    let pods: Vec<Pod> = [
        ("p0", ""),
        ("p1", "bar"),
        ("p2", "foo"),
        ("p3", ""),
        ("p4", "bar"),
        ("p5", "foo"),
    ]
    .into_iter()
    .map(|(n, v)| {
        let b = running(n, "n1");
        if v.is_empty() {
            b
        } else {
            b.label("test-key", v)
        }
        .build()
    })
    .collect();
    let mut refs: Vec<&Pod> = pods.iter().rev().collect();
    sort_for_update(&mut refs, &update_ctx(Some(&strategy), &[]));
    assert_eq!(names(&refs), ["p2", "p5", "p1", "p4", "p0", "p3"]);
}

/// CloneSet user manual: orderPriority `some-label-key`: "sts-10" before "5".
#[test]
fn documented_order_priority() {
    let strategy = UpdatePriorityStrategy {
        order_priority: vec![UpdatePriorityOrderTerm {
            ordered_key: "some-label-key".into(),
        }],
        weight_priority: vec![],
    };
    let five = running("a", "n1").label("some-label-key", "5").build();
    let ten = running("b", "n1").label("some-label-key", "sts-10").build();
    let one = running("c", "n1").label("some-label-key", "sts-1").build();
    let mut pods = vec![&five, &one, &ten];
    sort_for_update(&mut pods, &update_ctx(Some(&strategy), &[]));
    assert_eq!(names(&pods), ["b", "a", "c"]);
}

/// CloneSet user manual: replicas 10, 3 Pods `foo=bar`, scatter ⇒ 1st, 6th, 10th.
#[test]
fn documented_scatter_1_6_10() {
    let pods: Vec<Pod> = (0..10)
        .map(|i| {
            // Vary the default-order attributes so the matching pods are not adjacent
            // to start with and the default order is not the name order.
            let b = running(&format!("pod-{i}"), &format!("n{}", i % 3)).created(t(i * 7 % 10));
            if [2, 3, 7].contains(&i) {
                b.label("foo", "bar")
            } else {
                b
            }
            .build()
        })
        .collect();
    let scatter = [UpdateScatterTerm {
        key: "foo".into(),
        value: "bar".into(),
    }];
    let mut refs: Vec<&Pod> = pods.iter().collect();
    sort_for_update(&mut refs, &update_ctx(None, &scatter));
    let positions: Vec<usize> = refs
        .iter()
        .enumerate()
        .filter(|(_, p)| crate::predicates::label(p, "foo") == Some("bar"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(positions, [1, 6, 10]);
}

/// OpenKruise's documentation (CloneSet user manual, "scale in"): without podsToDelete, not-ready <
/// ready, unscheduled < scheduled, pending < running.
#[test]
fn documented_default_deletion_order() {
    let ready = running("ready", "n1").build();
    let not_ready = running("not-ready", "n2").not_ready(t(0)).build();
    let pending = PodBuilder::new("pending")
        .node("n3")
        .phase("Pending")
        .build();
    let unscheduled = PodBuilder::new("unscheduled").phase("Pending").build();
    let all = [&ready, &not_ready, &pending, &unscheduled];
    let labels = BTreeMap::new();
    let mut pods = all.to_vec();
    sort_for_deletion(&mut pods, &deletion_ctx(&all, &labels));
    assert_eq!(
        names(&pods),
        ["unscheduled", "pending", "not-ready", "ready"]
    );
}

/// The "deletion priority" list of OpenKruise v0.9.0 release notes, each criterion deciding in turn
/// (lower deletion cost first, missing = 0, after scheduling/phase/readiness).
#[test]
fn v0_9_release_notes_deletion_priority_list() {
    let unscheduled = PodBuilder::new("1-unscheduled").phase("Pending").build();
    let pending = PodBuilder::new("2-pending")
        .node("a")
        .phase("Pending")
        .build();
    let unknown = running("3-unknown", "b")
        .phase("Unknown")
        .not_ready(t(0))
        .build();
    let not_ready = running("4-not-ready", "c")
        .not_ready(t(0))
        .deletion_cost("-1000")
        .build();
    let cheap = running("5-cheap", "d").deletion_cost("-10").build();
    let recent = running("6-ready-recently", "e").ready_since(t(900)).build();
    let restarts = running("7-restarts", "f").restarts(&[3]).build();
    let newer = running("8-newer", "g").created(t(50)).build();
    let no_cost = running("9-oldest", "h").build();
    let costly = running("10-costly", "i")
        .ready_since(t(999))
        .restarts(&[9])
        .created(t(99))
        .deletion_cost("10")
        .build();
    let all = [
        &costly,
        &no_cost,
        &newer,
        &restarts,
        &recent,
        &cheap,
        &not_ready,
        &unknown,
        &pending,
        &unscheduled,
    ];
    let labels = BTreeMap::new();
    let mut pods = all.to_vec();
    sort_for_deletion(&mut pods, &deletion_ctx(&all, &labels));
    assert_eq!(
        names(&pods),
        [
            "1-unscheduled",
            "2-pending",
            "3-unknown",
            "4-not-ready",
            "5-cheap",
            "6-ready-recently",
            "7-restarts",
            "8-newer",
            "9-oldest",
            "10-costly"
        ]
    );
}
