//! Every event reason and message the Advanced StatefulSet controller reports (as
//! `statefulset-controller`), and nowhere else. Reasons are upstream's; the wording of
//! Pod and claim events is upstream's StatefulPodControl's.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::core::v1::Pod as NewPod;
use kruise_workload::PodMessages;
use kube::ResourceExt;

/// The controller's name: event reporter, lease, field manager.
pub const CONTROLLER_NAME: &str = kruise_api::keys::STATEFULSET_CONTROLLER_NAME;

/// Who this binary is (its client's User-Agent is `statefulset-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

/// Reasons shared with CloneSet; the ImagePullJob events are reported (and worded) by
/// `kruise_workload::predownload::apply`.
pub use kruise_api::keys::{
    EVENT_CREATED_IMAGE_PULL_JOB, EVENT_FAILED_CREATE_IMAGE_PULL_JOB,
    EVENT_FAILED_UPDATE_POD_IN_PLACE, EVENT_SUCCESSFUL_UPDATE_POD_IN_PLACE,
};

/// Condition types of the set's status (upstream `processReplica` in `openkruise/kruise
/// v1.9.0 pkg/controller/statefulset/stateful_set_control.go`).
pub const CONDITION_FAILED_CREATE_POD: &str = "FailedCreatePod";
pub const CONDITION_FAILED_UPDATE_POD: &str = "FailedUpdatePod";

/// `create Pod web-0 in StatefulSet web successful` and its kin.
pub struct StatefulSetMessages;

impl PodMessages for StatefulSetMessages {
    fn created(&self, owner: &str, pod: &str) -> String {
        format!("create Pod {pod} in StatefulSet {owner} successful")
    }
    fn create_failed(&self, owner: &str, pod: &NewPod, err: &kube::Error) -> String {
        format!(
            "create Pod {} in StatefulSet {owner} failed error: {err}",
            pod.name_any()
        )
    }
    fn deleted(&self, owner: &str, pod: &str) -> String {
        format!("delete Pod {pod} in StatefulSet {owner} successful")
    }
    fn delete_failed(&self, owner: &str, pod: &str, err: &kube::Error) -> String {
        format!("delete Pod {pod} in StatefulSet {owner} failed error: {err}")
    }
    fn claim_created(&self, owner: &str, pod: &str, claim: &str) -> Option<String> {
        Some(format!(
            "create Claim {claim} Pod {pod} in StatefulSet {owner} success"
        ))
    }
    fn claim_create_failed(
        &self,
        owner: &str,
        pod: &str,
        pvc: &PersistentVolumeClaim,
        err: &kube::Error,
    ) -> String {
        format!(
            "create Claim {} for Pod {pod} in StatefulSet {owner} failed error: {err}",
            pvc.name_any()
        )
    }
}

/// The status condition message of a failed Pod creation (upstream's wording).
pub fn failed_create_condition(err: &str) -> String {
    format!("StatefulPodControl failed to create Pod error: {err}")
}

/// The status condition message of a failed Pod update (upstream's wording).
pub fn failed_update_condition(err: &str) -> String {
    format!("StatefulPodControl failed to update Pod error: {err}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_worded_as_upstream() {
        let m = StatefulSetMessages;
        assert_eq!(
            m.created("web", "web-0"),
            "create Pod web-0 in StatefulSet web successful"
        );
        assert_eq!(
            m.deleted("web", "web-4"),
            "delete Pod web-4 in StatefulSet web successful"
        );
        assert_eq!(
            m.claim_created("web", "web-0", "www-web-0").as_deref(),
            Some("create Claim www-web-0 Pod web-0 in StatefulSet web success")
        );
    }
}
