//! How many replicas each subset gets (spec 2.4.2) and its partition (spec 2.4.3). Pure.
//!
//! - *Specific* (no subset sets minReplicas/maxReplicas): explicit `replicas` (an integer,
//!   or `N%` of spec.replicas rounded half up) are honoured, the rest is split evenly over
//!   the other subsets; the remainder goes +1 each to the subsets with the most current
//!   replicas (then the greatest name).
//! - *Min/max* (some subset sets one, or the Adaptive strategy): every subset first gets
//!   its minReplicas in spec order, then each is filled up to its maxReplicas in spec
//!   order until spec.replicas is reached.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::UnitedDeploymentSpec;

/// Why the replicas cannot be split (the controller then leaves every workload as it is).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    #[error("subsetReplicas ({0}) should not be less than 0")]
    Negative(i32),
    #[error(
        "subset replicas ({0}) only support integer value or percentage value with a suffix '%'"
    )]
    NotAPercentage(String),
    #[error("subset replicas ({0}) should be in range [0, 100]")]
    PercentOutOfRange(String),
    #[error("subset replicas ({0}) is a percentage but UnitedDeployment replicas is not set")]
    PercentWithoutReplicas(String),
    #[error(
        "specified subsets' replica ({specified}) is greater than UnitedDeployment replica ({replicas})"
    )]
    SpecifiedAboveTotal { specified: i32, replicas: i32 },
    #[error(
        "specified subsets' replica ({specified}) is less than UnitedDeployment replica ({replicas})"
    )]
    SpecifiedBelowTotal { specified: i32, replicas: i32 },
    #[error("all subsets must be specified when UnitedDeployment replicas is unspecified")]
    UnspecifiedSubsets,
    #[error("subset[{0}].maxReplicas must be more than or equal to minReplicas")]
    MinAboveMax(usize),
}

/// A subset's `replicas`, `minReplicas` or `maxReplicas` resolved against spec.replicas
/// (`None`: unset, so a percentage cannot be resolved). Percentages round half up.
pub fn parse_subset_replicas(
    total: Option<i32>,
    value: &IntOrString,
) -> Result<i32, AllocationError> {
    match value {
        IntOrString::Int(n) if *n < 0 => Err(AllocationError::Negative(*n)),
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| AllocationError::NotAPercentage(s.clone()))?;
            if !(0..=100).contains(&percent) {
                return Err(AllocationError::PercentOutOfRange(s.clone()));
            }
            let total = total.ok_or_else(|| AllocationError::PercentWithoutReplicas(s.clone()))?;
            // round(total × percent / 100), half up, in integers.
            Ok(((i64::from(total) * percent * 2 + 100) / 200) as i32)
        }
    }
}

/// Whether the spec splits by min/max (else by explicit replicas).
pub fn uses_min_max(spec: &UnitedDeploymentSpec) -> bool {
    spec.topology.schedule_strategy.is_adaptive()
        || spec
            .topology
            .subsets
            .iter()
            .any(|s| s.min_replicas.is_some() || s.max_replicas.is_some())
}

