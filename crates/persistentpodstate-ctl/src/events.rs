//! The controller's name and identity (User-Agent `persistentpodstate-ctl/<version>`).

/// Lease name, field manager and event reporter.
pub const CONTROLLER_NAME: &str = "persistentpodstate-controller";
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
