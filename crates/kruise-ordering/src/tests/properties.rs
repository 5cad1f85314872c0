//! Property tests: both sorts are total and deterministic, the update sort is a
//! permutation, scatter spreads matched Pods, and the deletion order honours each
//! criterion when the earlier ones tie.
//!
//! Pods are generated from a small [`PodSpec`] so the expected criteria can be read from the
//! [`PodSpec`] directly, independently of the predicates under test.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::appspub::{
    UpdatePriorityOrderTerm, UpdatePriorityStrategy, UpdatePriorityWeightTerm, UpdateScatterTerm,
};
use kruise_api::pod::Pod;
use proptest::prelude::*;

use super::pods::{PodBuilder, names, t};
use crate::deletion::{DeletionContext, co_location_ranks, sort_for_deletion};
use crate::update::{UpdateOrderContext, sort_for_update};

const NOW: i64 = 1000;

#[derive(Clone, Debug)]
struct PodSpec {
    node: Option<u8>,
    /// 0 Pending, 1 Unknown, 2 Running, 3 unset.
    phase: u8,
    /// None: not ready; Some(None): ready without a time; Some(Some(s)): ready since s.
    ready: Option<Option<i64>>,
    /// The annotation and the cost it must parse to.
    cost: Option<(&'static str, i32)>,
    restarts: Vec<i32>,
    created: Option<i64>,
    held: bool,
    test_key: Option<&'static str>,
    order_key: Option<String>,
    foo_bar: bool,
    preparing_update: bool,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    let cost = prop::option::of(prop::sample::select(vec![
        ("5", 5),
        ("-3", -3),
        ("0", 0),
        ("+10", 0),
        ("008", 0),
        ("abc", 0),
        ("-008", -8),
    ]));
    let ready = prop::option::of(prop::option::weighted(
        0.8,
        (0..4i64).prop_map(|s| NOW - 20 * s),
    ));
    (
        (prop::option::weighted(0.85, 0..4u8), 0..4u8, ready, cost),
        (
            prop::collection::vec(0..3i32, 0..3),
            prop::option::weighted(0.9, 0..4i64),
            prop::bool::weighted(0.15),
        ),
        (
            prop::option::of(prop::sample::select(vec!["foo", "bar", "baz"])),
            prop::option::of(
                prop::sample::select(vec!["5", "sts-10", "x", "a-3"]).prop_map(String::from),
            ),
            any::<bool>(),
            prop::bool::weighted(0.2),
        ),
    )
        .prop_map(
            |(
                (node, phase, ready, cost),
                (restarts, created, held),
                (test_key, order_key, foo_bar, preparing_update),
            )| {
                PodSpec {
                    node,
                    phase,
                    ready,
                    cost,
                    restarts,
                    created: created.map(|c| c * 10),
                    // Both write the lifecycle label; one state per pod.
                    held: held && !preparing_update,
                    test_key,
                    order_key,
                    foo_bar,
                    preparing_update,
                }
            },
        )
}

fn build(i: usize, spec: &PodSpec) -> Pod {
    let mut b = PodBuilder::new(&format!("pod-{i:02}"));
    if let Some(node) = spec.node {
        b = b.node(&format!("node-{node}"));
    }
    b = match spec.phase {
        0 => b.phase("Pending"),
        1 => b.phase("Unknown"),
        2 => b.phase("Running"),
        _ => b,
    };
    b = match spec.ready {
        None => b.not_ready(t(0)),
        Some(None) => b.ready_without_time(),
        Some(Some(s)) => b.ready_since(t(s)),
    };
    if let Some((value, _)) = spec.cost {
        b = b.deletion_cost(value);
    }
    if !spec.restarts.is_empty() {
        b = b.restarts(&spec.restarts);
    }
    if let Some(c) = spec.created {
        b = b.created(t(c));
    }
    if spec.held {
        b = b.lifecycle("PreparingDelete");
    }
    if spec.preparing_update {
        b = b.lifecycle("PreparingUpdate");
    }
    if let Some(v) = spec.test_key {
        b = b.label("test-key", v);
    }
    if let Some(v) = &spec.order_key {
        b = b.label("some-label-key", v);
    }
    if spec.foo_bar {
        b = b.label("foo", "bar");
    }
    b.build()
}

/// Specs plus a permutation of their indexes.
fn specs_and_permutation(max: usize) -> impl Strategy<Value = (Vec<PodSpec>, Vec<usize>)> {
    prop::collection::vec(pod_spec(), 0..max).prop_flat_map(|specs| {
        let n = specs.len();
        (Just(specs), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
    })
}

fn node_labels() -> BTreeMap<String, BTreeMap<String, String>> {
    (0..4)
        .map(|n| {
            let zone = if n < 3 { "z1" } else { "z2" };
            (
                format!("node-{n}"),
                BTreeMap::from([("zone".to_string(), zone.to_string())]),
            )
        })
        .collect()
}

fn spread(choice: u8) -> Vec<TopologySpreadConstraint> {
    let c = |key: &str| TopologySpreadConstraint {
        topology_key: key.into(),
        ..Default::default()
    };
    match choice {
        0 => vec![],
        1 => vec![c("zone")],
        2 => vec![c("kubernetes.io/hostname")],
        _ => vec![c("zone"), c("kubernetes.io/hostname")],
    }
}

fn priority(choice: u8, w1: i32, w2: i32) -> Option<UpdatePriorityStrategy> {
    let weight = |weight, value: &str| UpdatePriorityWeightTerm {
        weight,
        match_selector: LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "test-key".to_string(),
                value.to_string(),
            )])),
            match_expressions: None,
        },
    };
    match choice {
        0 => None,
        1 => Some(UpdatePriorityStrategy {
            order_priority: vec![],
            weight_priority: vec![weight(w1, "foo"), weight(w2, "bar")],
        }),
        _ => Some(UpdatePriorityStrategy {
            order_priority: vec![UpdatePriorityOrderTerm {
                ordered_key: "some-label-key".into(),
            }],
            weight_priority: vec![],
        }),
    }
}

