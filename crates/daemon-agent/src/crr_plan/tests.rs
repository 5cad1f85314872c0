use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::{
    ContainerRecreateRequestContainer, ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestSpec, ContainerRecreateRequestStatus, ContainerRecreateRequestStrategy,
};
use proptest::prelude::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn crr(name: &str, created: i64, containers: &[(&str, &str, i32)]) -> ContainerRecreateRequest {
    ContainerRecreateRequest {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            creation_timestamp: Some(Time(t(created))),
            ..Default::default()
        },
        spec: ContainerRecreateRequestSpec {
            pod_name: "pod".into(),
            containers: containers
                .iter()
                .map(|(n, id, restarts)| ContainerRecreateRequestContainer {
                    name: n.to_string(),
                    status_context: Some(ContainerRecreateRequestContainerContext {
                        container_id: id.to_string(),
                        restart_count: *restarts,
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        status: None,
    }
}

fn two() -> ContainerRecreateRequest {
    crr(
        "xxx",
        0,
        &[
            ("app", "containerd://a1", 0),
            ("sidecar", "containerd://s1", 0),
        ],
    )
}

fn strategy(
    mut c: ContainerRecreateRequest,
    s: ContainerRecreateRequestStrategy,
) -> ContainerRecreateRequest {
    c.spec.strategy = Some(s);
    c
}

fn with_phase(mut c: ContainerRecreateRequest, phase: Option<Phase>) -> ContainerRecreateRequest {
    c.status.get_or_insert_with(Default::default).phase = phase;
    c
}

fn obs(id: &str, state: ContainerRunState, started: i64, restarts: i32) -> Observed {
    Observed {
        runtime_id: id.into(),
        container_id: format!("containerd://{id}"),
        state,
        started_at: Some(t(started)),
        restart_count: restarts,
    }
}

fn observed(entries: &[(&str, Observed)]) -> BTreeMap<String, Observed> {
    entries
        .iter()
        .map(|(n, o)| (n.to_string(), o.clone()))
        .collect()
}

fn phases(states: &[ContainerState]) -> Vec<(&str, Phase, bool)> {
    states
        .iter()
        .map(|s| (s.name.as_str(), s.phase, s.is_killed))
        .collect()
}

#[test]
fn the_oldest_recreating_request_goes_first_and_unseen_ones_wait_pending() {
    let older = with_phase(crr("older", 0, &[]), None);
    let newer = with_phase(crr("newer", 5, &[]), None);
    let mut done = crr("done", -10, &[]);
    done.status = Some(ContainerRecreateRequestStatus {
        phase: Some(Phase::Completed),
        completion_time: Some(Time(t(1))),
        ..Default::default()
    });
    let p = pick(&[&newer, &done, &older]);
    assert_eq!(p.picked, Some(2));
    assert_eq!(p.set_pending, vec![0]);
    // A Recreating one outranks an older unseen one.
    let recreating = with_phase(crr("r", 9, &[]), Some(Phase::Recreating));
    let p = pick(&[&older, &recreating]);
    assert_eq!(p.picked, Some(1));
    assert_eq!(p.set_pending, vec![0]);
    // Already Pending: not written again.
    let pending = with_phase(crr("p", 10, &[]), Some(Phase::Pending));
    assert_eq!(
        pick(&[&recreating, &pending]).set_pending,
        Vec::<usize>::new()
    );
}

#[test]
fn unready_waits_for_the_annotation_then_the_grace_period() {
    let c = strategy(
        two(),
        ContainerRecreateRequestStrategy {
            unready_grace_period_seconds: Some(3),
            ..Default::default()
        },
    );
    assert_eq!(unready(&c, t(1)), Unready::AwaitAcquired);
    let mut acquired = c.clone();
    acquired.metadata.annotations = Some(
        [(
            keys::CRR_UNREADY_ACQUIRED.to_string(),
            "2023-11-14T22:13:21Z".to_string(),
        )]
        .into(),
    );
    assert_eq!(
        unready(&acquired, t(2)),
        Unready::Wait(Duration::from_millis(2100))
    );
    assert_eq!(unready(&acquired, t(4)), Unready::Go);
    acquired
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(keys::CRR_UNREADY_ACQUIRED.into(), "yesterday".into());
    assert!(matches!(unready(&acquired, t(4)), Unready::Invalid(m) if m.contains("yesterday")));
    assert_eq!(unready(&two(), t(0)), Unready::Go);
}

#[test]
fn runtime_must_match_the_agents() {
    assert_eq!(runtime_mismatch(&two(), "containerd"), None);
    assert_eq!(
        runtime_mismatch(&two(), "cri-o").as_deref(),
        Some("not found runtime service for containerd in daemon")
    );
    let mixed = crr(
        "m",
        0,
        &[("a", "containerd://1", 0), ("b", "docker://2", 0)],
    );
    assert!(
        runtime_mismatch(&mixed, "containerd")
            .unwrap()
            .starts_with("has different runtime types")
    );
}

#[test]
fn newest_attempt_per_name_counts() {
    let rc = |id: &str, name: &str, created: i64, restarts: i32| RuntimeContainer {
        id: id.into(),
        name: name.into(),
        state: ContainerRunState::Running,
        created_at: created,
        started_at: created + 1,
        restart_count: restarts,
    };
    let o = newest_per_name(
        vec![
            rc("old", "app", 10, 0),
            rc("new", "app", 20, 1),
            rc("s", "sidecar", 5, 0),
        ],
        "containerd",
    );
    assert_eq!(o["app"].container_id, "containerd://new");
    assert_eq!(o["app"].runtime_id, "new");
    assert_eq!(o["app"].restart_count, 1);
    assert_eq!(o.len(), 2);
}

#[test]
fn states_follow_the_rules_in_order() {
    let mut c = strategy(
        two(),
        ContainerRecreateRequestStrategy {
            min_started_seconds: 10,
            ..Default::default()
        },
    );
    // Untouched containers: Pending.
    let same = observed(&[
        ("app", obs("a1", ContainerRunState::Running, -50, 0)),
        ("sidecar", obs("s1", ContainerRunState::Running, -50, 0)),
    ]);
    let s = container_states(&c, &same, t(1));
    assert_eq!(
        phases(&s),
        [
            ("app", Phase::Pending, false),
            ("sidecar", Phase::Pending, false)
        ]
    );
    // Missing and exited.
    let s = container_states(
        &c,
        &observed(&[("sidecar", obs("s1", ContainerRunState::Exited, -50, 0))]),
        t(1),
    );
    assert_eq!(s[0].message, "not found container on Node");
    assert_eq!(phases(&s)[1], ("sidecar", Phase::Recreating, false));
    // A new container: Recreating until the manager reports it Ready for minStarted.
    let recreated = observed(&[
        ("app", obs("a2", ContainerRunState::Running, 5, 1)),
        ("sidecar", obs("s1", ContainerRunState::Running, -50, 0)),
    ]);
    assert_eq!(
        container_states(&c, &recreated, t(20))[0].phase,
        Phase::Recreating
    );
    c.metadata.annotations = Some(
        [(
            keys::CRR_SYNC_CONTAINER_STATUSES.to_string(),
            r#"[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://a2"}]"#
                .to_string(),
        )]
        .into(),
    );
    assert_eq!(
        container_states(&c, &recreated, t(14))[0].phase,
        Phase::Recreating
    );
    assert_eq!(
        container_states(&c, &recreated, t(16))[0].phase,
        Phase::Succeeded
    );
    // Done stays done whatever the runtime says.
    c.status = Some(ContainerRecreateRequestStatus {
        container_recreate_states: vec![ContainerState {
            name: "app".into(),
            phase: Phase::Failed,
            message: "kill container error: x".into(),
            is_killed: false,
        }],
        ..Default::default()
    });
    assert_eq!(
        container_states(&c, &same, t(1))[0].message,
        "kill container error: x"
    );
}

#[test]
fn force_recreate_kills_even_a_container_that_restarted_since() {
    let c = strategy(
        two(),
        ContainerRecreateRequestStrategy {
            force_recreate: true,
            ..Default::default()
        },
    );
    let restarted = observed(&[
        ("app", obs("a2", ContainerRunState::Running, 5, 1)),
        ("sidecar", obs("s1", ContainerRunState::Running, -50, 0)),
    ]);
    let mut s = container_states(&c, &restarted, t(20));
    assert_eq!(s[0].phase, Phase::Pending);
    assert_eq!(walk(&c, &mut s, &restarted), Step::Kill(0));
    // Without it, the restart counts as the recreation.
    let mut s = container_states(&two(), &restarted, t(20));
    assert_eq!(s[0].phase, Phase::Recreating);
    assert_eq!(walk(&two(), &mut s, &restarted), Step::Kill(1));
    assert!(s[0].is_killed);
}

#[test]
fn ordered_recreate_waits_for_the_first_container() {
    let c = strategy(
        two(),
        ContainerRecreateRequestStrategy {
            ordered_recreate: true,
            ..Default::default()
        },
    );
    let first_restarting = observed(&[
        ("app", obs("a2", ContainerRunState::Running, 5, 1)),
        ("sidecar", obs("s1", ContainerRunState::Running, -50, 0)),
    ]);
    let mut s = container_states(&c, &first_restarting, t(6));
    assert_eq!(walk(&c, &mut s, &first_restarting), Step::Wait(None));
    assert_eq!(phases(&s)[0], ("app", Phase::Recreating, true));
}

#[test]
fn failure_policy_fail_completes_at_once_ignore_goes_on() {
    let mut states = vec![
        ContainerState {
            name: "app".into(),
            phase: Phase::Failed,
            message: "kill container error: boom".into(),
            is_killed: false,
        },
        ContainerState {
            name: "sidecar".into(),
            phase: Phase::Pending,
            message: String::new(),
            is_killed: false,
        },
    ];
    let running = observed(&[("sidecar", obs("s1", ContainerRunState::Running, -50, 0))]);
    assert_eq!(walk(&two(), &mut states.clone(), &running), Step::Complete);
    let ignore = strategy(
        two(),
        ContainerRecreateRequestStrategy {
            failure_policy: Some(FailurePolicy::Ignore),
            ..Default::default()
        },
    );
    assert_eq!(walk(&ignore, &mut states, &running), Step::Kill(1));
    states[1].phase = Phase::Succeeded;
    assert_eq!(walk(&ignore, &mut states, &running), Step::Complete);
}

#[test]
fn min_started_requeues_and_grace_is_bounded() {
    let c = strategy(
        two(),
        ContainerRecreateRequestStrategy {
            min_started_seconds: 10,
            termination_grace_period_seconds: Some(5),
            ..Default::default()
        },
    );
    let recreating = observed(&[
        ("app", obs("a2", ContainerRunState::Running, 5, 1)),
        ("sidecar", obs("s2", ContainerRunState::Running, 5, 1)),
    ]);
    let mut s = container_states(&c, &recreating, t(6));
    assert_eq!(
        walk(&c, &mut s, &recreating),
        Step::Wait(Some(Duration::from_secs(10)))
    );
    assert_eq!(grace_seconds(&c), 5);
    assert_eq!(grace_seconds(&two()), DEFAULT_GRACE_SECONDS);
    assert_eq!(stop_timeout_seconds(5, Duration::from_secs(1)), 4);
    assert_eq!(
        stop_timeout_seconds(5, Duration::from_secs(9)),
        MIN_STOP_GRACE_SECONDS
    );
    assert_eq!(
        killing_message("app", "xxx"),
        "Stopping container app by ContainerRecreateRequest xxx"
    );
}

fn arb_state() -> impl Strategy<Value = Phase> {
    prop_oneof![
        Just(Phase::Pending),
        Just(Phase::Recreating),
        Just(Phase::Succeeded),
        Just(Phase::Failed)
    ]
}

proptest! {
    /// At most one container is stopped per pass, never a finished one, never past a
    /// Recreating one under orderedRecreate, and the request completes only when every
    /// container is finished or (Fail) one failed.
    #[test]
    fn walk_is_safe(
        phases in proptest::collection::vec(arb_state(), 1..5),
        ordered in any::<bool>(),
        ignore in any::<bool>(),
    ) {
        let names: Vec<String> = (0..phases.len()).map(|i| format!("c{i}")).collect();
        let specs: Vec<(&str, &str, i32)> = names.iter().map(|n| (n.as_str(), "containerd://x", 0)).collect();
        let c = strategy(crr("p", 0, &specs), ContainerRecreateRequestStrategy {
            ordered_recreate: ordered,
            failure_policy: Some(if ignore { FailurePolicy::Ignore } else { FailurePolicy::Fail }),
            ..Default::default()
        });
        let mut states: Vec<ContainerState> = names.iter().zip(&phases).map(|(n, p)| ContainerState {
            name: n.clone(), phase: *p, message: String::new(), is_killed: false,
        }).collect();
        let all = observed(&names.iter().map(|n| (n.as_str(), obs("x", ContainerRunState::Running, 0, 0))).collect::<Vec<_>>());
        match walk(&c, &mut states, &all) {
            Step::Kill(i) => {
                prop_assert_eq!(phases[i], Phase::Pending);
                if ordered {
                    prop_assert!(!phases[..i].contains(&Phase::Recreating));
                }
                if !ignore {
                    prop_assert!(!phases[..i].contains(&Phase::Failed));
                }
            }
            Step::Complete => {
                let all_done = phases.iter().all(|p| p.is_container_done());
                let failed = phases.contains(&Phase::Failed);
                prop_assert!(all_done || (!ignore && failed));
            }
            Step::Wait(_) => {
                prop_assert!(phases.iter().any(|p| !p.is_container_done()));
            }
        }
    }
}
