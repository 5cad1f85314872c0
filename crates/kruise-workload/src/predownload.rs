//! Image pre-download for in-place rollouts (gate `PreDownloadImageForInPlaceUpdate`,
//! docs/feature-gates.md; openkruise/kruise v1.9.0
//! pkg/controller/cloneset/cloneset_predownload_image.go and
//! pkg/controller/statefulset/statefulset_predownload_image.go): before Pods are updated in place,
//! an ImagePullJob per changed image pre-pulls it on the nodes of the Pods still at the old
//! revision, so the in-place restart does not wait for the pull.
//!
//! [`plan`] decides (pure) from a [`Rollout`], which each controller fills from its spec
//! (its own reasons to skip included); [`apply`] carries the decision out: creates the
//! jobs, labels the update revision `apps.kruise.io/pre-predownload-created` or
//! `apps.kruise.io/image-predownload-ignored` so the decision is taken once, and deletes
//! the jobs when the rollout has finished.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    ImagePullJob, ImagePullJobCompletionPolicy, ImagePullJobCompletionPolicyType, ImagePullJobSpec,
    ImagePullJobTemplate, PullPolicy, SandboxConfig,
};
use kruise_api::appspub::InPlaceUpdateStrategy;
use kruise_api::intstr::{self, Rounding};
use kruise_api::keys;
use kruise_runtime::Events;
use kruise_runtime::api_error::is_conflict;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::revision::name_of;

/// Upstream `minimumReplicasToPreDownloadImage`: smaller workloads are not worth it.
pub const MINIMUM_REPLICAS: i32 = 3;

/// What to do about pre-download for the update revision.
#[derive(Clone, Debug, PartialEq)]
pub enum PreDownload {
    /// Nothing now (gate off, no rollout, already decided, or waiting for ready Pods).
    Nothing,
    /// Pre-download does not apply to this rollout: label the revision
    /// `apps.kruise.io/image-predownload-ignored`.
    Ignore(&'static str),
    /// Create these jobs, then label the revision `apps.kruise.io/pre-predownload-created`.
    Create(Vec<ImagePullJob>),
}

/// What [`plan`] needs to know about a workload's rollout, filled by its controller.
#[derive(Clone, Debug)]
pub struct Rollout<'a> {
    /// The workload's controller reference, put on each job.
    pub owner: OwnerReference,
    /// The workload's metadata: its namespace (the jobs') and its
    /// `apps.kruise.io/image-predownload-*` annotations.
    pub meta: &'a ObjectMeta,
    /// The workload's `inPlaceUpdateStrategy`, whose `imagePreDownload*` fields win over
    /// the annotations.
    pub strategy: Option<&'a InPlaceUpdateStrategy>,
    /// The workload's Pod selector; the jobs select its Pods not at the update revision.
    pub selector: &'a LabelSelector,
    /// The workload's Pod template: the jobs' labels, pull secrets and sandbox.
    pub template: &'a PodTemplateSpec,
    /// `spec.replicas`.
    pub replicas: i32,
    /// The Pods the update keeps at the current revision.
    pub partition: i32,
    /// `maxUnavailable` scaled on replicas; `None` when it is invalid.
    pub max_unavailable: Option<i32>,
    /// Why this workload's update strategy does not update in place (the new Pods pull
    /// their images anyway), if it does not.
    pub not_in_place: Option<&'static str>,
    pub current_revision: &'a ControllerRevision,
    pub update_revision: &'a ControllerRevision,
    /// The update revision's hash, which the jobs carry as `controller.kubernetes.io/hash`
    /// and whose Pods they leave out.
    pub revision_hash: String,
    /// Gates `InPlaceUpdateEnvFromMetadata`, `InPlaceWorkloadVerticalScaling`.
    pub in_place: kruise_inplace::DiffOptions,
    /// `status.updatedReadyReplicas` of the update revision.
    pub updated_ready: i32,
}

