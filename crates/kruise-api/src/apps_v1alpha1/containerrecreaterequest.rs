//! `ContainerRecreateRequest` (`apps.kruise.io/v1alpha1`, short name `crr`): stop one or
//! more containers of a running Pod so the kubelet recreates them in place. The node agent
//! does the work; the manager stamps the request and drives Pod readiness.

use k8s_openapi::api::core::v1::{ContainerPort, ExecAction, HTTPGetAction, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ContainerRecreateRequest",
    plural = "containerrecreaterequests",
    singular = "containerrecreaterequest",
    shortname = "crr",
    namespaced,
    status = "ContainerRecreateRequestStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ContainerRecreateRequest asks the node agent to recreate containers of a running Pod in place.",
    printcolumn(
        name = "PHASE",
        type_ = "string",
        json_path = ".status.phase",
        description = "Phase of this ContainerRecreateRequest."
    ),
    printcolumn(
        name = "POD",
        type_ = "string",
        json_path = ".spec.podName",
        description = "Pod name of this ContainerRecreateRequest."
    ),
    printcolumn(
        name = "NODE",
        type_ = "string",
        json_path = ".metadata.labels.crr\\.apps\\.kruise\\.io/node-name",
        description = "Node name of this ContainerRecreateRequest."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestSpec {
    /// Name of the Pod (in the same namespace) whose containers are recreated.
    pub pod_name: String,
    /// Containers to recreate, at least one.
    pub containers: Vec<ContainerRecreateRequestContainer>,
    /// How the containers are recreated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ContainerRecreateRequestStrategy>,
    /// Seconds after creation at which the request is completed whatever its progress (at least 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion at which the request is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

impl ContainerRecreateRequestSpec {
    /// `strategy`, or the all-defaults strategy when unset.
    pub fn strategy_or_default(&self) -> ContainerRecreateRequestStrategy {
        self.strategy.clone().unwrap_or_default()
    }
}

/// One container to recreate. Everything but `name` is filled in by admission.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainer {
    /// Name of a container in `pod.spec.containers`.
    pub name: String,
    /// The container's preStop hook, copied from the Pod at creation (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stop: Option<ProbeHandler>,
    /// The container's ports, copied when preStop uses httpGet (read-only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    /// The container's ID and restart count at creation (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_context: Option<ContainerRecreateRequestContainerContext>,
}

/// A hook action: exactly one of exec, httpGet or tcpSocket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeHandler {
    /// Command run inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// HTTP GET against the container.
    #[serde(default, rename = "httpGet", skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HTTPGetAction>,
    /// TCP connect to the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TCPSocketAction>,
}

/// The state of a container when the request was created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainerContext {
    /// Container ID as `<runtime>://<id>`.
    #[serde(rename = "containerID", default)]
    pub container_id: String,
    /// The container's restartCount.
    #[serde(default)]
    pub restart_count: i32,
}

/// `spec.strategy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStrategy {
    /// Fail (the default) completes the request on the first failed container; Ignore goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<ContainerRecreateRequestFailurePolicy>,
    /// Recreate the next container only once the previous one has been recreated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ordered_recreate: bool,
    /// Kill a container even while its previous incarnation is still starting.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_recreate: bool,
    /// Grace period for stopping each container. Defaults to the Pod's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// Seconds to keep the Pod not-ready before stopping anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unready_grace_period_seconds: Option<i64>,
    /// Seconds a new container must run ready before it counts as recreated.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub min_started_seconds: i32,
}

impl ContainerRecreateRequestStrategy {
    /// `failurePolicy`, defaulted.
    pub fn effective_failure_policy(&self) -> ContainerRecreateRequestFailurePolicy {
        self.failure_policy.unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ContainerRecreateRequestFailurePolicy {
    /// Complete the request as soon as one container fails.
    #[default]
    Fail,
    /// Carry on with the other containers.
    Ignore,
}

/// Phase of a request (Pending, Recreating, Completed) or of one container in it
/// (Pending, Recreating, Succeeded, Failed).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantArray,
)]
pub enum ContainerRecreateRequestPhase {
    /// Waiting for the agent (or for an earlier request on the same Pod).
    Pending,
    /// Containers are being stopped and recreated.
    Recreating,
    /// The container was recreated and has run long enough.
    Succeeded,
    /// The container could not be recreated.
    Failed,
    /// The request is finished.
    Completed,
}

