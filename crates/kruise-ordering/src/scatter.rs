//! `scatterStrategy`: spread Pods carrying `key=value` through the update order (openkruise/kruise
//! v1.9.0 pkg/util/updatesort/scatter_sort.go), so e.g. the Pods of one traffic group are not all
//! updated at once.
//!
//! Per term, terms ordered by how many candidates match (most first): keep the last matching Pod
//! for the very end; interleave the other matching ("matched") and non-matching ("unmatched") Pods
//! as `groups` repetitions of `matched_size` matched then `unmatched_size` unmatched, where
//! `groups = min(matched, unmatched)` and each size is `round(count / groups)` (half away from
//! zero, as Go's `math.Round`); leftovers follow, matched first. The example of OpenKruise's
//! documentation (CloneSet user manual): 10 Pods, 3 matching → they land at positions 1, 6 and 10.
//!
//! Faithful to upstream, including where it scatters imperfectly: the unmatched Pods
//! can run out before the matched groups do (e.g. 6 matched / 8 unmatched: sizes 1 and
//! 2 use up the unmatched Pods after four groups), leaving the last matched Pods
//! adjacent at the end. Before the last unmatched Pod, no two matched Pods are ever
//! adjacent when `matched ≤ unmatched`.

use kruise_api::appspub::UpdateScatterTerm;
use kruise_api::pod::PodView;

use crate::predicates;

/// Re-orders `ordered` (already in default/priority order) by the scatter terms.
/// `population` is every active Pod of the workload (a superset of `ordered`); it only
/// matters when the candidates hold fewer matched Pods per unmatched one than the
/// workload (see `GroupPlan::by_density`).
pub fn scatter<'p, P: PodView>(
    ordered: &[&'p P],
    terms: &[UpdateScatterTerm],
    population: &[&P],
) -> Vec<&'p P> {
    let mut pods = ordered.to_vec();
    if pods.len() <= 1 {
        return pods;
    }
    for term in effective_terms(&pods, terms) {
        pods = scatter_by_term(&pods, term, population);
    }
    pods
}

/// A Pod matches a term when it carries the label `key` with exactly `value`.
///
/// Decision: upstream counts a match only when the label is present but, when
/// interleaving, treats a Pod without the label as matching a term whose value is `""`.
/// We use the present-and-equal rule for both, so a term means one thing.
pub fn matches_term<P: PodView>(pod: &P, term: &UpdateScatterTerm) -> bool {
    predicates::label(pod, &term.key) == Some(term.value.as_str())
}

/// The terms to apply, in order. A single term is used as is; several are de-duplicated,
/// those no candidate matches are dropped, and the rest are stably sorted by how many
/// candidates match, most first (upstream `getScatterTerms`).
fn effective_terms<'t, P: PodView>(
    pods: &[&P],
    terms: &'t [UpdateScatterTerm],
) -> Vec<&'t UpdateScatterTerm> {
    if terms.len() == 1 {
        return terms.iter().collect();
    }
    let mut counted: Vec<(&UpdateScatterTerm, usize)> = Vec::new();
    for term in terms {
        if counted.iter().any(|(seen, _)| *seen == term) {
            continue;
        }
        let count = pods.iter().filter(|p| matches_term(p, term)).count();
        if count > 0 {
            counted.push((term, count));
        }
    }
    counted.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
    counted.into_iter().map(|(term, _)| term).collect()
}

