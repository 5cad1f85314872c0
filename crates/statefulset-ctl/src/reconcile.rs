//! One reconcile: read the world from the caches, sync revisions, plan, hand the plan to
//! the shared executor, write status, pre-download images (under the gate), prune
//! history. It decides nothing itself.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kruise_api::apps_v1beta1::{StatefulSet, VolumeClaimUpdateStrategyType};
use kruise_api::pod::Pod;
use kruise_workload::history::{self, RevisionSource};
use kruise_workload::predownload;
use kruise_workload::revision::revision_data;
use kruise_workload::{Action as WorkloadAction, min_duration};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::Context;
use crate::error::{Error, Result};
use crate::events::{self, CONTROLLER_NAME};
use crate::plan::ordinals::{live_ordinals, orphans_to_adopt, pod_name_for};
use crate::plan::pods::controller_reference;
use crate::plan::predownload::plan_predownload;
use crate::plan::status::{PhaseErrors, compute_status};
use crate::plan::{World, plan};

/// When to look again after adopting orphans, should their update events not arrive.
const ADOPTED_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs inside `Reconciler::run` (span, metrics, backoff).
pub async fn reconcile(sts: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action> {
    let (sts, ctx) = (sts.as_ref(), ctx.as_ref());
    let missing = || Error::MissingObjectKey(sts.name_any());
    let ns = sts.namespace().ok_or_else(missing)?;
    let uid = sts.uid().ok_or_else(missing)?;
    // Not while it is being deleted, nor before the caches show what we did last
    // round.
    let now = jiff::Timestamp::now();
    if let Some(later) = ctx.writer.hold_off(sts, &ctx.pods, &ctx.pvcs, now) {
        return Ok(later);
    }

    // Owned Pods that stopped matching the selector are released.
    let owner = sts.object_ref(&());
    let (matching, released): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
        ctx.pods.owned_by(&uid).into_iter().partition(|p| {
            kruise_ordering::selector::matches(
                &sts.spec.selector,
                p.metadata.labels.as_ref().unwrap_or(&Default::default()),
            )
            .unwrap_or(false)
        });
    if !released.is_empty() {
        let releases = released
            .iter()
            .map(|pod| WorkloadAction::Release { pod })
            .collect();
        ctx.writer.execute(&owner, &uid, releases).await?;
    }
    // Orphans named for a live ordinal are adopted first; the next round (the Pods'
    // update events) plans with them, instead of creating Pods that already exist.
    let named: Vec<Arc<Pod>> = live_ordinals(sts, &ctx.options)
        .into_iter()
        .filter_map(|i| {
            let name = pod_name_for(&sts.name_any(), i);
            ctx.pods.store().get(&ObjectRef::new(&name).within(&ns))
        })
        .collect();
    let orphans = orphans_to_adopt(sts, &ctx.options, named.iter().map(AsRef::as_ref));
    if !orphans.is_empty() {
        let controller = controller_reference(sts);
        let adoptions = orphans
            .into_iter()
            .map(|pod| WorkloadAction::Adopt {
                pod,
                controller: controller.clone(),
            })
            .collect();
        ctx.writer.execute(&owner, &uid, adoptions).await?;
        return Ok(Action::requeue(ADOPTED_RECHECK));
    }
    let claims = claims_of(ctx, sts, &ns);

    let status = sts.status.as_ref();
    let revisions = history::sync(
        &ctx.client,
        RevisionSource {
            owner: sts.controller_owner_ref(&()).ok_or_else(missing)?,
            namespace: &ns,
            data: revision_data(&serde_json::to_value(&sts.spec.template)?),
            labels: sts
                .spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default(),
            annotations: sts.annotations().clone(),
            current_revision: status
                .map(|s| s.current_revision.as_str())
                .unwrap_or_default(),
            collision_count: status.and_then(|s| s.collision_count),
            hash_label: None,
        },
        ctx.revisions.owned_by(&uid),
    )
    .await?;
    let storage_classes = storage_classes(ctx, sts).await?;
    let world = World {
        sts,
        pods: matching.iter().map(AsRef::as_ref).collect(),
        pvcs: claims.iter().map(AsRef::as_ref).collect(),
        storage_classes: storage_classes.iter().collect(),
        current_revision: &revisions.current,
        update_revision: &revisions.update,
        revisions: revisions.all.iter().collect(),
        options: ctx.options,
        now,
    };

    let planned = plan(&world);
    let requeue = planned.requeue_after;
    let creates = planned
        .actions
        .iter()
        .any(|a| matches!(a, WorkloadAction::Create { .. }));
    let mut errors = PhaseErrors::default();
    if !planned.errors.is_empty() {
        errors.update = Some(events::failed_update_condition(&planned.errors.join("; ")));
    }
    let executed = ctx.writer.carry_out(&owner, &uid, planned).await;
    if let Err(kube::Error::Api(e)) = &executed
        && e.reason == "AlreadyExists"
    {
        release_uncached(ctx, sts, &ns, &uid, &world.pods).await?;
    }
    if let Err(e) = &executed {
        let message = e.to_string();
        if creates {
            errors.create = Some(events::failed_create_condition(&message));
        } else {
            errors.update = Some(events::failed_update_condition(&message));
        }
    }

    let previous = status.cloned().unwrap_or_default();
    let next = compute_status(
        &world,
        &previous,
        revisions.collision_count.unwrap_or(0),
        &errors,
    );
    if next != previous {
        let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
        kruise_runtime::apply_status(&api, sts, &next, CONTROLLER_NAME).await?;
    }
    if ctx.options.predownload {
        // Image pre-download: the rollout's ImagePullJobs, created once and removed when it is done.
        let workload = predownload::Workload {
            reference: &owner,
            uid: &uid,
            selector: &sts.spec.selector,
            update_revision: world.update_revision_name(),
            finished: predownload::rollout_finished(
                (&previous.current_revision, &previous.update_revision),
                (&next.current_revision, &next.update_revision),
            ),
        };
        let outcome = plan_predownload(&world, next.updated_ready_replicas);
        predownload::apply(&ctx.client, ctx.writer.control.events(), &workload, outcome).await?;
    }
    let limit = sts.spec.revision_history_limit() as usize;
    history::truncate_history(&ctx.client, &ns, &revisions, &world.pods, limit).await?;
    let held = executed?.requeue_after();
    Ok(min_duration(requeue, held).map_or_else(Action::await_change, Action::requeue))
}

/// The Pod cache selects Pods by their identity label, so a Pod of ours whose labels were
/// removed leaves it while keeping its name, and creating it again fails with
/// AlreadyExists. Then each live ordinal the set has no Pod for is read from the API
/// (one GET each, on that error only), and a Pod we control that no longer matches the
/// selector is released, as one still in the cache would have been.
async fn release_uncached(
    ctx: &Context,
    sts: &StatefulSet,
    ns: &str,
    uid: &str,
    pods: &[&Pod],
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let set = sts.name_any();
    let mut stray = Vec::new();
    for ordinal in live_ordinals(sts, &ctx.options) {
        let name = pod_name_for(&set, ordinal);
        if pods
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(&name))
        {
            continue;
        }
        let Some(pod) = api.get_opt(&name).await? else {
            continue;
        };
        let ours = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.uid == uid);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        if ours && !kruise_ordering::selector::matches(&sts.spec.selector, &labels).unwrap_or(false)
        {
            stray.push(pod);
        }
    }
    if !stray.is_empty() {
        let releases = stray
            .iter()
            .map(|pod| WorkloadAction::Release { pod })
            .collect();
        ctx.writer
            .execute(&sts.object_ref(&()), uid, releases)
            .await?;
    }
    Ok(())
}

