//! Every event reason and message the Advanced DaemonSet controller reports (as
//! `daemonset-controller`), and nowhere else. Pod events are worded as upstream's
//! pod-control helper words them (`Created pod: nginx-59mbd`).

use k8s_openapi::api::core::v1::Pod as NewPod;
use kruise_workload::PodMessages;

/// The controller's name: event reporter, lease, field manager.
pub const CONTROLLER_NAME: &str = kruise_api::keys::DAEMONSET_CONTROLLER_NAME;

/// Who this binary is (its client's User-Agent is `daemonset-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

pub use kruise_api::keys::{
    DAEMONSET_EVENT_FAILED_DAEMON_POD as FAILED_DAEMON_POD,
    DAEMONSET_EVENT_NUM_UNAVAILABLE as NUM_UNAVAILABLE,
    DAEMONSET_EVENT_SELECTING_ALL as SELECTING_ALL, EVENT_FAILED_UPDATE_POD_IN_PLACE,
    EVENT_SUCCESSFUL_UPDATE_POD_IN_PLACE,
};

/// `SelectingAll`: the selector is empty (upstream `syncDaemonSet`).
pub const SELECTING_ALL_MESSAGE: &str =
    "This DaemonSet is selecting all pods. A non-empty selector is required.";

/// `FailedDaemonPod` (upstream `podsShouldBeOnNode`).
pub fn failed_daemon_pod(namespace: &str, pod: &str, node: &str) -> String {
    format!("Found failed daemon pod {namespace}/{pod} on node {node}, will try to kill it")
}

/// `numUnavailable >= maxUnavailable` (a Warning while an in-place rollout waits on the limit;
/// see docs/advanced-daemonset.md).
pub fn num_unavailable(namespace: &str, name: &str, unavailable: i32, max: i32) -> String {
    format!(
        "{namespace}/{name} number of unavailable DaemonSet pods: {unavailable}, is equal to or exceeds allowed maximum: {max}"
    )
}

/// `Created pod: nginx-59mbd` and its kin.
pub struct DaemonSetMessages;

impl PodMessages for DaemonSetMessages {
    fn created(&self, _owner: &str, pod: &str) -> String {
        format!("Created pod: {pod}")
    }
    fn create_failed(&self, _owner: &str, _pod: &NewPod, err: &kube::Error) -> String {
        format!("Error creating: {err}")
    }
    fn deleted(&self, _owner: &str, pod: &str) -> String {
        format!("Deleted pod: {pod}")
    }
    fn delete_failed(&self, _owner: &str, _pod: &str, err: &kube::Error) -> String {
        format!("Error deleting: {err}")
    }
    fn updated_in_place(&self, pod: &str, _revision: &str) -> String {
        format!("successfully update pod {pod} in-place")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_worded_as_the_seeds_show() {
        let m = DaemonSetMessages;
        assert_eq!(
            m.created("nginx", "nginx-59mbd"),
            "Created pod: nginx-59mbd"
        );
        assert_eq!(
            m.deleted("nginx", "nginx-59mbd"),
            "Deleted pod: nginx-59mbd"
        );
        assert_eq!(
            m.updated_in_place("nginx-tg89g", "7d5c6b7f8"),
            "successfully update pod nginx-tg89g in-place"
        );
        assert_eq!(
            num_unavailable("default", "nginx", 1, 1),
            "default/nginx number of unavailable DaemonSet pods: 1, is equal to or exceeds allowed maximum: 1"
        );
        assert_eq!(
            failed_daemon_pod("default", "nginx-x", "node1"),
            "Found failed daemon pod default/nginx-x on node node1, will try to kill it"
        );
    }
}