fn scatter_by_term<'p, P: PodView>(
    pods: &[&'p P],
    term: &UpdateScatterTerm,
    population: &[&P],
) -> Vec<&'p P> {
    let (mut matched, unmatched): (Vec<&P>, Vec<&P>) =
        pods.iter().partition(|p| matches_term(p, term));
    // Nothing to interleave with one Pod on either side.
    if matched.len() <= 1 || unmatched.len() <= 1 {
        return pods.to_vec();
    }
    let Some(last_matched) = matched.pop() else {
        return pods.to_vec();
    };

    let population_matched = population.iter().filter(|p| matches_term(p, term)).count();
    let population_unmatched = population.len() - population_matched;
    // The population must contain the candidates; clamp in case a caller passed less.
    // The kept-back last Pod does not take part in the interleaving, here or there.
    let total_matched = population_matched.max(matched.len() + 1) - 1;
    let total_unmatched = population_unmatched.max(unmatched.len());

    let plan = GroupPlan::by_density(
        total_matched,
        total_unmatched,
        matched.len(),
        unmatched.len(),
    );
    let mut out = Vec::with_capacity(pods.len());
    let mut matched = matched.into_iter();
    let mut unmatched = unmatched.into_iter();
    out.extend(unmatched.by_ref().take(plan.unmatched_lead));
    for _ in 0..plan.groups {
        out.extend(matched.by_ref().take(plan.matched_size));
        out.extend(unmatched.by_ref().take(plan.unmatched_size));
    }
    out.extend(matched);
    out.extend(unmatched);
    out.push(last_matched);
    out
}

/// How to interleave: `unmatched_lead` unmatched Pods first, then `groups` times
/// `matched_size` matched and `unmatched_size` unmatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GroupPlan {
    groups: usize,
    matched_size: usize,
    unmatched_size: usize,
    unmatched_lead: usize,
}

impl GroupPlan {
    /// Evenly interleave `matched` and `unmatched` Pods. Both must be ≥ 1.
    fn even(matched: usize, unmatched: usize) -> Self {
        let groups = matched.min(unmatched);
        GroupPlan {
            groups,
            matched_size: round_div(matched, groups),
            unmatched_size: round_div(unmatched, groups),
            unmatched_lead: 0,
        }
    }

    /// Upstream `calculateGroupByDensity`: if the workload has at least as many
    /// unmatched Pods per matched Pod as the candidates, interleave the candidates
    /// evenly. Otherwise the candidates hold fewer matched Pods per unmatched one than
    /// the workload (some matched Pods are already updated): keep the workload's group
    /// sizes, make as many groups as the candidates can fill, and put the unmatched
    /// Pods that don't fit first, so the remaining matched Pods are not squeezed
    /// together at the end of the rollout.
    ///
    /// The ratio test is exact (cross-multiplied integers) where upstream compares
    /// `float32` quotients; they agree except for float rounding at huge counts.
    fn by_density(
        total_matched: usize,
        total_unmatched: usize,
        matched: usize,
        unmatched: usize,
    ) -> Self {
        let candidates = GroupPlan::even(matched, unmatched);
        if total_unmatched * matched >= unmatched * total_matched {
            return candidates;
        }
        let workload = GroupPlan::even(total_matched, total_unmatched);
        let groups = (matched / workload.matched_size).min(unmatched / workload.unmatched_size);
        GroupPlan {
            groups,
            matched_size: workload.matched_size,
            unmatched_size: workload.unmatched_size,
            unmatched_lead: unmatched - groups * workload.unmatched_size,
        }
    }
}

