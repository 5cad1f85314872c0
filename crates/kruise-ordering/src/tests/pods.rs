//! A small builder for test Pods.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys;
use kruise_api::pod::{ContainerStatus, Pod, PodSpec, PodStatus};

use crate::predicates;

/// A fixed instant plus `secs` seconds, so tests read as offsets.
pub fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("in range")
}

/// The Pods' names, in order.
pub fn names(pods: &[&Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| predicates::name(p).to_owned())
        .collect()
}

/// Builds a Pod named `name` in namespace `default`; nothing else is set until asked.
pub struct PodBuilder(Pod);

impl PodBuilder {
    pub fn new(name: &str) -> Self {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.namespace = Some("default".to_owned());
        PodBuilder(pod)
    }

    pub fn build(self) -> Pod {
        self.0
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn status(&mut self) -> &mut PodStatus {
        self.0.status.get_or_insert_with(Default::default)
    }

    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.to_owned());
        self
    }

    pub fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.to_owned());
        self
    }

    pub fn no_phase(mut self) -> Self {
        self.status().phase = None;
        self
    }

    /// Sets (or replaces) a condition without a transition time.
    pub fn condition(self, type_: &str, status: &str) -> Self {
        self.condition_at(type_, status, None)
    }

    fn condition_at(mut self, type_: &str, status: &str, at: Option<Timestamp>) -> Self {
        let conditions = self.status().conditions.get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != type_);
        conditions.push(PodCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_transition_time: at.map(Time),
            ..Default::default()
        });
        self
    }

    /// `Ready=True` since `at`.
    pub fn ready_since(self, at: Timestamp) -> Self {
        self.condition_at("Ready", "True", Some(at))
    }

    /// `Ready=True` with no transition time.
    pub fn ready_without_time(self) -> Self {
        self.condition_at("Ready", "True", None)
    }

    /// `Ready=False` since `at`.
    pub fn not_ready(self, at: Timestamp) -> Self {
        self.condition_at("Ready", "False", Some(at))
    }

    pub fn created(mut self, at: Timestamp) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(at));
        self
    }

    pub fn no_creation(mut self) -> Self {
        self.0.metadata.creation_timestamp = None;
        self
    }

    pub fn deleting(mut self, at: Timestamp) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(at));
        self
    }

    /// One container status per entry, with that restart count.
    pub fn restarts(mut self, counts: &[i32]) -> Self {
        self.status().container_statuses = Some(
            counts
                .iter()
                .enumerate()
                .map(|(i, &restart_count)| ContainerStatus {
                    name: format!("c{i}"),
                    restart_count,
                    ..Default::default()
                })
                .collect(),
        );
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn deletion_cost(self, value: &str) -> Self {
        self.annotation(keys::POD_DELETION_COST, value)
    }

    pub fn lifecycle(self, state: &str) -> Self {
        self.label(keys::LIFECYCLE_STATE, state)
    }
}
