//! Spec 4.3.9, gate `PreDownloadImageForInPlaceUpdate`: before Pods are updated in
//! place, an ImagePullJob per changed image pre-pulls it on the nodes of the Pods still
//! at the old revision, as CloneSet does (CloneSet §4.9).

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    ImagePullJob, ImagePullJobCompletionPolicy, ImagePullJobCompletionPolicyType, ImagePullJobSpec,
    ImagePullJobTemplate, PullPolicy, SandboxConfig,
};
use kruise_api::apps_v1beta1::{PodUpdateStrategyType, StatefulSetUpdateStrategyType};
use kruise_api::intstr::{self, Rounding};
use kruise_api::keys;
use kruise_workload::revision::short_hash;
use serde_json::Value;

use super::World;
use super::pods::controller_reference;
use super::update::max_unavailable;

/// Upstream `minimumReplicasToPreDownloadImage`: smaller sets are not worth it.
const MINIMUM_REPLICAS: i32 = 3;

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

/// `updated_ready`: `status.updatedReadyReplicas` of the update revision (0 when the
/// status still describes another one).
pub fn plan_predownload(world: &World, updated_ready: i32) -> PreDownload {
    if !world.options.predownload || world.update_revision_name() == world.current_revision_name() {
        return PreDownload::Nothing;
    }
    let labels = world.update_revision.metadata.labels.as_ref();
    if labels.is_some_and(|l| {
        l.contains_key(keys::IMAGE_PREDOWNLOAD_CREATED)
            || l.contains_key(keys::IMAGE_PREDOWNLOAD_IGNORED)
    }) {
        return PreDownload::Nothing;
    }
    let sts = world.sts;
    let annotations = sts.metadata.annotations.clone().unwrap_or_default();
    let replicas = world.replicas();
    let min_ready = annotations
        .get(keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS)
        .map(|v| parse_int_or_percent(v))
        .and_then(|v| intstr::scaled_value(&v, replicas, Rounding::Up).ok())
        .unwrap_or(0);
    if updated_ready < min_ready {
        return PreDownload::Nothing;
    }
    let strategy = &sts.spec.update_strategy;
    if strategy.strategy_type() == StatefulSetUpdateStrategyType::OnDelete
        || strategy.rolling_update.is_none()
        || strategy.pod_update_policy() == PodUpdateStrategyType::ReCreate
    {
        return PreDownload::Ignore("OnDelete and ReCreate updates pull on the new Pod anyway");
    }
    if replicas <= MINIMUM_REPLICAS {
        return PreDownload::Ignore("replicas <= 3");
    }
    let all_at_once = max_unavailable(world).is_ok_and(|m| m >= replicas);
    if strategy.partition() == 0 && all_at_once {
        return PreDownload::Ignore("every Pod updates at once");
    }
    let data = |r: &ControllerRevision| r.data.as_ref().map(|d| d.0.clone()).unwrap_or(Value::Null);
    let Ok(diff) = kruise_inplace::diff(
        &data(world.current_revision),
        &data(world.update_revision),
        world.update_revision_name(),
        world.options.env_from_metadata,
    ) else {
        return PreDownload::Ignore("the update cannot go in place");
    };
    if diff.container_images.is_empty() {
        return PreDownload::Ignore("no image changes");
    }

    let revision = world.update_revision_name();
    let hash = labels
        .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH_LABEL))
        .cloned()
        .unwrap_or_else(|| short_hash(revision).to_string());
    let template = &sts.spec.template;
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut job_labels = template_meta.labels.clone().unwrap_or_default();
    job_labels.insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), hash.clone());
    let mut pod_selector = sts.spec.selector.clone();
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
    let parallelism = positive(keys::IMAGE_PREDOWNLOAD_PARALLELISM, 1);
    let timeout = positive(keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS, 300);
    let pull_secrets: Vec<String> = template
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.name)
        .collect();
    let jobs = diff
        .container_images
        .iter()
        .map(|(container, image)| ImagePullJob {
            metadata: ObjectMeta {
                name: Some(format!("{revision}-{container}")),
                namespace: sts.metadata.namespace.clone(),
                labels: Some(job_labels.clone()),
                owner_references: Some(vec![controller_reference(sts)]),
                ..Default::default()
            },
            spec: ImagePullJobSpec {
                image: image.clone(),
                template: ImagePullJobTemplate {
                    pull_secrets: pull_secrets.clone(),
                    pod_selector: Some(pod_selector.clone()),
                    parallelism: Some(IntOrString::Int(parallelism)),
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
        .collect();
    PreDownload::Create(jobs)
}

fn parse_int_or_percent(v: &str) -> IntOrString {
    v.trim()
        .parse::<i32>()
        .map(IntOrString::Int)
        .unwrap_or_else(|_| IntOrString::String(v.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use kruise_api::apps_v1beta1::PodManagementPolicyType;

    fn fixture(replicas: i32) -> Fixture {
        let mut f = Fixture::new(replicas);
        f.options.predownload = true;
        f.sts.spec.pod_management_policy = Some(PodManagementPolicyType::Parallel);
        rolling(&mut f).pod_update_policy = Some(PodUpdateStrategyType::InPlaceIfPossible);
        f.sts.metadata.annotations = Some(
            [(
                keys::IMAGE_PREDOWNLOAD_PARALLELISM.to_string(),
                "5".to_string(),
            )]
            .into(),
        );
        f
    }

    #[test]
    fn creates_one_job_per_changed_image() {
        let f = fixture(4);
        let PreDownload::Create(jobs) = plan_predownload(&f.world(), 0) else {
            panic!("expected jobs")
        };
        assert_eq!(jobs.len(), 1);
        let job = &jobs[0];
        assert_eq!(job.metadata.name.as_deref(), Some("web-new-nginx"));
        assert_eq!(job.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(job.spec.image, "nginx:1.7.9");
        assert_eq!(job.spec.template.parallelism, Some(IntOrString::Int(5)));
        let selector = job.spec.template.pod_selector.as_ref().unwrap();
        let expr = &selector.match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (expr.operator.as_str(), expr.values.clone().unwrap()),
            ("NotIn", vec!["web-new".to_string(), "new".to_string()])
        );
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "StatefulSet");
    }

    #[test]
    fn skipped_rollouts_are_labelled_ignored() {
        let ignored =
            |f: &Fixture| matches!(plan_predownload(&f.world(), 0), PreDownload::Ignore(_));
        assert!(ignored(&fixture(3)), "replicas <= 3");
        let mut f = fixture(4);
        rolling(&mut f).pod_update_policy = Some(PodUpdateStrategyType::ReCreate);
        assert!(ignored(&f));
        let mut f = fixture(4);
        f.sts.spec.update_strategy.type_ = Some(StatefulSetUpdateStrategyType::OnDelete);
        assert!(ignored(&f));
        let mut f = fixture(4);
        rolling(&mut f).max_unavailable = Some(IntOrString::Int(4));
        assert!(ignored(&f), "all at once");
        rolling(&mut f).partition = Some(1);
        assert!(!ignored(&f), "a partition keeps some Pods back");
    }

    #[test]
    fn nothing_without_the_gate_a_rollout_or_enough_updated_ready_pods() {
        let mut f = fixture(4);
        f.options.predownload = false;
        assert_eq!(plan_predownload(&f.world(), 0), PreDownload::Nothing);
        let mut f = fixture(4);
        f.current = f.update.clone();
        assert_eq!(plan_predownload(&f.world(), 0), PreDownload::Nothing);
        let mut f = fixture(10);
        f.sts.metadata.annotations.as_mut().unwrap().insert(
            keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS.into(),
            "20%".into(),
        );
        assert_eq!(plan_predownload(&f.world(), 1), PreDownload::Nothing);
        assert!(matches!(
            plan_predownload(&f.world(), 2),
            PreDownload::Create(_)
        ));
        f.update
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(keys::IMAGE_PREDOWNLOAD_CREATED.into(), "true".into());
        assert_eq!(
            plan_predownload(&f.world(), 2),
            PreDownload::Nothing,
            "done once"
        );
    }
}
