//! The `KruisePodReady` condition (upstream `pkg/util/podreadiness`), which
//! `markPodNotReady` uses to hold a Pod NotReady while a hook holds it.
//!
//! The condition's message is a JSON list of who wants the Pod NotReady, e.g.
//! `[{"userAgent":"Lifecycle","key":"preDeleteHook"}]`, kept sorted by user agent then
//! key. Status is `False` while the list is non-empty and `True` once it empties (the
//! message then reads `[]`). Every change of the list rewrites `lastTransitionTime`, as
//! upstream does. No reason is written. Other user agents (e.g.
//! ContainerRecreateRequest) share the list; each only adds and removes its own entries.

use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys;
use kruise_api::pod::PodView;
use kruise_ordering::predicates::{condition, has_readiness_gate};
use serde::{Deserialize, Serialize};

/// The user agent of every entry the lifecycle hooks write.
pub const LIFECYCLE_USER_AGENT: &str = "Lifecycle";
/// Entry key while a `preDelete` hook with `markPodNotReady` holds the Pod.
pub const PRE_DELETE_HOOK_KEY: &str = "preDeleteHook";
/// Entry key while an `inPlaceUpdate` hook with `markPodNotReady` holds the Pod.
pub const PRE_UPDATE_HOOK_KEY: &str = "preUpdateHook";

/// The Pod condition type `Ready`, which the kubelet derives from readiness gates.
const POD_READY: &str = "Ready";
/// The Pod condition type `ContainersReady`.
const CONTAINERS_READY: &str = "ContainersReady";
/// Reason the kubelet (and upstream) gives `Ready=False` when a gate is not True.
const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// One entry of the `KruisePodReady` message: who holds the Pod NotReady, and why.
/// Field order matters: it is the JSON order upstream writes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotReadyKey {
    pub user_agent: String,
    pub key: String,
}

impl NotReadyKey {
    /// An entry written by the lifecycle hooks (user agent `Lifecycle`).
    pub fn lifecycle(key: &str) -> Self {
        NotReadyKey {
            user_agent: LIFECYCLE_USER_AGENT.to_owned(),
            key: key.to_owned(),
        }
    }
}

/// Whether the Pod has readiness gate `KruisePodReady`. Without it the condition cannot
/// affect readiness, so `markPodNotReady` writes nothing (as upstream).
pub fn has_kruise_pod_ready_gate<P: PodView>(pod: &P) -> bool {
    has_readiness_gate(pod, keys::KRUISE_POD_READY)
}

/// The Pod's `KruisePodReady` condition, if any.
pub fn kruise_pod_ready_condition<P: PodView>(pod: &P) -> Option<&PodCondition> {
    condition(pod, keys::KRUISE_POD_READY)
}

/// Every entry in the `KruisePodReady` message (all user agents), in message order.
/// Empty when the condition is missing or its message is not a JSON list of entries
/// (upstream ignores the parse error the same way).
pub fn not_ready_keys<P: PodView>(pod: &P) -> Vec<NotReadyKey> {
    parse_entries(kruise_pod_ready_condition(pod))
}

/// The `KruisePodReady` condition after adding (`add`) or removing the lifecycle entry
/// `key` ([`PRE_DELETE_HOOK_KEY`] / [`PRE_UPDATE_HOOK_KEY`]); `None` when nothing changes.
pub fn condition_with_key<P: PodView>(
    pod: &P,
    key: &str,
    add: bool,
    now: jiff::Timestamp,
) -> Option<PodCondition> {
    condition_with_entry(pod, &NotReadyKey::lifecycle(key), add, now)
}

/// [`condition_with_key`] for any user agent.
///
/// `None` (nothing to write) when the Pod lacks the `KruisePodReady` readiness gate, when
/// adding an entry that is already there with status `False`, or when removing an entry
/// that is not there. Adding to a condition whose status is `True` although it lists the
/// entry rewrites it `False`: a listed entry must hold the Pod NotReady (upstream would
/// leave such a condition alone).
pub fn condition_with_entry<P: PodView>(
    pod: &P,
    entry: &NotReadyKey,
    add: bool,
    now: jiff::Timestamp,
) -> Option<PodCondition> {
    if !has_kruise_pod_ready_gate(pod) {
        return None;
    }
    apply_entry(kruise_pod_ready_condition(pod), entry, add, now)
}

