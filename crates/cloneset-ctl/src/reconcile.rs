//! One reconcile: read the world from the caches, plan, execute, write status.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps_v1alpha1::{CloneSet, CloneSetStatus};
use kruise_ordering::predicates::is_active;
use kruise_workload::predownload;
use kruise_workload::{Action as WorkloadAction, Expected, min_duration};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::plan::pods::PvcCleanup;
use crate::plan::predownload::plan_predownload;
use crate::plan::status::{PhaseErrors, compute_status};
use crate::plan::{World, scale, update};
use crate::revisions;

/// How soon to look again while waiting for the cache to show our own writes.
const EXPECTATION_POLL: Duration = Duration::from_millis(500);

pub async fn reconcile(cs: Arc<CloneSet>, ctx: Arc<Context>) -> Result<Action> {
    ctx.reconciler
        .run(cs.as_ref(), reconcile_inner(&cs, &ctx))
        .await
}

pub fn error_policy(cs: Arc<CloneSet>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.reconciler.error_policy(cs.as_ref(), err)
}

async fn reconcile_inner(cs: &CloneSet, ctx: &Context) -> Result<Action> {
    let ns = cs
        .namespace()
        .ok_or_else(|| Error::MissingObjectKey(cs.name_any()))?;
    let uid = cs
        .uid()
        .ok_or_else(|| Error::MissingObjectKey(cs.name_any()))?;
    if cs.meta().deletion_timestamp.is_some() {
        ctx.writer.forget(&uid);
        return Ok(Action::await_change());
    }

    // Wait until the cache shows what we did last round (spec 4.1.2).
    let now = jiff::Timestamp::now();
    if !ctx
        .writer
        .caches_caught_up(&uid, &ns, &ctx.pods, &ctx.pvcs, now)
    {
        return Ok(Action::requeue(EXPECTATION_POLL));
    }

    let owned = ctx.pods.owned_by(&uid);
    let mut pvcs: Vec<Arc<PersistentVolumeClaim>> = ctx
        .pvcs
        .owned_by(&uid)
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .collect();
    if cs.spec.scale_strategy.disable_pvc_reuse {
        let handled = cleanup_pvcs(ctx, cs, &uid, &owned, &pvcs).await?;
        pvcs.retain(|c| !handled.contains(&c.name_any()));
    }
    let selector = &cs.spec.selector;
    let (matching, released): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
        owned.into_iter().filter(|p| is_active(p)).partition(|p| {
            kruise_ordering::selector::matches(
                selector,
                p.metadata.labels.as_ref().unwrap_or(&Default::default()),
            )
            .unwrap_or(false)
        });
    let owner = cs.object_ref(&());
    if !released.is_empty() {
        let releases = released
            .iter()
            .map(|pod| WorkloadAction::Release { pod })
            .collect();
        ctx.writer.execute(&owner, &uid, releases).await?;
    }

    let revisions = revisions::sync(&ctx.client, cs, ctx.revisions.owned_by(&uid)).await?;
    let world = World {
        cs,
        pods: matching.iter().map(|p| p.as_ref()).collect(),
        pvcs: pvcs.iter().map(|c| c.as_ref()).collect(),
        current_revision: &revisions.current,
        update_revision: &revisions.update,
        revisions: revisions.all.iter().collect(),
        options: ctx.options,
        now,
    };

    let mut errors = PhaseErrors::default();
    let mut ids = random_ids();
    let scale_plan = scale::plan_scale(&world, &mut ids);
    let mut requeue = scale_plan.requeue_after;
    let mut exec_error = None;
    if !scale_plan.errors.is_empty() {
        errors.scale = Some(scale_plan.errors.join("; "));
    }
    if scale_plan.changes_something() || !scale_plan.warnings.is_empty() {
        let changed = scale_plan.changes_something();
        if let Err(e) = ctx.writer.carry_out(&owner, &uid, scale_plan).await {
            errors.scale = Some(e.to_string());
            exec_error = Some(Error::from(e));
        }
        if changed {
            return finish(ctx, cs, &world, &revisions, errors, requeue, exec_error).await;
        }
    }
    let update_plan = update::plan_update(&world);
    requeue = min_duration(requeue, update_plan.requeue_after);
    if !update_plan.errors.is_empty() {
        errors.update = Some(update_plan.errors.join("; "));
    }
    if let Err(e) = ctx.writer.carry_out(&owner, &uid, update_plan).await {
        errors.update = Some(e.to_string());
        exec_error = Some(Error::from(e));
    }
    finish(ctx, cs, &world, &revisions, errors, requeue, exec_error).await
}

