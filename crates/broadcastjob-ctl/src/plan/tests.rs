//! Plan tests: the controller's rules (see [`super`]) and their edge cases.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    BroadcastJob, BroadcastJobPhase, BroadcastJobSpec, BroadcastJobStatus, CompletionPolicy,
    CompletionPolicyType, FailurePolicy, FailurePolicyType, JobConditionType,
};
use kruise_api::pod::{ContainerStatus, Pod, PodStatus};
use kruise_workload::Action;
use kruise_workload::testing::{now, pod_template};

use super::*;

pub fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("type".into(), "kwok".into())])),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn tainted(name: &str, key: &str) -> Node {
    let mut n = node(name);
    n.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    n
}

pub fn job(spec: impl FnOnce(&mut BroadcastJobSpec)) -> BroadcastJob {
    let mut template = pod_template("bcj", "busybox");
    template.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let mut s = BroadcastJobSpec {
        template,
        ..Default::default()
    };
    spec(&mut s);
    let mut j = BroadcastJob::new("bcj", s);
    j.metadata.namespace = Some("default".into());
    j.metadata.uid = Some("uid-1".into());
    j
}

/// The job's Pod on `node`, in `phase` ("" for just created).
pub fn pod(j: &BroadcastJob, node: &str, phase: &str) -> Pod {
    let mut p = Pod::from(&new_pod(j, node, node));
    if !phase.is_empty() {
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
    }
    p
}

fn ids() -> impl Iterator<Item = String> {
    (0..).map(|i| format!("id{i}"))
}

fn run<'a>(
    j: &'a BroadcastJob,
    pods: &[&'a Pod],
    nodes: &[&'a Node],
    at: Timestamp,
) -> Outcome<'a> {
    plan(
        &World {
            job: j,
            pods: pods.to_vec(),
            nodes: nodes.to_vec(),
            now: at,
        },
        &mut ids(),
    )
}

fn created_on(out: &Outcome) -> Vec<String> {
    out.plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Create { pod, .. } => nodes::assigned_node(pod).map(str::to_string),
            _ => None,
        })
        .collect()
}

fn deleted(out: &Outcome) -> Vec<String> {
    out.plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { pod, .. } => pod.metadata.name.clone(),
            _ => None,
        })
        .collect()
}

fn status<'a>(out: &'a Outcome) -> &'a BroadcastJobStatus {
    out.status.as_ref().expect("status")
}

#[test]
fn one_pod_per_eligible_node_named_and_bound_like_upstream() {
    let j = job(|_| {});
    let (a, b) = (node("n1"), node("n2"));
    let master = tainted("master", "node-role.kubernetes.io/control-plane");
    let out = run(&j, &[], &[&a, &b, &master], now());
    assert_eq!(created_on(&out), ["n1", "n2"]);
    let s = status(&out);
    assert_eq!((s.desired, s.active), (2, 0));
    assert_eq!(s.phase, Some(BroadcastJobPhase::Running));
    assert_eq!(s.start_time, Some(Time(now())));
    let Action::Create { pod, .. } = &out.plan.actions[0] else {
        unreachable!()
    };
    assert_eq!(pod.metadata.name.as_deref(), Some("bcj-id0"));
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("bcj-"));
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["broadcastjob-name"], "bcj");
    assert_eq!(labels["broadcastjob-controller-uid"], "uid-1");
    assert_eq!(labels["app"], "bcj");
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("BroadcastJob", Some(true))
    );
    assert_eq!(pod.spec.as_ref().unwrap().node_name, None);
}

#[test]
fn node_selector_affinity_tolerations_and_unschedulable_decide_eligibility() {
    let mut other = node("other");
    other.metadata.labels = Some(BTreeMap::from([("type".into(), "real".into())]));
    let mut cordoned = node("cordoned");
    cordoned.spec = Some(NodeSpec {
        unschedulable: Some(true),
        ..Default::default()
    });
    let owned = tainted("owned", "e2e.kruise.io/owner");
    let plain = node("plain");
    let nodes = [&other, &cordoned, &owned, &plain];

    let by_selector = job(|s| {
        s.template.spec.as_mut().unwrap().node_selector =
            Some(BTreeMap::from([("type".into(), "kwok".into())]));
    });
    assert_eq!(
        created_on(&run(&by_selector, &[], &nodes, now())),
        ["plain"]
    );

    let tolerating = job(|s| {
        s.template.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
            key: Some("e2e.kruise.io/owner".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
    });
    assert_eq!(
        created_on(&run(&tolerating, &[], &nodes, now())),
        ["other", "owned", "plain"]
    );

    let everything = job(|s| {
        s.template.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
    });
    assert_eq!(created_on(&run(&everything, &[], &nodes, now())).len(), 4);

    let affinity: k8s_openapi::api::core::v1::Affinity = serde_json::from_value(serde_json::json!({
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}
        ]}}
    }))
    .unwrap();
    let by_affinity = job(|s| s.template.spec.as_mut().unwrap().affinity = Some(affinity));
    assert_eq!(
        created_on(&run(&by_affinity, &[], &nodes, now())),
        ["other"]
    );
}