/// The change of one entry applied to a (possibly missing) condition; `None` when
/// nothing changes. Split from [`condition_with_entry`] so a transition can chain
/// several changes before writing once.
pub(crate) fn apply_entry(
    current: Option<&PodCondition>,
    entry: &NotReadyKey,
    add: bool,
    now: jiff::Timestamp,
) -> Option<PodCondition> {
    let mut entries = parse_entries(current);
    let listed = entries.contains(entry);
    if add {
        if listed && current.is_some_and(|c| c.status == "False") {
            return None;
        }
        if !listed {
            entries.push(entry.clone());
        }
    } else {
        if !listed {
            return None;
        }
        entries.retain(|e| e != entry);
    }
    Some(with_entries(current, entries, now))
}

/// A condition carrying `entries` (sorted, as upstream dumps them), keeping any other
/// fields of `current` (reason, lastProbeTime) untouched.
fn with_entries(
    current: Option<&PodCondition>,
    mut entries: Vec<NotReadyKey>,
    now: jiff::Timestamp,
) -> PodCondition {
    entries.sort();
    let mut condition = current.cloned().unwrap_or_else(|| PodCondition {
        type_: keys::KRUISE_POD_READY.to_owned(),
        ..Default::default()
    });
    // Upstream creates the condition without a status (an empty string) on the first add;
    // we write False, which is what the gate needs to hold the Pod NotReady.
    condition.status = if entries.is_empty() { "True" } else { "False" }.to_owned();
    condition.message = Some(dump_entries(&entries));
    condition.last_transition_time = Some(Time(now));
    condition
}

fn parse_entries(condition: Option<&PodCondition>) -> Vec<NotReadyKey> {
    condition
        .and_then(|c| c.message.as_deref())
        .filter(|message| !message.is_empty())
        .and_then(|message| serde_json::from_str::<Option<Vec<NotReadyKey>>>(message).ok())
        .flatten()
        .unwrap_or_default()
}

fn dump_entries(entries: &[NotReadyKey]) -> String {
    // Serializing plain strings into a JSON array cannot fail.
    serde_json::to_string(entries).unwrap_or_else(|_| "[]".to_owned())
}

