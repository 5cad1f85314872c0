//! The pure part of the BroadcastJob controller (openkruise/kruise v1.9.0
//! pkg/controller/broadcastjob/broadcastjob_controller.go): from the job, its Pods, the nodes and
//! the time, what to create and delete, the status to write, the events to report, and when to look
//! again. No client, no clock, no randomness (Pod name suffixes come from the caller).

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::Pod as NewPod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::{
    BroadcastJob, BroadcastJobPhase, BroadcastJobStatus, CompletionPolicyType, FailurePolicyType,
    JobCondition, JobConditionType,
};
use kruise_api::intstr::{Rounding, scaled_value};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_ordering::{nodes, predicates};
use kruise_workload::{Action, Plan, Warning};
use kube::{Resource, ResourceExt};

use crate::events;

/// Everything one reconcile decides on.
pub struct World<'a> {
    pub job: &'a BroadcastJob,
    /// The job's Pods (controller ownerReference to it).
    pub pods: Vec<&'a Pod>,
    pub nodes: Vec<&'a Node>,
    pub now: Timestamp,
}

/// What one reconcile does.
#[derive(Debug, Default)]
pub struct Outcome<'a> {
    /// Pods to create and delete, Warning events, when to look again.
    pub plan: Plan<'a>,
    /// The status to write (`None`: leave it as it is).
    pub status: Option<BroadcastJobStatus>,
    /// Normal events: (reason, message).
    pub events: Vec<(&'static str, String)>,
    /// Delete the job itself (`ttlSecondsAfterFinished` passed).
    pub delete_job: bool,
}

/// How the job's Pods count (as `filterPods` in openkruise/kruise v1.9.0
/// pkg/controller/broadcastjob/broadcastjob_utils.go). Terminating Pods count nowhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub active: i32,
    pub succeeded: i32,
    pub failed: i32,
    /// Pods being deleted: not counted in the status, except when the Job fails.
    pub terminating: i32,
}

/// Summed restarts of a Pod's containers and init containers.
pub fn restarts(pod: &Pod) -> i32 {
    let status = pod.status.as_ref();
    let sum = |list: Option<&Vec<kruise_api::pod::ContainerStatus>>| {
        list.into_iter()
            .flatten()
            .map(|c| c.restart_count.max(0))
            .sum::<i32>()
    };
    sum(status.and_then(|s| s.container_statuses.as_ref()))
        + sum(status.and_then(|s| s.init_container_statuses.as_ref()))
}

/// How one Pod counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    Active,
    Succeeded,
    Failed,
    Terminating,
}

/// Succeeded phase; Failed phase or (OnFailure and restarts > `restartLimit`); being
/// deleted; anything else is active.
pub fn pod_state(pod: &Pod, restart_limit: i32) -> PodState {
    if predicates::is_terminating(pod) {
        return PodState::Terminating;
    }
    let on_failure =
        pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    match predicates::phase(pod) {
        "Succeeded" => PodState::Succeeded,
        "Failed" => PodState::Failed,
        _ if on_failure && restarts(pod) > restart_limit => PodState::Failed,
        _ => PodState::Active,
    }
}

/// The number of Pods that may run at once for `desired` nodes (percent rounded up;
/// unset is unlimited).
pub fn parallelism(job: &BroadcastJob, desired: i32) -> i32 {
    scaled_value(&job.spec.parallelism(), desired, Rounding::Up).unwrap_or(i32::MAX)
}

/// How many Pods to create now: `parallelism − active`, at most the nodes waiting.
pub fn to_create(parallelism: i32, active: i32, waiting: usize) -> usize {
    usize::try_from(parallelism.saturating_sub(active))
        .unwrap_or(0)
        .min(waiting)
}

/// `completionTime + ttl (+1 s)` still ahead: how long; passed: `None`.
pub fn ttl_left(status: &BroadcastJobStatus, ttl: i32, now: Timestamp) -> Option<Duration> {
    let finished = status.completion_time.as_ref().map(|t| t.0)?;
    let due = finished + jiff::SignedDuration::from_secs(i64::from(ttl));
    let left = due.duration_since(now);
    (left.is_positive())
        .then(|| Duration::try_from(left).unwrap_or_default() + Duration::from_secs(1))
}

/// `startTime + activeDeadlineSeconds` still ahead: how long; passed: `None`.
pub fn deadline_left(start: Timestamp, deadline_seconds: i64, now: Timestamp) -> Option<Duration> {
    let due = start + jiff::SignedDuration::from_secs(deadline_seconds);
    let left = due.duration_since(now);
    left.is_positive()
        .then(|| Duration::try_from(left).unwrap_or_default())
}

