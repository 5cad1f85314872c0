//! Who the controller is. ResourceDistribution reports through its status conditions (as upstream's
//! `updateDistributorStatus`), not through events.

/// The controller's name: lease, field manager of the status.
pub const CONTROLLER_NAME: &str = "resourcedistribution-controller";

/// Who this binary is (its client's User-Agent is `resourcedistribution-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
