//! A subset's `Schedulable` condition (the Adaptive strategy's, with or without
//! reservation): its reasons and how it moves.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::UnitedDeploymentSubsetCondition;
use kruise_api::keys;

/// Reason of the False condition (OpenKruise's wording).
pub const REASON_RESCHEDULE: &str = "reschedule";
/// Reason of the True condition after an unschedulable period.
pub const REASON_RECOVER: &str = "recover";

/// `condition` moved to `status`/`reason`; its transition time changes only when one of
/// them does (as OpenKruise's `SetCondition`).
pub(super) fn set(
    condition: Option<UnitedDeploymentSubsetCondition>,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) -> UnitedDeploymentSubsetCondition {
    match condition {
        Some(c) if c.status == status && c.reason == reason => c,
        _ => UnitedDeploymentSubsetCondition {
            type_: keys::SUBSET_CONDITION_SCHEDULABLE.to_string(),
            status: status.to_string(),
            last_transition_time: Some(Time(now)),
            reason: reason.to_string(),
            message: message.into(),
        },
    }
}
