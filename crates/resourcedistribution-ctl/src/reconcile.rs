//! One reconcile: read the caches, [`plan`], write the copies (creations and updates in
//! slow-start batches, deletions together), then the status, once, if it changed.

use std::sync::Arc;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::ResourceDistribution;
use kruise_api::keys;
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams, Preconditions};
use kube::discovery::ApiResource;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::Context;
use crate::error::{Error, Result};
use crate::plan::{
    self, Delete, Existing, Failures, NamespaceView, Source, World, Write, compute_status,
};

pub async fn reconcile(rd: Arc<ResourceDistribution>, ctx: Arc<Context>) -> Result<Action> {
    if !ctx.manages(&rd) || rd.meta().deletion_timestamp.is_some() {
        // Being deleted: the garbage collector removes the copies (ownerReferences).
        return Ok(Action::await_change());
    }
    let name = rd.name_any();
    let uid = rd.uid().ok_or_else(|| Error::MissingUid(name.clone()))?;
    let source = Source {
        rd_name: name.clone(),
        rd_uid: uid.clone(),
        resource: rd.spec.resource.clone(),
    };
    let namespaces: Vec<NamespaceView> = ctx
        .namespaces
        .store()
        .state()
        .iter()
        .map(|n| NamespaceView {
            name: n.name_any(),
            labels: n.labels().clone(),
            terminating: n.meta().deletion_timestamp.is_some()
                || n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating"),
        })
        .collect();
    let owned = owned_copies(&ctx, &source, &uid);
    let plan = match plan::plan(&World {
        source: &source,
        targets: &rd.spec.targets,
        namespaces: &namespaces,
        owned: &owned,
    }) {
        Ok(plan) => plan,
        Err(e) => {
            // Admission rejects such a selector; an older object may still hold one.
            // Nothing is written or removed because of a spec we cannot read.
            tracing::warn!(rd = %name, error = ?e, "namespaceLabelSelector is invalid; nothing distributed");
            return Ok(Action::await_change());
        }
    };
    let Some(api_resource) = api_resource(source.kind()) else {
        tracing::warn!(rd = %name, kind = source.kind(), "unsupported resource kind; nothing distributed");
        return Ok(Action::await_change());
    };
    let mut failures = plan.failures.clone();
    write_copies(&ctx, &source, &api_resource, plan.writes, &mut failures).await;
    delete_copies(&ctx, &api_resource, plan.deletes, &mut failures).await;

    let now = Time(jiff::Timestamp::now());
    let generation = rd.meta().generation.unwrap_or_default();
    let status = compute_status(
        rd.status.as_ref(),
        generation,
        &plan.matched,
        &failures,
        &now,
    );
    if rd.status.as_ref() != Some(&status) {
        let api: Api<ResourceDistribution> = Api::all(ctx.client.clone());
        kruise_runtime::apply_status(&api, &rd, &status, crate::CONTROLLER_NAME).await?;
    }
    let retryable = failures.retryable();
    if retryable.is_empty() {
        Ok(Action::await_change())
    } else {
        Err(Error::Distribution {
            failed: retryable.iter().map(|(_, n)| n).sum(),
            summary: retryable
                .iter()
                .map(|(c, n)| format!("{c}: {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// Our copies of the source's kind, from the label-selected cache's owner index.
fn owned_copies(ctx: &Context, source: &Source, uid: &str) -> Vec<Value> {
    fn json<K: serde::Serialize>(objects: Vec<Arc<K>>) -> Vec<Value> {
        objects
            .iter()
            .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
            .collect()
    }
    match source.kind() {
        "Secret" => json(ctx.secrets.owned_by(uid)),
        "ConfigMap" => json(ctx.configmaps.owned_by(uid)),
        _ => Vec::new(),
    }
}

fn api_resource(kind: &str) -> Option<ApiResource> {
    match kind {
        "Secret" => Some(ApiResource::erase::<Secret>(&())),
        "ConfigMap" => Some(ApiResource::erase::<ConfigMap>(&())),
        _ => None,
    }
}

/// Creations and updates in slow-start batches (1, 2, 4, …); after a batch with a
/// failure the rest wait for the retry and are reported under the failure they would
/// have had (their copy was not created or updated).
async fn write_copies(
    ctx: &Context,
    source: &Source,
    api_resource: &ApiResource,
    writes: Vec<Write>,
    failures: &mut Failures,
) {
    let mut pending = writes.into_iter();
    let mut failed_batch = false;
    for size in plan::slow_start_batches(pending.len()) {
        let batch: Vec<Write> = pending.by_ref().take(size).collect();
        if failed_batch {
            for w in batch {
                failures.add(write_failure(&w), w.namespace().to_string());
            }
            continue;
        }
        let results = join_all(
            batch
                .iter()
                .map(|w| write_copy(ctx, source, api_resource, w)),
        )
        .await;
        for (w, result) in batch.iter().zip(results) {
            if let Err(condition) = result {
                failures.add(condition, w.namespace().to_string());
                if condition != keys::RD_CONDITION_CONFLICT_OCCURRED {
                    failed_batch = true;
                }
            }
        }
    }
}

fn write_failure(w: &Write) -> &'static str {
    match w {
        Write::Create { .. } => keys::RD_CONDITION_CREATE_RESOURCE_FAILED,
        Write::Update { .. } => keys::RD_CONDITION_UPDATE_RESOURCE_FAILED,
    }
}

/// One write; the error is the condition type it counts under. A create that finds a
/// same-named object (not in our label-selected cache: someone else's, or ours from
/// before the label) reads it and lets [`Source::judge`] decide.
async fn write_copy(
    ctx: &Context,
    source: &Source,
    api_resource: &ApiResource,
    write: &Write,
) -> Result<(), &'static str> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), write.namespace(), api_resource);
    let as_object = |v: &Value| serde_json::from_value::<DynamicObject>(v.clone());
    match write {
        Write::Update { object, .. } => {
            let object =
                as_object(object).map_err(|_| keys::RD_CONDITION_UPDATE_RESOURCE_FAILED)?;
            replace(&api, source, &object).await
        }
        Write::Create { namespace, object } => {
            let object =
                as_object(object).map_err(|_| keys::RD_CONDITION_CREATE_RESOURCE_FAILED)?;
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => Ok(()),
                Err(e) if is_conflict(&e) => {
                    let existing = api
                        .get_opt(source.name())
                        .await
                        .map_err(|_| keys::RD_CONDITION_GET_RESOURCE_FAILED)?;
                    let Some(existing) = existing else {
                        // Deleted in between: the next round creates it.
                        return Err(keys::RD_CONDITION_CREATE_RESOURCE_FAILED);
                    };
                    let existing = serde_json::to_value(&existing)
                        .map_err(|_| keys::RD_CONDITION_GET_RESOURCE_FAILED)?;
                    match source.judge(&existing) {
                        Existing::Conflict => Err(keys::RD_CONDITION_CONFLICT_OCCURRED),
                        Existing::InSync => Ok(()),
                        Existing::Update(updated) => {
                            let updated = as_object(&updated)
                                .map_err(|_| keys::RD_CONDITION_UPDATE_RESOURCE_FAILED)?;
                            replace(&api, source, &updated).await
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(namespace, error = %e, "creating a copy failed");
                    Err(keys::RD_CONDITION_CREATE_RESOURCE_FAILED)
                }
            }
        }
    }
}

async fn replace(
    api: &Api<DynamicObject>,
    source: &Source,
    object: &DynamicObject,
) -> Result<(), &'static str> {
    api.replace(source.name(), &PostParams::default(), object)
        .await
        .map(|_| ())
        .map_err(|e| {
            tracing::warn!(error = %e, "updating a copy failed");
            keys::RD_CONDITION_UPDATE_RESOURCE_FAILED
        })
}

/// Deletes our copies in namespaces that left the targets, only the very objects seen.
async fn delete_copies(
    ctx: &Context,
    api_resource: &ApiResource,
    deletes: Vec<Delete>,
    failures: &mut Failures,
) {
    let results = join_all(deletes.iter().map(|d| async move {
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &d.namespace, api_resource);
        let params = DeleteParams {
            preconditions: d.uid.clone().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&d.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => {
                tracing::warn!(namespace = %d.namespace, error = %e, "deleting a copy failed");
                Err(())
            }
        }
    }))
    .await;
    for (d, result) in deletes.iter().zip(results) {
        if result.is_err() {
            failures.add(
                keys::RD_CONDITION_DELETE_RESOURCE_FAILED,
                d.namespace.clone(),
            );
        }
    }
}
