//! Moving a Pod into a lifecycle state: the writes that carry the move.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleState};
use kruise_api::keys;
use kruise_api::pod::Pod;
use serde_json::{Map, Value, json};

use crate::hooks::{has_finalizer, has_label, state};
use crate::readiness::{
    NotReadyKey, PRE_DELETE_HOOK_KEY, PRE_UPDATE_HOOK_KEY, apply_entry, has_kruise_pod_ready_gate,
    kruise_pod_ready_condition, status_patch_with_ready,
};

/// What to write to move a Pod into `to`.
///
/// Apply `status_patch` first (strategic merge on the `status` subresource), then
/// `metadata_patch` (JSON merge patch on the Pod), as upstream does: the Pod is already
/// NotReady when hook controllers see it enter `PreparingDelete`/`PreparingUpdate`. If
/// the status write fails, skip the metadata one; calling [`transition`] again next round
/// yields the same writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub to: LifecycleState,
    /// `{"metadata":{"labels":{"lifecycle.apps.kruise.io/state":…},"annotations":{"lifecycle.apps.kruise.io/timestamp":…}}}`,
    /// plus, when leaving `Updated` for `PreparingUpdate`, the `inPlaceUpdate` hook's
    /// labels and the full finalizer list (with `resourceVersion` as a precondition, since
    /// a merge patch replaces the whole list). An empty object `{}` when the Pod is
    /// already in `to` and only the status needs writing
    /// (see [`Transition::changes_metadata`]).
    pub metadata_patch: Value,
    /// `{"status":{"conditions":[…]}}`: the `KruisePodReady` condition (markPodNotReady)
    /// and, when it flips, `Ready`.
    pub status_patch: Option<Value>,
}

impl Transition {
    /// Whether `metadata_patch` writes anything (it is `{}` when the Pod already had the
    /// target state and only `status_patch` is needed).
    pub fn changes_metadata(&self) -> bool {
        self.metadata_patch
            .as_object()
            .is_some_and(|m| !m.is_empty())
    }

    /// The Pod as it reads once both patches are applied (for plans that look ahead,
    /// and for tests).
    pub fn apply_to(&self, pod: &Pod) -> Pod {
        let mut value = serde_json::to_value(pod).unwrap_or(Value::Null);
        merge_patch(&mut value, &self.metadata_patch);
        if let Some(status) = &self.status_patch {
            merge_conditions_by_type(&mut value, status);
        }
        serde_json::from_value(value).unwrap_or_else(|_| pod.clone())
    }
}

/// What to write to move `pod` into `to`; `None` when the Pod is already in `to` and its
/// `KruisePodReady` condition already says what `to` needs.
///
/// Every state change writes the state label and a fresh
/// `lifecycle.apps.kruise.io/timestamp` (RFC 3339, UTC, seconds). markPodNotReady, only
/// on Pods with the `KruisePodReady` readiness gate:
/// - entering `PreparingDelete` adds `preDeleteHook` when `preDelete.markPodNotReady`;
/// - entering `PreparingUpdate` adds `preUpdateHook` when `inPlaceUpdate.markPodNotReady`;
/// - entering `Updated` removes `preUpdateHook` (condition `True` once the list empties).
///
/// Beyond upstream, which only removes on `Updated` and only while the flag is set:
/// - entering `Normal` removes `preUpdateHook` too (a Pod that goes `Updating`/`PreparingUpdate`
///   → `Normal` directly, skipping `Updated`, would otherwise stay NotReady for good);
/// - entering `Normal`/`PreparingNormal` removes `preDeleteHook` (a cancelled deletion);
/// - removals happen whether or not the flag is still set, so turning `markPodNotReady`
///   off mid-flight cannot strand a Pod NotReady. Only the `Lifecycle` user agent's
///   entries are touched.
///
/// The add is re-sent while the Pod stays in the state (as upstream re-runs its
/// not-ready policy before checking the label), so a status write lost earlier heals.
pub fn transition(
    pod: &Pod,
    to: LifecycleState,
    lifecycle: Option<&Lifecycle>,
    now: jiff::Timestamp,
) -> Option<Transition> {
    let status_patch = readiness_patch(pod, to, lifecycle, now);
    let metadata_patch = (state(pod) != Some(to)).then(|| metadata_patch(pod, to, lifecycle, now));
    if status_patch.is_none() && metadata_patch.is_none() {
        return None;
    }
    Some(Transition {
        to,
        metadata_patch: metadata_patch.unwrap_or_else(|| json!({})),
        status_patch,
    })
}

