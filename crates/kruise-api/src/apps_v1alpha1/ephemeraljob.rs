//! `EphemeralJob` (`apps.kruise.io/v1alpha1`, namespaced), as openkruise/kruise v1.9.0
//! apis/apps/v1alpha1/ephemeraljob_types.go.
//!
//! An EphemeralJob adds its ephemeral containers (through the `pods/ephemeralcontainers`
//! subresource) to up to `replicas` running Pods its selector matches, `parallelism` at a
//! time, and counts the Pods by their ephemeral containers' states. The containers it
//! added carry the env `KRUISE_EJOB_ID=<job uid>`, which is how they are told apart from
//! containers of the same name that someone else added.

use k8s_openapi::api::core::v1::EphemeralContainer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// The env an EphemeralJob adds to each container it creates, valued with the job's UID
/// (upstream's `EphemeralContainerEnvKey`).
pub const EPHEMERAL_CONTAINER_ENV_KEY: &str = "KRUISE_EJOB_ID";

/// The finalizer the controller keeps on a job until it is deleted (upstream's
/// `EphemeralContainerFinalizer`, pkg/controller/ephemeraljob).
pub const EPHEMERAL_JOB_FINALIZER: &str = "apps.kruise.io/ephemeralcontainers-cleanup";

/// `ttlSecondsAfterFinished` when unset (upstream's default in the controller).
pub const DEFAULT_TTL_SECONDS_AFTER_FINISHED: i32 = 1800;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "EphemeralJob",
    plural = "ephemeraljobs",
    singular = "ephemeraljob",
    shortname = "ejob",
    namespaced,
    status = "EphemeralJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EphemeralJob adds ephemeral containers to the running Pods it selects and reports how they ran.",
    printcolumn(
        name = "STATUS",
        type_ = "string",
        json_path = ".status.phase",
        description = "The status of ephemeral job"
    ),
    printcolumn(
        name = "MATCH",
        type_ = "integer",
        json_path = ".status.match",
        description = "Number of ephemeral container matched by this job"
    ),
    printcolumn(
        name = "SUCCEED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "Number of succeed ephemeral containers"
    ),
    printcolumn(
        name = "FAILED",
        type_ = "integer",
        json_path = ".status.failed",
        description = "Number of failed ephemeral containers"
    ),
    printcolumn(
        name = "RUNNING",
        type_ = "integer",
        json_path = ".status.running",
        description = "Number of running ephemeral containers"
    ),
    printcolumn(
        name = "WAITING",
        type_ = "integer",
        json_path = ".status.waiting",
        description = "Number of waiting ephemeral containers"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobSpec {
    /// The Pods of this namespace to add the ephemeral containers to.
    pub selector: LabelSelector,
    /// How many of the matched Pods to target (all when unset or larger than the match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How many Pods may run the ephemeral containers at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,
    /// The ephemeral containers to add.
    pub template: EphemeralContainerTemplateSpec,
    /// Stop adding ephemeral containers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Seconds after startTime after which an unfinished job fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after finishing after which the job is deleted (default 1800; 0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

impl EphemeralJobSpec {
    /// `parallelism`, defaulting to 1.
    pub fn parallelism(&self) -> i32 {
        self.parallelism.unwrap_or(1)
    }

    /// `ttlSecondsAfterFinished`, defaulting to 1800.
    pub fn ttl_seconds_after_finished(&self) -> i32 {
        self.ttl_seconds_after_finished
            .unwrap_or(DEFAULT_TTL_SECONDS_AFTER_FINISHED)
    }
}

/// `template`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralContainerTemplateSpec {
    /// The ephemeral containers added to each target Pod (schemaless, as upstream's CRD;
    /// validated by the admission webhook).
    #[serde(deserialize_with = "null_as_empty")]
    #[schemars(schema_with = "preserve_unknown")]
    pub ephemeral_containers: Vec<EphemeralContainer>,
}

fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

fn string_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string" })
}

fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

