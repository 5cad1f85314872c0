//! Which Pod to update first (as CloneSet's `SortUpdateIndexes` in openkruise/kruise v1.9.0
//! pkg/controller/cloneset/sync/cloneset_update.go, with pkg/util/updatesort).
//!
//! Four passes, each a stable re-ordering of the previous result:
//!
//! 1. default order: unscheduled < scheduled, Pending < Unknown < Running, not ready <
//!    ready, ready more recently < longer, more restarts < fewer, newer < older, then
//!    name/namespace/uid so the order is total;
//! 2. `priorityStrategy` (weight or order terms);
//! 3. `scatterStrategy` (see [`crate::scatter`]);
//! 4. optionally, Pods in lifecycle state `PreparingUpdate` first, so an update a hook
//!    already let through is finished before new ones start.

use std::cmp::Reverse;

use jiff::Timestamp;
use kruise_api::appspub::{LifecycleState, UpdatePriorityStrategy, UpdateScatterTerm};
use kruise_api::pod::PodView;

use crate::{predicates, scatter, selector};

/// What the update order needs besides the Pods being ordered.
pub struct UpdateOrderContext<'a> {
    /// Not consulted by the current rules (the default order compares readiness, not
    /// availability); kept so an availability rule would not change callers.
    pub now: Timestamp,
    pub priority: Option<&'a UpdatePriorityStrategy>,
    pub scatter: &'a [UpdateScatterTerm],
    /// Put pods whose lifecycle.apps.kruise.io/state label is PreparingUpdate first (CloneSet does,
    /// at the end of `SortUpdateIndexes`).
    pub preparing_update_first: bool,
}

/// Sorts the update candidates so the Pod to update first comes first. Scatter density
/// is judged on the candidates alone; see [`sort_for_update_among`] to judge it on the
/// whole workload as upstream does.
pub fn sort_for_update<P: PodView>(pods: &mut Vec<&P>, ctx: &UpdateOrderContext) {
    let population = pods.clone();
    sort_for_update_among(pods, &population, ctx);
}

/// [`sort_for_update`], with `population` = every active Pod of the workload (a superset
/// of `pods`). Only scatter uses it: when the candidates hold fewer scattered Pods per other Pod
/// than the workload (some were already updated), upstream sizes the interleaving groups on the
/// workload's proportions instead (`calculateGroupByDensity` in openkruise/kruise v1.9.0
/// pkg/util/updatesort/scatter_sort.go).
pub fn sort_for_update_among<P: PodView>(
    pods: &mut Vec<&P>,
    population: &[&P],
    ctx: &UpdateOrderContext,
) {
    pods.sort_by_cached_key(|pod| default_update_key(*pod));
    if let Some(strategy) = ctx.priority {
        sort_by_priority(pods, strategy);
    }
    if !ctx.scatter.is_empty() {
        *pods = scatter::scatter(pods, ctx.scatter, population);
    }
    if ctx.preparing_update_first {
        pods.sort_by_key(|pod| {
            predicates::lifecycle_state(pod) != Some(LifecycleState::PreparingUpdate)
        });
    }
}

/// The default update order's key (Kubernetes' `ActivePods.Less`, made total by name).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct DefaultUpdateKey<'p> {
    scheduled: bool,
    phase: u8,
    ready: bool,
    ready_time: Option<Reverse<Timestamp>>,
    restarts: Reverse<i32>,
    created: Option<Reverse<Timestamp>>,
    name: &'p str,
    namespace: &'p str,
    uid: &'p str,
}

