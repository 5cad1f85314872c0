//! Event reasons the CloneSet controller reports (as `cloneset-controller`).

pub use crate::plan::scale::REASON_SCALE_UP_LIMITED;
/// Reasons shared with Advanced StatefulSet; the ImagePullJob events are reported by
/// `kruise_workload::predownload::apply`.
pub use kruise_api::keys::{
    EVENT_CREATED_IMAGE_PULL_JOB, EVENT_FAILED_CREATE_IMAGE_PULL_JOB,
    EVENT_FAILED_UPDATE_POD_IN_PLACE, EVENT_FAILED_UPDATE_POD_RECREATE,
    EVENT_SUCCESSFUL_UPDATE_POD_IN_PLACE, EVENT_SUCCESSFUL_UPDATE_POD_RECREATE,
};

/// The controller's name: event reporter, lease, field manager.
pub const CONTROLLER_NAME: &str = "cloneset-controller";

/// Who this binary is (its client's User-Agent is `cloneset-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
