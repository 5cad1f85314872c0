//! Every event reason and message the BroadcastJob controller reports (as
//! `broadcastjob-controller`), and nowhere else. Reasons and wording are upstream's
//! (`pkg/controller/broadcastjob`).

use k8s_openapi::api::core::v1::Pod as NewPod;
use kruise_workload::PodMessages;

/// The controller's name: event reporter, lease, field manager.
pub const CONTROLLER_NAME: &str = kruise_api::keys::BROADCASTJOB_CONTROLLER_NAME;

/// Who this binary is (its client's User-Agent is `broadcastjob-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

pub use kruise_api::keys::{
    BROADCASTJOB_EVENT_CONTINUE as CONTINUE,
    BROADCASTJOB_EVENT_DEADLINE_EXCEEDED as DEADLINE_EXCEEDED,
    BROADCASTJOB_EVENT_DUPLICATE_POD_ON_SAME_NODE as DUPLICATE_POD,
    BROADCASTJOB_EVENT_JOB_COMPLETE as JOB_COMPLETE, BROADCASTJOB_EVENT_PAUSED as PAUSED,
    BROADCASTJOB_EVENT_TOO_MANY_ACTIVE_PODS as TOO_MANY_ACTIVE_PODS,
    BROADCASTJOB_REASON_FAILED_POD_FOUND as FAILED_POD_FOUND,
};

/// `Continue`: a paused job resumed.
pub const CONTINUE_MESSAGE: &str = "continue to process job";
/// `Paused`: the Pause failure policy fired.
pub const PAUSED_MESSAGE: &str = "job is paused, due to failed pod";
/// `TooManyActivePods`.
pub const TOO_MANY_ACTIVE_PODS_MESSAGE: &str = "Number of active pods exceed parallelism limit";
/// The failure message of the FailFast policy.
pub const FAIL_FAST_MESSAGE: &str =
    "failure policy is FailurePolicyTypeFailFast and failed pod is found";

/// The failure message of an exceeded `activeDeadlineSeconds`.
pub fn deadline_message(namespace: &str, name: &str) -> String {
    format!("Job {namespace}/{name} was active longer than specified deadline")
}

/// The Warning event of a failed job: `<message>: <s> pods succeeded, <f> pods failed`.
pub fn failed_event(message: &str, succeeded: i32, failed: i32) -> String {
    format!("{message}: {succeeded} pods succeeded, {failed} pods failed")
}

/// The `Complete` condition's message.
pub fn complete_condition(succeeded: i32, failed: i32) -> String {
    format!("Job completed, {succeeded} pods succeeded, {failed} pods failed")
}

/// The `JobComplete` event.
pub fn complete_event(namespace: &str, name: &str, succeeded: i32, failed: i32) -> String {
    format!("Job {namespace}/{name} is completed, {succeeded} pods succeeded, {failed} pods failed")
}

/// `DuplicatePodCreatedOnSameNode`.
pub fn duplicate_pod(pod: &str, node: &str) -> String {
    format!("Duplicated pod {pod} found on same node {node}")
}

/// `Created pod: bcj-demo-m4mrw` and its kin (upstream uses Kubernetes' PodControl words).
pub struct BroadcastJobMessages;

impl PodMessages for BroadcastJobMessages {
    fn created(&self, _owner: &str, pod: &str) -> String {
        format!("Created pod: {pod}")
    }
    fn create_failed(&self, _owner: &str, _pod: &NewPod, err: &kube::Error) -> String {
        format!("Error creating: {err}")
    }
    fn deleted(&self, _owner: &str, pod: &str) -> String {
        format!("Delete pod: {pod}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_worded_as_upstream() {
        let m = BroadcastJobMessages;
        assert_eq!(m.created("bcj", "bcj-x"), "Created pod: bcj-x");
        assert_eq!(m.deleted("bcj", "bcj-x"), "Delete pod: bcj-x");
        assert_eq!(
            failed_event(FAIL_FAST_MESSAGE, 1, 2),
            "failure policy is FailurePolicyTypeFailFast and failed pod is found: 1 pods succeeded, 2 pods failed"
        );
        assert_eq!(
            complete_event("default", "bcj-demo", 2, 0),
            "Job default/bcj-demo is completed, 2 pods succeeded, 0 pods failed"
        );
        assert_eq!(
            deadline_message("default", "bcj"),
            "Job default/bcj was active longer than specified deadline"
        );
    }
}
