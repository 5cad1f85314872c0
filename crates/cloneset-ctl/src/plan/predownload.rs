//! Gate `PreDownloadImageForInPlaceUpdate` (docs/feature-gates.md; openkruise/kruise v1.9.0
//! pkg/controller/cloneset/cloneset_predownload_image.go): before Pods are updated in place, an
//! ImagePullJob pre-pulls each new image on the nodes of the Pods still at the old revision, so the
//! in-place restart does not wait for the pull. The decision is `kruise_workload::predownload`'s;
//! this maps the CloneSet into it.

use kruise_api::intstr::{self, Rounding};
use kruise_workload::arithmetic;
use kruise_workload::predownload::{self, Rollout};
use kruise_workload::revision::short_hash;

pub use kruise_workload::predownload::PreDownload;

use super::World;
use super::pods::owner_reference;

/// `updated_ready`: `status.updatedReadyReplicas` as last computed.
pub fn plan_predownload(world: &World, enabled: bool, updated_ready: i32) -> PreDownload {
    if !enabled {
        return PreDownload::Nothing;
    }
    let cs = world.cs;
    let strategy = &cs.spec.update_strategy;
    let replicas = world.replicas();
    // Pre-download serves in-place updates only (OnDelete updates nothing itself).
    let recreates = !strategy.strategy_type().is_in_place();
    predownload::plan(&Rollout {
        owner: owner_reference(world),
        meta: &cs.metadata,
        strategy: strategy.in_place_update_strategy.as_ref(),
        selector: &cs.spec.selector,
        template: &cs.spec.template,
        replicas,
        partition: arithmetic::partition_replicas(strategy.partition.as_ref(), replicas)
            .unwrap_or(0),
        max_unavailable: intstr::scaled_value_or(
            strategy.max_unavailable.as_ref(),
            &arithmetic::default_max_unavailable(),
            replicas,
            Rounding::Down,
        )
        .ok(),
        not_in_place: recreates.then_some("ReCreate updates pull on the new Pod anyway"),
        current_revision: world.current_revision,
        update_revision: world.update_revision,
        revision_hash: short_hash(world.update_revision_name()).to_string(),
        in_place: world.options.in_place,
        updated_ready,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType as T;
    use kruise_api::keys;
    use kruise_workload::testing::assert_one_pull_job;

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
        let job = assert_one_pull_job(
            plan_predownload(&f.world(), true, 0),
            "cs-new-nginx",
            "nginx:1.7.9",
            5,
            ["cs-new", "new"],
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

    #[test]
    fn the_in_place_strategy_fields_win_over_the_annotations() {
        let mut f = fixture(4);
        f.cs.spec.update_strategy.in_place_update_strategy =
            Some(kruise_api::appspub::InPlaceUpdateStrategy {
                image_pre_download_parallelism: Some(
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2),
                ),
                image_pre_download_timeout_seconds: Some(45),
                ..Default::default()
            });
        let job = assert_one_pull_job(
            plan_predownload(&f.world(), true, 0),
            "cs-new-nginx",
            "nginx:1.7.9",
            2,
            ["cs-new", "new"],
        );
        assert_eq!(
            job.spec
                .template
                .pull_policy
                .as_ref()
                .unwrap()
                .timeout_seconds,
            Some(45)
        );
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
