//! `PodProbeMarker` (`apps.kruise.io/v1alpha1`, namespaced) and `NodePodProbe`
//! (`apps.kruise.io/v1alpha1`, cluster-scoped), as openkruise/kruise v1.9.0
//! apis/apps/v1alpha1/pod_probe_marker_types.go and node_pod_probe_types.go.
//!
//! A PodProbeMarker names custom probes to run in the containers of the Pods its selector
//! matches and what to mark on a Pod (a condition, labels, annotations) from each probe's
//! result. The controller lists those probes per node in one NodePodProbe named after the
//! node; the node agent runs them and writes their results to the NodePodProbe's status,
//! which the controller turns into the marks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The finalizer the controller keeps on a PodProbeMarker until its probes are gone from
/// every NodePodProbe (upstream's `PodProbeMarkerFinalizer`).
pub const POD_PROBE_MARKER_FINALIZER: &str = "kruise.io/node-pod-probe-cleanup";

/// The event the node agent records on a Pod when a probe succeeds (upstream's
/// `EventKruiseProbeSucceeded`, pkg/daemon/podprobe).
pub const EVENT_PROBE_SUCCEEDED: &str = "KruiseProbeSucceeded";
/// The event the node agent records on a Pod when a probe fails.
pub const EVENT_PROBE_FAILED: &str = "KruiseProbeFailed";

/// A probe's name in a NodePodProbe: `<marker>#<probe>` (upstream's `fmt.Sprintf("%s#%s")`).
pub fn node_probe_name(marker: &str, probe: &str) -> String {
    format!("{marker}#{probe}")
}

/// The marker and probe names of a NodePodProbe probe name (`<marker>#<probe>`).
pub fn split_node_probe_name(name: &str) -> Option<(&str, &str)> {
    name.split_once('#')
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "PodProbeMarker",
    plural = "podprobemarkers",
    singular = "podprobemarker",
    namespaced,
    status = "PodProbeMarkerStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PodProbeMarker runs custom probes in the containers of the Pods it selects and marks the Pods with the results.",
    printcolumn(
        name = "MATCHED",
        type_ = "integer",
        json_path = ".status.matchedPods",
        description = "Pods the selector matches that are probed"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeMarkerSpec {
    /// The Pods of this namespace to probe; immutable.
    pub selector: LabelSelector,
    /// The custom probes, each run in one container of every selected Pod.
    pub probes: Vec<PodContainerProbe>,
}

/// One custom probe of a PodProbeMarker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodContainerProbe {
    /// The probe's name, unique in the marker; `#` is not allowed.
    pub name: String,
    /// The container the probe runs in (exec) or whose ports it resolves (tcpSocket, httpGet).
    pub container_name: String,
    /// A Kubernetes probe: exec, tcpSocket or httpGet, with its timings.
    pub probe: ContainerProbeSpec,
    /// Labels and annotations to set on the Pod when the probe's state is `state`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marker_policy: Vec<ProbeMarkerPolicy>,
    /// The Pod condition type recording the probe's result (True: Succeeded, False: Failed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_condition_type: String,
}

/// Upstream's `ContainerProbeSpec` inlines `corev1.Probe`: the same JSON.
pub type ContainerProbeSpec = Probe;

/// What to mark on a Pod when a probe is in `state`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeMarkerPolicy {
    /// Succeeded or Failed.
    pub state: ProbeState,
    /// Labels to set on the Pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations to set on the Pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeMarkerStatus {
    /// The generation the controller last acted on.
    #[serde(default)]
    pub observed_generation: i64,
    /// Pods the selector matches that run on a node and are probed.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub matched_pods: i64,
}

/// The state of a probe (upstream's `ProbeState`): free text on the wire, so a value
/// this version does not know still decodes (the webhook refuses it in a marker policy).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProbeState(pub String);

impl JsonSchema for ProbeState {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProbeState".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

impl ProbeState {
    pub const SUCCEEDED: &'static str = "Succeeded";
    pub const FAILED: &'static str = "Failed";
    pub const UNKNOWN: &'static str = "Unknown";

    pub fn succeeded() -> Self {
        Self(Self::SUCCEEDED.into())
    }
    pub fn failed() -> Self {
        Self(Self::FAILED.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Upstream's `IsEqualPodConditionStatus`: True is Succeeded, False is Failed, anything
    /// else Unknown.
    pub fn matches_condition_status(&self, status: &str) -> bool {
        match status {
            "True" => self.0 == Self::SUCCEEDED,
            "False" => self.0 == Self::FAILED,
            _ => self.0 == Self::UNKNOWN,
        }
    }
}

impl From<&str> for ProbeState {
    fn from(s: &str) -> Self {
        Self(s.to_string())
    }
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "NodePodProbe",
    plural = "nodepodprobes",
    singular = "nodepodprobe",
    status = "NodePodProbeStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "NodePodProbe lists the custom probes to run on one node and their results."
)]
#[serde(rename_all = "camelCase")]
pub struct NodePodProbeSpec {
    /// The Pods of this node to probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_probes: Vec<PodProbe>,
}

/// The probes of one Pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodProbe {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
    /// Pod IP (tcpSocket and httpGet probes connect to it).
    #[serde(rename = "IP", default)]
    pub ip: String,
    /// The probes, named `<marker>#<probe>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ContainerProbe>,
}

/// One probe of a Pod, its named ports resolved to numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbe {
    /// `<marker>#<probe>`.
    pub name: String,
    /// The container the probe runs in.
    pub container_name: String,
    /// The probe.
    pub probe: ContainerProbeSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePodProbeStatus {
    /// Results per Pod, written by the node agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_probe_statuses: Vec<PodProbeStatus>,
}

/// The probe results of one Pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeStatus {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
    /// One state per probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe_states: Vec<ContainerProbeState>,
}

