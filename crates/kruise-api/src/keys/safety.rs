//! Keys of the pod-safety features: PodUnavailableBudget (PUB), resource deletion
//! protection and PersistentPodState (PPS).

// --- Resource deletion protection -------------------------------------------------------

/// Label on a Namespace, CRD or workload: `Always` or `Cascading` blocks its deletion.
pub const DELETION_PROTECTION: &str = "policy.kruise.io/delete-protection";
/// [`DELETION_PROTECTION`] value: the object cannot be deleted until the label is removed.
pub const DELETION_PROTECTION_ALWAYS: &str = "Always";
/// [`DELETION_PROTECTION`] value: the object cannot be deleted while it has live dependants.
pub const DELETION_PROTECTION_CASCADING: &str = "Cascading";
/// Rejection message for an object labelled [`DELETION_PROTECTION`]`=Always`.
pub const DELETION_PROTECTION_MSG_ALWAYS: &str =
    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always";
/// Rejection message stem for `Cascading`; followed by `replicas N>0`, `active pods N>0` or `active CRs N>0`.
pub const DELETION_PROTECTION_MSG_CASCADING_PREFIX: &str = "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and ";
/// Feature gate of resource deletion protection (default off).
pub const GATE_RESOURCES_DELETION_PROTECTION: &str = "ResourcesDeletionProtection";

// --- PodUnavailableBudget ---------------------------------------------------------------

/// Pod label prefix: any label with it marks the Pod unavailable for PUB accounting.
pub const PUB_UNAVAILABLE_POD_LABEL_PREFIX: &str = "unavailable-pod.kruise.io/";
/// Pod annotation: the name of the PUB that protects the Pod.
pub const PUB_RELATED: &str = "kruise.io/related-pub";
/// PUB annotation: comma list of protected operations (default `DELETE,EVICT,UPDATE`).
pub const PUB_PROTECT_OPERATIONS: &str = "kruise.io/pub-protect-operations";
/// PUB annotation: integer that overrides the expected total replicas.
pub const PUB_PROTECT_TOTAL_REPLICAS: &str = "pub.kruise.io/protect-total-replicas";
/// Pod annotation: `"true"` exempts the Pod from PUB protection.
pub const PUB_NO_PROTECT: &str = "pub.kruise.io/no-protect";

/// PUB operation: Pod deletion.
pub const PUB_OPERATION_DELETE: &str = "DELETE";
/// PUB operation: Pod eviction.
pub const PUB_OPERATION_EVICT: &str = "EVICT";
/// PUB operation: a Pod spec update that may make it unavailable.
pub const PUB_OPERATION_UPDATE: &str = "UPDATE";
/// PUB operation: an in-place CPU/memory resize without container restart.
pub const PUB_OPERATION_RESIZE: &str = "RESIZE";

/// Warning event on a Pod whose deletion, eviction or update a PUB rejected.
pub const EVENT_PUB_PREVENT_POD_DELETION: &str = "PubPreventPodDeletion";
/// Message of [`EVENT_PUB_PREVENT_POD_DELETION`].
pub const EVENT_PUB_PREVENT_POD_DELETION_MSG: &str = "openkruise pub prevents pod deletion";
/// Event on a PUB whose admitted deletion was not observed within 20s.
pub const EVENT_PUB_NOT_DELETED: &str = "NotDeleted";
/// Event on a PUB that matches no Pods.
pub const EVENT_PUB_NO_PODS: &str = "NoPods";

/// Admission rejection reason when the budget is used up.
pub const PUB_MSG_UNAVAILABLE_ALLOWED_NEGATIVE: &str = "pub unavailable allowed is negative";
/// Admission rejection when too many admitted disruptions are still unconfirmed.
pub const PUB_MSG_MAP_TOO_BIG: &str = "DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller";
/// Largest `len(disruptedPods)+len(unavailablePods)` before admission rejects.
pub const PUB_MAX_UNCONFIRMED_PODS: usize = 2000;

