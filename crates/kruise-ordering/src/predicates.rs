//! Basic facts about a Pod that every ranking rule is built from, and the one home of
//! Pod predicates for the other shared crates (`kruise-inplace`, `kruise-lifecycle`,
//! `kruise-workload`) and the controllers.
//!
//! Each function reads one thing and decides nothing about order; the sort modules
//! combine them. Definitions follow Kubernetes' `podutil` helpers unless a comment says
//! otherwise.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::PodCondition;
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_api::pod::PodView;

const PHASE_PENDING: &str = "Pending";
const PHASE_UNKNOWN: &str = "Unknown";
const PHASE_RUNNING: &str = "Running";
const PHASE_SUCCEEDED: &str = "Succeeded";
const PHASE_FAILED: &str = "Failed";
const CONDITION_READY: &str = "Ready";
const STATUS_TRUE: &str = "True";

/// The Pod's `status.phase`, `""` when unset.
pub fn phase(pod: &(impl PodView + ?Sized)) -> &str {
    pod.phase().unwrap_or_default()
}

/// Counts toward the workload: not finished (phase Succeeded/Failed) and not being
/// deleted (no `deletionTimestamp`).
pub fn is_active(pod: &(impl PodView + ?Sized)) -> bool {
    !is_finished(pod) && !is_terminating(pod)
}

/// Phase Failed or Succeeded: the Pod will not run again.
pub fn is_finished(pod: &(impl PodView + ?Sized)) -> bool {
    matches!(phase(pod), PHASE_SUCCEEDED | PHASE_FAILED)
}

/// Being deleted (`deletionTimestamp` set).
pub fn is_terminating(pod: &(impl PodView + ?Sized)) -> bool {
    pod.meta().deletion_timestamp.is_some()
}

/// Bound to a node (`spec.nodeName` non-empty).
pub fn is_scheduled(pod: &(impl PodView + ?Sized)) -> bool {
    !node_name(pod).is_empty()
}

/// Since when the scheduler has found no node for `pod`: its `PodScheduled=False`
/// condition with reason `Unschedulable` (its transition time, or the Pod's creation);
/// `None` once bound, finished or being deleted. WorkloadSpread and UnitedDeployment move
/// Pods stuck like this out of their subset (Adaptive).
pub fn unschedulable_since(pod: &(impl PodView + ?Sized)) -> Option<Timestamp> {
    if is_scheduled(pod) || !is_active(pod) {
        return None;
    }
    let c = condition(pod, "PodScheduled")?;
    if c.status != "False" || c.reason.as_deref() != Some("Unschedulable") {
        return None;
    }
    c.last_transition_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| created_at(pod))
}

/// `spec.nodeName`, `""` when unscheduled.
pub fn node_name(pod: &(impl PodView + ?Sized)) -> &str {
    pod.node_name().unwrap_or_default()
}

/// Pending < Unknown < Running. Any other phase (unset, or a finished Pod that slipped
/// through) ranks with Pending, as Kubernetes' `podPhaseToOrdinal` map does.
pub fn phase_rank(pod: &(impl PodView + ?Sized)) -> u8 {
    match phase(pod) {
        PHASE_RUNNING => 2,
        PHASE_UNKNOWN => 1,
        PHASE_PENDING => 0,
        _ => 0,
    }
}

/// The condition of this type, if the Pod reports it.
pub fn condition<'a>(pod: &'a (impl PodView + ?Sized), type_: &str) -> Option<&'a PodCondition> {
    pod.conditions().iter().find(|c| c.type_ == type_)
}

/// Whether the Pod has a readiness gate on this condition type.
pub fn has_readiness_gate(pod: &(impl PodView + ?Sized), condition_type: &str) -> bool {
    pod.readiness_gates()
        .iter()
        .any(|g| g.condition_type == condition_type)
}

/// Condition `Ready=True`, whatever the phase (Kubernetes' `podutil.IsPodReady`). This
/// is what the "not ready < ready" sort criteria compare; phase is compared before it.
pub fn is_ready(pod: &(impl PodView + ?Sized)) -> bool {
    condition(pod, CONDITION_READY).is_some_and(|c| c.status == STATUS_TRUE)
}

/// Phase Running and condition `Ready=True`.
pub fn is_running_and_ready(pod: &(impl PodView + ?Sized)) -> bool {
    phase(pod) == PHASE_RUNNING && is_ready(pod)
}