fn default_update_key<P: PodView>(pod: &P) -> DefaultUpdateKey<'_> {
    let ready = predicates::is_ready(pod);
    DefaultUpdateKey {
        scheduled: predicates::is_scheduled(pod),
        phase: predicates::phase_rank(pod),
        ready,
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

/// Stable sort by the priority strategy. Weight terms win when both lists are set
/// (admission forbids that), as upstream.
///
/// Where we differ from upstream on purpose: upstream's comparator (openkruise/kruise v1.9.0
/// pkg/util/updatesort/priority_sort.go) returns "larger input index first" for equal priorities,
/// which reverses ties by the Pods' position in the workload's list and discards the default order;
/// we sort stably by priority, so equal priorities keep the default order. Public for Advanced
/// StatefulSet's `unorderedUpdate`, which ranks by priority alone over its own (ordinal) order.
pub fn sort_by_priority<P: PodView>(pods: &mut [&P], strategy: &UpdatePriorityStrategy) {
    if !strategy.weight_priority.is_empty() {
        pods.sort_by_cached_key(|pod| Reverse(weight_of(pod, strategy)));
    } else if !strategy.order_priority.is_empty() {
        pods.sort_by_cached_key(|pod| {
            let (level, value) = order_priority(pod, strategy);
            (level, Reverse(value))
        });
    }
}

/// Sum of the weights of the `weightPriority` terms whose selector matches the Pod's
/// labels; larger is updated first. A term with an invalid selector contributes nothing
/// (upstream skips it).
pub fn weight_of<P: PodView>(pod: &P, strategy: &UpdatePriorityStrategy) -> i64 {
    let empty = Default::default();
    let labels = pod.meta().labels.as_ref().unwrap_or(&empty);
    strategy
        .weight_priority
        .iter()
        .filter(|term| selector::matches(&term.match_selector, labels) == Ok(true))
        .map(|term| i64::from(term.weight))
        .sum()
}

/// `(level, value)` under `orderPriority`: level = index of the first term whose `orderedKey` the
/// Pod carries (earlier terms update first), value = that label's trailing integer (larger first).
/// A Pod with none of the keys gets `(-1, 0)` and therefore sorts before every keyed Pod — an
/// upstream quirk (`getPodOrderPriority`) we keep.
pub fn order_priority<P: PodView>(pod: &P, strategy: &UpdatePriorityStrategy) -> (i64, i64) {
    strategy
        .order_priority
        .iter()
        .enumerate()
        .find_map(|(level, term)| {
            predicates::label(pod, &term.ordered_key).map(|v| (level as i64, ordered_value(v)))
        })
        .unwrap_or((-1, 0))
}

/// The integer formed by the value's trailing ASCII digits: `"5"` → 5, `"sts-10"` → 10,
/// `"a007"` → 7; no trailing digits, or too many for an `i64`, → 0 (Go `ParseInt` error).
pub fn ordered_value(value: &str) -> i64 {
    let digits_start = value
        .bytes()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    value[digits_start..].parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::pods::{PodBuilder, names, t};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kruise_api::appspub::{UpdatePriorityOrderTerm, UpdatePriorityWeightTerm};
    use kruise_api::pod::Pod;
    use std::collections::BTreeMap;

    fn ctx(priority: Option<&UpdatePriorityStrategy>) -> UpdateOrderContext<'_> {
        UpdateOrderContext {
            now: t(1000),
            priority,
            scatter: &[],
            preparing_update_first: false,
        }
    }

    fn sorted(pods: &[&Pod], ctx: &UpdateOrderContext) -> Vec<String> {
        let mut v = pods.to_vec();
        sort_for_update(&mut v, ctx);
        names(&v)
    }

    fn healthy(name: &str) -> PodBuilder {
        PodBuilder::new(name)
            .node("n")
            .phase("Running")
            .ready_since(t(100))
            .created(t(0))
    }

    fn weight_term(weight: i32, key: &str, value: &str) -> UpdatePriorityWeightTerm {
        UpdatePriorityWeightTerm {
            weight,
            match_selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(key.to_string(), value.to_string())])),
                match_expressions: None,
            },
        }
    }

    fn order_terms(keys: &[&str]) -> UpdatePriorityStrategy {
        UpdatePriorityStrategy {
            order_priority: keys
                .iter()
                .map(|k| UpdatePriorityOrderTerm {
                    ordered_key: k.to_string(),
                })
                .collect(),
            weight_priority: vec![],
        }
    }

    #[test]
    fn default_order_rules() {
        let unscheduled = PodBuilder::new("unscheduled")
            .phase("Pending")
            .created(t(0))
            .build();
        let pending = healthy("pending").phase("Pending").not_ready(t(0)).build();
        let unknown = healthy("unknown").phase("Unknown").not_ready(t(0)).build();
        let not_ready = healthy("notready").not_ready(t(0)).build();
        let ready_recent = healthy("recent").ready_since(t(500)).build();
        let restarts = healthy("restarts").restarts(&[4]).build();
        let newer = healthy("newer").created(t(50)).build();
        let oldest = healthy("oldest").build();
        let all = [
            &oldest,
            &newer,
            &restarts,
            &ready_recent,
            &not_ready,
            &unknown,
            &pending,
            &unscheduled,
        ];
        assert_eq!(
            sorted(&all, &ctx(None)),
            [
                "unscheduled",
                "pending",
                "unknown",
                "notready",
                "recent",
                "restarts",
                "newer",
                "oldest"
            ]
        );
    }

    #[test]
    fn default_order_ignores_deletion_cost_and_availability() {
        let costly = healthy("a").deletion_cost("100").build();
        let cheap = healthy("b").deletion_cost("-100").build();
        assert_eq!(sorted(&[&cheap, &costly], &ctx(None)), ["a", "b"]);
    }

    /// The weightPriority example of OpenKruise's documentation (CloneSet user manual).
    #[test]
    fn documented_weight_foo_before_bar_before_others() {
        let strategy = UpdatePriorityStrategy {
            order_priority: vec![],
            weight_priority: vec![
                weight_term(50, "test-key", "foo"),
                weight_term(30, "test-key", "bar"),
            ],
        };
        let other = healthy("a-other").build();
        let bar = healthy("b-bar").label("test-key", "bar").build();
        let foo = healthy("c-foo").label("test-key", "foo").build();
        let none = healthy("d-none").build();
        assert_eq!(
            sorted(&[&other, &bar, &foo, &none], &ctx(Some(&strategy))),
            ["c-foo", "b-bar", "a-other", "d-none"]
        );
    }

    #[test]
    fn weight_sums_every_matching_term() {
        let strategy = UpdatePriorityStrategy {
            order_priority: vec![],
            weight_priority: vec![
                weight_term(20, "k1", "foo"),
                weight_term(10, "k2", "bar"),
                weight_term(15, "k3", "baz"),
            ],
        };
        let one = healthy("one").label("k1", "foo").build();
        let two = healthy("two").label("k2", "bar").label("k3", "baz").build();
        assert_eq!(weight_of(&one, &strategy), 20);
        assert_eq!(weight_of(&two, &strategy), 25);
        assert_eq!(weight_of(&healthy("x").build(), &strategy), 0);
        assert_eq!(sorted(&[&one, &two], &ctx(Some(&strategy))), ["two", "one"]);
    }

    #[test]
    fn weight_term_with_invalid_selector_is_skipped() {
        let mut bad = weight_term(40, "k", "v");
        bad.match_selector.match_expressions = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "k".into(),
                operator: "In".into(),
                values: None,
            },
        ]);
        let strategy = UpdatePriorityStrategy {
            order_priority: vec![],
            weight_priority: vec![bad, weight_term(5, "k", "v")],
        };
        assert_eq!(
            weight_of(&healthy("x").label("k", "v").build(), &strategy),
            5
        );
    }

    #[test]
    fn equal_priority_keeps_default_order() {
        let strategy = UpdatePriorityStrategy {
            order_priority: vec![],
            weight_priority: vec![weight_term(10, "k", "v")],
        };
        let not_ready = healthy("z").label("k", "v").not_ready(t(0)).build();
        let ready = healthy("a").label("k", "v").build();
        let other = healthy("m").not_ready(t(0)).build();
        assert_eq!(
            sorted(&[&ready, &other, &not_ready], &ctx(Some(&strategy))),
            ["z", "a", "m"]
        );
    }

    /// The orderPriority example of OpenKruise's documentation (CloneSet user manual).
    #[test]
    fn documented_order_sts_10_before_5() {
        let strategy = order_terms(&["some-label-key"]);
        let five = healthy("a").label("some-label-key", "5").build();
        let ten = healthy("b").label("some-label-key", "sts-10").build();
        assert_eq!(sorted(&[&five, &ten], &ctx(Some(&strategy))), ["b", "a"]);
    }

    #[test]
    fn order_earlier_term_first_and_keyless_pods_first_quirk() {
        let strategy = order_terms(&["key1", "key2"]);
        let k2_high = healthy("a").label("key2", "o-99").build();
        let k1_low = healthy("b").label("key1", "o-1").build();
        let k1_high = healthy("c").label("key1", "o-10").build();
        let keyless = healthy("d").build();
        let both = healthy("e")
            .label("key1", "o-5")
            .label("key2", "o-100")
            .build();
        assert_eq!(order_priority(&keyless, &strategy), (-1, 0));
        assert_eq!(
            order_priority(&both, &strategy),
            (0, 5),
            "the first term the pod has decides"
        );
        assert_eq!(
            sorted(
                &[&k2_high, &k1_low, &k1_high, &keyless, &both],
                &ctx(Some(&strategy))
            ),
            ["d", "c", "e", "b", "a"]
        );
    }

    #[test]
    fn weight_wins_when_both_lists_are_set() {
        let mut strategy = order_terms(&["ord"]);
        strategy.weight_priority = vec![weight_term(10, "w", "x")];
        let weighted = healthy("b").label("w", "x").label("ord", "1").build();
        let ordered = healthy("a").label("ord", "99").build();
        assert_eq!(
            sorted(&[&ordered, &weighted], &ctx(Some(&strategy))),
            ["b", "a"]
        );
    }

    #[test]
    fn empty_strategy_changes_nothing() {
        let strategy = UpdatePriorityStrategy::default();
        let a = healthy("a").label("x", "1").build();
        let b = healthy("b").not_ready(t(0)).build();
        assert_eq!(sorted(&[&a, &b], &ctx(Some(&strategy))), ["b", "a"]);
    }

    #[test]
    fn ordered_value_takes_trailing_integer() {
        assert_eq!(ordered_value("5"), 5);
        assert_eq!(ordered_value("sts-10"), 10);
        assert_eq!(ordered_value("a007"), 7);
        assert_eq!(ordered_value("12ab"), 0);
        assert_eq!(ordered_value(""), 0);
        assert_eq!(ordered_value("abc"), 0);
        assert_eq!(ordered_value("x-1-2"), 2);
        assert_eq!(ordered_value("-3"), 3, "a minus sign is not a digit");
        assert_eq!(ordered_value("9223372036854775807"), i64::MAX);
        assert_eq!(ordered_value("v99999999999999999999"), 0, "overflow ⇒ 0");
        assert_eq!(ordered_value("é5"), 5);
    }

    #[test]
    fn preparing_update_first_is_a_stable_partition() {
        let strategy = UpdatePriorityStrategy {
            order_priority: vec![],
            weight_priority: vec![weight_term(10, "k", "v")],
        };
        let heavy = healthy("a").label("k", "v").build();
        let prep_late = healthy("b").lifecycle("PreparingUpdate").build();
        let plain = healthy("c").build();
        let prep_early = healthy("d")
            .lifecycle("PreparingUpdate")
            .not_ready(t(0))
            .build();
        let pods = [&heavy, &prep_late, &plain, &prep_early];
        let mut c = ctx(Some(&strategy));
        assert_eq!(sorted(&pods, &c), ["a", "d", "b", "c"]);
        c.preparing_update_first = true;
        assert_eq!(sorted(&pods, &c), ["d", "b", "a", "c"]);
    }
}
