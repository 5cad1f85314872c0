//! The lifecycle-hook examples of OpenKruise's documentation (CloneSet user manual, the
//! `example.io/unready-blocker` finalizer) and of OpenKruise v1.2 release notes
//! (`markPodNotReady`), walked end to end through the public API, the way a controller drives them:
//! decide (gate / pre_delete_holds), transition, refresh.

use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleState::*};
use kruise_api::pod::Pod;

use crate::test_support::*;
use crate::*;

const BLOCKER: &str = "example.io/unready-blocker";

fn hook(mark_pod_not_ready: bool) -> LifecycleHook {
    LifecycleHook {
        mark_pod_not_ready,
        ..finalizer_hook(&[BLOCKER])
    }
}

fn lifecycle(mark_pod_not_ready: bool) -> Lifecycle {
    Lifecycle {
        pre_delete: Some(hook(mark_pod_not_ready)),
        in_place_update: Some(hook(mark_pod_not_ready)),
        pre_normal: None,
    }
}

fn remove_finalizer(mut pod: Pod, finalizer: &str) -> Pod {
    if let Some(fs) = pod.metadata.finalizers.as_mut() {
        fs.retain(|f| f != finalizer);
    }
    pod
}

fn refresh(pod: &Pod, lc: &Lifecycle, at_rev: bool, done: bool, now: i64) -> Pod {
    let input = RefreshInput {
        lifecycle: Some(lc),
        pod_at_update_revision: at_rev,
        update_completed: done,
    };
    match refresh_target(pod, &input) {
        Some(to) => transition(pod, to, Some(lc), t(now))
            .expect("a change")
            .apply_to(pod),
        None => pod.clone(),
    }
}

fn kruise_ready(pod: &Pod) -> Option<String> {
    pod_condition_status(pod, "KruisePodReady")
}

/// A freshly created, scheduled, running Pod carrying the template finalizer.
fn created(lc: &Lifecycle) -> Pod {
    let mut p = running_ready(gated(scheduled(with_finalizer(pod(), BLOCKER))));
    set_state(&mut p, PreparingNormal, t(0));
    let p = refresh(&p, lc, false, false, 1);
    assert_eq!(state(&p), Some(Normal));
    p
}

#[test]
fn documented_hook_pre_delete_finalizer_blocks_deletion_until_removed() {
    let lc = lifecycle(false);
    let p = created(&lc);
    assert!(pre_delete_holds(&p, Some(&lc)));
    let p = transition(&p, PreparingDelete, Some(&lc), t(2))
        .unwrap()
        .apply_to(&p);
    assert_eq!(state(&p), Some(PreparingDelete));
    assert_eq!(kruise_ready(&p), None, "no markPodNotReady, no condition");
    assert_eq!(
        refresh(&p, &lc, true, true, 3),
        p,
        "refresh never leaves PreparingDelete"
    );
    assert_eq!(
        in_place_update_gate(&p, Some(&lc)),
        InPlaceUpdateGate::NotAllowed
    );
    let p = remove_finalizer(p, BLOCKER);
    assert!(!pre_delete_holds(&p, Some(&lc)), "now it may be deleted");
}

#[test]
fn documented_hook_in_place_update_through_the_hook() {
    let lc = lifecycle(false);
    let p = created(&lc);
    assert_eq!(
        in_place_update_gate(&p, Some(&lc)),
        InPlaceUpdateGate::EnterPreparingUpdate
    );
    let p = transition(&p, PreparingUpdate, Some(&lc), t(2))
        .unwrap()
        .apply_to(&p);
    assert_eq!(in_place_update_gate(&p, Some(&lc)), InPlaceUpdateGate::Wait);

    let p = remove_finalizer(p, BLOCKER);
    assert_eq!(
        in_place_update_gate(&p, Some(&lc)),
        InPlaceUpdateGate::Proceed
    );
    let p = transition(&p, Updating, Some(&lc), t(3))
        .unwrap()
        .apply_to(&p);
    assert_eq!(refresh(&p, &lc, true, false, 4), p, "not complete yet");
    let p = refresh(&p, &lc, true, true, 5);
    assert_eq!(state(&p), Some(Updated));
    assert_eq!(
        refresh(&p, &lc, true, true, 6),
        p,
        "waits for the hook to come back"
    );

    let p = with_finalizer(p, BLOCKER);
    let p = refresh(&p, &lc, true, true, 7);
    assert_eq!(state(&p), Some(Normal));
}