/// When the Pod last became ready: the `Ready` condition's `lastTransitionTime`, only
/// while it is `True`. `None` for a Pod that is not ready or reports no time.
pub fn ready_since(pod: &(impl PodView + ?Sized)) -> Option<Timestamp> {
    condition(pod, CONDITION_READY)
        .filter(|c| c.status == STATUS_TRUE)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Running, Ready, and ready for at least `min_ready_seconds` (`<= 0` means ready is
/// enough). A Pod with `minReadySeconds > 0` whose Ready condition has no transition
/// time is not available, as in Kubernetes.
///
/// Where we differ from upstream on purpose: "Ready for ≥ minReadySeconds", so a Pod is available
/// at exactly `since + minReadySeconds`; Kubernetes' `IsPodAvailable` uses a strict `Before(now)`
/// and would wait one more instant.
pub fn is_running_and_available(
    pod: &(impl PodView + ?Sized),
    min_ready_seconds: i32,
    now: Timestamp,
) -> bool {
    if !is_running_and_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    let Some(since) = ready_since(pod) else {
        return false;
    };
    match since.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds))) {
        Ok(available_at) => available_at <= now,
        // Beyond the representable range: it will never be reached.
        Err(_) => false,
    }
}

/// The Pod's `lifecycle.apps.kruise.io/state` label, raw (`None` when absent).
pub fn lifecycle_state_label(pod: &(impl PodView + ?Sized)) -> Option<&str> {
    label(pod, keys::LIFECYCLE_STATE)
}

/// The Pod's lifecycle state, when the label holds a known value.
pub fn lifecycle_state(pod: &(impl PodView + ?Sized)) -> Option<LifecycleState> {
    lifecycle_state_label(pod).and_then(LifecycleState::parse)
}

/// Lifecycle label absent, empty, or `Normal`: the Pod is not held by any hook.
/// An unknown value counts as not normal, as upstream compares strings.
pub fn is_lifecycle_normal(pod: &(impl PodView + ?Sized)) -> bool {
    matches!(lifecycle_state_label(pod), None | Some("") | Some("Normal"))
}

/// The `InPlaceUpdateReady` condition is absent or `True` (an in-place update is not in
/// progress). Present with any other status means not ready.
pub fn is_in_place_update_ready(pod: &(impl PodView + ?Sized)) -> bool {
    condition(pod, keys::INPLACE_UPDATE_READY).is_none_or(|c| c.status == STATUS_TRUE)
}

/// The `InPlaceUpdateReady` condition is absent or anything but `False`: CloneSet's
/// `ready` count, looser than [`is_in_place_update_ready`] (an `Unknown` status passes).
pub fn is_in_place_update_not_false(pod: &(impl PodView + ?Sized)) -> bool {
    condition(pod, keys::INPLACE_UPDATE_READY).is_none_or(|c| c.status != "False")
}

/// `available` (as CloneSet's `IsPodAvailable` in openkruise/kruise v1.9.0
/// pkg/controller/cloneset/sync/cloneset_sync_utils.go): lifecycle state empty or `Normal`, phase
/// Running, Ready for at least `min_ready_seconds`, and `InPlaceUpdateReady` (if present) `True`.
/// With `min_ready_seconds = 0` this is `ready` (upstream's `isPodReady`).
///
/// The lifecycle label and the `InPlaceUpdateReady` gate are OpenKruise-wide (CloneSet,
/// Advanced StatefulSet and Advanced DaemonSet all write them), so this is not a
/// CloneSet special case. Use [`is_running_and_available`] for the plain Kubernetes
/// notion.
pub fn is_available(pod: &(impl PodView + ?Sized), min_ready_seconds: i32, now: Timestamp) -> bool {
    is_lifecycle_normal(pod)
        && is_running_and_available(pod, min_ready_seconds, now)
        && is_in_place_update_ready(pod)
}

/// The **maximum** restart count over the Pod's (regular) containers, 0 without
/// statuses. Maximum, not sum, because that is what Kubernetes' and OpenKruise's
/// comparators use (`maxContainerRestarts`): one crash-looping container marks the Pod
/// as unhealthy whatever its sidecars do, and a Pod with many containers is not
/// penalised for having more of them. Init containers are ignored, as upstream.
pub fn restart_count(pod: &(impl PodView + ?Sized)) -> i32 {
    pod.restart_counts().max().unwrap_or(0).max(0)
}

