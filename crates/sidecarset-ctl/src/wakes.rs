//! Which changes wake a SidecarSet, as OpenKruise v1.9.0 decides it
//! (pkg/controller/sidecarset/sidecarset_controller.go and
//! sidecarset_pod_event_handler.go):
//!
//! - a SidecarSet wakes itself when it is created and when its spec changes (its
//!   generation), not on its own status writes;
//! - a Pod wakes the SidecarSets of its injected list when it is created; on a later
//!   change it wakes only those whose `updateStrategy.type` is not `NotUpdate`; its
//!   deletion wakes none.
//!
//! So the status of a `NotUpdate` SidecarSet is what its last reconcile saw: the Pods as
//! they were when they were created (not yet ready), until its spec changes or another
//! Pod is created. OpenKruise's e2e spec "inject pod sidecar with canary sidecarSet"
//! expects exactly that (`readyPods: 0` for two Ready Pods).
//!
//! With the option `KRUISE_SIDECARSET_NOTUPDATE_LIVE_STATUS=true` (chart value
//! `sidecarset.notUpdateLiveStatus`) every change of a Pod (deletion included) and of the
//! SidecarSet wakes it whatever its strategy, so a `NotUpdate` SidecarSet's status counts
//! its Pods as they are. SidecarSets of the other strategies are woken by every change in
//! both modes: their status only ever gets fresher than upstream's.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{SidecarSet, SidecarSetUpdateStrategyType};

/// The environment variable of the option (`true` turns it on).
pub const LIVE_STATUS_ENV: &str = "KRUISE_SIDECARSET_NOTUPDATE_LIVE_STATUS";

/// Whether the option is on in this environment value.
pub fn live_status_from(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// What happened to a Pod, as far as one subscriber of the Pod cache can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodChange {
    /// First seen: created, or listed when the controller started.
    Created,
    Updated,
    Deleted,
}

/// Whether a SidecarSet whose status upstream keeps as of the Pods' creation.
pub fn stale_status(ss: &SidecarSet, live: bool) -> bool {
    !live && ss.spec.update_strategy.strategy_type() == SidecarSetUpdateStrategyType::NotUpdate
}

/// Whether a change of a Pod in its injected list wakes `ss`.
pub fn pod_wakes(change: PodChange, ss: &SidecarSet, live: bool) -> bool {
    if live {
        return true;
    }
    match change {
        PodChange::Created => true,
        PodChange::Updated => !stale_status(ss, live),
        PodChange::Deleted => {
            ss.spec.update_strategy.strategy_type() != SidecarSetUpdateStrategyType::NotUpdate
        }
    }
}

/// What the SidecarSet predicate remembers of a SidecarSet: its generation and whether it
/// was being deleted.
pub type Seen = (i64, bool);

fn seen_of(ss: &SidecarSet) -> Seen {
    (
        ss.metadata.generation.unwrap_or(0),
        ss.metadata.deletion_timestamp.is_some(),
    )
}

/// Whether a change of `ss` itself wakes it, given what was seen of it before.
pub fn sidecarset_wakes(before: Option<Seen>, ss: &SidecarSet, live: bool) -> bool {
    if !stale_status(ss, live) {
        return true;
    }
    before != Some(seen_of(ss))
}

/// The memory both predicates need, per controller run.
///
/// And the Pods as they were created, per `NotUpdate` SidecarSet their creation woke:
/// upstream reconciles at once when a Pod is created, so it counts that Pod as it was
/// then (not ready: no container has started); ours reconciles a moment later (the
/// controller's debounce), when on kwok the Pod may already be Ready. Until the
/// SidecarSet's next reconcile takes them ([`Wakes::take_created`]), the Pods whose
/// creation woke it are counted as they were created; every other Pod as it is.
#[derive(Default)]
pub struct Wakes {
    pub live: bool,
    /// UIDs of the Pods with an injected list seen alive.
    pods: Mutex<HashSet<String>>,
    /// SidecarSets by name.
    sidecarsets: Mutex<HashMap<String, Seen>>,
    /// SidecarSet name -> Pod UID -> the Pod as created.
    created: Mutex<HashMap<String, HashMap<String, Arc<Pod>>>>,
}

impl Wakes {
    pub fn new(live: bool) -> Self {
        Wakes {
            live,
            ..Default::default()
        }
    }

    /// Records a Pod change (`alive`: still in the cache) and says what it was.
    /// `still_alive` keeps the memory to the Pods the cache holds when it has grown
    /// beyond them (deletions a lagging subscriber missed).
    pub fn pod(
        &self,
        uid: &str,
        alive: bool,
        cached: usize,
        still_alive: impl Fn(&str) -> bool,
    ) -> PodChange {
        let mut pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        if !alive {
            pods.remove(uid);
            return PodChange::Deleted;
        }
        if !pods.insert(uid.to_string()) {
            return PodChange::Updated;
        }
        if pods.len() > 2 * cached + 1024 {
            pods.retain(|u| still_alive(u));
        }
        PodChange::Created
    }

