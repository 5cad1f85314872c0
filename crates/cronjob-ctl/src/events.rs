//! The AdvancedCronJob controller's name. Upstream emits no events (its recorder in
//! openkruise/kruise v1.9.0 pkg/controller/advancedcronjob is never used); what it decides is
//! logged.

/// The controller's name: lease, field manager.
pub const CONTROLLER_NAME: &str = kruise_api::keys::ADVANCEDCRONJOB_CONTROLLER_NAME;

/// Who this binary is (its client's User-Agent is `cronjob-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