impl ContainerRecreateRequestPhase {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether a container in this phase needs no more work.
    pub fn is_container_done(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStatus {
    /// Pending, Recreating or Completed; unset until the agent has seen the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ContainerRecreateRequestPhase>,
    /// When the request completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Why the request is in its phase, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Progress of each container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recreate_states: Vec<ContainerRecreateRequestContainerRecreateState>,
}

impl ContainerRecreateRequestStatus {
    /// Whether the request has completed.
    pub fn is_completed(&self) -> bool {
        self.phase == Some(ContainerRecreateRequestPhase::Completed)
    }
}

/// The recreation state of one container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainerRecreateState {
    /// Name of the container.
    pub name: String,
    /// Pending, Recreating, Succeeded or Failed.
    pub phase: ContainerRecreateRequestPhase,
    /// Details of the state, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Whether the agent has already stopped this container.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_killed: bool,
}

/// One element of the Pod-level annotation `crr.apps.kruise.io/sync-container-statuses`
/// (a JSON list) that the manager writes on the request while it is Recreating.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestSyncContainerStatus {
    /// Name of the container.
    pub name: String,
    /// Whether the container passes its readiness probe.
    pub ready: bool,
    /// The container's restartCount.
    pub restart_count: i32,
    /// Container ID as `<runtime>://<id>`.
    #[serde(
        rename = "containerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A CRR with every strategy field.
    const SEED_CRR: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata:
  namespace: pod-namespace
  name: xxx
spec:
  podName: pod-name
  containers:
  - name: app
  - name: sidecar
  strategy:
    failurePolicy: Fail
    orderedRecreate: false
    terminationGracePeriodSeconds: 30
    unreadyGracePeriodSeconds: 3
    minStartedSeconds: 10
  activeDeadlineSeconds: 300
  ttlSecondsAfterFinished: 1800
"#;

    /// What it looks like after admission and a finished run.
    const STAMPED_CRR: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata:
  namespace: pod-namespace
  name: xxx
  labels:
    crr.apps.kruise.io/node-name: node1
    crr.apps.kruise.io/pod-uid: 4a1b2c3d
spec:
  podName: pod-name
  containers:
  - name: app
    preStop:
      exec:
        command: ["/bin/sh", "-c", "sleep 1"]
    statusContext:
      containerID: containerd://abc
      restartCount: 0
  - name: sidecar
    preStop:
      httpGet:
        path: /shutdown
        port: http
    ports:
    - name: http
      containerPort: 8080
      protocol: TCP
    statusContext:
      containerID: containerd://def
      restartCount: 2
  strategy:
    failurePolicy: Ignore
    orderedRecreate: true
    forceRecreate: true
    terminationGracePeriodSeconds: 30
  activeDeadlineSeconds: 300
status:
  phase: Completed
  completionTime: "2021-05-20T08:00:00Z"
  message: recreating has exceeded the activeDeadlineSeconds
  containerRecreateStates:
  - name: app
    phase: Succeeded
    isKilled: true
  - name: sidecar
    phase: Failed
    message: "kill container error: timeout"
"#;

