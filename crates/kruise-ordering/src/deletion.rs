//! Which Pod to delete first when a workload scales in (as CloneSet's `choosePodsToDelete` in
//! openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/cloneset_scale.go, sorting by
//! `ActivePodsWithRanks` of pkg/controller/cloneset/utils/pod_sorter.go).
//!
//! Order, first = deleted first; each criterion only decides when every earlier one
//! ties:
//!
//! 1. unscheduled < scheduled
//! 2. Pending (or unset phase) < Unknown < Running
//! 3. not available < available (see [`crate::predicates::is_available`], with `minReadySeconds`)
//! 4. not ready < ready
//! 5. lower `controller.kubernetes.io/pod-deletion-cost` < higher
//! 6. higher co-location rank < lower (see [`co_location_ranks`])
//! 7. both ready: ready more recently < ready longer (no transition time counts as
//!    most recent)
//! 8. more container restarts (max over containers) < fewer
//! 9. newer < older (no creation time counts as newest)
//! 10. name, then namespace, then uid — only so the order is total and deterministic.
//!
//! OpenKruise v0.9.0 release notes ("deletion priority") list criteria 1, 2, 4, 5, 7, 8, 9;
//! OpenKruise v1.9 adds availability and rank (`ActivePodsWithRanks.Less`), and so do we.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use kruise_api::pod::Pod;

use crate::predicates;

/// The well-known node label a `kubernetes.io/hostname` topology key refers to.
pub const HOSTNAME_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";

/// What the deletion order needs besides the Pods being ordered.
pub struct DeletionContext<'a> {
    pub now: Timestamp,
    pub min_ready_seconds: i32,
    /// All active pods of the workload (for co-location rank).
    pub siblings: &'a [&'a Pod],
    /// Template topologySpreadConstraints (empty => rank by sharing a node only).
    pub spread: &'a [TopologySpreadConstraint],
    /// node name -> node labels, for topology keys other than kubernetes.io/hostname (may be empty).
    pub node_labels: &'a BTreeMap<String, BTreeMap<String, String>>,
}

/// Sorts so that the pod to delete first comes first (the order above, every tie-breaker, stable
/// and total; final tie-breaker by name so the order is deterministic).
pub fn sort_for_deletion(pods: &mut [&Pod], ctx: &DeletionContext) {
    let ranks = co_location_ranks(pods, ctx);
    pods.sort_by_cached_key(|pod| deletion_key(pod, ctx, ranks.of(pod)));
}

/// Compares two Pods by the deletion order, given their co-location ranks
/// (`Less` = `a` is deleted first). Exposed for callers that merge already-sorted lists.
pub fn compare_for_deletion(
    a: &Pod,
    rank_a: f64,
    b: &Pod,
    rank_b: f64,
    ctx: &DeletionContext,
) -> Ordering {
    deletion_key(a, ctx, rank_a).cmp(&deletion_key(b, ctx, rank_b))
}

/// Co-location rank of every Pod in `pods` ∪ `ctx.siblings`; a higher rank is deleted
/// earlier (criterion 6).
///
/// Without spread constraints (OpenKruise's `sameNodeRanker`): on each node holding
/// `n ≥ 2` of the Pods, order them by the deletion order without rank; the first gets
/// rank `n−1`, the next `n−2`, …, the Pod the node would keep gets 0. Lone and
/// unscheduled Pods get 0. So scale-in drains crowded nodes first.
///
/// With spread constraints (OpenKruise's `spreadConstraintsRanker`), for each constraint:
/// group the Pods by the value of its `topologyKey` on their node, order each domain
/// by the deletion order (ranked by the same-node rank above unless the key is the
/// hostname), and add `(n − i) · ln(domains + 2)` to the i-th Pod of an n-Pod domain.
/// Pods in crowded domains thus rank higher. A Pod whose node has no value for the key
/// gets nothing from that constraint; for `kubernetes.io/hostname` the node name stands
/// in when `node_labels` has no hostname label for the node.
///
/// Decisions:
/// - The rank population is `siblings` plus any sorted Pod not among them (matched by
///   namespace/name), not only the Pods being sorted as upstream does (it ranks within
///   the old- or new-revision group): the brief makes siblings the whole workload, so
///   co-location counts every Pod that shares the node.
/// - Within a node or domain the full deletion order is used, availability included;
///   upstream's inner sort omits availability. One comparator everywhere is easier to
///   reason about, and it differs only when `minReadySeconds > 0`.
pub fn co_location_ranks(pods: &[&Pod], ctx: &DeletionContext) -> Ranks {
    let population = rank_population(pods, ctx.siblings);
    let same_node = same_node_ranks(&population, ctx);
    if ctx.spread.is_empty() {
        return same_node;
    }
    spread_ranks(&population, &same_node, ctx)
}

