//! What the agent decides for a Pod's ContainerRecreateRequests (openkruise/kruise v1.9.0
//! pkg/daemon/containerrecreate/crr_daemon_controller.go and crr_daemon_util.go), pure: which
//! request is worked on, how long to wait for the Pod to be NotReady, each container's state from
//! what the runtime reports, and which container to stop next.
//! [`crate::crr`] reads the runtime and writes the decisions.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kruise_api::apps_v1alpha1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainerRecreateState as ContainerState,
    ContainerRecreateRequestFailurePolicy as FailurePolicy, ContainerRecreateRequestPhase as Phase,
    ContainerRecreateRequestSyncContainerStatus,
};
use kruise_api::keys;

use crate::cri::{ContainerRunState, RuntimeContainer};

/// The grace period when neither the request nor (through admission) the Pod gives one.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// The least time a container is given to stop after its preStop hook.
pub const MIN_STOP_GRACE_SECONDS: i64 = 2;

/// Completed first, then Recreating, Pending, and requests no agent has seen.
fn phase_weight(phase: Option<Phase>) -> u8 {
    match phase {
        Some(Phase::Completed) => 1,
        Some(Phase::Recreating) => 2,
        Some(Phase::Pending) => 3,
        _ => 4,
    }
}

fn finished(crr: &ContainerRecreateRequest) -> bool {
    crr.metadata.deletion_timestamp.is_some()
        || crr
            .status
            .as_ref()
            .is_some_and(|s| s.completion_time.is_some())
}

fn phase(crr: &ContainerRecreateRequest) -> Option<Phase> {
    crr.status.as_ref().and_then(|s| s.phase)
}

/// Which of one Pod's requests is worked on, and which wait as Pending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pick {
    /// Index (into the given slice) of the request to work on.
    pub picked: Option<usize>,
    /// Indices of the other unfinished requests that have no phase yet.
    pub set_pending: Vec<usize>,
}

/// Upstream's `pickRecreateRequest` (with `crrListByPhaseAndCreated`): order by phase then
/// creation; the first unfinished one is worked on, the other unseen ones become Pending. One
/// request per Pod at a time.
pub fn pick(crrs: &[&ContainerRecreateRequest]) -> Pick {
    let mut order: Vec<usize> = (0..crrs.len()).collect();
    order.sort_by_key(|&i| {
        let c = crrs[i];
        (
            phase_weight(phase(c)),
            c.metadata.creation_timestamp.as_ref().map(|t| t.0),
            c.metadata.name.clone(),
        )
    });
    let mut out = Pick::default();
    for i in order {
        if finished(crrs[i]) {
            continue;
        }
        if out.picked.is_none() {
            out.picked = Some(i);
        } else if phase(crrs[i]).is_none() {
            out.set_pending.push(i);
        }
    }
    out
}

/// Where a request with `unreadyGracePeriodSeconds` stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unready {
    /// Not asked for, or the grace period has passed: go on.
    Go,
    /// The manager has not marked the Pod NotReady yet (its annotation will trigger us).
    AwaitAcquired,
    /// NotReady since the annotation's time: wait this long more.
    Wait(Duration),
    /// The annotation is not a time: the request is completed with this message.
    Invalid(String),
}

/// How long to wait for the Pod to be NotReady first (upstream's `getPreRecreateGraceTime` and its
/// use in `sync`).
pub fn unready(crr: &ContainerRecreateRequest, now: Timestamp) -> Unready {
    let Some(grace) = crr
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.unready_grace_period_seconds)
    else {
        return Unready::Go;
    };
    let acquired = crr
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::CRR_UNREADY_ACQUIRED))
        .filter(|v| !v.is_empty());
    let Some(acquired) = acquired else {
        return Unready::AwaitAcquired;
    };
    let Ok(at) = acquired.parse::<Timestamp>() else {
        return Unready::Invalid(format!("failed to parse unready time {acquired}"));
    };
    let left = SignedDuration::from_secs(grace) - at.duration_until(now);
    if left > SignedDuration::ZERO {
        // A moment past the end, so the next pass finds it over.
        let left = left + SignedDuration::from_millis(100);
        Unready::Wait(Duration::try_from(left).unwrap_or_default())
    } else {
        Unready::Go
    }
}

/// `<runtime>://<id>` split.
fn runtime_of(container_id: &str) -> Option<&str> {
    container_id.split_once("://").map(|(r, _)| r)
}

