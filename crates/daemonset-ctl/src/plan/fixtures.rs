//! Test fixtures: a DaemonSet `nginx` over nodes `node-0…`, two revisions (`old` runs
//! nginx:1.7.9, `new` nginx:1.9.1) and Pods on nodes.

use std::collections::BTreeMap;

use jiff::SignedDuration;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet, RollingUpdateType,
};
use kruise_api::keys;
use kruise_api::pod::Pod;
pub use kruise_workload::testing::{Ready, Rev};
use kruise_workload::testing::{
    controller_revision, in_place_update_ready_gate, now, pod_template, running_status, set_label,
};

use super::nodes::bind_to_node;
use super::pods::controller_reference;
use super::{Options, Plan, World};

pub struct Fixture {
    pub ds: DaemonSet,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub old: ControllerRevision,
    pub new: ControllerRevision,
    pub now: jiff::Timestamp,
    pub failed_backoff: BTreeMap<String, jiff::Timestamp>,
    pub options: Options,
    seq: usize,
}

pub fn node_name(i: usize) -> String {
    format!("node-{i}")
}

impl Fixture {
    /// `nodes` untainted nodes labelled `kubernetes.io/hostname`, no Pods yet.
    pub fn new(nodes: usize) -> Self {
        let template = pod_template("nginx", "nginx:1.9.1");
        let ds = DaemonSet {
            metadata: ObjectMeta {
                name: Some("nginx".into()),
                namespace: Some("default".into()),
                uid: Some("ds-uid".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: DaemonSetSpec {
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".into(), "nginx".into())])),
                    match_expressions: None,
                },
                template: template.clone(),
                update_strategy: DaemonSetUpdateStrategy {
                    type_: None,
                    rolling_update: Some(RollingUpdateDaemonSet::default()),
                },
                ..Default::default()
            },
            status: None,
        };
        Fixture {
            ds,
            nodes: (0..nodes).map(|i| node(&node_name(i), &[])).collect(),
            pods: Vec::new(),
            old: controller_revision("nginx-old", &pod_template("nginx", "nginx:1.7.9"), 1),
            new: controller_revision("nginx-new", &template, 2),
            now: now(),
            failed_backoff: BTreeMap::new(),
            options: Options::default(),
            seq: 0,
        }
    }

    pub fn world(&self) -> World<'_> {
        World {
            ds: &self.ds,
            nodes: self.nodes.iter().collect(),
            pods: self.pods.iter().collect(),
            update_revision: &self.new,
            revisions: vec![&self.old, &self.new],
            options: self.options,
            now: self.now,
            failed_backoff: self.failed_backoff.clone(),
        }
    }

    pub fn plan(&self) -> Plan<'_> {
        super::plan(&self.world())
    }

    pub fn rolling(&mut self) -> &mut RollingUpdateDaemonSet {
        self.ds
            .spec
            .update_strategy
            .rolling_update
            .get_or_insert_with(Default::default)
    }

    pub fn set_type(&mut self, t: RollingUpdateType) {
        self.rolling().rolling_update_type = Some(t);
    }

    pub fn max_unavailable(&mut self, n: i32) {
        self.rolling().max_unavailable = Some(IntOrString::Int(n));
    }

    pub fn max_surge(&mut self, n: i32) {
        self.rolling().max_surge = Some(IntOrString::Int(n));
        self.rolling().max_unavailable = Some(IntOrString::Int(0));
    }

    /// A Pod on node `i` at `rev`, Running (Ready or not) for an hour; returns its index.
    pub fn add_pod(&mut self, i: usize, rev: Rev, ready: Ready) -> usize {
        self.seq += 1;
        let (hash, image) = match rev {
            Rev::Current => ("old", "nginx:1.7.9"),
            Rev::Update => ("new", "nginx:1.9.1"),
        };
        let mut template = pod_template("nginx", image);
        if let Some(spec) = template.spec.as_mut() {
            bind_to_node(spec, &node_name(i));
        }
        let since = Time(self.now - SignedDuration::from_hours(1));
        let mut pod = Pod {
            metadata: template.metadata.unwrap_or_default(),
            spec: template.spec.as_ref().map(Into::into),
            status: Some(running_status(image, ready, since.clone())),
        };
        pod.metadata.name = Some(format!("nginx-{}", self.seq));
        pod.metadata.namespace = Some("default".into());
        pod.metadata.uid = Some(format!("uid-{}", self.seq));
        pod.metadata.resource_version = Some("1".into());
        pod.metadata.creation_timestamp = Some(Time(
            self.now - SignedDuration::from_hours(2) + SignedDuration::from_secs(self.seq as i64),
        ));
        pod.metadata.owner_references = Some(vec![controller_reference(&self.ds)]);
        let spec = pod.spec.as_mut().unwrap();
        spec.node_name = Some(node_name(i));
        spec.readiness_gates = Some(in_place_update_ready_gate());
        set_label(&mut pod, keys::CONTROLLER_REVISION_HASH, hash);
        self.pods.push(pod);
        self.pods.len() - 1
    }

    /// One Pod per node at `rev`, Ready.
    pub fn add_pods_everywhere(&mut self, rev: Rev) {
        for i in 0..self.nodes.len() {
            self.add_pod(i, rev, Ready::Yes);
        }
    }

    pub fn taint(&mut self, i: usize, key: &str, effect: &str) {
        self.nodes[i]
            .spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Vec::new)
            .push(Taint {
                key: key.into(),
                effect: effect.into(),
                ..Default::default()
            });
    }

    pub fn label_node(&mut self, i: usize, key: &str, value: &str) {
        self.nodes[i]
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }

    pub fn pod_name(&self, index: usize) -> String {
        self.pods[index].metadata.name.clone().unwrap()
    }

    pub fn set_ready_since(&mut self, index: usize, seconds_ago: i64) {
        let since = Time(self.now - SignedDuration::from_secs(seconds_ago));
        for c in self.pods[index]
            .status
            .as_mut()
            .unwrap()
            .conditions
            .iter_mut()
            .flatten()
        {
            c.last_transition_time = Some(since.clone());
        }
    }
}

pub fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let mut all = BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]);
    all.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(all),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: None,
    }
}

/// What a plan does, in short: `create node-1`, `delete nginx-3`, `inplace nginx-2`,
/// `lifecycle nginx-4`.
pub fn summary(plan: &Plan) -> Vec<String> {
    use super::Action;
    plan.actions
        .iter()
        .map(|a| match a {
            Action::Create { pod, .. } => format!(
                "create {}",
                super::nodes::target_node(pod).unwrap_or_default()
            ),
            other => format!("{} {}", other.kind(), other.object_name()),
        })
        .collect()
}

impl Fixture {
    pub fn min_ready(&mut self, seconds: i32) {
        self.ds.spec.min_ready_seconds = seconds;
    }
}