/// `controller.kubernetes.io/pod-deletion-cost` as an int32; missing or invalid ⇒ 0.
///
/// Matches Kubernetes' `GetDeletionCostFromPodAnnotations`: the first character must be
/// `-`, a digit `1`–`9`, or the value must be exactly `"0"` (so `"+10"` and `"008"` are
/// invalid ⇒ 0); the rest is Go `strconv.ParseInt(v, 10, 32)`, which accepts leading
/// zeros after a minus sign (`"-008"` ⇒ −8) and rejects out-of-range values.
pub fn deletion_cost(pod: &(impl PodView + ?Sized)) -> i32 {
    annotation(pod, keys::POD_DELETION_COST)
        .and_then(parse_deletion_cost)
        .unwrap_or(0)
}

/// The validated parse behind [`deletion_cost`]; `None` for an invalid value.
pub fn parse_deletion_cost(value: &str) -> Option<i32> {
    let valid_first =
        value == "0" || value.starts_with('-') || value.starts_with(|c| matches!(c, '1'..='9'));
    if !valid_first {
        return None;
    }
    // Rust's parser agrees with Go's ParseInt here: one optional sign, ASCII digits,
    // range-checked. A '+' can only reach it after '-', which both reject.
    value.parse::<i32>().ok()
}

/// `metadata.creationTimestamp`, if set.
pub fn created_at(pod: &(impl PodView + ?Sized)) -> Option<Timestamp> {
    pod.meta().creation_timestamp.as_ref().map(|t| t.0)
}

/// A label's value, if the Pod carries the label.
pub fn label<'a>(pod: &'a (impl PodView + ?Sized), key: &str) -> Option<&'a str> {
    pod.meta().labels.as_ref()?.get(key).map(String::as_str)
}

/// Whether the Pod carries the label, whatever its value.
pub fn has_label(pod: &(impl PodView + ?Sized), key: &str) -> bool {
    label(pod, key).is_some()
}

/// The Pod's `controller-revision-hash` label: the revision it was created from or last
/// updated to (a full revision name or its short hash).
pub fn revision_label(pod: &(impl PodView + ?Sized)) -> Option<&str> {
    label(pod, keys::CONTROLLER_REVISION_HASH)
}

/// An annotation's value, if the Pod carries the annotation.
pub fn annotation<'a>(pod: &'a (impl PodView + ?Sized), key: &str) -> Option<&'a str> {
    pod.meta()
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// `metadata.name`, `""` when unset.
pub fn name(pod: &(impl PodView + ?Sized)) -> &str {
    pod.meta().name.as_deref().unwrap_or_default()
}

/// `metadata.namespace`, `""` when unset.
pub fn namespace(pod: &(impl PodView + ?Sized)) -> &str {
    pod.meta().namespace.as_deref().unwrap_or_default()
}

