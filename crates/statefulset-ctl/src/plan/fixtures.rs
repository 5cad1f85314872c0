//! Test fixtures: the set `web` (namespace `default`, serviceName `nginx-headless`,
//! label `app=nginx`), two revisions (current `web-old`: nginx:alpine, update `web-new`:
//! nginx:1.7.9) and Pods by ordinal at either revision, ready or not.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use kruise_api::apps_v1beta1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy,
    StatefulSetUpdateStrategyType,
};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_workload::testing::{
    self, in_place_update_ready_gate, pod_template, running_status, set_label,
};
pub use kruise_workload::testing::{Ready, Rev, now};

use super::pods::{claim_name, claims_for};
use super::{Action, Options, Plan, World, pod_name_for};

/// The Pod template at `image`, with the `InPlaceUpdateReady` gate in-place updates need.
pub fn template(image: &str) -> PodTemplateSpec {
    let mut template = pod_template("nginx", image);
    template.spec.as_mut().unwrap().readiness_gates = Some(in_place_update_ready_gate());
    template
}

/// Revision `web-<name>` holding `template`.
pub fn controller_revision_of(
    name: &str,
    template: PodTemplateSpec,
    number: i64,
) -> ControllerRevision {
    testing::controller_revision(&format!("web-{name}"), &template, number)
}

pub struct Fixture {
    pub sts: StatefulSet,
    pub pods: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub storage_classes: Vec<k8s_openapi::api::storage::v1::StorageClass>,
    pub current: ControllerRevision,
    pub update: ControllerRevision,
    pub options: Options,
    pub now: Timestamp,
}