/// `round(a / b)` with halves away from zero, for `a ≥ 0`, `b ≥ 1`.
fn round_div(a: usize, b: usize) -> usize {
    (2 * a + b) / (2 * b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::pods::PodBuilder;
    use kruise_api::pod::Pod;

    fn term(key: &str, value: &str) -> UpdateScatterTerm {
        UpdateScatterTerm {
            key: key.into(),
            value: value.into(),
        }
    }

    /// Pods named "0", "1", … with labels from `"k=v,k2=v2"` strings ("" = none).
    fn labelled(specs: &[&str]) -> Vec<Pod> {
        specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                spec.split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .fold(PodBuilder::new(&i.to_string()), |b, (k, v)| b.label(k, v))
                    .build()
            })
            .collect()
    }

    fn indexes(pods: &[&Pod]) -> Vec<usize> {
        pods.iter()
            .map(|p| predicates::name(p).parse().unwrap())
            .collect()
    }

    fn run(specs: &[&str], terms: &[UpdateScatterTerm]) -> Vec<usize> {
        let pods = labelled(specs);
        let refs: Vec<&Pod> = pods.iter().collect();
        indexes(&scatter(&refs, terms, &refs))
    }

    #[test]
    fn round_div_rounds_half_up() {
        assert_eq!(round_div(7, 2), 4);
        assert_eq!(round_div(5, 2), 3);
        assert_eq!(round_div(4, 3), 1);
        assert_eq!(round_div(5, 3), 2);
        assert_eq!(round_div(2, 2), 1);
        assert_eq!(round_div(0, 3), 0);
    }

    #[test]
    fn documented_example_ten_pods_three_matching_at_1_6_10() {
        // The matching pods sit anywhere in the incoming order.
        let specs = ["", "foo=bar", "", "", "", "foo=bar", "", "", "foo=bar", ""];
        let order = run(&specs, &[term("foo", "bar")]);
        let positions: Vec<usize> = order
            .iter()
            .enumerate()
            .filter(|(_, idx)| specs[**idx] == "foo=bar")
            .map(|(pos, _)| pos + 1)
            .collect();
        assert_eq!(positions, [1, 6, 10]);
        assert_eq!(order, [1, 0, 2, 3, 4, 5, 6, 7, 9, 8]);
    }

    // Upstream's TestScatterPodsByRule table (v1.9 era), single term labelA=AAA.
    #[test]
    fn upstream_single_term_cases() {
        let a = "labelA=AAA";
        let t = [term("labelA", "AAA")];
        assert_eq!(run(&[""], &t), [0]);
        assert_eq!(run(&[a], &t), [0]);
        assert_eq!(run(&[a, "bbb"], &t), [0, 1]);
        assert_eq!(run(&["", "", "", "", a, a], &t), [4, 0, 1, 2, 3, 5]);
        assert_eq!(run(&["", "", "", a, a, a], &t), [3, 0, 1, 4, 2, 5]);
        assert_eq!(run(&["", "", "", a, "", "", a], &t), [3, 0, 1, 2, 4, 5, 6]);
        assert_eq!(
            run(&["", "", "", "", "", "", a, a, a], &t),
            [6, 0, 1, 2, 7, 3, 4, 5, 8]
        );
        // Matched outnumber unmatched: round(3/2) = 2 matched per group. (Upstream master after
        // v1.9, PR #2321, floors the matched size and expects [2, 0, 3, 1, 4, 5] and [2, 0, 4, 1,
        // 5, 3, 6, 7, 8]; we keep v1.9's rounding.)
        assert_eq!(run(&["", "", a, a, a, a], &t), [2, 3, 0, 4, 1, 5]);
        assert_eq!(
            run(&["", "", a, "", a, a, a, a, a], &t),
            [2, 4, 0, 5, 6, 1, 7, 3, 8]
        );
        assert_eq!(
            run(&["", a, "", a, "", "", a, a, a], &t),
            [1, 0, 3, 2, 6, 4, 7, 5, 8]
        );
        assert_eq!(
            run(
                &["", "", "", "", "ee", "a", "", a, a, "labelA=AAA,labelB=BBB"],
                &t
            ),
            [7, 0, 1, 2, 3, 8, 4, 5, 6, 9]
        );
    }

    /// Upstream's TestSort harness: the first `expected.len()` pods are the candidates,
    /// all of them the workload (so density adjustment is exercised).
    fn run_among(specs: &[&str], terms: &[UpdateScatterTerm], expected: &[usize]) {
        let pods = labelled(specs);
        let all: Vec<&Pod> = pods.iter().collect();
        let candidates = &all[..expected.len()];
        assert_eq!(
            indexes(&scatter(candidates, terms, &all)),
            expected,
            "{specs:?}"
        );
    }

    // Upstream's TestSort table (several terms, candidates a prefix of the workload).
    #[test]
    fn upstream_multi_term_cases() {
        let (a, b, c) = (
            term("labelA", "AAA"),
            term("labelB", "BBB"),
            term("labelC", "CCC"),
        );
        let ab = [a.clone(), b.clone()];
        let (la, lb, lab) = ("labelA=AAA", "labelB=BBB", "labelA=AAA,labelB=BBB");
        run_among(&[lab], std::slice::from_ref(&a), &[0]);
        run_among(&["", "", "", "", "", ""], &[], &[0, 1, 2, 3, 4, 5]);
        run_among(
            &["", "", "", "", la, la],
            std::slice::from_ref(&a),
            &[4, 0, 1, 2, 3, 5],
        );
        run_among(
            &["", "", "", "", "sdfb=eee", "dsf=same", lb, la, la, lab],
            std::slice::from_ref(&b),
            &[6, 0, 1, 2, 3, 4, 5, 7, 8, 9],
        );
        run_among(&[lb, lb, "", "", la, la], &ab, &[0, 4, 2, 3, 5, 1]);
        run_among(&["", "", "", lb, lab, la], &ab, &[4, 0, 1, 2, 5, 3]);
        let same = ["", "", "", "", "sdfb=eee", "dsf=same", lb, la, la, lb];
        run_among(
            &same,
            &[b.clone(), a.clone()],
            &[7, 6, 0, 1, 2, 3, 4, 5, 9, 8],
        );
        run_among(&same, &ab, &[6, 7, 0, 1, 2, 3, 4, 5, 8, 9]);
        run_among(
            &["", "", "", "", "sdfb=eee", "dsf=same", lab, "", "", lab],
            &ab,
            &[6, 0, 1, 2, 3, 4, 5, 7, 8, 9],
        );
        run_among(
            &["", "", "", "sdfb=eee", "dsf=same", lab, "", "", lab],
            &ab,
            &[5, 0, 1, 2, 3, 4, 6, 7, 8],
        );
        run_among(
            &["", "", "", la, "sdfb=eee", "dsf=same", lab, "", "", ""],
            &ab,
            &[3, 0, 1, 2, 4, 5, 7, 6],
        );
        run_among(
            &[
                "", "", "", la, "", "", "sdfb=eee", "dsf=same", lab, "", "", lab,
            ],
            &ab,
            &[0, 1, 2, 4, 3, 5, 6, 7, 9, 10, 8],
        );
        run_among(
            &[
                "",
                "",
                "",
                la,
                "sdfb=eee,labelA=AAA",
                "dsf=same",
                lab,
                "",
                "",
                lab,
            ],
            &ab,
            &[6, 3, 0, 1, 4, 2, 5, 7, 8, 9],
        );
        run_among(
            &["", la, la, "sdfb=eee", "dsf=same", lab, "", "", lab],
            &ab,
            &[5, 1, 0, 3, 2, 4, 6, 7, 8],
        );
        run_among(
            &[
                la,
                "",
                "",
                la,
                "sdfb=eee,labelA=AAA",
                "dsf=same",
                lab,
                "",
                "",
                lab,
            ],
            &ab,
            &[1, 0, 2, 3, 5, 4, 7, 6],
        );
        run_among(
            &[
                "", "", la, la, "", la, "sdfb=eee", "dsf=same", lab, "", "", lab,
            ],
            &ab,
            &[0, 2, 1, 4, 3, 6, 7, 5, 9, 10, 8],
        );
        let (lc, abc) = ("labelC=CCC", [a.clone(), b.clone(), c.clone()]);
        run_among(
            &["", la, la, lb, lb, lc, lc, lc, lc, lc],
            &abc,
            &[3, 1, 5, 0, 6, 7, 8, 9, 2, 4],
        );
        run_among(
            &[
                "",
                la,
                "labelA=AAA,labelC=CCC",
                "labelB=BBB,labelC=CCC",
                lb,
                "",
                "",
                lc,
                lc,
                lc,
            ],
            &abc,
            &[3, 2, 0, 7, 8, 5, 6, 9, 1, 4],
        );
        // "continuous sort" cases: part of the workload already updated.
        run_among(
            &["", "", "", "", la, la, la],
            std::slice::from_ref(&a),
            &[0, 1, 4, 2, 3, 5],
        );
        run_among(
            &[la, la, "", "", "", "", "", "", "", la],
            &[a],
            &[2, 0, 3, 4, 5, 6, 1],
        );
    }

    #[test]
    fn terms_sorted_by_match_count_and_unmatched_terms_dropped() {
        let pods = labelled(&["", "", "b=1", "b=1", "a=1", "b=1"]);
        let refs: Vec<&Pod> = pods.iter().collect();
        let terms = [
            term("a", "1"),
            term("zzz", "1"),
            term("b", "1"),
            term("a", "1"),
        ];
        let effective: Vec<&str> = effective_terms(&refs, &terms)
            .iter()
            .map(|t| t.key.as_str())
            .collect();
        assert_eq!(effective, ["b", "a"]);
    }

    #[test]
    fn empty_value_needs_the_label_present() {
        let pods = labelled(&["k=", "", "k=", "", ""]);
        let refs: Vec<&Pod> = pods.iter().collect();
        assert!(matches_term(refs[0], &term("k", "")));
        assert!(!matches_term(refs[1], &term("k", "")));
        assert_eq!(
            indexes(&scatter(&refs, &[term("k", "")], &refs)),
            [0, 1, 3, 4, 2]
        );
    }

    #[test]
    fn unmatched_can_run_out_leaving_matched_adjacent_at_the_end() {
        // 6 matched, 8 unmatched: groups of 1 matched + 2 unmatched use up the
        // unmatched pods after four groups (upstream behaviour, kept).
        let mut specs = vec!["m=1"; 6];
        specs.extend(vec![""; 8]);
        let order = run(&specs, &[term("m", "1")]);
        let shape: String = order
            .iter()
            .map(|&i| if i < 6 { 'M' } else { 'u' })
            .collect();
        assert_eq!(shape, "MuuMuuMuuMuuMM");
    }

    #[test]
    fn sparser_candidates_use_the_workload_group_sizes() {
        // Workload: 4 matched + 4 unmatched; one matched pod is already updated, so the
        // candidates are 3 matched + 4 unmatched. With the last matched pod kept back
        // the workload is 3:4 and the candidates 2:4 - fewer matched per unmatched than
        // the workload - so the workload's sizes (1 and round(4/3) = 1) apply, two
        // groups fit, and the other two unmatched pods lead.
        let pods = labelled(&["", "", "", "", "m=1", "m=1", "m=1", "m=1"]);
        let all: Vec<&Pod> = pods.iter().collect();
        let candidates: Vec<&Pod> = all[..7].to_vec();
        let plan = GroupPlan::by_density(3, 4, 2, 4);
        assert_eq!(
            plan,
            GroupPlan {
                groups: 2,
                matched_size: 1,
                unmatched_size: 1,
                unmatched_lead: 2
            }
        );
        assert_eq!(
            indexes(&scatter(&candidates, &[term("m", "1")], &all)),
            [0, 1, 4, 2, 5, 3, 6]
        );
        // Judged on the candidates alone they interleave evenly from the start.
        assert_eq!(
            indexes(&scatter(&candidates, &[term("m", "1")], &candidates)),
            [4, 0, 1, 5, 2, 3, 6]
        );
    }

    #[test]
    fn density_plans() {
        // Candidates at least as dense in matched pods as the workload: even plan.
        assert_eq!(GroupPlan::by_density(2, 7, 2, 2), GroupPlan::even(2, 2));
        assert_eq!(GroupPlan::by_density(3, 3, 3, 3), GroupPlan::even(3, 3));
        // Sparser: the workload's sizes, as many groups as fit, the rest lead.
        assert_eq!(
            GroupPlan::by_density(2, 9, 1, 8),
            GroupPlan {
                groups: 1,
                matched_size: 1,
                unmatched_size: 5,
                unmatched_lead: 3
            }
        );
        assert_eq!(
            GroupPlan::by_density(6, 3, 2, 3),
            GroupPlan {
                groups: 1,
                matched_size: 2,
                unmatched_size: 1,
                unmatched_lead: 2
            }
        );
    }
}
