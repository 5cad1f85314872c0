//! What one reconcile of an EphemeralJob decides, as a pure function of the job, the Pods
//! of its namespace and the time (openkruise/kruise v1.9.0
//! pkg/controller/ephemeraljob/ephemeraljob_controller.go and ephemeraljob_utils.go):
//!
//! - a finished job (`completionTime` set) waits out `ttlSecondsAfterFinished` (default
//!   1800) and is then deleted;
//! - otherwise the targets are the active Pods the selector matches, oldest first, that do
//!   not carry a container of the template's names added by someone else, at most
//!   `replicas` of them; the status counts them by the states of their ephemeral
//!   containers ([`pod_state`]) and derives the phase and conditions as upstream;
//! - unless the job is paused, finished or its template is empty, the containers are added
//!   to targets that lack them, keeping at most `parallelism` (default 1) Pods whose
//!   containers are in progress.

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, EnvVar, EphemeralContainer, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{
    EPHEMERAL_CONTAINER_ENV_KEY, EphemeralJob, EphemeralJobCondition, EphemeralJobPhase,
    EphemeralJobStatus, condition,
};

/// The inputs of one reconcile.
pub struct World<'a> {
    pub job: &'a EphemeralJob,
    /// The Pods of the job's namespace (any order).
    pub pods: Vec<&'a Pod>,
    pub now: Timestamp,
}

/// A Pod to add the job's ephemeral containers to.
#[derive(Clone, Debug, PartialEq)]
pub struct AddContainers {
    pub pod: String,
    /// The version the plan saw: the write is refused (409) if the Pod moved on.
    pub resource_version: String,
    /// The containers to append to the Pod's `spec.ephemeralContainers`.
    pub containers: Vec<EphemeralContainer>,
}

/// The decision of one reconcile.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// The job's TTL has passed: delete it, nothing else.
    pub delete_job: bool,
    /// The status to write (`None`: leave it).
    pub status: Option<EphemeralJobStatus>,
    /// Pods to add the ephemeral containers to, oldest first.
    pub add: Vec<AddContainers>,
    /// When to look again (deadline or TTL), if nothing else changes.
    pub requeue_after: Option<Duration>,
}

/// The state of one target Pod by its ephemeral containers of the job's names (upstream's
/// `parseEphemeralPodStatus`, with `PodPhase` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    Succeeded,
    Failed,
    Running,
    Waiting,
    Unknown,
}

/// The state of one container status (upstream's `parseEphemeralContainerStatus`).
fn container_state(status: &ContainerStatus) -> PodState {
    let state = status.state.clone().unwrap_or_default();
    if let Some(t) = &state.terminated {
        if t.finished_at.is_some() && t.exit_code == 0 {
            return PodState::Succeeded;
        }
        if t.exit_code != 0 {
            return PodState::Failed;
        }
    }
    if state.running.is_some() {
        return PodState::Running;
    }
    if let Some(w) = &state.waiting {
        if w.reason.as_deref() == Some("RunContainerError") {
            return PodState::Failed;
        }
        return PodState::Waiting;
    }
    PodState::Unknown
}

/// The template's container names, without duplicates.
fn template_names(job: &EphemeralJob) -> Vec<&str> {
    let mut names: Vec<&str> = job
        .spec
        .template
        .ephemeral_containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// A Pod's state for `job`: any failed container of the job's names fails it; all of them
/// succeeded is Succeeded; else any running is Running, any waiting is Waiting.
pub fn pod_state(job: &EphemeralJob, pod: &Pod) -> PodState {
    let names = template_names(job);
    let (mut waiting, mut running, mut succeeded) = (0, 0, 0);
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.ephemeral_container_statuses.as_deref())
        .unwrap_or_default();
    for status in statuses {
        if !names.contains(&status.name.as_str()) {
            continue;
        }
        match container_state(status) {
            PodState::Failed => return PodState::Failed,
            PodState::Waiting => waiting += 1,
            PodState::Running => running += 1,
            PodState::Succeeded => succeeded += 1,
            PodState::Unknown => {}
        }
    }
    if succeeded > 0 && succeeded == names.len() {
        PodState::Succeeded
    } else if running > 0 {
        PodState::Running
    } else if waiting > 0 {
        PodState::Waiting
    } else {
        PodState::Unknown
    }
}

fn ephemeral_containers(pod: &Pod) -> &[EphemeralContainer] {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or_default()
}

/// Whether `container` was added by the job with `uid` (its env `KRUISE_EJOB_ID`).
pub fn created_by(uid: &str, container: &EphemeralContainer) -> bool {
    container
        .env
        .iter()
        .flatten()
        .any(|e| e.name == EPHEMERAL_CONTAINER_ENV_KEY && e.value.as_deref() == Some(uid))
}

fn uid(job: &EphemeralJob) -> &str {
    job.metadata.uid.as_deref().unwrap_or_default()
}