impl Fixture {
    /// `web` with `replicas`, OrderedReady, RollingUpdate (partition 0, maxUnavailable
    /// 1, ReCreate), template at the update revision.
    pub fn new(replicas: i32) -> Self {
        let mut sts = StatefulSet::new(
            "web",
            StatefulSetSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".into(), "nginx".into())])),
                    ..Default::default()
                },
                template: template("nginx:1.7.9"),
                service_name: Some("nginx-headless".into()),
                update_strategy: StatefulSetUpdateStrategy {
                    type_: Some(StatefulSetUpdateStrategyType::RollingUpdate),
                    rolling_update: Some(RollingUpdateStatefulSetStrategy::default()),
                },
                ..Default::default()
            },
        );
        sts.metadata.namespace = Some("default".into());
        sts.metadata.uid = Some("web-uid".into());
        Fixture {
            sts,
            pods: Vec::new(),
            pvcs: Vec::new(),
            storage_classes: Vec::new(),
            current: controller_revision_of("old", template("nginx:alpine"), 1),
            update: controller_revision_of("new", template("nginx:1.7.9"), 2),
            options: Options::default(),
            now: now(),
        }
    }

    pub fn world(&self) -> World<'_> {
        World {
            sts: &self.sts,
            pods: self.pods.iter().collect(),
            pvcs: self.pvcs.iter().collect(),
            storage_classes: self.storage_classes.iter().collect(),
            current_revision: &self.current,
            update_revision: &self.update,
            revisions: vec![&self.current, &self.update],
            options: self.options,
            now: self.now,
        }
    }

    pub fn add_pods(&mut self, ordinals: &[i32], rev: Rev, ready: Ready) {
        for &ordinal in ordinals {
            let pod = self.pod(ordinal, rev, ready);
            self.pods.push(pod);
        }
    }

    /// Replaces the Pod at `ordinal` with a new one (as after a recreate).
    pub fn replace_pod(&mut self, ordinal: i32, rev: Rev, ready: Ready) {
        let pod = self.pod(ordinal, rev, ready);
        *self.pod_mut(ordinal) = pod;
    }

    /// The Pod at `ordinal` as the controller would have created it, scheduled and
    /// Running, ready for an hour (or not ready).
    pub fn pod(&self, ordinal: i32, rev: Rev, ready: Ready) -> Pod {
        let revision = match rev {
            Rev::Current => &self.current,
            Rev::Update => &self.update,
        };
        let options = Options {
            pod_index_label: true,
            ..self.options
        };
        let created = super::new_pod(&self.sts, revision, ordinal, &options, self.now);
        let mut pod = Pod::from(&created);
        let image = pod.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap();
        pod.metadata.uid = Some(format!("uid-{ordinal}-{}", self.pods.len()));
        pod.metadata.resource_version = Some("1".into());
        pod.metadata.creation_timestamp = Some(Time(self.now - SignedDuration::from_hours(2)));
        // Only the in-place gate: the KruisePodReady condition is a refresh test's business.
        pod.spec.as_mut().unwrap().readiness_gates = Some(in_place_update_ready_gate());
        pod.spec.as_mut().unwrap().node_name = Some(format!("node-{}", ordinal % 3));
        let since = Time(self.now - SignedDuration::from_hours(1));
        pod.status = Some(running_status(&image, ready, since));
        pod
    }

    pub fn pod_mut(&mut self, ordinal: i32) -> &mut Pod {
        let name = pod_name_for("web", ordinal);
        self.pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no Pod {name}"))
    }

    pub fn set_ready(&mut self, ordinal: i32, ready: bool) {
        let now = self.now;
        let pod = self.pod_mut(ordinal);
        for c in pod.status.as_mut().unwrap().conditions.as_mut().unwrap() {
            if c.type_ == "Ready" {
                c.status = if ready { "True" } else { "False" }.into();
                c.last_transition_time = Some(Time(now - SignedDuration::from_hours(1)));
            }
        }
    }

    /// Ready since `seconds` ago.
    pub fn set_ready_since(&mut self, ordinal: i32, seconds: i64) {
        let now = self.now;
        self.set_ready(ordinal, true);
        let pod = self.pod_mut(ordinal);
        for c in pod.status.as_mut().unwrap().conditions.as_mut().unwrap() {
            if c.type_ == "Ready" {
                c.last_transition_time = Some(Time(now - SignedDuration::from_secs(seconds)));
            }
        }
    }

    pub fn set_phase(&mut self, ordinal: i32, phase: &str) {
        let pod = self.pod_mut(ordinal);
        pod.status.as_mut().unwrap().phase = (!phase.is_empty()).then(|| phase.to_string());
    }

    pub fn set_terminating(&mut self, ordinal: i32) {
        let now = self.now;
        self.pod_mut(ordinal).metadata.deletion_timestamp = Some(Time(now));
    }

    pub fn set_state(&mut self, ordinal: i32, state: &str) {
        self.set_label(ordinal, keys::LIFECYCLE_STATE, state);
    }

    pub fn set_label(&mut self, ordinal: i32, key: &str, value: &str) {
        set_label(self.pod_mut(ordinal), key, value);
    }

    pub fn mark_specified_delete(&mut self, ordinal: i32) {
        self.set_label(ordinal, keys::SPECIFIED_DELETE, "true");
    }

    /// Existing PVCs for these ordinals, as the controller would have made them.
    pub fn add_claims(&mut self, ordinals: &[i32]) {
        for &ordinal in ordinals {
            for mut claim in claims_for(&self.sts, ordinal) {
                claim.metadata.uid = Some(format!("pvc-uid-{ordinal}"));
                claim.metadata.resource_version = Some("5".into());
                self.pvcs.push(claim);
            }
        }
    }

    /// The claims of `ordinal` are owned by its (old) Pod, as `whenScaled: Delete` leaves
    /// them.
    pub fn hand_claim_to_pod(&mut self, ordinal: i32) {
        let prefix_free = pod_name_for("web", ordinal);
        let uid = self
            .pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(prefix_free.as_str()))
            .and_then(|p| p.metadata.uid.clone())
            .unwrap_or_else(|| "gone-uid".into());
        for t in &self.sts.spec.volume_claim_templates {
            let name = claim_name(t.metadata.name.as_deref().unwrap(), "web", ordinal);
            let claim = self
                .pvcs
                .iter_mut()
                .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
                .unwrap();
            claim.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: prefix_free.clone(),
                uid: uid.clone(),
                ..Default::default()
            }]);
        }
    }
}

/// `updateStrategy.rollingUpdate`, created if missing.
pub fn rolling(f: &mut Fixture) -> &mut RollingUpdateStatefulSetStrategy {
    f.sts
        .spec
        .update_strategy
        .rolling_update
        .get_or_insert_with(Default::default)
}

pub fn min_ready(f: &mut Fixture, seconds: i32) {
    rolling(f).min_ready_seconds = Some(seconds);
}

/// A claim template `name` with label `tier=db`.
pub fn with_claim_template(f: &mut Fixture, name: &str) {
    f.sts
        .spec
        .volume_claim_templates
        .push(PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([("tier".into(), "db".into())])),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                ..Default::default()
            }),
            status: None,
        });
}

/// `"<kind> <object>"` per action, in plan order.
pub fn summary(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .map(|a| format!("{} {}", a.kind(), a.object_name()))
        .collect()
}

/// `(pod, revision)` of each Create, in plan order.
pub fn created_revisions<'p>(plan: &'p Plan) -> Vec<(&'p str, &'p str)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Create { pod, revision, .. } => Some((
                pod.metadata.name.as_deref().unwrap_or_default(),
                revision.as_str(),
            )),
            _ => None,
        })
        .collect()
}
