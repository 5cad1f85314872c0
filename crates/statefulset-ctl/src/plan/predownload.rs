//! Gate `PreDownloadImageForInPlaceUpdate` (upstream `openkruise/kruise v1.9.0
//! pkg/controller/statefulset/statefulset_predownload_image.go`): before Pods are updated in
//! place, an ImagePullJob per changed image pre-pulls it on the nodes of the Pods still
//! at the old revision, as CloneSet does. The decision is
//! `kruise_workload::predownload`'s; this maps the set into it.

use kruise_api::apps_v1beta1::{PodUpdateStrategyType, StatefulSetUpdateStrategyType};
use kruise_api::keys;
use kruise_workload::predownload::{self, Rollout};
use kruise_workload::revision::short_hash;

pub use kruise_workload::predownload::PreDownload;

use super::World;
use super::pods::controller_reference;
use super::update::max_unavailable;

/// `updated_ready`: `status.updatedReadyReplicas` of the update revision (0 when the
/// status still describes another one).
pub fn plan_predownload(world: &World, updated_ready: i32) -> PreDownload {
    if !world.options.predownload {
        return PreDownload::Nothing;
    }
    let sts = world.sts;
    let strategy = &sts.spec.update_strategy;
    let recreates = strategy.strategy_type() == StatefulSetUpdateStrategyType::OnDelete
        || strategy.rolling_update.is_none()
        || strategy.pod_update_policy() == PodUpdateStrategyType::ReCreate;
    let revision = world.update_revision_name();
    let revision_hash = (world.update_revision.metadata.labels.as_ref())
        .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH_LABEL))
        .cloned()
        .unwrap_or_else(|| short_hash(revision).to_string());
    predownload::plan(&Rollout {
        owner: controller_reference(sts),
        meta: &sts.metadata,
        // Upstream's Advanced StatefulSet controller reads only the annotations; the
        // fields (which its CRD stores) are honoured here as for CloneSet.
        strategy: (strategy.rolling_update.as_ref())
            .and_then(|r| r.in_place_update_strategy.as_ref()),
        selector: &sts.spec.selector,
        template: &sts.spec.template,
        replicas: world.replicas(),
        partition: strategy.partition(),
        max_unavailable: max_unavailable(world).ok(),
        not_in_place: recreates
            .then_some("OnDelete and ReCreate updates pull on the new Pod anyway"),
        current_revision: world.current_revision,
        update_revision: world.update_revision,
        revision_hash,
        in_place: world.options.in_place,
        updated_ready,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::apps_v1beta1::PodManagementPolicyType;
    use kruise_workload::testing::assert_one_pull_job;

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
        let job = assert_one_pull_job(
            plan_predownload(&f.world(), 0),
            "web-new-nginx",
            "nginx:1.7.9",
            5,
            ["web-new", "new"],
        );
        assert_eq!(job.metadata.namespace.as_deref(), Some("default"));
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "StatefulSet");
    }

    #[test]
    fn the_in_place_strategy_fields_win_over_the_annotations() {
        let mut f = fixture(10);
        f.sts.metadata.annotations.as_mut().unwrap().insert(
            keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS.into(),
            "5".into(),
        );
        rolling(&mut f).in_place_update_strategy =
            Some(kruise_api::appspub::InPlaceUpdateStrategy {
                image_pre_download_parallelism: Some(IntOrString::Int(3)),
                image_pre_download_min_updated_ready_pods: Some(1),
                ..Default::default()
            });
        assert_eq!(plan_predownload(&f.world(), 0), PreDownload::Nothing);
        assert_one_pull_job(
            plan_predownload(&f.world(), 1),
            "web-new-nginx",
            "nginx:1.7.9",
            3,
            ["web-new", "new"],
        );
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
