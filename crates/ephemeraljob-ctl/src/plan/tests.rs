//! The plan against upstream's behaviour (ephemeraljob_controller.go, ephemeraljob_utils.go).

use super::*;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kruise_api::apps_v1alpha1::{EphemeralContainerTemplateSpec, EphemeralJobSpec};

pub(super) const UID: &str = "job-uid";

pub(super) fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

pub(super) fn job(replicas: Option<i32>, parallelism: Option<i32>, names: &[&str]) -> EphemeralJob {
    let mut j = EphemeralJob::new(
        "ejob",
        EphemeralJobSpec {
            selector: LabelSelector {
                match_labels: Some([("run".to_string(), "nginx".to_string())].into()),
                ..Default::default()
            },
            replicas,
            parallelism,
            template: EphemeralContainerTemplateSpec {
                ephemeral_containers: names
                    .iter()
                    .map(|n| EphemeralContainer {
                        name: n.to_string(),
                        image: Some("busybox".into()),
                        ..Default::default()
                    })
                    .collect(),
            },
            ..Default::default()
        },
    );
    j.metadata.namespace = Some("ns".into());
    j.metadata.uid = Some(UID.into());
    j
}

pub(super) fn pod(name: &str, age: i64) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some([("run".to_string(), "nginx".to_string())].into()),
            creation_timestamp: Some(Time(ts(-age))),
            resource_version: Some(format!("rv-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        }),
    }
}

/// Adds the job's container `name` (owned by `owner`) with the given state.
pub(super) fn with_container(
    mut p: Pod,
    name: &str,
    owner: &str,
    state: Option<ContainerState>,
) -> Pod {
    p.spec
        .as_mut()
        .unwrap()
        .ephemeral_containers
        .get_or_insert_with(Vec::new)
        .push(EphemeralContainer {
            name: name.into(),
            env: Some(vec![EnvVar {
                name: EPHEMERAL_CONTAINER_ENV_KEY.into(),
                value: Some(owner.into()),
                value_from: None,
            }]),
            ..Default::default()
        });
    if let Some(state) = state {
        p.status
            .as_mut()
            .unwrap()
            .ephemeral_container_statuses
            .get_or_insert_with(Vec::new)
            .push(ContainerStatus {
                name: name.into(),
                state: Some(state),
                ..Default::default()
            });
    }
    p
}

pub(super) fn running() -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning::default()),
        ..Default::default()
    }
}

