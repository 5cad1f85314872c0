//! The per-Pod steps of an update round that CloneSet and Advanced StatefulSet share:
//! refreshing a Pod every round ([`refresh_pod`]) and trying to update one in place
//! ([`update_in_place`]). Which Pods, in what order, and what to do when a Pod cannot go
//! in place stay with each controller.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::appspub::{Lifecycle, LifecycleState};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_inplace::PodWrites;
use kruise_lifecycle::{InPlaceUpdateGate, RefreshInput};
use serde_json::{Value, json};

use crate::action::{Action, Plan};

/// One Pod's refresh, every round (as CloneSet's `refreshPodState`, openkruise/kruise v1.9.0
/// pkg/controller/cloneset/sync/cloneset_update.go): continue its in-place update (grace period,
/// container batches, `InPlaceUpdateReady`), add a missing `KruisePodReady` condition, fix the
/// labels the controller wants (`label_patch`, a Pod merge patch, asked for only when nothing else
/// patches the Pod this round: a second patch would fail on the resourceVersion the first carries,
/// so the labels wait for the next round), and move the lifecycle state along. What it decides goes
/// into `plan`.
pub fn refresh_pod<'a>(
    plan: &mut Plan<'a>,
    pod: &'a Pod,
    lifecycle: Option<&Lifecycle>,
    at_update_revision: bool,
    now: Timestamp,
    label_patch: impl FnOnce() -> Option<Value>,
) {
    let revision = kruise_ordering::predicates::revision_label(pod);
    let refresh = kruise_inplace::refresh(pod, revision, now);
    let mut writes = refresh.writes;
    if let Some(wait) = writes.requeue_after.take() {
        plan.requeue(wait);
    }
    // Only once the Pod is scheduled: before that it cannot be Ready anyway, and the
    // same write then carries its move from `PreparingNormal` to `Normal` (a scale-up
    // costs the Pod's creation and this one status write).
    if kruise_lifecycle::has_kruise_pod_ready_gate(pod)
        && kruise_lifecycle::kruise_pod_ready_condition(pod).is_none()
        && kruise_ordering::predicates::is_scheduled(pod)
    {
        add_condition(
            &mut writes,
            json!({"type": keys::KRUISE_POD_READY, "status": "True", "lastTransitionTime": kruise_lifecycle::format_timestamp(now)}),
        );
    }
    if writes.pod_patch.is_none()
        && let Some(patch) = label_patch()
    {
        writes.pod_patch = Some(patch);
    }
    let input = RefreshInput {
        lifecycle,
        pod_at_update_revision: at_update_revision,
        update_completed: refresh.completed,
    };
    let next_state = kruise_lifecycle::refresh_target(pod, &input)
        .and_then(|to| kruise_lifecycle::transition(pod, to, lifecycle, now));
    match next_state {
        // The refresh's conditions ride along with the move (the Writer sends both as
        // one status write when the move changes only labels and annotations): an
        // in-place update ends with one write, `InPlaceUpdateReady=True` and `Normal`.
        Some(mut transition) if writes.pod_patch.is_none() && writes.resize_patch.is_none() => {
            if let Some(conditions) = writes.status_patch.take() {
                transition.status_patch =
                    Some(merge_conditions(transition.status_patch.take(), conditions));
            }
            plan.actions.push(Action::Lifecycle { pod, transition });
        }
        next_state => {
            if !writes.is_empty() {
                plan.actions.push(Action::Refresh { pod, writes });
            }
            if let Some(transition) = next_state {
                plan.actions.push(Action::Lifecycle { pod, transition });
            }
        }
    }
}

/// `{"status":{"conditions":[…]}}` with the conditions of `first` and those of `more`
/// whose type `first` does not already write (`first` decided last and knows best).
fn merge_conditions(first: Option<Value>, more: Value) -> Value {
    let Some(mut merged) = first else {
        return more;
    };
    let conditions = |v: &Value| {
        v["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let written: Vec<Value> = conditions(&merged)
        .iter()
        .map(|c| c["type"].clone())
        .collect();
    let extra: Vec<Value> = conditions(&more)
        .into_iter()
        .filter(|c| !written.contains(&c["type"]))
        .collect();
    if let Some(conditions) = merged["status"]["conditions"].as_array_mut() {
        conditions.extend(extra);
    }
    merged
}

/// Deleting a Pod behind a `preDelete` hook: while the hook holds it, the Pod moves to
/// `PreparingDelete` (and, with `markPodNotReady`, NotReady) and stays there (`None` once
/// it is); when nothing holds it, it is deleted (Advanced StatefulSet and DaemonSet).
pub fn delete_or_hold<'a>(
    pod: &'a Pod,
    lifecycle: Option<&Lifecycle>,
    now: Timestamp,
) -> Option<Action<'a>> {
    if kruise_lifecycle::pre_delete_holds(pod, lifecycle) {
        return kruise_lifecycle::transition(pod, LifecycleState::PreparingDelete, lifecycle, now)
            .map(|transition| Action::Lifecycle { pod, transition });
    }
    Some(Action::Delete {
        pod,
        pvcs: Vec::new(),
    })
}

