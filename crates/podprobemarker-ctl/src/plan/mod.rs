//! What the controllers decide, as pure functions of the caches' contents.
//!
//! - [`node_probes`]: one NodePodProbe per Ready node (not a virtual-kubelet one), named
//!   after it, listing the Pods of that node that the PodProbeMarkers of their namespace
//!   select, with the markers' probes (named `<marker>#<probe>`, named ports resolved
//!   against the probe's container); deleted with its node. As openkruise/kruise v1.9.0
//!   pkg/controller/nodepodprobe (create, delete, drop Pods gone) and
//!   pkg/controller/podprobemarker (`updateNodePodProbes`, `removePodProbeFromNodePodProbe`),
//!   but declarative: the list is recomputed, so a probe removed from a marker, a Pod whose
//!   labels stopped matching and a marker being deleted all leave the list too.
//! - [`pod_marks`]: from a NodePodProbe's status, each probe's marker policy applied to its
//!   Pod (labels and annotations of the policy whose state matches set, those of the
//!   other state removed) and the marker's `podConditionType` condition (True when
//!   Succeeded, False otherwise), as upstream's `updatePodProbeStatus`.
//! - [`marker_status`]: the PodProbeMarker's `matchedPods` and `observedGeneration`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    ContainerProbe, ContainerProbeSpec, NodePodProbe, NodePodProbeSpec, PodContainerProbe,
    PodProbe, PodProbeMarker, PodProbeMarkerStatus, PodProbeStatus, ProbeState, node_probe_name,
    split_node_probe_name,
};
use kruise_ordering::predicates;
use kruise_ordering::selector;

#[cfg(test)]
mod tests;

/// A node of this label is a virtual kubelet (serverless Pods): no NodePodProbe
/// (upstream's `VirtualKubeletLabelKey`/`Value`, pkg/util/virtual_kubelet.go).
pub const VIRTUAL_KUBELET_LABEL: (&str, &str) = ("type", "virtual-kubelet");

/// What the controller reads.
pub struct World<'a> {
    /// The PodProbeMarkers of the instance's scope.
    pub markers: &'a [Arc<PodProbeMarker>],
    /// The Pods of the instance's scope.
    pub pods: &'a [Arc<Pod>],
    pub nodes: &'a [Arc<Node>],
    /// Every NodePodProbe (cluster-scoped).
    pub node_probes: &'a [Arc<NodePodProbe>],
    /// The namespace the instance is scoped to (None: every namespace). Entries of
    /// NodePodProbes for Pods outside it are another instance's, and kept as they are.
    pub scope: Option<&'a str>,
}

impl World<'_> {
    fn in_scope(&self, namespace: &str) -> bool {
        self.scope.is_none_or(|s| s == namespace)
    }
}

/// One write.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A NodePodProbe for a node that has none.
    CreateNodeProbe {
        node: String,
        spec: NodePodProbeSpec,
    },
    /// The NodePodProbe of a node that is gone or being deleted.
    DeleteNodeProbe { name: String, uid: String },
    /// The Pod list of a NodePodProbe, written only if it is still at `resource_version`.
    UpdateNodeProbeSpec {
        name: String,
        resource_version: String,
        spec: NodePodProbeSpec,
    },
    /// Labels, annotations and conditions a Pod's probe results call for.
    MarkPod(PodMarks),
}

/// The changes of one Pod: labels and annotations to set (`Some`) or remove (`None`),
/// conditions to set (merged by type).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodMarks {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    pub conditions: Vec<PodCondition>,
}

impl PodMarks {
    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.conditions.is_empty()
    }

    /// The strategic merge patch of `pods/status` making these changes (conditions merge
    /// by `type`; a `null` label or annotation removes it).
    pub fn patch(&self) -> serde_json::Value {
        let mut metadata = serde_json::Map::new();
        metadata.insert("uid".into(), self.uid.clone().into());
        if !self.labels.is_empty() {
            metadata.insert("labels".into(), serde_json::json!(self.labels));
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), serde_json::json!(self.annotations));
        }
        let mut patch = serde_json::json!({ "metadata": metadata });
        if !self.conditions.is_empty() {
            patch["status"] = serde_json::json!({ "conditions": self.conditions });
        }
        patch
    }
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn is_virtual_kubelet(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(VIRTUAL_KUBELET_LABEL.0))
        .is_some_and(|v| v == VIRTUAL_KUBELET_LABEL.1)
}

