//! Reading a Pod's lifecycle state and whether a hook holds it.

use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleState};
use kruise_api::pod::PodView;

/// The Pod's lifecycle state from label `lifecycle.apps.kruise.io/state`.
///
/// `None` when the label is missing *or* holds a value that is not a known state; use
/// [`has_unknown_state`] to tell the two apart.
pub fn state<P: PodView>(pod: &P) -> Option<LifecycleState> {
    kruise_ordering::predicates::lifecycle_state(pod)
}

/// Whether the state label is present but holds no known state (e.g. written by a newer
/// controller). Upstream refuses to update such a Pod in place.
pub fn has_unknown_state<P: PodView>(pod: &P) -> bool {
    kruise_ordering::predicates::lifecycle_state_label(pod)
        .is_some_and(|value| !value.is_empty() && LifecycleState::parse(value).is_none())
}

/// Hooked = any handler finalizer present on the Pod, or any handler label present with
/// the same value. A missing hook holds nothing (`false`), as upstream `IsPodHooked`.
///
/// A handler label with an empty value only matches a Pod that carries the label with
/// an empty value. Upstream compares `pod.Labels[k] == v` on a Go map, where a missing
/// label reads as `""`; we follow Kubernetes label-selector semantics instead (a missing
/// label never equals anything), so an empty-valued handler cannot hold every Pod.
pub fn is_hooked<P: PodView>(pod: &P, hook: Option<&LifecycleHook>) -> bool {
    let Some(hook) = hook else {
        return false;
    };
    hook.finalizers_handler
        .iter()
        .any(|f| has_finalizer(pod, f))
        || hook
            .labels_handler
            .iter()
            .any(|(key, value)| has_label(pod, key, value))
}

/// All hooked = every handler finalizer present and every handler label equal.
///
/// A missing hook gives `false`, as upstream `IsPodAllHooked`; a hook with no handlers
/// at all is vacuously all-hooked (`true`), also as upstream. Labels compare as in
/// [`is_hooked`] (a missing label never matches).
pub fn is_all_hooked<P: PodView>(pod: &P, hook: Option<&LifecycleHook>) -> bool {
    let Some(hook) = hook else {
        return false;
    };
    hook.finalizers_handler
        .iter()
        .all(|f| has_finalizer(pod, f))
        && hook
            .labels_handler
            .iter()
            .all(|(key, value)| has_label(pod, key, value))
}

/// Whether deleting this Pod must stop at `PreparingDelete` (as `deletePods` in openkruise/kruise
/// v1.9.0 pkg/controller/cloneset/sync/cloneset_scale.go): a `preDelete` hook is configured and
/// still holds the Pod. Once the user drops the hook's labels/finalizers this turns `false` and the
/// Pod may be deleted.
pub fn pre_delete_holds<P: PodView>(pod: &P, lifecycle: Option<&Lifecycle>) -> bool {
    is_hooked(pod, lifecycle.and_then(|l| l.pre_delete.as_ref()))
}

/// Whether an in-place update of this Pod must first pass through `PreparingUpdate`
/// (or keep waiting there): the `inPlaceUpdate` hook holds the Pod.
pub fn in_place_update_holds<P: PodView>(pod: &P, lifecycle: Option<&Lifecycle>) -> bool {
    is_hooked(pod, lifecycle.and_then(|l| l.in_place_update.as_ref()))
}

/// Whether a `PreparingDelete` Pod may be returned to service when replicas grow
/// (`managePreparingDelete` in openkruise/kruise v1.9.0
/// pkg/controller/cloneset/sync/cloneset_scale.go; `markPodNotReady` came with OpenKruise v1.2, see
/// its release notes): never once either hook has `markPodNotReady`, because the Pod was forced
/// NotReady and hook controllers already drained it.
pub fn can_cancel_deletion(lifecycle: Option<&Lifecycle>) -> bool {
    let marks = |hook: &Option<LifecycleHook>| hook.as_ref().is_some_and(|h| h.mark_pod_not_ready);
    !lifecycle.is_some_and(|l| marks(&l.pre_delete) || marks(&l.in_place_update))
}

