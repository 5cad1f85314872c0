//! Keys shared by the workload controllers (CloneSet, Advanced StatefulSet, Advanced
//! DaemonSet): revisions, instance ids, lifecycle hooks, in-place update, deletion.

/// Pod/PVC label: the CloneSet instance id shared by a Pod and its PVCs (the name suffix).
pub const CLONESET_INSTANCE_ID: &str = "apps.kruise.io/cloneset-instance-id";
/// Pod label: the revision a Pod was created from (full revision name or short hash).
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
/// Pod label: the short revision hash.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// ControllerRevision label: the revision hash.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";
/// Webhook configuration label: the namespace a namespace-scoped controller serves.
pub const WEBHOOK_SCOPE: &str = "apps.kruise.io/webhook-scope";
/// Pod label: delete this Pod (any value).
pub const SPECIFIED_DELETE: &str = "apps.kruise.io/specified-delete";
/// Pod annotation: deletion cost (int32), lower is deleted first.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// CloneSet label: exclude PreparingDelete Pods from the scale counts.
pub const CLONESET_SCALING_EXCLUDE_PREPARING_DELETE: &str =
    "apps.kruise.io/cloneset-scaling-exclude-preparing-delete";
/// ControllerRevision annotation: hash of the CloneSet's `volumeClaimTemplates`.
pub const CLONESET_VOLUME_CLAIM_TEMPLATE_HASH: &str = "kruise.io/cloneset-volumeclaimtemplate-hash";

/// Pod label: lifecycle state (see [`crate::appspub::LifecycleState`]).
pub const LIFECYCLE_STATE: &str = "lifecycle.apps.kruise.io/state";
/// Pod annotation: RFC 3339 time of the last lifecycle state change.
pub const LIFECYCLE_TIMESTAMP: &str = "lifecycle.apps.kruise.io/timestamp";

/// Pod annotation: the in-place update state JSON ([`crate::appspub::InPlaceUpdateState`]).
pub const INPLACE_UPDATE_STATE: &str = "apps.kruise.io/inplace-update-state";
/// Legacy spelling of [`INPLACE_UPDATE_STATE`], still read.
pub const INPLACE_UPDATE_STATE_LEGACY: &str = "inplace-update-state";
/// Pod annotation: the pending in-place update during `gracePeriodSeconds`.
pub const INPLACE_UPDATE_GRACE: &str = "apps.kruise.io/inplace-update-grace";
/// Legacy spelling of [`INPLACE_UPDATE_GRACE`], still read.
pub const INPLACE_UPDATE_GRACE_LEGACY: &str = "inplace-update-grace";
/// Pod annotation written by the node agent: runtime container hashes.
pub const RUNTIME_CONTAINERS_META: &str = "apps.kruise.io/runtime-containers-meta";

/// Pod condition / readiness gate: False while an in-place update is in progress.
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";
/// Pod condition / readiness gate: False while a lifecycle hook marks the Pod not ready.
pub const KRUISE_POD_READY: &str = "KruisePodReady";
/// Reason on `InPlaceUpdateReady=False`.
pub const REASON_START_INPLACE_UPDATE: &str = "StartInPlaceUpdate";

/// Workload annotations tuning image pre-download (CloneSet, Advanced StatefulSet).
pub const IMAGE_PREDOWNLOAD_PARALLELISM: &str = "apps.kruise.io/image-predownload-parallelism";
pub const IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS: &str =
    "apps.kruise.io/image-predownload-timeout-seconds";
pub const IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS: &str =
    "apps.kruise.io/image-predownload-min-updated-ready-pods";
/// ControllerRevision labels: pre-download done / skipped for this revision.
pub const IMAGE_PREDOWNLOAD_CREATED: &str = "apps.kruise.io/pre-predownload-created";
pub const IMAGE_PREDOWNLOAD_IGNORED: &str = "apps.kruise.io/image-predownload-ignored";

/// CloneSet condition types.
pub const CLONESET_CONDITION_FAILED_SCALE: &str = "FailedScale";
pub const CLONESET_CONDITION_FAILED_UPDATE: &str = "FailedUpdate";
pub const CLONESET_CONDITION_PROGRESSING: &str = "Progressing";

// ---------------------------------------------------------------------------------------
// Advanced StatefulSet and Advanced DaemonSet
// ---------------------------------------------------------------------------------------

/// Pod label: the Pod's own name, set by the StatefulSet controller (identity).
pub const STATEFULSET_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
/// Pod label: the Pod's ordinal (gate PodIndexLabel).
pub const POD_INDEX: &str = "apps.kubernetes.io/pod-index";
/// StatefulSet condition types.
pub const STATEFULSET_CONDITION_FAILED_CREATE_POD: &str = "FailedCreatePod";
pub const STATEFULSET_CONDITION_FAILED_UPDATE_POD: &str = "FailedUpdatePod";
/// Event source component of the Advanced StatefulSet controller.
pub const STATEFULSET_CONTROLLER_NAME: &str = "statefulset-controller";

/// Pod label: the DaemonSet template generation a Pod was created from (legacy matching).
pub const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";
/// DaemonSet annotation: the template generation (legacy matching with `pod-template-generation`).
pub const DEPRECATED_DAEMONSET_TEMPLATE_GENERATION: &str =
    "deprecated.daemonset.template.generation";
/// DaemonSet annotation: `"true"` makes `partition` also limit Pod creation.
pub const DAEMONSET_PROGRESSIVE_CREATE_POD: &str = "daemonset.kruise.io/progressive-create-pod";
/// Event source component of the Advanced DaemonSet controller.
pub const DAEMONSET_CONTROLLER_NAME: &str = "daemonset-controller";
/// DaemonSet event: a failed daemon Pod is being killed.
pub const DAEMONSET_EVENT_FAILED_DAEMON_POD: &str = "FailedDaemonPod";
/// DaemonSet event: the selector is empty.
pub const DAEMONSET_EVENT_SELECTING_ALL: &str = "SelectingAll";
/// DaemonSet event: an in-place update waits because too many Pods are unavailable.
pub const DAEMONSET_EVENT_NUM_UNAVAILABLE: &str = "numUnavailable >= maxUnavailable";

/// Workload event reasons for Pod creation/deletion/update.
pub const EVENT_SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
pub const EVENT_FAILED_CREATE: &str = "FailedCreate";
pub const EVENT_SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
pub const EVENT_FAILED_DELETE: &str = "FailedDelete";
pub const EVENT_SUCCESSFUL_UPDATE: &str = "SuccessfulUpdate";
pub const EVENT_FAILED_UPDATE: &str = "FailedUpdate";
/// Workload event reasons of in-place updates (Advanced StatefulSet, Advanced DaemonSet).
pub const EVENT_SUCCESSFUL_UPDATE_POD_IN_PLACE: &str = "SuccessfulUpdatePodInPlace";
pub const EVENT_FAILED_UPDATE_POD_IN_PLACE: &str = "FailedUpdatePodInPlace";
/// CloneSet's ReCreate update: the Pod is marked specified-delete.
pub const EVENT_SUCCESSFUL_UPDATE_POD_RECREATE: &str = "SuccessfulUpdatePodReCreate";
pub const EVENT_FAILED_UPDATE_POD_RECREATE: &str = "FailedUpdatePodReCreate";
/// Image pre-download (CloneSet, Advanced StatefulSet): an ImagePullJob of a rollout was
/// created, or failed to be.
pub const EVENT_CREATED_IMAGE_PULL_JOB: &str = "CreatedImagePullJob";
pub const EVENT_FAILED_CREATE_IMAGE_PULL_JOB: &str = "FailedCreateImagePullJob";
