//! The controller's name, identity (User-Agent `workloadspread-ctl/<version>`) and the
//! wording of its events (reasons are upstream's, in `kruise_api::keys`).

/// Lease name, field manager and event reporter.
pub const CONTROLLER_NAME: &str = "workloadspread-controller";
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

/// `CreatePodFailed`: the webhook recorded a creation the controller never saw.
pub fn create_pod_failed(subset: &str, pod: &str) -> String {
    format!("Pod {pod} was not created in subset {subset} within 30s; its record expired")
}

/// `DeletePodFailed`: the webhook recorded a deletion that did not happen.
pub fn delete_pod_failed(subset: &str, pod: &str) -> String {
    format!("Pod {pod} in subset {subset} was not deleted within 15s; its record expired")
}

/// `RecoverSchedulable`: a subset marked unschedulable takes Pods again.
pub fn recover_schedulable(subset: &str) -> String {
    format!("Subset {subset} of WorkloadSpread is transited from unschedulable to schedulable")
}

/// `PatchPodDeletionCostFailed`.
pub fn patch_deletion_cost_failed(pod: &str, error: &str) -> String {
    format!("failed to patch pod-deletion-cost of Pod {pod}: {error}")
}

/// Warning when a stuck Pod is deleted to move it to a later subset (Adaptive).
pub const RESCHEDULE: &str = "RescheduleUnschedulablePod";
pub fn reschedule(subset: &str, pod: &str, seconds: i32) -> String {
    format!(
        "Pod {pod} could not be scheduled in subset {subset} for {seconds}s: subset marked unschedulable, Pod deleted to be re-created in the next subset"
    )
}

/// Warning when the spec cannot be acted on (a cap that is neither an integer nor a
/// percentage): no Pod is patched or deleted until it is fixed.
pub const INVALID_SPEC: &str = "InvalidSpec";
pub fn invalid_max_replicas(subset: &str) -> String {
    format!(
        "subset {subset}: maxReplicas is neither an integer nor a percentage; no Pod is changed until it is fixed"
    )
}
