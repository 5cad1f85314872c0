//! One reconcile: read the request and its Pod from the caches, ask [`crate::plan`], carry
//! out its writes in order. Decides nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::ContainerRecreateRequest;
use kruise_api::keys;
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::Context;
use crate::error::Result;
use crate::plan::{self, Action};

pub async fn reconcile(crr: Arc<ContainerRecreateRequest>, ctx: Arc<Context>) -> Result<Requeue> {
    let namespace = crr.namespace().unwrap_or_default();
    let pod = ctx
        .pods
        .store()
        .get(&ObjectRef::<Pod>::new(&crr.spec.pod_name).within(&namespace));
    let now = jiff::Timestamp::now();
    let decided = plan::plan(&crr, pod.as_deref(), now);
    let crrs: Api<ContainerRecreateRequest> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = crr.name_any();
    // Each write of the request moves its resourceVersion; the guarded writes use the latest.
    let mut resource_version = crr.resource_version();
    for action in decided.actions {
        tracing::debug!(crr = %name, ?action, "carrying out");
        match action {
            Action::PatchPodStatus(patch) => {
                pods.patch_status(
                    &crr.spec.pod_name,
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .await?;
            }
            Action::SetFinalizers(finalizers) => {
                // With the resourceVersion: a finalizer list read from a stale cache must
                // not overwrite a newer one.
                let patch = json!({"metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": resource_version,
                }});
                let written = crrs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await;
                match fresh(written)? {
                    Some(rv) => resource_version = rv,
                    None => return Ok(Requeue::await_change()),
                }
            }
            Action::RemoveActiveLabel => {
                let patch = json!({"metadata": {"labels": {keys::CRR_ACTIVE: null}}});
                resource_version = crrs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?
                    .resource_version();
            }
            Action::Delete => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: crr.meta().uid.clone(),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                match crrs.delete(&name, &params).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(e.into()),
                }
                tracing::info!(crr = %name, "deleted: ttlSecondsAfterFinished has passed");
            }
            Action::Complete { message, states } => {
                let mut status = json!({
                    "phase": "Completed",
                    "completionTime": kruise_lifecycle::format_timestamp(now),
                    "message": message,
                });
                if let Some(states) = states {
                    status["containerRecreateStates"] = json!(states);
                }
                // With the resourceVersion: the agent may have completed it meanwhile.
                let patch = json!({
                    "metadata": {"resourceVersion": resource_version},
                    "status": status,
                });
                let written = crrs
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await;
                match fresh(written)? {
                    Some(rv) => resource_version = rv,
                    None => return Ok(Requeue::await_change()),
                }
                tracing::info!(crr = %name, %message, "completed");
            }
            Action::SyncContainerStatuses(synced) => {
                let patch = json!({"metadata": {"annotations": {keys::CRR_SYNC_CONTAINER_STATUSES: synced}}});
                resource_version = crrs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?
                    .resource_version();
            }
            Action::AnnotateUnreadyAcquired(at) => {
                // With the resourceVersion: the annotation is immutable once set (the
                // webhook refuses a second value with a 403), and a decision read from a
                // cache that has not seen our first write would try exactly that.
                let patch = json!({"metadata": {
                    "annotations": {keys::CRR_UNREADY_ACQUIRED: at},
                    "resourceVersion": resource_version,
                }});
                let written = crrs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await;
                match fresh(written)? {
                    Some(rv) => resource_version = rv,
                    None => return Ok(Requeue::await_change()),
                }
            }
        }
    }
    Ok(match decided.requeue_after {
        Some(after) => Requeue::requeue(after),
        None => Requeue::await_change(),
    })
}

/// The new resourceVersion of a guarded write, or `None` when it lost to a newer version
/// of the request (409): the round was decided from a stale cache, and the watch brings
/// the newer version, which is decided again.
fn fresh(written: kube::Result<ContainerRecreateRequest>) -> Result<Option<Option<String>>> {
    match written {
        Ok(crr) => Ok(Some(crr.resource_version())),
        Err(e) if is_conflict(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
