//! Keys of the node-agent features: ContainerRecreateRequest, ImagePullJob, NodeImage and
//! container launch priority. `KruisePodReady`, `controller-revision-hash` and the CloneSet
//! image pre-download annotations live in the workload keys.

/// CRR label (immutable): node of the Pod, the node agent's watch filter.
pub const CRR_NODE_NAME: &str = "crr.apps.kruise.io/node-name";
/// CRR label (immutable): UID of the Pod when the CRR was created.
pub const CRR_POD_UID: &str = "crr.apps.kruise.io/pod-uid";
/// CRR label: `"true"` until the CRR completes; the node agent watches only active CRRs.
pub const CRR_ACTIVE: &str = "crr.apps.kruise.io/active";
/// CRR annotation: JSON list of the recreated containers' statuses, synced while Recreating.
pub const CRR_SYNC_CONTAINER_STATUSES: &str = "crr.apps.kruise.io/sync-container-statuses";
/// CRR annotation (RFC 3339 time the Pod was made not-ready) and finalizer held meanwhile.
pub const CRR_UNREADY_ACQUIRED: &str = "crr.apps.kruise.io/unready-acquired";
/// `userAgent` of the CRR entry in the Pod's `KruisePodReady` condition message.
pub const CRR_POD_READY_USER_AGENT: &str = "ContainerRecreateRequest";
/// Event reason on the Pod when the node agent stops a container for a CRR.
pub const EVENT_CRR_KILLING: &str = "Killing";

/// NodeImage label: keep this NodeImage even though no Node of that name exists.
pub const FAKE_NODEIMAGE: &str = "apps.kruise.io/fake-nodeimage";
/// Finalizer on ImagePullJobs, removed once their copied pull secrets are released.
pub const IMAGEPULLJOB_PROTECTION_FINALIZER: &str = "apps.kruise.io/deletion-protection";
/// Annotation on a copied pull secret: `<namespace>/<name>` of the source Secret.
pub const IMAGEPULLJOB_SOURCE_KEY: &str = "imagepulljobs.kruise.io/source-key";
/// Annotation on a copied pull secret: sorted JSON list of the jobs referencing it.
pub const IMAGEPULLJOB_REFERENCES: &str = "imagepulljobs.kruise.io/references";
/// Namespace pull secrets are copied into for the node agent.
pub const KRUISE_DAEMON_CONFIG_NAMESPACE: &str = "kruise-daemon-config";
/// Manager env overriding [`KRUISE_DAEMON_CONFIG_NAMESPACE`].
pub const KRUISE_DAEMON_CONFIG_NS_ENV: &str = "KRUISE_DAEMON_CONFIG_NS";
/// Sandbox annotation added to every CRI PullImage call of the node agent.
pub const PULLING_IMAGE_BY: &str = "apps.kruise.io/pulling-image-by";
/// Value of [`PULLING_IMAGE_BY`].
pub const PULLING_IMAGE_BY_KRUISE_DAEMON: &str = "kruise-daemon";
/// Event reason: an image tag was pulled on a node.
pub const EVENT_PULL_IMAGE_SUCCEED: &str = "PullImageSucceed";
/// Event reason: an image tag could not be pulled on a node.
pub const EVENT_PULL_IMAGE_FAILED: &str = "PullImageFailed";

/// Pod annotation: `Ordered` starts containers in the order they are listed.
pub const CONTAINER_LAUNCH_PRIORITY: &str = "apps.kruise.io/container-launch-priority";
/// Value of [`CONTAINER_LAUNCH_PRIORITY`] for list order.
pub const CONTAINER_LAUNCH_PRIORITY_ORDERED: &str = "Ordered";
/// Pod annotation: `"true"` once every launch-priority barrier key has been released.
pub const CONTAINER_LAUNCH_PRIORITY_COMPLETED: &str =
    "apps.kruise.io/container-launch-priority-completed";
/// Container env: launch priority, an integer in [`CONTAINER_PRIORITY_MIN`]..=[`CONTAINER_PRIORITY_MAX`]; higher starts first.
pub const KRUISE_CONTAINER_PRIORITY: &str = "KRUISE_CONTAINER_PRIORITY";
/// Container env injected with a configMapKeyRef to `<pod>-barrier`/`p_<priority>`.
pub const KRUISE_CONTAINER_BARRIER: &str = "KRUISE_CONTAINER_BARRIER";
/// Name suffix of the per-Pod barrier ConfigMap (`<pod>-barrier`).
pub const CONTAINER_BARRIER_CONFIGMAP_SUFFIX: &str = "-barrier";
/// Key prefix in the barrier ConfigMap (`p_<priority>`).
pub const CONTAINER_BARRIER_KEY_PREFIX: &str = "p_";
/// Pod label set by the launch-priority webhook on a Pod it gave barriers, removed once
/// every barrier key is released: the barrier controller watches only Pods carrying it.
pub const CONTAINER_LAUNCH_BARRIER_LABEL: &str = "apps.kruise.io/container-launch-barrier";
/// Lowest allowed [`KRUISE_CONTAINER_PRIORITY`].
pub const CONTAINER_PRIORITY_MIN: i32 = -2147483647;
/// Highest allowed [`KRUISE_CONTAINER_PRIORITY`].
pub const CONTAINER_PRIORITY_MAX: i32 = 2147483647;

/// Feature gate: the node agent and everything that needs it (CRR, image pulls).
pub const FEATURE_KRUISE_DAEMON: &str = "KruiseDaemon";
/// Feature gate: ImagePullJob and ImageListPullJob (on by default here).
pub const FEATURE_IMAGE_PULL_JOB_GATE: &str = "ImagePullJobGate";

/// Container env (SidecarTerminator): `"true"` marks a sidecar that is stopped once the main
/// containers of its Job-like Pod (restartPolicy Never/OnFailure) have ended.
pub const KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT";
/// Container env (SidecarTerminator): `"true"` on such a sidecar: its exit code does not
/// decide the Pod's phase (the Pod is marked Succeeded or Failed from its main containers).
/// OpenKruise v1.9.0 apis/apps/v1alpha1/well_known_labels.go `KruiseIgnoreContainerExitCodeEnv`.
pub const KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE: &str =
    "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE";
/// Container env (SidecarTerminator, virtual-kubelet nodes): an image the sidecar is
/// updated to in place instead of being killed.
pub const KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE: &str =
    "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE";
/// Pod condition SidecarTerminator sets when it marks a Pod terminated.
pub const SIDECAR_TERMINATED: &str = "SidecarTerminated";
/// Event reason of SidecarTerminator.
pub const REASON_SIDECAR_TERMINATOR: &str = "SidecarTerminator";
/// Name prefix of the ContainerRecreateRequest SidecarTerminator creates
/// (`sidecar-termination-<pod uid>`).
pub const SIDECAR_TERMINATION_CRR_PREFIX: &str = "sidecar-termination-";