    /// Keeps `pod` as created for the next reconcile of the stale-status SidecarSet
    /// `name` it wakes.
    pub fn keep_created(&self, name: &str, uid: &str, pod: Arc<Pod>) {
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        created
            .entry(name.to_string())
            .or_default()
            .insert(uid.to_string(), pod);
    }

    /// The Pods (by UID) whose creation woke `name` since its last reconcile, as they
    /// were created; forgotten here.
    pub fn take_created(&self, name: &str) -> HashMap<String, Arc<Pod>> {
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        created.remove(name).unwrap_or_default()
    }

    /// Records a change of `ss` (`alive`: still in the cache) and says whether it wakes
    /// it.
    pub fn sidecarset(&self, ss: &SidecarSet, alive: bool) -> bool {
        let name = ss.metadata.name.clone().unwrap_or_default();
        let mut seen = self.sidecarsets.lock().unwrap_or_else(|e| e.into_inner());
        if !alive {
            seen.remove(&name);
            drop(seen);
            self.take_created(&name);
            return true;
        }
        let before = seen.insert(name, seen_of(ss));
        sidecarset_wakes(before, ss, self.live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ss(strategy: &str, generation: i64) -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "s", "generation": generation},
            "spec": {"containers": [], "updateStrategy": {"type": strategy}}
        }))
        .expect("a SidecarSet")
    }

    #[test]
    fn option_parses_true_only() {
        assert!(live_status_from(Some("true")));
        assert!(live_status_from(Some(" TRUE ")));
        assert!(!live_status_from(Some("1")));
        assert!(!live_status_from(Some("false")));
        assert!(!live_status_from(None));
    }

    #[test]
    fn not_update_wakes_on_pod_creation_only_by_default() {
        let s = ss("NotUpdate", 1);
        assert!(pod_wakes(PodChange::Created, &s, false));
        assert!(!pod_wakes(PodChange::Updated, &s, false));
        assert!(!pod_wakes(PodChange::Deleted, &s, false));
        for c in [PodChange::Created, PodChange::Updated, PodChange::Deleted] {
            assert!(pod_wakes(c, &s, true), "{c:?} with the option");
        }
    }

    #[test]
    fn rolling_update_wakes_on_every_pod_change() {
        let s = ss("RollingUpdate", 1);
        for c in [PodChange::Created, PodChange::Updated, PodChange::Deleted] {
            assert!(pod_wakes(c, &s, false), "{c:?}");
        }
    }

    #[test]
    fn not_update_ignores_its_status_writes_by_default() {
        let s = ss("NotUpdate", 1);
        assert!(sidecarset_wakes(None, &s, false), "created");
        assert!(
            !sidecarset_wakes(Some((1, false)), &s, false),
            "status only"
        );
        assert!(
            sidecarset_wakes(Some((0, false)), &s, false),
            "spec changed"
        );
        assert!(sidecarset_wakes(Some((1, false)), &s, true), "option");
        let r = ss("RollingUpdate", 1);
        assert!(sidecarset_wakes(Some((1, false)), &r, false));
    }

    #[test]
    fn pod_memory_tells_creation_from_update_and_deletion() {
        let w = Wakes::new(false);
        assert_eq!(w.pod("a", true, 1, |_| true), PodChange::Created);
        assert_eq!(w.pod("a", true, 1, |_| true), PodChange::Updated);
        assert_eq!(w.pod("a", false, 0, |_| true), PodChange::Deleted);
        assert_eq!(w.pod("a", true, 1, |_| true), PodChange::Created);
    }

    #[test]
    fn pod_memory_forgets_pods_gone_from_the_cache() {
        let w = Wakes::new(false);
        for i in 0..1100 {
            w.pod(&format!("p{i}"), true, 0, |_| true);
        }
        // The cache holds none of them: the next new Pod prunes the memory.
        w.pod("q", true, 0, |u| u == "q");
        assert_eq!(w.pods.lock().unwrap().len(), 1);
    }

    #[test]
    fn created_pods_are_taken_once() {
        let w = Wakes::new(false);
        let pod = Arc::new(Pod::default());
        w.keep_created("s", "a", pod.clone());
        w.keep_created("s", "b", pod);
        assert_eq!(w.take_created("s").len(), 2);
        assert!(w.take_created("s").is_empty());
    }

    #[test]
    fn sidecarset_memory_follows_generations() {
        let w = Wakes::new(false);
        let s1 = ss("NotUpdate", 1);
        assert!(w.sidecarset(&s1, true));
        assert!(!w.sidecarset(&s1, true));
        assert!(w.sidecarset(&ss("NotUpdate", 2), true));
        assert!(w.sidecarset(&s1, false), "deleted");
        assert!(w.sidecarset(&s1, true), "created again");
    }
}