fn scatter_terms(choice: u8) -> Vec<UpdateScatterTerm> {
    let term = |k: &str, v: &str| UpdateScatterTerm {
        key: k.into(),
        value: v.into(),
    };
    match choice {
        0 => vec![],
        1 => vec![term("foo", "bar")],
        _ => vec![term("foo", "bar"), term("test-key", "foo")],
    }
}

fn deletion_order(pods: &[&Pod], min_ready_seconds: i32, spread_choice: u8) -> Vec<String> {
    let labels = node_labels();
    let spread = spread(spread_choice);
    let ctx = DeletionContext {
        now: t(NOW),
        min_ready_seconds,
        siblings: pods,
        spread: &spread,
        node_labels: &labels,
    };
    let mut sorted = pods.to_vec();
    sort_for_deletion(&mut sorted, &ctx);
    names(&sorted)
}

/// Expected criteria, from the [`PodSpec`]s alone: Less = `a` is deleted first.
fn criteria(
    a: &PodSpec,
    b: &PodSpec,
    rank_a: f64,
    rank_b: f64,
    min_ready: i64,
) -> Vec<(&'static str, Ordering)> {
    let phase = |s: &PodSpec| match s.phase {
        1 => 1,
        2 => 2,
        _ => 0,
    };
    let ready = |s: &PodSpec| s.ready.is_some();
    let available = |s: &PodSpec| {
        // Any lifecycle state other than Normal holds the pod.
        !s.held
            && !s.preparing_update
            && s.phase == 2
            && match s.ready {
                None => false,
                Some(_) if min_ready == 0 => true,
                Some(None) => false,
                Some(Some(since)) => since + min_ready <= NOW,
            }
    };
    let cost = |s: &PodSpec| s.cost.map_or(0, |(_, c)| c);
    let restarts = |s: &PodSpec| s.restarts.iter().copied().max().unwrap_or(0);
    // "None first, then later first".
    let recent_first = |x: Option<i64>, y: Option<i64>| match (x, y) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x),
    };
    let ready_time = if ready(a) && ready(b) {
        recent_first(a.ready.flatten(), b.ready.flatten())
    } else {
        Ordering::Equal
    };
    vec![
        ("scheduled", a.node.is_some().cmp(&b.node.is_some())),
        ("phase", phase(a).cmp(&phase(b))),
        ("available", available(a).cmp(&available(b))),
        ("ready", ready(a).cmp(&ready(b))),
        ("cost", cost(a).cmp(&cost(b))),
        ("rank", rank_b.total_cmp(&rank_a)),
        ("ready time", ready_time),
        ("restarts", restarts(b).cmp(&restarts(a))),
        ("created", recent_first(a.created, b.created)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn deletion_sort_is_deterministic_under_permutation(
        (specs, perm) in specs_and_permutation(14),
        min_ready in prop::sample::select(vec![0, 30]),
        spread_choice in 0..4u8,
    ) {
        let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, s)| build(i, s)).collect();
        let original: Vec<&Pod> = pods.iter().collect();
        let permuted: Vec<&Pod> = perm.iter().map(|&i| &pods[i]).collect();
        let a = deletion_order(&original, min_ready, spread_choice);
        let b = deletion_order(&permuted, min_ready, spread_choice);
        prop_assert_eq!(&a, &b);
        // Sorting the sorted order again changes nothing.
        let by_name: BTreeMap<String, &Pod> = pods.iter().map(|p| (crate::predicates::name(p).to_owned(), p)).collect();
        let resorted: Vec<&Pod> = a.iter().map(|n| by_name[n]).collect();
        prop_assert_eq!(deletion_order(&resorted, min_ready, spread_choice), a);
    }

    #[test]
    fn deletion_order_respects_each_criterion_in_turn(
        specs in prop::collection::vec(pod_spec(), 0..12),
        min_ready in prop::sample::select(vec![0i32, 30]),
        spread_choice in 0..4u8,
    ) {
        let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, s)| build(i, s)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let labels = node_labels();
        let spread = spread(spread_choice);
        let ctx = DeletionContext { now: t(NOW), min_ready_seconds: min_ready, siblings: &refs, spread: &spread, node_labels: &labels };
        let ranks = co_location_ranks(&refs, &ctx);
        let mut sorted = refs.clone();
        sort_for_deletion(&mut sorted, &ctx);
        let index = |p: &Pod| crate::predicates::name(p)[4..].parse::<usize>().unwrap();
        for i in 0..sorted.len() {
            for j in i + 1..sorted.len() {
                let (a, b) = (sorted[i], sorted[j]);
                let deciding = criteria(&specs[index(a)], &specs[index(b)], ranks.of(a), ranks.of(b), i64::from(min_ready))
                    .into_iter()
                    .find(|(_, o)| *o != Ordering::Equal);
                match deciding {
                    Some((name, order)) => prop_assert_eq!(order, Ordering::Less, "{} decides {} vs {}", name, index(a), index(b)),
                    None => prop_assert!(index(a) < index(b), "name breaks the tie"),
                }
            }
        }
    }

    #[test]
    fn update_sort_is_a_deterministic_permutation(
        (specs, perm) in specs_and_permutation(14),
        priority_choice in 0..3u8,
        w1 in 0..100i32,
        w2 in 0..100i32,
        scatter_choice in 0..3u8,
        preparing_update_first in any::<bool>(),
    ) {
        let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, s)| build(i, s)).collect();
        let strategy = priority(priority_choice, w1, w2);
        let scatter = scatter_terms(scatter_choice);
        let ctx = UpdateOrderContext { now: t(NOW), priority: strategy.as_ref(), scatter: &scatter, preparing_update_first };

        let mut original: Vec<&Pod> = pods.iter().collect();
        let mut permuted: Vec<&Pod> = perm.iter().map(|&i| &pods[i]).collect();
        sort_for_update(&mut original, &ctx);
        sort_for_update(&mut permuted, &ctx);
        prop_assert_eq!(names(&original), names(&permuted));

        let mut got = names(&original);
        got.sort();
        let mut want: Vec<String> = pods.iter().map(|p| crate::predicates::name(p).to_owned()).collect();
        want.sort();
        prop_assert_eq!(got, want, "no pod lost or duplicated");

        if preparing_update_first {
            let flags: Vec<bool> = original.iter().map(|p| crate::predicates::label(p, kruise_api::keys::LIFECYCLE_STATE) == Some("PreparingUpdate")).collect();
            prop_assert!(flags.windows(2).all(|w| w[0] || !w[1]), "PreparingUpdate pods first");
        }
    }

    #[test]
    fn scatter_spreads_matched_pods(
        specs in prop::collection::vec(pod_spec(), 0..30),
    ) {
        let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, s)| build(i, s)).collect();
        let scatter = scatter_terms(1);
        let ctx = UpdateOrderContext { now: t(NOW), priority: None, scatter: &scatter, preparing_update_first: false };
        let mut sorted: Vec<&Pod> = pods.iter().collect();
        sort_for_update(&mut sorted, &ctx);
        let matched: Vec<bool> = sorted.iter().map(|p| crate::predicates::label(p, "foo") == Some("bar")).collect();
        let m = matched.iter().filter(|&&x| x).count();
        let u = matched.len() - m;
        if m >= 2 && u >= 2 {
            prop_assert!(matched[0], "first matched pod at position 0");
            prop_assert!(matched[matched.len() - 1], "last matched pod at the end");
        }
        if m >= 2 && m * 2 <= m + u {
            let last_unmatched = matched.iter().rposition(|&x| !x).unwrap();
            let adjacent_before = matched[..=last_unmatched].windows(2).any(|w| w[0] && w[1]);
            prop_assert!(!adjacent_before, "no two matched pods adjacent before the last unmatched one");
            if m <= 4 {
                prop_assert!(!matched.windows(2).any(|w| w[0] && w[1]), "no two matched pods adjacent");
            }
        }
    }

    #[test]
    fn scatter_interleaves_any_counts(
        matched in 0..16usize,
        unmatched in 0..24usize,
        perm_seed in prop::collection::vec(any::<u8>(), 40),
    ) {
        // Plain pods differing only in name; the matched ones are spread through the incoming order
        // by `perm_seed` so scatter has real work to do.
        let mut flags: Vec<bool> = std::iter::repeat_n(true, matched).chain(std::iter::repeat_n(false, unmatched)).collect();
        for (i, s) in perm_seed.iter().enumerate().take(flags.len()) {
            let j = usize::from(*s) % flags.len();
            flags.swap(i, j);
        }
        let pods: Vec<Pod> = flags
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let b = PodBuilder::new(&format!("pod-{i:02}"));
                if m { b.label("foo", "bar") } else { b }.build()
            })
            .collect();
        let scatter = scatter_terms(1);
        let ctx = UpdateOrderContext { now: t(NOW), priority: None, scatter: &scatter, preparing_update_first: false };
        let mut sorted: Vec<&Pod> = pods.iter().collect();
        sort_for_update(&mut sorted, &ctx);
        let is_matched: Vec<bool> = sorted.iter().map(|p| crate::predicates::label(p, "foo") == Some("bar")).collect();
        prop_assert_eq!(is_matched.iter().filter(|&&x| x).count(), matched);
        if matched >= 2 && unmatched >= 2 {
            prop_assert!(is_matched[0]);
            prop_assert!(is_matched[is_matched.len() - 1]);
        }
        if matched >= 2 && matched <= unmatched {
            let last_unmatched = is_matched.iter().rposition(|&x| !x).unwrap();
            prop_assert!(!is_matched[..=last_unmatched].windows(2).any(|w| w[0] && w[1]));
            if matched <= 4 {
                prop_assert!(!is_matched.windows(2).any(|w| w[0] && w[1]));
            }
        }
        // Matched pods keep their relative (default) order: scatter only interleaves.
        let matched_names: Vec<String> = sorted.iter().filter(|p| crate::predicates::label(p, "foo") == Some("bar")).map(|p| crate::predicates::name(p).to_owned()).collect();
        let mut expected = matched_names.clone();
        expected.sort();
        prop_assert_eq!(matched_names, expected);
    }
}
