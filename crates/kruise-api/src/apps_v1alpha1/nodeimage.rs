//! `NodeImage` (`apps.kruise.io/v1alpha1`, cluster-scoped): one object per node, named
//! after it, listing the images to pull there (written by ImagePullJobs or by hand) and
//! the node agent's pull progress.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::imagepulljob::{ImagePullPolicy, SandboxConfig};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "NodeImage",
    plural = "nodeimages",
    singular = "nodeimage",
    status = "NodeImageStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "NodeImage lists the images to pull on one node and the pull progress there.",
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".status.desired",
        description = "Number of all images on this node"
    ),
    printcolumn(
        name = "PULLING",
        type_ = "integer",
        json_path = ".status.pulling",
        description = "Number of image pull task active"
    ),
    printcolumn(
        name = "SUCCEED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "Number of image pull task succeeded"
    ),
    printcolumn(
        name = "FAILED",
        type_ = "integer",
        json_path = ".status.failed",
        description = "Number of image pull tasks failed"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageSpec {
    /// Images to pull on this node keyed by image name (no tag), at most 256.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, ImageSpec>,
}

/// The tags of one image to pull, and how.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Secrets holding registry credentials for this image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<ReferenceObject>,
    /// The tags to pull.
    #[serde(default)]
    pub tags: Vec<ImageTagSpec>,
    /// Labels and annotations of the sandbox config passed to the CRI PullImage call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_config: Option<SandboxConfig>,
}

/// A namespaced object reference, rendered as `<namespace>/<name>`.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceObject {
    /// Namespace of the object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `batch` (v1beta1): a copy shared by every ImagePullJob with the same source Secret
    /// (upstream's imagepulljob controller writes it on the copies it makes), kept until its
    /// image entry goes even when the Secret is gone; other references are dropped once
    /// their Secret is gone. imagepulljob-ctl writes no mode (its copies, also shared, go
    /// when their last job does, and their references with them); the daemon ignores it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
}

/// [`ReferenceObject::mode`] of a reference kept with its image entry.
pub const REFERENCE_OBJECT_MODE_BATCH: &str = "batch";

impl ReferenceObject {
    /// The same Secret (namespace and name; the mode aside).
    pub fn same_object(&self, other: &ReferenceObject) -> bool {
        self.namespace == other.namespace && self.name == other.name
    }
}

impl std::fmt::Display for ReferenceObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One tag to pull.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagSpec {
    /// The image tag.
    pub tag: String,
    /// When the tag was added; defaulted to now by the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// Timeout, retries, deadline and TTL of the pull.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<ImageTagPullPolicy>,
    /// The ImagePullJobs (or other objects) that want this tag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<ObjectReference>,
    /// Bumped to request a fresh pull; matched against the status version.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub version: i64,
    /// Always, or IfNotPresent (the default) to skip the pull when the image is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

/// `pullPolicy` of one tag.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagPullPolicy {
    /// Timeout of one pull attempt in seconds. Defaults to 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Retries before the pull is marked failed. Defaults to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Seconds after the pull finished at which the tag is removed from the spec; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Seconds after start after which the pull is given up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageStatus {
    /// Number of tags in the spec.
    #[serde(default)]
    pub desired: i32,
    /// Tags pulled successfully.
    #[serde(default)]
    pub succeeded: i32,
    /// Tags whose pull failed.
    #[serde(default)]
    pub failed: i32,
    /// Tags being pulled.
    #[serde(default)]
    pub pulling: i32,
    /// Tags waiting for a pull worker.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub waiting: i32,
    /// Pull status per image name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image_statuses: BTreeMap<String, ImageStatus>,
    /// When every pull first finished after the node joined, and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sync_status: Option<SyncStatus>,
}

/// Pull status of the tags of one image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// One entry per tag.
    #[serde(default)]
    pub tags: Vec<ImageTagStatus>,
}

/// Pull status of one tag.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagStatus {
    /// The image tag.
    pub tag: String,
    /// Waiting, Pulling, Succeeded or Failed.
    pub phase: ImagePullPhase,
    /// Pull progress in percent (may go back on retry).
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub progress: i32,
    /// When the agent started the pull.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the pull finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The spec version this status is for.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub version: i64,
    /// The pulled image as `<name>@<id>`.
    #[serde(rename = "imageID", default, skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// Last error or other detail, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

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
pub enum ImagePullPhase {
    /// The pull has not started.
    Waiting,
    /// The pull is running.
    Pulling,
    /// The image is on the node.
    Succeeded,
    /// The pull gave up.
    Failed,
}

impl ImagePullPhase {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the pull has finished, successfully or not.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// Summary of the first complete sync of a node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// When every pull had finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_at: Option<Time>,
    /// Succeeded when every pull succeeded, Failed otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SyncStatusPhase>,
    /// Details, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SyncStatusPhase {
    /// Every pull succeeded.
    Succeeded,
    /// Some pull failed.
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// The `node1` NodeImage as the manager creates it.
    const SEED_NODEIMAGE: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: NodeImage
metadata:
  labels:
    beta.kubernetes.io/arch: amd64
    beta.kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: node1
    kubernetes.io/os: linux
  name: node1
spec: {}
status:
  desired: 0
  failed: 0
  pulling: 0
  succeeded: 0
"#;

