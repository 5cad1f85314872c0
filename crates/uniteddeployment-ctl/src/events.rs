//! The UnitedDeployment controller's name and event reasons (upstream's: each a warning
//! `Failed<step>` when that step of a reconcile fails).

/// The controller's name: lease, field manager.
pub const CONTROLLER_NAME: &str = "uniteddeployment-controller";

/// Who this binary is (its client's User-Agent is `uniteddeployment-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

/// Warning: the replicas cannot be split over the subsets.
pub const REASON_SPECIFY_SUBSET_REPLICAS_FAILED: &str = "FailedSpecifySubsetReplicas";
/// Warning: creating or updating a subset workload failed.
pub const REASON_UPDATE_SUBSET_FAILED: &str = "FailedUpdateSubset";
/// Warning: deleting a duplicated or removed subset workload failed.
pub const REASON_DELETE_SUBSET_FAILED: &str = "FailedDeleteDuplicatedSubsets";
/// Warning: the ControllerRevision of the template could not be made.
pub const REASON_REVISION_PROVISION_FAILED: &str = "FailedRevisionProvision";
