//! The Advanced StatefulSet controller (`apps.kruise.io/v1beta1` StatefulSet): `run()`
//! builds the caches, the webhook and the controller, and serves until shutdown.
//! Everything it decides is in [`plan`] (pure); [`reconcile`] reads the caches and hands
//! the plan to the shared executor (`kruise_workload::Writer`).

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps_v1beta1::StatefulSet;
use kruise_api::keys;
use kruise_runtime::cache::prune_metadata;
use kruise_runtime::{Cache, Reconciler, Runtime, Tolerant, gates};
use kruise_workload::{PodControl, Writer};
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};
use crate::plan::Options;

/// What every reconcile shares: the caches, the writer, options, bookkeeping.
pub struct Context {
    pub client: kube::Client,
    pub sets: Cache<StatefulSet>,
    pub pods: Cache<Pod>,
    pub pvcs: Cache<PersistentVolumeClaim>,
    pub revisions: Cache<ControllerRevision>,
    pub writer: Writer,
    pub options: Options,
    pub reconciler: Reconciler,
}

/// The controller's options from the feature gates.
pub fn options(runtime: &Runtime) -> Options {
    let g = &runtime.gates;
    Options {
        env_from_metadata: g.enabled(gates::IN_PLACE_UPDATE_ENV_FROM_METADATA),
        start_ordinal: g.enabled(gates::STATEFULSET_START_ORDINAL),
        auto_delete_pvc: g.enabled(gates::STATEFULSET_AUTO_DELETE_PVC),
        pod_index_label: g.enabled(gates::POD_INDEX_LABEL),
        predownload: g.enabled(gates::PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE),
    }
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let sets = Cache::spawn_tolerant(
        runtime.scoped_api::<Tolerant<StatefulSet>>(),
        watcher::Config::default(),
        |s: &mut StatefulSet| prune_metadata(&mut s.metadata),
        runtime.readiness.register("cache statefulsets"),
    );
    // Every StatefulSet Pod carries its identity label; nothing else is watched.
    let pods = Cache::spawn(
        runtime.scoped_api::<Pod>(),
        watcher::Config::default().labels(keys::STATEFULSET_POD_NAME),
        |p: &mut Pod| prune_metadata(&mut p.metadata),
        runtime.readiness.register("cache pods"),
    );
    // Claims are found by name (`<template>-<set>-<ordinal>`): by default they have no
    // owner and no label of ours.
    let pvcs = Cache::spawn(
        runtime.scoped_api::<PersistentVolumeClaim>(),
        watcher::Config::default(),
        |c: &mut PersistentVolumeClaim| {
            prune_metadata(&mut c.metadata);
            c.metadata.annotations = None;
        },
        runtime.readiness.register("cache persistentvolumeclaims"),
    );
    let revisions = Cache::spawn(
        runtime.scoped_api::<ControllerRevision>(),
        watcher::Config::default(),
        |r: &mut ControllerRevision| prune_metadata(&mut r.metadata),
        runtime.readiness.register("cache controllerrevisions"),
    );
    Arc::new(Context {
        client: runtime.client.clone(),
        sets,
        pods,
        pvcs,
        revisions,
        writer: Writer::new(
            PodControl::new(
                runtime.client.clone(),
                runtime.events(),
                runtime.metrics.clone(),
                CONTROLLER_NAME,
            )
            .with_messages(events::StatefulSetMessages),
        ),
        options: options(runtime),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "StatefulSet"),
    })
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes(
        runtime.gates.enabled(gates::RESOURCES_DELETION_PROTECTION),
        !runtime.gates.enabled(gates::TEMPLATE_NO_DEFAULTS),
    );
    let configurations = webhook::configurations(runtime.settings.watch_namespace.as_deref());
    let workers = runtime.settings.workers;
    runtime
        .serve_with_webhooks(routes, configurations, || controller(ctx.clone(), workers))
        .await?;
    Ok(())
}

/// One controller run over the shared caches.
pub async fn controller(ctx: Arc<Context>, workers: u16) {
    let r = &ctx.reconciler;
    r.controller(&ctx.sets, workers)
        .watches_shared_stream(ctx.pods.subscribe(), r.owner_of::<StatefulSet, Pod>())
        .run(reconcile::reconcile, reconcile::error_policy, ctx.clone())
        .for_each(|_| async {})
        .await;
}
