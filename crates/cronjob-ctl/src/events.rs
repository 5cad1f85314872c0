//! The AdvancedCronJob controller's name. Upstream emits no events (spec 4.2.9); what it
//! decides is logged.

/// The controller's name: lease, field manager.
pub const CONTROLLER_NAME: &str = kruise_api::keys::ADVANCEDCRONJOB_CONTROLLER_NAME;

/// Who this binary is (its client's User-Agent is `cronjob-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
