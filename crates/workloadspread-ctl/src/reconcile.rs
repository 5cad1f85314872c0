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
use crate::wakes::{self, Seen, WorkloadSeen};
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

/// Maps a change of a target workload to the WorkloadSpreads targeting it: every change
/// with the eager option, else upstream's (see [`crate::wakes`]).
fn workload_trigger<W>(
    ctx: &Context,
    cache: &kruise_runtime::Cache<W>,
    api_version: &'static str,
    kind: &'static str,
    seen_of: fn(&W) -> WorkloadSeen,
) -> impl Fn(Arc<W>) -> Vec<ObjectRef<WorkloadSpread>> + Send + Sync + 'static
where
    W: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let (wss, store, eager) = (
        ctx.wss.store().clone(),
        cache.store().clone(),
        ctx.eager_deletion_cost,
    );
    let seen: Arc<Seen<String, WorkloadSeen>> = Arc::default();
    move |o: Arc<W>| {
        let meta = o.meta();
        if !eager {
            let alive = store.get(&ObjectRef::from_obj(o.as_ref())).is_some();
            let uid = meta.uid.clone().unwrap_or_default();
            let now = alive.then(|| seen_of(&o));
            let before = seen.swap(&uid, now.clone(), store.len(), |u| {
                store
                    .state()
                    .iter()
                    .any(|w| w.meta().uid.as_deref() == Some(u))
            });
            if !wakes::workload_wakes(before.as_ref(), now.as_ref()) {
                return Vec::new();
            }
        }
        targeting(&wss, meta, api_version, kind)
    }
}

/// The controller: a WorkloadSpread is reconciled when it changes, when one of its Pods
/// changes, and when its target workload changes (its replicas resolve percentages):
/// with upstream's triggers by default, every change with the eager option ([`wakes`]).
pub async fn run(ctx: Arc<Context>, workers: u16) {
    let r = &ctx.reconciler;
    let (pod_wss, pod_rss, pods, eager) = (
        ctx.wss.store().clone(),
        ctx.replicasets.store().clone(),
        ctx.pods.store().clone(),
        ctx.eager_deletion_cost,
    );
    let pods_seen: Arc<Seen<String, wakes::PodSeen>> = Arc::default();
    let by_pod = move |p: Arc<Pod>| {
        if eager {
            return ws_of_pod(&pod_wss, &pod_rss, &p);
        }
        // Upstream: only a Pod the webhook put in a subset, on its creation, deletion,
        // inactivity or new version.
        let m = plan::matched(&p)?;
        let alive = pods.get(&ObjectRef::from_obj(p.as_ref())).is_some();
        let now = alive.then(|| wakes::pod_seen(&p));
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let before = pods_seen.swap(&uid, now.clone(), pods.len(), |u| {
            pods.state()
                .iter()
                .any(|q| q.metadata.uid.as_deref() == Some(u))
        });
        wakes::pod_wakes(before.as_ref(), now.as_ref()).then(|| {
            ObjectRef::new(&m.name).within(p.metadata.namespace.as_deref().unwrap_or_default())
        })
    };
    let c = r
        .controller(&ctx.wss, workers)
        .watches_shared_stream(ctx.pods.subscribe(), by_pod)
        .watches_shared_stream(
            ctx.clonesets.subscribe(),
            workload_trigger(
                &ctx,
                &ctx.clonesets,
                "apps.kruise.io/v1alpha1",
                "CloneSet",
                |o| {
                    let status = o.status.as_ref();
                    WorkloadSeen {
                        replicas: o.spec.replicas.unwrap_or(1),
                        update_revision: status.map(|s| s.update_revision.clone()),
                        current_revision: status.map(|s| s.current_revision.clone()),
                    }
                },
            ),
        )
        .watches_shared_stream(
            ctx.deployments.subscribe(),
            workload_trigger(&ctx, &ctx.deployments, "apps/v1", "Deployment", |o| {
                let revision = o
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(workload::DEPLOYMENT_REVISION))
                    .cloned();
                WorkloadSeen {
                    replicas: o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    update_revision: revision.clone(),
                    current_revision: revision,
                }
            }),
        )
        .watches_shared_stream(
            ctx.replicasets.subscribe(),
            workload_trigger(&ctx, &ctx.replicasets, "apps/v1", "ReplicaSet", |o| {
                WorkloadSeen {
                    replicas: o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    ..Default::default()
                }
            }),
        )
        .watches_shared_stream(
            ctx.jobs.subscribe(),
            workload_trigger(&ctx, &ctx.jobs, "batch/v1", "Job", |o| WorkloadSeen {
                replicas: o.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1),
                ..Default::default()
            }),
        )
        .watches_shared_stream(
            ctx.statefulsets.subscribe(),
            workload_trigger(&ctx, &ctx.statefulsets, "apps/v1", "StatefulSet", |o| {
                WorkloadSeen {
                    replicas: o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    ..Default::default()
                }
            }),
        )
        .watches_shared_stream(
            ctx.advanced.subscribe(),
            workload_trigger(
                &ctx,
                &ctx.advanced,
                "apps.kruise.io/v1beta1",
                "StatefulSet",
                |o| WorkloadSeen {
                    replicas: o.spec.replicas.unwrap_or(1),
                    ..Default::default()
                },
            ),
        );
    // Upstream reconciles the moment it is woken (controller-runtime has no debounce):
    // a CloneSet scaled out is reconciled before its new Pods exist, and those no subset
    // takes get no cost until the next trigger. Our 50 ms debounce would let cloneset-ctl
    // create them first, so by default there is none.
    let c = if eager {
        c
    } else {
        c.with_config(
            kube::runtime::controller::Config::default()
                .concurrency(workers)
                .debounce(Duration::ZERO),
        )
    };
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
