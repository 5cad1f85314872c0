//! The CloneSet controller: `run()` builds the caches, the webhook and the controller,
//! and serves until shutdown. Everything it decides is in [`plan`] (pure); [`reconcile`]
//! and [`execute`] are the thin I/O around it.

pub mod context;
pub mod error;
pub mod events;
pub mod execute;
pub mod plan;
pub mod reconcile;
pub mod revisions;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_runtime::cache::prune_metadata;
use kruise_runtime::{Backoff, Cache, Instruments, Runtime, Tolerant, WebhookServer, gates};
use kruise_workload::{Expectations, PodControl};
use kube::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::context::Context;
pub use crate::events::CONTROLLER_NAME;
use crate::plan::Options;

/// The controller's options from the feature gates.
pub fn options(runtime: &Runtime) -> Options {
    let g = &runtime.gates;
    Options {
        partition_rollback: g.enabled(gates::CLONESET_PARTITION_ROLLBACK),
        short_hash: g.enabled(gates::CLONESET_SHORT_HASH),
        env_from_metadata: g.enabled(gates::IN_PLACE_UPDATE_ENV_FROM_METADATA),
        preparing_update_as_update: g.enabled(gates::PREPARING_UPDATE_AS_UPDATE),
        exclude_preparing_delete: false,
        predownload: g.enabled(gates::PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE),
        recreate_on_vct_change: g.enabled(gates::RECREATE_POD_WHEN_CHANGE_VCT_IN_CLONESET_GATE),
    }
}

fn api<K>(runtime: &Runtime) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match &runtime.settings.watch_namespace {
        Some(ns) => Api::namespaced(runtime.client.clone(), ns),
        None => Api::all(runtime.client.clone()),
    }
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let owned_pods = watcher::Config::default().labels(keys::CLONESET_INSTANCE_ID);
    let clonesets = Cache::spawn_tolerant(
        api::<Tolerant<CloneSet>>(runtime),
        watcher::Config::default(),
        |cs: &mut CloneSet| prune_metadata(&mut cs.metadata),
        runtime.readiness.register("cache clonesets"),
    );
    let pods = Cache::spawn(
        api::<Pod>(runtime),
        owned_pods.clone(),
        |p: &mut Pod| prune_metadata(&mut p.metadata),
        runtime.readiness.register("cache pods"),
    );
    let pvcs = Cache::spawn(
        api::<PersistentVolumeClaim>(runtime),
        owned_pods,
        |c: &mut PersistentVolumeClaim| prune_metadata(&mut c.metadata),
        runtime.readiness.register("cache persistentvolumeclaims"),
    );
    let revisions = Cache::spawn(
        api::<ControllerRevision>(runtime),
        watcher::Config::default(),
        |r: &mut ControllerRevision| prune_metadata(&mut r.metadata),
        runtime.readiness.register("cache controllerrevisions"),
    );
    Arc::new(Context {
        client: runtime.client.clone(),
        clonesets,
        pods,
        pvcs,
        revisions,
        control: PodControl::new(
            runtime.client.clone(),
            runtime.events(),
            runtime.metrics.clone(),
            CONTROLLER_NAME,
        ),
        pod_expectations: Expectations::new(kruise_workload::expectations::DEFAULT_TIMEOUT),
        pvc_expectations: Expectations::new(kruise_workload::expectations::DEFAULT_TIMEOUT),
        options: options(runtime),
        instruments: Instruments::new(runtime.metrics.clone(), CONTROLLER_NAME),
        backoff: Backoff::default(),
    })
}

/// Runs the controller until shutdown: caches stay warm on every replica; only the lease
/// holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    // Every replica serves admission, leader or not.
    let deletion_protection = runtime.gates.enabled(gates::RESOURCES_DELETION_PROTECTION);
    let server = WebhookServer::start(
        &runtime,
        webhook::routes(
            ctx.pods.clone(),
            deletion_protection,
            !runtime.gates.enabled(gates::TEMPLATE_NO_DEFAULTS),
        ),
    )
    .await?;
    let scope = runtime.settings.watch_namespace.clone();
    let (validating, mutating) = webhook::configurations(scope.as_deref());
    let registrable =
        runtime.settings.webhook_url.is_some() || runtime.settings.webhook_service.is_some();
    if registrable {
        server
            .register(validating.clone(), mutating.clone())
            .await?;
    } else {
        tracing::warn!(
            "KRUISE_WEBHOOK_URL and KRUISE_WEBHOOK_SERVICE unset: webhook configurations not registered"
        );
    }
    let workers = runtime.settings.workers;
    runtime
        .run_while_leader(|| {
            let ctx = ctx.clone();
            async move { controller(ctx, workers).await }
        })
        .await?;
    // A namespace-scoped instance (tests, namespaced installs) cleans up its own
    // configurations; a cluster-wide one leaves them for the next replica.
    if registrable && scope.is_some() {
        remove_configurations(&runtime, &validating, &mutating).await;
    }
    Ok(())
}

async fn remove_configurations(
    runtime: &Runtime,
    validating: &[ValidatingWebhookConfiguration],
    mutating: &[MutatingWebhookConfiguration],
) {
    let dp = kube::api::DeleteParams::default();
    let v: Api<ValidatingWebhookConfiguration> = Api::all(runtime.client.clone());
    for c in validating {
        let _ = v
            .delete(c.metadata.name.as_deref().unwrap_or_default(), &dp)
            .await;
    }
    let m: Api<MutatingWebhookConfiguration> = Api::all(runtime.client.clone());
    for c in mutating {
        let _ = m
            .delete(c.metadata.name.as_deref().unwrap_or_default(), &dp)
            .await;
    }
}

/// One controller run over the shared caches.
pub async fn controller(ctx: Arc<Context>, workers: u16) {
    let instruments = ctx.instruments.clone();
    let on_cloneset = instruments.clone();
    let clonesets = ctx.clonesets.subscribe().inspect(move |cs| {
        on_cloneset.triggered(kruise_runtime::cache::key(cs.as_ref()));
    });
    let pods = ctx.pods.subscribe();
    let config = ControllerConfig::default()
        .concurrency(workers)
        .debounce(Duration::from_millis(50));
    Controller::for_shared_stream(clonesets, ctx.clonesets.store().clone())
        .watches_shared_stream(pods, move |pod: Arc<Pod>| {
            let owner = pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true) && o.kind == "CloneSet")
                .map(|o| {
                    ObjectRef::<CloneSet>::new(&o.name)
                        .within(pod.metadata.namespace.as_deref().unwrap_or_default())
                });
            if let Some(r) = &owner {
                instruments.triggered(format!(
                    "{}/{}",
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name
                ));
            }
            owner
        })
        .with_config(config)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|_| async {})
        .await;
}