pub(super) fn exited(code: i32) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            finished_at: Some(Time(ts(0))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(super) fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(job: &EphemeralJob, pods: &[Pod], now: Timestamp) -> Outcome {
    plan(&World {
        job,
        pods: pods.iter().collect(),
        now,
    })
}

fn added(o: &Outcome) -> Vec<&str> {
    o.add.iter().map(|a| a.pod.as_str()).collect()
}

#[test]
fn new_job_adds_to_the_oldest_pod_first_with_the_owner_env() {
    let j = job(Some(4), None, &["debugger"]);
    let pods = vec![pod("b", 10), pod("a", 20), pod("c", 5)];
    let o = run(&j, &pods, ts(0));
    assert_eq!(added(&o), vec!["a"]);
    let c = &o.add[0].containers[0];
    assert_eq!(c.name, "debugger");
    assert!(created_by(UID, c));
    assert_eq!(o.add[0].resource_version, "rv-a");
    let s = o.status.unwrap();
    assert_eq!(s.matches, 3);
    assert_eq!(s.phase, Some(EphemeralJobPhase::Unknown));
    assert_eq!(s.start_time, Some(Time(ts(0))));
    assert_eq!(s.conditions[0].type_, condition::INITIALIZED);
}

#[test]
fn parallelism_counts_pods_in_progress() {
    let j = job(None, Some(2), &["debugger"]);
    let pods = vec![
        with_container(pod("a", 40), "debugger", UID, Some(running())),
        with_container(pod("b", 30), "debugger", UID, None),
        pod("c", 20),
        pod("d", 10),
    ];
    assert!(run(&j, &pods, ts(0)).add.is_empty());
    let pods = vec![
        with_container(pod("a", 40), "debugger", UID, Some(exited(0))),
        with_container(pod("b", 30), "debugger", UID, Some(running())),
        pod("c", 20),
        pod("d", 10),
    ];
    assert_eq!(added(&run(&j, &pods, ts(0))), vec!["c"]);
}

#[test]
fn replicas_limit_the_targets() {
    let j = job(Some(2), Some(10), &["debugger"]);
    let pods = vec![pod("a", 3), pod("b", 2), pod("c", 1)];
    let o = run(&j, &pods, ts(0));
    assert_eq!(added(&o), vec!["a", "b"]);
    assert_eq!(o.status.unwrap().matches, 2);
}

#[test]
fn inactive_unmatched_and_foreign_pods_are_not_targets() {
    let j = job(None, Some(10), &["debugger"]);
    let mut done = pod("done", 5);
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let mut other = pod("other", 5);
    other.metadata.labels = Some([("run".to_string(), "web".to_string())].into());
    let mut elsewhere = pod("elsewhere", 5);
    elsewhere.metadata.namespace = Some("other".into());
    let foreign = with_container(
        pod("foreign", 5),
        "debugger",
        "another-job",
        Some(running()),
    );
    let pods = vec![done, other, elsewhere, foreign, pod("ok", 1)];
    let o = run(&j, &pods, ts(0));
    assert_eq!(added(&o), vec!["ok"]);
    assert_eq!(o.status.unwrap().matches, 1);
}

#[test]
fn second_job_with_the_same_container_name_matches_nothing() {
    let j = job(Some(1), Some(1), &["debugger"]);
    let pods = vec![with_container(
        pod("a", 1),
        "debugger",
        "first-job",
        Some(running()),
    )];
    let o = run(&j, &pods, ts(0));
    let s = o.status.unwrap();
    assert_eq!(s.matches, 0);
    assert_eq!(s.phase, Some(EphemeralJobPhase::Waiting));
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == condition::MATCHED_EMPTY
                && c.reason == "MatchEmpty"
                && c.message == "job match no pods")
    );
    assert!(o.add.is_empty());
}

#[test]
fn all_succeeded_finishes_the_job() {
    let j = job(Some(2), Some(2), &["debugger"]);
    let pods = vec![
        with_container(pod("a", 2), "debugger", UID, Some(exited(0))),
        with_container(pod("b", 1), "debugger", UID, Some(exited(0))),
    ];
    let o = run(&j, &pods, ts(7));
    let s = o.status.unwrap();
    assert_eq!((s.succeeded, s.failed, s.running, s.waiting), (2, 0, 0, 0));
    assert_eq!(s.phase, Some(EphemeralJobPhase::Succeeded));
    assert_eq!(s.completion_time, Some(Time(ts(7))));
    assert!(s.conditions.iter().any(|c| c.type_ == condition::SUCCEEDED
        && c.message == "job success to run all tasks"));
    assert_eq!(o.requeue_after, Some(Duration::from_secs(1800)));
}

#[test]
fn failures_are_counted_and_all_failed_fails_the_job() {
    let j = job(None, Some(10), &["debugger"]);
    let pods = vec![
        with_container(pod("a", 2), "debugger", UID, Some(exited(1))),
        with_container(
            pod("b", 1),
            "debugger",
            UID,
            Some(waiting("RunContainerError")),
        ),
    ];
    let s = run(&j, &pods, ts(0)).status.unwrap();
    assert_eq!(s.failed, 2);
    assert_eq!(s.phase, Some(EphemeralJobPhase::Failed));
    let failed = s
        .conditions
        .iter()
        .find(|c| c.type_ == condition::FAILED)
        .unwrap();
    // The CreateFailed condition set after JobFailed replaces it, as upstream's addConditions.
    assert_eq!(failed.reason, "CreateFailed");
    assert_eq!(
        failed.message,
        "EphemeralJob ns/ejob failed to create ephemeral container"
    );
}