/// Validation: neither selector nor targetRef.
pub const PUB_MSG_NO_SELECTOR: &str = "no selector or targetRef defined in PodUnavailableBudget";
/// Validation: both selector and targetRef.
pub const PUB_MSG_SELECTOR_AND_TARGET_REF: &str = "selector and targetRef are mutually exclusive";
/// Validation: a targetRef with an empty apiVersion, kind or name.
pub const PUB_MSG_EMPTY_TARGET_REF: &str =
    "empty TargetReference is not valid for PodUnavailableBudget.";
/// Validation: an empty or invalid selector.
pub const PUB_MSG_EMPTY_SELECTOR: &str = "empty selector is not valid for PodUnavailableBudget.";
/// Validation: neither maxUnavailable nor minAvailable.
pub const PUB_MSG_NO_BUDGET: &str =
    "no maxUnavailable or minAvailable defined in PodUnavailableBudget";
/// Validation: both maxUnavailable and minAvailable.
pub const PUB_MSG_BUDGET_EXCLUSIVE: &str = "maxUnavailable and minAvailable are mutually exclusive";
/// Validation: selector or targetRef changed on update.
pub const PUB_MSG_IMMUTABLE: &str = "selector and targetRef cannot be modified";
/// Validation stem for a targetRef conflict; followed by the other PUB's name.
pub const PUB_MSG_TARGET_REF_CONFLICT: &str =
    "pub.spec.targetReference is in conflict with other PodUnavailableBudget ";
/// Validation stem for a selector conflict; followed by the other PUB's name.
pub const PUB_MSG_SELECTOR_CONFLICT: &str =
    "pub.spec.selector is in conflict with other PodUnavailableBudget ";

/// Feature gate: PUB protects deletion and eviction (default on).
pub const GATE_PUB_DELETE: &str = "PodUnavailableBudgetDeleteGate";
/// Feature gate: PUB protects in-place update (default on here, off upstream).
pub const GATE_PUB_UPDATE: &str = "PodUnavailableBudgetUpdateGate";

// --- PersistentPodState -----------------------------------------------------------------

/// StatefulSet annotation: `"true"` makes Kruise generate a PPS of the same name.
pub const PPS_AUTO_GENERATE: &str = "kruise.io/auto-generate-persistent-pod-state";
/// StatefulSet annotation: comma list of node label keys required on re-creation.
pub const PPS_REQUIRED_TOPOLOGY: &str = "kruise.io/required-persistent-topology";
/// StatefulSet annotation: comma list of node label keys preferred (weight 100) on re-creation.
pub const PPS_PREFERRED_TOPOLOGY: &str = "kruise.io/preferred-persistent-topology";
/// StatefulSet annotation: comma list of Pod annotation keys to record.
pub const PPS_PERSISTENT_POD_ANNOTATIONS: &str = "kruise.io/persistent-pod-annotations";
/// Pod annotation: the name of the PPS whose state was injected at creation.
pub const PPS_INJECTED: &str = "kruise.io/injected-persistent-pod-state";
/// `kruise-configuration` key: kinds besides StatefulSet a PPS may target.
pub const PPS_WATCH_CUSTOM_WORKLOAD_WHITELIST: &str = "PPS_Watch_Custom_Workload_WhiteList";

/// Validation: a targetRef with an empty apiVersion, kind or name.
pub const PPS_MSG_EMPTY_TARGET_REF: &str =
    "empty TargetReference is not valid for PersistentPodState.";
/// Validation: a target kind that is neither StatefulSet nor allowlisted.
pub const PPS_MSG_KIND_NOT_ALLOWED: &str =
    "TargetReference.Kind must be StatefulSet or in PPS_Watch_Custom_Workload_WhiteList";
/// Validation: neither required nor preferred topology.
pub const PPS_MSG_NO_TOPOLOGY: &str =
    "TopologyConstraint and TopologyPreference cannot be empty at the same time";
/// Validation: targetRef changed on update.
pub const PPS_MSG_IMMUTABLE: &str = "targetRef cannot be modified";
/// Validation stem for a targetRef conflict; followed by the other PPS's name.
pub const PPS_MSG_TARGET_REF_CONFLICT: &str =
    "targetReference is in conflict with other PersistentPodState ";