/// `metadata.uid`, `""` when unset.
pub fn uid(pod: &(impl PodView + ?Sized)) -> &str {
    pod.meta().uid.as_deref().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::pods::{PodBuilder, t};

    #[test]
    fn active_excludes_finished_and_terminating() {
        assert!(is_active(&PodBuilder::new("a").phase("Running").build()));
        assert!(is_active(&PodBuilder::new("a").phase("Pending").build()));
        assert!(is_active(&PodBuilder::new("a").build()));
        assert!(!is_active(&PodBuilder::new("a").phase("Succeeded").build()));
        assert!(!is_active(&PodBuilder::new("a").phase("Failed").build()));
        assert!(!is_active(
            &PodBuilder::new("a").phase("Running").deleting(t(0)).build()
        ));
    }

    #[test]
    fn scheduled_means_node_name_set() {
        assert!(!is_scheduled(&PodBuilder::new("a").build()));
        assert!(!is_scheduled(&PodBuilder::new("a").node("").build()));
        assert!(is_scheduled(&PodBuilder::new("a").node("n1").build()));
    }

    #[test]
    fn phase_rank_orders_pending_unknown_running() {
        let rank = |p: &str| phase_rank(&PodBuilder::new("a").phase(p).build());
        assert_eq!(phase_rank(&PodBuilder::new("a").build()), 0);
        assert_eq!(rank("Pending"), 0);
        assert_eq!(rank("Unknown"), 1);
        assert_eq!(rank("Running"), 2);
        assert_eq!(rank("Succeeded"), 0);
        assert_eq!(rank("Bogus"), 0);
    }

    #[test]
    fn ready_needs_condition_true_and_running_and_ready_needs_phase() {
        let ready_pending = PodBuilder::new("a")
            .phase("Pending")
            .ready_since(t(0))
            .build();
        assert!(is_ready(&ready_pending));
        assert!(!is_running_and_ready(&ready_pending));

        let running = PodBuilder::new("a")
            .phase("Running")
            .ready_since(t(0))
            .build();
        assert!(is_running_and_ready(&running));

        let not_ready = PodBuilder::new("a")
            .phase("Running")
            .not_ready(t(0))
            .build();
        assert!(!is_ready(&not_ready));
        assert!(!is_running_and_ready(&not_ready));
        assert!(!is_ready(&PodBuilder::new("a").phase("Running").build()));
    }

    #[test]
    fn ready_since_only_while_ready() {
        let ready = PodBuilder::new("a")
            .phase("Running")
            .ready_since(t(5))
            .build();
        assert_eq!(ready_since(&ready), Some(t(5)));
        let not_ready = PodBuilder::new("a")
            .phase("Running")
            .not_ready(t(5))
            .build();
        assert_eq!(ready_since(&not_ready), None);
        let no_time = PodBuilder::new("a")
            .phase("Running")
            .condition("Ready", "True")
            .build();
        assert_eq!(ready_since(&no_time), None);
        assert!(is_ready(&no_time));
    }

    #[test]
    fn available_after_min_ready_seconds_inclusive() {
        let pod = PodBuilder::new("a")
            .phase("Running")
            .ready_since(t(100))
            .build();
        assert!(is_available(&pod, 0, t(100)));
        assert!(!is_available(&pod, 10, t(109)));
        assert!(
            is_available(&pod, 10, t(110)),
            "exactly minReadySeconds counts (≥, not >)"
        );
        assert!(is_available(&pod, 10, t(500)));
        assert!(is_available(&pod, -5, t(100)), "negative behaves as 0");
    }

    #[test]
    fn available_needs_running_ready_and_a_transition_time() {
        let pending = PodBuilder::new("a")
            .phase("Pending")
            .ready_since(t(0))
            .build();
        assert!(!is_available(&pending, 0, t(100)));
        let no_time = PodBuilder::new("a")
            .phase("Running")
            .condition("Ready", "True")
            .build();
        assert!(is_available(&no_time, 0, t(100)));
        assert!(!is_available(&no_time, 1, t(100)));
    }

    #[test]
    fn available_needs_normal_lifecycle_and_in_place_update_ready() {
        let base = || PodBuilder::new("a").phase("Running").ready_since(t(0));
        assert!(is_available(&base().lifecycle("Normal").build(), 0, t(1)));
        assert!(is_available(&base().lifecycle("").build(), 0, t(1)));
        for state in [
            "PreparingNormal",
            "PreparingUpdate",
            "Updating",
            "Updated",
            "PreparingDelete",
            "Weird",
        ] {
            assert!(
                !is_available(&base().lifecycle(state).build(), 0, t(1)),
                "{state}"
            );
        }
        assert!(is_available(
            &base().condition("InPlaceUpdateReady", "True").build(),
            0,
            t(1)
        ));
        assert!(!is_available(
            &base().condition("InPlaceUpdateReady", "False").build(),
            0,
            t(1)
        ));
        assert!(!is_available(
            &base().condition("InPlaceUpdateReady", "Unknown").build(),
            0,
            t(1)
        ));
        // The plain Kubernetes notion ignores both.
        let held = base()
            .lifecycle("PreparingDelete")
            .condition("InPlaceUpdateReady", "False")
            .build();
        assert!(is_running_and_available(&held, 0, t(1)));
    }

    #[test]
    fn lifecycle_state_parses_known_values() {
        assert_eq!(lifecycle_state(&PodBuilder::new("a").build()), None);
        assert_eq!(
            lifecycle_state(&PodBuilder::new("a").lifecycle("PreparingUpdate").build()),
            Some(LifecycleState::PreparingUpdate)
        );
        assert_eq!(
            lifecycle_state(&PodBuilder::new("a").lifecycle("x").build()),
            None
        );
    }

    #[test]
    fn restart_count_is_the_maximum_over_containers() {
        assert_eq!(restart_count(&PodBuilder::new("a").build()), 0);
        assert_eq!(
            restart_count(&PodBuilder::new("a").restarts(&[2, 7, 3]).build()),
            7
        );
        assert_eq!(
            restart_count(&PodBuilder::new("a").restarts(&[4]).build()),
            4
        );
    }

    #[test]
    fn deletion_cost_follows_go_validation() {
        let cost = |v: &str| {
            deletion_cost(
                &PodBuilder::new("a")
                    .annotation(keys::POD_DELETION_COST, v)
                    .build(),
            )
        };
        assert_eq!(deletion_cost(&PodBuilder::new("a").build()), 0);
        assert_eq!(cost("10"), 10);
        assert_eq!(cost("-10"), -10);
        assert_eq!(cost("0"), 0);
        assert_eq!(cost("+10"), 0, "leading plus is invalid");
        assert_eq!(cost("008"), 0, "leading zero is invalid");
        assert_eq!(cost("00"), 0);
        assert_eq!(cost("-008"), -8, "Go ParseInt accepts zeros after the sign");
        assert_eq!(cost("-0"), 0);
        assert_eq!(cost("2147483647"), i32::MAX);
        assert_eq!(cost("-2147483648"), i32::MIN);
        assert_eq!(cost("2147483648"), 0, "out of int32 range");
        assert_eq!(cost("-2147483649"), 0);
        assert_eq!(cost(""), 0);
        assert_eq!(cost("-"), 0);
        assert_eq!(cost("-+1"), 0);
        assert_eq!(cost("1.5"), 0);
        assert_eq!(cost(" 1"), 0);
        assert_eq!(cost("1 "), 0);
        assert_eq!(cost("abc"), 0);
        assert_eq!(cost("1_000"), 0);
    }

    #[test]
    fn condition_finds_by_type() {
        let pod = PodBuilder::new("a")
            .condition("X", "False")
            .condition("Ready", "True")
            .build();
        assert_eq!(
            condition(&pod, "X").map(|c| c.status.as_str()),
            Some("False")
        );
        assert!(condition(&pod, "Y").is_none());
    }

    #[test]
    fn finished_and_terminating() {
        assert!(is_finished(&PodBuilder::new("a").phase("Failed").build()));
        assert!(is_finished(
            &PodBuilder::new("a").phase("Succeeded").build()
        ));
        assert!(!is_finished(&PodBuilder::new("a").phase("Running").build()));
        assert!(!is_finished(&PodBuilder::new("a").build()));
        assert!(is_terminating(&PodBuilder::new("a").deleting(t(0)).build()));
        assert!(!is_terminating(&PodBuilder::new("a").build()));
    }

    #[test]
    fn labels_and_the_revision_label() {
        let pod = PodBuilder::new("a")
            .label(keys::CONTROLLER_REVISION_HASH, "web-abc")
            .label("empty", "")
            .build();
        assert_eq!(revision_label(&pod), Some("web-abc"));
        assert!(has_label(&pod, "empty"));
        assert!(!has_label(&pod, "other"));
        assert_eq!(revision_label(&PodBuilder::new("a").build()), None);
    }

    #[test]
    fn in_place_update_not_false_lets_unknown_pass() {
        let with = |status: &str| {
            PodBuilder::new("a")
                .condition(keys::INPLACE_UPDATE_READY, status)
                .build()
        };
        assert!(is_in_place_update_not_false(&PodBuilder::new("a").build()));
        assert!(is_in_place_update_not_false(&with("True")));
        assert!(is_in_place_update_not_false(&with("Unknown")));
        assert!(!is_in_place_update_not_false(&with("False")));
        assert!(!is_in_place_update_ready(&with("Unknown")));
    }

    #[test]
    fn readiness_gate_by_condition_type() {
        let mut pod = PodBuilder::new("a").build();
        assert!(!has_readiness_gate(&pod, keys::KRUISE_POD_READY));
        pod.spec
            .get_or_insert_with(Default::default)
            .readiness_gates = Some(vec![k8s_openapi::api::core::v1::PodReadinessGate {
            condition_type: keys::KRUISE_POD_READY.into(),
        }]);
        assert!(has_readiness_gate(&pod, keys::KRUISE_POD_READY));
        assert!(!has_readiness_gate(&pod, keys::INPLACE_UPDATE_READY));
    }
}
