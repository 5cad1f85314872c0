//! The barrier controller's pure part (openkruise/kruise v1.9.0
//! pkg/controller/containerlaunchpriority/container_launch_priority_controller.go): given a Pod the
//! webhook gave barriers and the keys its `<pod>-barrier` ConfigMap holds, which key to release
//! next and whether the launch is complete.
//!
//! A container's priority is read from its `KRUISE_CONTAINER_BARRIER` env (what the
//! webhook decided), not recomputed: the env is what the kubelet waits on.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;

use crate::priority::{barrier_key, key_priority};

/// What to write for one Pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The barrier ConfigMap does not exist: create it holding these keys.
    pub create: Option<BTreeSet<String>>,
    /// The barrier exists: add this key (`"true"`).
    pub add_key: Option<String>,
    /// Every priority's key is (or is about to be) released: annotate the Pod
    /// `container-launch-priority-completed: "true"` and drop the watch label.
    pub complete: bool,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_none() && self.add_key.is_none() && !self.complete
    }
}

/// The priority of each container that has a barrier, in spec order.
pub fn container_priorities(pod: &Pod) -> Vec<(String, i32)> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| {
            let key = c
                .env
                .iter()
                .flatten()
                .find(|e| e.name == keys::KRUISE_CONTAINER_BARRIER)?
                .value_from
                .as_ref()?
                .config_map_key_ref
                .as_ref()?
                .key
                .as_str();
            Some((c.name.clone(), key_priority(key)?))
        })
        .collect()
}

fn is_completed(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED))
        .is_some_and(|v| v == "true")
}

fn has_watch_label(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(keys::CONTAINER_LAUNCH_BARRIER_LABEL))
}

