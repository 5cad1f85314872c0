//! Properties over arbitrary Pods, lifecycles and targets.

use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleState};
use kruise_api::keys;
use kruise_api::pod::Pod;
use proptest::prelude::*;

use crate::test_support::*;
use crate::*;

const FINALIZERS: [&str; 3] = ["a.io/x", "a.io/y", "other.io/z"];
const LABELS: [(&str, &str); 3] = [
    ("a.io/block", "true"),
    ("a.io/warm", "yes"),
    ("a.io/block", "no"),
];

fn any_state() -> impl Strategy<Value = LifecycleState> {
    prop::sample::select(LifecycleState::ALL.to_vec())
}

fn any_hook() -> impl Strategy<Value = Option<LifecycleHook>> {
    prop::option::of(
        (
            prop::sample::subsequence(FINALIZERS[..2].to_vec(), 0..=2),
            prop::sample::subsequence(LABELS[..2].to_vec(), 0..=2),
            any::<bool>(),
        )
            .prop_map(|(finalizers, labels, mark)| LifecycleHook {
                mark_pod_not_ready: mark,
                ..merge(finalizer_hook(&finalizers), label_hook(&labels))
            }),
    )
}

fn merge(finalizers: LifecycleHook, labels: LifecycleHook) -> LifecycleHook {
    LifecycleHook {
        labels_handler: labels.labels_handler,
        ..finalizers
    }
}

fn any_lifecycle() -> impl Strategy<Value = Option<Lifecycle>> {
    prop::option::of((any_hook(), any_hook(), any_hook()).prop_map(
        |(pre_delete, in_place_update, pre_normal)| Lifecycle {
            pre_delete,
            in_place_update,
            pre_normal,
        },
    ))
}

/// `None` = no state label; `Some(None)` = an unknown value.
fn any_pod() -> impl Strategy<Value = Pod> {
    (
        prop::option::of(prop::option::of(any_state())),
        prop::sample::subsequence(FINALIZERS.to_vec(), 0..=3),
        prop::sample::subsequence(LABELS[..2].to_vec(), 0..=2),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(state, finalizers, labels, gate, ready, node)| {
            let mut p = match state {
                None => pod(),
                Some(None) => with_label(pod(), keys::LIFECYCLE_STATE, "Bogus"),
                Some(Some(s)) => pod_in(s),
            };
            for f in finalizers {
                p = with_finalizer(p, f);
            }
            for (k, v) in labels {
                p = with_label(p, k, v);
            }
            if gate {
                p = gated(p);
            }
            if ready {
                p = running_ready(p);
            }
            if node {
                p = scheduled(p);
            }
            p
        })
}

fn any_entry() -> impl Strategy<Value = NotReadyKey> {
    (
        prop::sample::select(vec!["Lifecycle", "ContainerRecreateRequest"]),
        prop::sample::select(vec![PRE_DELETE_HOOK_KEY, PRE_UPDATE_HOOK_KEY, "crr-1"]),
    )
        .prop_map(|(user_agent, key)| NotReadyKey {
            user_agent: user_agent.into(),
            key: key.into(),
        })
}

proptest! {
    #[test]
    fn transition_then_state_reads_the_target(
        p in any_pod(), to in any_state(), lc in any_lifecycle(), now in 0i64..4_000_000_000,
    ) {
        match transition(&p, to, lc.as_ref(), t(now)) {
            None => prop_assert_eq!(state(&p), Some(to)),
            Some(tr) => {
                let after = tr.apply_to(&p);
                prop_assert_eq!(state(&after), Some(to));
                if tr.changes_metadata() {
                    prop_assert_eq!(
                        after.metadata.annotations.as_ref().and_then(|a| a.get(keys::LIFECYCLE_TIMESTAMP)).cloned(),
                        Some(format_timestamp(t(now)))
                    );
                }
                // Applied once, nothing is left to write.
                prop_assert_eq!(transition(&after, to, lc.as_ref(), t(now + 1)), None);
            }
        }
    }

    #[test]
    fn refresh_never_enters_a_decided_state(
        p in any_pod(), lc in any_lifecycle(), at_rev in any::<bool>(), done in any::<bool>(),
    ) {
        let input = RefreshInput { lifecycle: lc.as_ref(), pod_at_update_revision: at_rev, update_completed: done };
        let target = refresh_target(&p, &input);
        prop_assert!(!matches!(
            target,
            Some(LifecycleState::PreparingDelete | LifecycleState::PreparingUpdate | LifecycleState::Updating)
        ));
        if target.is_some() {
            prop_assert_ne!(target, state(&p), "a refresh target is always a change");
        }
    }

    #[test]
    fn add_then_remove_restores_the_other_entries(
        others in prop::collection::btree_set(any_entry(), 0..4),
        key in prop::sample::select(vec![PRE_DELETE_HOOK_KEY, PRE_UPDATE_HOOK_KEY]),
        ready in any::<bool>(),
    ) {
        let entry = NotReadyKey::lifecycle(key);
        let mut p = gated(if ready { running_ready(pod()) } else { pod() });
        for other in others.iter().filter(|o| **o != entry) {
            if let Some(c) = condition_with_entry(&p, other, true, t(1)) {
                p = with_condition(p, c);
            }
        }
        let before: Vec<NotReadyKey> = not_ready_keys(&p);

        let added = with_condition(p.clone(), condition_with_key(&p, key, true, t(2)).expect("new entry"));
        prop_assert!(not_ready_keys(&added).contains(&entry));
        prop_assert_eq!(kruise_pod_ready_condition(&added).map(|c| c.status.as_str()), Some("False"));
        prop_assert_eq!(condition_with_key(&added, key, true, t(3)), None, "add is idempotent");

        let removed = with_condition(added.clone(), condition_with_key(&added, key, false, t(4)).expect("entry to remove"));
        prop_assert_eq!(not_ready_keys(&removed), before.clone());
        let c = kruise_pod_ready_condition(&removed).unwrap();
        if before.is_empty() {
            prop_assert_eq!(c.status.as_str(), "True");
            prop_assert_eq!(c.message.as_deref(), Some("[]"));
        } else {
            prop_assert_eq!(c.status.as_str(), "False");
        }
        prop_assert_eq!(condition_with_key(&removed, key, false, t(5)), None, "remove is idempotent");
    }
}
