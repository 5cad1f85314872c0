//! The CloneSet status from the Pods (as openkruise/kruise v1.9.0
//! pkg/controller/cloneset/cloneset_status.go).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{CloneSetCondition, CloneSetStatus};
use kruise_api::keys;
use kruise_ordering::selector::format_selector;
use kruise_workload::min_duration;

use super::diffs::diffs;
use super::{Phase, World};

pub const REASON_AVAILABLE: &str = "CloneSetAvailable";
pub const REASON_PAUSED: &str = "CloneSetPaused";
pub const REASON_PARTITION_AVAILABLE: &str = "ProgressPartitionAvailable";
pub const REASON_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
pub const REASON_UPDATED: &str = "CloneSetUpdated";

/// What the phases reported this round.
#[derive(Clone, Debug, Default)]
pub struct PhaseErrors {
    pub scale: Option<String>,
    pub update: Option<String>,
}

impl PhaseErrors {
    /// `phase` failed with `message` (replacing what it planned to report).
    pub fn failed(&mut self, phase: Phase, message: String) {
        let slot = match phase {
            Phase::Scale => &mut self.scale,
            Phase::Update => &mut self.update,
        };
        *slot = Some(message);
    }
}

/// The new status, and when to look again: at the Progressing deadline, and while Pods
/// are ready but not yet available (becoming available after `minReadySeconds` produces
/// no event).
pub fn compute_status(
    world: &World,
    previous: &CloneSetStatus,
    collision_count: Option<i32>,
    errors: &PhaseErrors,
) -> (CloneSetStatus, Option<Duration>) {
    let mut s = CloneSetStatus {
        observed_generation: world.cs.metadata.generation.unwrap_or_default(),
        update_revision: world.update_revision_name().to_string(),
        current_revision: world.current_revision_name().to_string(),
        collision_count,
        label_selector: format_selector(&world.cs.spec.selector),
        conditions: previous.conditions.clone(),
        ..Default::default()
    };
    for pod in &world.pods {
        let updated = world.is_update_revision(pod);
        let ready = kruise_ordering::predicates::is_running_and_ready(pod)
            && kruise_ordering::predicates::is_in_place_update_not_false(pod);
        let available = world.is_available(pod);
        s.replicas += 1;
        s.ready_replicas += i32::from(ready);
        s.available_replicas += i32::from(available);
        if updated {
            s.updated_replicas += 1;
            s.updated_ready_replicas += i32::from(ready);
            s.updated_available_replicas += i32::from(available);
        }
    }
    let replicas = world.replicas();
    let partition = diffs(world, false).map(|d| d.partition).unwrap_or(0);
    s.expected_updated_replicas = replicas - partition;
    if s.updated_replicas == s.replicas && s.replicas == replicas {
        s.current_revision = s.update_revision.clone();
    }

    let now = world.now;
    if let Some(message) = &errors.scale {
        set_condition(
            &mut s.conditions,
            keys::CLONESET_CONDITION_FAILED_SCALE,
            "True",
            "",
            message,
            now,
        );
    }
    if let Some(message) = &errors.update {
        set_condition(
            &mut s.conditions,
            keys::CLONESET_CONDITION_FAILED_UPDATE,
            "True",
            "",
            message,
            now,
        );
    }
    let mut requeue = progressing(world, &mut s, now);
    let min_ready_seconds = world.cs.spec.min_ready_seconds;
    if min_ready_seconds > 0 && s.available_replicas != s.ready_replicas {
        requeue = min_duration(requeue, Some(Duration::from_secs(min_ready_seconds as u64)));
    }
    (s, requeue)
}

/// The Progressing condition (only with `progressDeadlineSeconds`).
fn progressing(world: &World, s: &mut CloneSetStatus, now: Timestamp) -> Option<Duration> {
    let deadline = world
        .cs
        .spec
        .progress_deadline_seconds
        .filter(|d| *d != i32::MAX)?;
    let replicas = world.replicas();
    let paused = world.cs.spec.update_strategy.paused;
    let previous = s
        .conditions
        .iter()
        .find(|c| c.type_ == keys::CLONESET_CONDITION_PROGRESSING)
        .cloned();
    let (status, reason, message) = if s.updated_available_replicas == replicas
        && s.replicas == replicas
        && s.current_revision == s.update_revision
    {
        (
            "True",
            REASON_AVAILABLE,
            "CloneSet is available".to_string(),
        )
    } else if paused {
        ("True", REASON_PAUSED, "CloneSet is paused".to_string())
    } else if s.expected_updated_replicas < replicas
        && s.expected_updated_replicas <= s.updated_available_replicas
    {
        (
            "True",
            REASON_PARTITION_AVAILABLE,
            "CloneSet has been paused due to partition ready".to_string(),
        )
    } else {
        let started = previous
            .as_ref()
            .filter(|c| c.reason == REASON_UPDATED || c.reason == REASON_DEADLINE_EXCEEDED)
            .and_then(|c| c.last_update_time.as_ref())
            .map(|t| t.0);
        match started {
            Some(since) if since + jiff::SignedDuration::from_secs(i64::from(deadline)) <= now => (
                "False",
                REASON_DEADLINE_EXCEEDED,
                format!(
                    "CloneSet revision {} has timed out progressing",
                    s.update_revision
                ),
            ),
            _ => (
                "True",
                REASON_UPDATED,
                "CloneSet is progressing".to_string(),
            ),
        }
    };
    let keep_update_time = previous.as_ref().is_some_and(|c| {
        c.reason == reason || (reason == REASON_DEADLINE_EXCEEDED && c.reason == REASON_UPDATED)
    });
    set_condition(
        &mut s.conditions,
        keys::CLONESET_CONDITION_PROGRESSING,
        status,
        reason,
        &message,
        now,
    );
    if keep_update_time
        && let (Some(prev), Some(c)) = (
            previous,
            s.conditions
                .iter_mut()
                .find(|c| c.type_ == keys::CLONESET_CONDITION_PROGRESSING),
        )
    {
        c.last_update_time = prev.last_update_time;
    }
    if reason == REASON_UPDATED {
        let since = s
            .conditions
            .iter()
            .find(|c| c.type_ == keys::CLONESET_CONDITION_PROGRESSING)
            .and_then(|c| c.last_update_time.as_ref())
            .map(|t| t.0)
            .unwrap_or(now);
        let due = since + jiff::SignedDuration::from_secs(i64::from(deadline));
        return Some(
            due.duration_since(now)
                .unsigned_abs()
                .max(Duration::from_secs(1)),
        );
    }
    None
}