#[test]
fn parallelism_limits_new_pods() {
    let nodes: Vec<Node> = (1..=5).map(|i| node(&format!("n{i}"))).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    // Parallelism 2 with one running Pod and 3 desired nodes: exactly one new Pod.
    let two = job(|s| s.parallelism = Some(IntOrString::Int(2)));
    let running = pod(&two, "n1", "Running");
    let out = run(&two, &[&running], &refs[..3], now());
    assert_eq!(created_on(&out), ["n2"]);
    // 40% of 5 desired nodes: 2 at once (rounded up).
    let percent = job(|s| s.parallelism = Some(IntOrString::String("40%".into())));
    assert_eq!(created_on(&run(&percent, &[], &refs, now())).len(), 2);
    assert_eq!(parallelism(&percent, 5), 2);
    assert_eq!(parallelism(&percent, 1), 1);
    assert_eq!(parallelism(&job(|_| {}), 7), i32::MAX);
}

#[test]
fn too_many_active_pods_warns_and_creates_nothing() {
    let j = job(|s| s.parallelism = Some(IntOrString::Int(1)));
    let (a, b, c) = (node("a"), node("b"), node("c"));
    let (pa, pb) = (pod(&j, "a", "Running"), pod(&j, "b", "Running"));
    let out = run(&j, &[&pa, &pb], &[&a, &b, &c], now());
    assert!(created_on(&out).is_empty());
    assert_eq!(out.plan.warnings[0].reason, "TooManyActivePods");
}

#[test]
fn completes_when_every_desired_node_has_a_finished_pod() {
    let j = job(|_| {});
    let (a, b) = (node("a"), node("b"));
    let (pa, pb) = (pod(&j, "a", "Succeeded"), pod(&j, "b", "Running"));
    let out = run(&j, &[&pa, &pb], &[&a, &b], now());
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Running));
    let pb = pod(&j, "b", "Succeeded");
    let out = run(&j, &[&pa, &pb], &[&a, &b], now());
    let s = status(&out);
    assert_eq!((s.desired, s.active, s.succeeded, s.failed), (2, 0, 2, 0));
    assert_eq!(s.phase, Some(BroadcastJobPhase::Completed));
    let c = s.true_condition(JobConditionType::Complete).unwrap();
    assert_eq!(c.reason, "Complete");
    assert_eq!(c.message, "Job completed, 2 pods succeeded, 0 pods failed");
    assert_eq!(s.completion_time, Some(Time(now())));
    assert_eq!(
        out.events,
        [(
            "JobComplete",
            "Job default/bcj is completed, 2 pods succeeded, 0 pods failed".to_string()
        )]
    );
    assert_eq!(out.plan.requeue_after, None);
}

#[test]
fn never_completes_with_no_desired_node_or_under_never() {
    let j = job(|_| {});
    let out = run(&j, &[], &[], now());
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Running));
    let never = job(|s| {
        s.completion_policy = CompletionPolicy {
            type_: Some(CompletionPolicyType::Never),
            ..Default::default()
        }
    });
    let a = node("a");
    let done = pod(&never, "a", "Succeeded");
    let out = run(&never, &[&done], &[&a], now());
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Running));
    assert!(status(&out).conditions.is_empty());
    // A node added later gets a Pod.
    let b = node("b");
    let out = run(&never, &[&done], &[&a, &b], now());
    assert_eq!(created_on(&out), ["b"]);
}