/// Whether the `preNormal` hook lets a new Pod be `Normal` right away: no hook, or the Pod is
/// already all-hooked. Advanced StatefulSet uses this to pick the state of a Pod it creates (as
/// `processReplica` in openkruise/kruise v1.9.0
/// pkg/controller/statefulset/stateful_set_control.go); CloneSet always creates Pods
/// `PreparingNormal`.
pub fn pre_normal_satisfied<P: PodView>(pod: &P, lifecycle: Option<&Lifecycle>) -> bool {
    match lifecycle.and_then(|l| l.pre_normal.as_ref()) {
        None => true,
        Some(hook) => is_all_hooked(pod, Some(hook)),
    }
}

/// What the `inPlaceUpdate` hook says about updating this Pod in place now
/// (the state switch in front of every in-place update, shared by CloneSet and
/// Advanced StatefulSet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InPlaceUpdateGate {
    /// Move the Pod to `PreparingUpdate` (via [`crate::transition`]) and update it in a
    /// later round. From `Updated` the transition also re-adds the hook's
    /// labels/finalizers.
    EnterPreparingUpdate,
    /// The hook still holds the `PreparingUpdate` Pod: leave it alone this round.
    Wait,
    /// Update now; the in-place patch also sets state `Updating`.
    Proceed,
    /// The Pod's state forbids an in-place update (`PreparingDelete`, or an unknown
    /// state value). Upstream reports `not allowed to in-place update pod <name> in state <state>`.
    NotAllowed,
}

/// The gate in front of an in-place update (upstream `updatePod` state switch).
///
/// `Updated` with no `inPlaceUpdate` hook proceeds directly; upstream would no-op here
/// and wait for the next refresh to move the Pod to `Normal` first, which ends the
/// same way one round later.
pub fn in_place_update_gate<P: PodView>(
    pod: &P,
    lifecycle: Option<&Lifecycle>,
) -> InPlaceUpdateGate {
    if has_unknown_state(pod) {
        return InPlaceUpdateGate::NotAllowed;
    }
    let hook = lifecycle.and_then(|l| l.in_place_update.as_ref());
    match state(pod) {
        None | Some(LifecycleState::PreparingNormal) | Some(LifecycleState::Normal) => {
            if is_hooked(pod, hook) {
                InPlaceUpdateGate::EnterPreparingUpdate
            } else {
                InPlaceUpdateGate::Proceed
            }
        }
        Some(LifecycleState::Updated) => {
            if hook.is_some() {
                InPlaceUpdateGate::EnterPreparingUpdate
            } else {
                InPlaceUpdateGate::Proceed
            }
        }
        Some(LifecycleState::PreparingUpdate) => {
            if is_hooked(pod, hook) {
                InPlaceUpdateGate::Wait
            } else {
                InPlaceUpdateGate::Proceed
            }
        }
        Some(LifecycleState::Updating) => InPlaceUpdateGate::Proceed,
        Some(LifecycleState::PreparingDelete) => InPlaceUpdateGate::NotAllowed,
    }
}

pub(crate) fn has_finalizer<P: PodView>(pod: &P, finalizer: &str) -> bool {
    pod.meta()
        .finalizers
        .as_ref()
        .is_some_and(|fs| fs.iter().any(|f| f == finalizer))
}