/// The replicas of every subset (by name). `current` holds each subset's current
/// workload replicas: the remainder of an even split goes to the largest first.
pub fn allocate(
    spec: &UnitedDeploymentSpec,
    current: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, i32>, AllocationError> {
    allocate_adaptive(spec, current, &Held::default())
}

/// What the Adaptive strategy changes in a min/max split.
#[derive(Clone, Debug, Default)]
pub struct Held {
    /// Ready replicas of each subset that has a workload.
    pub ready: BTreeMap<String, i32>,
    /// Subsets unschedulable this round.
    pub unschedulable: BTreeSet<String>,
}

/// [`allocate`] under the Adaptive strategy: an unschedulable subset is held at its
/// ready replicas (its pending Pods go, their replicas move to the next subsets); a
/// schedulable one keeps at least its ready replicas (up to its max), so running Pods
/// are never moved back. Without Adaptive `held` is ignored.
pub fn allocate_adaptive(
    spec: &UnitedDeploymentSpec,
    current: &BTreeMap<String, i32>,
    held: &Held,
) -> Result<BTreeMap<String, i32>, AllocationError> {
    if uses_min_max(spec) {
        let held = spec
            .topology
            .schedule_strategy
            .is_adaptive()
            .then_some(held);
        min_max(spec, held)
    } else {
        specific(spec, current)
    }
}

fn specific(
    spec: &UnitedDeploymentSpec,
    current: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, i32>, AllocationError> {
    let subsets = &spec.topology.subsets;
    let mut allocation = BTreeMap::new();
    for subset in subsets {
        if let Some(value) = &subset.replicas {
            allocation.insert(
                subset.name.clone(),
                parse_subset_replicas(spec.replicas, value)?,
            );
        }
    }
    let specified: i32 = allocation.values().sum();
    let Some(replicas) = spec.replicas else {
        if allocation.len() != subsets.len() {
            return Err(AllocationError::UnspecifiedSubsets);
        }
        return Ok(allocation);
    };
    if specified > replicas {
        return Err(AllocationError::SpecifiedAboveTotal {
            specified,
            replicas,
        });
    }
    // Subset names are unique (admission), so counting by name is counting subsets.
    let mut rest: Vec<(i32, &str)> = subsets
        .iter()
        .filter(|s| !allocation.contains_key(&s.name))
        .map(|s| (current.get(&s.name).copied().unwrap_or(0), s.name.as_str()))
        .collect();
    if rest.is_empty() {
        if specified < replicas {
            return Err(AllocationError::SpecifiedBelowTotal {
                specified,
                replicas,
            });
        }
        return Ok(allocation);
    }
    rest.sort();
    let left = replicas - specified;
    let count = rest.len() as i32;
    let (average, mut remainder) = (left / count, left % count);
    for (_, name) in rest.iter().rev() {
        let extra = i32::from(remainder > 0);
        remainder -= extra;
        allocation.insert((*name).to_string(), average + extra);
    }
    Ok(allocation)
}

#[allow(
    clippy::expect_used,
    reason = "the entry is inserted for every subset above"
)]
fn min_max(
    spec: &UnitedDeploymentSpec,
    held: Option<&Held>,
) -> Result<BTreeMap<String, i32>, AllocationError> {
    let replicas = spec.replicas.unwrap_or(0);
    let mut bounds = Vec::with_capacity(spec.topology.subsets.len());
    for (index, subset) in spec.topology.subsets.iter().enumerate() {
        let min = match &subset.min_replicas {
            Some(v) => parse_subset_replicas(spec.replicas, v)?,
            None => 0,
        };
        let max = match &subset.max_replicas {
            Some(v) => parse_subset_replicas(spec.replicas, v)?,
            None => i32::MAX,
        };
        if min > max {
            return Err(AllocationError::MinAboveMax(index));
        }
        let (mut min, mut max) = (min, max);
        if let Some(held) = held {
            let ready = held.ready.get(&subset.name).copied();
            match ready {
                Some(ready) if held.unschedulable.contains(&subset.name) => {
                    min = min.max(ready);
                    max = max.min(ready);
                }
                Some(ready) if ready > min => min = ready.min(max),
                _ => {}
            }
        }
        bounds.push((subset.name.as_str(), min, max));
    }
    let mut allocation = BTreeMap::new();
    let mut allocated = 0;
    for &(name, min, _) in &bounds {
        let give = min.min(replicas - allocated);
        allocation.insert(name.to_string(), give);
        allocated += give;
    }
    for &(name, min, max) in &bounds {
        if allocated >= replicas {
            break;
        }
        // max < min for an unschedulable subset whose minReplicas exceeds its ready Pods.
        let give = (max - min).max(0).min(replicas - allocated);
        *allocation.get_mut(name).expect("inserted above") += give;
        allocated += give;
    }
    Ok(allocation)
}

