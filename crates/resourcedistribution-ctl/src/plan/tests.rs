//! Plans: an RD listing one namespace and selecting others by label, and the edge cases (excluded
//! namespaces, foreign objects, metadata-only differences).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps_v1alpha1::ResourceDistributionTargets;
use proptest::prelude::*;
use serde_json::json;

use super::targets::tests::{list, ns};
use super::*;

fn source() -> Source {
    Source {
        rd_name: "rd-secret".into(),
        rd_uid: "uid-1".into(),
        resource: json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "app-token"},
            "type": "Opaque",
            "data": {"token": "ZGVtby10b2tlbg=="},
        }),
    }
}

fn d5_targets(included: &[&str]) -> ResourceDistributionTargets {
    ResourceDistributionTargets {
        included_namespaces: list(included),
        namespace_label_selector: LabelSelector {
            match_labels: Some(BTreeMap::from([("group".into(), "test".into())])),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn with_uid(mut object: Value, uid: &str) -> Value {
    object["metadata"]["uid"] = json!(uid);
    object
}

fn created(plan: &Plan) -> Vec<&str> {
    plan.writes
        .iter()
        .filter(|w| matches!(w, Write::Create { .. }))
        .map(Write::namespace)
        .collect()
}

#[test]
fn d5_creates_a_copy_in_the_listed_and_the_labelled_namespace() {
    let s = source();
    let namespaces = [
        ns("ns-1", &[]),
        ns("ns-2", &[("group", "test")]),
        ns("ns-3", &[]),
    ];
    let p = plan(&World {
        source: &s,
        targets: &d5_targets(&["ns-1"]),
        namespaces: &namespaces,
        owned: &[],
    })
    .unwrap();
    assert_eq!(created(&p), ["ns-1", "ns-2"]);
    assert!(p.deletes.is_empty());
    assert_eq!(p.matched.len(), 2);
}

#[test]
fn d5_a_namespace_losing_its_label_loses_its_copy() {
    let s = source();
    let namespaces = [ns("ns-1", &[]), ns("ns-2", &[]), ns("ns-3", &[])];
    let owned = [
        with_uid(s.desired("ns-1"), "c1"),
        with_uid(s.desired("ns-2"), "c2"),
    ];
    let p = plan(&World {
        source: &s,
        targets: &d5_targets(&["ns-1"]),
        namespaces: &namespaces,
        owned: &owned,
    })
    .unwrap();
    assert!(p.writes.is_empty(), "ns-1's copy is in sync");
    assert_eq!(
        p.deletes,
        [Delete {
            namespace: "ns-2".into(),
            name: "app-token".into(),
            uid: Some("c2".into()),
        }]
    );
}

#[test]
fn missing_and_terminating_namespaces_are_reported_not_written() {
    let s = source();
    let mut leaving = ns("leaving", &[]);
    leaving.terminating = true;
    let p = plan(&World {
        source: &s,
        targets: &ResourceDistributionTargets {
            included_namespaces: list(&["absent", "leaving"]),
            ..Default::default()
        },
        namespaces: &[leaving],
        owned: &[],
    })
    .unwrap();
    assert!(p.writes.is_empty());
    assert_eq!(
        p.failures
            .of(keys::RD_CONDITION_NAMESPACE_NOT_EXISTS)
            .collect::<Vec<_>>(),
        ["absent", "leaving"]
    );
}

/// allNamespaces with an excluded namespace: our copy there is deleted; a same-named object someone
/// else controls is never touched.
#[test]
fn excluded_namespace_loses_only_our_copy() {
    let s = source();
    let namespaces = [ns("a", &[]), ns("b", &[]), ns("c", &[])];
    let mut foreign = with_uid(s.desired("c"), "f");
    foreign["metadata"]["ownerReferences"] = json!([{"uid": "someone-else", "controller": true, "kind": "Other", "name": "o", "apiVersion": "x/v1"}]);
    let owned = [
        with_uid(s.desired("a"), "ca"),
        with_uid(s.desired("b"), "cb"),
        foreign,
    ];
    let p = plan(&World {
        source: &s,
        targets: &ResourceDistributionTargets {
            all_namespaces: true,
            excluded_namespaces: list(&["b", "c"]),
            ..Default::default()
        },
        namespaces: &namespaces,
        owned: &owned,
    })
    .unwrap();
    let deleted: Vec<_> = p.deletes.iter().map(|d| d.namespace.as_str()).collect();
    assert_eq!(deleted, ["b"]);
    assert!(p.writes.is_empty());
}

#[test]
fn an_edited_source_updates_every_copy() {
    let old = source();
    let owned = [
        with_uid(old.desired("ns-1"), "c1"),
        with_uid(old.desired("ns-2"), "c2"),
    ];
    let mut edited = source();
    edited.resource["data"]["token"] = json!("bmV3");
    let p = plan(&World {
        source: &edited,
        targets: &ResourceDistributionTargets {
            included_namespaces: list(&["ns-1", "ns-2"]),
            ..Default::default()
        },
        namespaces: &[ns("ns-1", &[]), ns("ns-2", &[])],
        owned: &owned,
    })
    .unwrap();
    assert_eq!(p.writes.len(), 2);
    for w in &p.writes {
        let Write::Update { object, .. } = w else {
            panic!("expected updates, got {w:?}");
        };
        assert_eq!(object["data"]["token"], "bmV3");
        assert_eq!(
            object["metadata"]["annotations"][keys::RD_RESOURCE_HASHCODE],
            edited.hashcode()
        );
    }
}

#[test]
fn an_invalid_selector_plans_nothing() {
    let s = source();
    let owned = [with_uid(s.desired("a"), "ca")];
    let targets = ResourceDistributionTargets {
        namespace_label_selector: LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "k".into(),
                    operator: "In".into(),
                    values: None,
                },
            ]),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(
        plan(&World {
            source: &s,
            targets: &targets,
            namespaces: &[ns("a", &[])],
            owned: &owned,
        })
        .is_err()
    );
}

#[test]
fn slow_start_doubles() {
    assert_eq!(slow_start_batches(0), Vec::<usize>::new());
    assert_eq!(slow_start_batches(1), [1]);
    assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
}

proptest! {
    #[test]
    fn slow_start_covers_everything_once(n in 0usize..500) {
        let sizes = slow_start_batches(n);
        prop_assert_eq!(sizes.iter().sum::<usize>(), n);
        for (i, s) in sizes.iter().enumerate() {
            prop_assert!(*s >= 1 && *s <= 1 << i);
        }
    }

    /// Whatever exists and whatever we own: a write goes only to an existing, matched
    /// namespace, a delete only to our copy outside the matched set, never both.
    #[test]
    fn writes_and_deletes_never_cross(
        existing in proptest::collection::btree_set("[a-e]", 0..5),
        ours in proptest::collection::btree_set("[a-e]", 0..5),
        included in proptest::collection::vec("[a-f]", 0..4),
        excluded in proptest::collection::vec("[a-f]", 0..3),
        all in any::<bool>(),
    ) {
        let s = source();
        let namespaces: Vec<_> = existing.iter().map(|n| ns(n, &[])).collect();
        let owned: Vec<_> = ours.iter().map(|n| with_uid(s.desired(n), n)).collect();
        let refs = |v: &Vec<String>| list(&v.iter().map(String::as_str).collect::<Vec<_>>());
        let targets = ResourceDistributionTargets {
            all_namespaces: all,
            included_namespaces: refs(&included),
            excluded_namespaces: refs(&excluded),
            ..Default::default()
        };
        let p = plan(&World { source: &s, targets: &targets, namespaces: &namespaces, owned: &owned }).unwrap();
        for w in &p.writes {
            prop_assert!(existing.contains(w.namespace()));
            prop_assert!(p.matched.contains(w.namespace()));
            prop_assert!(!excluded.iter().any(|e| e == w.namespace()));
            prop_assert!(matches!(w, Write::Create { .. }), "in-sync copies need no update");
            prop_assert!(!ours.contains(w.namespace()));
        }
        for d in &p.deletes {
            prop_assert!(ours.contains(&d.namespace));
            prop_assert!(!p.matched.contains(&d.namespace));
        }
        let unsynced = p.matched.iter().filter(|m| existing.contains(*m) && !ours.contains(*m)).count();
        prop_assert_eq!(p.writes.len(), unsynced);
    }
}