/// Sets a condition; the transition time changes only when the status does.
pub fn set_condition(
    conditions: &mut Vec<CloneSetCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Some(Time(now));
            }
            if c.status != status || c.reason != reason || c.message != message {
                c.last_update_time = Some(Time(now));
            }
            c.status = status.into();
            c.reason = reason.into();
            c.message = message.into();
        }
        None => conditions.push(CloneSetCondition {
            type_: type_.into(),
            status: status.into(),
            last_update_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
            reason: reason.into(),
            message: message.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn counts_pods_by_readiness_and_revision() {
        // The partition example of OpenKruise's documentation (CloneSet user manual): partition 3
        // of 5 after the rollout.
        let mut f = Fixture::new(5);
        f.cs.metadata.generation = Some(2);
        f.cs.spec.update_strategy.partition = Some(int(3));
        f.add_pods(3, Rev::Current, Ready::Yes);
        f.add_pods(2, Rev::Update, Ready::Yes);
        let (s, _) = compute_status(&f.world(), &Default::default(), None, &Default::default());
        assert_eq!(
            (
                s.replicas,
                s.ready_replicas,
                s.updated_replicas,
                s.updated_ready_replicas
            ),
            (5, 5, 2, 2)
        );
        assert_eq!(s.expected_updated_replicas, 2);
        assert_eq!(s.update_revision, "cs-new");
        assert_eq!(s.current_revision, "cs-old");
        assert_eq!(s.observed_generation, 2);
        assert_eq!(s.label_selector, "app=cs");
    }

    #[test]
    fn current_revision_follows_once_everything_is_updated() {
        let mut f = Fixture::new(2);
        f.add_pods(2, Rev::Update, Ready::No);
        let (s, _) = compute_status(&f.world(), &Default::default(), None, &Default::default());
        assert_eq!(s.current_revision, "cs-new", "readiness not required");
    }

    #[test]
    fn percent_partition_reports_expected_updated_replicas() {
        let mut f = Fixture::new(8);
        f.cs.spec.update_strategy.partition = Some(string("90%"));
        let (s, _) = compute_status(&f.world(), &Default::default(), None, &Default::default());
        assert_eq!(s.expected_updated_replicas, 1);
    }

    #[test]
    fn errors_become_conditions() {
        let f = Fixture::new(1);
        let errors = PhaseErrors {
            update: Some("boom".into()),
            ..Default::default()
        };
        let (s, _) = compute_status(&f.world(), &Default::default(), None, &errors);
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == "FailedUpdate")
            .unwrap();
        assert_eq!((c.status.as_str(), c.message.as_str()), ("True", "boom"));
    }

    #[test]
    fn pods_within_min_ready_seconds_bring_the_controller_back() {
        let mut f = Fixture::new(2);
        f.add_pods(2, Rev::Update, Ready::Yes);
        let (_, requeue) =
            compute_status(&f.world(), &Default::default(), None, &Default::default());
        assert_eq!(requeue, None, "no minReadySeconds: nothing to wait for");
        f.cs.spec.min_ready_seconds = 20;
        let (_, requeue) =
            compute_status(&f.world(), &Default::default(), None, &Default::default());
        assert_eq!(requeue, None, "every ready Pod is available already");
        let just_ready = Time(f.now - jiff::SignedDuration::from_secs(5));
        for c in f.pods[1]
            .status
            .as_mut()
            .unwrap()
            .conditions
            .iter_mut()
            .flatten()
        {
            c.last_transition_time = Some(just_ready.clone());
        }
        let (s, requeue) =
            compute_status(&f.world(), &Default::default(), None, &Default::default());
        assert_eq!((s.ready_replicas, s.available_replicas), (2, 1));
        assert_eq!(requeue, Some(Duration::from_secs(20)));
        f.cs.spec.progress_deadline_seconds = Some(10);
        let (_, requeue) =
            compute_status(&f.world(), &Default::default(), None, &Default::default());
        assert_eq!(
            requeue,
            Some(Duration::from_secs(10)),
            "the earlier one wins"
        );
    }

    #[test]
    fn progressing_times_out_after_the_deadline() {
        let mut f = Fixture::new(2);
        f.cs.spec.progress_deadline_seconds = Some(30);
        f.add_pods(2, Rev::Current, Ready::Yes);
        let (s, requeue) =
            compute_status(&f.world(), &Default::default(), None, &Default::default());
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", REASON_UPDATED)
        );
        assert_eq!(requeue, Some(Duration::from_secs(30)));
        f.now += jiff::SignedDuration::from_secs(31);
        let (s2, _) = compute_status(&f.world(), &s, None, &Default::default());
        let c = s2
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", REASON_DEADLINE_EXCEEDED)
        );
        assert_eq!(
            c.message,
            "CloneSet revision cs-new has timed out progressing"
        );
    }
}