fn labels_of(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

/// A Pod probes run for: active, Initialized=True and on a node (upstream's
/// `getMatchingPods`).
pub fn is_probed(pod: &Pod) -> bool {
    predicates::is_active(pod)
        && !predicates::node_name(pod).is_empty()
        && predicates::condition(pod, "Initialized").is_some_and(|c| c.status == "True")
}

/// Whether `marker` selects `pod` (same namespace, selector matches; a selector that does
/// not parse selects nothing).
pub fn selects(marker: &PodProbeMarker, pod: &Pod) -> bool {
    marker.metadata.namespace == pod.metadata.namespace
        && selector::matches(&marker.spec.selector, &labels_of(pod)).unwrap_or(false)
}

fn is_deleting(marker: &PodProbeMarker) -> bool {
    marker.metadata.deletion_timestamp.is_some()
}

/// `port` as a number: a number as is; a name looked up in `container`'s ports, else
/// parsed as a number (upstream's `util.ExtractPort`). None when it is neither, or out
/// of 1..=65535.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Option<i32> {
    let n = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port)
            .or_else(|| name.parse().ok())?,
    };
    (1..=65535).contains(&n).then_some(n)
}

/// The probe of `probe` for `pod`: named tcpSocket/httpGet ports resolved against its
/// container. None when a named port cannot be resolved (upstream skips the probe).
pub fn resolved_probe(probe: &PodContainerProbe, pod: &Pod) -> Option<ContainerProbeSpec> {
    let mut spec = probe.probe.clone();
    let named = |p: &IntOrString| matches!(p, IntOrString::String(_));
    let needs_container = spec.tcp_socket.as_ref().is_some_and(|t| named(&t.port))
        || spec.http_get.as_ref().is_some_and(|h| named(&h.port));
    if !needs_container {
        return Some(spec);
    }
    let container = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == probe.container_name)?;
    if let Some(tcp) = spec.tcp_socket.as_mut() {
        tcp.port = IntOrString::Int(resolve_port(&tcp.port, container)?);
    }
    if let Some(http) = spec.http_get.as_mut() {
        http.port = IntOrString::Int(resolve_port(&http.port, container)?);
    }
    Some(spec)
}

/// The probes of `pod` from the (live) markers of its namespace selecting it, markers in
/// name order, each marker's probes in its order.
fn probes_of(pod: &Pod, markers: &[&PodProbeMarker]) -> Vec<ContainerProbe> {
    let mut out = Vec::new();
    for marker in markers.iter().filter(|m| selects(m, pod)) {
        let marker_name = marker.metadata.name.as_deref().unwrap_or_default();
        for probe in &marker.spec.probes {
            let Some(spec) = resolved_probe(probe, pod) else {
                continue;
            };
            out.push(ContainerProbe {
                name: node_probe_name(marker_name, &probe.name),
                container_name: probe.container_name.clone(),
                probe: spec,
            });
        }
    }
    out
}