/// The claims of the set's templates in its namespace: `<template>-<set>-<ordinal>`.
fn claims_of(ctx: &Context, sts: &StatefulSet, ns: &str) -> Vec<Arc<PersistentVolumeClaim>> {
    if sts.spec.volume_claim_templates.is_empty() {
        return Vec::new();
    }
    let set = sts.name_any();
    let prefixes: Vec<String> = sts
        .spec
        .volume_claim_templates
        .iter()
        .map(|t| format!("{}-{set}-", t.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    ctx.pvcs
        .store()
        .state()
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(ns))
        .filter(|c| {
            let name = c.metadata.name.as_deref().unwrap_or_default();
            prefixes.iter().any(|p| {
                name.strip_prefix(p.as_str())
                    .is_some_and(|ordinal| ordinal.parse::<u32>().is_ok())
            })
        })
        .collect()
}

/// The StorageClasses, read only when this set may resize its claims (a
/// claim is only resized if its class allows volume expansion).
async fn storage_classes(ctx: &Context, sts: &StatefulSet) -> Result<Vec<StorageClass>> {
    if !ctx.options.auto_resize_pvc
        || sts.spec.volume_claim_update_strategy.type_
            != Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
        || sts.spec.volume_claim_templates.is_empty()
    {
        return Ok(Vec::new());
    }
    let api: Api<StorageClass> = Api::all(ctx.client.clone());
    Ok(api.list(&Default::default()).await?.items)
}
