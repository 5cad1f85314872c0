//! What a workload controller's pure `plan()` decides: typed actions on Pods and PVCs,
//! carried out by [`crate::execute`]. CloneSet, Advanced StatefulSet and Advanced
//! DaemonSet all plan in these terms, so one executor serves them all.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::core::v1::Pod as NewPod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::pod::Pod;
use kruise_inplace::PodWrites;
use kruise_lifecycle::Transition;

/// One thing to do to the cluster.
#[derive(Clone, Debug)]
pub enum Action<'a> {
    /// Create a Pod (from the named revision) after the PVCs it needs that do not exist.
    Create {
        pod: Box<NewPod>,
        pvcs: Vec<PersistentVolumeClaim>,
        revision: String,
    },
    /// Delete a Pod (UID precondition) and then these PVCs.
    Delete {
        pod: &'a Pod,
        pvcs: Vec<&'a PersistentVolumeClaim>,
    },
    /// Move a Pod to another lifecycle state.
    Lifecycle {
        pod: &'a Pod,
        transition: Transition,
    },
    /// Mark a Pod `apps.kruise.io/specified-delete: "true"` so it is recreated at
    /// `revision` (CloneSet's ReCreate update).
    MarkRecreate { pod: &'a Pod, revision: String },
    /// Start an in-place update to `revision`.
    UpdateInPlace {
        pod: &'a Pod,
        writes: PodWrites,
        revision: String,
    },
    /// Continue an in-place update or fix a condition/label.
    Refresh { pod: &'a Pod, writes: PodWrites },
    /// Release a Pod whose labels stopped matching the selector: remove the owner's
    /// ownerReference.
    Release { pod: &'a Pod },
    /// Adopt an orphan (a Pod without a controller) that matches the selector: add `controller` to
    /// its ownerReferences (Advanced StatefulSet, as `getPodsForStatefulSet` in openkruise/kruise
    /// v1.9.0 pkg/controller/statefulset/statefulset_controller.go; CloneSet never adopts).
    Adopt {
        pod: &'a Pod,
        controller: OwnerReference,
    },
    /// Create a PVC that the Pod named `pod` needs and that is missing (an existing one
    /// is reused).
    CreatePvc {
        pvc: Box<PersistentVolumeClaim>,
        pod: String,
    },
    /// Merge-patch a PVC (its ownerReferences: for a retention policy, or to hand it to
    /// its terminating Pod).
    PatchPvc {
        pvc: &'a PersistentVolumeClaim,
        patch: serde_json::Value,
    },
    /// Delete a PVC no Pod will use again (UID precondition).
    DeletePvc { pvc: &'a PersistentVolumeClaim },
}

impl Action<'_> {
    /// A short name of what the action does, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Create { .. } => "create",
            Action::Delete { .. } => "delete",
            Action::Lifecycle { .. } => "lifecycle",
            Action::MarkRecreate { .. } => "recreate",
            Action::UpdateInPlace { .. } => "inplace",
            Action::Refresh { .. } => "refresh",
            Action::Release { .. } => "release",
            Action::Adopt { .. } => "adopt",
            Action::CreatePvc { .. } => "create-pvc",
            Action::PatchPvc { .. } => "patch-pvc",
            Action::DeletePvc { .. } => "delete-pvc",
        }
    }

    /// The Pod (or PVC) the action is about.
    pub fn object_name(&self) -> &str {
        fn name(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
            m.name.as_deref().unwrap_or_default()
        }
        match self {
            Action::Create { pod, .. } => name(&pod.metadata),
            Action::Delete { pod, .. }
            | Action::Lifecycle { pod, .. }
            | Action::MarkRecreate { pod, .. }
            | Action::UpdateInPlace { pod, .. }
            | Action::Refresh { pod, .. }
            | Action::Release { pod }
            | Action::Adopt { pod, .. } => name(&pod.metadata),
            Action::CreatePvc { pvc, .. } => name(&pvc.metadata),
            Action::PatchPvc { pvc, .. } | Action::DeletePvc { pvc } => name(&pvc.metadata),
        }
    }
}

/// A Warning event to emit on the workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub reason: &'static str,
    pub message: String,
}

/// What one reconcile round does.
#[derive(Clone, Debug, Default)]
pub struct Plan<'a> {
    pub actions: Vec<Action<'a>>,
    pub warnings: Vec<Warning>,
    /// Problems that stop a phase (shown as the workload's failure conditions).
    pub errors: Vec<String>,
    pub requeue_after: Option<Duration>,
}

/// The most actions one round carries out; the rest wait for the next round, which
/// follows at once. A round's actions, and the Pods it builds, are held in memory until
/// it ends: planned whole, a CloneSet scaled from 0 to 10 000 built 10 000 Pods at once,
/// and its next round 10 000 lifecycle patches (RSS 126 → 249 MiB within 20 s). A
/// hundred keeps a round's memory small and costs nothing in time: the writes are bound
/// by the client's QPS either way.
pub const WRITES_PER_ROUND: usize = 100;

impl Plan<'_> {
    pub fn changes_something(&self) -> bool {
        !self.actions.is_empty()
    }

    /// Whether this plan holds a round's worth of actions ([`WRITES_PER_ROUND`]): a
    /// planner adding one action a Pod stops there, and asks for the next round at once.
    pub fn round_is_full(&mut self) -> bool {
        let full = self.actions.len() >= WRITES_PER_ROUND;
        if full {
            self.requeue(Duration::ZERO);
        }
        full
    }

    /// Look again after `after` at the latest (the earliest of all requests wins).
    pub fn requeue(&mut self, after: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(after, |d| d.min(after)));
    }
}

impl<'a> Plan<'a> {
    /// Appends `other` (its actions after this plan's), keeping the earliest requeue.
    pub fn append(&mut self, other: Plan<'a>) {
        self.actions.extend(other.actions);
        self.warnings.extend(other.warnings);
        self.errors.extend(other.errors);
        if let Some(after) = other.requeue_after {
            self.requeue(after);
        }
    }
}

/// The earlier of two optional deadlines.
pub fn min_duration(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_keeps_order_and_the_earliest_requeue() {
        let pvc = |name: &str| PersistentVolumeClaim {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let (a, b) = (pvc("a"), pvc("b"));
        let mut plan = Plan {
            actions: vec![Action::DeletePvc { pvc: &a }],
            errors: vec!["first".into()],
            requeue_after: Some(Duration::from_secs(30)),
            ..Default::default()
        };
        plan.append(Plan {
            actions: vec![Action::DeletePvc { pvc: &b }],
            warnings: vec![Warning {
                reason: "R",
                message: "m".into(),
            }],
            errors: vec!["second".into()],
            requeue_after: Some(Duration::from_secs(5)),
        });
        let names: Vec<_> = plan.actions.iter().map(Action::object_name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(plan.actions[0].kind(), "delete-pvc");
        assert_eq!(plan.errors, ["first", "second"]);
        assert_eq!(plan.warnings.len(), 1);
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(5)));
        plan.append(Plan::default());
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(5)));
    }
}
