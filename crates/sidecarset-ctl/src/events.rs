//! Event reasons the SidecarSet controller reports (as `sidecarset-controller`).

pub use kruise_api::keys::{
    EVENT_NOT_UPGRADABLE_PODS, EVENT_RESET_CONTAINER_FAILED, EVENT_RESET_CONTAINER_SUCCEED,
};

/// The controller's name: event reporter, lease, field manager.
pub const CONTROLLER_NAME: &str = "sidecarset-controller";
/// Warning on a Pod whose sidecar in-place upgrade could not be written.
pub const FAILED_UPDATE_POD_SIDECAR: &str = "FailedUpdatePodSidecar";

/// Who this binary is (its client's User-Agent is `sidecarset-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
