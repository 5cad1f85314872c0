//! The set's status (upstream `computeReplicaStatus`, `openkruise/kruise v1.9.0
//! pkg/controller/statefulset/stateful_set_control.go`) from its Pods.

use k8s_openapi::api::apps::v1::StatefulSetCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1beta1::{StatefulSetStatus, StatefulSetUpdateStrategyType};
use kruise_api::keys;
use kruise_ordering::selector::format_selector;

use super::ordinals::Replicas;
use super::resize;
use super::{World, is_created, is_terminating};

/// What failed this round, shown as the `FailedCreatePod` / `FailedUpdatePod`
/// conditions: the underlying error text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhaseErrors {
    pub create: Option<String>,
    pub update: Option<String>,
}

/// The new status. `previous` supplies the conditions, kept unless this round's
/// errors replace one.
pub fn compute_status(
    world: &World,
    previous: &StatefulSetStatus,
    collision_count: i32,
    errors: &PhaseErrors,
) -> StatefulSetStatus {
    let mut s = StatefulSetStatus {
        observed_generation: world.sts.metadata.generation.unwrap_or_default(),
        current_revision: world.current_revision_name().to_string(),
        update_revision: world.update_revision_name().to_string(),
        collision_count: Some(collision_count),
        label_selector: format_selector(&world.sts.spec.selector),
        conditions: previous.conditions.clone(),
        ..Default::default()
    };
    let min_ready = world.min_ready_seconds();
    for pod in &world.pods {
        let updated = world.is_update_revision(pod);
        let ready = kruise_ordering::predicates::is_running_and_ready(pod);
        // Available also needs lifecycle Normal (and InPlaceUpdateReady not False).
        let available = kruise_ordering::predicates::is_available(pod, min_ready, world.now);
        s.replicas += i32::from(is_created(pod));
        s.ready_replicas += i32::from(ready);
        s.available_replicas += i32::from(available);
        if updated {
            s.updated_ready_replicas += i32::from(ready);
            s.updated_available_replicas += i32::from(available);
        }
        if is_created(pod) && !is_terminating(pod) {
            s.current_replicas += i32::from(world.is_current_revision(pod));
            s.updated_replicas += i32::from(updated);
        }
    }
    s.volume_claims = resize::volume_claims_status(world, Replicas::of(world).live_pods());
    // The rollout is complete (upstream `completeRollingUpdate`).
    if world.sts.spec.update_strategy.strategy_type()
        == StatefulSetUpdateStrategyType::RollingUpdate
        && s.updated_replicas == s.replicas
        && s.ready_replicas == s.replicas
    {
        s.current_revision = s.update_revision.clone();
        s.current_replicas = s.updated_replicas;
    }

    if let Some(err) = &errors.create {
        set_condition(
            &mut s.conditions,
            keys::STATEFULSET_CONDITION_FAILED_CREATE_POD,
            &format!("StatefulPodControl failed to create Pod error: {err}"),
            world.now,
        );
    }
    if let Some(err) = &errors.update {
        set_condition(
            &mut s.conditions,
            keys::STATEFULSET_CONDITION_FAILED_UPDATE_POD,
            &format!("StatefulPodControl failed to update Pod error: {err}"),
            world.now,
        );
    }
    s
}

