//! Which changes of Pods and workloads wake a WorkloadSpread, as OpenKruise v1.9.0
//! decides it (pkg/controller/workloadspread/workloadspread_event_handler.go):
//!
//! - a Pod wakes the WorkloadSpread its `matched-workloadspread` annotation names (a Pod
//!   the webhook put in a subset): when it is created or deleted, and when it stops being
//!   active (succeeded, failed or deleting) or its version (`pod-template-hash` of a
//!   Deployment's or ReplicaSet's Pod) changes. A Pod no subset took wakes nothing;
//! - a workload (CloneSet, Deployment, ReplicaSet, Job, StatefulSet of either kind) wakes
//!   the WorkloadSpread targeting it when it is created or deleted, and when its replicas
//!   (a Job's parallelism) change, or, for a CloneSet, its `status.updateRevision` differs
//!   from its previous `status.currentRevision`, for a Deployment, its
//!   `deployment.kubernetes.io/revision` annotation changes.
//!
//! And, as upstream's controller-runtime queue, the reconcile runs as soon as it is woken
//! (no debounce: [`crate::reconcile::run`]), so a CloneSet scaled out is reconciled
//! before cloneset-ctl has created its new Pods.
//!
//! So the Pods no subset takes get their `pod-deletion-cost` (-100 × (subsets + 1), the
//! "fake subset") at the WorkloadSpread's next reconcile after they exist, not as soon as
//! they do: OpenKruise's e2e spec "only one subset, zone-a=2" looks at them right after
//! its CloneSet scaled to 6 is Running and expects no cost on them.
//!
//! With the option `KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST=true` (chart value
//! `workloadspread.eagerDeletionCost`) every change of any Pod of the target (found by
//! its annotation or its owner chain) and of the target wakes the WorkloadSpread, so a
//! Pod no subset takes gets its cost as soon as it exists, and a scale-in right then
//! removes it before any Pod a subset holds.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;

/// The environment variable of the option (`true` turns it on).
pub const EAGER_ENV: &str = "KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST";

/// Whether the option is on in this environment value.
pub fn eager_from(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// What the Pod predicate remembers of a Pod: whether it was active, and its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSeen {
    pub active: bool,
    pub version: String,
}

/// Upstream's `IsPodActive`: not succeeded, not failed, not being deleted.
pub fn pod_seen(pod: &Pod) -> PodSeen {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let active =
        pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"));
    // Upstream's GetPodVersion: versioned only for the Pods of a Deployment/ReplicaSet.
    let versioned = pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true) && matches!(o.kind.as_str(), "ReplicaSet" | "Deployment")
    });
    let labels = pod.metadata.labels.as_ref();
    let version = if versioned {
        labels
            .and_then(|l| {
                l.get(keys::POD_TEMPLATE_HASH)
                    .or_else(|| l.get("controller-revision-hash"))
            })
            .cloned()
            .unwrap_or_default()
    } else {
        String::new()
    };
    PodSeen { active, version }
}

/// Whether a change of a Pod the webhook put in a subset wakes its WorkloadSpread:
/// `before` is what was seen of it (None: created), `now` None when it was deleted.
pub fn pod_wakes(before: Option<&PodSeen>, now: Option<&PodSeen>) -> bool {
    match (before, now) {
        (None, _) | (_, None) => true,
        (Some(b), Some(n)) => (b.active && !n.active) || b.version != n.version,
    }
}

/// What the workload predicate compares: replicas, and the revisions upstream looks at
/// (CloneSet: `status.updateRevision` now against `status.currentRevision` before;
/// Deployment: its revision annotation, as both).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadSeen {
    pub replicas: i32,
    pub update_revision: Option<String>,
    pub current_revision: Option<String>,
}

/// Whether a change of a target workload wakes its WorkloadSpread (`before` None:
/// created; `now` None: deleted).
pub fn workload_wakes(before: Option<&WorkloadSeen>, now: Option<&WorkloadSeen>) -> bool {
    match (before, now) {
        (None, _) | (_, None) => true,
        (Some(b), Some(n)) => b.replicas != n.replicas || n.update_revision != b.current_revision,
    }
}

/// Per-object memory of one predicate: what was last seen of each live object.
pub struct Seen<K, V> {
    seen: Mutex<HashMap<K, V>>,
}

