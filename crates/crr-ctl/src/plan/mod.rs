//! What the manager does with one ContainerRecreateRequest (openkruise/kruise v1.9.0
//! pkg/controller/containerrecreaterequest/crr_controller.go, `Reconcile`), as a pure function of
//! the request, its Pod and the time. The node agent does the recreating; the manager only finishes
//! what the agent cannot see (the Pod gone, no agent answering, the deadline), keeps the Pod
//! NotReady while asked to, feeds the agent the Pod's container statuses, and deletes finished
//! requests after their TTL.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainerRecreateState as ContainerState,
    ContainerRecreateRequestPhase as Phase, ContainerRecreateRequestSyncContainerStatus,
};
use kruise_api::keys;
use kruise_lifecycle::NotReadyKey;
use serde_json::Value;

#[cfg(test)]
mod tests;

/// How long a request may stay without a phase before the manager gives up on the agent.
pub const RESPONSE_TIMEOUT: SignedDuration = SignedDuration::from_secs(60);

/// The message of a request whose Pod was deleted or replaced.
pub const MESSAGE_POD_GONE: &str = "pod has gone";
/// The message of a request no agent picked up in time.
pub const MESSAGE_NO_RESPONSE: &str = "daemon has not responded for a long time";
/// The message of a request past its deadline.
pub const MESSAGE_DEADLINE: &str = "recreating has exceeded the activeDeadlineSeconds";

/// One write, in the order the plan lists them.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A strategic-merge patch of the Pod's `status` (its `KruisePodReady` condition, and
    /// `Ready` when that flips).
    PatchPodStatus(Value),
    /// The request's finalizers become this list (merge patch with its resourceVersion).
    SetFinalizers(Vec<String>),
    /// Drop the `crr.apps.kruise.io/active` label: the agents stop watching it.
    RemoveActiveLabel,
    /// `ttlSecondsAfterFinished` has passed.
    Delete,
    /// Phase Completed with this message and completionTime now; `states` replaces the
    /// container states when set (the deadline fails the unfinished ones).
    Complete {
        message: String,
        states: Option<Vec<ContainerState>>,
    },
    /// The annotation `crr.apps.kruise.io/sync-container-statuses` becomes this JSON.
    SyncContainerStatuses(String),
    /// The annotation `crr.apps.kruise.io/unready-acquired` is set to this time.
    AnnotateUnreadyAcquired(String),
}

/// The manager's decision for one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// When to look again though nothing changes (the response timeout, the deadline, the
    /// TTL): a requeue at that moment, never a poll.
    pub requeue_after: Option<Duration>,
}

impl Plan {
    fn requeue_at(&mut self, left: SignedDuration) {
        // A moment past the instant, so the next pass sees it elapsed.
        let left = left
            .checked_add(SignedDuration::from_millis(100))
            .unwrap_or(left);
        let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
        self.requeue_after = Some(self.requeue_after.map_or(left, |d| d.min(left)));
    }
}

