//! `ImagePullJob` and `ImageListPullJob` (`apps.kruise.io/v1alpha1`): pre-pull one image
//! (or a list of images, one owned ImagePullJob each) on a chosen set of nodes by filling
//! in their NodeImage entries under a parallelism limit. Both share
//! [`ImagePullJobTemplate`]; [`ImagePullPolicy`] and [`SandboxConfig`] are shared with
//! NodeImage too.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ImagePullJob",
    plural = "imagepulljobs",
    singular = "imagepulljob",
    namespaced,
    status = "ImagePullJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ImagePullJob pre-pulls an image on a set of nodes through their NodeImages.",
    printcolumn(
        name = "TOTAL",
        type_ = "integer",
        json_path = ".status.desired",
        description = "Number of all nodes matched by this job"
    ),
    printcolumn(
        name = "ACTIVE",
        type_ = "integer",
        json_path = ".status.active",
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
    ),
    printcolumn(
        name = "MESSAGE",
        type_ = "string",
        json_path = ".status.message",
        description = "Summary of status when job is failed"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobSpec {
    /// The image to pull, as `name:tag` (or `name@digest`).
    pub image: String,
    /// Where, how fast and for how long to pull.
    #[serde(flatten)]
    pub template: ImagePullJobTemplate,
}

/// The part of an ImagePullJob spec an ImageListPullJob stamps on each of its children.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobTemplate {
    /// Names of Secrets in the job's namespace used to pull the image; immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<String>,
    /// Nodes to pull on, by name or by labels; unset means every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<ImagePullJobNodeSelector>,
    /// Pull on the nodes running the matching Pods of the job's namespace; exclusive with `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// Nodes pulling at the same time (an integer; 0 pauses the job). Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<IntOrString>,
    /// Timeout and retries of each pull.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<PullPolicy>,
    /// When the job completes and when it is deleted afterwards.
    #[serde(default)]
    pub completion_policy: ImagePullJobCompletionPolicy,
    /// Labels and annotations of the sandbox config passed to the CRI PullImage call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_config: Option<SandboxConfig>,
    /// Always, or IfNotPresent (the default) to skip nodes that already have the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

impl ImagePullJobTemplate {
    /// `imagePullPolicy`, defaulted.
    pub fn effective_image_pull_policy(&self) -> ImagePullPolicy {
        self.image_pull_policy.unwrap_or_default()
    }
}

/// `spec.selector`: node names or a label selector over nodes (not both).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobNodeSelector {
    /// Names of the nodes to pull on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// `matchLabels` / `matchExpressions` over node labels, inline.
    #[serde(flatten)]
    pub label_selector: LabelSelector,
}

/// `spec.pullPolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullPolicy {
    /// Timeout of one pull attempt in seconds. Defaults to 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Retries before a node's pull is marked failed. Defaults to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
}

/// `spec.completionPolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobCompletionPolicy {
    /// Always (the default): one pass then complete; Never: keep re-pulling about daily.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ImagePullJobCompletionPolicyType>,
    /// Seconds after start at which an Always job completes, unfinished nodes failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion at which an Always job is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