impl<K: Eq + Hash + Clone, V: Clone> Default for Seen<K, V> {
    fn default() -> Self {
        Seen {
            seen: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone> Seen<K, V> {
    /// Records `now` for `key` (None: deleted) and returns what was seen before.
    /// `cached` and `still_alive` keep the memory to what the cache holds once it has
    /// grown beyond it (deletions a lagging subscriber missed).
    pub fn swap(
        &self,
        key: &K,
        now: Option<V>,
        cached: usize,
        still_alive: impl Fn(&K) -> bool,
    ) -> Option<V> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match now {
            None => seen.remove(key),
            Some(v) => {
                let before = seen.insert(key.clone(), v);
                if before.is_none() && seen.len() > 2 * cached + 1024 {
                    seen.retain(|k, _| still_alive(k));
                }
                before
            }
        }
    }

    pub fn len(&self) -> usize {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(owner: &str, hash: &str, phase: &str, deleting: bool) -> Pod {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"pod-template-hash": hash},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o",
                    "uid": "u", "controller": true}]},
            "status": {"phase": phase}
        }))
        .unwrap();
        if deleting {
            p.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2024-01-01T00:00:00Z".parse().unwrap(),
                ));
        }
        p
    }

    #[test]
    fn option_parses_true_only() {
        assert!(eager_from(Some("true")));
        assert!(!eager_from(Some("yes")));
        assert!(!eager_from(None));
    }

    #[test]
    fn pod_wakes_on_creation_deletion_inactivity_and_version() {
        let running = pod_seen(&pod("ReplicaSet", "a", "Running", false));
        assert!(pod_wakes(None, Some(&running)));
        assert!(pod_wakes(Some(&running), None));
        assert!(!pod_wakes(Some(&running), Some(&running)), "readiness etc.");
        let done = pod_seen(&pod("ReplicaSet", "a", "Succeeded", false));
        assert!(pod_wakes(Some(&running), Some(&done)));
        assert!(
            !pod_wakes(Some(&done), Some(&running)),
            "only active -> inactive"
        );
        let deleting = pod_seen(&pod("ReplicaSet", "a", "Running", true));
        assert!(pod_wakes(Some(&running), Some(&deleting)));
        let other = pod_seen(&pod("ReplicaSet", "b", "Running", false));
        assert!(pod_wakes(Some(&running), Some(&other)));
    }

    #[test]
    fn a_cloneset_pod_has_no_version() {
        let a = pod_seen(&pod("CloneSet", "a", "Running", false));
        let b = pod_seen(&pod("CloneSet", "b", "Running", false));
        assert_eq!(a, b);
        assert!(!pod_wakes(Some(&a), Some(&b)));
    }

    #[test]
    fn workload_wakes_on_replicas_and_revisions() {
        let w = |r: i32, u: &str, c: &str| WorkloadSeen {
            replicas: r,
            update_revision: Some(u.into()),
            current_revision: Some(c.into()),
        };
        assert!(workload_wakes(None, Some(&w(2, "a", "a"))));
        assert!(workload_wakes(Some(&w(2, "a", "a")), None));
        assert!(
            !workload_wakes(Some(&w(2, "a", "a")), Some(&w(2, "a", "a"))),
            "status only"
        );
        assert!(
            workload_wakes(Some(&w(2, "a", "a")), Some(&w(6, "a", "a"))),
            "scaled"
        );
        assert!(
            workload_wakes(Some(&w(2, "a", "a")), Some(&w(2, "b", "a"))),
            "new revision"
        );
        // The rollout done: current catches up with update, compared with the previous
        // current revision (upstream compares new.updateRevision with old.currentRevision).
        assert!(workload_wakes(Some(&w(2, "b", "a")), Some(&w(2, "b", "b"))));
        assert!(!workload_wakes(
            Some(&w(2, "b", "b")),
            Some(&w(2, "b", "b"))
        ));
    }

    #[test]
    fn seen_swaps_and_forgets() {
        let s: Seen<String, i32> = Seen::default();
        assert_eq!(s.swap(&"a".into(), Some(1), 1, |_| true), None);
        assert_eq!(s.swap(&"a".into(), Some(2), 1, |_| true), Some(1));
        assert_eq!(s.swap(&"a".into(), None, 0, |_| true), Some(2));
        assert!(s.is_empty());
        for i in 0..1100 {
            s.swap(&format!("p{i}"), Some(i), 0, |_| true);
        }
        s.swap(&"q".into(), Some(0), 0, |k| k == "q");
        assert_eq!(s.len(), 1);
    }
}
