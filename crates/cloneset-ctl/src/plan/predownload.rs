//! Spec 4.9, gate `PreDownloadImageForInPlaceUpdate`: before Pods are updated in place,
//! an ImagePullJob pre-pulls each new image on the nodes of the Pods still at the old
//! revision, so the in-place restart does not wait for the pull.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    CloneSetUpdateStrategyType, ImagePullJob, ImagePullJobCompletionPolicy,
    ImagePullJobCompletionPolicyType, ImagePullJobSpec, ImagePullJobTemplate, PullPolicy,
    SandboxConfig,
};
use kruise_api::intstr::{self, Rounding};
use kruise_api::keys;
use kruise_workload::arithmetic;
use kruise_workload::revision::short_hash;
use serde_json::Value;

use super::pods::owner_reference;
use super::{World, template_labels};

/// What to do about pre-download for the update revision.
#[derive(Clone, Debug, PartialEq)]
pub enum PreDownload {
    /// Nothing now (gate off, no rollout, already decided, or waiting for ready Pods).
    Nothing,
    /// Pre-download does not apply to this rollout: label the revision `ignored`.
    Ignore(&'static str),
    /// Create these jobs, then label the revision `created`.
    Create(Vec<ImagePullJob>),
}

/// `updated_ready`: `status.updatedReadyReplicas` as last computed.
pub fn plan_predownload(world: &World, enabled: bool, updated_ready: i32) -> PreDownload {
    if !enabled || world.update_revision_name() == world.current_revision_name() {
        return PreDownload::Nothing;
    }
    let labels = world.update_revision.metadata.labels.as_ref();
    if labels.is_some_and(|l| {
        l.contains_key(keys::IMAGE_PREDOWNLOAD_CREATED)
            || l.contains_key(keys::IMAGE_PREDOWNLOAD_IGNORED)
    }) {
        return PreDownload::Nothing;
    }
    let cs = world.cs;
    let annotations = cs.metadata.annotations.clone().unwrap_or_default();
    let replicas = world.replicas();
    let min_ready = annotations
        .get(keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS)
        .map(|v| parse_int_or_percent(v))
        .and_then(|v| intstr::scaled_value(&v, replicas, Rounding::Up).ok())
        .unwrap_or(0);
    if updated_ready < min_ready {
        return PreDownload::Nothing;
    }
    let strategy = &cs.spec.update_strategy;
    if strategy.strategy_type() == CloneSetUpdateStrategyType::ReCreate {
        return PreDownload::Ignore("ReCreate updates pull on the new Pod anyway");
    }
    if replicas <= 3 {
        return PreDownload::Ignore("replicas <= 3");
    }
    let partition =
        arithmetic::partition_replicas(strategy.partition.as_ref(), replicas).unwrap_or(0);
    let max_unavailable = intstr::scaled_value_or(
        strategy.max_unavailable.as_ref(),
        &arithmetic::default_max_unavailable(),
        replicas,
        Rounding::Down,
    )
    .unwrap_or(0);
    if partition == 0 && max_unavailable >= replicas {
        return PreDownload::Ignore("every Pod updates at once");
    }
    let data = |r: &k8s_openapi::api::apps::v1::ControllerRevision| {
        r.data.as_ref().map(|d| d.0.clone()).unwrap_or(Value::Null)
    };
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
    let hash = short_hash(revision).to_string();
    let mut job_labels = template_labels(cs);
    job_labels.insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), hash.clone());
    let mut pod_selector = cs.spec.selector.clone();
    pod_selector
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: keys::CONTROLLER_REVISION_HASH.into(),
            operator: "NotIn".into(),
            values: Some(vec![revision.to_string(), hash]),
        });
    let parallelism = annotations
        .get(keys::IMAGE_PREDOWNLOAD_PARALLELISM)
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(1);
    let timeout = annotations
        .get(keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS)
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(300);
    let template = cs.spec.template.clone();
    let pull_secrets: Vec<String> = template
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.name)
        .collect();
    let meta = template.metadata.clone().unwrap_or_default();
    let jobs = diff
        .container_images
        .iter()
        .map(|(container, image)| ImagePullJob {
            metadata: ObjectMeta {
                name: Some(format!("{revision}-{container}")),
                namespace: cs.metadata.namespace.clone(),
                labels: Some(job_labels.clone()),
                owner_references: Some(vec![owner_reference(world)]),
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
                        labels: meta.labels.clone().unwrap_or_default(),
                        annotations: meta.annotations.clone().unwrap_or_default(),
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
    use kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType as T;

    fn fixture(replicas: i32) -> Fixture {
        let mut f = Fixture::new(replicas);
        f.cs.spec.update_strategy.type_ = Some(T::InPlaceIfPossible);
        f.cs.metadata.annotations = Some(
            [(
                keys::IMAGE_PREDOWNLOAD_PARALLELISM.to_string(),
                "5".to_string(),
            )]
            .into(),
        );
        f
    }

    #[test]
    fn creates_one_job_per_changed_image_with_the_annotated_parallelism() {
        let f = fixture(4);
        match plan_predownload(&f.world(), true, 0) {
            PreDownload::Create(jobs) => {
                assert_eq!(jobs.len(), 1);
                let job = &jobs[0];
                assert_eq!(job.metadata.name.as_deref(), Some("cs-new-nginx"));
                assert_eq!(job.spec.image, "nginx:1.7.9");
                assert_eq!(job.spec.template.parallelism, Some(IntOrString::Int(5)));
                let sel = job.spec.template.pod_selector.as_ref().unwrap();
                let expr = &sel.match_expressions.as_ref().unwrap()[0];
                assert_eq!(
                    (expr.operator.as_str(), expr.values.clone().unwrap()),
                    ("NotIn", vec!["cs-new".to_string(), "new".to_string()])
                );
                assert_eq!(
                    job.spec
                        .template
                        .pull_policy
                        .as_ref()
                        .unwrap()
                        .timeout_seconds,
                    Some(300)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn small_or_recreate_or_all_at_once_rollouts_are_ignored() {
        assert!(matches!(
            plan_predownload(&fixture(3).world(), true, 0),
            PreDownload::Ignore(_)
        ));
        let mut f = fixture(4);
        f.cs.spec.update_strategy.type_ = Some(T::ReCreate);
        assert!(matches!(
            plan_predownload(&f.world(), true, 0),
            PreDownload::Ignore(_)
        ));
        let mut f = fixture(4);
        f.cs.spec.update_strategy.max_unavailable = Some(string("100%"));
        assert!(matches!(
            plan_predownload(&f.world(), true, 0),
            PreDownload::Ignore(_)
        ));
        assert_eq!(
            plan_predownload(&fixture(4).world(), false, 0),
            PreDownload::Nothing,
            "gate off"
        );
        assert_eq!(
            plan_predownload(&fixture(4).settled().world(), true, 0),
            PreDownload::Nothing,
            "no rollout"
        );
    }

    #[test]
    fn waits_for_the_minimum_updated_ready_pods() {
        let mut f = fixture(10);
        f.cs.metadata.annotations.as_mut().unwrap().insert(
            keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS.into(),
            "20%".into(),
        );
        assert_eq!(plan_predownload(&f.world(), true, 1), PreDownload::Nothing);
        assert!(matches!(
            plan_predownload(&f.world(), true, 2),
            PreDownload::Create(_)
        ));
    }
}