/// The Pod carries a container of one of the template's names that this job did not add
/// (upstream's `existDuplicatedEphemeralContainer`): it is not a target.
pub fn has_foreign_container(job: &EphemeralJob, pod: &Pod) -> bool {
    let names = template_names(job);
    ephemeral_containers(pod)
        .iter()
        .any(|c| names.contains(&c.name.as_str()) && !created_by(uid(job), c))
}

/// The Pod carries a container of the template's names added by this job (upstream's
/// `getSyncPods`: such a Pod is not written again).
pub fn has_own_container(job: &EphemeralJob, pod: &Pod) -> bool {
    let names = template_names(job);
    ephemeral_containers(pod)
        .iter()
        .any(|c| names.contains(&c.name.as_str()) && created_by(uid(job), c))
}

fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none()
        && !matches!(phase, Some("Succeeded") | Some("Failed"))
}

/// The job's targets (upstream's `filterPods`): active Pods of its namespace the selector
/// matches, by creation time then name, without foreign containers of its names, the first
/// `replicas`. An invalid selector matches nothing.
pub fn targets<'a>(job: &EphemeralJob, pods: &[&'a Pod]) -> Vec<&'a Pod> {
    let ns = job.metadata.namespace.as_deref();
    let mut matched: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| p.metadata.namespace.as_deref() == ns)
        .filter(|p| {
            let empty = Default::default();
            let labels = p.metadata.labels.as_ref().unwrap_or(&empty);
            kruise_ordering::selector::matches(&job.spec.selector, labels).unwrap_or(false)
        })
        .collect();
    matched.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                p.metadata.name.clone().unwrap_or_default(),
            )
        };
        key(a).cmp(&key(b))
    });
    let limit = job
        .spec
        .replicas
        .map_or(usize::MAX, |r| usize::try_from(r).unwrap_or(0));
    matched
        .into_iter()
        .filter(|p| is_active(p) && !has_foreign_container(job, p))
        .take(limit)
        .collect()
}

/// Sets condition `type_` (True, now), replacing one of that type; an unchanged reason and
/// message keep the condition as it was, so a steady job does not rewrite its status.
fn set_condition(
    conditions: &mut Vec<EphemeralJobCondition>,
    type_: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let fresh = EphemeralJobCondition {
        type_: type_.to_string(),
        status: "True".into(),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: reason.to_string(),
        message,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == "True" && c.reason == fresh.reason && c.message == fresh.message => {
        }
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}

/// The Warning reason of a failed write (upstream's `CreateFailed`).
pub const REASON_CREATE_FAILED: &str = "CreateFailed";

/// The message of a failed write, as upstream's `syncTargetPods` words it.
pub fn create_failed_message(namespace: &str, pod: &str, err: &str) -> String {
    format!("failed to create ephemeral container in pod {namespace}/{pod}: {err}")
}

/// Time left until `start + seconds`, `None` once it has passed.
fn left(start: Timestamp, seconds: i64, now: Timestamp) -> Option<Duration> {
    let due = start.as_second().saturating_add(seconds);
    let due = Timestamp::from_second(due).ok()?;
    let d = now.duration_until(due);
    if d.is_negative() || d.is_zero() {
        None
    } else {
        Duration::try_from(d).ok()
    }
}

/// The status of a not yet finished job over its targets (upstream's `calculateStatus`).
pub fn compute_status(
    job: &EphemeralJob,
    targets: &[&Pod],
    start: Timestamp,
    now: Timestamp,
) -> EphemeralJobStatus {
    let mut status = job.status.clone().unwrap_or_default();
    status.start_time = Some(Time(start));
    let (ns, name) = (
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default(),
    );
    if status.conditions.is_empty() {
        set_condition(
            &mut status.conditions,
            condition::INITIALIZED,
            condition::INITIALIZED,
            String::new(),
            now,
        );
    }
    let empty_template = template_names(job).is_empty();
    let (mut succeeded, mut failed, mut running, mut waiting) = (0, 0, 0, 0);
    if !empty_template {
        for pod in targets {
            match pod_state(job, pod) {
                PodState::Succeeded => succeeded += 1,
                PodState::Failed => failed += 1,
                PodState::Running => running += 1,
                PodState::Waiting => waiting += 1,
                PodState::Unknown => {}
            }
        }
    }
    status.matches = i32::try_from(targets.len()).unwrap_or(i32::MAX);
    (
        status.succeeded,
        status.failed,
        status.running,
        status.waiting,
    ) = (succeeded, failed, running, waiting);
    let replicas = job.spec.replicas.unwrap_or(status.matches);
    let phase = if status.matches == 0 {
        set_condition(
            &mut status.conditions,
            condition::MATCHED_EMPTY,
            "MatchEmpty",
            "job match no pods".into(),
            now,
        );
        EphemeralJobPhase::Waiting
    } else if succeeded == replicas && succeeded > 0 {
        status.completion_time = Some(Time(now));
        set_condition(
            &mut status.conditions,
            condition::SUCCEEDED,
            "JobSucceeded",
            "job success to run all tasks".into(),
            now,
        );
        EphemeralJobPhase::Succeeded
    } else if running > 0 {
        EphemeralJobPhase::Running
    } else if failed == replicas {
        status.completion_time = Some(Time(now));
        set_condition(
            &mut status.conditions,
            condition::FAILED,
            "JobFailed",
            "job failed to run all tasks".into(),
            now,
        );
        EphemeralJobPhase::Failed
    } else if waiting == replicas {
        EphemeralJobPhase::Waiting
    } else {
        EphemeralJobPhase::Unknown
    };
    let mut phase = if job.spec.paused {
        EphemeralJobPhase::Paused
    } else {
        phase
    };
    if failed > 0 {
        set_condition(
            &mut status.conditions,
            condition::FAILED,
            "CreateFailed",
            format!("EphemeralJob {ns}/{name} failed to create ephemeral container"),
            now,
        );
    }
    let past_deadline = job
        .spec
        .active_deadline_seconds
        .is_some_and(|s| left(start, s, now).is_none());
    if matches!(
        phase,
        EphemeralJobPhase::Waiting | EphemeralJobPhase::Unknown | EphemeralJobPhase::Running
    ) && past_deadline
    {
        status.completion_time = Some(Time(now));
        phase = EphemeralJobPhase::Failed;
        set_condition(
            &mut status.conditions,
            condition::FAILED,
            "DeadlineExceeded",
            format!("EphemeralJob {ns}/{name} was active longer than specified deadline"),
            now,
        );
    }
    if empty_template {
        phase = EphemeralJobPhase::Error;
        set_condition(
            &mut status.conditions,
            condition::ERROR,
            "Error",
            "job spec invalid fields.".into(),
            now,
        );
    }
    status.phase = Some(phase);
    status
}

/// The template's containers as added to a Pod: each with `KRUISE_EJOB_ID=<job uid>`
/// appended to its env (upstream's `CreateEphemeralContainer`).
pub fn containers_for(job: &EphemeralJob) -> Vec<EphemeralContainer> {
    job.spec
        .template
        .ephemeral_containers
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.env.get_or_insert_with(Vec::new).push(EnvVar {
                name: EPHEMERAL_CONTAINER_ENV_KEY.into(),
                value: Some(uid(job).to_string()),
                value_from: None,
            });
            c
        })
        .collect()
}

