//! Keys of SidecarSet: the annotations the injector and the controller write on Pods and
//! SidecarSets, revision labels, the Pod condition, env vars and event reasons.

/// SidecarSet and Pod annotation: the SidecarSet's container hash (on Pods, a JSON map by SidecarSet name).
pub const SIDECARSET_HASH: &str = "kruise.io/sidecarset-hash";
/// SidecarSet and Pod annotation: the same hash computed with every image blanked.
pub const SIDECARSET_HASH_WITHOUT_IMAGE: &str = "kruise.io/sidecarset-hash-without-image";
/// Pod annotation: comma-joined, sorted names of the SidecarSets injected into the Pod.
pub const SIDECARSET_INJECTED_LIST: &str = "kruise.io/sidecarset-injected-list";
/// Pod annotation: per-SidecarSet in-place upgrade state (revision, time, old imageIDs).
pub const SIDECARSET_INPLACE_UPDATE_STATE: &str = "kruise.io/sidecarset-inplace-update-state";
/// Pod annotation: JSON map of hot-upgrade sidecar name to its working twin (`{"c":"c-1"}`).
pub const SIDECARSET_WORKING_HOTUPGRADE_CONTAINER: &str =
    "kruise.io/sidecarset-working-hotupgrade-container";
/// Pod annotation prefix: `version.sidecarset.kruise.io/<twin>` holds the twin's version.
pub const SIDECARSET_VERSION_ANNOTATION_PREFIX: &str = "version.sidecarset.kruise.io/";
/// Pod annotation prefix: `versionalt.sidecarset.kruise.io/<twin>` holds the other twin's version.
pub const SIDECARSET_VERSION_ALT_ANNOTATION_PREFIX: &str = "versionalt.sidecarset.kruise.io/";

/// ControllerRevision label: name of the SidecarSet the revision belongs to.
pub const SIDECARSET_NAME_LABEL: &str = "kruise.io/sidecarset-name";
/// SidecarSet/ControllerRevision label: user version matched by `injectionStrategy.revision.customVersion`.
pub const SIDECARSET_CUSTOM_VERSION: &str = "apps.kruise.io/sidecarset-custom-version";

/// SidecarSet annotation: `"true"` with [`SIDECARSET_BASE`] makes a canary SidecarSet,
/// injected instead of its base into the Pods both select (OpenKruise 1.9).
pub const SIDECARSET_CANARY: &str = "apps.kruise.io/sidecarset-canary";
/// SidecarSet annotation: the name of the base SidecarSet a canary stands in for.
pub const SIDECARSET_BASE: &str = "apps.kruise.io/sidecarset-base";

/// Container env: `"true"` on every injected sidecar, marking it as not an app container.
pub const IS_INJECTED: &str = "IS_INJECTED";
/// Container env of hot-upgrade twins: fieldRef to the twin's `version.sidecarset.kruise.io/` annotation.
pub const SIDECARSET_VERSION: &str = "SIDECARSET_VERSION";
/// Container env of hot-upgrade twins: fieldRef to the twin's `versionalt.sidecarset.kruise.io/` annotation.
pub const SIDECARSET_VERSION_ALT: &str = "SIDECARSET_VERSION_ALT";
/// Name suffix of the first (initially working) hot-upgrade twin.
pub const HOT_UPGRADE_CONTAINER_SUFFIX_1: &str = "-1";
/// Name suffix of the second (initially idle) hot-upgrade twin.
pub const HOT_UPGRADE_CONTAINER_SUFFIX_2: &str = "-2";

/// Pod condition: whether the Pod's sidecars can be upgraded in place.
pub const SIDECARSET_UPGRADABLE: &str = "SidecarSetUpgradable";
/// Reason on `SidecarSetUpgradable=True`.
pub const REASON_ALL_SIDECARSET_UPGRADABLE: &str = "AllSidecarsetUpgradable";
/// Reason on `SidecarSetUpgradable=False`: something other than an image changed.
pub const REASON_UPDATE_IMMUTABLE_FIELD: &str = "UpdateImmutableField";

/// Event on the SidecarSet: some matched Pods cannot be upgraded in place.
pub const EVENT_NOT_UPGRADABLE_PODS: &str = "NotUpgradablePods";
/// Event: the old hot-upgrade twin was reset to the empty image.
pub const EVENT_RESET_CONTAINER_SUCCEED: &str = "ResetContainerSucceed";
/// Event: resetting the old hot-upgrade twin failed.
pub const EVENT_RESET_CONTAINER_FAILED: &str = "ResetContainerFailed";

/// ConfigMap in the manager namespace holding the SidecarSet patchPodMetadata whitelist.
pub const SIDECARSET_CONFIGMAP: &str = "kruise-configuration";
/// Key of [`SIDECARSET_CONFIGMAP`] whose JSON lists the annotation keys patchPodMetadata may set.
pub const SIDECARSET_PATCH_POD_METADATA_WHITELIST: &str = "SidecarSet_PatchPodMetadata_WhiteList";
