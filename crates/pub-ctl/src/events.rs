//! Who this binary is and the events it raises.

pub use kruise_api::keys::{
    EVENT_PUB_NO_PODS, EVENT_PUB_NOT_DELETED, EVENT_PUB_PREVENT_POD_DELETION,
    EVENT_PUB_PREVENT_POD_DELETION_MSG,
};

/// The controller's name: event reporter, lease, field manager.
pub const CONTROLLER_NAME: &str = "podunavailablebudget-controller";

/// Who this binary is (its client's User-Agent is `pub-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

/// `NotDeleted`: an admitted deletion that did not happen within the record's lifetime.
pub fn not_deleted(namespace: &str, pub_name: &str) -> String {
    format!("Pod was expected by PUB {namespace}/{pub_name} to be deleted but it wasn't")
}

/// `NoPods`: the budget protects nothing.
pub const NO_PODS_MSG: &str = "No matching pods found";