/// Co-location ranks by Pod (namespace, name).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ranks(BTreeMap<(String, String), f64>);

impl Ranks {
    /// The Pod's rank; 0 for a Pod that was not ranked.
    pub fn of(&self, pod: &Pod) -> f64 {
        self.0.get(&pod_id(pod)).copied().unwrap_or(0.0)
    }

    fn add(&mut self, pod: &Pod, rank: f64) {
        *self.0.entry(pod_id(pod)).or_insert(0.0) += rank;
    }
}

fn pod_id(pod: &Pod) -> (String, String) {
    (
        predicates::namespace(pod).to_owned(),
        predicates::name(pod).to_owned(),
    )
}

/// The comparison key; fields compare in declaration order, which is the criteria order.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct DeletionKey<'p> {
    scheduled: bool,
    phase: u8,
    available: bool,
    ready: bool,
    cost: i32,
    rank: Reverse<TotalF64>,
    ready_time: Option<Reverse<Timestamp>>,
    restarts: Reverse<i32>,
    created: Option<Reverse<Timestamp>>,
    name: &'p str,
    namespace: &'p str,
    uid: &'p str,
}

fn deletion_key<'p>(pod: &'p Pod, ctx: &DeletionContext, rank: f64) -> DeletionKey<'p> {
    let ready = predicates::is_ready(pod);
    DeletionKey {
        scheduled: predicates::is_scheduled(pod),
        phase: predicates::phase_rank(pod),
        available: predicates::is_available(pod, ctx.min_ready_seconds, ctx.now),
        ready,
        cost: predicates::deletion_cost(pod),
        rank: Reverse(TotalF64(rank)),
        // Only compared between ready Pods (readiness ties here); None sorts first,
        // like Go's zero time in `afterOrZero`.
        ready_time: if ready {
            predicates::ready_since(pod).map(Reverse)
        } else {
            None
        },
        restarts: Reverse(predicates::restart_count(pod)),
        created: predicates::created_at(pod).map(Reverse),
        name: predicates::name(pod),
        namespace: predicates::namespace(pod),
        uid: predicates::uid(pod),
    }
}

/// An `f64` ordered by `total_cmp`, so ranks can sit in an `Ord` key.
#[derive(Clone, Copy, Debug)]
struct TotalF64(f64);

