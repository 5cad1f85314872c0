//! Keys of the spread and distribution features: WorkloadSpread (WS), UnitedDeployment (UD)
//! and ResourceDistribution (RD). `pod-template-hash` and
//! `controller.kubernetes.io/pod-deletion-cost` are in the workload keys
//! (`POD_TEMPLATE_HASH`, `POD_DELETION_COST`).

// --- WorkloadSpread ---------------------------------------------------------------------

/// Pod annotation: JSON `{"name":…,"subset":…,"uid":…}` of the WS subset the Pod was put in.
pub const WS_MATCHED: &str = "apps.kruise.io/matched-workloadspread";
/// WS annotation: `"true"` stops the subset patch's metadata being applied to existing Pods.
pub const WS_IGNORE_PATCH_EXISTING_PODS_METADATA: &str =
    "workloadspread.kruise.io/ignore-patch-existing-pods-metadata";
/// Name of the pseudo subset holding Pods that match no subset.
pub const WS_FAKE_SUBSET_NAME: &str = "kruise.io/workloadspread-fake-subset-name";
/// Version key of subset statuses for workloads that are not versioned per Pod.
pub const WS_VERSION_IGNORED: &str = "versionIgnored";
/// `kruise-configuration` key: custom kinds a WS may target.
pub const WS_WATCH_CUSTOM_WORKLOAD_WHITELIST: &str =
    "WorkloadSpread_Watch_Custom_Workload_WhiteList";
/// Feature gate of the WorkloadSpread Pod webhook (default on).
pub const GATE_WORKLOAD_SPREAD: &str = "WorkloadSpread";
/// WS subset condition type (also a UD subset condition type).
pub const SUBSET_CONDITION_SCHEDULABLE: &str = "Schedulable";

/// WS event: a recorded Pod creation was never observed.
pub const EVENT_WS_CREATE_POD_FAILED: &str = "CreatePodFailed";
/// WS event: a recorded Pod deletion was never observed.
pub const EVENT_WS_DELETE_POD_FAILED: &str = "DeletePodFailed";
/// WS event: an unschedulable subset became schedulable again.
pub const EVENT_WS_RECOVER_SCHEDULABLE: &str = "RecoverSchedulable";
/// WS event: patching pod-deletion-cost onto a Pod failed.
pub const EVENT_WS_PATCH_POD_DELETION_COST_FAILED: &str = "PatchPodDeletionCostFailed";

/// Validation: no targetRef.
pub const WS_MSG_NO_TARGET_REF: &str = "no targetRef defined in WorkloadSpread";
/// Validation: a target kind that is not supported or allowlisted.
pub const WS_MSG_KIND_NOT_PERMITTED: &str = "TargetReference's GroupKind is not permitted.";
/// Validation: targetRef changed on update.
pub const WS_MSG_TARGET_REF_IMMUTABLE: &str =
    "change TargetReference is not permitted for WorkloadSpread";
/// Validation stem for a targetRef conflict; followed by the other WS's name.
pub const WS_MSG_TARGET_REF_CONFLICT: &str =
    "ws.spec.targetRef is in conflict with other WorkloadSpread ";
/// Validation: no subsets.
pub const WS_MSG_NO_SUBSETS: &str = "subsets number must >= 1 in WorkloadSpread";
/// Validation stem for a repeated subset name (WS and UD); followed by the name.
pub const MSG_DUPLICATED_SUBSET_NAME: &str = "duplicated subset name ";
/// Validation: subsets mix integer and percent maxReplicas.
pub const WS_MSG_MAX_REPLICAS_MIXED: &str = "the maxReplicas type of all subsets must be the same";
/// Validation: percent maxReplicas on a StatefulSet target.
pub const WS_MSG_MAX_REPLICAS_INT_FOR_STS: &str =
    "the maxReplicas type must be Int for StatefulSet";
/// Validation: percent maxReplicas summing above 100%.
pub const WS_MSG_PERCENT_EXCEEDS_100: &str =
    "the sum of all subset's maxReplicas exceeds 100% is no permitted";
/// Validation: percent maxReplicas not summing to exactly 100%.
pub const WS_MSG_PERCENT_NOT_100: &str =
    "maxReplicas sum of all subsets must equal 100% when type is specified as percent";

// --- UnitedDeployment -------------------------------------------------------------------

