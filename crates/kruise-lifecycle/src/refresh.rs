//! The transitions a controller applies on its own when it refreshes a Pod (as `refreshPodState` in
//! openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/cloneset_update.go).

use kruise_api::appspub::{Lifecycle, LifecycleState};
use kruise_api::pod::Pod;

use crate::hooks::{is_all_hooked, state};

/// What the caller knows about the Pod beyond its labels.
#[derive(Clone, Copy, Debug, Default)]
pub struct RefreshInput<'a> {
    pub lifecycle: Option<&'a Lifecycle>,
    /// The Pod is already at the revision an in-place update would take it to (normally
    /// the update revision). A `PreparingUpdate` Pod for which this holds was rolled back
    /// while waiting on its hook (upstream issue #1156) and needs no update.
    pub pod_at_update_revision: bool,
    /// The in-place update has completed (kruise-inplace's completion check).
    pub update_completed: bool,
}

/// The state a refresh moves the Pod to, or `None` to leave it.
///
/// | from | to | when |
/// |---|---|---|
/// | PreparingNormal | Normal | no `preNormal` hook and the Pod has `spec.nodeName`; or `preNormal` set and the Pod all-hooked |
/// | PreparingUpdate | Updated / Normal | `pod_at_update_revision` (rollback) |
/// | Updating | Updated / Normal | `update_completed` |
/// | Updated | Normal | no `inPlaceUpdate` hook, or the Pod all-hooked again |
///
/// "Updated / Normal" is `Updated` when an `inPlaceUpdate` hook exists and the Pod is
/// not all-hooked by it, else `Normal`.
///
/// Where we differ from upstream (v1.9.0), on purpose:
/// - Upstream moves `PreparingNormal` → `Normal` at once without `preNormal`; we wait for the Pod
///   to be scheduled (`spec.nodeName` set).
/// - Upstream picks `Updated` whenever `spec.lifecycle` is set and the Pod is not
///   all-hooked by `inPlaceUpdate` — which, with no `inPlaceUpdate` hook, is always — and
///   then needs a second refresh to reach `Normal`. We go straight to `Normal` then.
///
/// Never returns `PreparingDelete`, `PreparingUpdate` or `Updating`: those are entered
/// only by a controller's decision (delete, update).
pub fn refresh_target(pod: &Pod, input: &RefreshInput) -> Option<LifecycleState> {
    let lifecycle = input.lifecycle;
    match state(pod)? {
        LifecycleState::PreparingNormal => {
            pre_normal_done(pod, lifecycle).then_some(LifecycleState::Normal)
        }
        LifecycleState::PreparingUpdate => input
            .pod_at_update_revision
            .then(|| after_update(pod, lifecycle)),
        LifecycleState::Updating => input.update_completed.then(|| after_update(pod, lifecycle)),
        LifecycleState::Updated => {
            let hook = lifecycle.and_then(|l| l.in_place_update.as_ref());
            (hook.is_none() || is_all_hooked(pod, hook)).then_some(LifecycleState::Normal)
        }
        LifecycleState::Normal | LifecycleState::PreparingDelete => None,
    }
}

fn pre_normal_done(pod: &Pod, lifecycle: Option<&Lifecycle>) -> bool {
    match lifecycle.and_then(|l| l.pre_normal.as_ref()) {
        Some(hook) => is_all_hooked(pod, Some(hook)),
        None => kruise_ordering::predicates::is_scheduled(pod),
    }
}