fn add_condition(writes: &mut PodWrites, condition: Value) {
    let patch = writes
        .status_patch
        .get_or_insert_with(|| json!({"status": {"conditions": []}}));
    if let Some(list) = patch["status"]["conditions"].as_array_mut() {
        list.push(condition);
    }
}

/// What a controller tells [`update_in_place`] about one Pod's update.
#[derive(Clone, Debug)]
pub struct InPlaceUpdate<'r> {
    /// The revision the Pod was created from or last updated to.
    pub from: &'r ControllerRevision,
    /// The revision to update it to.
    pub to: &'r ControllerRevision,
    /// `to`'s name.
    pub to_name: &'r str,
    /// Gates `InPlaceUpdateEnvFromMetadata`, `InPlaceWorkloadVerticalScaling`.
    pub in_place: kruise_inplace::DiffOptions,
    pub lifecycle: Option<&'r Lifecycle>,
    /// `inPlaceUpdateStrategy.gracePeriodSeconds` (0 without one).
    pub grace_seconds: i32,
    /// The revision labels the update writes (`controller-revision-hash`, …); the
    /// lifecycle state `Updating` is added.
    pub labels: BTreeMap<String, String>,
    pub now: Timestamp,
}

/// What [`update_in_place`] decided.
#[derive(Clone, Debug)]
pub enum InPlace<'a> {
    /// The revisions differ in more than can change in place: the controller recreates
    /// the Pod (or reports an `InPlaceOnly` strategy it cannot honour).
    Impossible,
    /// Not this round: an `inPlaceUpdate` hook holds the Pod.
    Hold,
    /// The Pod's lifecycle state forbids an in-place update (`PreparingDelete`, or an
    /// unknown state value); the controller reports it.
    NotAllowed,
    /// Enter `PreparingUpdate` (a hook must let go first) or start the update.
    Act(Action<'a>),
}

impl<'a> InPlace<'a> {
    /// The decision as a step of the controller's update, `None` for `Impossible` (the
    /// controller recreates the Pod): this round's action (`None` while a hook holds the
    /// Pod), or for `NotAllowed` upstream's error, naming the Pod's lifecycle state as
    /// `state` words it.
    pub fn step(
        self,
        pod: &Pod,
        state: impl FnOnce() -> String,
    ) -> Option<Result<Option<Action<'a>>, String>> {
        match self {
            InPlace::Impossible => None,
            InPlace::Hold => Some(Ok(None)),
            InPlace::Act(action) => Some(Ok(Some(action))),
            InPlace::NotAllowed => Some(Err(format!(
                "not allowed to in-place update pod {} in state {}",
                kruise_ordering::predicates::name(pod),
                state()
            ))),
        }
    }
}