fn empty_string_as_none<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => {
            T::deserialize(serde::de::value::StringDeserializer::<D::Error>::new(s)).map(Some)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobStatus {
    /// Initialized, MatchedEmpty, JobSucceeded, JobFailed, JobError.
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<EphemeralJobCondition>,
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Waiting, Running, Succeeded, Failed, Paused, Error or Unknown (upstream writes `""`
    /// before the first reconcile).
    #[serde(
        default,
        deserialize_with = "empty_string_as_none",
        serialize_with = "phase_or_empty"
    )]
    #[schemars(schema_with = "string_schema")]
    pub phase: Option<EphemeralJobPhase>,
    /// Pods targeted: running, matched, not carrying a same-named container of another job.
    #[serde(default, rename = "match")]
    pub matches: i32,
    /// Pods whose ephemeral containers run.
    #[serde(default)]
    pub running: i32,
    /// Pods whose ephemeral containers all exited 0.
    #[serde(default)]
    pub succeeded: i32,
    /// Pods whose ephemeral containers wait to start.
    #[serde(default)]
    pub waiting: i32,
    /// Pods with a failed ephemeral container.
    #[serde(default)]
    pub failed: i32,
}

fn phase_or_empty<S: serde::Serializer>(
    phase: &Option<EphemeralJobPhase>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match phase {
        Some(p) => p.serialize(s),
        None => s.serialize_str(""),
    }
}

impl EphemeralJobStatus {
    /// Succeeded or Failed: `completionTime` is set.
    pub fn is_finished(&self) -> bool {
        self.completion_time.is_some()
    }
}

// Enum types carry plain comments, not `///` (see broadcastjob.rs).
// The phase of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EphemeralJobPhase {
    Succeeded,
    Failed,
    Waiting,
    Running,
    Paused,
    Error,
    Unknown,
}

impl EphemeralJobPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Waiting => "Waiting",
            Self::Running => "Running",
            Self::Paused => "Paused",
            Self::Error => "Error",
            Self::Unknown => "Unknown",
        }
    }
}

/// One condition of a job (each type at most once, status always `True` as upstream).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobCondition {
    /// `JobSucceeded`, `JobFailed`, `JobError`, `Initialized` or `MatchedEmpty`.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Condition types (upstream's `EphemeralJobConditionType` values).
pub mod condition {
    pub const SUCCEEDED: &str = "JobSucceeded";
    pub const FAILED: &str = "JobFailed";
    pub const ERROR: &str = "JobError";
    pub const INITIALIZED: &str = "Initialized";
    pub const MATCHED_EMPTY: &str = "MatchedEmpty";
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn upstream_json_round_trips() {
        let text = r#"{"apiVersion":"apps.kruise.io/v1alpha1","kind":"EphemeralJob",
            "metadata":{"name":"ejob-demo"},
            "spec":{"selector":{"matchLabels":{"run":"nginx"}},"replicas":2,"parallelism":1,
              "template":{"ephemeralContainers":[{"name":"debugger","image":"busybox:1.32",
                "imagePullPolicy":"IfNotPresent","terminationMessagePolicy":"File",
                "targetContainerName":"nginx","command":["sleep","3"]}]},
              "activeDeadlineSeconds":60,"ttlSecondsAfterFinished":5},
            "status":{"phase":"","match":0,"running":0,"succeeded":0,"waiting":0,"failed":0}}"#;
        let job: EphemeralJob = serde_json::from_str(text).unwrap();
        assert_eq!(job.spec.replicas, Some(2));
        assert_eq!(job.spec.template.ephemeral_containers[0].name, "debugger");
        let status = job.status.clone().unwrap();
        assert_eq!(status.phase, None);
        let back = serde_json::to_value(&job).unwrap();
        let orig: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(back, orig);
    }

    #[test]
    fn status_serializes_counts_and_phase_always() {
        let s = serde_json::to_value(EphemeralJobStatus {
            phase: Some(EphemeralJobPhase::Running),
            matches: 3,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            s,
            serde_json::json!({"phase":"Running","match":3,"running":0,"succeeded":0,"waiting":0,"failed":0})
        );
    }

    #[test]
    fn crd_matches_upstream() {
        let crd = EphemeralJob::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("ephemeraljobs.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["ejob".to_string()]));
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.json_path.as_str(), c.type_.as_str()))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("STATUS", ".status.phase", "string"),
                ("MATCH", ".status.match", "integer"),
                ("SUCCEED", ".status.succeeded", "integer"),
                ("FAILED", ".status.failed", "integer"),
                ("RUNNING", ".status.running", "integer"),
                ("WAITING", ".status.waiting", "integer"),
                ("AGE", ".metadata.creationTimestamp", "date"),
            ]
        );
        let schema = serde_json::to_value(&version.schema).unwrap();
        let template = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"];
        assert_eq!(
            template["properties"]["ephemeralContainers"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }
}