/// Each subset's partition: `manualUpdate.partitions[subset]` (0 when unset), at most
/// its allocated replicas.
pub fn partitions(
    spec: &UnitedDeploymentSpec,
    allocation: &BTreeMap<String, i32>,
) -> BTreeMap<String, i32> {
    spec.topology
        .subsets
        .iter()
        .map(|s| {
            let wanted = spec.update_strategy.partition(&s.name).max(0);
            let replicas = allocation.get(&s.name).copied().unwrap_or(0);
            (s.name.clone(), wanted.min(replicas))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps_v1alpha1::{ManualUpdate, Subset, UnitedDeploymentUpdateStrategy};
    use proptest::prelude::*;

    fn subset(name: &str) -> Subset {
        Subset {
            name: name.into(),
            ..Default::default()
        }
    }

    fn spec(replicas: Option<i32>, subsets: Vec<Subset>) -> UnitedDeploymentSpec {
        let mut spec = UnitedDeploymentSpec {
            replicas,
            ..Default::default()
        };
        spec.topology.subsets = subsets;
        spec
    }

    fn current(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
        pairs.iter().map(|(n, r)| (n.to_string(), *r)).collect()
    }

    fn fixed(name: &str, replicas: IntOrString) -> Subset {
        Subset {
            replicas: Some(replicas),
            ..subset(name)
        }
    }

    fn bounded(name: &str, min: Option<IntOrString>, max: Option<IntOrString>) -> Subset {
        Subset {
            min_replicas: min,
            max_replicas: max,
            ..subset(name)
        }
    }

    #[test]
    fn remainder_goes_to_the_largest_current_subsets() {
        // Spec example: 5 over t1=1, t2=4, t3=2, t4=2 → t2 gets the extra one.
        let s = spec(Some(5), ["t1", "t2", "t3", "t4"].map(subset).into());
        let got = allocate(&s, &current(&[("t1", 1), ("t2", 4), ("t3", 2), ("t4", 2)])).unwrap();
        assert_eq!(got, current(&[("t1", 1), ("t2", 2), ("t3", 1), ("t4", 1)]));
    }

    #[test]
    fn explicit_replicas_are_honoured_and_the_rest_split() {
        // Spec example: 27 with t1=4 and t3=4 fixed → t4 9, t2 10.
        let s = spec(
            Some(27),
            vec![
                fixed("t1", IntOrString::Int(4)),
                subset("t2"),
                fixed("t3", IntOrString::Int(4)),
                subset("t4"),
            ],
        );
        let got = allocate(&s, &current(&[("t1", 1), ("t2", 4), ("t3", 2), ("t4", 2)])).unwrap();
        assert_eq!(got, current(&[("t1", 4), ("t2", 10), ("t3", 4), ("t4", 9)]));
    }

    #[test]
    fn subtle_case_19_and_21_over_two() {
        let s = spec(Some(19), vec![subset("t1"), subset("t2")]);
        let now = current(&[("t1", 0), ("t2", 10)]);
        assert_eq!(
            allocate(&s, &now).unwrap(),
            current(&[("t1", 9), ("t2", 10)])
        );
        let s = spec(Some(21), vec![subset("t1"), subset("t2")]);
        assert_eq!(
            allocate(&s, &now).unwrap(),
            current(&[("t1", 10), ("t2", 11)])
        );
    }

    #[test]
    fn ties_on_current_replicas_go_to_the_greater_name() {
        let s = spec(
            Some(7),
            ["subset-a", "subset-b", "subset-c"].map(subset).into(),
        );
        assert_eq!(
            allocate(&s, &BTreeMap::new()).unwrap(),
            current(&[("subset-a", 2), ("subset-b", 2), ("subset-c", 3)])
        );
    }

    #[test]
    fn percentages_round_half_up() {
        let s = spec(
            Some(5),
            vec![fixed("a", IntOrString::String("50%".into())), subset("b")],
        );
        assert_eq!(
            allocate(&s, &BTreeMap::new()).unwrap(),
            current(&[("a", 3), ("b", 2)])
        );
        assert_eq!(
            parse_subset_replicas(Some(3), &IntOrString::String("50%".into())),
            Ok(2)
        );
        assert_eq!(
            parse_subset_replicas(Some(10), &IntOrString::String("101%".into())),
            Err(AllocationError::PercentOutOfRange("101%".into()))
        );
        assert_eq!(
            parse_subset_replicas(Some(10), &IntOrString::String("5".into())),
            Err(AllocationError::NotAPercentage("5".into()))
        );
    }

    #[test]
    fn specified_above_total_is_refused() {
        let s = spec(Some(3), vec![fixed("a", IntOrString::Int(4)), subset("b")]);
        let err = allocate(&s, &BTreeMap::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "specified subsets' replica (4) is greater than UnitedDeployment replica (3)"
        );
    }

    #[test]
    fn all_explicit_must_sum_to_total_and_unset_total_takes_them() {
        let subsets = vec![
            fixed("a", IntOrString::Int(1)),
            fixed("b", IntOrString::Int(2)),
        ];
        let s = spec(Some(4), subsets.clone());
        assert!(matches!(
            allocate(&s, &BTreeMap::new()),
            Err(AllocationError::SpecifiedBelowTotal { .. })
        ));
        let s = spec(None, subsets);
        assert_eq!(
            allocate(&s, &BTreeMap::new()).unwrap(),
            current(&[("a", 1), ("b", 2)])
        );
        let s = spec(None, vec![fixed("a", IntOrString::Int(1)), subset("b")]);
        assert_eq!(
            allocate(&s, &BTreeMap::new()),
            Err(AllocationError::UnspecifiedSubsets)
        );
    }

    #[test]
    fn min_first_then_max_in_spec_order() {
        let s = spec(
            Some(10),
            vec![
                bounded("a", Some(IntOrString::Int(2)), Some(IntOrString::Int(4))),
                bounded("b", Some(IntOrString::Int(3)), Some(IntOrString::Int(3))),
                bounded("c", Some(IntOrString::Int(1)), None),
            ],
        );
        assert_eq!(
            allocate(&s, &BTreeMap::new()).unwrap(),
            current(&[("a", 4), ("b", 3), ("c", 3)])
        );
        // Fewer replicas than the minimums: the first subsets get theirs.
        let s = spec(Some(4), s.topology.subsets.clone());
        assert_eq!(
            allocate(&s, &BTreeMap::new()).unwrap(),
            current(&[("a", 2), ("b", 2), ("c", 0)])
        );
    }

    fn adaptive(mut s: UnitedDeploymentSpec) -> UnitedDeploymentSpec {
        s.topology.schedule_strategy.type_ =
            Some(kruise_api::apps_v1alpha1::UnitedDeploymentScheduleStrategyType::Adaptive);
        s
    }

    fn held(ready: &[(&str, i32)], unschedulable: &[&str]) -> Held {
        Held {
            ready: current(ready),
            unschedulable: unschedulable.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn adaptive_holds_an_unschedulable_subset_at_its_ready_pods() {
        // OpenKruise's e2e "adaptive united deployment basic": a=max 2, b=max 2, c.
        let two = Some(IntOrString::Int(2));
        let s = adaptive(spec(
            Some(3),
            vec![
                bounded("a", None, two.clone()),
                bounded("b", None, two),
                subset("c"),
            ],
        ));
        let fresh = allocate_adaptive(&s, &BTreeMap::new(), &Held::default()).unwrap();
        assert_eq!(fresh, current(&[("a", 2), ("b", 1), ("c", 0)]));
        let stuck = held(&[("a", 2), ("b", 0), ("c", 0)], &["b"]);
        let moved = allocate_adaptive(&s, &BTreeMap::new(), &stuck).unwrap();
        assert_eq!(moved, current(&[("a", 2), ("b", 0), ("c", 1)]));
        // Recovered, with 2 ready in c: c keeps them, the new replica tries b again.
        let mut s5 = s.clone();
        s5.replicas = Some(5);
        let recovered = held(&[("a", 2), ("b", 0), ("c", 2)], &[]);
        assert_eq!(
            allocate_adaptive(&s5, &BTreeMap::new(), &recovered).unwrap(),
            current(&[("a", 2), ("b", 1), ("c", 2)])
        );
        // Without Adaptive the held subsets are ignored.
        let mut fixed = s.clone();
        fixed.topology.schedule_strategy.type_ = None;
        assert_eq!(
            allocate_adaptive(&fixed, &BTreeMap::new(), &stuck).unwrap(),
            fresh
        );
    }

    #[test]
    fn adaptive_unschedulable_subset_keeps_its_min() {
        // "with min replicas": a=min 1 max 2 unschedulable with 0 ready keeps 1 (pending).
        let s = adaptive(spec(
            Some(3),
            vec![
                bounded("a", Some(IntOrString::Int(1)), Some(IntOrString::Int(2))),
                subset("b"),
            ],
        ));
        let stuck = held(&[("a", 0), ("b", 1)], &["a"]);
        assert_eq!(
            allocate_adaptive(&s, &BTreeMap::new(), &stuck).unwrap(),
            current(&[("a", 1), ("b", 2)])
        );
    }

    #[test]
    fn min_max_percentages_and_bad_bounds() {
        let s = spec(
            Some(10),
            vec![
                bounded("a", None, Some(IntOrString::String("30%".into()))),
                bounded("b", None, None),
            ],
        );
        assert_eq!(
            allocate(&s, &BTreeMap::new()).unwrap(),
            current(&[("a", 3), ("b", 7)])
        );
        let s = spec(
            Some(10),
            vec![
                bounded("a", Some(IntOrString::Int(5)), Some(IntOrString::Int(2))),
                bounded("b", None, None),
            ],
        );
        assert_eq!(
            allocate(&s, &BTreeMap::new()),
            Err(AllocationError::MinAboveMax(0))
        );
    }

    #[test]
    fn partitions_are_capped_by_the_allocation() {
        let mut s = spec(Some(4), vec![subset("a"), subset("b"), subset("c")]);
        s.update_strategy = UnitedDeploymentUpdateStrategy {
            type_: None,
            manual_update: Some(ManualUpdate {
                partitions: current(&[("a", 5), ("b", 1)]),
            }),
        };
        let allocation = current(&[("a", 2), ("b", 1), ("c", 1)]);
        assert_eq!(
            partitions(&s, &allocation),
            current(&[("a", 2), ("b", 1), ("c", 0)])
        );
    }

    fn int_or_percent() -> impl Strategy<Value = IntOrString> {
        prop_oneof![
            (0..20i32).prop_map(IntOrString::Int),
            (0..=100i32).prop_map(|p| IntOrString::String(format!("{p}%"))),
        ]
    }

    proptest! {
        /// Without explicit replicas the split always sums to spec.replicas and no two
        /// subsets differ by more than one.
        #[test]
        fn even_split_sums_and_is_balanced(
            replicas in 0..200i32,
            currents in proptest::collection::vec(0..50i32, 1..8),
        ) {
            let names: Vec<String> = (0..currents.len()).map(|i| format!("s{i}")).collect();
            let s = spec(Some(replicas), names.iter().map(|n| subset(n)).collect());
            let now: BTreeMap<String, i32> = names.iter().cloned().zip(currents).collect();
            let got = allocate(&s, &now).unwrap();
            prop_assert_eq!(got.values().sum::<i32>(), replicas);
            let (lo, hi) = (got.values().min().unwrap(), got.values().max().unwrap());
            prop_assert!(hi - lo <= 1);
        }

        /// Explicit replicas: whenever the allocation succeeds it sums to spec.replicas and
        /// every explicit subset gets exactly its value; it fails only when the explicit
        /// sum exceeds the total (or all are explicit and fall short).
        #[test]
        fn explicit_split_sums_or_fails_for_a_reason(
            replicas in 0..100i32,
            explicit in proptest::collection::vec(proptest::option::of(int_or_percent()), 1..6),
        ) {
            let subsets: Vec<Subset> = explicit.iter().enumerate().map(|(i, r)| Subset {
                replicas: r.clone(),
                ..subset(&format!("s{i}"))
            }).collect();
            let s = spec(Some(replicas), subsets.clone());
            let fixed_sum: i32 = subsets.iter().filter_map(|s| s.replicas.as_ref())
                .map(|v| parse_subset_replicas(Some(replicas), v).unwrap()).sum();
            let all_fixed = subsets.iter().all(|s| s.replicas.is_some());
            match allocate(&s, &BTreeMap::new()) {
                Ok(got) => {
                    prop_assert_eq!(got.values().sum::<i32>(), replicas);
                    for sub in &subsets {
                        if let Some(v) = &sub.replicas {
                            prop_assert_eq!(got[&sub.name], parse_subset_replicas(Some(replicas), v).unwrap());
                        }
                    }
                }
                Err(AllocationError::SpecifiedAboveTotal { .. }) => prop_assert!(fixed_sum > replicas),
                Err(AllocationError::SpecifiedBelowTotal { .. }) => prop_assert!(all_fixed && fixed_sum < replicas),
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }

        /// Min/max: every subset stays within [0, max], gets its min whenever the
        /// minimums fit, and the sum equals spec.replicas whenever the maximums allow it.
        #[test]
        fn min_max_respects_bounds_and_sums(
            replicas in 0..100i32,
            bounds in proptest::collection::vec((0..10i32, proptest::option::of(0..30i32)), 1..6),
        ) {
            let subsets: Vec<Subset> = bounds.iter().enumerate().map(|(i, (min, max))| {
                let max = max.map(|m| m + min);
                bounded(&format!("s{i}"), Some(IntOrString::Int(*min)), max.map(IntOrString::Int))
            }).collect();
            let s = spec(Some(replicas), subsets);
            let got = allocate(&s, &BTreeMap::new()).unwrap();
            let mins: i32 = bounds.iter().map(|(m, _)| m).sum();
            let capacity: i64 = bounds.iter()
                .map(|(m, x)| x.map_or(i64::from(i32::MAX), |x| i64::from(x + m))).sum();
            for (i, (min, max)) in bounds.iter().enumerate() {
                let r = got[&format!("s{i}")];
                prop_assert!(r >= 0);
                if let Some(max) = max { prop_assert!(r <= max + min); }
                if mins <= replicas { prop_assert!(r >= *min); }
            }
            let sum: i32 = got.values().sum();
            prop_assert_eq!(i64::from(sum), i64::from(replicas).min(capacity));
        }

        /// A partition never exceeds its subset's replicas and never goes negative.
        #[test]
        fn partitions_stay_within_replicas(
            wanted in proptest::collection::vec(-5..20i32, 1..6),
            replicas in proptest::collection::vec(0..10i32, 6),
        ) {
            let names: Vec<String> = (0..wanted.len()).map(|i| format!("s{i}")).collect();
            let mut s = spec(Some(0), names.iter().map(|n| subset(n)).collect());
            s.update_strategy.manual_update = Some(ManualUpdate {
                partitions: names.iter().cloned().zip(wanted.iter().copied()).collect(),
            });
            let allocation: BTreeMap<String, i32> = names.iter().cloned().zip(replicas).collect();
            for (name, p) in partitions(&s, &allocation) {
                prop_assert!(p >= 0 && p <= allocation[&name]);
            }
        }
    }
}