/// One Pod towards `update.to` in place (upstream `updatePod` with the in-place
/// updater): the revision diff must qualify, then the lifecycle gate decides between
/// entering `PreparingUpdate`, waiting on the hook, and starting the update (state
/// `Updating`, `InPlaceUpdateReady=False`, then the images, after the grace period).
pub fn update_in_place<'a>(pod: &'a Pod, update: &InPlaceUpdate<'_>) -> InPlace<'a> {
    let data = |r: &ControllerRevision| r.data.as_ref().map(|d| d.0.clone()).unwrap_or(Value::Null);
    let Ok(mut spec) = kruise_inplace::diff(
        &data(update.from),
        &data(update.to),
        update.to_name,
        update.in_place,
    ) else {
        return InPlace::Impossible;
    };
    let (lifecycle, now) = (update.lifecycle, update.now);
    match kruise_lifecycle::in_place_update_gate(pod, lifecycle) {
        InPlaceUpdateGate::EnterPreparingUpdate => {
            return kruise_lifecycle::transition(
                pod,
                LifecycleState::PreparingUpdate,
                lifecycle,
                now,
            )
            .map_or(InPlace::Hold, |transition| {
                InPlace::Act(Action::Lifecycle { pod, transition })
            });
        }
        InPlaceUpdateGate::Wait => return InPlace::Hold,
        InPlaceUpdateGate::NotAllowed => return InPlace::NotAllowed,
        InPlaceUpdateGate::Proceed => {}
    }
    spec.grace_seconds = update.grace_seconds;
    let mut labels = update.labels.clone();
    labels.insert(
        keys::LIFECYCLE_STATE.to_string(),
        LifecycleState::Updating.as_str().to_string(),
    );
    let annotations = BTreeMap::from([(
        keys::LIFECYCLE_TIMESTAMP.to_string(),
        kruise_lifecycle::format_timestamp(now),
    )]);
    let writes = kruise_inplace::start_update(pod, &spec, &labels, &annotations, now);
    InPlace::Act(Action::UpdateInPlace {
        pod,
        writes,
        revision: update.to_name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        Ready, add_readiness_gate, assert_starts_in_place, controller_revision,
        in_place_update_ready_gate, now, pod_template, running_status, set_label,
    };
    use k8s_openapi::api::core::v1::EnvVar;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kruise_api::appspub::LifecycleHook;

    /// `web-0` at revision `web-old` (nginx:alpine), Running and Ready.
    fn pod() -> Pod {
        let template = pod_template("web", "nginx:alpine");
        let mut pod = Pod {
            metadata: template.metadata.unwrap_or_default(),
            spec: template.spec.as_ref().map(Into::into),
            status: Some(running_status(
                "nginx:alpine",
                Ready::Yes,
                Time(now() - jiff::SignedDuration::from_hours(1)),
            )),
        };
        pod.metadata.name = Some("web-0".into());
        pod.metadata.resource_version = Some("1".into());
        pod.spec.as_mut().unwrap().readiness_gates = Some(in_place_update_ready_gate());
        set_label(&mut pod, keys::CONTROLLER_REVISION_HASH, "web-old");
        pod
    }

    struct Revisions {
        old: ControllerRevision,
        new: ControllerRevision,
    }

    impl Revisions {
        fn new() -> Self {
            Revisions {
                old: controller_revision("web-old", &pod_template("web", "nginx:alpine"), 1),
                new: controller_revision("web-new", &pod_template("web", "nginx:1.7.9"), 2),
            }
        }

        fn update<'r>(&'r self, lifecycle: Option<&'r Lifecycle>) -> InPlaceUpdate<'r> {
            InPlaceUpdate {
                from: &self.old,
                to: &self.new,
                to_name: "web-new",
                in_place: Default::default(),
                lifecycle,
                grace_seconds: 0,
                labels: BTreeMap::from([(
                    keys::CONTROLLER_REVISION_HASH.to_string(),
                    "web-new".to_string(),
                )]),
                now: now(),
            }
        }
    }

    #[test]
    fn an_image_change_starts_an_in_place_update() {
        let revisions = Revisions::new();
        let pod = pod();
        let InPlace::Act(action) = update_in_place(&pod, &revisions.update(None)) else {
            panic!("expected an action")
        };
        assert_starts_in_place(&action, "web-new", "nginx:1.7.9");
    }

    #[test]
    fn an_env_change_cannot_go_in_place() {
        let mut revisions = Revisions::new();
        let mut template = pod_template("web", "nginx:1.7.9");
        template.spec.as_mut().unwrap().containers[0].env = Some(vec![EnvVar {
            name: "X".into(),
            value: Some("1".into()),
            ..Default::default()
        }]);
        revisions.new = controller_revision("web-new", &template, 2);
        let pod = pod();
        let decision = update_in_place(&pod, &revisions.update(None));
        assert!(matches!(decision, InPlace::Impossible), "{decision:?}");
        assert!(decision.step(&pod, String::new).is_none());
    }

    #[test]
    fn refresh_adds_the_kruise_pod_ready_condition_and_the_labels_asked_for() {
        let mut pod = pod();
        let mut plan = Plan::default();
        refresh_pod(&mut plan, &pod, None, true, now(), || None);
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);

        add_readiness_gate(&mut pod, keys::KRUISE_POD_READY);
        let mut plan = Plan::default();
        refresh_pod(&mut plan, &pod, None, true, now(), || None);
        assert!(plan.actions.is_empty(), "unscheduled: {:?}", plan.actions);

        pod.spec.as_mut().unwrap().node_name = Some("node-a".into());
        let mut plan = Plan::default();
        let labels = json!({"metadata": {"labels": {"a": "b"}}});
        refresh_pod(&mut plan, &pod, None, true, now(), || Some(labels.clone()));
        let [Action::Refresh { writes, .. }] = &plan.actions[..] else {
            panic!("{:?}", plan.actions)
        };
        assert_eq!(
            writes.status_patch.as_ref().unwrap()["status"]["conditions"][0]["type"],
            keys::KRUISE_POD_READY
        );
        assert_eq!(writes.pod_patch.as_ref(), Some(&labels));
    }

    #[test]
    fn a_scheduled_new_pod_gets_its_condition_with_its_move_to_normal() {
        let mut pod = pod();
        add_readiness_gate(&mut pod, keys::KRUISE_POD_READY);
        set_label(&mut pod, keys::LIFECYCLE_STATE, "PreparingNormal");
        pod.spec.as_mut().unwrap().node_name = Some("node-a".into());
        let mut plan = Plan::default();
        refresh_pod(&mut plan, &pod, None, true, now(), || None);
        let [Action::Lifecycle { transition, .. }] = &plan.actions[..] else {
            panic!("{:?}", plan.actions)
        };
        assert_eq!(transition.to, LifecycleState::Normal);
        let status = transition.status_patch.as_ref().expect("conditions");
        assert_eq!(
            status["status"]["conditions"][0]["type"],
            keys::KRUISE_POD_READY
        );
        assert_eq!(status["status"]["conditions"][0]["status"], "True");
    }

    #[test]
    fn a_finished_in_place_update_turns_ready_and_normal_in_one_move() {
        let mut pod = pod();
        set_label(&mut pod, keys::LIFECYCLE_STATE, "Updating");
        pod.status.as_mut().unwrap().conditions =
            Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: keys::INPLACE_UPDATE_READY.into(),
                status: "False".into(),
                ..Default::default()
            }]);
        let mut plan = Plan::default();
        refresh_pod(&mut plan, &pod, None, true, now(), || None);
        let [Action::Lifecycle { transition, .. }] = &plan.actions[..] else {
            panic!("{:?}", plan.actions)
        };
        assert_eq!(transition.to, LifecycleState::Normal);
        let conditions =
            &transition.status_patch.as_ref().expect("conditions")["status"]["conditions"];
        assert_eq!(conditions[0]["type"], keys::INPLACE_UPDATE_READY);
        assert_eq!(conditions[0]["status"], "True");
    }

    #[test]
    fn merged_conditions_keep_the_first_of_each_type() {
        let first = json!({"status": {"conditions": [{"type": "A", "status": "False"}]}});
        let more = json!({"status": {"conditions": [
            {"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}});
        assert_eq!(
            merge_conditions(Some(first), more.clone()),
            json!({"status": {"conditions": [
                {"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}})
        );
        assert_eq!(merge_conditions(None, more.clone()), more);
    }

    #[test]
    fn the_lifecycle_gate_holds_or_forbids_the_update() {
        let revisions = Revisions::new();
        let hooked = Lifecycle {
            in_place_update: Some(LifecycleHook {
                finalizers_handler: vec!["f".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut pod = pod();
        pod.metadata.finalizers = Some(vec!["f".into()]);
        match update_in_place(&pod, &revisions.update(Some(&hooked))) {
            InPlace::Act(Action::Lifecycle { transition, .. }) => {
                assert_eq!(transition.to, LifecycleState::PreparingUpdate)
            }
            other => panic!("{other:?}"),
        }
        set_label(&mut pod, keys::LIFECYCLE_STATE, "PreparingUpdate");
        let held = update_in_place(&pod, &revisions.update(Some(&hooked)));
        assert!(matches!(held, InPlace::Hold), "{held:?}");
        assert!(matches!(held.step(&pod, String::new), Some(Ok(None))));

        set_label(&mut pod, keys::LIFECYCLE_STATE, "PreparingDelete");
        let refused = update_in_place(&pod, &revisions.update(None));
        assert!(matches!(refused, InPlace::NotAllowed), "{refused:?}");
        let Some(Err(message)) = refused.step(&pod, || "PreparingDelete".into()) else {
            panic!("expected an error")
        };
        assert_eq!(
            message,
            "not allowed to in-place update pod web-0 in state PreparingDelete"
        );
    }
}