#[test]
fn documented_hook_a_further_update_of_an_updated_pod_re_adds_the_hook() {
    let lc = lifecycle(false);
    let p = pod_in(Updated);
    assert_eq!(
        in_place_update_gate(&p, Some(&lc)),
        InPlaceUpdateGate::EnterPreparingUpdate
    );
    let p = transition(&p, PreparingUpdate, Some(&lc), t(1))
        .unwrap()
        .apply_to(&p);
    assert_eq!(state(&p), Some(PreparingUpdate));
    assert!(is_all_hooked(&p, lc.in_place_update.as_ref()));
}

#[test]
fn documented_hook_label_handler_works_like_a_finalizer() {
    let lc = Lifecycle {
        pre_delete: Some(label_hook(&[("example.io/block-unready", "true")])),
        ..Default::default()
    };
    let p = with_label(pod_in(Normal), "example.io/block-unready", "true");
    assert!(pre_delete_holds(&p, Some(&lc)));
    let p = with_label(p, "example.io/block-unready", "false");
    assert!(!pre_delete_holds(&p, Some(&lc)));
}

#[test]
fn v1_2_mark_pod_not_ready_during_in_place_update() {
    let lc = lifecycle(true);
    let p = created(&lc);
    let p = transition(&p, PreparingUpdate, Some(&lc), t(2))
        .unwrap()
        .apply_to(&p);
    assert_eq!(kruise_ready(&p).as_deref(), Some("False"));
    assert_eq!(pod_condition_status(&p, "Ready").as_deref(), Some("False"));

    let p = remove_finalizer(p, BLOCKER);
    let p = transition(&p, Updating, Some(&lc), t(3))
        .unwrap()
        .apply_to(&p);
    assert_eq!(
        kruise_ready(&p).as_deref(),
        Some("False"),
        "still NotReady while updating"
    );
    let p = refresh(&p, &lc, true, true, 4);
    assert_eq!(state(&p), Some(Updated));
    assert_eq!(
        kruise_ready(&p).as_deref(),
        Some("True"),
        "forced NotReady removed at Updated"
    );
    assert!(not_ready_keys(&p).is_empty());
}

#[test]
fn v1_2_pre_delete_mark_keeps_pod_not_ready_and_not_revivable() {
    let lc = lifecycle(true);
    let p = created(&lc);
    let p = transition(&p, PreparingDelete, Some(&lc), t(2))
        .unwrap()
        .apply_to(&p);
    assert_eq!(kruise_ready(&p).as_deref(), Some("False"));
    assert_eq!(
        not_ready_keys(&p),
        vec![NotReadyKey::lifecycle(PRE_DELETE_HOOK_KEY)]
    );
    assert!(
        !can_cancel_deletion(Some(&lc)),
        "raising replicas must not revive it"
    );
    assert!(can_cancel_deletion(Some(&lifecycle(false))));
}

#[test]
fn rollback_while_preparing_update() {
    // A PreparingUpdate Pod whose set is rolled back to its revision goes straight to
    // Updated/Normal without an in-place update.
    let lc = lifecycle(false);
    let p = created(&lc);
    let p = transition(&p, PreparingUpdate, Some(&lc), t(2))
        .unwrap()
        .apply_to(&p);
    assert_eq!(
        state(&refresh(&p, &lc, true, false, 3)),
        Some(Normal),
        "still all-hooked"
    );
    let p = remove_finalizer(p, BLOCKER);
    assert_eq!(state(&refresh(&p, &lc, true, false, 4)), Some(Updated));
}
