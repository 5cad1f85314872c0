//! Test fixtures: a CloneSet, two revisions (current: nginx:alpine, update: nginx:1.7.9)
//! and Pods at either revision, ready or not.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{CloneSet, CloneSetSpec};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_api::pod::{Container, PodSpec};
use kruise_workload::revision;
use kruise_workload::testing::{
    self, in_place_update_ready_gate, pod_template, running_status, set_label,
};
pub use kruise_workload::testing::{Ready, Rev, now};

use super::{Options, World};

pub fn int(v: i32) -> IntOrString {
    IntOrString::Int(v)
}

pub fn string(v: &str) -> IntOrString {
    IntOrString::String(v.into())
}

pub fn template(image: &str) -> PodTemplateSpec {
    pod_template("cs", image)
}

pub fn controller_revision(name: &str, image: &str, number: i64) -> ControllerRevision {
    testing::controller_revision(&format!("cs-{name}"), &template(image), number)
}

/// The controller reference the fixture CloneSet puts on what it owns.
pub fn owner_ref() -> OwnerReference {
    OwnerReference {
        api_version: "apps.kruise.io/v1alpha1".into(),
        kind: "CloneSet".into(),
        name: "cs".into(),
        uid: "cs-uid".into(),
        controller: Some(true),
        ..Default::default()
    }
}

pub struct Fixture {
    pub cs: CloneSet,
    pub pods: Vec<Pod>,
    /// Pods the CloneSet owns but does not manage (inactive, or not selected).
    pub others: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub current: ControllerRevision,
    pub update: ControllerRevision,
    pub options: Options,
    pub now: Timestamp,
    next: usize,
}

impl Fixture {
    /// A CloneSet with `replicas`, template at the update revision (nginx:1.7.9), the
    /// current revision at nginx:alpine.
    pub fn new(replicas: i32) -> Self {
        let mut cs = CloneSet::new(
            "cs",
            CloneSetSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".into(), "cs".into())])),
                    ..Default::default()
                },
                template: template("nginx:1.7.9"),
                ..Default::default()
            },
        );
        cs.metadata.namespace = Some("ns".into());
        cs.metadata.uid = Some("cs-uid".into());
        Fixture {
            cs,
            pods: Vec::new(),
            others: Vec::new(),
            pvcs: Vec::new(),
            current: controller_revision("old", "nginx:alpine", 1),
            update: controller_revision("new", "nginx:1.7.9", 2),
            options: Options::default(),
            now: now(),
            next: 0,
        }
    }

    /// The current and update revision are the same (no rollout in progress).
    pub fn settled(mut self) -> Self {
        self.current = self.update.clone();
        self
    }

    pub fn world(&self) -> World<'_> {
        World {
            cs: &self.cs,
            pods: self.pods.iter().collect(),
            owned: self.pods.iter().chain(&self.others).collect(),
            pvcs: self.pvcs.iter().collect(),
            current_revision: &self.current,
            update_revision: &self.update,
            revisions: vec![&self.current, &self.update],
            options: self.options,
            now: self.now,
        }
    }

    pub fn add_pods(&mut self, n: usize, rev: Rev, ready: Ready) {
        for _ in 0..n {
            let pod = self.pod(rev, ready);
            self.pods.push(pod);
        }
    }

    /// A Pod of this CloneSet, scheduled, Running, ready for an hour (or not ready).
    pub fn pod(&mut self, rev: Rev, ready: Ready) -> Pod {
        self.next += 1;
        let id = format!("id{:03}", self.next);
        let (revision, image) = match rev {
            Rev::Current => (self.current.metadata.name.clone().unwrap(), "nginx:alpine"),
            Rev::Update => (self.update.metadata.name.clone().unwrap(), "nginx:1.7.9"),
        };
        let since = Time(self.now - jiff::SignedDuration::from_hours(1));
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("cs-{id}")),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{id}")),
                resource_version: Some("1".into()),
                creation_timestamp: Some(Time(
                    self.now - jiff::SignedDuration::from_secs(3600 - self.next as i64),
                )),
                labels: Some(BTreeMap::from([
                    ("app".into(), "cs".into()),
                    (keys::CLONESET_INSTANCE_ID.into(), id.clone()),
                    (keys::CONTROLLER_REVISION_HASH.into(), revision.clone()),
                    (
                        keys::POD_TEMPLATE_HASH.into(),
                        revision::short_hash(&revision).into(),
                    ),
                    (keys::LIFECYCLE_STATE.into(), "Normal".into()),
                ])),
                owner_references: Some(vec![owner_ref()]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(format!("node-{}", self.next % 4)),
                containers: vec![Container {
                    name: "nginx".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                readiness_gates: Some(in_place_update_ready_gate()),
                ..Default::default()
            }),
            status: Some(running_status(image, ready, since)),
        }
    }

    pub fn mark_specified_delete(&mut self, index: usize) {
        set_label(&mut self.pods[index], keys::SPECIFIED_DELETE, "true");
    }

    pub fn set_state(&mut self, index: usize, state: &str) {
        set_label(&mut self.pods[index], keys::LIFECYCLE_STATE, state);
    }

    pub fn name(&self, index: usize) -> String {
        self.pods[index].metadata.name.clone().unwrap()
    }
}

/// Deterministic instance ids for plans.
pub fn ids() -> impl Iterator<Item = String> {
    (0..).map(|i| format!("new{i:02}"))
}
