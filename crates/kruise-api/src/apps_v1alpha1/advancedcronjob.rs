//! `AdvancedCronJob` (`apps.kruise.io/v1alpha1`): creates a `batch/v1` Job, a
//! BroadcastJob or an ImageListPullJob on a cron schedule and keeps a bounded history of
//! them.
//!
//! One schema serves both versions: OpenKruise v1.9.0's `v1beta1` adds
//! `template.imageListPullJobTemplate` (apis/apps/v1beta1/advancedcronjob_types.go), which
//! our `v1alpha1` carries too, so the apiserver's relabelling between the versions is exact
//! (upstream's v1alpha1 refuses such an object instead: its `ConvertFrom` errors).

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::broadcastjob::BroadcastJobSpec;
use super::imagepulljob::ImageListPullJobSpec;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "AdvancedCronJob",
    plural = "advancedcronjobs",
    singular = "advancedcronjob",
    shortname = "acj",
    namespaced,
    status = "AdvancedCronJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "AdvancedCronJob creates Jobs, BroadcastJobs or ImageListPullJobs on a cron schedule.",
    printcolumn(
        name = "Schedule",
        type_ = "string",
        json_path = ".spec.schedule",
        description = "The schedule of advanced cron job."
    ),
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".status.type",
        description = "Type of cron job."
    ),
    printcolumn(
        name = "LastScheduleTime",
        type_ = "date",
        json_path = ".status.lastScheduleTime",
        description = "The last time at which job was scheduled."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobSpec {
    /// Standard 5-field cron schedule (also `@hourly`…, `@every <duration>`).
    pub schedule: String,
    /// IANA time zone the schedule is evaluated in. Unset: the controller's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Seconds after a missed run during which it may still start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    /// `Allow`, `Forbid` or `Replace` concurrent runs. Defaults to Allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// Stop scheduling new runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Finished successful runs to keep. Defaults to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<i32>,
    /// Finished failed runs to keep. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<i32>,
    /// What each run creates: exactly one of `jobTemplate`, `broadcastJobTemplate` or
    /// `imageListPullJobTemplate`.
    pub template: CronJobTemplate,
}

impl AdvancedCronJobSpec {
    /// Default of `successfulJobsHistoryLimit`.
    pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 3;
    /// Default of `failedJobsHistoryLimit`.
    pub const DEFAULT_FAILED_JOBS_HISTORY_LIMIT: i32 = 1;

    /// `concurrencyPolicy`, defaulting to `Allow`.
    pub fn concurrency_policy(&self) -> ConcurrencyPolicy {
        self.concurrency_policy.unwrap_or_default()
    }

    /// `paused`, defaulting to false.
    pub fn paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }

    /// `successfulJobsHistoryLimit`, defaulting to 3.
    pub fn successful_jobs_history_limit(&self) -> i32 {
        self.successful_jobs_history_limit
            .unwrap_or(Self::DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT)
    }

    /// `failedJobsHistoryLimit`, defaulting to 1.
    pub fn failed_jobs_history_limit(&self) -> i32 {
        self.failed_jobs_history_limit
            .unwrap_or(Self::DEFAULT_FAILED_JOBS_HISTORY_LIMIT)
    }
}

/// `template`: the object created at each tick.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobTemplate {
    /// Create a `batch/v1` Job, like a native CronJob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub job_template: Option<JobTemplateSpec>,
    /// Create a BroadcastJob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_job_template: Option<BroadcastJobTemplateSpec>,
    /// Create an ImageListPullJob (OpenKruise's `v1beta1` field; served in both versions here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_list_pull_job_template: Option<ImageListPullJobTemplateSpec>,
}

impl CronJobTemplate {
    /// The kind of child this template creates, in upstream's order of precedence when
    /// several are set (`FindTemplateKind` in openkruise/kruise v1.9.0
    /// pkg/controller/advancedcronjob/advancedcronjob_utils.go): `jobTemplate`, then
    /// `imageListPullJobTemplate`, then `broadcastJobTemplate`. The webhook admits only one.
    pub fn kind(&self) -> Option<TemplateKind> {
        if self.job_template.is_some() {
            Some(TemplateKind::Job)
        } else if self.image_list_pull_job_template.is_some() {
            Some(TemplateKind::ImageListPullJob)
        } else if self.broadcast_job_template.is_some() {
            Some(TemplateKind::BroadcastJob)
        } else {
            None
        }
    }
}