/// Decides pre-download for the rollout (the caller has checked the gate): once per
/// update revision, after `image-predownload-min-updated-ready-pods` updated Pods are
/// ready, and only for an in-place rollout of more than [`MINIMUM_REPLICAS`] Pods that
/// does not update them all at once and changes images.
pub fn plan(rollout: &Rollout) -> PreDownload {
    let revision = name_of(rollout.update_revision);
    if revision == name_of(rollout.current_revision) {
        return PreDownload::Nothing;
    }
    let labels = rollout.update_revision.metadata.labels.as_ref();
    if labels.is_some_and(|l| {
        l.contains_key(keys::IMAGE_PREDOWNLOAD_CREATED)
            || l.contains_key(keys::IMAGE_PREDOWNLOAD_IGNORED)
    }) {
        return PreDownload::Nothing;
    }
    let annotations = rollout.meta.annotations.clone().unwrap_or_default();
    let replicas = rollout.replicas;
    let field = |get: fn(&InPlaceUpdateStrategy) -> Option<i32>| rollout.strategy.and_then(get);
    let min_ready = field(|s| s.image_pre_download_min_updated_ready_pods)
        .or_else(|| {
            let v = annotations.get(keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS)?;
            intstr::scaled_value(&parse_int_or_percent(v), replicas, Rounding::Up).ok()
        })
        .unwrap_or(0);
    if rollout.updated_ready < min_ready {
        return PreDownload::Nothing;
    }
    if let Some(why) = rollout.not_in_place {
        return PreDownload::Ignore(why);
    }
    if replicas <= MINIMUM_REPLICAS {
        return PreDownload::Ignore("replicas <= 3");
    }
    let all_at_once = rollout.max_unavailable.is_some_and(|m| m >= replicas);
    if rollout.partition == 0 && all_at_once {
        return PreDownload::Ignore("every Pod updates at once");
    }
    let data = |r: &ControllerRevision| r.data.as_ref().map(|d| d.0.clone()).unwrap_or(Value::Null);
    let Ok(diff) = kruise_inplace::diff(
        &data(rollout.current_revision),
        &data(rollout.update_revision),
        revision,
        rollout.in_place,
    ) else {
        return PreDownload::Ignore("the update cannot go in place");
    };
    if diff.container_images.is_empty() {
        return PreDownload::Ignore("no image changes");
    }
    PreDownload::Create(jobs(rollout, &annotations, &diff.container_images))
}

/// One job per changed image (`<revision>-<container>`).
fn jobs(
    rollout: &Rollout,
    annotations: &BTreeMap<String, String>,
    images: &BTreeMap<String, String>,
) -> Vec<ImagePullJob> {
    let revision = name_of(rollout.update_revision);
    let hash = rollout.revision_hash.clone();
    let template_meta = rollout.template.metadata.clone().unwrap_or_default();
    let mut job_labels = template_meta.labels.clone().unwrap_or_default();
    job_labels.insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), hash.clone());
    let mut pod_selector = rollout.selector.clone();
    pod_selector
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: keys::CONTROLLER_REVISION_HASH.into(),
            operator: "NotIn".into(),
            values: Some(vec![revision.to_string(), hash]),
        });
    let positive = |key: &str, default: i32| {
        annotations
            .get(key)
            .and_then(|v| v.trim().parse::<i32>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    // A field is taken as written, as upstream's CloneSet controller does (its webhook
    // refuses a negative or percent value).
    let strategy = rollout.strategy;
    let parallelism = strategy
        .and_then(|s| s.image_pre_download_parallelism.clone())
        .unwrap_or_else(|| IntOrString::Int(positive(keys::IMAGE_PREDOWNLOAD_PARALLELISM, 1)));
    let timeout = strategy
        .and_then(|s| s.image_pre_download_timeout_seconds)
        .unwrap_or_else(|| positive(keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS, 300));
    let pull_secrets: Vec<String> = rollout
        .template
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.name)
        .collect();
    images
        .iter()
        .map(|(container, image)| ImagePullJob {
            metadata: ObjectMeta {
                name: Some(format!("{revision}-{container}")),
                namespace: rollout.meta.namespace.clone(),
                labels: Some(job_labels.clone()),
                owner_references: Some(vec![rollout.owner.clone()]),
                ..Default::default()
            },
            spec: ImagePullJobSpec {
                image: image.clone(),
                template: ImagePullJobTemplate {
                    pull_secrets: pull_secrets.clone(),
                    pod_selector: Some(pod_selector.clone()),
                    parallelism: Some(parallelism.clone()),
                    pull_policy: Some(PullPolicy {
                        backoff_limit: Some(1),
                        timeout_seconds: Some(timeout),
                    }),
                    completion_policy: ImagePullJobCompletionPolicy {
                        type_: Some(ImagePullJobCompletionPolicyType::Always),
                        ttl_seconds_after_finished: Some(600),
                        ..Default::default()
                    },
                    sandbox_config: Some(SandboxConfig {
                        labels: template_meta.labels.clone().unwrap_or_default(),
                        annotations: template_meta.annotations.clone().unwrap_or_default(),
                    }),
                    ..Default::default()
                },
            },
            status: None,
        })
        .collect()
}