/// One reconcile's decision.
pub fn plan(world: &World) -> Outcome {
    let (job, now) = (world.job, world.now);
    let previous = job.status.clone().unwrap_or_default();
    if let Some(done) = &previous.completion_time {
        let ttl = i64::from(job.spec.ttl_seconds_after_finished());
        return match left(done.0, ttl, now) {
            None => Outcome {
                delete_job: true,
                ..Default::default()
            },
            Some(wait) => Outcome {
                requeue_after: Some(wait),
                ..Default::default()
            },
        };
    }
    let start = previous.start_time.as_ref().map_or(now, |t| t.0);
    // Once the deadline has passed there is nothing to wait for (a paused job is not
    // failed by it, as upstream's requeue of 0 means none).
    let requeue_after = job
        .spec
        .active_deadline_seconds
        .and_then(|s| left(start, s, now));
    let targets = targets(job, &world.pods);
    let status = compute_status(job, &targets, start, now);
    let mut outcome = Outcome {
        requeue_after,
        ..Default::default()
    };
    let acting = matches!(
        status.phase,
        Some(EphemeralJobPhase::Running | EphemeralJobPhase::Waiting | EphemeralJobPhase::Unknown)
    );
    if acting {
        let to_add: Vec<&&Pod> = targets
            .iter()
            .filter(|p| !has_own_container(job, p))
            .collect();
        // Pods whose containers were added and have not finished count against
        // parallelism, whether they already run or still wait to start.
        let in_progress = targets
            .iter()
            .filter(|p| {
                has_own_container(job, p)
                    && matches!(
                        pod_state(job, p),
                        PodState::Running | PodState::Waiting | PodState::Unknown
                    )
            })
            .count();
        let parallelism = usize::try_from(job.spec.parallelism()).unwrap_or(0);
        let room = parallelism.saturating_sub(in_progress).min(to_add.len());
        let containers = containers_for(job);
        outcome.add = to_add
            .into_iter()
            .take(room)
            .map(|p| AddContainers {
                pod: p.metadata.name.clone().unwrap_or_default(),
                resource_version: p.metadata.resource_version.clone().unwrap_or_default(),
                containers: containers.clone(),
            })
            .collect();
    }
    if job.status.as_ref() != Some(&status) {
        outcome.status = Some(status);
    }
    if outcome.status.as_ref().is_some_and(|s| s.is_finished()) {
        // Look again when the TTL runs out.
        let ttl = u64::try_from(job.spec.ttl_seconds_after_finished()).unwrap_or(0);
        outcome.requeue_after = Some(Duration::from_secs(ttl));
    }
    outcome
}
