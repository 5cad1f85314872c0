//! `BroadcastJob` (`apps.kruise.io/v1alpha1`): runs one run-to-completion Pod on every
//! eligible node and finishes once they have all terminated.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "BroadcastJob",
    plural = "broadcastjobs",
    singular = "broadcastjob",
    shortname = "bcj",
    namespaced,
    status = "BroadcastJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "BroadcastJob runs a run-to-completion Pod on every eligible node.",
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".status.desired",
        description = "The desired number of pods. This is typically equal to the number of nodes satisfied to run pods."
    ),
    printcolumn(
        name = "Active",
        type_ = "integer",
        json_path = ".status.active",
        description = "The number of actively running pods."
    ),
    printcolumn(
        name = "Succeeded",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "The number of pods which reached phase Succeeded."
    ),
    printcolumn(
        name = "Failed",
        type_ = "integer",
        json_path = ".status.failed",
        description = "The number of pods which reached phase Failed."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobSpec {
    /// Maximum Pods running at once (number or percent of desired, rounded up). Unset: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<IntOrString>,
    /// The Pod run on each node; `restartPolicy` must be Never or OnFailure.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// When the job counts as finished and what happens afterwards.
    #[serde(default)]
    pub completion_policy: CompletionPolicy,
    /// Stop creating and deleting Pods.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// What happens when a Pod fails.
    #[serde(default, skip_serializing_if = "FailurePolicy::is_empty")]
    pub failure_policy: FailurePolicy,
}

impl BroadcastJobSpec {
    /// What an unset `parallelism` means (and what defaulting writes).
    pub const UNLIMITED_PARALLELISM: i32 = i32::MAX;

    /// `parallelism`, defaulting to unlimited.
    pub fn parallelism(&self) -> IntOrString {
        self.parallelism
            .clone()
            .unwrap_or(IntOrString::Int(Self::UNLIMITED_PARALLELISM))
    }
}

/// `completionPolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompletionPolicy {
    /// `Always` (finish once every node's Pod has terminated) or `Never`. Defaults to Always.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<CompletionPolicyType>,
    /// Seconds after startTime after which the job fails and its Pods are deleted (Always only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after finishing after which the job is deleted (Always only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

impl CompletionPolicy {
    /// `type`, defaulting to `Always`.
    pub fn policy_type(&self) -> CompletionPolicyType {
        self.type_.unwrap_or_default()
    }
}

// Enum types carry plain comments, not `///`: kube hoists an optional enum's own schema
// into the field, so a type-level doc would replace the field's CRD description.
// `completionPolicy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CompletionPolicyType {
    /// Finish once every desired node's Pod has terminated, or at the deadline.
    #[default]
    Always,
    /// Never finish: keep running Pods on nodes that appear later.
    Never,
}

/// `failurePolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// `FailFast`, `Continue` or `Pause`. Defaults to FailFast.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<FailurePolicyType>,
    /// Container restarts after which a Pod counts as failed (restartPolicy OnFailure).
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub restart_limit: i32,
}

impl FailurePolicy {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `type`, defaulting to `FailFast`.
    pub fn policy_type(&self) -> FailurePolicyType {
        self.type_.unwrap_or_default()
    }
}

// `failurePolicy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicyType {
    /// Fail the job as soon as a Pod fails.
    #[default]
    FailFast,
    /// Ignore failed Pods.
    Continue,
    /// Pause the job when a Pod fails.
    Pause,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobStatus {
    /// `Complete` / `Failed` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job completed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Pods still running.
    #[serde(default)]
    pub active: i32,
    /// Pods that succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// Pods that failed.
    #[serde(default)]
    pub failed: i32,
    /// Nodes that should run a Pod.
    #[serde(default)]
    pub desired: i32,
    /// `running`, `paused`, `completed` or `failed`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "phase_or_empty"
    )]
    pub phase: Option<BroadcastJobPhase>,
}

impl BroadcastJobStatus {
    /// The condition of `type_` if it is `True`.
    pub fn true_condition(&self, type_: JobConditionType) -> Option<&JobCondition> {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    }

