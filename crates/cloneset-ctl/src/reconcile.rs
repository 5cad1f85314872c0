//! One reconcile: read the world from the caches, sync revisions, plan, hand the plan to
//! the shared executor, write status, pre-download images (under the gate), write back
//! `podsToDelete`, prune history. It decides nothing itself.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_api::apps_v1alpha1::{CloneSet, CloneSetStatus};
use kruise_api::pod::Pod;
use kruise_workload::{min_duration, predownload};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::plan::predownload::plan_predownload;
use crate::plan::{
    Phase, Round, World, compute_status, managed, plan, plan_update_after_held_scale,
};
use crate::revisions;

/// Runs inside `Reconciler::run` (span, metrics, backoff).
pub async fn reconcile(cs: Arc<CloneSet>, ctx: Arc<Context>) -> Result<Action> {
    let (cs, ctx) = (cs.as_ref(), ctx.as_ref());
    let missing = || Error::MissingObjectKey(cs.name_any());
    let ns = cs.namespace().ok_or_else(missing)?;
    let uid = cs.uid().ok_or_else(missing)?;
    // Not while it is being deleted, nor before the caches show what we did last round (the scale
    // and resource-version expectations of upstream's `doReconcile`, openkruise/kruise v1.9.0
    // pkg/controller/cloneset/cloneset_controller.go).
    let now = jiff::Timestamp::now();
    if let Some(later) = ctx.writer.hold_off(cs, &ctx.pods, &ctx.pvcs, now) {
        return Ok(later);
    }

    let owned = ctx.pods.owned_by(&uid);
    let owned: Vec<&Pod> = owned.iter().map(AsRef::as_ref).collect();
    let pvcs: Vec<Arc<PersistentVolumeClaim>> = ctx
        .pvcs
        .owned_by(&uid)
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .collect();
    let revisions = revisions::sync(&ctx.client, cs, ctx.revisions.owned_by(&uid)).await?;
    let world = World {
        cs,
        pods: managed(cs, &owned),
        owned,
        pvcs: pvcs.iter().map(AsRef::as_ref).collect(),
        current_revision: &revisions.current,
        update_revision: &revisions.update,
        revisions: revisions.all.iter().collect(),
        options: ctx.options,
        now,
    };

    let Round {
        cleanup,
        plan: planned,
        phase,
        mut errors,
        pods_to_delete,
    } = plan(&world, &mut random_ids());
    let owner = cs.object_ref(&());
    ctx.writer.execute(&owner, &uid, cleanup).await?;
    let mut requeue = planned.requeue_after;
    let scale_actions = (phase == Phase::Scale).then_some(planned.actions.len());
    let mut executed = ctx.writer.carry_out(&owner, &uid, planned).await;
    if let Err(e) = &executed {
        errors.failed(phase, e.to_string());
    }
    // Every deletion of the scale phase refused by a PodUnavailableBudget: nothing
    // changed, and the round goes on to the update phase, as upstream's does.
    if let (Some(planned), Ok(done)) = (scale_actions, &executed)
        && planned > done.deferred
        && done.held_by_budget == planned - done.deferred
    {
        let held = done.held_by_budget;
        let (update, update_errors) = plan_update_after_held_scale(&world);
        errors.update = update_errors;
        requeue = min_duration(requeue, update.requeue_after);
        executed = ctx
            .writer
            .carry_out(&owner, &uid, update)
            .await
            .map(|mut done| {
                done.held_by_budget += held;
                done
            });
        if let Err(e) = &executed {
            errors.failed(Phase::Update, e.to_string());
        }
    }

    let previous = cs.status.clone().unwrap_or_default();
    let (status, status_requeue) =
        compute_status(&world, &previous, revisions.collision_count, &errors);
    if status != previous {
        let api: Api<CloneSet> = Api::namespaced(ctx.client.clone(), &ns);
        kruise_runtime::apply_status(&api, cs, &status, CONTROLLER_NAME).await?;
    }
    if ctx.options.predownload {
        predownload(ctx, cs, &world, &previous, &status).await?;
    }
    if let Some(names) = pods_to_delete {
        write_pods_to_delete(ctx, cs, &names).await?;
    }
    revisions::truncate_history(&ctx.client, cs, &revisions, &world.pods).await?;
    let held = executed?.requeue_after();
    Ok(min_duration(min_duration(requeue, status_requeue), held)
        .map_or_else(Action::await_change, Action::requeue))
}

/// Create the rollout's ImagePullJobs once, and remove them when it is done (as
/// `createImagePullJobsForInPlaceUpdate` in openkruise/kruise v1.9.0
/// pkg/controller/cloneset/cloneset_predownload_image.go).
async fn predownload(
    ctx: &Context,
    cs: &CloneSet,
    world: &World<'_>,
    previous: &CloneSetStatus,
    status: &CloneSetStatus,
) -> Result<()> {
    let workload = predownload::Workload {
        reference: &cs.object_ref(&()),
        uid: &cs.uid().unwrap_or_default(),
        selector: &cs.spec.selector,
        update_revision: world.update_revision_name(),
        finished: predownload::rollout_finished(
            (&previous.current_revision, &previous.update_revision),
            (&status.current_revision, &status.update_revision),
        ),
    };
    let outcome = plan_predownload(world, true, status.updated_ready_replicas);
    let events = ctx.writer.control.events();
    predownload::apply(&ctx.client, events, &workload, outcome).await?;
    Ok(())
}

/// Writes `scaleStrategy.podsToDelete` back as the plan pruned it (upstream's
/// `truncatePodsToDelete`), guarded by the resourceVersion the plan saw.
async fn write_pods_to_delete(ctx: &Context, cs: &CloneSet, names: &[String]) -> Result<()> {
    let api: Api<CloneSet> =
        Api::namespaced(ctx.client.clone(), &cs.namespace().unwrap_or_default());
    let patch = json!({
        "metadata": {"resourceVersion": cs.resource_version()},
        "spec": {"scaleStrategy": {"podsToDelete": names}},
    });
    api.patch(
        &cs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}

/// Random 5-character instance ids from the safe alphabet (`getOrGenInstanceID` in
/// openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/cloneset_scale.go, via `rand.String` of
/// k8s.io/apimachinery).
fn random_ids() -> impl Iterator<Item = String> {
    use rand::Rng;
    std::iter::repeat_with(|| {
        let mut rng = rand::rng();
        (0..5)
            .map(|_| {
                let alphabet = kruise_workload::revision::SAFE_ALPHABET;
                alphabet[rng.random_range(0..alphabet.len())] as char
            })
            .collect()
    })
}
