//! Properties of the plan over arbitrary Pods and container states.

use super::tests::{UID, exited, job, pod, running, ts, waiting, with_container};
use super::*;
use proptest::prelude::*;

/// A Pod's situation: 0 none of ours, 1 ours without status, 2 running, 3 waiting,
/// 4 succeeded, 5 failed, 6 someone else's container of the same name, 7 not matched.
fn pods_from(kinds: &[u8]) -> Vec<Pod> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let p = pod(&format!("p{i}"), 100 - i as i64);
            match k {
                1 => with_container(p, "debugger", UID, None),
                2 => with_container(p, "debugger", UID, Some(running())),
                3 => with_container(p, "debugger", UID, Some(waiting("ContainerCreating"))),
                4 => with_container(p, "debugger", UID, Some(exited(0))),
                5 => with_container(p, "debugger", UID, Some(exited(2))),
                6 => with_container(p, "debugger", "other", Some(running())),
                7 => {
                    let mut p = p;
                    p.metadata.labels = None;
                    p
                }
                _ => p,
            }
        })
        .collect()
}

proptest! {
    #[test]
    fn counts_parallelism_and_targets_hold(
        kinds in proptest::collection::vec(0u8..8, 0..12),
        replicas in proptest::option::of(0i32..12),
        parallelism in proptest::option::of(0i32..6),
    ) {
        let j = job(replicas, parallelism, &["debugger"]);
        let pods = pods_from(&kinds);
        let world = World { job: &j, pods: pods.iter().collect(), now: ts(0) };
        let o = plan(&world);
        let s = o.status.clone().unwrap();
        let eligible = kinds.iter().filter(|k| **k != 6 && **k != 7).count() as i32;
        let expected = replicas.map_or(eligible, |r| r.min(eligible));
        prop_assert_eq!(s.matches, expected);
        prop_assert!(s.succeeded + s.failed + s.running + s.waiting <= s.matches);
        // Never more Pods in progress than parallelism after this round's writes.
        let targets = targets(&j, &world.pods);
        let in_progress = targets.iter().filter(|p| has_own_container(&j, p)
            && matches!(pod_state(&j, p), PodState::Running | PodState::Waiting | PodState::Unknown)).count();
        let par = j.spec.parallelism().max(0) as usize;
        prop_assert!(o.add.is_empty() || in_progress + o.add.len() <= par);
        // Only targets without our container are written, each at most once.
        for a in &o.add {
            let p = targets.iter().find(|p| p.metadata.name.as_deref() == Some(a.pod.as_str()));
            prop_assert!(p.is_some_and(|p| !has_own_container(&j, p)));
            prop_assert!(a.containers.iter().all(|c| created_by(UID, c)));
        }
        let mut names: Vec<_> = o.add.iter().map(|a| &a.pod).collect();
        names.dedup();
        prop_assert_eq!(names.len(), o.add.len());
        // A finished job adds nothing.
        if s.is_finished() {
            prop_assert!(o.add.is_empty());
        }
    }

    #[test]
    fn plan_is_deterministic(kinds in proptest::collection::vec(0u8..8, 0..10)) {
        let j = job(None, Some(3), &["debugger"]);
        let pods = pods_from(&kinds);
        let a = plan(&World { job: &j, pods: pods.iter().collect(), now: ts(1) });
        let mut reversed: Vec<&Pod> = pods.iter().collect();
        reversed.reverse();
        let b = plan(&World { job: &j, pods: reversed, now: ts(1) });
        prop_assert_eq!(a, b);
    }
}