/// The result of one probe.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbeState {
    /// `<marker>#<probe>`.
    pub name: String,
    /// Succeeded, Failed or Unknown.
    pub state: ProbeState,
    /// When the probe last ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the state last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The probe's output or error, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A marker as upstream's docs show it (openkruise.io, "PodProbeMarker").
    const MARKER: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: PodProbeMarker
metadata:
  name: game-server-probe
  namespace: ns
spec:
  selector:
    matchLabels:
      app: game-server
  probes:
  - name: Idle
    containerName: game-server
    probe:
      exec:
        command:
        - /home/game/idle.sh
      initialDelaySeconds: 10
      timeoutSeconds: 3
      periodSeconds: 10
      successThreshold: 1
      failureThreshold: 3
    markerPolicy:
    - state: Succeeded
      labels:
        gameserver-idle: 'true'
      annotations:
        controller.kubernetes.io/pod-deletion-cost: '-10'
    - state: Failed
      labels:
        gameserver-idle: 'false'
      annotations:
        controller.kubernetes.io/pod-deletion-cost: '10'
    podConditionType: game.io/idle
status:
  observedGeneration: 1
  matchedPods: 2
"#;

    const NODE_PROBE: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: NodePodProbe
metadata:
  name: node1
spec:
  podProbes:
  - name: pod-1
    namespace: ns
    uid: 0c8a6f31
    IP: 10.0.0.1
    probes:
    - name: game-server-probe#Idle
      containerName: game-server
      probe:
        tcpSocket:
          port: 8080
        periodSeconds: 10
status:
  podProbeStatuses:
  - name: pod-1
    namespace: ns
    uid: 0c8a6f31
    probeStates:
    - name: game-server-probe#Idle
      state: Succeeded
      lastProbeTime: "2024-01-01T00:00:00Z"
      lastTransitionTime: "2024-01-01T00:00:00Z"
      message: idle
"#;

    fn yaml_to_json(yaml: &str) -> serde_json::Value {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn marker_round_trips() {
        let ppm: PodProbeMarker = serde_saphyr::from_str(MARKER).unwrap();
        let probe = &ppm.spec.probes[0];
        assert_eq!(probe.probe.period_seconds, Some(10));
        assert_eq!(probe.marker_policy[1].state.as_str(), "Failed");
        assert_eq!(probe.pod_condition_type, "game.io/idle");
        assert_eq!(ppm.status.as_ref().unwrap().matched_pods, 2);
        assert_eq!(serde_json::to_value(&ppm).unwrap(), yaml_to_json(MARKER));
    }

    #[test]
    fn node_probe_round_trips_with_upstream_ip_spelling() {
        let npp: NodePodProbe = serde_saphyr::from_str(NODE_PROBE).unwrap();
        assert_eq!(npp.spec.pod_probes[0].ip, "10.0.0.1");
        let state = &npp.status.as_ref().unwrap().pod_probe_statuses[0].probe_states[0];
        assert_eq!(state.state, ProbeState::succeeded());
        assert_eq!(
            serde_json::to_value(&npp).unwrap(),
            yaml_to_json(NODE_PROBE)
        );
    }

    #[test]
    fn probe_state_matches_condition_status_as_upstream() {
        assert!(ProbeState::succeeded().matches_condition_status("True"));
        assert!(ProbeState::failed().matches_condition_status("False"));
        assert!(ProbeState::from("Unknown").matches_condition_status("Unknown"));
        assert!(!ProbeState::succeeded().matches_condition_status("False"));
    }

    #[test]
    fn probe_names_split_at_the_first_hash() {
        assert_eq!(node_probe_name("m", "p"), "m#p");
        assert_eq!(split_node_probe_name("m#p"), Some(("m", "p")));
        assert_eq!(split_node_probe_name("m"), None);
    }

    #[test]
    fn crds_have_upstream_scope_and_status() {
        let ppm = PodProbeMarker::crd();
        assert_eq!(ppm.spec.scope, "Namespaced");
        let npp = NodePodProbe::crd();
        assert_eq!(npp.spec.scope, "Cluster");
        for crd in [ppm, npp] {
            let version = &crd.spec.versions[0];
            assert!(version.subresources.as_ref().unwrap().status.is_some());
            let text = serde_json::to_string(&version.schema).unwrap();
            assert!(!text.contains("$ref") && !text.contains("allOf"));
            assert!(text.contains("x-kubernetes-int-or-string"));
        }
    }
}