/// The job's plan for this round (upstream's `Reconcile` and `reconcilePods`, openkruise/kruise
/// v1.9.0 pkg/controller/broadcastjob/broadcastjob_controller.go).
pub fn plan<'a>(world: &World<'a>, ids: &mut impl Iterator<Item = String>) -> Outcome<'a> {
    let job = world.job;
    let now = world.now;
    let always = job.spec.completion_policy.policy_type() == CompletionPolicyType::Always;
    let previous = job.status.clone().unwrap_or_default();
    let mut out = Outcome::default();

    // 11. Finished: only the TTL is left to honour.
    if previous.is_finished() && always {
        if let Some(ttl) = job.spec.completion_policy.ttl_seconds_after_finished {
            match ttl_left(&previous, ttl, now) {
                Some(left) => out.plan.requeue(left),
                None if previous.completion_time.is_some() => out.delete_job = true,
                None => {}
            }
        }
        return out;
    }

    let mut status = previous.clone();
    // 5. Start.
    let start = status.start_time.get_or_insert(Time(now)).clone();
    if status.phase.is_none() {
        status.phase = Some(BroadcastJobPhase::Running);
    }
    let deadline = job
        .spec
        .completion_policy
        .active_deadline_seconds
        .filter(|_| always);
    if let Some(seconds) = deadline
        && let Some(left) = deadline_left(start.0, seconds, now)
    {
        out.plan.requeue(left);
    }

    // 1, 3. Pods by node, desired nodes.
    let restart_limit = job.spec.failure_policy.restart_limit;
    let mut pods: Vec<&'a Pod> = world.pods.clone();
    pods.sort_by_key(|p| p.name_any());
    let mut by_node: BTreeMap<&str, &'a Pod> = BTreeMap::new();
    for pod in &pods {
        let node = nodes::assigned_node(pod).unwrap_or_default();
        if let Some(_earlier) = by_node.insert(node, pod) {
            out.plan.warnings.push(Warning {
                reason: events::DUPLICATE_POD,
                message: events::duplicate_pod(&pod.name_any(), node),
            });
        }
    }
    let template_spec = job.spec.template.spec.clone().unwrap_or_default();
    let mut nodes_sorted = world.nodes.clone();
    nodes_sorted.sort_by_key(|n| n.name_any());
    let mut desired: Vec<(&str, Option<&'a Pod>)> = Vec::new();
    let mut waiting: Vec<&str> = Vec::new();
    let mut misplaced: Vec<&'a Pod> = Vec::new();
    for node in &nodes_sorted {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        match by_node.get(name) {
            Some(pod) => {
                let spec = pod.spec.clone().unwrap_or_default();
                if nodes::fits(&spec, node) {
                    desired.push((name, Some(pod)));
                } else if pod_state(pod, restart_limit) == PodState::Active {
                    misplaced.push(pod);
                }
            }
            None => {
                let mut spec = template_spec.clone();
                spec.node_name = Some(name.to_string());
                if nodes::fits(&spec, node) {
                    desired.push((name, None));
                    waiting.push(name);
                }
            }
        }
    }

    // 4. Counting.
    let mut counts = Counts::default();
    let mut active_pods: Vec<&'a Pod> = Vec::new();
    for pod in &pods {
        match pod_state(pod, restart_limit) {
            PodState::Active => {
                counts.active += 1;
                active_pods.push(pod);
            }
            PodState::Succeeded => counts.succeeded += 1,
            PodState::Failed => counts.failed += 1,
            PodState::Terminating => counts.terminating += 1,
        }
    }
    status.desired = i32::try_from(desired.len()).unwrap_or(i32::MAX);
    status.active = counts.active;
    status.succeeded = counts.succeeded;
    status.failed = counts.failed;

    if status.phase == Some(BroadcastJobPhase::Failed) {
        out.status = Some(status);
        return out;
    }
    // 6. Paused.
    let phase = status.phase;
    if job.spec.paused
        && matches!(
            phase,
            Some(BroadcastJobPhase::Running | BroadcastJobPhase::Paused)
        )
    {
        status.phase = Some(BroadcastJobPhase::Paused);
        out.status = Some(status);
        return out;
    }
    if !job.spec.paused && phase == Some(BroadcastJobPhase::Paused) {
        status.phase = Some(BroadcastJobPhase::Running);
        out.events
            .push((events::CONTINUE, events::CONTINUE_MESSAGE.to_string()));
    }

    // 7, 8. Failures and the deadline.
    let namespace = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let mut failure: Option<(&'static str, String)> = None;
    if counts.failed > 0 {
        match job.spec.failure_policy.policy_type() {
            FailurePolicyType::Pause => {
                out.plan.warnings.push(Warning {
                    reason: events::PAUSED,
                    message: events::PAUSED_MESSAGE.to_string(),
                });
                status.phase = Some(BroadcastJobPhase::Paused);
                out.status = Some(status);
                return out;
            }
            FailurePolicyType::FailFast => {
                failure = Some((
                    events::FAILED_POD_FOUND,
                    events::FAIL_FAST_MESSAGE.to_string(),
                ));
            }
            FailurePolicyType::Continue => {}
        }
    }
    if failure.is_none()
        && let Some(seconds) = deadline
        && deadline_left(start.0, seconds, now).is_none()
    {
        failure = Some((
            events::DEADLINE_EXCEEDED,
            events::deadline_message(&namespace, &name),
        ));
    }
    if let Some((reason, message)) = failure {
        // Pods already being deleted were deleted by an earlier pass that failed the Job,
        // whose status write this (stale) Job has not seen yet: they are failed Pods, and
        // leaving them out would overwrite that write with `failed: 0`.
        status.failed += counts.terminating;
        for pod in active_pods {
            out.plan.actions.push(Action::Delete { pod, pvcs: vec![] });
            status.failed += 1;
            status.active -= 1;
        }
        status.phase = Some(BroadcastJobPhase::Failed);
        finish(&mut status, JobConditionType::Failed, message.clone(), now);
        out.plan.warnings.push(Warning {
            reason,
            message: events::failed_event(&message, status.succeeded, status.failed),
        });
        requeue_for_ttl(job, &mut out);
        out.status = Some(status);
        return out;
    }

    // 3. Pods on nodes they no longer fit.
    for pod in misplaced {
        out.plan.actions.push(Action::Delete { pod, pvcs: vec![] });
        status.failed += 1;
        status.active -= 1;
    }

    // 9. Create Pods on waiting nodes, within parallelism.
    let limit = parallelism(job, status.desired);
    if status.active > limit {
        out.plan.warnings.push(Warning {
            reason: events::TOO_MANY_ACTIVE_PODS,
            message: events::TOO_MANY_ACTIVE_PODS_MESSAGE.to_string(),
        });
    } else if job.meta().deletion_timestamp.is_none() {
        let n = to_create(limit, status.active, waiting.len());
        for node in waiting.iter().take(n) {
            let Some(suffix) = ids.next() else { break };
            out.plan.actions.push(Action::Create {
                pod: Box::new(new_pod(job, node, &suffix)),
                pvcs: vec![],
                revision: String::new(),
            });
        }
    }

    // 10. Completion.
    let complete = always
        && !desired.is_empty()
        && desired
            .iter()
            .all(|(_, pod)| pod.is_some_and(|p| pod_state(p, restart_limit) != PodState::Active));
    if complete {
        status.phase = Some(BroadcastJobPhase::Completed);
        let message = events::complete_condition(status.succeeded, status.failed);
        finish(&mut status, JobConditionType::Complete, message, now);
        out.events.push((
            events::JOB_COMPLETE,
            events::complete_event(&namespace, &name, status.succeeded, status.failed),
        ));
        requeue_for_ttl(job, &mut out);
    }
    out.status = Some(status);
    out
}

/// Appends the finishing condition and sets `completionTime` (upstream `finishJob`).
fn finish(
    status: &mut BroadcastJobStatus,
    type_: JobConditionType,
    message: String,
    now: Timestamp,
) {
    let reason = match type_ {
        JobConditionType::Complete => keys::BROADCASTJOB_REASON_COMPLETE,
        JobConditionType::Failed => keys::BROADCASTJOB_REASON_FAILED,
    };
    status.conditions.push(JobCondition {
        type_,
        status: "True".into(),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: reason.into(),
        message,
    });
    status.completion_time = Some(Time(now));
}

/// A just-finished job with a TTL is looked at again once it has passed.
fn requeue_for_ttl(job: &BroadcastJob, out: &mut Outcome) {
    out.plan.requeue_after = None;
    if let Some(ttl) = job.spec.completion_policy.ttl_seconds_after_finished {
        out.plan
            .requeue(Duration::from_secs(u64::try_from(ttl).unwrap_or(0) + 1));
    }
}

/// The job's Pod for `node`: the template with the job's two labels, named
/// `<job>-<suffix>`, controlled by the job and bound to the node.
pub fn new_pod(job: &BroadcastJob, node: &str, suffix: &str) -> NewPod {
    let template = &job.spec.template;
    let meta = template.metadata.clone().unwrap_or_default();
    let name = job.name_any();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(keys::BROADCASTJOB_NAME.into(), name.clone());
    labels.insert(
        keys::BROADCASTJOB_CONTROLLER_UID.into(),
        job.uid().unwrap_or_default(),
    );
    let mut spec = template.spec.clone().unwrap_or_default();
    nodes::bind_to_node(&mut spec, node);
    NewPod {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{suffix}")),
            generate_name: Some(format!("{name}-")),
            namespace: job.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![kruise_runtime::meta::controller_owner_reference(job)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}