#[test]
fn fail_fast_fails_and_deletes_active_pods() {
    let j = job(|_| {});
    let (a, b, c) = (node("a"), node("b"), node("c"));
    let (pa, pb, pc) = (
        pod(&j, "a", "Failed"),
        pod(&j, "b", "Succeeded"),
        pod(&j, "c", "Running"),
    );
    let out = run(&j, &[&pa, &pb, &pc], &[&a, &b, &c], now());
    assert_eq!(deleted(&out), ["bcj-c"]);
    let s = status(&out);
    assert_eq!((s.active, s.succeeded, s.failed), (0, 1, 2));
    assert_eq!(s.phase, Some(BroadcastJobPhase::Failed));
    let cond = s.true_condition(JobConditionType::Failed).unwrap();
    assert_eq!(cond.reason, "Failed");
    assert_eq!(cond.message, events::FAIL_FAST_MESSAGE);
    assert_eq!(out.plan.warnings[0].reason, "failed pod is found");
    assert_eq!(
        out.plan.warnings[0].message,
        "failure policy is FailurePolicyTypeFailFast and failed pod is found: 1 pods succeeded, 2 pods failed"
    );
}

#[test]
fn continue_completes_with_failures_and_pause_pauses() {
    let cont = job(|s| {
        s.failure_policy = FailurePolicy {
            type_: Some(FailurePolicyType::Continue),
            restart_limit: 0,
        }
    });
    let (a, b) = (node("a"), node("b"));
    let (pa, pb) = (pod(&cont, "a", "Failed"), pod(&cont, "b", "Succeeded"));
    let out = run(&cont, &[&pa, &pb], &[&a, &b], now());
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Completed));
    assert_eq!(status(&out).failed, 1);

    let pause = job(|s| {
        s.failure_policy = FailurePolicy {
            type_: Some(FailurePolicyType::Pause),
            restart_limit: 0,
        }
    });
    let pa = pod(&pause, "a", "Failed");
    let out = run(&pause, &[&pa], &[&a, &b], now());
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Paused));
    assert!(out.plan.actions.is_empty());
    assert_eq!(out.plan.warnings[0].reason, "Paused");
}

#[test]
fn on_failure_restarts_beyond_the_limit_count_as_failed() {
    let j = job(|s| {
        s.template.spec.as_mut().unwrap().restart_policy = Some("OnFailure".into());
        s.failure_policy = FailurePolicy {
            type_: Some(FailurePolicyType::Continue),
            restart_limit: 2,
        };
    });
    let a = node("a");
    let mut p = pod(&j, "a", "Running");
    let restarted = |n: i32| ContainerStatus {
        name: "nginx".into(),
        restart_count: n,
        ..Default::default()
    };
    p.status.as_mut().unwrap().container_statuses = Some(vec![restarted(2)]);
    assert_eq!(pod_state(&p, 2), PodState::Active);
    p.status.as_mut().unwrap().container_statuses = Some(vec![restarted(3)]);
    assert_eq!(pod_state(&p, 2), PodState::Failed);
    let out = run(&j, &[&p], &[&a], now());
    assert_eq!((status(&out).active, status(&out).failed), (0, 1));
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Completed));
}

#[test]
fn paused_keeps_counts_and_creates_nothing_then_continues() {
    let mut j = job(|s| s.paused = true);
    j.status = Some(BroadcastJobStatus {
        phase: Some(BroadcastJobPhase::Running),
        start_time: Some(Time(now())),
        ..Default::default()
    });
    let (a, b) = (node("a"), node("b"));
    let pa = pod(&j, "a", "Running");
    let out = run(&j, &[&pa], &[&a, &b], now());
    assert!(out.plan.actions.is_empty());
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Paused));
    assert_eq!(status(&out).active, 1);
    j.spec.paused = false;
    j.status.as_mut().unwrap().phase = Some(BroadcastJobPhase::Paused);
    let out = run(&j, &[&pa], &[&a, &b], now());
    assert_eq!(status(&out).phase, Some(BroadcastJobPhase::Running));
    assert_eq!(
        out.events[0],
        ("Continue", "continue to process job".to_string())
    );
    assert_eq!(created_on(&out), ["b"]);
}