/// The request's entry in the Pod's `KruisePodReady` message.
pub fn readiness_entry(crr: &ContainerRecreateRequest) -> NotReadyKey {
    NotReadyKey {
        user_agent: keys::CRR_POD_READY_USER_AGENT.to_string(),
        key: format!(
            "{}/{}",
            crr.metadata.namespace.as_deref().unwrap_or_default(),
            crr.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

fn has_finalizer(crr: &ContainerRecreateRequest) -> bool {
    crr.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == keys::CRR_UNREADY_ACQUIRED)
}

fn annotation<'a>(crr: &'a ContainerRecreateRequest, key: &str) -> Option<&'a str> {
    crr.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn label<'a>(crr: &'a ContainerRecreateRequest, key: &str) -> Option<&'a str> {
    crr.metadata
        .labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn created(crr: &ContainerRecreateRequest) -> Option<Timestamp> {
    crr.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Whether the Pod the request was made for is gone: deleted, being deleted, or replaced
/// by another Pod of the same name (another UID).
pub fn pod_has_gone(crr: &ContainerRecreateRequest, pod: Option<&Pod>) -> bool {
    match pod {
        None => true,
        Some(pod) => {
            kruise_ordering::predicates::is_terminating(pod)
                || Some(kruise_ordering::predicates::uid(pod)) != label(crr, keys::CRR_POD_UID)
        }
    }
}

/// The `sync-container-statuses` entries: the listed containers that run a container
/// started since the request was created (older ones are the containers to replace).
pub fn sync_container_statuses(
    crr: &ContainerRecreateRequest,
    pod: &Pod,
) -> Vec<ContainerRecreateRequestSyncContainerStatus> {
    let created = created(crr);
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    crr.spec
        .containers
        .iter()
        .filter_map(|c| statuses.iter().find(|s| s.name == c.name))
        .filter(|s| {
            let started = s
                .state
                .as_ref()
                .and_then(|st| st.running.as_ref())
                .map(|r| r.started_at.as_ref().map(|t| t.0));
            match (started, created) {
                // Not running: nothing to report.
                (None, _) => false,
                (Some(started), Some(created)) => started.is_some_and(|s| s >= created),
                (Some(_), None) => true,
            }
        })
        .map(|s| ContainerRecreateRequestSyncContainerStatus {
            name: s.name.clone(),
            ready: s.ready,
            restart_count: s.restart_count,
            container_id: s.container_id.clone().unwrap_or_default(),
        })
        .collect()
}

/// The manager's step for `crr` given its Pod (`None`: no Pod of that name) at `now`.
pub fn plan(crr: &ContainerRecreateRequest, pod: Option<&Pod>, now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    let status = crr.status.clone().unwrap_or_default();
    let deleting = crr.metadata.deletion_timestamp.is_some();
    let completion = status.completion_time.as_ref().map(|t| t.0);

    // 1. Finished or being deleted: release the Pod, stop the agents watching, TTL.
    if deleting || completion.is_some() {
        if has_finalizer(crr) {
            if let Some(pod) = pod.filter(|p| !kruise_ordering::predicates::is_terminating(p))
                && let Some(patch) = kruise_lifecycle::not_ready_entry_status_patch(
                    pod,
                    &readiness_entry(crr),
                    false,
                    now,
                )
            {
                plan.actions.push(Action::PatchPodStatus(patch));
            }
            let kept = crr
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| *f != keys::CRR_UNREADY_ACQUIRED)
                .cloned()
                .collect();
            plan.actions.push(Action::SetFinalizers(kept));
        }
        if deleting {
            return plan;
        }
        if label(crr, keys::CRR_ACTIVE).is_some() {
            plan.actions.push(Action::RemoveActiveLabel);
        }
        if let (Some(ttl), Some(completion)) = (crr.spec.ttl_seconds_after_finished, completion) {
            let left = completion.duration_until(now);
            let left = SignedDuration::from_secs(i64::from(ttl)) - left;
            if left <= SignedDuration::ZERO {
                plan.actions.push(Action::Delete);
            } else {
                plan.requeue_at(left);
            }
        }
        return plan;
    }

    // 2. The Pod is gone: nothing left to recreate.
    if pod_has_gone(crr, pod) {
        plan.actions.push(Action::Complete {
            message: MESSAGE_POD_GONE.to_string(),
            states: None,
        });
        return plan;
    }
    let Some(pod) = pod else {
        return plan;
    };
    let age = created(crr).map(|c| c.duration_until(now));

    // 3. No agent has answered within a minute.
    if status.phase.is_none()
        && let Some(age) = age
    {
        let left = RESPONSE_TIMEOUT - age;
        if left <= SignedDuration::ZERO {
            plan.actions.push(Action::Complete {
                message: MESSAGE_NO_RESPONSE.to_string(),
                states: None,
            });
            return plan;
        }
        plan.requeue_at(left);
    }

    // 4. activeDeadlineSeconds since creation.
    if let (Some(deadline), Some(age)) = (crr.spec.active_deadline_seconds, age) {
        let left = SignedDuration::from_secs(deadline) - age;
        if left <= SignedDuration::ZERO {
            plan.actions.push(Action::Complete {
                message: MESSAGE_DEADLINE.to_string(),
                // As OpenKruise's completeCRR: phase, completionTime and message only;
                // the containers keep what the agent reported (its e2e suite expects a
                // request it stops at the deadline to show them still Pending).
                states: None,
            });
            plan.requeue_after = None;
            return plan;
        }
        plan.requeue_at(left);
    }

    if status.phase != Some(Phase::Recreating) {
        return plan;
    }

    // 5. Tell the agent which new containers run and whether they are ready.
    let synced = sync_container_statuses(crr, pod);
    let synced = serde_json::to_string(&synced).unwrap_or_else(|_| "[]".to_string());
    if annotation(crr, keys::CRR_SYNC_CONTAINER_STATUSES) != Some(synced.as_str()) {
        plan.actions.push(Action::SyncContainerStatuses(synced));
    }

    // 6. Hold the Pod NotReady before the agent stops anything: finalizer first (so the
    // hold is always released), then the condition, then the annotation the agent waits
    // for.
    let wants_unready = crr
        .spec
        .strategy
        .as_ref()
        .is_some_and(|s| s.unready_grace_period_seconds.is_some());
    if wants_unready && annotation(crr, keys::CRR_UNREADY_ACQUIRED).is_none_or(str::is_empty) {
        if kruise_lifecycle::has_kruise_pod_ready_gate(pod) {
            if !has_finalizer(crr) {
                let mut finalizers: Vec<String> =
                    crr.metadata.finalizers.clone().unwrap_or_default();
                finalizers.push(keys::CRR_UNREADY_ACQUIRED.to_string());
                plan.actions.push(Action::SetFinalizers(finalizers));
            }
            if let Some(patch) = kruise_lifecycle::not_ready_entry_status_patch(
                pod,
                &readiness_entry(crr),
                true,
                now,
            ) {
                plan.actions.push(Action::PatchPodStatus(patch));
            }
        }
        plan.actions.push(Action::AnnotateUnreadyAcquired(
            kruise_lifecycle::format_timestamp(now),
        ));
    }
    plan
}