/// The Pod's `Ready` condition once `kruise_pod_ready` replaces its `KruisePodReady`
/// condition, or `None` when `Ready` would not change.
///
/// This is the kubelet's rule (upstream `util.SetPodReadyCondition`): only when the Pod
/// has a `Ready` condition and `ContainersReady` is `True`, `Ready` is `True` iff every
/// readiness gate's condition is `True`. Upstream forces it only when adding a key (so
/// the Pod leaves endpoints at once rather than at the kubelet's next sync); we apply the
/// same rule on removal too, which restores `Ready` exactly when the kubelet would.
pub(crate) fn ready_condition_after<P: PodView>(
    pod: &P,
    kruise_pod_ready: &PodCondition,
    now: jiff::Timestamp,
) -> Option<PodCondition> {
    let current_ready = condition(pod, POD_READY)?;
    if condition(pod, CONTAINERS_READY).is_none_or(|c| c.status != "True") {
        return None;
    }
    let gate_condition = |gate: &str| {
        if gate == keys::KRUISE_POD_READY {
            Some(kruise_pod_ready)
        } else {
            condition(pod, gate)
        }
    };
    let unready: Vec<String> = pod
        .readiness_gates()
        .iter()
        .filter_map(|gate| {
            let gate = gate.condition_type.as_str();
            match gate_condition(gate) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate \"{gate}\" does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate \"{gate}\" is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    let ready = unready.is_empty();
    let status = if ready { "True" } else { "False" };
    if current_ready.status == status {
        return None;
    }
    Some(PodCondition {
        type_: POD_READY.to_owned(),
        status: status.to_owned(),
        reason: (!ready).then(|| READINESS_GATES_NOT_READY.to_owned()),
        message: (!ready).then(|| unready.join(", ")),
        last_transition_time: Some(Time(now)),
        ..Default::default()
    })
}

/// The strategic-merge patch for the Pod's `status` subresource that writes `conditions`
/// (merged by `type`, so other conditions are untouched).
pub(crate) fn status_patch(conditions: &[PodCondition]) -> serde_json::Value {
    serde_json::json!({ "status": { "conditions": conditions } })
}

/// The strategic-merge status patch that adds or removes one lifecycle entry; `None`
/// when nothing changes. It also carries `Ready` when that flips: with `ContainersReady`
/// True, `Ready` is True iff every readiness gate is True (the kubelet's rule), reason
/// `ReadinessGatesNotReady` when False. For callers that hold a Pod NotReady outside a
/// state transition; [`crate::transition()`] builds the same patch itself.
pub fn not_ready_status_patch<P: PodView>(
    pod: &P,
    key: &str,
    add: bool,
    now: jiff::Timestamp,
) -> Option<serde_json::Value> {
    not_ready_entry_status_patch(pod, &NotReadyKey::lifecycle(key), add, now)
}

/// [`not_ready_status_patch`] for an entry of any user agent (ContainerRecreateRequest's
/// `{"userAgent":"ContainerRecreateRequest","key":"<ns>/<name>"}`).
pub fn not_ready_entry_status_patch<P: PodView>(
    pod: &P,
    entry: &NotReadyKey,
    add: bool,
    now: jiff::Timestamp,
) -> Option<serde_json::Value> {
    let kruise = condition_with_entry(pod, entry, add, now)?;
    Some(status_patch_with_ready(pod, kruise, now))
}

pub(crate) fn status_patch_with_ready<P: PodView>(
    pod: &P,
    kruise: PodCondition,
    now: jiff::Timestamp,
) -> serde_json::Value {
    let ready = ready_condition_after(pod, &kruise, now);
    let conditions: Vec<PodCondition> = std::iter::once(kruise).chain(ready).collect();
    status_patch(&conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    fn lifecycle_entries(keys: &[&str]) -> Vec<NotReadyKey> {
        keys.iter().map(|k| NotReadyKey::lifecycle(k)).collect()
    }

    #[test]
    fn gate_detection() {
        assert!(!has_kruise_pod_ready_gate(&pod()));
        assert!(has_kruise_pod_ready_gate(&gated(pod())));
    }

    #[test]
    fn no_gate_means_nothing_to_write() {
        assert_eq!(
            condition_with_key(&pod(), PRE_DELETE_HOOK_KEY, true, t(1)),
            None
        );
        assert_eq!(
            not_ready_status_patch(&pod(), PRE_DELETE_HOOK_KEY, true, t(1)),
            None
        );
    }

    #[test]
    fn first_add_creates_a_false_condition_with_the_upstream_message() {
        let c = condition_with_key(&gated(pod()), PRE_DELETE_HOOK_KEY, true, t(5)).unwrap();
        assert_eq!(c.type_, "KruisePodReady");
        assert_eq!(c.status, "False");
        assert_eq!(
            c.message.as_deref(),
            Some(r#"[{"userAgent":"Lifecycle","key":"preDeleteHook"}]"#)
        );
        assert_eq!(c.reason, None);
        assert_eq!(c.last_transition_time, Some(Time(t(5))));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["lastTransitionTime"], "1970-01-01T00:00:05Z");
    }

    #[test]
    fn adding_twice_is_idempotent() {
        let p = with_condition(
            gated(pod()),
            condition_with_key(&gated(pod()), PRE_UPDATE_HOOK_KEY, true, t(1)).unwrap(),
        );
        assert_eq!(
            condition_with_key(&p, PRE_UPDATE_HOOK_KEY, true, t(2)),
            None
        );
    }

    #[test]
    fn removing_an_absent_key_is_a_no_op() {
        assert_eq!(
            condition_with_key(&gated(pod()), PRE_UPDATE_HOOK_KEY, false, t(1)),
            None
        );
        let p = with_condition(
            gated(pod()),
            condition_with_key(&gated(pod()), PRE_DELETE_HOOK_KEY, true, t(1)).unwrap(),
        );
        assert_eq!(
            condition_with_key(&p, PRE_UPDATE_HOOK_KEY, false, t(2)),
            None
        );
    }

    #[test]
    fn two_keys_at_once_then_remove_one_by_one() {
        let p = gated(pod());
        let p = with_condition(
            p.clone(),
            condition_with_key(&p, PRE_UPDATE_HOOK_KEY, true, t(1)).unwrap(),
        );
        let p = with_condition(
            p.clone(),
            condition_with_key(&p, PRE_DELETE_HOOK_KEY, true, t(2)).unwrap(),
        );
        // Sorted by key, whatever the order of adding.
        assert_eq!(
            not_ready_keys(&p),
            lifecycle_entries(&["preDeleteHook", "preUpdateHook"])
        );
        assert_eq!(kruise_pod_ready_condition(&p).unwrap().status, "False");

        let c = condition_with_key(&p, PRE_DELETE_HOOK_KEY, false, t(3)).unwrap();
        assert_eq!(c.status, "False", "one key still holds the Pod");
        assert_eq!(
            c.last_transition_time,
            Some(Time(t(3))),
            "every list change rewrites the time"
        );
        let p = with_condition(p, c);
        assert_eq!(not_ready_keys(&p), lifecycle_entries(&["preUpdateHook"]));

        let c = condition_with_key(&p, PRE_UPDATE_HOOK_KEY, false, t(4)).unwrap();
        assert_eq!(c.status, "True");
        assert_eq!(c.message.as_deref(), Some("[]"));
    }

    #[test]
    fn other_user_agents_are_kept_and_sorted_first_by_user_agent() {
        let crr = NotReadyKey {
            user_agent: "ContainerRecreateRequest".into(),
            key: "crr-1".into(),
        };
        let p = gated(pod());
        let p = with_condition(
            p.clone(),
            condition_with_entry(&p, &crr, true, t(1)).unwrap(),
        );
        let p = with_condition(
            p.clone(),
            condition_with_key(&p, PRE_DELETE_HOOK_KEY, true, t(2)).unwrap(),
        );
        assert_eq!(
            not_ready_keys(&p),
            vec![crr.clone(), NotReadyKey::lifecycle(PRE_DELETE_HOOK_KEY)]
        );
        let c = condition_with_key(&p, PRE_DELETE_HOOK_KEY, false, t(3)).unwrap();
        assert_eq!(c.status, "False", "the CRR entry still holds the Pod");
        assert_eq!(
            c.message.as_deref(),
            Some(r#"[{"userAgent":"ContainerRecreateRequest","key":"crr-1"}]"#)
        );
    }

    #[test]
    fn adding_a_listed_key_to_a_true_condition_makes_it_false() {
        let mut c = condition_with_key(&gated(pod()), PRE_DELETE_HOOK_KEY, true, t(1)).unwrap();
        c.status = "True".into();
        let p = with_condition(gated(pod()), c);
        let fixed = condition_with_key(&p, PRE_DELETE_HOOK_KEY, true, t(2)).unwrap();
        assert_eq!(fixed.status, "False");
    }

    #[test]
    fn garbage_message_reads_as_empty_and_is_replaced() {
        let p = with_condition(
            gated(pod()),
            PodCondition {
                type_: "KruisePodReady".into(),
                status: "True".into(),
                message: Some("not json".into()),
                reason: Some("Kept".into()),
                ..Default::default()
            },
        );
        assert!(not_ready_keys(&p).is_empty());
        let c = condition_with_key(&p, PRE_DELETE_HOOK_KEY, true, t(1)).unwrap();
        assert_eq!(
            not_ready_keys(&with_condition(p, c.clone())),
            lifecycle_entries(&["preDeleteHook"])
        );
        assert_eq!(
            c.reason.as_deref(),
            Some("Kept"),
            "unrelated fields are kept"
        );
    }

    #[test]
    fn adding_forces_ready_false_when_containers_are_ready() {
        let p = running_ready(gated(pod()));
        let patch = not_ready_status_patch(&p, PRE_DELETE_HOOK_KEY, true, t(9)).unwrap();
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0]["type"], "KruisePodReady");
        assert_eq!(conditions[0]["status"], "False");
        assert_eq!(conditions[1]["type"], "Ready");
        assert_eq!(conditions[1]["status"], "False");
        assert_eq!(conditions[1]["reason"], "ReadinessGatesNotReady");
        assert_eq!(
            conditions[1]["message"],
            r#"the status of pod readiness gate "KruisePodReady" is not "True", but False"#
        );
    }

    #[test]
    fn ready_untouched_without_containers_ready() {
        let p = gated(pod());
        let patch = not_ready_status_patch(&p, PRE_DELETE_HOOK_KEY, true, t(9)).unwrap();
        assert_eq!(patch["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn removing_the_last_key_restores_ready_when_every_gate_is_true() {
        let p = running_ready(gated(pod()));
        let p = apply_status_patch(
            &p,
            &not_ready_status_patch(&p, PRE_UPDATE_HOOK_KEY, true, t(1)).unwrap(),
        );
        let patch = not_ready_status_patch(&p, PRE_UPDATE_HOOK_KEY, false, t(2)).unwrap();
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[1]["type"], "Ready");
        assert_eq!(conditions[1]["status"], "True");
        assert!(conditions[1].get("reason").is_none());
    }

    #[test]
    fn another_false_gate_keeps_ready_false() {
        let p = running_ready(gated(pod()));
        let p = with_gate(p, "InPlaceUpdateReady");
        let p = with_condition(
            p,
            PodCondition {
                type_: "InPlaceUpdateReady".into(),
                status: "False".into(),
                ..Default::default()
            },
        );
        let p = with_condition(
            p,
            PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            },
        );
        let p = apply_status_patch(
            &p,
            &not_ready_status_patch(&p, PRE_UPDATE_HOOK_KEY, true, t(1)).unwrap(),
        );
        let patch = not_ready_status_patch(&p, PRE_UPDATE_HOOK_KEY, false, t(2)).unwrap();
        assert_eq!(patch["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