impl ImagePullJobCompletionPolicy {
    /// `type`, defaulted.
    pub fn policy_type(&self) -> ImagePullJobCompletionPolicyType {
        self.type_.unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ImagePullJobCompletionPolicyType {
    /// The job completes once every target node has finished (or the deadline passed).
    #[default]
    Always,
    /// The job never completes and keeps the image warm on matching nodes.
    Never,
}

/// Whether the node agent pulls an image that is already present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ImagePullPolicy {
    /// Always call PullImage.
    Always,
    /// Succeed at once when the image is already on the node.
    #[default]
    IfNotPresent,
}

/// Metadata attached to the sandbox config of the CRI PullImage call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxConfig {
    /// Sandbox labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Sandbox annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobStatus {
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Number of target nodes.
    #[serde(default)]
    pub desired: i32,
    /// Target nodes still pulling.
    #[serde(default)]
    pub active: i32,
    /// Target nodes where the pull succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// Target nodes where the pull failed.
    #[serde(default)]
    pub failed: i32,
    /// Progress summary, e.g. `job is running, progress 45.0%`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Sorted names of the nodes where the pull failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_nodes: Vec<String>,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ImageListPullJob",
    plural = "imagelistpulljobs",
    singular = "imagelistpulljob",
    namespaced,
    status = "ImageListPullJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ImageListPullJob pre-pulls a list of images, through one owned ImagePullJob per image.",
    printcolumn(
        name = "TOTAL",
        type_ = "integer",
        json_path = ".status.desired",
        description = "Number of image pull job"
    ),
    printcolumn(
        name = "SUCCEEDED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "Number of image pull job succeeded"
    ),
    printcolumn(
        name = "COMPLETED",
        type_ = "integer",
        json_path = ".status.completed",
        description = "Number of ImagePullJobs which are finished"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobSpec {
    /// The images to pull (no duplicates, at most 255).
    pub images: Vec<String>,
    /// Settings copied into every child ImagePullJob.
    #[serde(flatten)]
    pub template: ImagePullJobTemplate,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobStatus {
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When every child ImagePullJob completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Number of child ImagePullJobs (the number of images).
    #[serde(default)]
    pub desired: i32,
    /// Children with nodes still pulling.
    #[serde(default)]
    pub active: i32,
    /// Children whose every node finished.
    #[serde(default)]
    pub completed: i32,
    /// Children whose every node succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// Children with failed nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_image_statuses: Vec<FailedImageStatus>,
}

/// A child ImagePullJob with failed nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedImageStatus {
    /// Name of the child ImagePullJob.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_job: String,
    /// The image it pulls.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Where to look for the failed nodes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// `job-with-always` as in `openkruise/kruise v1.9.0
    /// docs/proposals/20230323-imagelistpulljob.md`, with every field (names and labels
    /// together, which the webhook rejects; the types still carry both).
    const JOB_WITH_ALWAYS: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ImagePullJob
metadata:
  name: job-with-always
spec:
  image: nginx:1.9.1
  parallelism: 10
  selector:
    names:
    - node-1
    - node-2
    matchLabels:
      node-type: xxx
  completionPolicy:
    type: Always
    activeDeadlineSeconds: 1200
    ttlSecondsAfterFinished: 300
  pullPolicy:
    backoffLimit: 3
    timeoutSeconds: 300
  pullSecrets:
  - secret-name1
  - secret-name2
"#;

    const LIST_JOB: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ImageListPullJob
metadata:
  name: warm-up
spec:
  images:
  - nginx:1.9.1
  - busybox:1.36
  parallelism: "0"
  podSelector:
    matchLabels:
      pod-label: xxx
  completionPolicy:
    type: Never
  sandboxConfig:
    labels:
      team: infra
    annotations:
      note: warm
  imagePullPolicy: Always
status:
  startTime: "2024-01-01T00:00:00Z"
  desired: 2
  active: 1
  completed: 1
  succeeded: 0
  failedImageStatuses:
  - imagePullJob: warm-up-x7k2p
    name: nginx:1.9.1
    message: Please check for details which nodes failed by 'kubectl get ImagePullJob warm-up-x7k2p'.
"#;

    fn yaml_to_json(yaml: &str) -> serde_json::Value {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn seed_job_parses_and_round_trips() {
        let job: ImagePullJob = serde_saphyr::from_str(JOB_WITH_ALWAYS).unwrap();
        assert_eq!(job.spec.image, "nginx:1.9.1");
        let t = &job.spec.template;
        assert_eq!(t.parallelism, Some(IntOrString::Int(10)));
        let selector = t.selector.as_ref().unwrap();
        assert_eq!(selector.names, ["node-1", "node-2"]);
        assert_eq!(
            selector.label_selector.match_labels.as_ref().unwrap()["node-type"],
            "xxx"
        );
        assert_eq!(
            t.completion_policy.policy_type(),
            ImagePullJobCompletionPolicyType::Always
        );
        assert_eq!(t.completion_policy.active_deadline_seconds, Some(1200));
        assert_eq!(t.pull_policy.as_ref().unwrap().timeout_seconds, Some(300));
        assert_eq!(t.pull_secrets, ["secret-name1", "secret-name2"]);
        assert_eq!(
            t.effective_image_pull_policy(),
            ImagePullPolicy::IfNotPresent
        );
        assert_eq!(
            serde_json::to_value(&job).unwrap(),
            yaml_to_json(JOB_WITH_ALWAYS)
        );
    }

    #[test]
    fn example_parses_and_round_trips() {
        let yaml = include_str!("../../../../examples/imagepulljob-job-with-always.yaml");
        let job: ImagePullJob = serde_saphyr::from_str(yaml).unwrap();
        let selector = job.spec.template.selector.as_ref().unwrap();
        assert_eq!(selector.names, ["node-1", "node-2"]);
        assert_eq!(selector.label_selector, LabelSelector::default());
        assert_eq!(serde_json::to_value(&job).unwrap(), yaml_to_json(yaml));
    }

    #[test]
    fn list_job_round_trips() {
        let job: ImageListPullJob = serde_saphyr::from_str(LIST_JOB).unwrap();
        assert_eq!(job.spec.images.len(), 2);
        assert_eq!(
            job.spec.template.parallelism,
            Some(IntOrString::String("0".into()))
        );
        assert_eq!(
            job.spec.template.completion_policy.policy_type(),
            ImagePullJobCompletionPolicyType::Never
        );
        let status = job.status.as_ref().unwrap();
        assert_eq!(
            status.failed_image_statuses[0].image_pull_job,
            "warm-up-x7k2p"
        );
        assert_eq!(serde_json::to_value(&job).unwrap(), yaml_to_json(LIST_JOB));
    }

    #[test]
    fn missing_completion_policy_is_written_back_empty() {
        let job: ImagePullJob = serde_json::from_str(
            r#"{"apiVersion":"apps.kruise.io/v1alpha1","kind":"ImagePullJob","metadata":{"name":"j"},"spec":{"image":"nginx"}}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&job.spec).unwrap(),
            serde_json::json!({"image": "nginx", "completionPolicy": {}})
        );
    }

    #[test]
    fn status_counters_are_always_written() {
        assert_eq!(
            serde_json::to_string(&ImagePullJobStatus::default()).unwrap(),
            r#"{"desired":0,"active":0,"succeeded":0,"failed":0}"#
        );
        assert_eq!(
            serde_json::to_string(&ImageListPullJobStatus::default()).unwrap(),
            r#"{"desired":0,"active":0,"completed":0,"succeeded":0}"#
        );
    }

    #[test]
    fn enum_spellings_match_upstream() {
        assert_eq!(
            serde_json::to_value(ImagePullJobCompletionPolicyType::Always).unwrap(),
            "Always"
        );
        assert_eq!(
            serde_json::to_value(ImagePullJobCompletionPolicyType::Never).unwrap(),
            "Never"
        );
        assert_eq!(
            serde_json::to_value(ImagePullPolicy::Always).unwrap(),
            "Always"
        );
        assert_eq!(
            serde_json::to_value(ImagePullPolicy::IfNotPresent).unwrap(),
            "IfNotPresent"
        );
    }

    #[test]
    fn crds_are_namespaced_with_inline_templates() {
        for crd in [ImagePullJob::crd(), ImageListPullJob::crd()] {
            assert_eq!(crd.spec.scope, "Namespaced");
            let version = &crd.spec.versions[0];
            assert!(version.subresources.as_ref().unwrap().status.is_some());
            let schema = serde_json::to_value(&version.schema).unwrap();
            let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
            for field in [
                "completionPolicy",
                "pullSecrets",
                "podSelector",
                "imagePullPolicy",
            ] {
                assert!(spec["properties"][field].is_object(), "{field}");
            }
            assert!(
                spec["properties"]["selector"]["properties"]["matchLabels"].is_object(),
                "selector is inline"
            );
            let text = schema.to_string();
            assert!(!text.contains("$ref") && !text.contains("allOf"));
        }
        let columns: Vec<_> = ImagePullJob::crd().spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            columns,
            ["TOTAL", "ACTIVE", "SUCCEED", "FAILED", "AGE", "MESSAGE"]
        );
    }
}
