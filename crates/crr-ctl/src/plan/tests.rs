use super::*;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState as KubeContainerState, ContainerStateRunning, ContainerStatus, Pod,
    PodCondition, PodReadinessGate, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::{
    ContainerRecreateRequestContainer, ContainerRecreateRequestSpec,
    ContainerRecreateRequestStatus, ContainerRecreateRequestStrategy,
};
use proptest::prelude::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

const POD_UID: &str = "uid-1";

fn crr(containers: &[&str]) -> ContainerRecreateRequest {
    ContainerRecreateRequest {
        metadata: ObjectMeta {
            name: Some("xxx".into()),
            namespace: Some("ns".into()),
            creation_timestamp: Some(Time(t(0))),
            labels: Some(
                [
                    (keys::CRR_POD_UID.to_string(), POD_UID.to_string()),
                    (keys::CRR_NODE_NAME.to_string(), "real-0".to_string()),
                    (keys::CRR_ACTIVE.to_string(), "true".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: ContainerRecreateRequestSpec {
            pod_name: "pod-name".into(),
            containers: containers
                .iter()
                .map(|n| ContainerRecreateRequestContainer {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        status: None,
    }
}

fn with_phase(mut c: ContainerRecreateRequest, phase: Phase) -> ContainerRecreateRequest {
    c.status.get_or_insert_with(Default::default).phase = Some(phase);
    c
}

fn completed_at(mut c: ContainerRecreateRequest, at: i64) -> ContainerRecreateRequest {
    c.status = Some(ContainerRecreateRequestStatus {
        phase: Some(Phase::Completed),
        completion_time: Some(Time(t(at))),
        ..Default::default()
    });
    c
}

fn unready(mut c: ContainerRecreateRequest, grace: i64) -> ContainerRecreateRequest {
    c.spec.strategy = Some(ContainerRecreateRequestStrategy {
        unready_grace_period_seconds: Some(grace),
        ..Default::default()
    });
    c
}

fn running(name: &str, id: &str, restarts: i32, started: i64, ready: bool) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        container_id: Some(id.into()),
        restart_count: restarts,
        ready,
        state: Some(KubeContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(t(started))),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod(statuses: Vec<ContainerStatus>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("pod-name".into()),
            namespace: Some("ns".into()),
            uid: Some(POD_UID.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("real-0".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(statuses),
            ..Default::default()
        }),
    }
}

fn gated(mut p: Pod, ready: bool) -> Pod {
    p.spec.as_mut().unwrap().readiness_gates = Some(vec![PodReadinessGate {
        condition_type: keys::KRUISE_POD_READY.into(),
    }]);
    let status = if ready { "True" } else { "False" };
    p.status.as_mut().unwrap().conditions = Some(vec![
        PodCondition {
            type_: keys::KRUISE_POD_READY.into(),
            status: "True".into(),
            message: Some("[]".into()),
            ..Default::default()
        },
        PodCondition {
            type_: "ContainersReady".into(),
            status: status.into(),
            ..Default::default()
        },
        PodCondition {
            type_: "Ready".into(),
            status: status.into(),
            ..Default::default()
        },
    ]);
    p
}

fn completes_with(p: &Plan) -> Option<&str> {
    p.actions.iter().find_map(|a| match a {
        Action::Complete { message, .. } => Some(message.as_str()),
        _ => None,
    })
}

#[test]
fn pod_gone_deleted_or_replaced_completes_the_request() {
    let c = with_phase(crr(&["app"]), Phase::Recreating);
    assert_eq!(
        completes_with(&plan(&c, None, t(5))),
        Some(MESSAGE_POD_GONE)
    );
    let mut replaced = pod(vec![]);
    replaced.metadata.uid = Some("another".into());
    assert_eq!(
        completes_with(&plan(&c, Some(&replaced), t(5))),
        Some(MESSAGE_POD_GONE)
    );
    let mut deleting = pod(vec![]);
    deleting.metadata.deletion_timestamp = Some(Time(t(4)));
    assert_eq!(
        completes_with(&plan(&c, Some(&deleting), t(5))),
        Some(MESSAGE_POD_GONE)
    );
    assert_eq!(completes_with(&plan(&c, Some(&pod(vec![])), t(5))), None);
}

#[test]
fn no_phase_after_a_minute_completes_and_before_requeues_at_the_minute() {
    let c = crr(&["app"]);
    let p = plan(&c, Some(&pod(vec![])), t(20));
    assert_eq!(completes_with(&p), None);
    let after = p.requeue_after.unwrap();
    assert!(
        after >= Duration::from_secs(40) && after < Duration::from_secs(41),
        "{after:?}"
    );
    let p = plan(&c, Some(&pod(vec![])), t(60));
    assert_eq!(completes_with(&p), Some(MESSAGE_NO_RESPONSE));
    // With a phase the agent has answered: no timeout.
    let answered = with_phase(crr(&["app"]), Phase::Pending);
    assert_eq!(
        completes_with(&plan(&answered, Some(&pod(vec![])), t(600))),
        None
    );
}

#[test]
fn deadline_completes_leaving_the_container_states_as_the_agent_wrote_them() {
    let mut c = with_phase(crr(&["app", "sidecar", "third"]), Phase::Recreating);
    c.spec.active_deadline_seconds = Some(30);
    c.status.as_mut().unwrap().container_recreate_states = vec![
        ContainerState {
            name: "app".into(),
            phase: Phase::Succeeded,
            message: String::new(),
            is_killed: true,
        },
        ContainerState {
            name: "sidecar".into(),
            phase: Phase::Pending,
            message: String::new(),
            is_killed: false,
        },
    ];
    let before = plan(&c, Some(&pod(vec![])), t(10));
    assert_eq!(completes_with(&before), None);
    assert!(before.requeue_after.unwrap() <= Duration::from_secs(21));
    let p = plan(&c, Some(&pod(vec![])), t(30));
    let Some(Action::Complete { message, states }) = p.actions.first() else {
        panic!("{p:?}");
    };
    assert_eq!(message, MESSAGE_DEADLINE);
    // OpenKruise's completeCRR writes phase, completionTime and message only (its e2e
    // "recreates containers with preStopHook" expects the containers still Pending).
    assert_eq!(states, &None);
}

#[test]
fn sync_lists_only_containers_started_since_creation() {
    let c = with_phase(crr(&["app", "sidecar"]), Phase::Recreating);
    let p = pod(vec![
        running("app", "containerd://new", 1, 3, true),
        running("sidecar", "containerd://old", 0, -100, true),
        running("other", "containerd://x", 0, 5, true),
    ]);
    let plan = plan(&c, Some(&p), t(4));
    assert_eq!(
        plan.actions,
        [Action::SyncContainerStatuses(
            r#"[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://new"}]"#
                .into()
        )]
    );
    // Written already: nothing to do.
    let mut synced = c.clone();
    synced.metadata.annotations = Some(
        [(
            keys::CRR_SYNC_CONTAINER_STATUSES.to_string(),
            r#"[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://new"}]"#
                .to_string(),
        )]
        .into(),
    );
    assert!(super::plan(&synced, Some(&p), t(4)).actions.is_empty());
    // Not Recreating: the agent does not need it.
    let pending = with_phase(crr(&["app"]), Phase::Pending);
    assert!(super::plan(&pending, Some(&p), t(4)).actions.is_empty());
}

#[test]
fn unready_with_the_gate_takes_finalizer_then_condition_then_annotation() {
    let c = unready(with_phase(crr(&["app"]), Phase::Recreating), 3);
    let p = gated(
        pod(vec![running("app", "containerd://a", 0, -10, true)]),
        true,
    );
    let actions: Vec<Action> = plan(&c, Some(&p), t(2))
        .actions
        .into_iter()
        .filter(|a| !matches!(a, Action::SyncContainerStatuses(_)))
        .collect();
    assert_eq!(actions.len(), 3, "{actions:?}");
    assert_eq!(
        actions[0],
        Action::SetFinalizers(vec![keys::CRR_UNREADY_ACQUIRED.to_string()])
    );
    let Action::PatchPodStatus(patch) = &actions[1] else {
        panic!("{actions:?}");
    };
    let conditions = patch["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions[0]["type"], "KruisePodReady");
    assert_eq!(conditions[0]["status"], "False");
    assert_eq!(
        conditions[0]["message"],
        r#"[{"userAgent":"ContainerRecreateRequest","key":"ns/xxx"}]"#
    );
    assert_eq!(conditions[1]["type"], "Ready");
    assert_eq!(conditions[1]["status"], "False");
    assert_eq!(
        actions[2],
        Action::AnnotateUnreadyAcquired("2023-11-14T22:13:22Z".into())
    );
}

#[test]
fn unready_without_the_gate_only_annotates() {
    let c = unready(with_phase(crr(&["app"]), Phase::Recreating), 3);
    let p = pod(vec![running("app", "containerd://a", 0, -10, true)]);
    let actions: Vec<Action> = plan(&c, Some(&p), t(2))
        .actions
        .into_iter()
        .filter(|a| !matches!(a, Action::SyncContainerStatuses(_)))
        .collect();
    assert!(
        matches!(actions.as_slice(), [Action::AnnotateUnreadyAcquired(_)]),
        "{actions:?}"
    );
}

#[test]
fn acquired_once_is_not_acquired_again() {
    let mut c = unready(with_phase(crr(&["app"]), Phase::Recreating), 3);
    c.metadata.annotations = Some(
        [(
            keys::CRR_UNREADY_ACQUIRED.to_string(),
            "2023-11-14T22:13:22Z".to_string(),
        )]
        .into(),
    );
    let p = gated(pod(vec![]), true);
    let actions = plan(&c, Some(&p), t(2)).actions;
    assert!(
        actions
            .iter()
            .all(|a| matches!(a, Action::SyncContainerStatuses(_))),
        "{actions:?}"
    );
}

#[test]
fn finished_releases_the_pod_drops_the_label_and_waits_for_the_ttl() {
    let mut c = completed_at(unready(crr(&["app"]), 3), 10);
    c.spec.ttl_seconds_after_finished = Some(30);
    c.metadata.finalizers = Some(vec!["other".into(), keys::CRR_UNREADY_ACQUIRED.to_string()]);
    // The Pod held NotReady by this request.
    let held = {
        let p = gated(pod(vec![]), true);
        let patch =
            kruise_lifecycle::not_ready_entry_status_patch(&p, &readiness_entry(&c), true, t(1))
                .unwrap();
        let mut p = p;
        let conditions = p.status.as_mut().unwrap().conditions.as_mut().unwrap();
        let kruise: PodCondition =
            serde_json::from_value(patch["status"]["conditions"][0].clone()).unwrap();
        conditions[0] = kruise;
        p
    };
    let p = plan(&c, Some(&held), t(15));
    let Action::PatchPodStatus(patch) = &p.actions[0] else {
        panic!("{p:?}");
    };
    assert_eq!(patch["status"]["conditions"][0]["status"], "True");
    assert_eq!(patch["status"]["conditions"][0]["message"], "[]");
    assert_eq!(p.actions[1], Action::SetFinalizers(vec!["other".into()]));
    assert_eq!(p.actions[2], Action::RemoveActiveLabel);
    let after = p.requeue_after.unwrap();
    assert!(
        after >= Duration::from_secs(25) && after < Duration::from_secs(26),
        "requeued at the TTL, not polled: {after:?}"
    );
    // Past the TTL: deleted.
    let mut released = c.clone();
    released.metadata.finalizers = None;
    released
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(keys::CRR_ACTIVE);
    assert_eq!(
        plan(&released, Some(&held), t(40)).actions,
        [Action::Delete]
    );
    // Without a TTL: kept, no requeue.
    released.spec.ttl_seconds_after_finished = None;
    assert_eq!(plan(&released, Some(&held), t(40)), Plan::default());
}

#[test]
fn being_deleted_only_releases() {
    let mut c = with_phase(crr(&["app"]), Phase::Recreating);
    c.metadata.deletion_timestamp = Some(Time(t(3)));
    c.metadata.finalizers = Some(vec![keys::CRR_UNREADY_ACQUIRED.to_string()]);
    let p = plan(&c, None, t(4));
    assert_eq!(p.actions, [Action::SetFinalizers(vec![])]);
}

fn arb_phase() -> impl Strategy<Value = Option<Phase>> {
    prop_oneof![
        Just(None),
        Just(Some(Phase::Pending)),
        Just(Some(Phase::Recreating)),
        Just(Some(Phase::Completed)),
    ]
}

proptest! {
    /// Whatever the request and the time: a finished request is never completed again, a
    /// request is deleted only once finished and past its TTL, and a requeue is never
    /// later than the next deadline the manager watches.
    #[test]
    fn decisions_respect_the_lifecycle(
        phase in arb_phase(),
        completed_at_secs in proptest::option::of(0i64..100),
        ttl in proptest::option::of(0i32..100),
        deadline in proptest::option::of(3i64..100),
        now in 0i64..200,
        pod_present in any::<bool>(),
    ) {
        let mut c = crr(&["app"]);
        c.status = Some(ContainerRecreateRequestStatus {
            phase: if completed_at_secs.is_some() { Some(Phase::Completed) } else { phase },
            completion_time: completed_at_secs.map(|s| Time(t(s))),
            ..Default::default()
        });
        c.spec.ttl_seconds_after_finished = ttl;
        c.spec.active_deadline_seconds = deadline;
        let p = pod(vec![]);
        let decided = plan(&c, pod_present.then_some(&p), t(now));
        let finished = completed_at_secs.is_some();
        if finished {
            prop_assert!(completes_with(&decided).is_none());
        }
        if decided.actions.contains(&Action::Delete) {
            let (done, ttl) = (completed_at_secs.unwrap(), i64::from(ttl.unwrap()));
            prop_assert!(now >= done + ttl);
        }
        if let Some(after) = decided.requeue_after {
            // The next instant the manager watches, a moment past it: the TTL's end once
            // finished, else the response timeout (no phase) or the deadline.
            let next = if let Some(done) = completed_at_secs {
                done + i64::from(ttl.unwrap())
            } else {
                let response = (phase.is_none()).then_some(60);
                response.into_iter().chain(deadline).min().unwrap()
            };
            let expected = (next - now) as f64 + 0.1;
            prop_assert!((after.as_secs_f64() - expected).abs() < 0.01, "{after:?} vs {expected}");
            prop_assert!(completes_with(&decided).is_none());
        }
        if !finished && !pod_present {
            prop_assert_eq!(completes_with(&decided), Some(MESSAGE_POD_GONE));
        }
    }
}