fn is_finished(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        || pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

/// Whether the container is ready (a container without a readiness probe is ready once
/// it runs and its startup probe, if any, passed).
fn is_ready(pod: &Pod, container: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .is_some_and(|c| c.ready)
}

/// As upstream's `handle` and `findNextPriorities`. `barrier`: the keys of `<pod>-barrier`, `None`
/// when it does not exist.
///
/// The key released is that of the highest priority among the containers still pending
/// (not ready, or their key not released: a kubelet cannot run a container without its
/// key, but a simulated node such as kwok reports every container ready at once); one
/// level at a time, so a lower level never starts before every higher one is ready. When
/// that leaves every level's key released, the launch is complete.
pub fn plan(pod: &Pod, barrier: Option<&BTreeSet<String>>) -> Plan {
    if is_finished(pod) {
        return Plan::default();
    }
    if is_completed(pod) {
        // Completed earlier; a label still there (added back by hand) is dropped.
        return Plan {
            complete: has_watch_label(pod),
            ..Plan::default()
        };
    }
    let priorities = container_priorities(pod);
    if priorities.is_empty() {
        return Plan::default();
    }
    let existing = barrier.cloned().unwrap_or_default();
    let next = priorities
        .iter()
        .filter(|(name, p)| !is_ready(pod, name) || !existing.contains(&barrier_key(*p)))
        .map(|(_, p)| *p)
        .max()
        .map(barrier_key)
        .filter(|k| !existing.contains(k));
    let mut after = existing.clone();
    after.extend(next.iter().cloned());
    let complete = priorities
        .iter()
        .all(|(_, p)| after.contains(&barrier_key(*p)));
    match barrier {
        None => Plan {
            create: Some(next.into_iter().collect()),
            add_key: None,
            complete,
        },
        Some(_) => Plan {
            create: None,
            add_key: next,
            complete,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A Pod with containers `(name, priority)` (barrier env set as the webhook does) and
    /// the names of the ready ones.
    fn pod(containers: &[(&str, i32)], ready: &[&str]) -> Pod {
        let containers: Vec<_> = containers
            .iter()
            .map(|(n, p)| json!({"name": n, "env": [{"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "p-barrier", "key": barrier_key(*p)}}}]}))
            .collect();
        let statuses: Vec<_> = containers
            .iter()
            .map(|c| {
                let name = c["name"].as_str().unwrap();
                json!({"name": name, "ready": ready.contains(&name), "restartCount": 0, "image": "i", "imageID": ""})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {keys::CONTAINER_LAUNCH_BARRIER_LABEL: "true"}},
            "spec": {"containers": containers},
            "status": {"phase": "Pending", "containerStatuses": statuses},
        }))
        .unwrap()
    }

    fn keys_of(ks: &[&str]) -> BTreeSet<String> {
        ks.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn n5_ordered_releases_sidecar_then_main() {
        let containers = [("sidecar", 0), ("main", -1)];
        // New Pod: the barrier is created with the sidecar's key only.
        let p = plan(&pod(&containers, &[]), None);
        assert_eq!(p.create, Some(keys_of(&["p_0"])));
        assert!(!p.complete);
        // Sidecar not ready yet: nothing to add.
        assert!(plan(&pod(&containers, &[]), Some(&keys_of(&["p_0"]))).is_empty());
        // Sidecar ready: main's key, and the launch is complete.
        let p = plan(&pod(&containers, &["sidecar"]), Some(&keys_of(&["p_0"])));
        assert_eq!(p.add_key.as_deref(), Some("p_-1"));
        assert!(p.complete);
    }

    #[test]
    fn three_levels_one_at_a_time_highest_first() {
        let containers = [("a", 5), ("b", 1), ("c", 1), ("d", -3)];
        let p = plan(&pod(&containers, &[]), Some(&keys_of(&[])));
        assert_eq!((p.add_key.as_deref(), p.complete), (Some("p_5"), false));
        // b ready but c not: level 1 is released already, d waits.
        assert!(
            plan(
                &pod(&containers, &["a", "b"]),
                Some(&keys_of(&["p_5", "p_1"]))
            )
            .is_empty()
        );
        let p = plan(
            &pod(&containers, &["a", "b", "c"]),
            Some(&keys_of(&["p_5", "p_1"])),
        );
        assert_eq!((p.add_key.as_deref(), p.complete), (Some("p_-3"), true));
    }

    #[test]
    fn completed_finished_and_foreign_pods_are_left_alone() {
        let containers = [("a", 1), ("b", 0)];
        let mut done = pod(&containers, &[]);
        done.metadata.annotations = Some(
            [(
                keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED.to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        // Completed but still labelled: only the label goes.
        assert_eq!(
            plan(&done, None),
            Plan {
                complete: true,
                ..Plan::default()
            }
        );
        done.metadata.labels = None;
        assert!(plan(&done, None).is_empty());
        let mut gone = pod(&containers, &[]);
        gone.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(plan(&gone, None).is_empty());
        let mut plain = pod(&containers, &[]);
        plain
            .spec
            .as_mut()
            .unwrap()
            .containers
            .iter_mut()
            .for_each(|c| c.env = None);
        assert!(plan(&plain, None).is_empty());
    }

    #[test]
    fn containers_reported_ready_without_their_key_still_get_it_level_by_level() {
        let containers = [("a", 2), ("b", 1), ("c", 0)];
        let all = ["a", "b", "c"];
        let p = plan(&pod(&containers, &all), Some(&keys_of(&["p_2"])));
        assert_eq!((p.add_key.as_deref(), p.complete), (Some("p_1"), false));
        let p = plan(&pod(&containers, &all), Some(&keys_of(&["p_2", "p_1"])));
        assert_eq!((p.add_key.as_deref(), p.complete), (Some("p_0"), true));
    }

    proptest! {
        /// Simulated launch: release what the plan says, make released containers ready,
        /// repeat. Every container starts, the levels start in strictly descending order,
        /// and the completion comes with the last key.
        #[test]
        fn a_simulated_launch_starts_levels_in_descending_order(
            priorities in proptest::collection::vec(-3i32..3, 2..6),
        ) {
            let names: Vec<String> = (0..priorities.len()).map(|i| format!("c{i}")).collect();
            let containers: Vec<(&str, i32)> = names.iter().map(String::as_str).zip(priorities.iter().copied()).collect();
            let mut barrier: Option<BTreeSet<String>> = None;
            let mut ready: Vec<&str> = Vec::new();
            let mut started_levels: Vec<i32> = Vec::new();
            let mut completed = false;
            for _ in 0..20 {
                let p = plan(&pod(&containers, &ready), barrier.as_ref());
                if let Some(keys) = p.create { barrier = Some(keys) }
                if let Some(k) = p.add_key { barrier.get_or_insert_with(Default::default).insert(k); }
                if p.complete { completed = true; }
                // The kubelet starts every container whose key exists; each becomes ready.
                let released = barrier.clone().unwrap_or_default();
                let mut newly: Vec<i32> = Vec::new();
                for (n, pr) in &containers {
                    if !ready.contains(n) && released.contains(&barrier_key(*pr)) {
                        ready.push(*n);
                        newly.push(*pr);
                    }
                }
                newly.dedup();
                started_levels.extend(newly);
                if completed && ready.len() == containers.len() { break; }
            }
            prop_assert!(completed);
            prop_assert_eq!(ready.len(), containers.len());
            prop_assert!(started_levels.windows(2).all(|w| w[0] > w[1]), "levels {:?}", started_levels);
        }
    }
}
