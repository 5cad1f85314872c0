//! One reconcile: read the children from the caches, plan, write status, delete what the
//! plan says (history, Replace), create the tick's child. It decides nothing itself.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use kruise_api::apps_v1alpha1::{AdvancedCronJob, BroadcastJob, ImageListPullJob, TemplateKind};
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::plan::{
    Child, NewChild, Skip, World, broadcastjob_child, imagelistpulljob_child, job_child, plan,
};

/// Runs inside `Reconciler::run` (span, metrics, backoff).
pub async fn reconcile(cron: Arc<AdvancedCronJob>, ctx: Arc<Context>) -> Result<Action> {
    let (cron, ctx) = (cron.as_ref(), ctx.as_ref());
    let missing = || Error::MissingObjectKey(cron.name_any());
    let ns = cron.namespace().ok_or_else(missing)?;
    let uid = cron.uid().ok_or_else(missing)?;
    if cron.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let children: Vec<Child> = match cron.spec.template.kind() {
        Some(TemplateKind::Job) => ctx
            .jobs
            .owned_by(&uid)
            .iter()
            .map(|j| job_child(j))
            .collect(),
        Some(TemplateKind::BroadcastJob) => ctx
            .broadcastjobs
            .owned_by(&uid)
            .iter()
            .map(|j| broadcastjob_child(j))
            .collect(),
        Some(TemplateKind::ImageListPullJob) => ctx
            .imagelistpulljobs
            .owned_by(&uid)
            .iter()
            .map(|j| imagelistpulljob_child(j))
            .collect(),
        None => Vec::new(),
    };
    let outcome = plan(&World {
        cron,
        children,
        now: jiff::Timestamp::now(),
    });
    let api: Api<AdvancedCronJob> = Api::namespaced(ctx.client.clone(), &ns);
    if cron.status.as_ref() != Some(&outcome.status) {
        kruise_runtime::apply_status(&api, cron, &outcome.status, CONTROLLER_NAME).await?;
    }
    for child in &outcome.delete {
        delete_child(ctx, &ns, child).await;
    }
    match &outcome.skip {
        Some(Skip::TooManyMissed) => tracing::warn!("{}", crate::plan::TOO_MANY_MISSED),
        Some(Skip::BadSchedule(e)) => tracing::warn!(error = %e, "unparseable schedule"),
        Some(skip) => tracing::debug!(?skip, "no run this round"),
        None => {}
    }
    if let Some(child) = outcome.create {
        let name = child.name();
        let created = match child {
            NewChild::Job(job) => Api::<Job>::namespaced(ctx.client.clone(), &ns)
                .create(&PostParams::default(), &job)
                .await
                .map(drop),
            NewChild::BroadcastJob(job) => Api::<BroadcastJob>::namespaced(ctx.client.clone(), &ns)
                .create(&PostParams::default(), &job)
                .await
                .map(drop),
            NewChild::ImageListPullJob(job) => {
                Api::<ImageListPullJob>::namespaced(ctx.client.clone(), &ns)
                    .create(&PostParams::default(), &job)
                    .await
                    .map(drop)
            }
        };
        match created {
            Ok(()) => tracing::info!(child = %name, "created the tick's child"),
            // The name is the tick's: it exists, so this tick already ran.
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(outcome
        .requeue_after
        .map_or_else(Action::await_change, Action::requeue))
}

/// Deletes a child with background propagation; errors are only logged (as upstream's
/// `reconcileJob`).
async fn delete_child(ctx: &Context, ns: &str, child: &ObjectReference) {
    let name = child.name.as_deref().unwrap_or_default();
    let params = DeleteParams::background();
    let result = match child.kind.as_deref() {
        Some("Job") => Api::<Job>::namespaced(ctx.client.clone(), ns)
            .delete(name, &params)
            .await
            .map(drop),
        Some("ImageListPullJob") => Api::<ImageListPullJob>::namespaced(ctx.client.clone(), ns)
            .delete(name, &params)
            .await
            .map(drop),
        _ => Api::<BroadcastJob>::namespaced(ctx.client.clone(), ns)
            .delete(name, &params)
            .await
            .map(drop),
    };
    match result {
        Ok(()) => tracing::info!(child = %name, "deleted"),
        Err(e) if is_not_found(&e) => {}
        Err(e) => tracing::warn!(child = %name, error = %e, "could not delete"),
    }
}