/// Sets a failure condition to True with `message`; its lastTransitionTime changes
/// only when the status does.
fn set_condition(
    conditions: &mut Vec<StatefulSetCondition>,
    type_: &str,
    message: &str,
    now: jiff::Timestamp,
) {
    const TRUE: &str = "True";
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != TRUE {
                c.last_transition_time = Some(Time(now));
                c.status = TRUE.into();
            }
            c.message = Some(message.into());
        }
        None => conditions.push(StatefulSetCondition {
            type_: type_.into(),
            status: TRUE.into(),
            last_transition_time: Some(Time(now)),
            reason: None,
            message: Some(message.into()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;

    fn status(f: &Fixture) -> StatefulSetStatus {
        compute_status(&f.world(), &Default::default(), 0, &Default::default())
    }

    #[test]
    fn counts_pods_by_readiness_and_revision() {
        let mut f = Fixture::new(5);
        f.sts.metadata.generation = Some(3);
        rolling(&mut f).partition = Some(3);
        f.add_pods(&[0, 1], Rev::Current, Ready::Yes);
        f.add_pods(&[2], Rev::Current, Ready::No);
        f.add_pods(&[3, 4], Rev::Update, Ready::Yes);
        let s = status(&f);
        assert_eq!(
            (
                s.replicas,
                s.ready_replicas,
                s.available_replicas,
                s.current_replicas,
                s.updated_replicas,
                s.updated_ready_replicas,
                s.updated_available_replicas,
            ),
            (5, 4, 4, 3, 2, 2, 2)
        );
        assert_eq!(s.current_revision, "web-old");
        assert_eq!(s.update_revision, "web-new");
        assert_eq!(s.observed_generation, 3);
        assert_eq!(s.collision_count, Some(0));
        assert_eq!(s.label_selector, "app=nginx");
    }

    #[test]
    fn terminating_pods_count_as_replicas_but_not_per_revision() {
        let mut f = Fixture::new(2);
        f.add_pods(&[0, 1], Rev::Current, Ready::Yes);
        f.set_terminating(1);
        let s = status(&f);
        assert_eq!((s.replicas, s.current_replicas), (2, 1));
        f.set_phase(1, "");
        assert_eq!(
            status(&f).replicas,
            1,
            "a Pod without a phase is not created yet"
        );
    }

    #[test]
    fn available_needs_min_ready_seconds_and_lifecycle_normal() {
        let mut f = Fixture::new(3);
        min_ready(&mut f, 30);
        f.add_pods(&[0, 1, 2], Rev::Update, Ready::Yes);
        f.set_ready_since(1, 10);
        f.set_state(2, "PreparingDelete");
        let s = status(&f);
        assert_eq!((s.ready_replicas, s.available_replicas), (3, 1));
        assert_eq!(s.updated_available_replicas, 1);
    }

    #[test]
    fn current_revision_follows_once_all_pods_are_updated_and_ready() {
        let mut f = Fixture::new(2);
        f.add_pods(&[0, 1], Rev::Update, Ready::No);
        assert_eq!(status(&f).current_revision, "web-old", "not ready yet");
        f.set_ready(0, true);
        f.set_ready(1, true);
        let s = status(&f);
        assert_eq!(s.current_revision, "web-new");
        assert_eq!(s.current_replicas, 2);
        // OnDelete never completes a rolling update.
        f.sts.spec.update_strategy.type_ = Some(StatefulSetUpdateStrategyType::OnDelete);
        assert_eq!(status(&f).current_revision, "web-old");
    }

    #[test]
    fn rollback_reuses_the_old_revision() {
        // Rolling back to the previous template makes the old revision the
        // update revision again; Pods at it count as updated.
        let mut f = Fixture::new(3);
        rolling(&mut f).partition = Some(1);
        f.add_pods(&[0], Rev::Current, Ready::Yes);
        f.add_pods(&[1, 2], Rev::Update, Ready::Yes);
        std::mem::swap(&mut f.current, &mut f.update);
        let s = status(&f);
        assert_eq!(s.update_revision, "web-old");
        assert_eq!(s.current_revision, "web-new");
        assert_eq!((s.updated_replicas, s.current_replicas), (1, 2));
    }

    #[test]
    fn errors_become_conditions_and_others_are_kept() {
        let f = Fixture::new(1);
        let mut previous = StatefulSetStatus::default();
        previous.conditions.push(StatefulSetCondition {
            type_: "Custom".into(),
            status: "False".into(),
            ..Default::default()
        });
        let errors = PhaseErrors {
            create: Some("boom".into()),
            update: None,
        };
        let s = compute_status(&f.world(), &previous, 1, &errors);
        assert_eq!(s.conditions.len(), 2);
        let c = &s.conditions[1];
        assert_eq!(c.type_, "FailedCreatePod");
        assert_eq!(c.status, "True");
        assert_eq!(
            c.message.as_deref(),
            Some("StatefulPodControl failed to create Pod error: boom")
        );
        let first = c.last_transition_time.clone();

        // Again later with another message: the transition time stays.
        let mut later = f.world();
        later.now += jiff::SignedDuration::from_secs(60);
        let errors = PhaseErrors {
            create: Some("again".into()),
            update: Some("nope".into()),
        };
        let s2 = compute_status(&later, &s, 1, &errors);
        assert_eq!(s2.conditions[1].last_transition_time, first);
        assert_eq!(
            s2.conditions[2].message.as_deref(),
            Some("StatefulPodControl failed to update Pod error: nope")
        );
        assert_eq!(s2.conditions[2].type_, "FailedUpdatePod");
    }
}
