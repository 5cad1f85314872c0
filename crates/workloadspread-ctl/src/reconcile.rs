//! One reconcile of a WorkloadSpread: read the caches, call [`crate::plan::plan`], write
//! the status with its resourceVersion, so a record the webhook added meanwhile is never
//! lost (a conflict means "read again"), then carry out the rest (Pod deletions, metadata
//! patches, events). Counted in `kruise_pod_operations_total`: `deleted_unschedulable`,
//! `patched`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps_v1alpha1::WorkloadSpread;
use kruise_api::keys;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::Context;
use crate::error::{Error, Result, is_conflict, is_not_found};
use crate::events::CONTROLLER_NAME;
use crate::plan::target::TargetKind;
use crate::plan::{self, World};
use crate::{events, workload};

/// After a status write conflict: the cache will show the newer object in a moment.
const AFTER_CONFLICT: Duration = Duration::from_millis(200);
/// How often a WorkloadSpread of a custom workload reads its target again (no cache
/// watches arbitrary kinds; its Pods are watched).
const CUSTOM_RESYNC: Duration = Duration::from_secs(30);

/// The WorkloadSpreads targeting the object `meta` of `api_version`/`kind`.
fn targeting(
    wss: &Store<WorkloadSpread>,
    meta: &ObjectMeta,
    api_version: &str,
    kind: &str,
) -> Vec<ObjectRef<WorkloadSpread>> {
    let name = meta.name.as_deref().unwrap_or_default();
    wss.state()
        .iter()
        .filter(|ws| {
            ws.metadata.namespace == meta.namespace
                && TargetKind::refers_to(&ws.spec.target_ref, api_version, kind, name)
        })
        .map(|ws| ObjectRef::from_obj(ws.as_ref()))
        .collect()
}

/// The WorkloadSpread of a Pod: the one its annotation names, else the one targeting its
/// owner chain.
fn ws_of_pod(
    wss: &Store<WorkloadSpread>,
    replicasets: &Store<k8s_openapi::api::apps::v1::ReplicaSet>,
    pod: &Pod,
) -> Option<ObjectRef<WorkloadSpread>> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    if let Some(m) = plan::matched(pod) {
        return Some(ObjectRef::new(&m.name).within(ns));
    }
    let (chain, _) = workload::owner_chain(pod, replicasets);
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    workload::ws_for_chain(wss, ns, &chain, &labels).map(|ws| ObjectRef::from_obj(ws.as_ref()))
}

/// The controller: a WorkloadSpread is reconciled when it changes, when one of its Pods
/// changes, and when its target workload changes (its replicas resolve percentages).
pub async fn run(ctx: Arc<Context>, workers: u16) {
    let r = &ctx.reconciler;
    let wss = ctx.wss.store().clone();
    let on = |api_version: &'static str, kind: &'static str| {
        let wss = wss.clone();
        move |meta: &ObjectMeta| targeting(&wss, meta, api_version, kind)
    };
    let (cs, dep, rs, job, sts, asts) = (
        on("apps.kruise.io/v1alpha1", "CloneSet"),
        on("apps/v1", "Deployment"),
        on("apps/v1", "ReplicaSet"),
        on("batch/v1", "Job"),
        on("apps/v1", "StatefulSet"),
        on("apps.kruise.io/v1beta1", "StatefulSet"),
    );
    let (pod_wss, pod_rss) = (wss.clone(), ctx.replicasets.store().clone());
    let c = r
        .controller(&ctx.wss, workers)
        .watches_shared_stream(ctx.pods.subscribe(), move |p: Arc<Pod>| {
            ws_of_pod(&pod_wss, &pod_rss, &p)
        })
        .watches_shared_stream(ctx.clonesets.subscribe(), move |o: Arc<_>| {
            cs(&kruise_api::apps_v1alpha1::CloneSet::meta(&o).clone())
        })
        .watches_shared_stream(
            ctx.deployments.subscribe(),
            move |o: Arc<k8s_openapi::api::apps::v1::Deployment>| dep(&o.metadata),
        )
        .watches_shared_stream(
            ctx.replicasets.subscribe(),
            move |o: Arc<k8s_openapi::api::apps::v1::ReplicaSet>| rs(&o.metadata),
        )
        .watches_shared_stream(
            ctx.jobs.subscribe(),
            move |o: Arc<k8s_openapi::api::batch::v1::Job>| job(&o.metadata),
        )
        .watches_shared_stream(
            ctx.statefulsets.subscribe(),
            move |o: Arc<k8s_openapi::api::apps::v1::StatefulSet>| sts(&o.metadata),
        )
        .watches_shared_stream(
            ctx.advanced.subscribe(),
            move |o: Arc<kruise_api::apps_v1beta1::StatefulSet>| asts(&o.metadata),
        );
    r.run_with(c, ctx.clone(), reconcile).await;
}