/// Status, `podsToDelete` pruning, history; then when to come back.
async fn finish(
    ctx: &Context,
    cs: &CloneSet,
    world: &World<'_>,
    revisions: &revisions::Revisions,
    errors: PhaseErrors,
    requeue: Option<Duration>,
    exec_error: Option<Error>,
) -> Result<Action> {
    let previous = cs.status.clone().unwrap_or_default();
    let (status, progress_requeue) =
        compute_status(world, &previous, revisions.collision_count, &errors);
    if status != previous {
        write_status(ctx, cs, &status).await?;
    }
    if ctx.options.predownload {
        predownload(ctx, cs, world, &previous, &status).await?;
    }
    prune_pods_to_delete(ctx, cs, world).await?;
    revisions::truncate_history(&ctx.client, cs, revisions, &world.pods).await?;
    if let Some(e) = exec_error {
        return Err(e);
    }
    let mut requeue = min_duration(requeue, progress_requeue);
    // Pods becoming available after minReadySeconds produce no event: look again then.
    if cs.spec.min_ready_seconds > 0 && status.available_replicas != status.ready_replicas {
        requeue = min_duration(
            requeue,
            Some(Duration::from_secs(cs.spec.min_ready_seconds as u64)),
        );
    }
    Ok(requeue
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

async fn write_status(ctx: &Context, cs: &CloneSet, status: &CloneSetStatus) -> Result<()> {
    let api: Api<CloneSet> =
        Api::namespaced(ctx.client.clone(), &cs.namespace().unwrap_or_default());
    kruise_runtime::apply_status(&api, cs, status, CONTROLLER_NAME).await?;
    Ok(())
}

/// Spec 4.9: create the rollout's ImagePullJobs once, and remove them when it is done.
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

/// Spec 4.5.9: names in `podsToDelete` that match no active owned Pod are removed.
async fn prune_pods_to_delete(ctx: &Context, cs: &CloneSet, world: &World<'_>) -> Result<()> {
    let listed = &cs.spec.scale_strategy.pods_to_delete;
    if listed.is_empty() {
        return Ok(());
    }
    let kept: Vec<&String> = listed
        .iter()
        .filter(|n| {
            world
                .pods
                .iter()
                .any(|p| p.metadata.name.as_ref() == Some(*n))
        })
        .collect();
    if kept.len() == listed.len() {
        return Ok(());
    }
    let api: Api<CloneSet> =
        Api::namespaced(ctx.client.clone(), &cs.namespace().unwrap_or_default());
    let patch = json!({
        "metadata": {"resourceVersion": cs.resource_version()},
        "spec": {"scaleStrategy": {"podsToDelete": kept}},
    });
    api.patch(
        &cs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}

/// Spec 4.3.6, `disablePVCReuse`: PVCs no active Pod uses go to their terminating Pod
/// (collected with it) or are deleted. Returns the names of the PVCs handled, which this
/// round no longer counts as the CloneSet's.
async fn cleanup_pvcs(
    ctx: &Context,
    cs: &CloneSet,
    uid: &str,
    owned_pods: &[Arc<Pod>],
    pvcs: &[Arc<PersistentVolumeClaim>],
) -> Result<Vec<String>> {
    let pods: Vec<&Pod> = owned_pods.iter().map(AsRef::as_ref).collect();
    let claims: Vec<&PersistentVolumeClaim> = pvcs.iter().map(AsRef::as_ref).collect();
    let plan = crate::plan::pods::pvc_cleanup(cs, &pods, &claims);
    if plan.is_empty() {
        return Ok(Vec::new());
    }
    let owner = cs.object_ref(&());
    let now = jiff::Timestamp::now();
    let mut handled = Vec::new();
    for step in plan {
        let name = step.pvc().name_any();
        match step {
            PvcCleanup::HandToPod { pvc, pod } => {
                let patch = crate::plan::pods::hand_to_pod_patch(pvc, uid, pod);
                if let Some(rv) = ctx.writer.control.patch_pvc(&owner, pvc, &patch).await? {
                    ctx.writer.pvcs.expect(
                        uid,
                        Expected::Updated {
                            name: name.clone(),
                            resource_version: rv,
                        },
                        now,
                    );
                }
                tracing::info!(cloneset = %cs.name_any(), pvc = %name, pod = %pod.name_any(), "PVC handed to its terminating Pod");
            }
            PvcCleanup::Delete { pvc } => {
                ctx.writer
                    .pvcs
                    .expect(uid, Expected::Deleted(name.clone()), now);
                if let Err(e) = ctx.writer.control.delete_pvc(&owner, pvc).await {
                    ctx.writer
                        .pvcs
                        .forget_one(uid, &Expected::Deleted(name.clone()));
                    return Err(e.into());
                }
            }
        }
        handled.push(name);
    }
    Ok(handled)
}

/// Random 5-character instance ids from the safe alphabet (spec 4.3.1).
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