    /// Whether a `Complete` or `Failed` condition is `True`.
    pub fn is_finished(&self) -> bool {
        self.true_condition(JobConditionType::Complete).is_some()
            || self.true_condition(JobConditionType::Failed).is_some()
    }
}

/// Upstream may write `"phase": ""` before the first reconcile; read it as unset.
fn phase_or_empty<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BroadcastJobPhase>, D::Error> {
    use serde::de::{Error, IntoDeserializer};
    match Option::<String>::deserialize(deserializer)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => BroadcastJobPhase::deserialize(s.into_deserializer())
            .map(Some)
            .map_err(|e: serde::de::value::Error| D::Error::custom(e)),
    }
}

// `status.phase` (lower case, as upstream).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BroadcastJobPhase {
    /// Pods are being run.
    Running,
    /// Paused by `spec.paused` or by the Pause failure policy.
    Paused,
    /// Every desired node's Pod has terminated.
    Completed,
    /// Failed by the failure policy or the deadline.
    Failed,
}

// `status.conditions[].type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum JobConditionType {
    /// Every desired node's Pod has terminated.
    Complete,
    /// The job failed (failure policy or deadline).
    Failed,
}

/// One observation of the job's state (`Complete` or `Failed`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// `Complete` or `Failed`.
    #[serde(rename = "type")]
    pub type_: JobConditionType,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the condition was last checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the condition last changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable details of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    const BCJ_DEMO: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata:
  name: bcj-demo
  namespace: default
spec:
  parallelism: 40%
  paused: true
  completionPolicy:
    type: Always
    activeDeadlineSeconds: 10
    ttlSecondsAfterFinished: 30
  failurePolicy:
    type: Continue
    restartLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: counter
        image: busybox
        command:
        - "/bin/sh"
        - "-c"
        - "for i in 9 8 7 6 5 4 3 2 1; do echo $i; done"
status:
  active: 0
  succeeded: 2
  failed: 0
  desired: 2
  phase: completed
  startTime: "2022-03-03T10:00:00Z"
  completionTime: "2022-03-03T10:00:20Z"
  conditions:
  - type: Complete
    status: "True"
    reason: Complete
    message: Job completed, 2 pods succeeded, 0 pods failed
    lastProbeTime: "2022-03-03T10:00:20Z"
    lastTransitionTime: "2022-03-03T10:00:20Z"