/// Label on subset workloads (and their Pods): the subset name.
pub const UD_SUBSET_NAME: &str = "apps.kruise.io/subset-name";
/// Label on subset workloads: the UD revision they were built from.
pub const UD_CONTROLLER_REVISION_HASH: &str = "apps.kruise.io/controller-revision-hash";
/// Annotation on subset workloads: the subset's patch, as applied.
pub const UD_SUBSET_PATCH: &str = "apps.kruise.io/subset-patch";
/// Pod label: a pending Pod kept in an unschedulable subset (reserveUnschedulablePods).
pub const UD_RESERVED_POD: &str = "apps.kruise.io/united-deployment-reserved-pod";

/// UD condition: expected subsets exist and unexpected ones were deleted.
pub const UD_CONDITION_SUBSET_PROVISIONED: &str = "SubsetProvisioned";
/// UD condition: every subset is updated.
pub const UD_CONDITION_SUBSET_UPDATED: &str = "SubsetUpdated";
/// UD condition: a subset failed to reconcile.
pub const UD_CONDITION_SUBSET_FAILURE: &str = "SubsetFailure";
/// UD condition: currentRevision equals updatedRevision.
pub const UD_CONDITION_UPDATED: &str = "UnitedDeploymentUpdated";

/// Validation: no template.
pub const UD_MSG_NO_TEMPLATE: &str = "should provide one of statefulSetTemplate, advancedStatefulSetTemplate, cloneSetTemplate, or deploymentTemplate";
/// Validation: more than one template.
pub const UD_MSG_MULTIPLE_TEMPLATES: &str = "should provide only one of statefulSetTemplate, advancedStatefulSetTemplate, cloneSetTemplate, or deploymentTemplate";
/// Validation: the selector does not match the template labels.
pub const UD_MSG_SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";
/// Validation: replicas mixed with minReplicas/maxReplicas.
pub const UD_MSG_REPLICAS_MIN_MAX_EXCLUSIVE: &str = "subset.Replicas and subset.MinReplicas/subset.MaxReplicas are mutually exclusive in a UnitedDeployment";

// --- ResourceDistribution ---------------------------------------------------------------

/// Annotation on distributed copies: the name of the RD.
pub const RD_RESOURCE_FROM: &str = "kruise.io/resourcedistribution.resource.from";
/// Annotation on distributed copies: sha256 hex of the RD's `spec.resource`.
pub const RD_RESOURCE_HASHCODE: &str = "kruise.io/resourcedistribution.resource.hashcode";

/// RD condition: reading a copy failed.
pub const RD_CONDITION_GET_RESOURCE_FAILED: &str = "GetResourceFailed";
/// RD condition: creating a copy failed.
pub const RD_CONDITION_CREATE_RESOURCE_FAILED: &str = "CreateResourceFailed";
/// RD condition: updating a copy failed.
pub const RD_CONDITION_UPDATE_RESOURCE_FAILED: &str = "UpdateResourceFailed";
/// RD condition: deleting a copy failed.
pub const RD_CONDITION_DELETE_RESOURCE_FAILED: &str = "DeleteResourceFailed";
/// RD condition: a same-named object not owned by the RD exists.
pub const RD_CONDITION_CONFLICT_OCCURRED: &str = "ConflictOccurred";
/// RD condition: a target namespace is missing or terminating.
pub const RD_CONDITION_NAMESPACE_NOT_EXISTS: &str = "NamespaceNotExists";
/// The six RD condition types, in the order they are reported.
pub const RD_CONDITION_TYPES: [&str; 6] = [
    RD_CONDITION_GET_RESOURCE_FAILED,
    RD_CONDITION_CREATE_RESOURCE_FAILED,
    RD_CONDITION_UPDATE_RESOURCE_FAILED,
    RD_CONDITION_DELETE_RESOURCE_FAILED,
    RD_CONDITION_CONFLICT_OCCURRED,
    RD_CONDITION_NAMESPACE_NOT_EXISTS,
];
/// Reason of an RD condition whose status is False.
pub const RD_REASON_SUCCEEDED: &str = "Succeeded";
/// Feature gate of ResourceDistribution.
pub const GATE_RESOURCE_DISTRIBUTION: &str = "ResourceDistributionGate";
/// Admission rejection when [`GATE_RESOURCE_DISTRIBUTION`] is off.
pub const RD_MSG_GATE_DISABLED: &str = "feature-gate ResourceDistributionGate is not enabled";
/// Validation: apiVersion, kind or name of the resource changed on update.
pub const RD_MSG_RESOURCE_IMMUTABLE: &str = "resource apiVersion, kind, and name are immutable";
