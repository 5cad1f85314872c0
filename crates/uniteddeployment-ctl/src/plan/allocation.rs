//! How many replicas each subset gets (openkruise/kruise v1.9.0
//! pkg/controller/uniteddeployment/allocator.go) and its partition (`calcNextPartitions` in
//! uniteddeployment_controller.go). Pure.
//!
//! - *Specific* (no subset sets minReplicas/maxReplicas): explicit `replicas` (an integer,
//!   or `N%` of spec.replicas rounded half up) are honoured, the rest is split evenly over
//!   the other subsets; the remainder goes +1 each to the subsets with the most current
//!   replicas (then the greatest name).
//! - *Min/max* (some subset sets one, or the Adaptive strategy): every subset first gets
//!   its minReplicas in spec order, then each is filled up to its maxReplicas in spec
//!   order until spec.replicas is reached.
//! - *Reserving* (Adaptive with `reserveUnschedulablePods`, [`allocate_reserving`]): the
//!   same two passes, but a subset that cannot take Pods now keeps its replicas, and the
//!   ones it cannot run are given again to the next subsets (temporary replacements).

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

/// Each subset's `(name, minReplicas, maxReplicas)` in spec order (0 and unbounded when
/// unset), percentages resolved against spec.replicas.
fn raw_bounds(spec: &UnitedDeploymentSpec) -> Result<Vec<(&str, i32, i32)>, AllocationError> {
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
        bounds.push((subset.name.as_str(), min, max));
    }
    Ok(bounds)
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
    for (name, min, max) in raw_bounds(spec)? {
        let subset_name = name;
        let (mut min, mut max) = (min, max);
        if let Some(held) = held {
            let ready = held.ready.get(subset_name).copied();
            match ready {
                Some(ready) if held.unschedulable.contains(subset_name) => {
                    min = min.max(ready);
                    max = max.min(ready);
                }
                Some(ready) if ready > min => min = ready.min(max),
                _ => {}
            }
        }
        bounds.push((subset_name, min, max));
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

/// What the reserving allocation knows of a subset that has a workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reserving {
    /// The workload's current replicas.
    pub replicas: i32,
    /// Its reserved Pods this round: a subset with any is unschedulable.
    pub reserved: i32,
    /// It reported `Schedulable=False` before this round: new, or just recovered, it
    /// takes Pods only as fast as they prove they run.
    pub marked: bool,
}

impl Reserving {
    /// Has reserved Pods.
    pub fn unschedulable(&self) -> bool {
        self.reserved > 0
    }

    /// How many more replicas it is expected to run: unbounded for a subset that is
    /// neither unschedulable nor marked, else its replicas that are not reserved (less
    /// than 0 when more Pods are reserved than it has replicas, while it scales down).
    fn room(&self) -> i64 {
        if self.unschedulable() || self.marked {
            i64::from(self.replicas) - i64::from(self.reserved)
        } else {
            i64::MAX
        }
    }
}

/// [`allocate`] under the Adaptive strategy with `reserveUnschedulablePods` (OpenKruise's
/// reservation allocator). `subsets` holds each subset that has a workload; one without is
/// schedulable.
///
/// Two passes in spec order as min/max: every subset up to its minReplicas, then each up
/// to its maxReplicas, except that a subset with reserved Pods is filled only up to the
/// replicas it has (it never grows while unschedulable). What a subset is given counts
/// against spec.replicas only as far as it has room to run it; the rest (replicas whose
/// Pods are, or will be, reserved) stays to be given to the next subsets, where it runs
/// as temporary replacements. As reserved Pods start, the room grows and the
/// replacements are scaled away.
pub fn allocate_reserving(
    spec: &UnitedDeploymentSpec,
    subsets: &BTreeMap<String, Reserving>,
) -> Result<BTreeMap<String, i32>, AllocationError> {
    let bounds = raw_bounds(spec)?;
    // Per subset: (replicas given, room left).
    let mut given: BTreeMap<&str, (i64, i64)> = bounds
        .iter()
        .map(|&(name, _, _)| {
            let room = subsets.get(name).map_or(i64::MAX, Reserving::room);
            (name, (0, room))
        })
        .collect();
    let mut rest = i64::from(spec.replicas.unwrap_or(0));
    // Gives `name` up to `to` replicas out of `rest`; returns how many count as running.
    let mut give = |name: &str, to: i64, rest: i64| -> i64 {
        let Some((replicas, room)) = given.get_mut(name) else {
            return 0;
        };
        let add = (to - *replicas).min(rest);
        let fits = add.min((*room).max(0));
        *replicas += add;
        *room = room.saturating_sub(add);
        fits.max(0)
    };
    'passes: for pass in [Pass::Min, Pass::Max] {
        for &(name, min, max) in &bounds {
            let to = match pass {
                Pass::Min => min,
                Pass::Max => match subsets.get(name) {
                    Some(s) if s.unschedulable() => s.replicas,
                    _ => max,
                },
            };
            rest -= give(name, i64::from(to), rest);
            if rest <= 0 {
                break 'passes;
            }
        }
    }
    Ok(given
        .into_iter()
        .map(|(name, (replicas, _))| {
            (
                name.to_string(),
                i32::try_from(replicas).unwrap_or(i32::MAX),
            )
        })
        .collect())
}