/// As upstream's `newRuntimeManager`: the request's containers must all run on `runtime_name` (the
/// CRI runtime this agent talks to); otherwise the message to complete it with.
pub fn runtime_mismatch(crr: &ContainerRecreateRequest, runtime_name: &str) -> Option<String> {
    let runtimes: std::collections::BTreeSet<&str> = crr
        .spec
        .containers
        .iter()
        .filter_map(|c| c.status_context.as_ref())
        .filter_map(|s| runtime_of(&s.container_id))
        .collect();
    if runtimes.len() > 1 {
        return Some(format!(
            "has different runtime types {}",
            runtimes.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    match runtimes.into_iter().next() {
        Some(r) if r != runtime_name => {
            Some(format!("not found runtime service for {r} in daemon"))
        }
        Some(_) => None,
        None => Some("no containerID in the request's status context".to_string()),
    }
}

/// A container of the Pod as the runtime reports it, its ID in the Pod status' form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The runtime's bare ID (what the CRI calls take).
    pub runtime_id: String,
    /// `<runtime>://<id>`, as in the Pod's status.
    pub container_id: String,
    pub state: ContainerRunState,
    pub started_at: Option<Timestamp>,
    pub restart_count: i32,
}

/// The newest container per name (as kubelet's `PodStatus.FindContainerStatusByName`, which
/// upstream's `getCurrentCRRContainersRecreateStates` uses: the latest attempt is the one that
/// counts), IDs prefixed with `runtime_name`.
pub fn newest_per_name(
    containers: Vec<RuntimeContainer>,
    runtime_name: &str,
) -> BTreeMap<String, Observed> {
    let mut newest: BTreeMap<String, RuntimeContainer> = BTreeMap::new();
    for c in containers {
        match newest.get(&c.name) {
            Some(seen) if seen.created_at >= c.created_at => {}
            _ => {
                newest.insert(c.name.clone(), c);
            }
        }
    }
    newest
        .into_iter()
        .map(|(name, c)| {
            let observed = Observed {
                container_id: format!("{runtime_name}://{}", c.id),
                runtime_id: c.id,
                state: c.state,
                started_at: (c.started_at > 0)
                    .then(|| Timestamp::from_nanosecond(i128::from(c.started_at)).ok())
                    .flatten(),
                restart_count: c.restart_count,
            };
            (name, observed)
        })
        .collect()
}

fn synced(crr: &ContainerRecreateRequest) -> Vec<ContainerRecreateRequestSyncContainerStatus> {
    crr.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::CRR_SYNC_CONTAINER_STATUSES))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// Each listed container's state, by the first rule that matches (upstream's
/// `getCurrentCRRContainersRecreateStates`).
pub fn container_states(
    crr: &ContainerRecreateRequest,
    observed: &BTreeMap<String, Observed>,
    now: Timestamp,
) -> Vec<ContainerState> {
    let strategy = crr.spec.strategy_or_default();
    let min_started = SignedDuration::from_secs(i64::from(strategy.min_started_seconds));
    let previous = crr
        .status
        .as_ref()
        .map(|s| s.container_recreate_states.as_slice())
        .unwrap_or_default();
    let synced = synced(crr);
    crr.spec
        .containers
        .iter()
        .map(|c| {
            let prev = previous.iter().find(|s| s.name == c.name);
            if let Some(prev) = prev.filter(|p| p.phase.is_container_done()) {
                return prev.clone();
            }
            let killed = prev.is_some_and(|p| p.is_killed);
            let state = |phase: Phase, message: &str| ContainerState {
                name: c.name.clone(),
                phase,
                message: message.to_string(),
                is_killed: killed,
            };
            let Some(o) = observed.get(&c.name) else {
                return state(Phase::Pending, "not found container on Node");
            };
            if o.state != ContainerRunState::Running {
                // Stopped: the kubelet starts it again.
                return state(Phase::Recreating, "");
            }
            if strategy.force_recreate && !killed {
                return state(Phase::Pending, "");
            }
            let context = c.status_context.clone().unwrap_or_default();
            if o.container_id != context.container_id || o.restart_count > context.restart_count {
                let ready = synced
                    .iter()
                    .any(|s| s.name == c.name && s.container_id == o.container_id && s.ready);
                let long_enough = o
                    .started_at
                    .is_some_and(|started| started.duration_until(now) > min_started);
                let phase = if ready && long_enough {
                    Phase::Succeeded
                } else {
                    Phase::Recreating
                };
                return state(phase, "");
            }
            state(Phase::Pending, "")
        })
        .collect()
}

/// What to do after the states are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Every container is done, or one failed under failurePolicy Fail.
    Complete,
    /// Stop this container (index into the states) now.
    Kill(usize),
    /// Nothing to stop now; look again after this long (minStartedSeconds), or when the
    /// request changes.
    Wait(Option<Duration>),
}

/// Upstream's `manage`: walk the containers in order. Marks the Recreating ones killed (in
/// `states`), stops at the first Recreating one with orderedRecreate, and picks the first Pending
/// one that exists to stop (one stop per pass).
pub fn walk(
    crr: &ContainerRecreateRequest,
    states: &mut [ContainerState],
    observed: &BTreeMap<String, Observed>,
) -> Step {
    let strategy = crr.spec.strategy_or_default();
    let ignore_failures = strategy.effective_failure_policy() == FailurePolicy::Ignore;
    let mut done = 0;
    for (i, state) in states.iter_mut().enumerate() {
        match state.phase {
            Phase::Succeeded => done += 1,
            Phase::Failed => {
                done += 1;
                if !ignore_failures {
                    return Step::Complete;
                }
            }
            Phase::Recreating => {
                state.is_killed = true;
                if strategy.ordered_recreate {
                    break;
                }
            }
            Phase::Pending | Phase::Completed => {
                if !observed.contains_key(&state.name) {
                    // Nothing running to stop yet.
                    break;
                }
                return Step::Kill(i);
            }
        }
    }
    if done == states.len() {
        return Step::Complete;
    }
    let min_started = strategy.min_started_seconds;
    Step::Wait((min_started > 0).then(|| Duration::from_secs(min_started.unsigned_abs().into())))
}

/// The grace period for stopping: the request's (admission copies the Pod's), else 30s.
pub fn grace_seconds(crr: &ContainerRecreateRequest) -> i64 {
    crr.spec
        .strategy
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .max(0)
}

/// What is left of the grace period once the preStop hook took `spent`, at least 2s.
pub fn stop_timeout_seconds(grace: i64, spent: Duration) -> i64 {
    let spent = i64::try_from(spent.as_secs()).unwrap_or(i64::MAX);
    grace.saturating_sub(spent).max(MIN_STOP_GRACE_SECONDS)
}

/// The event note when a container is stopped.
pub fn killing_message(container: &str, crr: &str) -> String {
    format!("Stopping container {container} by ContainerRecreateRequest {crr}")
}

#[cfg(test)]
mod tests;