/// Where a Pod goes once its in-place update is done (or turned out unnecessary): it
/// waits in `Updated` until the user re-adds the `inPlaceUpdate` hook.
fn after_update(pod: &Pod, lifecycle: Option<&Lifecycle>) -> LifecycleState {
    match lifecycle.and_then(|l| l.in_place_update.as_ref()) {
        Some(hook) if !is_all_hooked(pod, Some(hook)) => LifecycleState::Updated,
        _ => LifecycleState::Normal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use LifecycleState::*;

    fn input(lifecycle: Option<&Lifecycle>) -> RefreshInput<'_> {
        RefreshInput {
            lifecycle,
            ..Default::default()
        }
    }

    fn in_place_lifecycle() -> Lifecycle {
        Lifecycle {
            in_place_update: Some(finalizer_hook(&["a.io/x"])),
            ..Default::default()
        }
    }

    #[test]
    fn unlabelled_pod_is_left_alone() {
        let everything = RefreshInput {
            lifecycle: None,
            pod_at_update_revision: true,
            update_completed: true,
        };
        assert_eq!(refresh_target(&scheduled(pod()), &everything), None);
    }

    #[test]
    fn preparing_normal_without_pre_normal_waits_for_scheduling() {
        assert_eq!(refresh_target(&pod_in(PreparingNormal), &input(None)), None);
        let mut unscheduled = pod_in(PreparingNormal);
        unscheduled.spec.get_or_insert_default().node_name = Some(String::new());
        assert_eq!(refresh_target(&unscheduled, &input(None)), None);
        assert_eq!(
            refresh_target(&scheduled(pod_in(PreparingNormal)), &input(None)),
            Some(Normal)
        );
        let other_hooks = in_place_lifecycle();
        assert_eq!(
            refresh_target(
                &scheduled(pod_in(PreparingNormal)),
                &input(Some(&other_hooks))
            ),
            Some(Normal)
        );
    }

    #[test]
    fn preparing_normal_with_pre_normal_waits_for_all_hooked() {
        let lc = Lifecycle {
            pre_normal: Some(label_hook(&[("a.io/ready", "true"), ("a.io/warm", "yes")])),
            ..Default::default()
        };
        let p = pod_in(PreparingNormal);
        assert_eq!(refresh_target(&p, &input(Some(&lc))), None);
        let half = with_label(p, "a.io/ready", "true");
        assert_eq!(
            refresh_target(&scheduled(half.clone()), &input(Some(&lc))),
            None
        );
        let all = with_label(half, "a.io/warm", "yes");
        assert_eq!(refresh_target(&all, &input(Some(&lc))), Some(Normal));
    }

    #[test]
    fn preparing_update_is_not_advanced_by_refresh() {
        let lc = in_place_lifecycle();
        let p = pod_in(PreparingUpdate);
        assert_eq!(refresh_target(&p, &input(Some(&lc))), None);
        assert_eq!(refresh_target(&p, &input(None)), None);
        let completed = RefreshInput {
            update_completed: true,
            ..input(Some(&lc))
        };
        assert_eq!(refresh_target(&p, &completed), None);
    }

    #[test]
    fn rolled_back_preparing_update_goes_to_updated_when_hook_not_all_hooked() {
        let lc = in_place_lifecycle();
        let rolled_back = |lifecycle| RefreshInput {
            lifecycle,
            pod_at_update_revision: true,
            update_completed: false,
        };
        let p = pod_in(PreparingUpdate);
        assert_eq!(refresh_target(&p, &rolled_back(Some(&lc))), Some(Updated));
        let hooked = with_finalizer(p.clone(), "a.io/x");
        assert_eq!(
            refresh_target(&hooked, &rolled_back(Some(&lc))),
            Some(Normal)
        );
        assert_eq!(refresh_target(&p, &rolled_back(None)), Some(Normal));
        let pre_delete_only = Lifecycle {
            pre_delete: Some(finalizer_hook(&["a.io/x"])),
            ..Default::default()
        };
        assert_eq!(
            refresh_target(&p, &rolled_back(Some(&pre_delete_only))),
            Some(Normal)
        );
    }

    #[test]
    fn updating_waits_for_completion() {
        let lc = in_place_lifecycle();
        let p = pod_in(Updating);
        assert_eq!(refresh_target(&p, &input(Some(&lc))), None);
        let done = |lifecycle| RefreshInput {
            lifecycle,
            pod_at_update_revision: true,
            update_completed: true,
        };
        assert_eq!(refresh_target(&p, &done(Some(&lc))), Some(Updated));
        assert_eq!(
            refresh_target(&with_finalizer(p.clone(), "a.io/x"), &done(Some(&lc))),
            Some(Normal)
        );
        assert_eq!(refresh_target(&p, &done(None)), Some(Normal));
        assert_eq!(
            refresh_target(&p, &done(Some(&Lifecycle::default()))),
            Some(Normal)
        );
    }

    #[test]
    fn updated_returns_to_normal_when_hook_is_back_or_gone() {
        let lc = in_place_lifecycle();
        let p = pod_in(Updated);
        assert_eq!(refresh_target(&p, &input(Some(&lc))), None);
        assert_eq!(
            refresh_target(&with_finalizer(p.clone(), "a.io/x"), &input(Some(&lc))),
            Some(Normal)
        );
        assert_eq!(refresh_target(&p, &input(None)), Some(Normal));
        assert_eq!(
            refresh_target(&p, &input(Some(&Lifecycle::default()))),
            Some(Normal)
        );
    }

    #[test]
    fn normal_and_preparing_delete_stay() {
        let everything = |lifecycle| RefreshInput {
            lifecycle,
            pod_at_update_revision: true,
            update_completed: true,
        };
        let lc = in_place_lifecycle();
        for s in [Normal, PreparingDelete] {
            assert_eq!(
                refresh_target(&scheduled(pod_in(s)), &everything(None)),
                None
            );
            assert_eq!(
                refresh_target(&scheduled(pod_in(s)), &everything(Some(&lc))),
                None
            );
        }
    }
}