#[derive(Clone, Copy)]
enum Pass {
    Min,
    Max,
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

    fn reserving(replicas: i32, reserved: i32, marked: bool) -> Reserving {
        Reserving {
            replicas,
            reserved,
            marked,
        }
    }

    fn reserve_spec(replicas: i32, mins: [Option<i32>; 3]) -> UnitedDeploymentSpec {
        let subsets = mins
            .iter()
            .enumerate()
            .map(|(i, min)| bounded(&format!("subset-{i}"), min.map(IntOrString::Int), None))
            .collect();
        adaptive(spec(Some(replicas), subsets))
    }

    fn named(pairs: [(i32, i32, bool); 3]) -> BTreeMap<String, Reserving> {
        pairs
            .iter()
            .enumerate()
            .map(|(i, &(r, res, m))| (format!("subset-{i}"), reserving(r, res, m)))
            .collect()
    }

    fn split(a: i32, b: i32, c: i32) -> BTreeMap<String, i32> {
        current(&[("subset-0", a), ("subset-1", b), ("subset-2", c)])
    }

    #[test]
    fn reserving_keeps_reserved_replicas_and_replaces_them_next() {
        // OpenKruise's e2e "adaptive united deployment with unschedulable pods reserved":
        // three unbounded subsets, 2 replicas.
        let s = reserve_spec(2, [None, None, None]);
        assert_eq!(
            allocate_reserving(&s, &BTreeMap::new()).unwrap(),
            split(2, 0, 0)
        );
        // subset-0's 2 Pods reserved: kept, and 2 replacements in subset-1.
        let stuck0 = named([(2, 2, true), (0, 0, false), (0, 0, false)]);
        assert_eq!(allocate_reserving(&s, &stuck0).unwrap(), split(2, 2, 0));
        // subset-1's too: 2 more in subset-2.
        let stuck01 = named([(2, 2, true), (2, 2, true), (0, 0, false)]);
        assert_eq!(allocate_reserving(&s, &stuck01).unwrap(), split(2, 2, 2));
        // Scaled to 4 and back: only the replacements move.
        let s4 = reserve_spec(4, [None, None, None]);
        let at2 = named([(2, 2, true), (2, 2, true), (2, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &at2).unwrap(), split(2, 2, 4));
        // subset-0 recovered (its Pods run, the subset still marked): it takes all 4, the
        // replacements stay until the 2 new Pods run too.
        let recovered = named([(2, 0, true), (2, 2, true), (4, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &recovered).unwrap(), split(4, 2, 2));
        // The new Pods reserved while they start: nothing moves.
        let starting = named([(4, 2, true), (2, 2, true), (2, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &starting).unwrap(), split(4, 2, 2));
        // All 4 run: the replacements and subset-1's reserved Pods go.
        let running = named([(4, 0, true), (2, 2, true), (2, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &running).unwrap(), split(4, 0, 0));
        let settled = named([(4, 0, false), (0, 0, false), (0, 0, false)]);
        let s5 = reserve_spec(5, [None, None, None]);
        assert_eq!(allocate_reserving(&s5, &settled).unwrap(), split(5, 0, 0));
    }

    #[test]
    fn reserving_with_min_replicas() {
        // "adaptive united deployment with reserved pods and min replicas": subset-0 and
        // subset-1 min 1, 2 replicas.
        let s = reserve_spec(2, [Some(1), Some(1), None]);
        assert_eq!(
            allocate_reserving(&s, &BTreeMap::new()).unwrap(),
            split(1, 1, 0)
        );
        let stuck = named([(1, 1, false), (1, 1, false), (0, 0, false)]);
        assert_eq!(allocate_reserving(&s, &stuck).unwrap(), split(1, 1, 2));
        let s4 = reserve_spec(4, [Some(1), Some(1), None]);
        let at2 = named([(1, 1, true), (1, 1, true), (2, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &at2).unwrap(), split(1, 1, 4));
        // subset-0 recovered: 4 there (3 new Pods on probation), 3 replacements kept.
        let recovered = named([(1, 0, true), (1, 1, true), (4, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &recovered).unwrap(), split(4, 1, 3));
        let starting = named([(4, 3, true), (1, 1, true), (3, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &starting).unwrap(), split(4, 1, 3));
        let running = named([(4, 0, true), (1, 1, true), (3, 0, false)]);
        assert_eq!(allocate_reserving(&s4, &running).unwrap(), split(4, 1, 0));
        let s5 = reserve_spec(5, [Some(1), Some(1), None]);
        let settled = named([(4, 0, false), (1, 1, true), (0, 0, false)]);
        assert_eq!(allocate_reserving(&s5, &settled).unwrap(), split(5, 1, 0));
    }

    #[test]
    fn reserving_respects_max_and_bad_bounds() {
        let s = adaptive(spec(
            Some(5),
            vec![
                bounded("a", None, Some(IntOrString::Int(2))),
                bounded("b", None, Some(IntOrString::Int(1))),
                subset("c"),
            ],
        ));
        // a has 1 of its 2 Pods reserved: 1 replacement, in b up to its max, then c.
        let subsets = BTreeMap::from([
            ("a".to_string(), reserving(2, 1, true)),
            ("b".to_string(), reserving(1, 0, false)),
        ]);
        assert_eq!(
            allocate_reserving(&s, &subsets).unwrap(),
            current(&[("a", 2), ("b", 1), ("c", 3)])
        );
        let bad = adaptive(spec(
            Some(1),
            vec![bounded(
                "a",
                Some(IntOrString::Int(3)),
                Some(IntOrString::Int(2)),
            )],
        ));
        assert_eq!(
            allocate_reserving(&bad, &BTreeMap::new()),
            Err(AllocationError::MinAboveMax(0))
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

        /// Reserving: with nothing reserved or marked it is the plain min/max split; in
        /// any state no subset goes negative, a subset with reserved Pods never grows
        /// beyond its replicas (or its min), a schedulable one never beyond its max, and
        /// the replicas expected to run (a subset's allocation up to its room) add up to
        /// spec.replicas whenever a schedulable unbounded subset can take the rest.
        #[test]
        fn reserving_replaces_exactly_what_cannot_run(
            replicas in 0..40i32,
            states in proptest::collection::vec(
                (0..4i32, proptest::option::of(0..6i32), proptest::option::of((0..10i32, 0..10i32, any::<bool>()))),
                1..6,
            ),
        ) {
            let subsets: Vec<Subset> = states.iter().enumerate().map(|(i, (min, max, _))| {
                bounded(&format!("s{i}"), Some(IntOrString::Int(*min)), max.map(|m| IntOrString::Int(m + min)))
            }).collect();
            let s = adaptive(spec(Some(replicas), subsets));
            let existing: BTreeMap<String, Reserving> = states.iter().enumerate()
                .filter_map(|(i, (_, _, w))| w.map(|(r, res, m)| (format!("s{i}"), reserving(r, res.min(r + 2), m))))
                .collect();
            let got = allocate_reserving(&s, &existing).unwrap();
            if existing.values().all(|r| !r.unschedulable() && !r.marked) {
                prop_assert_eq!(&got, &min_max(&s, None).unwrap());
            }
            let mut running = 0i64;
            let mut open_end = false;
            for (i, (min, max, _)) in states.iter().enumerate() {
                let name = format!("s{i}");
                let r = got[&name];
                prop_assert!(r >= 0);
                match existing.get(&name) {
                    Some(w) if w.unschedulable() => prop_assert!(r <= w.replicas.max(*min)),
                    _ => if let Some(max) = max { prop_assert!(r <= max + min) },
                }
                let room = existing.get(&name).map_or(i64::MAX, Reserving::room).max(0);
                running += i64::from(r).min(room);
                let schedulable = existing.get(&name).is_none_or(|w| !w.unschedulable() && !w.marked);
                open_end |= schedulable && max.is_none();
            }
            prop_assert!(running <= i64::from(replicas));
            if open_end {
                prop_assert_eq!(running, i64::from(replicas));
            }
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