    /// An `ubuntu:latest` request, after a job and the agent have been at it.
    const PULLING_NODEIMAGE: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: NodeImage
metadata:
  name: node1
spec:
  images:
    ubuntu:
      tags:
      - tag: latest
        pullPolicy:
          ttlSecondsAfterFinished: 300
          timeoutSeconds: 600
          backoffLimit: 3
          activeDeadlineSeconds: 1200
    nginx:
      pullSecrets:
      - namespace: kruise-daemon-config
        name: secret-name1
      sandboxConfig:
        annotations:
          apps.kruise.io/pulling-image-by: kruise-daemon
      tags:
      - tag: 1.9.1
        createdAt: "2024-01-01T00:00:00Z"
        ownerReferences:
        - apiVersion: apps.kruise.io/v1alpha1
          kind: ImagePullJob
          name: job-with-always
          namespace: default
          uid: 0c8a6f31-2f46-4d36-9b5e-0d6f7c2b6a11
        version: 2
        imagePullPolicy: Always
        pullPolicy:
          ttlSecondsAfterFinished: 300
status:
  desired: 2
  succeeded: 1
  failed: 0
  pulling: 1
  imageStatuses:
    ubuntu:
      tags:
      - tag: latest
        phase: Succeeded
        progress: 100
        startTime: "2024-01-01T00:00:00Z"
        completionTime: "2024-01-01T00:00:30Z"
        imageID: ubuntu@sha256:abc
    nginx:
      tags:
      - tag: 1.9.1
        phase: Pulling
        progress: 40
        version: 2
  firstSyncStatus:
    syncAt: "2024-01-01T00:00:30Z"
    status: Succeeded
"#;

    fn yaml_to_json(yaml: &str) -> serde_json::Value {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn pull_secret_mode_round_trips_and_is_left_out_when_empty() {
        let batch = serde_json::json!({"namespace": "kruise-daemon-config", "name": "s-abc", "mode": "batch"});
        let r: ReferenceObject = serde_json::from_value(batch.clone()).unwrap();
        assert_eq!(r.mode, REFERENCE_OBJECT_MODE_BATCH);
        assert_eq!(serde_json::to_value(&r).unwrap(), batch);
        let plain = ReferenceObject {
            mode: String::new(),
            ..r.clone()
        };
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            serde_json::json!({"namespace": "kruise-daemon-config", "name": "s-abc"})
        );
        assert!(plain.same_object(&r) && plain != r);
    }

    #[test]
    fn seed_nodeimage_round_trips() {
        let ni: NodeImage = serde_saphyr::from_str(SEED_NODEIMAGE).unwrap();
        assert!(ni.spec.images.is_empty());
        assert_eq!(ni.status.as_ref().unwrap().desired, 0);
        assert_eq!(
            serde_json::to_value(&ni).unwrap(),
            yaml_to_json(SEED_NODEIMAGE)
        );
    }

    #[test]
    fn example_parses_and_round_trips() {
        let yaml = include_str!("../../../../examples/nodeimage-node1.yaml");
        let ni: NodeImage = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(ni.spec.images["ubuntu"].tags[0].tag, "latest");
        assert_eq!(serde_json::to_value(&ni).unwrap(), yaml_to_json(yaml));
    }

    #[test]
    fn pulling_nodeimage_round_trips() {
        let ni: NodeImage = serde_saphyr::from_str(PULLING_NODEIMAGE).unwrap();
        let ubuntu = &ni.spec.images["ubuntu"].tags[0];
        let policy = ubuntu.pull_policy.as_ref().unwrap();
        assert_eq!(policy.ttl_seconds_after_finished, Some(300));
        assert_eq!(policy.active_deadline_seconds, Some(1200));
        let nginx = &ni.spec.images["nginx"];
        assert_eq!(
            nginx.pull_secrets[0].to_string(),
            "kruise-daemon-config/secret-name1"
        );
        assert_eq!(nginx.tags[0].version, 2);
        assert_eq!(
            nginx.tags[0].image_pull_policy,
            Some(ImagePullPolicy::Always)
        );
        let status = ni.status.as_ref().unwrap();
        let ubuntu_status = &status.image_statuses["ubuntu"].tags[0];
        assert_eq!(ubuntu_status.phase, ImagePullPhase::Succeeded);
        assert!(ubuntu_status.phase.is_finished());
        assert_eq!(ubuntu_status.image_id, "ubuntu@sha256:abc");
        assert_eq!(
            status.first_sync_status.as_ref().unwrap().status,
            Some(SyncStatusPhase::Succeeded)
        );
        assert_eq!(
            serde_json::to_value(&ni).unwrap(),
            yaml_to_json(PULLING_NODEIMAGE)
        );
    }

    #[test]
    fn status_counters_are_always_written() {
        assert_eq!(
            serde_json::to_string(&NodeImageStatus::default()).unwrap(),
            r#"{"desired":0,"succeeded":0,"failed":0,"pulling":0}"#
        );
    }

    #[test]
    fn enum_spellings_match_upstream() {
        for phase in [
            ImagePullPhase::Waiting,
            ImagePullPhase::Pulling,
            ImagePullPhase::Succeeded,
            ImagePullPhase::Failed,
        ] {
            assert_eq!(serde_json::to_value(phase).unwrap(), phase.as_str());
        }
        assert_eq!(
            serde_json::to_value(SyncStatusPhase::Succeeded).unwrap(),
            "Succeeded"
        );
        assert_eq!(
            serde_json::to_value(SyncStatusPhase::Failed).unwrap(),
            "Failed"
        );
    }

    #[test]
    fn crd_is_cluster_scoped() {
        let crd = NodeImage::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .clone()
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(columns, ["DESIRED", "PULLING", "SUCCEED", "FAILED", "AGE"]);
        let text = serde_json::to_string(&version.schema).unwrap();
        assert!(!text.contains("$ref") && !text.contains("allOf"));
    }
}