    fn yaml_to_json(yaml: &str) -> serde_json::Value {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn seed_crr_parses_and_round_trips() {
        let crr: ContainerRecreateRequest = serde_saphyr::from_str(SEED_CRR).unwrap();
        assert_eq!(crr.spec.pod_name, "pod-name");
        assert_eq!(crr.spec.containers.len(), 2);
        let strategy = crr.spec.strategy_or_default();
        assert_eq!(
            strategy.effective_failure_policy(),
            ContainerRecreateRequestFailurePolicy::Fail
        );
        assert_eq!(strategy.unready_grace_period_seconds, Some(3));
        assert_eq!(strategy.min_started_seconds, 10);
        assert_eq!(crr.spec.active_deadline_seconds, Some(300));
        // `orderedRecreate: false` is the Go zero value and is omitted, as upstream does.
        let mut expected = yaml_to_json(SEED_CRR);
        expected["spec"]["strategy"]
            .as_object_mut()
            .unwrap()
            .remove("orderedRecreate");
        assert_eq!(serde_json::to_value(&crr).unwrap(), expected);
    }

    #[test]
    fn example_parses() {
        let yaml = include_str!("../../../../examples/containerrecreaterequest.yaml");
        let crr: ContainerRecreateRequest = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(crr.metadata.namespace, None);
        assert_eq!(crr.spec.pod_name, "pod-name");
        let seed: ContainerRecreateRequest = serde_saphyr::from_str(SEED_CRR).unwrap();
        assert_eq!(crr.spec, seed.spec);
    }

    #[test]
    fn minimal_crr_defaults() {
        let crr: ContainerRecreateRequest = serde_json::from_str(
            r#"{"apiVersion":"apps.kruise.io/v1alpha1","kind":"ContainerRecreateRequest","metadata":{"name":"xxx"},"spec":{"podName":"pod-name","containers":[{"name":"app"}]}}"#,
        )
        .unwrap();
        let strategy = crr.spec.strategy_or_default();
        assert_eq!(
            strategy.effective_failure_policy(),
            ContainerRecreateRequestFailurePolicy::Fail
        );
        assert!(!strategy.ordered_recreate);
        assert_eq!(strategy.termination_grace_period_seconds, None);
    }

    #[test]
    fn stamped_crr_round_trips() {
        let crr: ContainerRecreateRequest = serde_saphyr::from_str(STAMPED_CRR).unwrap();
        let sidecar = &crr.spec.containers[1];
        assert_eq!(
            sidecar.status_context.as_ref().unwrap().container_id,
            "containerd://def"
        );
        assert!(sidecar.pre_stop.as_ref().unwrap().http_get.is_some());
        let status = crr.status.as_ref().unwrap();
        assert!(status.is_completed());
        assert!(status.container_recreate_states[0].is_killed);
        assert_eq!(
            status.container_recreate_states[1].phase,
            ContainerRecreateRequestPhase::Failed
        );
        assert_eq!(
            serde_json::to_value(&crr).unwrap(),
            yaml_to_json(STAMPED_CRR)
        );
    }

    #[test]
    fn sync_container_statuses_annotation_matches_upstream() {
        let json = r#"[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://abc"},{"name":"sidecar","ready":false,"restartCount":0}]"#;
        let statuses: Vec<ContainerRecreateRequestSyncContainerStatus> =
            serde_json::from_str(json).unwrap();
        assert!(statuses[0].ready);
        assert_eq!(serde_json::to_string(&statuses).unwrap(), json);
    }

    #[test]
    fn enum_spellings_match_upstream() {
        for phase in [
            ContainerRecreateRequestPhase::Pending,
            ContainerRecreateRequestPhase::Recreating,
            ContainerRecreateRequestPhase::Succeeded,
            ContainerRecreateRequestPhase::Failed,
            ContainerRecreateRequestPhase::Completed,
        ] {
            assert_eq!(serde_json::to_value(phase).unwrap(), phase.as_str());
        }
        assert_eq!(
            serde_json::to_value(ContainerRecreateRequestFailurePolicy::Fail).unwrap(),
            "Fail"
        );
        assert_eq!(
            serde_json::to_value(ContainerRecreateRequestFailurePolicy::Ignore).unwrap(),
            "Ignore"
        );
    }

    #[test]
    fn crd_names_and_columns() {
        let crd = ContainerRecreateRequest::crd();
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["crr".to_string()]));
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["PHASE", "POD", "NODE", "AGE"]);
    }
}