"#;

    fn yaml_value(s: &str) -> serde_json::Value {
        serde_saphyr::from_str(s).unwrap()
    }

    fn json<T: Serialize>(value: T) -> serde_json::Value {
        serde_json::to_value(value).unwrap()
    }

    #[test]
    fn upstream_manifest_round_trips_without_losing_fields() {
        let original = yaml_value(BCJ_DEMO);
        let job: BroadcastJob = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(json(&job), original);
        assert_eq!(job.spec.parallelism(), IntOrString::String("40%".into()));
        assert_eq!(
            job.spec.failure_policy.policy_type(),
            FailurePolicyType::Continue
        );
        let status = job.status.unwrap();
        assert_eq!(status.phase, Some(BroadcastJobPhase::Completed));
        assert!(status.is_finished());
    }

    #[test]
    fn seed_manifest_gets_defaults() {
        let job: BroadcastJob = serde_json::from_value(yaml_value(
            r#"
apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata: {name: bcj-demo}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: counter, image: busybox}]
"#,
        ))
        .unwrap();
        assert_eq!(
            job.spec.parallelism(),
            IntOrString::Int(BroadcastJobSpec::UNLIMITED_PARALLELISM)
        );
        assert_eq!(
            job.spec.completion_policy.policy_type(),
            CompletionPolicyType::Always
        );
        assert_eq!(
            job.spec.failure_policy.policy_type(),
            FailurePolicyType::FailFast
        );
        assert!(!job.spec.paused);
        // completionPolicy is always written, like upstream; an empty failurePolicy is not.
        let out = json(&job);
        assert_eq!(out["spec"]["completionPolicy"], serde_json::json!({}));
        assert!(out["spec"].get("failurePolicy").is_none());
    }

    #[test]
    fn enums_use_upstream_spellings() {
        assert_eq!(json(CompletionPolicyType::Always), "Always");
        assert_eq!(json(CompletionPolicyType::Never), "Never");
        assert_eq!(json(FailurePolicyType::FailFast), "FailFast");
        assert_eq!(json(FailurePolicyType::Continue), "Continue");
        assert_eq!(json(FailurePolicyType::Pause), "Pause");
        assert_eq!(json(BroadcastJobPhase::Running), "running");
        assert_eq!(json(BroadcastJobPhase::Paused), "paused");
        assert_eq!(json(BroadcastJobPhase::Completed), "completed");
        assert_eq!(json(BroadcastJobPhase::Failed), "failed");
        assert_eq!(json(JobConditionType::Complete), "Complete");
        assert_eq!(json(JobConditionType::Failed), "Failed");
    }

    #[test]
    fn status_tolerates_upstream_empty_phase_and_null_times() {
        let status: BroadcastJobStatus = serde_json::from_str(
            r#"{"active":1,"succeeded":0,"failed":0,"desired":1,"phase":"",
                "conditions":[{"type":"Failed","status":"True","lastProbeTime":null,"lastTransitionTime":null,"reason":"DeadlineExceeded"}]}"#,
        )
        .unwrap();
        assert_eq!(status.phase, None);
        assert!(status.is_finished());
        assert!(serde_json::from_str::<BroadcastJobStatus>(r#"{"phase":"bogus"}"#).is_err());
        let out = json(BroadcastJobStatus::default());
        for key in ["active", "succeeded", "failed", "desired"] {
            assert_eq!(out[key], 0, "{key}");
        }
    }

    #[test]
    fn crd_matches_spec() {
        let crd = BroadcastJob::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("broadcastjobs.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["bcj".to_string()]));
        let version = &crd.spec.versions[0];
        let sub = version.subresources.as_ref().unwrap();
        assert!(sub.status.is_some() && sub.scale.is_none());
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("Desired", ".status.desired"),
                ("Active", ".status.active"),
                ("Succeeded", ".status.succeeded"),
                ("Failed", ".status.failed"),
                ("AGE", ".metadata.creationTimestamp"),
            ]
        );
    }

    const EXAMPLES: [(&str, &str); 4] = [
        (
            "broadcastjob-bcj-demo.yaml",
            include_str!("../../../../examples/broadcastjob-bcj-demo.yaml"),
        ),
        (
            "broadcastjob-bcj-ttl.yaml",
            include_str!("../../../../examples/broadcastjob-bcj-ttl.yaml"),
        ),
        (
            "broadcastjob-bcj-deadline.yaml",
            include_str!("../../../../examples/broadcastjob-bcj-deadline.yaml"),
        ),
        (
            "broadcastjob-bcj-never.yaml",
            include_str!("../../../../examples/broadcastjob-bcj-never.yaml"),
        ),
    ];

    #[test]
    fn examples_parse_round_trip_and_pass_basic_rules() {
        for (file, text) in EXAMPLES {
            let mut doc: serde_json::Value = serde_saphyr::from_str(text).unwrap();
            assert!(doc["metadata"].get("namespace").is_none(), "{file}");
            assert_eq!(doc["apiVersion"], "apps.kruise.io/v1alpha1", "{file}");
            let job: BroadcastJob = serde_json::from_value(doc.clone()).unwrap();
            // An absent completionPolicy is written back as `{}`, as upstream does.
            if doc["spec"].get("completionPolicy").is_none() {
                doc["spec"]["completionPolicy"] = serde_json::json!({});
            }
            assert_eq!(json(&job), doc, "{file}");
            let restart = job
                .spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.restart_policy.as_deref());
            assert!(matches!(restart, Some("Never" | "OnFailure")), "{file}");
            if job.spec.completion_policy.policy_type() == CompletionPolicyType::Never {
                assert_eq!(job.spec.completion_policy.active_deadline_seconds, None);
                assert_eq!(job.spec.completion_policy.ttl_seconds_after_finished, None);
            }
        }
    }
}
