//! One reconcile: read the job's Pods and the nodes from the caches, plan, hand the plan
//! to the shared executor, report events, write status, delete a job whose TTL passed.
//! It decides nothing itself.

use std::sync::Arc;

use kruise_api::apps_v1alpha1::BroadcastJob;
use kruise_runtime::api_error::is_not_found;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::plan::{World, plan};

/// Runs inside `Reconciler::run` (span, metrics, backoff).
pub async fn reconcile(job: Arc<BroadcastJob>, ctx: Arc<Context>) -> Result<Action> {
    let (job, ctx) = (job.as_ref(), ctx.as_ref());
    let missing = || Error::MissingObjectKey(job.name_any());
    let ns = job.namespace().ok_or_else(missing)?;
    let uid = job.uid().ok_or_else(missing)?;
    let now = jiff::Timestamp::now();
    if let Some(later) = ctx.writer.hold_off_pods(job, &ctx.pods, now) {
        return Ok(later);
    }
    let pods = ctx.pods.owned_by(&uid);
    let nodes = ctx.nodes.store().state();
    let world = World {
        job,
        pods: pods.iter().map(AsRef::as_ref).collect(),
        nodes: nodes.iter().map(AsRef::as_ref).collect(),
        now,
    };
    let outcome = plan(&world, &mut random_ids());
    let api: Api<BroadcastJob> = Api::namespaced(ctx.client.clone(), &ns);
    if outcome.delete_job {
        tracing::info!("ttlSecondsAfterFinished passed: deleting the job");
        match api
            .delete(&job.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
        ctx.writer.forget(&uid);
        return Ok(Action::await_change());
    }
    let owner = job.object_ref(&());
    let requeue = outcome.plan.requeue_after;
    let executed = ctx.writer.carry_out(&owner, &uid, outcome.plan).await;
    let events = ctx.writer.control.events();
    for (reason, message) in outcome.events {
        events.normal(&owner, reason, message);
    }
    if let Some(next) = outcome.status
        && Some(&next) != job.status.as_ref()
    {
        let written = kruise_runtime::apply_status(&api, job, &next, CONTROLLER_NAME).await?;
        ctx.writer.status_written(&written, now);
    }
    let held = executed?.requeue_after();
    Ok(kruise_workload::min_duration(requeue, held)
        .map_or_else(Action::await_change, Action::requeue))
}

/// Pod name suffixes as `generateName` makes them (`bcj-demo-m4mrw`).
fn random_ids() -> impl Iterator<Item = String> {
    use rand::Rng;
    let alphabet = kruise_workload::revision::SAFE_ALPHABET;
    std::iter::repeat_with(move || {
        let mut rng = rand::rng();
        (0..5)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
            .collect()
    })
}