/// Sets the state label and timestamp annotation on a Pod being built (upstream
/// `SetPodLifecycle`), e.g. `PreparingNormal` on every Pod a CloneSet creates.
pub fn set_state(
    pod: &mut impl k8s_openapi::Metadata<Ty = ObjectMeta>,
    to: LifecycleState,
    now: jiff::Timestamp,
) {
    let meta = pod.metadata_mut();
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(keys::LIFECYCLE_STATE.to_owned(), to.as_str().to_owned());
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(keys::LIFECYCLE_TIMESTAMP.to_owned(), format_timestamp(now));
}

/// RFC 3339 in UTC with whole seconds, e.g. `2024-05-01T12:00:00Z`.
pub fn format_timestamp(now: jiff::Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn metadata_patch(
    pod: &Pod,
    to: LifecycleState,
    lifecycle: Option<&Lifecycle>,
    now: jiff::Timestamp,
) -> Value {
    let mut labels = Map::new();
    labels.insert(keys::LIFECYCLE_STATE.to_owned(), json!(to.as_str()));
    let mut metadata = Map::new();

    // A further update of an `Updated` Pod hands it back to the hook's controller, so the
    // hook's labels/finalizers are put back (upstream `UpdatePodLifecycleWithHandler`).
    let re_add_hook =
        state(pod) == Some(LifecycleState::Updated) && to == LifecycleState::PreparingUpdate;
    if let Some(hook) = lifecycle
        .and_then(|l| l.in_place_update.as_ref())
        .filter(|_| re_add_hook)
    {
        for (key, value) in missing_labels(pod, hook) {
            labels.insert(key.clone(), json!(value));
        }
        if let Some(finalizers) = finalizers_with_hook(pod, hook) {
            metadata.insert("finalizers".to_owned(), json!(finalizers));
            // A merge patch replaces the whole list: fail on conflict rather than drop a
            // finalizer someone else added meanwhile.
            if let Some(rv) = &pod.metadata.resource_version {
                metadata.insert("resourceVersion".to_owned(), json!(rv));
            }
        }
    }

    metadata.insert("labels".to_owned(), Value::Object(labels));
    metadata.insert(
        "annotations".to_owned(),
        json!({ keys::LIFECYCLE_TIMESTAMP: format_timestamp(now) }),
    );
    json!({ "metadata": metadata })
}

fn missing_labels<'h>(
    pod: &Pod,
    hook: &'h LifecycleHook,
) -> impl Iterator<Item = (&'h String, &'h String)> {
    hook.labels_handler
        .iter()
        .filter(move |(key, value)| !has_label(pod, key, value))
}

/// The Pod's finalizers with the hook's missing ones appended, or `None` if none is missing.
fn finalizers_with_hook(pod: &Pod, hook: &LifecycleHook) -> Option<Vec<String>> {
    let mut missing: Vec<&String> = hook
        .finalizers_handler
        .iter()
        .filter(|f| !has_finalizer(pod, f))
        .collect();
    missing.dedup();
    if missing.is_empty() {
        return None;
    }
    let existing = pod.metadata.finalizers.iter().flatten().cloned();
    Some(existing.chain(missing.into_iter().cloned()).collect())
}

/// The lifecycle entries entering `to` adds (`true`) or removes (`false`).
fn readiness_changes(
    to: LifecycleState,
    lifecycle: Option<&Lifecycle>,
) -> Vec<(&'static str, bool)> {
    let marks = |hook: Option<&LifecycleHook>| hook.is_some_and(|h| h.mark_pod_not_ready);
    let pre_delete = lifecycle.and_then(|l| l.pre_delete.as_ref());
    let in_place_update = lifecycle.and_then(|l| l.in_place_update.as_ref());
    match to {
        LifecycleState::PreparingDelete if marks(pre_delete) => vec![(PRE_DELETE_HOOK_KEY, true)],
        LifecycleState::PreparingUpdate if marks(in_place_update) => {
            vec![(PRE_UPDATE_HOOK_KEY, true)]
        }
        LifecycleState::Updated => vec![(PRE_UPDATE_HOOK_KEY, false)],
        LifecycleState::Normal => vec![(PRE_UPDATE_HOOK_KEY, false), (PRE_DELETE_HOOK_KEY, false)],
        LifecycleState::PreparingNormal => vec![(PRE_DELETE_HOOK_KEY, false)],
        _ => Vec::new(),
    }
}