fn parse_int_or_percent(v: &str) -> IntOrString {
    v.trim()
        .parse::<i32>()
        .map(IntOrString::Int)
        .unwrap_or_else(|_| IntOrString::String(v.trim().to_string()))
}

/// The workload [`apply`] acts for.
#[derive(Clone, Copy, Debug)]
pub struct Workload<'a> {
    /// The workload as its events regard it; its namespace is the jobs'.
    pub reference: &'a ObjectReference,
    pub uid: &'a str,
    /// Its Pod selector, which also finds its jobs (they carry the template's labels).
    pub selector: &'a LabelSelector,
    /// The update revision's name.
    pub update_revision: &'a str,
    /// The rollout finished this round ([`rollout_finished`]): its jobs are deleted.
    pub finished: bool,
}

/// Whether the rollout finished this round: `(currentRevision, updateRevision)` of the
/// status converged now and had not before.
pub fn rollout_finished(previous: (&str, &str), next: (&str, &str)) -> bool {
    next.0 == next.1 && previous.0 != previous.1
}

/// Carries out `outcome`: creates the jobs (an existing one is kept), each reported as
/// event `CreatedImagePullJob` (or `FailedCreateImagePullJob`, which also ends the
/// call with the error), and labels the update revision so the decision is taken once.
/// When the rollout has finished, deletes the workload's jobs: they have done their work.
pub async fn apply(
    client: &Client,
    events: &Events,
    workload: &Workload<'_>,
    outcome: PreDownload,
) -> Result<(), kube::Error> {
    let owner = workload.reference;
    let ns = owner.namespace.as_deref().unwrap_or_default();
    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), ns);
    let label_revision = |key: &'static str| async move {
        let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
        let patch = json!({"metadata": {"labels": {key: "true"}}});
        revisions
            .patch(
                workload.update_revision,
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
    };
    match outcome {
        PreDownload::Nothing => {}
        PreDownload::Ignore(why) => {
            tracing::debug!(
                kind = owner.kind.as_deref().unwrap_or_default(),
                name = owner.name.as_deref().unwrap_or_default(),
                why,
                "no image pre-download for this rollout"
            );
            label_revision(keys::IMAGE_PREDOWNLOAD_IGNORED).await?;
        }
        PreDownload::Create(list) => {
            for job in list {
                let name = job.name_any();
                match jobs.create(&PostParams::default(), &job).await {
                    Ok(_) => events.normal(
                        owner,
                        keys::EVENT_CREATED_IMAGE_PULL_JOB,
                        format!("created ImagePullJob {name} for image: {}", job.spec.image),
                    ),
                    Err(e) if is_conflict(&e) => {}
                    Err(e) => {
                        events.normal(
                            owner,
                            keys::EVENT_FAILED_CREATE_IMAGE_PULL_JOB,
                            format!("failed to create ImagePullJob {name}: {e}"),
                        );
                        return Err(e);
                    }
                }
            }
            label_revision(keys::IMAGE_PREDOWNLOAD_CREATED).await?;
        }
    }
    if workload.finished {
        let selector = kruise_ordering::selector::format_selector(workload.selector);
        for job in jobs
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
        {
            if job.owner_references().iter().any(|o| o.uid == workload.uid) {
                let _ = jobs.delete(&job.name_any(), &DeleteParams::default()).await;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, LocalObjectReference, PodSpec};
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                annotations: Some([("note".to_string(), "kept".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                image_pull_secrets: Some(vec![LocalObjectReference {
                    name: "registry".into(),
                }]),
                ..Default::default()
            }),
        }
    }

    fn revision(name: &str, image: &str) -> ControllerRevision {
        let data = crate::revision::revision_data(&serde_json::to_value(template(image)).unwrap());
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(RawExtension(data)),
            revision: 1,
        }
    }

    struct Case {
        meta: ObjectMeta,
        strategy: Option<InPlaceUpdateStrategy>,
        selector: LabelSelector,
        template: PodTemplateSpec,
        current: ControllerRevision,
        update: ControllerRevision,
    }

    impl Case {
        fn new() -> Self {
            Case {
                meta: ObjectMeta {
                    namespace: Some("ns".into()),
                    ..Default::default()
                },
                strategy: None,
                selector: LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                },
                template: template("app:2"),
                current: revision("web-old", "app:1"),
                update: revision("web-new", "app:2"),
            }
        }

        fn rollout(&self) -> Rollout<'_> {
            Rollout {
                owner: OwnerReference {
                    kind: "Web".into(),
                    name: "web".into(),
                    uid: "uid".into(),
                    controller: Some(true),
                    ..Default::default()
                },
                meta: &self.meta,
                strategy: self.strategy.as_ref(),
                selector: &self.selector,
                template: &self.template,
                replicas: 10,
                partition: 0,
                max_unavailable: Some(1),
                not_in_place: None,
                current_revision: &self.current,
                update_revision: &self.update,
                revision_hash: "new".into(),
                in_place: Default::default(),
                updated_ready: 0,
            }
        }
    }

    #[test]
    fn a_job_carries_the_template_the_owner_and_the_defaults() {
        let case = Case::new();
        let PreDownload::Create(jobs) = plan(&case.rollout()) else {
            panic!("expected jobs")
        };
        let [job] = &jobs[..] else { panic!("{jobs:?}") };
        assert_eq!(job.metadata.name.as_deref(), Some("web-new-main"));
        assert_eq!(job.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            job.metadata.labels.as_ref().unwrap()[keys::CONTROLLER_REVISION_HASH_LABEL],
            "new"
        );
        assert_eq!(job.metadata.labels.as_ref().unwrap()["app"], "web");
        assert_eq!(
            job.metadata.owner_references.as_ref().unwrap()[0].uid,
            "uid"
        );
        let t = &job.spec.template;
        assert_eq!(job.spec.image, "app:2");
        assert_eq!(t.pull_secrets, ["registry"]);
        assert_eq!(t.parallelism, Some(IntOrString::Int(1)));
        let pull = t.pull_policy.as_ref().unwrap();
        assert_eq!(
            (pull.backoff_limit, pull.timeout_seconds),
            (Some(1), Some(300))
        );
        assert_eq!(t.completion_policy.ttl_seconds_after_finished, Some(600));
        let sandbox = t.sandbox_config.as_ref().unwrap();
        assert_eq!(sandbox.annotations["note"], "kept");
        let selector = t.pod_selector.as_ref().unwrap();
        assert_eq!(selector.match_labels, case.selector.match_labels);
        let expr = &selector.match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (expr.key.as_str(), expr.operator.as_str()),
            (keys::CONTROLLER_REVISION_HASH, "NotIn")
        );
        assert_eq!(expr.values.as_deref().unwrap(), ["web-new", "new"]);
    }

    #[test]
    fn annotations_tune_parallelism_and_timeout_and_bad_values_are_ignored() {
        let mut case = Case::new();
        case.meta.annotations = Some(
            [
                (
                    keys::IMAGE_PREDOWNLOAD_PARALLELISM.to_string(),
                    " 4 ".to_string(),
                ),
                (
                    keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS.to_string(),
                    "-1".to_string(),
                ),
            ]
            .into(),
        );
        let PreDownload::Create(jobs) = plan(&case.rollout()) else {
            panic!("expected jobs")
        };
        let t = &jobs[0].spec.template;
        assert_eq!(t.parallelism, Some(IntOrString::Int(4)));
        assert_eq!(t.pull_policy.as_ref().unwrap().timeout_seconds, Some(300));
    }

    /// Each `imagePreDownload*` field that is set wins over its annotation, 0 included
    /// (upstream's CloneSet controller reads the fields alone; the annotations are what its
    /// v1alpha1 conversion turns into them).
    #[test]
    fn fields_win_over_the_annotations() {
        let mut case = Case::new();
        case.meta.annotations = Some(
            [
                (keys::IMAGE_PREDOWNLOAD_PARALLELISM, "4"),
                (keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS, "30"),
                (keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS, "3"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
        );
        assert_eq!(plan(&case.rollout()), PreDownload::Nothing, "3 ready first");
        case.strategy = Some(InPlaceUpdateStrategy {
            image_pre_download_parallelism: Some(IntOrString::Int(0)),
            image_pre_download_timeout_seconds: Some(60),
            image_pre_download_min_updated_ready_pods: Some(0),
            ..Default::default()
        });
        let PreDownload::Create(jobs) = plan(&case.rollout()) else {
            panic!("expected jobs")
        };
        let t = &jobs[0].spec.template;
        assert_eq!(t.parallelism, Some(IntOrString::Int(0)));
        assert_eq!(t.pull_policy.as_ref().unwrap().timeout_seconds, Some(60));

        // A field left out: its annotation still counts.
        case.strategy = Some(InPlaceUpdateStrategy {
            image_pre_download_timeout_seconds: Some(60),
            ..Default::default()
        });
        let mut rollout = case.rollout();
        assert_eq!(plan(&rollout), PreDownload::Nothing);
        rollout.updated_ready = 3;
        let PreDownload::Create(jobs) = plan(&rollout) else {
            panic!("expected jobs")
        };
        let t = &jobs[0].spec.template;
        assert_eq!(t.parallelism, Some(IntOrString::Int(4)));
        assert_eq!(t.pull_policy.as_ref().unwrap().timeout_seconds, Some(60));
    }

    #[test]
    fn skips_in_upstream_order() {
        let case = Case::new();
        let with = |f: &dyn Fn(&mut Rollout)| {
            let mut r = case.rollout();
            f(&mut r);
            plan(&r)
        };
        assert_eq!(
            with(&|r| {
                r.not_in_place = Some("recreates");
                r.replicas = 2;
            }),
            PreDownload::Ignore("recreates"),
            "the strategy first"
        );
        assert_eq!(
            with(&|r| r.replicas = 3),
            PreDownload::Ignore("replicas <= 3")
        );
        assert_eq!(
            with(&|r| r.max_unavailable = Some(10)),
            PreDownload::Ignore("every Pod updates at once")
        );
        assert!(matches!(
            with(&|r| {
                r.max_unavailable = Some(10);
                r.partition = 1;
            }),
            PreDownload::Create(_)
        ));
        assert!(matches!(
            with(&|r| r.max_unavailable = None),
            PreDownload::Create(_)
        ));
        assert_eq!(
            with(&|r| r.current_revision = r.update_revision),
            PreDownload::Nothing,
            "no rollout"
        );
    }

    #[test]
    fn no_image_change_or_a_change_that_cannot_go_in_place_is_ignored() {
        let mut case = Case::new();
        case.current = revision("web-old", "app:2");
        assert_eq!(
            plan(&case.rollout()),
            PreDownload::Ignore("no image changes")
        );
        let mut case = Case::new();
        let mut t = template("app:2");
        t.spec.as_mut().unwrap().containers[0].args = Some(vec!["--new".into()]);
        case.update.data = Some(RawExtension(crate::revision::revision_data(
            &serde_json::to_value(t).unwrap(),
        )));
        assert_eq!(
            plan(&case.rollout()),
            PreDownload::Ignore("the update cannot go in place")
        );
    }

    #[test]
    fn decided_revisions_and_too_few_ready_pods_mean_nothing() {
        let mut case = Case::new();
        case.meta.annotations = Some(
            [(
                keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS.to_string(),
                "3".to_string(),
            )]
            .into(),
        );
        let mut rollout = case.rollout();
        rollout.updated_ready = 2;
        assert_eq!(plan(&rollout), PreDownload::Nothing);
        rollout.updated_ready = 3;
        assert!(matches!(plan(&rollout), PreDownload::Create(_)));
        for key in [
            keys::IMAGE_PREDOWNLOAD_CREATED,
            keys::IMAGE_PREDOWNLOAD_IGNORED,
        ] {
            let mut case = Case::new();
            case.update.metadata.labels = Some([(key.to_string(), "true".to_string())].into());
            assert_eq!(plan(&case.rollout()), PreDownload::Nothing, "{key}");
        }
    }

    #[test]
    fn finished_only_on_the_round_the_status_converges() {
        assert!(rollout_finished(("a", "b"), ("b", "b")));
        assert!(!rollout_finished(("b", "b"), ("b", "b")));
        assert!(!rollout_finished(("a", "b"), ("a", "b")));
    }
}
