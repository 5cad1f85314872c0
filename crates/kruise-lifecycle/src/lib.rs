//! Pod lifecycle hooks shared by CloneSet and Advanced StatefulSet: the state label,
//! whether a hook (`preNormal`, `inPlaceUpdate`, `preDelete`) holds a Pod, the
//! transitions and the patches that carry them, and `markPodNotReady` through the
//! `KruisePodReady` condition.
//!
//! Pure: no client and no clock. Callers pass `now` and send the returned patches.
//!
//! States (label `lifecycle.apps.kruise.io/state`): `PreparingNormal` → `Normal` →
//! (`PreparingUpdate` → `Updating` → `Updated` →) `Normal`, and from anywhere
//! `PreparingDelete`. A controller *decides* to enter `PreparingDelete`,
//! `PreparingUpdate` and `Updating` ([`pre_delete_holds`], [`in_place_update_gate`],
//! [`transition`]); the rest happen on refresh ([`refresh_target`]).

mod hooks;
mod readiness;
mod refresh;
mod transition;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod scenarios;
#[cfg(test)]
mod test_support;

pub use hooks::{
    InPlaceUpdateGate, can_cancel_deletion, has_unknown_state, in_place_update_gate,
    in_place_update_holds, is_all_hooked, is_hooked, pre_delete_holds, pre_normal_satisfied, state,
};
pub use readiness::{
    LIFECYCLE_USER_AGENT, NotReadyKey, PRE_DELETE_HOOK_KEY, PRE_UPDATE_HOOK_KEY,
    condition_with_entry, condition_with_key, has_kruise_pod_ready_gate,
    kruise_pod_ready_condition, not_ready_entry_status_patch, not_ready_keys,
    not_ready_status_patch,
};
pub use refresh::{RefreshInput, refresh_target};
pub use transition::{Transition, format_timestamp, set_state, transition};
