//! The controller's name and identity (User-Agent `ephemeraljob-ctl/<version>`) and its
//! one event: upstream's EphemeralJob controller records only a Warning `CreateFailed` on
//! the job when adding ephemeral containers to a Pod fails
//! ([`crate::plan::REASON_CREATE_FAILED`], [`crate::plan::create_failed_message`]).

/// Lease name, field manager and event reporter (upstream's controller name).
pub const CONTROLLER_NAME: &str = "ephemeraljob-controller";
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