pub fn object_reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
}

fn pod_reference(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

pub async fn reconcile(ws: Arc<WorkloadSpread>, ctx: Arc<Context>) -> Result<Action> {
    let ws = ws.as_ref();
    let ns = ws
        .namespace()
        .ok_or_else(|| Error::MissingObjectKey(ws.name_any()))?;
    if ws.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let Some(kind) = workload::target_kind(&ctx, ws).await else {
        // Admission refuses such a target (or it left the allowlist); nothing here acts
        // on one. An allowlist may name it later: look again then.
        tracing::warn!(target = ?ws.spec.target_ref, "unsupported target kind; ignored");
        return Ok(Action::requeue(CUSTOM_RESYNC));
    };
    let target = match kind {
        TargetKind::Custom => workload::target_fresh(&ctx, &ns, ws, kind).await,
        _ => workload::target(&ctx, &ns, ws),
    };
    let mut pods = target
        .as_ref()
        .map(|t| workload::pods_of(&ctx, t))
        .unwrap_or_default();
    if let (TargetKind::Custom, Some(t)) = (kind, &target) {
        pods.extend(workload::sub_resource_pods(&ctx, &ns, ws, &t.uid).await);
    }
    let latest = match &target {
        Some(t) if t.kind == TargetKind::Deployment => workload::latest_version(&ctx, &t.uid),
        _ => None,
    };
    let node_objects: Vec<Arc<Node>> = ctx.nodes.store().state();
    let nodes: BTreeMap<String, &Node> = node_objects
        .iter()
        .map(|n| (n.name_any(), n.as_ref()))
        .collect();
    let world = World {
        ws,
        kind,
        replicas: target.as_ref().map_or(0, |t| t.replicas),
        latest_version: latest.as_deref(),
        pods: pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| workload::selected(ws, &p.metadata.labels.clone().unwrap_or_default()))
            .collect(),
        nodes: &nodes,
        now: jiff::Timestamp::now(),
    };
    let planned = plan::plan(&world);
    // The status first: a subset marked unschedulable must be written before its stuck
    // Pods go, or their replacements would be put back in it. A conflict stops the
    // round (nothing is deleted on a status that was not written).
    if ws.status.as_ref() != Some(&planned.status) {
        let mut next = ws.clone();
        next.status = Some(planned.status.clone());
        let api: Api<WorkloadSpread> = Api::namespaced(ctx.client.clone(), &ns);
        match api
            .replace_status(&ws.name_any(), &PostParams::default(), &next)
            .await
        {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => return Ok(Action::requeue(AFTER_CONFLICT)),
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
    }
    let ws_ref = object_reference(ws);
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    for (name, uid) in &planned.deletions {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match pods_api.delete(name, &params).await {
            Ok(_) => {
                ctx.metrics
                    .pod_operation(CONTROLLER_NAME, "deleted_unschedulable");
                tracing::info!(pod = %name, "deleted a Pod stuck unschedulable");
            }
            Err(e) if is_not_found(&e) || is_conflict(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    for patch in &planned.patches {
        let mut metadata = json!({"uid": patch.uid, "annotations": patch.annotations});
        if !patch.labels.is_empty() {
            metadata["labels"] = json!(patch.labels);
        }
        let body = json!({"metadata": metadata});
        match pods_api
            .patch(&patch.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => ctx.metrics.pod_operation(CONTROLLER_NAME, "patched"),
            Err(e) if is_not_found(&e) || is_conflict(&e) => {}
            Err(e) => {
                if patch.annotations.contains_key(keys::POD_DELETION_COST) {
                    ctx.events.warning(
                        &pod_reference(&ns, &patch.name, &patch.uid),
                        keys::EVENT_WS_PATCH_POD_DELETION_COST_FAILED,
                        events::patch_deletion_cost_failed(&patch.name, &e.to_string()),
                    );
                }
                return Err(e.into());
            }
        }
    }
    for e in &planned.events {
        if e.warning {
            ctx.events.warning(&ws_ref, e.reason, e.message.clone());
        } else {
            ctx.events.normal(&ws_ref, e.reason, e.message.clone());
        }
    }
    // A custom workload is not watched: its replicas are read again every CUSTOM_RESYNC.
    let requeue = match (planned.requeue_after, kind) {
        (Some(after), TargetKind::Custom) => Some(after.min(CUSTOM_RESYNC)),
        (None, TargetKind::Custom) => Some(CUSTOM_RESYNC),
        (after, _) => after,
    };
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}