fn readiness_patch(
    pod: &Pod,
    to: LifecycleState,
    lifecycle: Option<&Lifecycle>,
    now: jiff::Timestamp,
) -> Option<Value> {
    if !has_kruise_pod_ready_gate(pod) {
        return None;
    }
    let current = kruise_pod_ready_condition(pod).cloned();
    let changed: Option<PodCondition> =
        readiness_changes(to, lifecycle)
            .into_iter()
            .fold(None, |changed, (key, add)| {
                let base = changed.as_ref().or(current.as_ref());
                apply_entry(base, &NotReadyKey::lifecycle(key), add, now).or(changed)
            });
    changed.map(|condition| status_patch_with_ready(pod, condition, now))
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// The part of a strategic merge we emit: `status.conditions` merged by `type`.
fn merge_conditions_by_type(pod: &mut Value, status_patch: &Value) {
    let Some(patch_conditions) = status_patch["status"]["conditions"].as_array() else {
        return;
    };
    let Some(pod) = pod.as_object_mut() else {
        return;
    };
    let status = pod.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(conditions) = conditions.as_array_mut() else {
        return;
    };
    for patch_condition in patch_conditions {
        match conditions
            .iter_mut()
            .find(|c| c["type"] == patch_condition["type"])
        {
            Some(existing) => merge_patch(existing, patch_condition),
            None => conditions.push(patch_condition.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readiness::not_ready_keys;
    use crate::test_support::*;
    use LifecycleState::*;

    fn mark(hook: LifecycleHook) -> LifecycleHook {
        LifecycleHook {
            mark_pod_not_ready: true,
            ..hook
        }
    }

    fn marking_lifecycle() -> Lifecycle {
        Lifecycle {
            pre_delete: Some(mark(finalizer_hook(&["a.io/x"]))),
            in_place_update: Some(mark(finalizer_hook(&["a.io/x"]))),
            pre_normal: None,
        }
    }

    fn condition_status(p: &Pod) -> Option<String> {
        kruise_pod_ready_condition(p).map(|c| c.status.clone())
    }

    #[test]
    fn metadata_patch_carries_state_and_timestamp() {
        let tr = transition(&pod_in(Normal), PreparingDelete, None, t(1_700_000_000)).unwrap();
        assert_eq!(tr.to, PreparingDelete);
        assert_eq!(
            tr.metadata_patch,
            json!({"metadata": {
                "labels": {"lifecycle.apps.kruise.io/state": "PreparingDelete"},
                "annotations": {"lifecycle.apps.kruise.io/timestamp": "2023-11-14T22:13:20Z"},
            }})
        );
        assert!(tr.changes_metadata());
        assert_eq!(tr.status_patch, None);
    }

    #[test]
    fn every_change_rewrites_the_timestamp() {
        let mut p = pod();
        let mut now = 100;
        for to in [
            PreparingNormal,
            Normal,
            PreparingUpdate,
            Updating,
            Updated,
            Normal,
            PreparingDelete,
        ] {
            now += 7;
            let tr = transition(&p, to, None, t(now)).unwrap();
            p = tr.apply_to(&p);
            assert_eq!(state(&p), Some(to));
            assert_eq!(
                annotation(&p, keys::LIFECYCLE_TIMESTAMP),
                Some(format_timestamp(t(now)))
            );
        }
    }

    #[test]
    fn no_op_when_already_in_the_target_state() {
        let lc = marking_lifecycle();
        for s in LifecycleState::ALL {
            assert_eq!(transition(&pod_in(s), s, None, t(1)), None, "{s}");
            assert_eq!(transition(&gated(pod_in(s)), s, None, t(1)), None, "{s}");
            // With markPodNotReady the two holding states still owe their condition.
            let owed = transition(&gated(pod_in(s)), s, Some(&lc), t(1));
            match s {
                PreparingDelete | PreparingUpdate => {
                    let owed = owed.expect("condition still to write");
                    assert!(!owed.changes_metadata(), "{s}");
                    assert!(owed.status_patch.is_some(), "{s}");
                }
                _ => assert_eq!(owed, None, "{s}"),
            }
        }
    }

    #[test]
    fn already_in_state_with_condition_written_is_a_full_no_op() {
        let lc = marking_lifecycle();
        let p = gated(pod_in(Normal));
        let p = transition(&p, PreparingDelete, Some(&lc), t(1))
            .unwrap()
            .apply_to(&p);
        assert_eq!(transition(&p, PreparingDelete, Some(&lc), t(2)), None);
    }

    #[test]
    fn status_write_is_retried_while_in_state() {
        // The label got written but the status patch was lost.
        let lc = marking_lifecycle();
        let p = gated(pod_in(PreparingUpdate));
        let tr = transition(&p, PreparingUpdate, Some(&lc), t(1)).unwrap();
        assert!(!tr.changes_metadata());
        assert_eq!(tr.metadata_patch, json!({}));
        let p = tr.apply_to(&p);
        assert_eq!(
            not_ready_keys(&p),
            vec![NotReadyKey::lifecycle(PRE_UPDATE_HOOK_KEY)]
        );
    }

    #[test]
    fn preparing_delete_marks_not_ready_with_pre_delete_flag_only() {
        let p = gated(pod_in(Normal));
        let in_place_marks = Lifecycle {
            pre_delete: Some(finalizer_hook(&["a.io/x"])),
            in_place_update: Some(mark(finalizer_hook(&["a.io/x"]))),
            ..Default::default()
        };
        assert_eq!(
            transition(&p, PreparingDelete, Some(&in_place_marks), t(1))
                .unwrap()
                .status_patch,
            None
        );

        let tr = transition(&p, PreparingDelete, Some(&marking_lifecycle()), t(1)).unwrap();
        let p = tr.apply_to(&p);
        assert_eq!(
            not_ready_keys(&p),
            vec![NotReadyKey::lifecycle(PRE_DELETE_HOOK_KEY)]
        );
        assert_eq!(condition_status(&p).as_deref(), Some("False"));
    }

    #[test]
    fn preparing_update_marks_not_ready_with_in_place_flag_only() {
        let p = gated(pod_in(Normal));
        let pre_delete_marks = Lifecycle {
            pre_delete: Some(mark(finalizer_hook(&["a.io/x"]))),
            in_place_update: Some(finalizer_hook(&["a.io/x"])),
            ..Default::default()
        };
        assert_eq!(
            transition(&p, PreparingUpdate, Some(&pre_delete_marks), t(1))
                .unwrap()
                .status_patch,
            None
        );

        let p = transition(&p, PreparingUpdate, Some(&marking_lifecycle()), t(1))
            .unwrap()
            .apply_to(&p);
        assert_eq!(
            not_ready_keys(&p),
            vec![NotReadyKey::lifecycle(PRE_UPDATE_HOOK_KEY)]
        );
    }

    #[test]
    fn no_gate_no_status_patch() {
        let tr = transition(
            &pod_in(Normal),
            PreparingDelete,
            Some(&marking_lifecycle()),
            t(1),
        )
        .unwrap();
        assert_eq!(tr.status_patch, None);
    }

    #[test]
    fn in_place_cycle_with_mark_pod_not_ready() {
        let lc = marking_lifecycle();
        let p = running_ready(gated(pod_in(Normal)));

        let tr = transition(&p, PreparingUpdate, Some(&lc), t(1)).unwrap();
        let p = tr.apply_to(&p);
        assert_eq!(condition_status(&p).as_deref(), Some("False"));
        assert_eq!(pod_condition_status(&p, "Ready").as_deref(), Some("False"));

        // Updating keeps the Pod NotReady.
        let tr = transition(&p, Updating, Some(&lc), t(2)).unwrap();
        assert_eq!(tr.status_patch, None);
        let p = tr.apply_to(&p);

        let tr = transition(&p, Updated, Some(&lc), t(3)).unwrap();
        let p = tr.apply_to(&p);
        assert!(not_ready_keys(&p).is_empty());
        assert_eq!(condition_status(&p).as_deref(), Some("True"));
        assert_eq!(
            kruise_pod_ready_condition(&p).unwrap().message.as_deref(),
            Some("[]")
        );
        assert_eq!(pod_condition_status(&p, "Ready").as_deref(), Some("True"));
    }

    #[test]
    fn updating_straight_to_normal_also_clears_the_update_key() {
        let lc = marking_lifecycle();
        let p = gated(pod_in(Normal));
        let p = transition(&p, PreparingUpdate, Some(&lc), t(1))
            .unwrap()
            .apply_to(&p);
        let p = transition(&p, Updating, Some(&lc), t(2))
            .unwrap()
            .apply_to(&p);
        let p = transition(&p, Normal, Some(&lc), t(3))
            .unwrap()
            .apply_to(&p);
        assert!(not_ready_keys(&p).is_empty());
        assert_eq!(condition_status(&p).as_deref(), Some("True"));
    }

    #[test]
    fn removal_happens_even_after_the_flag_is_turned_off() {
        let p = gated(pod_in(Normal));
        let p = transition(&p, PreparingUpdate, Some(&marking_lifecycle()), t(1))
            .unwrap()
            .apply_to(&p);
        let p = transition(&p, Updated, None, t(2)).unwrap().apply_to(&p);
        assert!(not_ready_keys(&p).is_empty());
    }

    #[test]
    fn cancelled_deletion_clears_the_delete_key() {
        let p = gated(pod_in(Normal));
        let p = transition(&p, PreparingDelete, Some(&marking_lifecycle()), t(1))
            .unwrap()
            .apply_to(&p);
        let tr = transition(&p, PreparingNormal, None, t(2)).unwrap();
        let p = tr.apply_to(&p);
        assert!(not_ready_keys(&p).is_empty());
        assert_eq!(state(&p), Some(PreparingNormal));
    }

    #[test]
    fn normal_removes_both_keys_in_one_write() {
        let lc = marking_lifecycle();
        let p = gated(pod_in(Normal));
        let p = transition(&p, PreparingUpdate, Some(&lc), t(1))
            .unwrap()
            .apply_to(&p);
        let p = transition(&p, PreparingDelete, Some(&lc), t(2))
            .unwrap()
            .apply_to(&p);
        assert_eq!(not_ready_keys(&p).len(), 2);
        let tr = transition(&p, Normal, Some(&lc), t(3)).unwrap();
        let conditions = tr.status_patch.as_ref().unwrap()["status"]["conditions"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(conditions.len(), 1);
        let p = tr.apply_to(&p);
        assert!(not_ready_keys(&p).is_empty());
        assert_eq!(condition_status(&p).as_deref(), Some("True"));
    }

    #[test]
    fn updated_to_preparing_update_re_adds_hook_labels_and_finalizers() {
        let mut hook = finalizer_hook(&["a.io/x", "a.io/y"]);
        hook.labels_handler
            .insert("a.io/block".into(), "true".into());
        let lc = Lifecycle {
            in_place_update: Some(hook),
            ..Default::default()
        };
        let mut p = with_finalizer(with_finalizer(pod_in(Updated), "other.io/keep"), "a.io/y");
        p.metadata.resource_version = Some("42".into());
        let tr = transition(&p, PreparingUpdate, Some(&lc), t(1)).unwrap();
        let meta = &tr.metadata_patch["metadata"];
        assert_eq!(meta["labels"]["a.io/block"], "true");
        assert_eq!(
            meta["finalizers"],
            json!(["other.io/keep", "a.io/y", "a.io/x"])
        );
        assert_eq!(meta["resourceVersion"], "42");
        let after = tr.apply_to(&p);
        assert!(crate::is_all_hooked(&after, lc.in_place_update.as_ref()));
        assert_eq!(state(&after), Some(PreparingUpdate));
    }

    #[test]
    fn re_add_writes_no_finalizers_when_none_is_missing() {
        let lc = Lifecycle {
            in_place_update: Some(label_hook(&[("a.io/block", "true")])),
            ..Default::default()
        };
        let tr = transition(&pod_in(Updated), PreparingUpdate, Some(&lc), t(1)).unwrap();
        let meta = tr.metadata_patch["metadata"].as_object().unwrap();
        assert!(!meta.contains_key("finalizers"));
        assert!(!meta.contains_key("resourceVersion"));
        assert_eq!(meta["labels"]["a.io/block"], "true");
    }

    #[test]
    fn entering_preparing_update_from_normal_adds_no_hook_handlers() {
        let lc = Lifecycle {
            in_place_update: Some(finalizer_hook(&["a.io/x", "a.io/y"])),
            ..Default::default()
        };
        let p = with_finalizer(pod_in(Normal), "a.io/x");
        let tr = transition(&p, PreparingUpdate, Some(&lc), t(1)).unwrap();
        assert!(
            !tr.metadata_patch["metadata"]
                .as_object()
                .unwrap()
                .contains_key("finalizers")
        );
    }

    #[test]
    fn set_state_stamps_a_new_pod() {
        let mut p = pod();
        set_state(&mut p, PreparingNormal, t(0));
        assert_eq!(state(&p), Some(PreparingNormal));
        assert_eq!(
            annotation(&p, keys::LIFECYCLE_TIMESTAMP).as_deref(),
            Some("1970-01-01T00:00:00Z")
        );
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut target = json!({"a": {"b": 1, "c": 2}, "d": [1, 2]});
        merge_patch(&mut target, &json!({"a": {"b": null, "e": 3}, "d": [3]}));
        assert_eq!(target, json!({"a": {"c": 2, "e": 3}, "d": [3]}));
    }
}