#[test]
fn the_deadline_counts_from_start_time_and_fails_the_job() {
    let mut j = job(|s| {
        s.completion_policy = CompletionPolicy {
            type_: Some(CompletionPolicyType::Always),
            active_deadline_seconds: Some(10),
            ..Default::default()
        }
    });
    let a = node("a");
    let start = now();
    j.status = Some(BroadcastJobStatus {
        start_time: Some(Time(start)),
        phase: Some(BroadcastJobPhase::Running),
        ..Default::default()
    });
    let pa = pod(&j, "a", "Running");
    let out = run(&j, &[&pa], &[&a], start + SignedDuration::from_secs(4));
    assert_eq!(out.plan.requeue_after, Some(Duration::from_secs(6)));
    assert!(deleted(&out).is_empty());
    let out = run(&j, &[&pa], &[&a], start + SignedDuration::from_secs(10));
    assert_eq!(deleted(&out), ["bcj-a"]);
    let s = status(&out);
    assert_eq!(s.phase, Some(BroadcastJobPhase::Failed));
    assert_eq!(s.failed, 1);
    assert_eq!(out.plan.warnings[0].reason, "DeadlineExceeded");
    assert_eq!(
        s.true_condition(JobConditionType::Failed).unwrap().message,
        "Job default/bcj was active longer than specified deadline"
    );
}

#[test]
fn pods_deleted_for_the_deadline_stay_failed_when_seen_terminating() {
    let mut j = job(|s| {
        s.completion_policy = CompletionPolicy {
            type_: Some(CompletionPolicyType::Always),
            active_deadline_seconds: Some(10),
            ..Default::default()
        }
    });
    let (a, b) = (node("a"), node("b"));
    let start = now();
    j.status = Some(BroadcastJobStatus {
        start_time: Some(Time(start)),
        phase: Some(BroadcastJobPhase::Running),
        ..Default::default()
    });
    // The pass that failed the Job deleted both Pods; this one sees the deletions but
    // still the Running Job.
    let mut pa = pod(&j, "a", "Running");
    let mut pb = pod(&j, "b", "Running");
    for p in [&mut pa, &mut pb] {
        p.metadata.deletion_timestamp = Some(Time(start));
    }
    let out = run(
        &j,
        &[&pa, &pb],
        &[&a, &b],
        start + SignedDuration::from_secs(11),
    );
    assert!(deleted(&out).is_empty());
    let s = status(&out);
    assert_eq!(s.phase, Some(BroadcastJobPhase::Failed));
    assert_eq!((s.active, s.failed), (0, 2));
}

#[test]
fn a_finished_job_is_deleted_after_its_ttl() {
    let mut j = job(|s| {
        s.completion_policy = CompletionPolicy {
            type_: Some(CompletionPolicyType::Always),
            ttl_seconds_after_finished: Some(30),
            ..Default::default()
        }
    });
    let a = node("a");
    let pa = pod(&j, "a", "Succeeded");
    let out = run(&j, &[&pa], &[&a], now());
    assert_eq!(out.plan.requeue_after, Some(Duration::from_secs(31)));
    j.status = out.status.clone();
    let later = run(&j, &[&pa], &[&a], now() + SignedDuration::from_secs(20));
    assert_eq!(later.plan.requeue_after, Some(Duration::from_secs(11)));
    assert!(!later.delete_job && later.status.is_none());
    let due = run(&j, &[&pa], &[&a], now() + SignedDuration::from_secs(30));
    assert!(due.delete_job);
}

#[test]
fn ttl_zero_deletes_right_after_finishing() {
    let status = BroadcastJobStatus {
        completion_time: Some(Time(now())),
        ..Default::default()
    };
    assert_eq!(ttl_left(&status, 0, now()), None);
    assert_eq!(ttl_left(&status, 5, now()), Some(Duration::from_secs(6)));
}

#[test]
fn pods_on_nodes_they_no_longer_fit_are_deleted_and_duplicates_reported() {
    let j = job(|_| {});
    let a = tainted("a", "dedicated");
    let b = node("b");
    let pa = pod(&j, "a", "Running");
    let mut dup = pod(&j, "b", "Running");
    dup.metadata.name = Some("bcj-b2".into());
    let pb = pod(&j, "b", "Running");
    let out = run(&j, &[&pa, &pb, &dup], &[&a, &b], now());
    assert_eq!(deleted(&out), ["bcj-a"]);
    assert_eq!(status(&out).desired, 1);
    assert!(
        out.plan
            .warnings
            .iter()
            .any(|w| w.reason == "DuplicatePodCreatedOnSameNode"
                && w.message == "Duplicated pod bcj-b2 found on same node b")
    );
}
