//! Event reasons the CloneSet controller reports (as `cloneset-controller`).

pub use crate::plan::scale::REASON_SCALE_UP_LIMITED;
pub use kruise_api::keys::{
    EVENT_FAILED_UPDATE_POD_IN_PLACE, EVENT_SUCCESSFUL_UPDATE_POD_IN_PLACE,
};

pub const SUCCESSFUL_UPDATE_POD_RECREATE: &str = "SuccessfulUpdatePodReCreate";
pub const FAILED_UPDATE_POD_RECREATE: &str = "FailedUpdatePodReCreate";
/// The controller's name: event reporter, lease, field manager.
pub const CONTROLLER_NAME: &str = "cloneset-controller";