impl PartialEq for TotalF64 {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for TotalF64 {}
impl PartialOrd for TotalF64 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TotalF64 {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// `siblings` plus the sorted Pods missing from them, each Pod once.
fn rank_population<'p>(pods: &[&'p Pod], siblings: &[&'p Pod]) -> Vec<&'p Pod> {
    let mut seen = std::collections::BTreeSet::new();
    siblings
        .iter()
        .chain(pods)
        .copied()
        .filter(|pod| seen.insert(pod_id(pod)))
        .collect()
}

/// Orders a group of Pods by the deletion order with the given ranks.
fn order_group(group: &mut [&Pod], ctx: &DeletionContext, ranks: &Ranks) {
    group.sort_by_cached_key(|pod| deletion_key(pod, ctx, ranks.of(pod)));
}

fn same_node_ranks(population: &[&Pod], ctx: &DeletionContext) -> Ranks {
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for pod in population.iter().copied().filter(predicates::is_scheduled) {
        by_node
            .entry(predicates::node_name(pod))
            .or_default()
            .push(pod);
    }
    let unranked = Ranks::default();
    let mut ranks = Ranks::default();
    for group in by_node.values_mut().filter(|g| g.len() >= 2) {
        order_group(group, ctx, &unranked);
        let last = group.len() - 1;
        for (i, pod) in group.iter().enumerate() {
            ranks.add(pod, (last - i) as f64);
        }
    }
    ranks
}

fn spread_ranks(population: &[&Pod], same_node: &Ranks, ctx: &DeletionContext) -> Ranks {
    let unranked = Ranks::default();
    let mut ranks = Ranks::default();
    for constraint in ctx.spread {
        let key = constraint.topology_key.as_str();
        let mut domains: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        for pod in population.iter().copied() {
            if let Some(value) = topology_value(pod, key, ctx) {
                domains.entry(value).or_default().push(pod);
            }
        }
        // Within a host every Pod already shares the node, so the same-node rank adds
        // nothing there; upstream uses it only for wider domains.
        let inner = if key == HOSTNAME_TOPOLOGY_KEY {
            &unranked
        } else {
            same_node
        };
        let weight = topology_weight(domains.len());
        for group in domains.values_mut() {
            order_group(group, ctx, inner);
            let n = group.len();
            for (i, pod) in group.iter().enumerate() {
                ranks.add(pod, (n - i) as f64 * weight);
            }
        }
    }
    ranks
}

/// The Pod's topology domain for `key`, if its node has one.
fn topology_value<'c>(pod: &'c Pod, key: &str, ctx: &'c DeletionContext) -> Option<&'c str> {
    let node = predicates::node_name(pod);
    if node.is_empty() {
        return None;
    }
    let labelled = ctx
        .node_labels
        .get(node)
        .and_then(|labels| labels.get(key))
        .map(String::as_str);
    labelled.or((key == HOSTNAME_TOPOLOGY_KEY).then_some(node))
}

/// Upstream's `topologyNormalizingWeight`: domains of a key with many values weigh more.
fn topology_weight(domains: usize) -> f64 {
    ((domains + 2) as f64).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::pods::{PodBuilder, names, t};
    use kruise_api::keys;

    fn no_labels() -> &'static BTreeMap<String, BTreeMap<String, String>> {
        static EMPTY: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        &EMPTY
    }

    fn ctx<'a>(siblings: &'a [&'a Pod]) -> DeletionContext<'a> {
        DeletionContext {
            now: t(1000),
            min_ready_seconds: 0,
            siblings,
            spread: &[],
            node_labels: no_labels(),
        }
    }

    fn sorted(pods: &[&Pod], ctx: &DeletionContext) -> Vec<String> {
        let mut v = pods.to_vec();
        sort_for_deletion(&mut v, ctx);
        names(&v)
    }

    /// A ready, Running, scheduled Pod on its own node: the "healthiest" baseline that
    /// each test perturbs in one attribute.
    fn healthy(name: &str) -> PodBuilder {
        PodBuilder::new(name)
            .node(&format!("node-{name}"))
            .phase("Running")
            .ready_since(t(100))
            .created(t(0))
    }

    #[test]
    fn unscheduled_first() {
        let a = healthy("a").build();
        let b = PodBuilder::new("b")
            .phase("Running")
            .ready_since(t(100))
            .build();
        assert_eq!(sorted(&[&a, &b], &ctx(&[])), ["b", "a"]);
    }

    #[test]
    fn pending_before_unknown_before_running() {
        let run = healthy("run").build();
        let unk = healthy("unk").phase("Unknown").build();
        let pend = healthy("pend").phase("Pending").build();
        let unset = healthy("unset").no_phase().build();
        assert_eq!(
            sorted(&[&run, &unk, &pend, &unset], &ctx(&[])),
            ["pend", "unset", "unk", "run"]
        );
    }

    #[test]
    fn not_available_before_available() {
        // Both ready; "young" became ready 5 s ago with minReadySeconds 10.
        let old = healthy("old").ready_since(t(900)).build();
        let young = healthy("young").ready_since(t(995)).restarts(&[0]).build();
        let mut c = ctx(&[]);
        c.min_ready_seconds = 10;
        assert_eq!(sorted(&[&old, &young], &c), ["young", "old"]);
        // Availability beats deletion cost.
        let young_cheap = healthy("young").ready_since(t(995)).build();
        let old_cheap = healthy("old")
            .ready_since(t(900))
            .deletion_cost("-100")
            .build();
        assert_eq!(sorted(&[&old_cheap, &young_cheap], &c), ["young", "old"]);
    }

    #[test]
    fn lifecycle_hold_makes_a_pod_unavailable() {
        // "a" became ready more recently and is cheaper, so on every later criterion it
        // would go first; "b" is held by a lifecycle hook, hence unavailable, and goes
        // first instead.
        let normal = healthy("a").ready_since(t(500)).build();
        let updating = healthy("b")
            .ready_since(t(0))
            .lifecycle("Updating")
            .deletion_cost("100")
            .build();
        assert_eq!(sorted(&[&normal, &updating], &ctx(&[])), ["b", "a"]);
        let in_place = healthy("b")
            .ready_since(t(0))
            .condition("InPlaceUpdateReady", "False")
            .deletion_cost("100")
            .build();
        assert_eq!(sorted(&[&normal, &in_place], &ctx(&[])), ["b", "a"]);
    }

    #[test]
    fn not_ready_before_ready() {
        let ready = healthy("ready").build();
        let not_ready = healthy("notready").not_ready(t(100)).build();
        assert_eq!(
            sorted(&[&ready, &not_ready], &ctx(&[])),
            ["notready", "ready"]
        );
    }

    #[test]
    fn lower_deletion_cost_first_missing_is_zero() {
        let high = healthy("high").deletion_cost("10").build();
        let none = healthy("none").build();
        let low = healthy("low").deletion_cost("-5").build();
        let invalid = healthy("invalid").deletion_cost("+10").build(); // 0
        assert_eq!(
            sorted(&[&high, &none, &low, &invalid], &ctx(&[])),
            ["low", "invalid", "none", "high"]
        );
    }

    #[test]
    fn deletion_cost_after_readiness() {
        // OpenKruise v0.9.0 release notes: the cost only applies after scheduling/phase/readiness.
        let cheap_ready = healthy("cheap").deletion_cost("-100").build();
        let costly_unready = healthy("costly")
            .not_ready(t(0))
            .deletion_cost("100")
            .build();
        assert_eq!(
            sorted(&[&cheap_ready, &costly_unready], &ctx(&[])),
            ["costly", "cheap"]
        );
    }

    #[test]
    fn crowded_node_first() {
        let a = healthy("a").node("n1").build();
        let b = healthy("b").node("n1").build();
        let c = healthy("c").node("n2").build();
        let all = [&a, &b, &c];
        // a and b share n1: one of them is deleted before c; the one n1 keeps comes after.
        let order = sorted(&[&c, &a, &b], &ctx(&all));
        assert_eq!(
            order[0], "a",
            "name breaks the tie inside n1; a gets rank 1"
        );
        assert_eq!(order, ["a", "b", "c"]);
        let ranks = co_location_ranks(&[&a, &b, &c], &ctx(&all));
        assert_eq!((ranks.of(&a), ranks.of(&b), ranks.of(&c)), (1.0, 0.0, 0.0));
    }

    #[test]
    fn rank_counts_siblings_outside_the_sorted_group() {
        // Only a and c are candidates; a's node also holds sibling s.
        let a = healthy("a").node("n1").created(t(10)).build();
        let s = healthy("s").node("n1").created(t(0)).build();
        let c = healthy("c").node("n2").created(t(50)).build();
        let siblings = [&a, &s, &c];
        // c is newer (would go first on age) but a shares a node.
        assert_eq!(sorted(&[&c, &a], &ctx(&siblings)), ["a", "c"]);
        // Without siblings the group alone decides: no co-location, c is newer.
        assert_eq!(sorted(&[&c, &a], &ctx(&[])), ["c", "a"]);
    }

    #[test]
    fn rank_after_cost() {
        let a = healthy("a").node("n1").deletion_cost("5").build();
        let b = healthy("b").node("n1").deletion_cost("5").build();
        let c = healthy("c").node("n2").build();
        let all = [&a, &b, &c];
        assert_eq!(sorted(&all, &ctx(&all)), ["c", "a", "b"]);
    }

    #[test]
    fn spread_ranks_crowded_zones_first() {
        let mut node_labels = BTreeMap::new();
        for (node, zone) in [("n1", "z1"), ("n2", "z1"), ("n3", "z2")] {
            node_labels.insert(
                node.to_string(),
                BTreeMap::from([("zone".to_string(), zone.to_string())]),
            );
        }
        let spread = [TopologySpreadConstraint {
            topology_key: "zone".into(),
            ..Default::default()
        }];
        // z1 holds a (n1) and b (n2); z2 holds c (n3). No pod shares a node.
        let a = healthy("a").node("n1").created(t(0)).build();
        let b = healthy("b").node("n2").created(t(0)).build();
        let c = healthy("c").node("n3").created(t(99)).build();
        let all = [&a, &b, &c];
        let mut cx = ctx(&all);
        cx.spread = &spread;
        cx.node_labels = &node_labels;
        let ranks = co_location_ranks(&all, &cx);
        let w = 4f64.ln(); // 2 domains
        assert_eq!((ranks.of(&a), ranks.of(&b), ranks.of(&c)), (2.0 * w, w, w));
        // c is the newest but alone in its zone; a, first in the crowded zone, goes first.
        assert_eq!(sorted(&[&c, &b, &a], &cx), ["a", "c", "b"]);
        // Without spread constraints no pod shares a node: age decides.
        assert_eq!(sorted(&[&c, &b, &a], &ctx(&all)), ["c", "a", "b"]);
    }

    #[test]
    fn spread_hostname_uses_node_name_without_labels() {
        let spread = [TopologySpreadConstraint {
            topology_key: HOSTNAME_TOPOLOGY_KEY.into(),
            ..Default::default()
        }];
        let a = healthy("a").node("n1").build();
        let b = healthy("b").node("n1").build();
        let c = healthy("c").node("n2").created(t(99)).build();
        let all = [&a, &b, &c];
        let mut cx = ctx(&all);
        cx.spread = &spread;
        let ranks = co_location_ranks(&all, &cx);
        let w = 4f64.ln();
        assert_eq!((ranks.of(&a), ranks.of(&b), ranks.of(&c)), (2.0 * w, w, w));
        assert_eq!(sorted(&all, &cx), ["a", "c", "b"]);
    }

    #[test]
    fn spread_key_missing_on_nodes_gives_no_rank() {
        let spread = [TopologySpreadConstraint {
            topology_key: "zone".into(),
            ..Default::default()
        }];
        let a = healthy("a").node("n1").build();
        let b = healthy("b").node("n1").build();
        let all = [&a, &b];
        let mut cx = ctx(&all);
        cx.spread = &spread;
        let ranks = co_location_ranks(&all, &cx);
        assert_eq!((ranks.of(&a), ranks.of(&b)), (0.0, 0.0));
    }

    #[test]
    fn ready_more_recently_first() {
        let long = healthy("long").ready_since(t(10)).build();
        let recent = healthy("recent").ready_since(t(500)).build();
        let no_time = healthy("notime").ready_without_time().build();
        assert_eq!(
            sorted(&[&long, &recent, &no_time], &ctx(&[])),
            ["notime", "recent", "long"]
        );
    }

    #[test]
    fn ready_time_ignored_between_not_ready_pods() {
        // Not-ready pods compare on restarts next, whatever their transition times.
        let a = healthy("a").not_ready(t(10)).restarts(&[3]).build();
        let b = healthy("b").not_ready(t(500)).restarts(&[1]).build();
        assert_eq!(sorted(&[&b, &a], &ctx(&[])), ["a", "b"]);
    }

    #[test]
    fn more_restarts_first() {
        let few = healthy("few").restarts(&[1, 1]).build();
        let many = healthy("many").restarts(&[0, 5]).build();
        assert_eq!(sorted(&[&few, &many], &ctx(&[])), ["many", "few"]);
    }

    #[test]
    fn newer_first_missing_creation_first() {
        let old = healthy("old").created(t(0)).build();
        let new = healthy("new").created(t(50)).build();
        let none = healthy("none").no_creation().build();
        assert_eq!(
            sorted(&[&old, &new, &none], &ctx(&[])),
            ["none", "new", "old"]
        );
    }

    #[test]
    fn name_breaks_full_ties() {
        let b = healthy("b").node("n").build();
        let a = healthy("a").node("m").build();
        assert_eq!(sorted(&[&b, &a], &ctx(&[])), ["a", "b"]);
    }

    #[test]
    fn compare_for_deletion_agrees_with_sort() {
        let a = healthy("a").not_ready(t(0)).build();
        let b = healthy("b").build();
        assert_eq!(
            compare_for_deletion(&a, 0.0, &b, 0.0, &ctx(&[])),
            Ordering::Less
        );
        assert_eq!(
            compare_for_deletion(&b, 5.0, &b, 0.0, &ctx(&[])),
            Ordering::Less
        );
    }

    /// OpenKruise v0.9.0 release notes: a lower `pod-deletion-cost` goes first, missing = 0.
    #[test]
    fn deletion_cost_orders_otherwise_equal_pods() {
        let pods: Vec<Pod> = [
            ("p1", Some("3")),
            ("p2", None),
            ("p3", Some("-1")),
            ("p4", Some("1")),
        ]
        .into_iter()
        .map(|(n, c)| {
            let b = healthy(n).node("n");
            match c {
                Some(c) => b.annotation(keys::POD_DELETION_COST, c),
                None => b,
            }
            .build()
        })
        .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        // All on one node: rank follows the same order, so cost alone decides.
        assert_eq!(sorted(&refs, &ctx(&refs)), ["p3", "p2", "p4", "p1"]);
    }
}