/// `template.broadcastJobTemplate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobTemplateSpec {
    /// Labels and annotations copied to each BroadcastJob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The spec of each BroadcastJob.
    #[serde(default)]
    #[schemars(transform = without_default)]
    pub spec: BroadcastJobSpec,
}

/// `template.imageListPullJobTemplate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobTemplateSpec {
    /// Labels and annotations copied to each ImageListPullJob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The spec of each ImageListPullJob.
    #[serde(default)]
    #[schemars(transform = without_default)]
    pub spec: ImageListPullJobSpec,
}

/// Keeps the apiserver from filling in a whole spec (with an empty Pod template) when it is absent.
fn without_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

// Enum types carry plain comments, not `///`: kube hoists an optional enum's own schema
// into the field, so a type-level doc would replace the field's CRD description.
// `concurrencyPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap.
    #[default]
    Allow,
    /// Skip a tick while the previous run is still active.
    Forbid,
    /// Delete the active run and start the new one.
    Replace,
}

// `status.type`: the kind of child the template creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum TemplateKind {
    /// `batch/v1` Job.
    Job,
    /// `apps.kruise.io/v1alpha1` BroadcastJob.
    BroadcastJob,
    /// `apps.kruise.io/v1alpha1` ImageListPullJob.
    ImageListPullJob,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobStatus {
    /// The kind of child the template creates.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<TemplateKind>,
    /// References to the children still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<ObjectReference>,
    /// Latest scheduled time among the existing children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps_v1alpha1::{CompletionPolicyType, FailurePolicyType};
    use kube::CustomResourceExt;

    const ACJ_TEST: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: acj-test
  namespace: default
spec:
  schedule: "*/1 * * * *"
  timeZone: Asia/Shanghai
  startingDeadlineSeconds: 60
  concurrencyPolicy: Forbid
  paused: false
  successfulJobsHistoryLimit: 3
  failedJobsHistoryLimit: 1
  template:
    broadcastJobTemplate:
      metadata:
        labels:
          team: infra
        annotations:
          example.com/owner: ops
      spec:
        completionPolicy:
          type: Always
          ttlSecondsAfterFinished: 30
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
  type: BroadcastJob
  lastScheduleTime: "2022-03-03T11:00:00Z"
  active:
  - apiVersion: apps.kruise.io/v1alpha1
    kind: BroadcastJob
    name: acj-test-1646305200
    namespace: default
    uid: 0b6f3c1e-0000-0000-0000-000000000000
    resourceVersion: "1234"
"#;

    const ACJ_JOB: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: acj-job
spec:
  schedule: "@every 1m"
  template:
    jobTemplate:
      metadata:
        labels:
          app: acj-job
      spec:
        backoffLimit: 1
        template:
          spec:
            restartPolicy: OnFailure
            containers:
            - name: hello
              image: busybox
              command: ["sh", "-c", "date"]
"#;

    fn yaml_value(s: &str) -> serde_json::Value {
        serde_saphyr::from_str(s).unwrap()
    }

    fn json<T: Serialize>(value: T) -> serde_json::Value {
        serde_json::to_value(value).unwrap()
    }

    #[test]
    fn broadcastjob_template_round_trips_without_losing_fields() {
        let original = yaml_value(ACJ_TEST);
        let acj: AdvancedCronJob = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(json(&acj), original);
        assert_eq!(acj.spec.template.kind(), Some(TemplateKind::BroadcastJob));
        assert_eq!(acj.spec.concurrency_policy(), ConcurrencyPolicy::Forbid);
        let bcj = acj.spec.template.broadcast_job_template.as_ref().unwrap();
        assert_eq!(
            bcj.spec.completion_policy.policy_type(),
            CompletionPolicyType::Always
        );
        assert_eq!(
            bcj.spec.completion_policy.ttl_seconds_after_finished,
            Some(30)
        );
        assert_eq!(
            bcj.metadata.as_ref().unwrap().labels.as_ref().unwrap()["team"],
            "infra"
        );
        let status = acj.status.unwrap();
        assert_eq!(status.type_, Some(TemplateKind::BroadcastJob));
        assert_eq!(
            status.active[0].name.as_deref(),
            Some("acj-test-1646305200")
        );
    }

    #[test]
    fn job_template_round_trips_and_defaults_apply() {
        let original = yaml_value(ACJ_JOB);
        let acj: AdvancedCronJob = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(json(&acj), original);
        let spec = &acj.spec;
        assert_eq!(spec.template.kind(), Some(TemplateKind::Job));
        assert_eq!(spec.concurrency_policy(), ConcurrencyPolicy::Allow);
        assert!(!spec.paused());
        assert_eq!(spec.successful_jobs_history_limit(), 3);
        assert_eq!(spec.failed_jobs_history_limit(), 1);
        assert_eq!(
            spec.template
                .job_template
                .as_ref()
                .and_then(|t| t.spec.as_ref())
                .and_then(|s| s.backoff_limit),
            Some(1)
        );
        assert_eq!(CronJobTemplate::default().kind(), None);
    }

    #[test]
    fn broadcastjob_template_spec_may_be_partial() {
        let t: BroadcastJobTemplateSpec = serde_json::from_value(serde_json::json!({
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .unwrap();
        assert_eq!(t.metadata, None);
        assert_eq!(
            t.spec.failure_policy.policy_type(),
            FailurePolicyType::FailFast
        );
    }

    /// An ImageListPullJob template as OpenKruise v1.9.0's v1beta1 takes it (every field
    /// of the ImageListPullJob spec).
    const ACJ_IMAGELISTPULLJOB: &str = r#"
apiVersion: apps.kruise.io/v1beta1
kind: AdvancedCronJob
metadata:
  name: acj-warm-up
spec:
  schedule: "0 3 * * *"
  concurrencyPolicy: Replace
  template:
    imageListPullJobTemplate:
      metadata:
        labels:
          team: infra
        annotations:
          example.com/owner: ops
      spec:
        images:
        - nginx:1.25
        - busybox:1.36
        parallelism: 2
        selector:
          matchLabels:
            pool: web
        pullSecrets:
        - registry-a
        pullPolicy:
          timeoutSeconds: 300
          backoffLimit: 2
        completionPolicy:
          type: Always
          activeDeadlineSeconds: 1200
        sandboxConfig:
          labels:
            team: infra
        imagePullPolicy: Always
status:
  type: ImageListPullJob
  active:
  - apiVersion: apps.kruise.io/v1alpha1
    kind: ImageListPullJob
    name: acj-warm-up-1646276400
    namespace: default
    uid: 0b6f3c1e-0000-0000-0000-000000000001
"#;

    #[test]
    fn imagelistpulljob_template_round_trips_without_losing_fields() {
        let mut original = yaml_value(ACJ_IMAGELISTPULLJOB);
        // The apiserver relabels a v1beta1 object: the same fields as v1alpha1.
        original["apiVersion"] = "apps.kruise.io/v1alpha1".into();
        let acj: AdvancedCronJob = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(json(&acj), original);
        assert_eq!(
            acj.spec.template.kind(),
            Some(TemplateKind::ImageListPullJob)
        );
        let t = acj
            .spec
            .template
            .image_list_pull_job_template
            .as_ref()
            .unwrap();
        assert_eq!(t.spec.images, ["nginx:1.25", "busybox:1.36"]);
        assert_eq!(
            t.spec
                .template
                .pull_policy
                .as_ref()
                .unwrap()
                .timeout_seconds,
            Some(300)
        );
        assert_eq!(
            t.metadata.as_ref().unwrap().labels.as_ref().unwrap()["team"],
            "infra"
        );
        assert_eq!(
            acj.status.unwrap().type_,
            Some(TemplateKind::ImageListPullJob)
        );
    }

    #[test]
    fn template_kind_follows_upstream_precedence() {
        let job = || Some(JobTemplateSpec::default());
        let bcj = || Some(BroadcastJobTemplateSpec::default());
        let ilpj = || Some(ImageListPullJobTemplateSpec::default());
        let kind = |job_template, broadcast_job_template, image_list_pull_job_template| {
            CronJobTemplate {
                job_template,
                broadcast_job_template,
                image_list_pull_job_template,
            }
            .kind()
        };
        assert_eq!(kind(job(), bcj(), ilpj()), Some(TemplateKind::Job));
        assert_eq!(
            kind(None, bcj(), ilpj()),
            Some(TemplateKind::ImageListPullJob)
        );
        assert_eq!(kind(None, bcj(), None), Some(TemplateKind::BroadcastJob));
        assert_eq!(
            kind(None, None, ilpj()),
            Some(TemplateKind::ImageListPullJob)
        );
        assert_eq!(kind(None, None, None), None);
    }

    #[test]
    fn both_versions_carry_the_imagelistpulljob_template() {
        let crd = crate::all_crds()
            .into_iter()
            .find(|c| c.spec.names.kind == "AdvancedCronJob")
            .unwrap();
        let names: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["v1alpha1", "v1beta1"]);
        for version in &crd.spec.versions {
            let schema = serde_json::to_value(&version.schema).unwrap();
            let t = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"]["properties"]
                ["imageListPullJobTemplate"];
            let spec = &t["properties"]["spec"];
            assert_eq!(
                spec["required"],
                serde_json::json!(["images"]),
                "{}",
                version.name
            );
            assert!(spec.get("default").is_none(), "{}", version.name);
            for field in [
                "images",
                "selector",
                "podSelector",
                "parallelism",
                "pullPolicy",
                "pullSecrets",
                "completionPolicy",
                "sandboxConfig",
                "imagePullPolicy",
            ] {
                assert!(spec["properties"][field].is_object(), "{field}");
            }
            assert_eq!(
                t["properties"]["metadata"]["x-kubernetes-preserve-unknown-fields"],
                true
            );
        }
    }

    #[test]
    fn enums_use_upstream_spellings() {
        assert_eq!(json(ConcurrencyPolicy::Allow), "Allow");
        assert_eq!(json(ConcurrencyPolicy::Forbid), "Forbid");
        assert_eq!(json(ConcurrencyPolicy::Replace), "Replace");
        assert_eq!(json(TemplateKind::Job), "Job");
        assert_eq!(json(TemplateKind::BroadcastJob), "BroadcastJob");
        assert_eq!(json(TemplateKind::ImageListPullJob), "ImageListPullJob");
    }

    #[test]
    fn crd_matches_spec() {
        let crd = AdvancedCronJob::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("advancedcronjobs.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["acj".to_string()]));
        let version = &crd.spec.versions[0];
        let sub = version.subresources.as_ref().unwrap();
        assert!(sub.status.is_some() && sub.scale.is_none());
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("Schedule", "string", ".spec.schedule"),
                ("Type", "string", ".status.type"),
                ("LastScheduleTime", "date", ".status.lastScheduleTime"),
                ("AGE", "date", ".metadata.creationTimestamp"),
            ]
        );
    }

    const EXAMPLES: [(&str, &str); 2] = [
        (
            "advancedcronjob-acj-test.yaml",
            include_str!("../../../../examples/advancedcronjob-acj-test.yaml"),
        ),
        (
            "advancedcronjob-acj-job.yaml",
            include_str!("../../../../examples/advancedcronjob-acj-job.yaml"),
        ),
    ];

    #[test]
    fn examples_parse_and_round_trip() {
        for (file, text) in EXAMPLES {
            let doc: serde_json::Value = serde_saphyr::from_str(text).unwrap();
            assert!(doc["metadata"].get("namespace").is_none(), "{file}");
            assert_eq!(doc["apiVersion"], "apps.kruise.io/v1alpha1", "{file}");
            let acj: AdvancedCronJob = serde_json::from_value(doc.clone()).unwrap();
            assert_eq!(json(&acj), doc, "{file}");
            let t = &acj.spec.template;
            let templates = [
                t.job_template.is_some(),
                t.broadcast_job_template.is_some(),
                t.image_list_pull_job_template.is_some(),
            ];
            assert_eq!(
                templates.iter().filter(|set| **set).count(),
                1,
                "{file}: exactly one template"
            );
            assert!(!acj.spec.schedule.is_empty(), "{file}");
        }
    }
}