#[test]
fn deadline_fails_an_unfinished_job() {
    let mut j = job(Some(1), Some(1), &["debugger"]);
    j.spec.active_deadline_seconds = Some(20);
    j.status = Some(EphemeralJobStatus {
        start_time: Some(Time(ts(0))),
        ..Default::default()
    });
    let pods = vec![with_container(
        pod("a", 1),
        "debugger",
        UID,
        Some(running()),
    )];
    let early = run(&j, &pods, ts(5));
    assert_eq!(early.requeue_after, Some(Duration::from_secs(15)));
    assert_eq!(
        early.status.unwrap().phase,
        Some(EphemeralJobPhase::Running)
    );
    let late = run(&j, &pods, ts(20));
    let s = late.status.unwrap();
    assert_eq!(s.phase, Some(EphemeralJobPhase::Failed));
    assert_eq!(s.completion_time, Some(Time(ts(20))));
    assert!(s.conditions.iter().any(|c| c.reason == "DeadlineExceeded"
        && c.message == "EphemeralJob ns/ejob was active longer than specified deadline"));
    assert!(late.add.is_empty());
}

#[test]
fn ttl_deletes_a_finished_job() {
    let mut j = job(Some(1), Some(1), &["debugger"]);
    j.spec.ttl_seconds_after_finished = Some(5);
    j.status = Some(EphemeralJobStatus {
        completion_time: Some(Time(ts(0))),
        phase: Some(EphemeralJobPhase::Succeeded),
        ..Default::default()
    });
    let o = run(&j, &[], ts(3));
    assert!(!o.delete_job);
    assert_eq!(o.requeue_after, Some(Duration::from_secs(2)));
    assert!(o.status.is_none());
    assert!(run(&j, &[], ts(5)).delete_job);
    j.spec.ttl_seconds_after_finished = None;
    assert!(!run(&j, &[], ts(1799)).delete_job);
    assert!(run(&j, &[], ts(1800)).delete_job);
}

#[test]
fn paused_job_writes_status_and_adds_nothing() {
    let mut j = job(None, Some(5), &["debugger"]);
    j.spec.paused = true;
    let o = run(&j, &[pod("a", 1)], ts(0));
    assert!(o.add.is_empty());
    assert_eq!(o.status.unwrap().phase, Some(EphemeralJobPhase::Paused));
}

#[test]
fn a_paused_job_past_its_deadline_is_not_failed_nor_requeued() {
    let mut j = job(None, Some(1), &["debugger"]);
    j.spec.paused = true;
    j.spec.active_deadline_seconds = Some(5);
    j.status = Some(EphemeralJobStatus {
        start_time: Some(Time(ts(0))),
        ..Default::default()
    });
    let o = run(&j, &[pod("a", 1)], ts(10));
    assert_eq!(o.requeue_after, None);
    assert_eq!(o.status.unwrap().phase, Some(EphemeralJobPhase::Paused));
}

#[test]
fn empty_template_is_an_error() {
    let j = job(None, None, &[]);
    let o = run(&j, &[pod("a", 1)], ts(0));
    assert!(o.add.is_empty());
    let s = o.status.unwrap();
    assert_eq!(s.phase, Some(EphemeralJobPhase::Error));
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == condition::ERROR && c.message == "job spec invalid fields.")
    );
}

#[test]
fn pod_state_follows_the_job_containers_only() {
    let j = job(None, None, &["a", "b"]);
    let p = with_container(pod("p", 1), "a", UID, Some(exited(0)));
    // One of two containers done, the other without status: not yet Succeeded.
    assert_eq!(pod_state(&j, &p), PodState::Unknown);
    let p = with_container(p, "b", UID, Some(running()));
    assert_eq!(pod_state(&j, &p), PodState::Running);
    let p = with_container(pod("p", 1), "a", UID, Some(exited(0)));
    let p = with_container(p, "b", UID, Some(exited(0)));
    assert_eq!(pod_state(&j, &p), PodState::Succeeded);
    let p = with_container(p, "other", "x", Some(exited(3)));
    assert_eq!(pod_state(&j, &p), PodState::Succeeded);
    let p = with_container(pod("p", 1), "a", UID, Some(waiting("ContainerCreating")));
    assert_eq!(pod_state(&j, &p), PodState::Waiting);
}

#[test]
fn a_steady_job_writes_no_status() {
    let j = job(None, Some(1), &["debugger"]);
    let pods = vec![with_container(
        pod("a", 1),
        "debugger",
        UID,
        Some(running()),
    )];
    let first = run(&j, &pods, ts(0)).status.unwrap();
    let mut j2 = j.clone();
    j2.status = Some(first);
    assert_eq!(run(&j2, &pods, ts(30)).status, None);
}