pub(crate) fn has_label<P: PodView>(pod: &P, key: &str, value: &str) -> bool {
    pod.meta()
        .labels
        .as_ref()
        .and_then(|labels| labels.get(key))
        .is_some_and(|v| v == value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use kruise_api::keys;

    #[test]
    fn state_reads_the_label() {
        assert_eq!(state(&pod()), None);
        for s in LifecycleState::ALL {
            assert_eq!(state(&pod_in(s)), Some(s));
        }
    }

    #[test]
    fn unknown_state_value_reads_as_none_but_is_flagged() {
        let p = with_label(pod(), keys::LIFECYCLE_STATE, "Bogus");
        assert_eq!(state(&p), None);
        assert!(has_unknown_state(&p));
        assert!(!has_unknown_state(&pod()));
        assert!(!has_unknown_state(&pod_in(LifecycleState::Normal)));
    }

    #[test]
    fn missing_hook_is_neither_hooked_nor_all_hooked() {
        let p = with_finalizer(pod(), "example.io/blocker");
        assert!(!is_hooked(&p, None));
        assert!(!is_all_hooked(&p, None));
    }

    #[test]
    fn empty_hook_is_all_hooked_but_not_hooked() {
        let h = LifecycleHook::default();
        assert!(!is_hooked(&pod(), Some(&h)));
        assert!(is_all_hooked(&pod(), Some(&h)));
    }

    #[test]
    fn finalizer_handlers() {
        let h = finalizer_hook(&["a.io/x", "a.io/y"]);
        let none = pod();
        let one = with_finalizer(pod(), "a.io/x");
        let both = with_finalizer(with_finalizer(pod(), "a.io/x"), "a.io/y");
        assert!(!is_hooked(&none, Some(&h)));
        assert!(is_hooked(&one, Some(&h)));
        assert!(!is_all_hooked(&one, Some(&h)));
        assert!(is_hooked(&both, Some(&h)));
        assert!(is_all_hooked(&both, Some(&h)));
    }

    #[test]
    fn label_handlers_need_equal_value() {
        let h = label_hook(&[("a.io/block", "true"), ("a.io/other", "yes")]);
        let wrong_value = with_label(pod(), "a.io/block", "false");
        let one = with_label(pod(), "a.io/block", "true");
        let both = with_label(one.clone(), "a.io/other", "yes");
        assert!(!is_hooked(&wrong_value, Some(&h)));
        assert!(is_hooked(&one, Some(&h)));
        assert!(!is_all_hooked(&one, Some(&h)));
        assert!(is_all_hooked(&both, Some(&h)));
    }

    #[test]
    fn empty_valued_label_handler_does_not_match_a_missing_label() {
        let h = label_hook(&[("a.io/block", "")]);
        assert!(!is_hooked(&pod(), Some(&h)));
        assert!(!is_all_hooked(&pod(), Some(&h)));
        let p = with_label(pod(), "a.io/block", "");
        assert!(is_hooked(&p, Some(&h)));
        assert!(is_all_hooked(&p, Some(&h)));
    }

    #[test]
    fn mixed_label_and_finalizer_hook() {
        let mut h = finalizer_hook(&["a.io/x"]);
        h.labels_handler.insert("a.io/l".into(), "v".into());
        let only_label = with_label(pod(), "a.io/l", "v");
        let only_finalizer = with_finalizer(pod(), "a.io/x");
        let both = with_finalizer(only_label.clone(), "a.io/x");
        assert!(is_hooked(&only_label, Some(&h)));
        assert!(is_hooked(&only_finalizer, Some(&h)));
        assert!(!is_all_hooked(&only_label, Some(&h)));
        assert!(!is_all_hooked(&only_finalizer, Some(&h)));
        assert!(is_all_hooked(&both, Some(&h)));
    }

    #[test]
    fn pre_delete_holds_only_with_a_matching_pre_delete_hook() {
        let p = with_finalizer(pod(), "a.io/x");
        assert!(!pre_delete_holds(&p, None));
        assert!(!pre_delete_holds(&p, Some(&Lifecycle::default())));
        let in_place_only = Lifecycle {
            in_place_update: Some(finalizer_hook(&["a.io/x"])),
            ..Default::default()
        };
        assert!(!pre_delete_holds(&p, Some(&in_place_only)));
        let pre_delete = Lifecycle {
            pre_delete: Some(finalizer_hook(&["a.io/x"])),
            ..Default::default()
        };
        assert!(pre_delete_holds(&p, Some(&pre_delete)));
        assert!(!pre_delete_holds(&pod(), Some(&pre_delete)));
    }

    #[test]
    fn cancel_deletion_forbidden_by_either_mark_pod_not_ready() {
        assert!(can_cancel_deletion(None));
        assert!(can_cancel_deletion(Some(&Lifecycle::default())));
        let plain = Lifecycle {
            pre_delete: Some(finalizer_hook(&["a.io/x"])),
            in_place_update: Some(finalizer_hook(&["a.io/x"])),
            ..Default::default()
        };
        assert!(can_cancel_deletion(Some(&plain)));
        let mut pre_delete_marks = plain.clone();
        pre_delete_marks
            .pre_delete
            .as_mut()
            .unwrap()
            .mark_pod_not_ready = true;
        assert!(!can_cancel_deletion(Some(&pre_delete_marks)));
        let mut in_place_marks = plain.clone();
        in_place_marks
            .in_place_update
            .as_mut()
            .unwrap()
            .mark_pod_not_ready = true;
        assert!(!can_cancel_deletion(Some(&in_place_marks)));
        // preNormal's flag has no meaning (no state it forces NotReady).
        let mut pre_normal_marks = plain;
        pre_normal_marks.pre_normal = Some(LifecycleHook {
            mark_pod_not_ready: true,
            ..Default::default()
        });
        assert!(can_cancel_deletion(Some(&pre_normal_marks)));
    }

    #[test]
    fn pre_normal_satisfied_without_hook_or_when_all_hooked() {
        assert!(pre_normal_satisfied(&pod(), None));
        let lc = Lifecycle {
            pre_normal: Some(label_hook(&[("a.io/ready", "true")])),
            ..Default::default()
        };
        assert!(!pre_normal_satisfied(&pod(), Some(&lc)));
        assert!(pre_normal_satisfied(
            &with_label(pod(), "a.io/ready", "true"),
            Some(&lc)
        ));
    }

    #[test]
    fn in_place_update_gate_by_state() {
        use InPlaceUpdateGate::*;
        let lc = Lifecycle {
            in_place_update: Some(finalizer_hook(&["a.io/x"])),
            ..Default::default()
        };
        let hooked = |s: Option<LifecycleState>| {
            let p = with_finalizer(pod(), "a.io/x");
            match s {
                Some(s) => with_label(p, keys::LIFECYCLE_STATE, s.as_str()),
                None => p,
            }
        };
        let free = |s: LifecycleState| pod_in(s);

        assert_eq!(
            in_place_update_gate(&hooked(None), Some(&lc)),
            EnterPreparingUpdate
        );
        assert_eq!(in_place_update_gate(&pod(), Some(&lc)), Proceed);
        for s in [LifecycleState::PreparingNormal, LifecycleState::Normal] {
            assert_eq!(
                in_place_update_gate(&hooked(Some(s)), Some(&lc)),
                EnterPreparingUpdate
            );
            assert_eq!(in_place_update_gate(&free(s), Some(&lc)), Proceed);
            assert_eq!(in_place_update_gate(&hooked(Some(s)), None), Proceed);
        }
        let preparing = LifecycleState::PreparingUpdate;
        assert_eq!(
            in_place_update_gate(&hooked(Some(preparing)), Some(&lc)),
            Wait
        );
        assert_eq!(in_place_update_gate(&free(preparing), Some(&lc)), Proceed);
        let updated = LifecycleState::Updated;
        assert_eq!(
            in_place_update_gate(&free(updated), Some(&lc)),
            EnterPreparingUpdate
        );
        assert_eq!(in_place_update_gate(&free(updated), None), Proceed);
        assert_eq!(
            in_place_update_gate(&free(LifecycleState::Updating), Some(&lc)),
            Proceed
        );
        assert_eq!(
            in_place_update_gate(&free(LifecycleState::PreparingDelete), Some(&lc)),
            NotAllowed
        );
        let bogus = with_label(pod(), keys::LIFECYCLE_STATE, "Bogus");
        assert_eq!(in_place_update_gate(&bogus, Some(&lc)), NotAllowed);
    }
}
