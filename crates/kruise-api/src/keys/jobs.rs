//! Keys of the job controllers: BroadcastJob and AdvancedCronJob.

/// Pod label: name of the BroadcastJob that owns the Pod (reserved, may not be preset).
pub const BROADCASTJOB_NAME: &str = "broadcastjob-name";
/// Pod label: UID of the BroadcastJob that owns the Pod (reserved, may not be preset).
pub const BROADCASTJOB_CONTROLLER_UID: &str = "broadcastjob-controller-uid";

/// BroadcastJob condition type: every desired node's Pod has terminated.
pub const BROADCASTJOB_CONDITION_COMPLETE: &str = "Complete";
/// BroadcastJob condition type: the job failed (failure policy or deadline).
pub const BROADCASTJOB_CONDITION_FAILED: &str = "Failed";
/// Reason on the `Complete` condition.
pub const BROADCASTJOB_REASON_COMPLETE: &str = "Complete";
/// Reason on the `Failed` condition.
pub const BROADCASTJOB_REASON_FAILED: &str = "Failed";

/// BroadcastJob `status.phase` values.
pub const BROADCASTJOB_PHASE_RUNNING: &str = "running";
pub const BROADCASTJOB_PHASE_PAUSED: &str = "paused";
pub const BROADCASTJOB_PHASE_COMPLETED: &str = "completed";
pub const BROADCASTJOB_PHASE_FAILED: &str = "failed";

/// Event source component of the BroadcastJob controller.
pub const BROADCASTJOB_CONTROLLER_NAME: &str = "broadcastjob-controller";

/// BroadcastJob event reasons.
pub const BROADCASTJOB_EVENT_SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
pub const BROADCASTJOB_EVENT_FAILED_CREATE: &str = "FailedCreate";
pub const BROADCASTJOB_EVENT_SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
/// More active Pods than `parallelism` allows.
pub const BROADCASTJOB_EVENT_TOO_MANY_ACTIVE_PODS: &str = "TooManyActivePods";
/// Two Pods of the job on one node.
pub const BROADCASTJOB_EVENT_DUPLICATE_POD_ON_SAME_NODE: &str = "DuplicatePodCreatedOnSameNode";
/// The job completed.
pub const BROADCASTJOB_EVENT_JOB_COMPLETE: &str = "JobComplete";
/// The job ran past `activeDeadlineSeconds` (also the `Failed` event reason then).
pub const BROADCASTJOB_EVENT_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// The Pause failure policy paused the job.
pub const BROADCASTJOB_EVENT_PAUSED: &str = "Paused";
/// A paused job resumed.
pub const BROADCASTJOB_EVENT_CONTINUE: &str = "Continue";
/// Failure-reason text of the FailFast policy (the Warning event reason when it fires).
pub const BROADCASTJOB_REASON_FAILED_POD_FOUND: &str = "failed pod is found";

/// Job/BroadcastJob/ImageListPullJob annotation: the nominal (RFC 3339) time of the run that created it.
pub const ADVANCEDCRONJOB_SCHEDULED_AT: &str = "apps.kruise.io/scheduled-at";
/// Event source component of the AdvancedCronJob controller.
pub const ADVANCEDCRONJOB_CONTROLLER_NAME: &str = "advancedcronjob-controller";
/// AdvancedCronJob `status.type` values.
pub const ADVANCEDCRONJOB_TYPE_JOB: &str = "Job";
pub const ADVANCEDCRONJOB_TYPE_BROADCASTJOB: &str = "BroadcastJob";
pub const ADVANCEDCRONJOB_TYPE_IMAGELISTPULLJOB: &str = "ImageListPullJob";