fn pod_key(pod: &Pod) -> (&str, &str) {
    (
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// The Pod list `node`'s NodePodProbe should have, given its `current` list: entries
/// of Pods outside the scope kept as they are and where they are; in-scope entries
/// recomputed (kept in place while their Pod is still probed, dropped otherwise); Pods
/// not listed yet appended in namespace/name order.
pub fn desired_spec(world: &World, node: &str, current: &NodePodProbeSpec) -> NodePodProbeSpec {
    let mut markers: Vec<&PodProbeMarker> = world
        .markers
        .iter()
        .map(AsRef::as_ref)
        .filter(|m| !is_deleting(m))
        .collect();
    markers.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut pods: Vec<&Pod> = world
        .pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| predicates::node_name(*p) == node && is_probed(p))
        .filter(|p| world.in_scope(pod_key(p).0))
        .collect();
    pods.sort_by(|a, b| pod_key(a).cmp(&pod_key(b)));
    let mut wanted: HashMap<&str, PodProbe> = HashMap::new();
    for pod in &pods {
        let probes = probes_of(pod, &markers);
        if probes.is_empty() {
            continue;
        }
        let uid = predicates::uid(*pod);
        let (namespace, name) = pod_key(pod);
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        wanted.insert(
            uid,
            PodProbe {
                name: name.to_string(),
                namespace: namespace.to_string(),
                uid: uid.to_string(),
                ip,
                probes,
            },
        );
    }
    let mut out = Vec::new();
    let mut listed: HashSet<String> = HashSet::new();
    for entry in &current.pod_probes {
        if !world.in_scope(&entry.namespace) {
            out.push(entry.clone());
            continue;
        }
        if let Some(mut want) = wanted.get(entry.uid.as_str()).cloned() {
            // A Pod keeps the IP first listed until it has another one.
            if want.ip.is_empty() {
                want.ip = entry.ip.clone();
            }
            listed.insert(want.uid.clone());
            out.push(want);
        }
    }
    for pod in &pods {
        let uid = predicates::uid(*pod);
        if listed.contains(uid) {
            continue;
        }
        if let Some(want) = wanted.get(uid) {
            listed.insert(uid.to_string());
            out.push(want.clone());
        }
    }
    NodePodProbeSpec { pod_probes: out }
}

/// The NodePodProbe writes: create, delete, Pod lists.
pub fn node_probes(world: &World) -> Vec<Action> {
    let nodes: HashMap<&str, &Node> = world
        .nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n.as_ref())))
        .collect();
    let mut actions = Vec::new();
    let mut have: BTreeSet<&str> = BTreeSet::new();
    for npp in world.node_probes {
        let name = npp.metadata.name.as_deref().unwrap_or_default();
        have.insert(name);
        if npp.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match nodes.get(name) {
            None => actions.push(Action::DeleteNodeProbe {
                name: name.to_string(),
                uid: npp.metadata.uid.clone().unwrap_or_default(),
            }),
            Some(node) if node.metadata.deletion_timestamp.is_some() => {
                actions.push(Action::DeleteNodeProbe {
                    name: name.to_string(),
                    uid: npp.metadata.uid.clone().unwrap_or_default(),
                })
            }
            Some(_) => {
                let spec = desired_spec(world, name, &npp.spec);
                if spec != npp.spec {
                    actions.push(Action::UpdateNodeProbeSpec {
                        name: name.to_string(),
                        resource_version: npp.metadata.resource_version.clone().unwrap_or_default(),
                        spec,
                    });
                }
            }
        }
    }
    let mut missing: Vec<&Node> = nodes
        .iter()
        .filter(|(name, _)| !have.contains(*name))
        .map(|(_, n)| *n)
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter(|n| is_ready(n) && !is_virtual_kubelet(n))
        .collect();
    missing.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for node in missing {
        let name = node.metadata.name.clone().unwrap_or_default();
        let spec = desired_spec(world, &name, &NodePodProbeSpec::default());
        actions.push(Action::CreateNodeProbe { node: name, spec });
    }
    actions
}

/// What a probe of a marker tells: its condition type and marker policy.
fn marker_probe<'a>(
    markers: &'a [Arc<PodProbeMarker>],
    namespace: &str,
    marker: &str,
    probe: &str,
) -> Option<&'a PodContainerProbe> {
    let marker = markers.iter().find(|m| {
        m.metadata.namespace.as_deref() == Some(namespace)
            && m.metadata.name.as_deref() == Some(marker)
    })?;
    if is_deleting(marker) {
        return None;
    }
    marker.spec.probes.iter().find(|p| p.name == probe)
}

/// The changes `status` calls for on `pod` (upstream's `updatePodProbeStatus`): per
/// probe state, the marker's condition (the first probe of a condition type wins) and
/// its policies (the other state's keys removed, then the matching state's set; later
/// probes override earlier ones). Only what differs from the Pod is returned: a
/// condition whose status and message are unchanged is left alone
/// (`SetPodConditionIfMsgChanged`).
pub fn marks_for(markers: &[Arc<PodProbeMarker>], pod: &Pod, status: &PodProbeStatus) -> PodMarks {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut labels: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut annotations: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut conditions: Vec<PodCondition> = Vec::new();
    let mut condition_types: HashSet<&str> = HashSet::new();
    for state in &status.probe_states {
        if state.state.is_empty() {
            continue;
        }
        let Some((marker, probe)) = split_node_probe_name(&state.name) else {
            continue;
        };
        let Some(probe) = marker_probe(markers, namespace, marker, probe) else {
            continue;
        };
        let condition_type = probe.pod_condition_type.as_str();
        if !condition_type.is_empty() && condition_types.insert(condition_type) {
            conditions.push(PodCondition {
                type_: condition_type.to_string(),
                status: if state.state.as_str() == ProbeState::SUCCEEDED {
                    "True"
                } else {
                    "False"
                }
                .into(),
                last_probe_time: state.last_probe_time.clone(),
                last_transition_time: state.last_transition_time.clone(),
                message: Some(state.message.clone()).filter(|m| !m.is_empty()),
                ..Default::default()
            });
        }
        let (matched, opposite): (Vec<_>, Vec<_>) = probe
            .marker_policy
            .iter()
            .partition(|p| p.state == state.state);
        for policy in opposite {
            for k in policy.labels.keys() {
                labels.insert(k.clone(), None);
            }
            for k in policy.annotations.keys() {
                annotations.insert(k.clone(), None);
            }
        }
        for policy in matched {
            for (k, v) in &policy.labels {
                labels.insert(k.clone(), Some(v.clone()));
            }
            for (k, v) in &policy.annotations {
                annotations.insert(k.clone(), Some(v.clone()));
            }
        }
    }
    let current_labels = pod.metadata.labels.clone().unwrap_or_default();
    let current_annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let changed = |current: &BTreeMap<String, String>, (k, v): &(String, Option<String>)| {
        current.get(k) != v.as_ref()
    };
    let labels = labels
        .into_iter()
        .filter(|kv| changed(&current_labels, kv))
        .collect();
    let annotations = annotations
        .into_iter()
        .filter(|kv| changed(&current_annotations, kv))
        .collect();
    let conditions = conditions
        .into_iter()
        .filter(|c| {
            predicates::condition(pod, &c.type_)
                .is_none_or(|old| old.status != c.status || old.message != c.message)
        })
        .collect();
    PodMarks {
        namespace: namespace.to_string(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: predicates::uid(pod).to_string(),
        labels,
        annotations,
        conditions,
    }
}

/// The Pod writes the NodePodProbes' statuses call for: for each status entry of a Pod
/// in scope that is still probed on that node with the same UID.
pub fn pod_marks(world: &World) -> Vec<Action> {
    let pods: HashMap<&str, &Pod> = world
        .pods
        .iter()
        .map(|p| (predicates::uid(p.as_ref()), p.as_ref()))
        .collect();
    let mut actions = Vec::new();
    for npp in world.node_probes {
        let node = npp.metadata.name.as_deref().unwrap_or_default();
        for status in npp.status.iter().flat_map(|s| &s.pod_probe_statuses) {
            if !world.in_scope(&status.namespace) {
                continue;
            }
            let Some(pod) = pods.get(status.uid.as_str()) else {
                continue;
            };
            if pod_key(pod) != (status.namespace.as_str(), status.name.as_str())
                || predicates::node_name(*pod) != node
                || !predicates::is_active(*pod)
            {
                continue;
            }
            let marks = marks_for(world.markers, pod, status);
            if !marks.is_empty() {
                actions.push(Action::MarkPod(marks));
            }
        }
    }
    actions
}

/// Every write of one pass: NodePodProbes first, then Pods.
pub fn plan(world: &World) -> Vec<Action> {
    let mut actions = node_probes(world);
    actions.extend(pod_marks(world));
    actions
}

/// The status of `marker`: its generation, and the Pods it selects that are probed on a
/// node the cache knows (upstream counts those of virtual-kubelet nodes too).
pub fn marker_status(
    marker: &PodProbeMarker,
    pods: &[Arc<Pod>],
    nodes: &[Arc<Node>],
) -> PodProbeMarkerStatus {
    let known: HashSet<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let matched = pods
        .iter()
        .filter(|p| is_probed(p) && selects(marker, p))
        .filter(|p| known.contains(predicates::node_name(p.as_ref())))
        .count();
    PodProbeMarkerStatus {
        observed_generation: marker.metadata.generation.unwrap_or_default(),
        matched_pods: i64::try_from(matched).unwrap_or(i64::MAX),
    }
}

/// Whether a NodePodProbe still lists a probe of `marker` (`<name>#…` on a Pod of its
/// namespace): its finalizer stays until none does.
pub fn still_listed(marker: &PodProbeMarker, node_probes: &[Arc<NodePodProbe>]) -> bool {
    let namespace = marker.metadata.namespace.as_deref().unwrap_or_default();
    let name = marker.metadata.name.as_deref().unwrap_or_default();
    node_probes.iter().any(|npp| {
        npp.spec.pod_probes.iter().any(|p| {
            p.namespace == namespace
                && p.probes
                    .iter()
                    .any(|c| split_node_probe_name(&c.name).is_some_and(|(m, _)| m == name))
        })
    })
}
